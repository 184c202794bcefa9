"""Alembic revisions of the cloud schema, oldest first."""
