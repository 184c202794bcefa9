"""Start-up validation: every refusal is one line naming the variable; URL spellings."""

from __future__ import annotations

import pytest

from engram_cloud.db import normalize_database_url
from engram_cloud.settings import (
    DEFAULT_MAX_PUSH_BYTES,
    EXAMPLE_JWT_SECRET,
    SettingsError,
    load_settings,
    parse_allowlist,
)

SECRET = "0123456789abcdef0123456789abcdef-strong"
BASE = {
    "ENGRAM_DATABASE_URL": "postgresql://engram@localhost/engram",
    "ENGRAM_JWT_SECRET": SECRET,
    "ENGRAM_CLOUD_ALLOWED_PROJECTS": "acme, Widgets ,acme",
}


def refusal(env: dict[str, str]) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings(env)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_and_allowlist_normalization() -> None:
    settings = load_settings(BASE)
    assert settings.allowed_projects == {"acme", "widgets"}
    assert settings.port == 8080 and settings.host == "127.0.0.1"
    assert settings.max_push_bytes == DEFAULT_MAX_PUSH_BYTES
    assert settings.database_url == "postgresql+psycopg://engram@localhost/engram"
    assert settings.mode == "authenticated" and settings.token is None
    assert settings.project_allowed("acme") and not settings.project_allowed("other")
    assert len(settings.token_pepper) == 32 and settings.token_pepper != SECRET.encode()


def test_hardening_defaults_and_overrides() -> None:
    settings = load_settings(BASE)
    assert settings.max_clock_drift_s == 600 and settings.trusted_proxies == ()
    assert settings.audit_retention_days == 90 and settings.audit_max_rows == 100_000
    assert settings.heartbeats_per_minute == 120
    assert (settings.worker_unhealthy_s, settings.worker_offline_s) == (300, 3600)
    quick = load_settings(
        {**BASE, "ENGRAM_CLOUD_WORKER_UNHEALTHY_S": "30", "ENGRAM_CLOUD_WORKER_OFFLINE_S": "90"}
    )
    assert (quick.worker_unhealthy_s, quick.worker_offline_s) == (30, 90)
    changed = load_settings(
        {
            **BASE,
            "ENGRAM_CLOUD_TOKEN": "a-shared-token-of-32-characters-x",
            "ENGRAM_CLOUD_TRUSTED_PROXIES": "10.0.0.7, 172.16.0.0/12, 10.0.0.7/32",
            "ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S": "60",
        }
    )
    assert changed.trusted_proxies == ("10.0.0.7", "172.16.0.0/12")
    assert changed.max_clock_drift_s == 60


def test_port_variables_in_order() -> None:
    assert load_settings({**BASE, "ENGRAM_PORT": "9000"}).port == 9000
    assert load_settings({**BASE, "ENGRAM_PORT": "9000", "ENGRAM_CLOUD_PORT": "9100"}).port == 9100


def test_star_allows_every_project() -> None:
    settings = load_settings({**BASE, "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*"})
    assert settings.allows_every_project and settings.project_allowed("anything")
    assert not settings.project_allowed("")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"ENGRAM_DATABASE_URL": ""}, "ENGRAM_DATABASE_URL is not set"),
        ({"ENGRAM_DATABASE_URL": "mysql://x@y/z"}, "must be a PostgreSQL URL"),
        ({"ENGRAM_DATABASE_URL": "not a url"}, "is not a database URL"),
        ({"ENGRAM_DATABASE_URL": "postgresql://h"}, "names no database"),
        ({"ENGRAM_CLOUD_ALLOWED_PROJECTS": ""}, "ENGRAM_CLOUD_ALLOWED_PROJECTS is required"),
        ({"ENGRAM_CLOUD_ALLOWED_PROJECTS": " , ,"}, "ENGRAM_CLOUD_ALLOWED_PROJECTS is required"),
        ({"ENGRAM_JWT_SECRET": ""}, "ENGRAM_JWT_SECRET is required"),
        ({"ENGRAM_JWT_SECRET": "short"}, "ENGRAM_JWT_SECRET is too weak"),
        ({"ENGRAM_JWT_SECRET": "a" * 40}, "ENGRAM_JWT_SECRET is too weak"),
        ({"ENGRAM_JWT_SECRET": EXAMPLE_JWT_SECRET}, "example value"),
        (
            {"ENGRAM_CLOUD_INSECURE_NO_AUTH": "1", "ENGRAM_CLOUD_TOKEN": "t" * 20},
            "cannot be combined with ENGRAM_CLOUD_TOKEN",
        ),
        (
            {"ENGRAM_CLOUD_INSECURE_NO_AUTH": "1", "ENGRAM_CLOUD_ADMIN": "a" * 20},
            "ENGRAM_CLOUD_ADMIN is refused in insecure mode",
        ),
        ({"ENGRAM_CLOUD_INSECURE_NO_AUTH": "maybe"}, "must be 1 or 0"),
        (
            {
                "ENGRAM_CLOUD_TOKEN": "same-token-0123456789abcdefghijklmno",
                "ENGRAM_CLOUD_ADMIN": "same-token-0123456789abcdefghijklmno",
            },
            "must differ from ENGRAM_CLOUD_TOKEN",
        ),
        ({"ENGRAM_CLOUD_TOKEN": "t0k3n-0123456789"}, "ENGRAM_CLOUD_TOKEN is too short (16"),
        (
            {"ENGRAM_CLOUD_ADMIN": "adm1n-0123456789abcdefghijklmno"},
            "ENGRAM_CLOUD_ADMIN is too short",
        ),
        ({"ENGRAM_CLOUD_TOKEN": "ab" * 20}, "ENGRAM_CLOUD_TOKEN is too weak"),
        ({"ENGRAM_CLOUD_TRUSTED_PROXIES": "10.0.0.1, proxy.local"}, "'proxy.local' is not an IP"),
        (
            {"ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S": "0"},
            "ENGRAM_CLOUD_MAX_CLOCK_DRIFT_S must be at least",
        ),
        (
            {"ENGRAM_CLOUD_AUDIT_MAX_ROWS": "10"},
            "ENGRAM_CLOUD_AUDIT_MAX_ROWS must be at least 1000",
        ),
        ({"ENGRAM_CLOUD_TOKEN_PEPPER": SECRET}, "must differ from ENGRAM_JWT_SECRET"),
        ({"ENGRAM_CLOUD_TOKEN_PEPPER": "short"}, "ENGRAM_CLOUD_TOKEN_PEPPER is too weak"),
        ({"ENGRAM_CLOUD_MAX_PUSH_BYTES": "lots"}, "must be an integer"),
        ({"ENGRAM_CLOUD_MAX_PUSH_BYTES": "10"}, "must be at least 1024"),
        ({"ENGRAM_CLOUD_PORT": "70000"}, "ENGRAM_CLOUD_PORT must be at most 65535"),
        ({"ENGRAM_CLOUD_WORKER_UNHEALTHY_S": "-1"}, "ENGRAM_CLOUD_WORKER_UNHEALTHY_S must be at"),
        ({"ENGRAM_CLOUD_WORKER_OFFLINE_S": "soon"}, "must be an integer"),
        (
            {"ENGRAM_CLOUD_WORKER_UNHEALTHY_S": "600", "ENGRAM_CLOUD_WORKER_OFFLINE_S": "600"},
            "ENGRAM_CLOUD_WORKER_OFFLINE_S (600) must be longer",
        ),
    ],
)
def test_refusals(change: dict[str, str], expected: str) -> None:
    assert expected in refusal({**BASE, **change})


def test_insecure_mode_needs_no_secret_but_still_an_allowlist() -> None:
    env = {
        "ENGRAM_DATABASE_URL": "postgres://localhost/dev",
        "ENGRAM_CLOUD_INSECURE_NO_AUTH": "1",
        "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
    }
    settings = load_settings(env)
    assert settings.insecure and settings.mode == "insecure"
    assert "ALLOWED_PROJECTS" in refusal({**env, "ENGRAM_CLOUD_ALLOWED_PROJECTS": ""})


def test_pepper_is_used_verbatim_when_set() -> None:
    pepper = "another-secret-value-0123456789abcdefgh"
    assert (
        load_settings({**BASE, "ENGRAM_CLOUD_TOKEN_PEPPER": pepper}).token_pepper == pepper.encode()
    )


@pytest.mark.parametrize(
    "raw",
    [
        "postgres://u:p%40ss@db:5432/engram",
        "postgresql://u:p%40ss@db:5432/engram",
        "postgresql+psycopg://u:p%40ss@db:5432/engram",
        "postgresql+psycopg2://u:p%40ss@db:5432/engram",
        "postgresql+asyncpg://u:p%40ss@db:5432/engram",
    ],
)
def test_url_spellings_all_use_psycopg3(raw: str) -> None:
    assert normalize_database_url(raw) == "postgresql+psycopg://u:p%40ss@db:5432/engram"


def test_allowlist_parsing() -> None:
    assert parse_allowlist(" A--b ,a-b, *, ") == {"a-b", "*"}
    assert parse_allowlist("") == frozenset()
