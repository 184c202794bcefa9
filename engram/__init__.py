"""Engram: persistent memory for AI coding agents.

The local SQLite store (``engram.store``) is the source of truth; the CLI, the MCP server and the
HTTP API are thin faces over it, and ``engram.sync`` replicates its journal through git or the
cloud server.
"""

__version__ = "0.1.0"
