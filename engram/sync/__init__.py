"""Replication transports: git chunks under ``.engram/`` and the cloud client with autosync."""
