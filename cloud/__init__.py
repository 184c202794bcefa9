"""Engram's team server (``engram cloud serve``), installed as ``engram_cloud``.

A litestar app on PostgreSQL that stores the mutation log every client pushes, serves it back in
commit order, keeps a searchable read model of sessions, observations and prompts per project,
and enforces tokens, grants, the project allowlist and pause. Importing this package is cheap:
the database stack (SQLAlchemy, psycopg, alembic) loads only with the modules that need it.
"""
