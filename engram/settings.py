"""Every setting and environment variable of the local program, in one place.

:data:`VARIABLES` lists every variable the local program reads (name, default, meaning); every
module reads one through :func:`raw` (an unlisted name is a programming error), and the table
in docs/settings.md is generated from the list (``python -m engram.settings``; a test checks the
page is current). :class:`Config` holds the settings most faces share, read and validated once
per process with :func:`load`; tests pass a :class:`Config` explicitly instead of mutating the
environment. Variables that only one part reads at a particular moment (autosync timings, the
cloud client's timeout, the TUI theme) are parsed there, from :func:`raw`.

This module is on the CLI's import path: standard library only (no pydantic), so
``engram save`` starts fast. The cloud server's variables are :mod:`engram_cloud.settings`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engram.record import DEFAULT_MAX_CLOCK_DRIFT_MS

DEFAULT_PORT = 7437
DEFAULT_HOST = "127.0.0.1"
#: `engram hub`, the first seed's Hub API, listens where that seed's clients look for it.
DEFAULT_HUB_PORT = 8000


@dataclass(frozen=True, slots=True)
class Variable:
    """One environment variable: its name, its default as a reader sees it, what it does."""

    name: str
    default: str
    meaning: str


VARIABLES: tuple[Variable, ...] = (
    Variable("ENGRAM_DATA_DIR", "~/.engram", "Where the database, bindings and cloud.json live."),
    Variable(
        "ENGRAM_PROJECT", "detected", "The project every command uses instead of detecting it."
    ),
    Variable("ENGRAM_HOST", DEFAULT_HOST, "The address `engram serve` listens on."),
    Variable("ENGRAM_PORT", str(DEFAULT_PORT), "The port `engram serve` listens on."),
    Variable("ENGRAM_HTTP_TOKEN", "none", "The bearer token `engram serve` requires, if any."),
    Variable(
        "ENGRAM_HTTP_ALLOWED_HOSTS",
        "loopback only",
        "Comma list of Host names `engram serve` answers besides loopback (`*` = any).",
    ),
    Variable("ENGRAM_HUB_HOST", DEFAULT_HOST, "The address `engram hub` listens on."),
    Variable("ENGRAM_HUB_PORT", str(DEFAULT_HUB_PORT), "The port `engram hub` listens on."),
    Variable("ENGRAM_API_TOKEN", "none", "The bearer token of `engram hub`'s Hub API."),
    Variable(
        "ENGRAM_BUSY_TIMEOUT_MS",
        "10000",
        "How long a write waits for another process's transaction before giving up.",
    ),
    Variable(
        "ENGRAM_MAX_CLOCK_DRIFT",
        "10m",
        "How far ahead of this clock a received record may be before it waits in the "
        "quarantine (seconds, or 90s/10m/1h).",
    ),
    Variable(
        "ENGRAM_SEARCH_MODE",
        "hybrid with the semantic extra, else lexical",
        "How `search` ranks by default: lexical, semantic or hybrid.",
    ),
    Variable(
        "ENGRAM_AUTO_PURGE",
        "1",
        "`0`: hard-deleted text is purged from the database files only by `engram purge`.",
    ),
    Variable(
        "ENGRAM_PURGE_DELAY",
        "30s",
        "How long `engram serve`/`engram mcp` wait after the last write before purging.",
    ),
    Variable(
        "ENGRAM_REVIEW_AFTER_DAYS",
        "90",
        "A memory nobody changed, confirmed or read for this many days needs review "
        "(`engram review`).",
    ),
    Variable(
        "ENGRAM_ARCHIVE_THRESHOLD",
        "0.1",
        "Consolidation archives memories whose importance is below this (a number from 0 to 1).",
    ),
    Variable("ENGRAM_TUI_THEME", "catppuccin-mocha", "The TUI's colour theme."),
    Variable("ENGRAM_SUMMARIZE_MODEL", "claude-sonnet-4-5", "The model `engram summarize` asks."),
    Variable("ANTHROPIC_API_KEY", "none", "The API key `engram summarize` uses."),
    Variable("ENGRAM_CLOUD_SERVER", "cloud.json", "The team server's URL (overrides cloud.json)."),
    Variable("ENGRAM_CLOUD_TOKEN", "cloud.json", "The team server token (overrides cloud.json)."),
    Variable("ENGRAM_CLOUD_TIMEOUT_S", "30", "Seconds the cloud client waits for an answer."),
    Variable("ENGRAM_CLOUD_SYNC", "0", "`1`: `engram sync` syncs with the cloud (as `--cloud`)."),
    Variable("ENGRAM_CLOUD_AUTOSYNC", "0", "`1`: `engram mcp` runs cloud autosync alongside."),
    Variable(
        "ENGRAM_AUTOSYNC_DEBOUNCE_MS", "500", "Autosync: quiet time after a write before a push."
    ),
    Variable("ENGRAM_AUTOSYNC_POLL_S", "25", "Autosync: long-poll wait per pull (at most 30)."),
    Variable(
        "ENGRAM_AUTOSYNC_WATCH_MS",
        "1000",
        "Autosync: how often other processes' writes are looked for.",
    ),
    Variable("ENGRAM_AUTOSYNC_LEASE_S", "60", "Autosync: the lease one process holds per server."),
    Variable("ENGRAM_AUTOSYNC_BACKOFF_BASE_MS", "1000", "Autosync: first wait after a failure."),
    Variable("ENGRAM_AUTOSYNC_BACKOFF_MAX_MS", "300000", "Autosync: longest wait after failures."),
    Variable(
        "ENGRAM_AUTOSYNC_HEARTBEAT_S",
        "60",
        "Autosync: how often the machine reports to the server.",
    ),
    Variable(
        "ENGRAM_AUTOSYNC_RESCAN_S",
        "60",
        "Autosync: how often the whole pending journal is rescanned.",
    ),
    Variable(
        "ENGRAM_AUTOSYNC_REFUSED_BASE_S", "120", "Autosync: first wait after a 403 or a pause."
    ),
    Variable("ENGRAM_AUTOSYNC_REFUSED_MAX_S", "3600", "Autosync: longest wait after refusals."),
)
_KNOWN = frozenset(v.name for v in VARIABLES)


def read_variable(
    name: str, known: frozenset[str], env: Mapping[str, str] | None, program: str
) -> str:
    """``name``'s text in ``env`` (default: the process environment), stripped, ``""`` when
    unset; a name missing from ``known`` (the program's list) is a programming error."""
    if name not in known:
        raise KeyError(f"{name} is not a setting of {program} (add it to its VARIABLES)")
    return (os.environ if env is None else env).get(name, "").strip()


def raw(name: str, env: Mapping[str, str] | None = None) -> str:
    """The text of the local program's setting ``name`` (see :func:`read_variable`)."""
    return read_variable(name, _KNOWN, env, "the local program")


def markdown_table(variables: tuple[Variable, ...]) -> str:
    """The variables as a Markdown table (docs/settings.md)."""
    lines = ["| variable | default | what it does |", "|---|---|---|"]
    lines += [f"| `{v.name}` | {v.default} | {v.meaning} |" for v in variables]
    return "\n".join(lines) + "\n"


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    raw_value = raw(name, env)
    if not raw_value:
        return default
    try:
        return int(raw_value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw_value!r}") from None


def _list_env(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """A comma-separated setting, blanks dropped."""
    return tuple(item.strip() for item in raw(name, env).split(",") if item.strip())


def _threshold_env(env: Mapping[str, str], name: str, default: float) -> float:
    """A setting holding an importance (a number from 0 to 1)."""
    raw_value = raw(name, env)
    if not raw_value:
        return default
    try:
        value = float(raw_value)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 1:  # also refuses nan
        raise ValueError(f"{name} must be a number from 0 to 1, got {raw_value!r}")
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


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$ENGRAM_DATA_DIR`` or ``~/.engram``."""
    found = raw("ENGRAM_DATA_DIR", env)
    if found:
        return Path(found).expanduser()
    return Path.home() / ".engram"


@dataclass(frozen=True, slots=True)
class Config:
    """Local settings. Limits follow the Go tool's defaults."""

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


def load(env: Mapping[str, str] | None = None) -> Config:
    """Build the configuration from the environment (``os.environ`` by default)."""
    env = dict(os.environ if env is None else env)
    return Config(
        data_dir=default_data_dir(env),
        http_host=raw("ENGRAM_HOST", env) or DEFAULT_HOST,
        http_port=_int_env(env, "ENGRAM_PORT", DEFAULT_PORT),
        http_token=raw("ENGRAM_HTTP_TOKEN", env) or None,
        http_allowed_hosts=_list_env(env, "ENGRAM_HTTP_ALLOWED_HOSTS"),
        hub_host=raw("ENGRAM_HUB_HOST", env) or DEFAULT_HOST,
        hub_port=_int_env(env, "ENGRAM_HUB_PORT", DEFAULT_HUB_PORT),
        api_token=raw("ENGRAM_API_TOKEN", env) or None,
        project_override=raw("ENGRAM_PROJECT", env) or None,
        busy_timeout_ms=_int_env(env, "ENGRAM_BUSY_TIMEOUT_MS", 10_000),
        search_mode=raw("ENGRAM_SEARCH_MODE", env).lower() or None,
        review_after_days=_int_env(env, "ENGRAM_REVIEW_AFTER_DAYS", 90),
        archive_threshold=_threshold_env(env, "ENGRAM_ARCHIVE_THRESHOLD", 0.1),
        max_clock_drift_ms=parse_duration_ms(
            "ENGRAM_MAX_CLOCK_DRIFT", raw("ENGRAM_MAX_CLOCK_DRIFT", env) or "10m"
        ),
        auto_purge=raw("ENGRAM_AUTO_PURGE", env).lower() not in ("0", "false", "off"),
        purge_delay_s=parse_duration_ms(
            "ENGRAM_PURGE_DELAY", raw("ENGRAM_PURGE_DELAY", env) or "30s"
        )
        / 1000,
    )


def editor_command(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The user's editor command (the system's ``$VISUAL``, else ``$EDITOR``; not settings of
    Engram's own), split like a shell would; ``None`` when neither names one."""
    import shlex

    for name in ("VISUAL", "EDITOR"):
        text = (os.environ if env is None else env).get(name, "").strip()
        if text:
            try:
                return shlex.split(text)
            except ValueError:
                continue
    return None


def settings_page() -> str:
    """docs/settings.md: both programs' variables (the server's need the ``cloud`` extra)."""
    from engram_cloud.settings import VARIABLES as SERVER_VARIABLES

    return (
        "# Settings\n\n"
        "Every environment variable Engram reads. This page is generated from the lists in\n"
        "`engram/settings.py` and `cloud/settings.py` (`python -m engram.settings >\n"
        "docs/settings.md`); a test checks it is current. Values are trimmed; an empty one is\n"
        "the same as an unset one. A bad value is refused with a message naming the variable.\n\n"
        "## The local program (`engram`)\n\n"
        + markdown_table(VARIABLES)
        + "\nThe TUI also honours the system's `VISUAL` (else `EDITOR`): `E` edits a memory's\n"
        "content in that editor (without one, in the TUI's own text area).\n"
        + "\n## The team server (`engram cloud serve`)\n\n"
        "Read once at start-up; `docs/cloud.md` explains the modes and `docs/cloud.env.example`\n"
        "is a commented template.\n\n"
        + markdown_table(SERVER_VARIABLES)
        + "\n`FORWARDED_ALLOW_IPS` is uvicorn's own variable: the server passes its proxy trust\n"
        "from `ENGRAM_CLOUD_TRUSTED_PROXIES` and refuses to start when `FORWARDED_ALLOW_IPS` is\n"
        "set to anything else (`docker-compose.cloud.yml` sets both alike).\n"
    )


if __name__ == "__main__":
    print(settings_page(), end="")
