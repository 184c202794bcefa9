"""Every setting and environment variable of the local product, in one place.

Settings are read once per process with :func:`load`; tests pass a :class:`Config` explicitly
instead of mutating the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from engram.record import DEFAULT_MAX_CLOCK_DRIFT_MS

DEFAULT_PORT = 7437
DEFAULT_HOST = "127.0.0.1"
#: `engram hub`, the first seed's Hub API, listens where that seed's clients look for it.
DEFAULT_HUB_PORT = 8000


def _int_env(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def _list_env(env: dict[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated setting, blanks dropped."""
    return tuple(item.strip() for item in env.get(name, "").split(",") if item.strip())


def _threshold_env(env: dict[str, str], name: str, default: float) -> float:
    """A setting holding an importance (a number from 0 to 1)."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 1:  # also refuses nan
        raise ValueError(f"{name} must be a number from 0 to 1, got {raw!r}")
    return value


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def parse_duration_ms(name: str, raw: str) -> int:
    """A duration setting: plain seconds (``600``) or with a unit (``90s``, ``10m``, ``1h``,
    ``500ms``)."""
    text = raw.strip().lower()
    number, unit = text, "s"
    for suffix in sorted(_DURATION_UNITS, key=len, reverse=True):
        if text.endswith(suffix):
            number, unit = text[: -len(suffix)].strip(), suffix
            break
    try:
        value = float(number)
    except ValueError:
        raise ValueError(
            f"{name} must be a duration such as 600, 90s, 10m or 1h, got {raw!r}"
        ) from None
    if value < 0:
        raise ValueError(f"{name} cannot be negative, got {raw!r}")
    return int(value * _DURATION_UNITS[unit])


def default_data_dir(env: dict[str, str] | None = None) -> Path:
    """``$ENGRAM_DATA_DIR`` or ``~/.engram``."""
    env = os.environ if env is None else env
    raw = env.get("ENGRAM_DATA_DIR", "").strip()
    if raw:
        return Path(raw).expanduser()
    return Path.home() / ".engram"


@dataclass(frozen=True, slots=True)
class Config:
    """Local settings. Limits follow the reference tool's defaults."""

    data_dir: Path = field(default_factory=default_data_dir)
    max_observation_length: int = 50_000
    max_context_results: int = 20
    max_search_results: int = 20
    default_search_limit: int = 10
    dedupe_window_minutes: int = 15
    #: BM25 weight of the session-context column (0 disables matching through it).
    search_context_weight: float = 0.5
    #: Skip scoring rows that hold only very common query words once the top results cannot
    #: change much (engram/store/ranking.py); False ranks every match exactly (benchmarks).
    search_pruning: bool = True
    #: Purge hard-deleted text from the database files by itself (engram/store/purge.py): the
    #: CLI starts ``engram purge`` in the background after a command that hard-deleted, and
    #: ``serve``/``mcp`` purge ``purge_delay_s`` seconds after the last write.
    auto_purge: bool = True
    purge_delay_s: float = 30.0
    #: Default search mode (lexical, semantic, hybrid); None: hybrid when the semantic extra is
    #: installed, else lexical (``ENGRAM_SEARCH_MODE``).
    search_mode: str | None = None
    #: How long a write waits for another process's transaction before giving up.
    busy_timeout_ms: int = 10_000
    http_host: str = DEFAULT_HOST
    http_port: int = DEFAULT_PORT
    http_token: str | None = None
    #: Host names (or addresses) ``engram serve`` answers besides loopback; ``*`` = any Host.
    http_allowed_hosts: tuple[str, ...] = ()
    #: `engram hub`: its address and the seed's bearer token (ENGRAM_API_TOKEN).
    hub_host: str = DEFAULT_HOST
    hub_port: int = DEFAULT_HUB_PORT
    api_token: str | None = None
    project_override: str | None = None
    #: How far ahead of this machine's clock a replicated record may be before it waits in the
    #: quarantine (``clock_skew``) until real time catches up (ENGRAM_MAX_CLOCK_DRIFT).
    max_clock_drift_ms: int = DEFAULT_MAX_CLOCK_DRIFT_MS
    #: Access counts are logged beside the database and folded into it once the log holds
    #: this many bytes (about 60 bytes a hit), never with a write per search.
    access_fold_bytes: int = 64 * 1024
    #: A memory nobody changed, confirmed or read for this many days needs review
    #: (ENGRAM_REVIEW_AFTER_DAYS; `engram review`).
    review_after_days: int = 90
    #: Consolidation archives memories whose importance is below this (ENGRAM_ARCHIVE_THRESHOLD).
    archive_threshold: float = 0.1
    #: Search orders practically tied results by importance (engram/store/tiebreak.py).
    importance_tiebreak: bool = True
    #: Pinned memories listed first in the context an agent reads (at most this many).
    pinned_context_limit: int = 20

    @property
    def db_path(self) -> Path:
        return self.data_dir / "engram.db"


def load(env: dict[str, str] | None = None) -> Config:
    """Build the configuration from the environment (``os.environ`` by default)."""
    env = dict(os.environ if env is None else env)
    return Config(
        data_dir=default_data_dir(env),
        http_host=env.get("ENGRAM_HOST", "").strip() or DEFAULT_HOST,
        http_port=_int_env(env, "ENGRAM_PORT", DEFAULT_PORT),
        http_token=env.get("ENGRAM_HTTP_TOKEN", "").strip() or None,
        http_allowed_hosts=_list_env(env, "ENGRAM_HTTP_ALLOWED_HOSTS"),
        hub_host=env.get("ENGRAM_HUB_HOST", "").strip() or DEFAULT_HOST,
        hub_port=_int_env(env, "ENGRAM_HUB_PORT", DEFAULT_HUB_PORT),
        api_token=env.get("ENGRAM_API_TOKEN", "").strip() or None,
        project_override=env.get("ENGRAM_PROJECT", "").strip() or None,
        busy_timeout_ms=_int_env(env, "ENGRAM_BUSY_TIMEOUT_MS", 10_000),
        search_mode=env.get("ENGRAM_SEARCH_MODE", "").strip().lower() or None,
        review_after_days=_int_env(env, "ENGRAM_REVIEW_AFTER_DAYS", 90),
        archive_threshold=_threshold_env(env, "ENGRAM_ARCHIVE_THRESHOLD", 0.1),
        max_clock_drift_ms=parse_duration_ms(
            "ENGRAM_MAX_CLOCK_DRIFT", env.get("ENGRAM_MAX_CLOCK_DRIFT", "").strip() or "10m"
        ),
        auto_purge=env.get("ENGRAM_AUTO_PURGE", "").strip().lower() not in ("0", "false", "off"),
        purge_delay_s=parse_duration_ms(
            "ENGRAM_PURGE_DELAY", env.get("ENGRAM_PURGE_DELAY", "").strip() or "30s"
        )
        / 1000,
    )
