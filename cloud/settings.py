"""The cloud server's settings: every ``ENGRAM_*`` variable it reads, validated once at start-up.

:func:`load_settings` refuses a bad configuration with :class:`SettingsError`, whose message is
one line naming the variable and what to do — no allowlist, a missing, weak or example JWT
secret in authenticated mode, a bearer token shorter than 32 characters, a shared token or an
admin token together with insecure mode, a trusted proxy that is not an address or network.
(Whether the database answers is checked by :func:`engram_cloud.db.check_database`.)
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from engram.project import project_name
from engram.settings import Variable, read_variable

DEFAULT_PORT = 8080
DEFAULT_HOST = "127.0.0.1"
DEFAULT_MAX_PUSH_BYTES = 8 * 1024 * 1024
MAX_BATCH = 500  # mutations per push (docs/cloud-sync.md)
DEFAULT_PULL_LIMIT = 500
MAX_PULL_LIMIT = 1000
MAX_WAIT_SECONDS = 30.0
MIN_SECRET_BYTES = 32
MIN_TOKEN_CHARS = 32  # legacy bearer tokens: anything shorter is guessable at our throttle's rate
ALL_PROJECTS = "*"
DEFAULT_MAX_CLOCK_DRIFT_S = 600  # 10 minutes (docs/architecture.md, "Trust boundaries")
DEFAULT_AUDIT_RETENTION_DAYS = 90
DEFAULT_AUDIT_MAX_ROWS = 100_000
DEFAULT_HEARTBEATS_PER_MINUTE = 120  # per member principal (a shared token is one principal)
# A machine silent this long is shown "unhealthy" (our clients beat every 60 s: five missed), and
# this long "offline" (the first seed's cleanup default, so a list agrees with what cleanup does).
DEFAULT_WORKER_UNHEALTHY_S = 300
DEFAULT_WORKER_OFFLINE_S = 3600

#: The placeholder written in docs/cloud.env.example and docker-compose.cloud.yml: a server
#: started with it unchanged would sign sessions with a secret everybody knows.
EXAMPLE_JWT_SECRET = "replace-me-with-a-random-secret-of-at-least-32-bytes"
#: Every variable the server reads; docs/settings.md is generated from this list.
VARIABLES: tuple[Variable, ...] = (
    Variable(
        "ENGRAM_DATABASE_URL",
        "required",
        "`postgres://`, `postgresql://` or `postgresql+<driver>://`, always used through psycopg 3.",
    ),
    Variable(
        "ENGRAM_CLOUD_ALLOWED_PROJECTS",
        "required",
        "Comma list of project names (normalized like everywhere in Engram), or `*` for every "
        "project. It bounds every caller, pulls included.",
    ),
    Variable(
        "ENGRAM_JWT_SECRET",
        "required unless insecure",
        "≥ 32 random bytes (`openssl rand -hex 32`); the example value and repetitive strings "
        "are refused. Signs dashboard sessions.",
    ),
    Variable(
        "ENGRAM_CLOUD_TOKEN",
        "none",
        "A shared bearer token for every machine; at least 32 random characters.",
    ),
    Variable(
        "ENGRAM_CLOUD_ADMIN",
        "none",
        "An admin bearer token (admin API, every machine in the workers list, dashboard login); "
        "at least 32 random characters, different from the shared token.",
    ),
    Variable(
        "ENGRAM_CLOUD_TOKEN_PEPPER",
        "derived from the JWT secret",
        "Key for hashing managed tokens (≥ 32 bytes, not the JWT secret): set it before issuing "
        "tokens to be able to rotate the JWT secret without reissuing every token.",
    ),
    Variable(
        "ENGRAM_CLOUD_INSECURE_NO_AUTH",
        "0",
        "`1`: no authentication at all, for local development; refused together with a token.",
    ),
    Variable("ENGRAM_CLOUD_HOST", DEFAULT_HOST, "Bind address (`0.0.0.0` in containers)."),
    Variable("ENGRAM_CLOUD_PORT", "ENGRAM_PORT, else 8080", "Port."),
    Variable("ENGRAM_PORT", str(DEFAULT_PORT), "Port, when ENGRAM_CLOUD_PORT is not set."),
    Variable(
        "ENGRAM_CLOUD_MAX_PUSH_BYTES",
        str(DEFAULT_MAX_PUSH_BYTES),
        "Largest push body, before and after decompression.",
    ),
    Variable("ENGRAM_CLOUD_DB_POOL_SIZE", "10", "Database connections per server process."),
    Variable(
        "ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S",
        str(DEFAULT_MAX_CLOCK_DRIFT_S),
        "How far ahead of the server's clock a pushed record's `hlc` may be (rejected "
        "`clock_skew` beyond).",
    ),
    Variable(
        "ENGRAM_CLOUD_TRUSTED_PROXIES",
        "none",
        "Comma list of proxy addresses or networks whose `X-Forwarded-For`/`-Proto` are believed.",
    ),
    Variable(
        "ENGRAM_CLOUD_AUDIT_RETENTION_DAYS",
        str(DEFAULT_AUDIT_RETENTION_DAYS),
        "Sync audit rows older than this are pruned.",
    ),
    Variable(
        "ENGRAM_CLOUD_AUDIT_MAX_ROWS",
        str(DEFAULT_AUDIT_MAX_ROWS),
        "The sync audit log keeps at most this many newest rows (at least 1000).",
    ),
    Variable(
        "ENGRAM_CLOUD_HEARTBEATS_PER_MINUTE",
        str(DEFAULT_HEARTBEATS_PER_MINUTE),
        "Machine heartbeats one member may send per minute (admins are not limited).",
    ),
    Variable(
        "ENGRAM_CLOUD_WORKER_UNHEALTHY_S",
        str(DEFAULT_WORKER_UNHEALTHY_S),
        "A machine silent this many seconds is shown `unhealthy`.",
    ),
    Variable(
        "ENGRAM_CLOUD_WORKER_OFFLINE_S",
        str(DEFAULT_WORKER_OFFLINE_S),
        "A machine silent this many seconds is shown `offline`; longer than the unhealthy "
        "threshold.",
    ),
    Variable("ENGRAM_TIMEZONE", "UTC", "The IANA time zone the dashboard shows times in."),
)
_KNOWN = frozenset(v.name for v in VARIABLES)


def raw(name: str, env: Mapping[str, str] | None = None) -> str:
    """The text of the server's setting ``name`` (see :func:`engram.settings.read_variable`)."""
    return read_variable(name, _KNOWN, env, "the cloud server")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class SettingsError(Exception):
    """The configuration cannot be served; the message is one line saying why."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Validated server settings (build with :func:`load_settings`, or directly in tests)."""

    database_url: str
    allowed_projects: frozenset[str]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None  # legacy shared bearer token
    jwt_secret: str | None = None  # dashboard session signing
    insecure: bool = False  # ENGRAM_CLOUD_INSECURE_NO_AUTH=1: no authentication at all
    admin_token: str | None = None  # legacy dashboard/admin token
    token_pepper: bytes = field(default=b"", repr=False)
    max_push_bytes: int = DEFAULT_MAX_PUSH_BYTES
    max_batch: int = MAX_BATCH
    default_pull_limit: int = DEFAULT_PULL_LIMIT
    max_pull_limit: int = MAX_PULL_LIMIT
    max_wait_seconds: float = MAX_WAIT_SECONDS
    pool_size: int = 10
    max_clock_drift_s: int = DEFAULT_MAX_CLOCK_DRIFT_S  # pushed hlc at most this far ahead
    # Addresses/networks whose X-Forwarded-For/-Proto headers uvicorn believes (none: off).
    trusted_proxies: tuple[str, ...] = ()
    audit_retention_days: int = DEFAULT_AUDIT_RETENTION_DAYS
    audit_max_rows: int = DEFAULT_AUDIT_MAX_ROWS
    heartbeats_per_minute: int = DEFAULT_HEARTBEATS_PER_MINUTE
    worker_unhealthy_s: int = DEFAULT_WORKER_UNHEALTHY_S  # silent this long: "unhealthy"
    worker_offline_s: int = DEFAULT_WORKER_OFFLINE_S  # silent this long: "offline"

    def __post_init__(self) -> None:
        if not self.token_pepper:
            object.__setattr__(self, "token_pepper", derive_pepper(self.jwt_secret))

    @property
    def allows_every_project(self) -> bool:
        return ALL_PROJECTS in self.allowed_projects

    def project_allowed(self, project: str) -> bool:
        """Whether the server allowlist admits ``project`` (already normalized, non-empty)."""
        return bool(project) and (self.allows_every_project or project in self.allowed_projects)

    @property
    def mode(self) -> str:
        return "insecure" if self.insecure else "authenticated"


def derive_pepper(jwt_secret: str | None) -> bytes:
    """The managed-token pepper when ``ENGRAM_CLOUD_TOKEN_PEPPER`` is unset: a key derived from the
    JWT secret (never the secret itself), or a fixed development value in insecure mode."""
    base = (jwt_secret or "engram-cloud-insecure-development").encode()
    return hmac.new(base, b"engram-cloud-token-pepper", hashlib.sha256).digest()


def parse_allowlist(raw: str) -> frozenset[str]:
    """Comma list → normalized, de-duplicated names; ``*`` stands for every project."""
    names = set()
    for part in raw.split(","):
        part = part.strip()
        if part == ALL_PROJECTS:
            names.add(ALL_PROJECTS)
        elif part:
            name = project_name(part)
            if name:
                names.add(name)
    return frozenset(names)


def _flag(env: Mapping[str, str], name: str) -> bool:
    text = raw(name, env).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SettingsError(f"{name} must be 1 or 0, got {env[name]!r}")


def _int(
    env: Mapping[str, str], name: str, default: int, minimum: int = 1, maximum: int | None = None
) -> int:
    text = raw(name, env)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise SettingsError(f"{name} must be at most {maximum}, got {value}")
    return value


def _secret_problem(secret: str) -> str | None:
    if secret == EXAMPLE_JWT_SECRET:
        return "is the example value from the documentation; generate one (openssl rand -hex 32)"
    if len(secret.encode()) < MIN_SECRET_BYTES:
        return f"is too weak: use at least {MIN_SECRET_BYTES} bytes (openssl rand -hex 32)"
    if len(set(secret)) < 8:
        return "is too weak: it repeats a few characters; use a random value (openssl rand -hex 32)"
    return None


def _token_problem(token: str) -> str | None:
    if len(token) < MIN_TOKEN_CHARS:
        return (
            f"is too short ({len(token)} characters): use at least {MIN_TOKEN_CHARS} "
            "random characters (openssl rand -hex 32)"
        )
    if len(set(token)) < 8:
        return "is too weak: it repeats a few characters; use a random value (openssl rand -hex 32)"
    return None


def check_forwarded_allow_ips(raw: str | None, trusted: tuple[str, ...]) -> None:
    """``FORWARDED_ALLOW_IPS`` is uvicorn's own variable; the server passes its trust from
    ``ENGRAM_CLOUD_TRUSTED_PROXIES`` explicitly, so a different value there would only
    mislead whoever reads the deployment. Refuse to start unless both say the same (or it is
    unset)."""
    if raw is None or not raw.strip():
        return
    if raw.strip() == "*":
        theirs: tuple[str, ...] = ("*",)
    else:
        try:
            theirs = parse_trusted_proxies(raw)
        except SettingsError:
            theirs = (raw.strip()[:60],)
    if set(theirs) != set(trusted):
        raise SettingsError(
            f"FORWARDED_ALLOW_IPS={raw.strip()[:60]!r} differs from ENGRAM_CLOUD_TRUSTED_PROXIES="
            f"{','.join(trusted)!r}: the server trusts forwarded headers only from "
            "ENGRAM_CLOUD_TRUSTED_PROXIES; give both the same value (or unset FORWARDED_ALLOW_IPS)"
        )


def parse_trusted_proxies(raw: str) -> tuple[str, ...]:
    """Comma list of IP addresses or networks (CIDR), normalized; ``SettingsError`` names the
    first entry that is neither (a host name would be looked up by nobody: refuse it)."""
    found: list[str] = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            network = ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise SettingsError(
                f"ENGRAM_CLOUD_TRUSTED_PROXIES: {part[:60]!r} is not an IP address or network "
                "(e.g. 10.0.0.5 or 172.16.0.0/12)"
            ) from None
        text = str(network.network_address) if network.num_addresses == 1 else str(network)
        if text not in found:
            found.append(text)
    return tuple(found)


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the server settings from ``env`` (default: the process environment)."""
    from engram_cloud.db import normalize_database_url

    env = os.environ if env is None else env
    raw_url = raw("ENGRAM_DATABASE_URL", env)
    if not raw_url:
        raise SettingsError(
            "ENGRAM_DATABASE_URL is not set (e.g. postgresql://engram:PASSWORD@localhost/engram)"
        )
    database_url = normalize_database_url(raw_url)
    insecure = _flag(env, "ENGRAM_CLOUD_INSECURE_NO_AUTH")
    token = raw("ENGRAM_CLOUD_TOKEN", env) or None
    admin_token = raw("ENGRAM_CLOUD_ADMIN", env) or None
    jwt_secret = raw("ENGRAM_JWT_SECRET", env) or None
    pepper_raw = raw("ENGRAM_CLOUD_TOKEN_PEPPER", env)
    if insecure and token:
        raise SettingsError(
            "ENGRAM_CLOUD_INSECURE_NO_AUTH=1 cannot be combined with ENGRAM_CLOUD_TOKEN: "
            "choose authenticated or insecure mode"
        )
    if insecure and admin_token:
        raise SettingsError("ENGRAM_CLOUD_ADMIN is refused in insecure mode (there is no login)")
    for name, value in (("ENGRAM_CLOUD_TOKEN", token), ("ENGRAM_CLOUD_ADMIN", admin_token)):
        if value and (problem := _token_problem(value)):
            raise SettingsError(f"{name} {problem}")
    if not insecure:
        if not jwt_secret:
            raise SettingsError(
                "ENGRAM_JWT_SECRET is required in authenticated mode (openssl rand -hex 32), "
                "or set ENGRAM_CLOUD_INSECURE_NO_AUTH=1 for local development"
            )
        problem = _secret_problem(jwt_secret)
        if problem:
            raise SettingsError(f"ENGRAM_JWT_SECRET {problem}")
        if admin_token and admin_token == token:
            raise SettingsError("ENGRAM_CLOUD_ADMIN must differ from ENGRAM_CLOUD_TOKEN")
    if pepper_raw:
        problem = _secret_problem(pepper_raw)
        if problem:
            raise SettingsError(f"ENGRAM_CLOUD_TOKEN_PEPPER {problem}")
        if pepper_raw == jwt_secret:
            raise SettingsError("ENGRAM_CLOUD_TOKEN_PEPPER must differ from ENGRAM_JWT_SECRET")
    allowed = parse_allowlist(raw("ENGRAM_CLOUD_ALLOWED_PROJECTS", env))
    if not allowed:
        raise SettingsError(
            "ENGRAM_CLOUD_ALLOWED_PROJECTS is required: a comma list of project names, "
            "or * for every project"
        )
    port_default = _int(env, "ENGRAM_PORT", DEFAULT_PORT, 1, 65535)
    trusted = parse_trusted_proxies(raw("ENGRAM_CLOUD_TRUSTED_PROXIES", env))
    # uvicorn's own variable, not one of ours (docs/settings.md says so below the table)
    check_forwarded_allow_ips(env.get("FORWARDED_ALLOW_IPS"), trusted)
    unhealthy_s = _int(
        env, "ENGRAM_CLOUD_WORKER_UNHEALTHY_S", DEFAULT_WORKER_UNHEALTHY_S, 1, 366 * 86_400
    )
    offline_s = _int(
        env, "ENGRAM_CLOUD_WORKER_OFFLINE_S", DEFAULT_WORKER_OFFLINE_S, 1, 366 * 86_400
    )
    if offline_s <= unhealthy_s:
        raise SettingsError(
            f"ENGRAM_CLOUD_WORKER_OFFLINE_S ({offline_s}) must be longer than "
            f"ENGRAM_CLOUD_WORKER_UNHEALTHY_S ({unhealthy_s})"
        )
    return Settings(
        database_url=database_url,
        allowed_projects=allowed,
        host=raw("ENGRAM_CLOUD_HOST", env) or DEFAULT_HOST,
        port=_int(env, "ENGRAM_CLOUD_PORT", port_default, 1, 65535),
        token=token,
        jwt_secret=jwt_secret,
        insecure=insecure,
        admin_token=admin_token,
        token_pepper=pepper_raw.encode() if pepper_raw else derive_pepper(jwt_secret),
        max_push_bytes=_int(env, "ENGRAM_CLOUD_MAX_PUSH_BYTES", DEFAULT_MAX_PUSH_BYTES, 1024),
        pool_size=_int(env, "ENGRAM_CLOUD_DB_POOL_SIZE", 10),
        max_clock_drift_s=_int(
            env, "ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S", DEFAULT_MAX_CLOCK_DRIFT_S, 1, 366 * 86_400
        ),
        trusted_proxies=trusted,
        audit_retention_days=_int(
            env, "ENGRAM_CLOUD_AUDIT_RETENTION_DAYS", DEFAULT_AUDIT_RETENTION_DAYS, 1, 36_500
        ),
        audit_max_rows=_int(env, "ENGRAM_CLOUD_AUDIT_MAX_ROWS", DEFAULT_AUDIT_MAX_ROWS, 1_000),
        heartbeats_per_minute=_int(
            env, "ENGRAM_CLOUD_HEARTBEATS_PER_MINUTE", DEFAULT_HEARTBEATS_PER_MINUTE, 1, 100_000
        ),
        worker_unhealthy_s=unhealthy_s,
        worker_offline_s=offline_s,
    )
