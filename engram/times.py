"""Timestamp formats: the store's UTC text (``YYYY-MM-DD HH:MM:SS``) and user-given dates."""

from __future__ import annotations

from datetime import UTC, datetime

from engram.errors import ValidationError

STORE_FORMAT = "%Y-%m-%d %H:%M:%S"


def now_text() -> str:
    """The current UTC time in the store's format."""
    return datetime.now(UTC).strftime(STORE_FORMAT)


def to_store_text(moment: datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime(STORE_FORMAT)


def parse_store_text(text: str) -> datetime:
    """Parse a stored timestamp (also accepts ``T`` and a trailing ``Z`` or offset)."""
    value = text.strip().replace("Z", "+00:00")
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def store_text_to_ms(text: str) -> int:
    """Milliseconds since the epoch of a stored timestamp (0 when it cannot be parsed)."""
    try:
        return int(parse_store_text(text).timestamp() * 1000)
    except ValueError:
        return 0


def parse_user_date(value: str | None, *, field: str) -> str | None:
    """Validate a ``since``/``until`` filter (``YYYY-MM-DD`` or RFC 3339) into store text.

    Raises :class:`ValidationError` naming ``field`` when the value is not a date.
    """
    if value is None or not str(value).strip():
        return None
    raw = str(value).strip()
    try:
        return to_store_text(parse_store_text(raw))
    except ValueError:
        raise ValidationError(
            f"{field}: invalid date {raw!r} (use YYYY-MM-DD or RFC 3339)", field=field
        ) from None


def rfc3339(moment: datetime | None = None, *, milliseconds: bool = False) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` in UTC (now by default); ``milliseconds`` adds ``.mmm`` (leases
    and backoffs need sub-second precision)."""
    utc = (moment or datetime.now(UTC)).astimezone(UTC)
    if milliseconds:
        return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    return utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso(moment: datetime | None, *, milliseconds: bool = False) -> str | None:
    """:func:`rfc3339` of a moment that may be missing (``None`` stays ``None``)."""
    return None if moment is None else rfc3339(moment, milliseconds=milliseconds)
