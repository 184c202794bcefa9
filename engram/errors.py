"""Exceptions shared by every face of Engram, named after their cause.

The CLI, the MCP tools and the HTTP API translate these into exit codes, tool errors and status
codes; the store raises them so that the rules live in one place.
"""

from __future__ import annotations


class EngramError(Exception):
    """Base of every error Engram raises on purpose."""

    #: HTTP status the local API answers with.
    status_code = 500


class ValidationError(EngramError):
    """The caller's input is wrong (empty title, bad date, unknown mode...)."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class NotFoundError(EngramError):
    """The id or name the caller gave does not exist."""

    status_code = 404


class ConflictError(EngramError):
    """The write contradicts existing data (a session that still has observations...)."""

    status_code = 409


class UnsupportedFormatError(ValidationError):
    """An export, chunk or mutation is in a format or version this Engram cannot read."""


class InvalidMutationError(ValidationError):
    """A replicated mutation record is malformed or names an unknown entity or op."""


class FeatureUnavailableError(ValidationError):
    """The call needs an optional part of Engram that is not installed (the message says how
    to install it)."""


class StoreUnavailableError(EngramError):
    """The database cannot be opened or written (locked, read-only, not a database)."""

    status_code = 503


class ProjectResolutionError(EngramError):
    """The project could not be determined safely (ambiguous directory, unknown name)."""

    status_code = 400

    def __init__(
        self, message: str, *, code: str, available_projects: list[str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.available_projects = available_projects or []
