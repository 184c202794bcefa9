"""Alembic history of the cloud server's PostgreSQL schema (shipped as
``engram_cloud.migrations``; run through :mod:`engram_cloud.migrate`)."""
