"""The deployment files: docker-compose.cloud.yml and docs/cloud.env.example (there is no
container engine here, so they are checked as data, and the example settings are run through
the real validation)."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest
import yaml

from engram_cloud.settings import VARIABLES, SettingsError, load_settings
from tests.support import REPO

COMPOSE = REPO / "docker-compose.cloud.yml"
EXAMPLE = REPO / "docs" / "cloud.env.example"


def example_env() -> dict[str, str]:
    env = {}
    for line in EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            env[name.strip()] = value.strip()
    return env


def test_compose_file_shape() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert set(services) == {"postgres", "engram", "caddy"}  # caddy: TLS, --profile tls
    postgres, engram = services["postgres"], services["engram"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert engram["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "/health/ready" in " ".join(engram["healthcheck"]["test"])
    assert 'CMD ["engram", "cloud", "serve", "--migrate"]' in engram["build"]["dockerfile_inline"]
    assert engram["env_file"] == ".env.cloud"
    assert engram["environment"]["ENGRAM_CLOUD_HOST"] == "0.0.0.0"
    # no password in the URL (issue 17): it travels as PGPASSWORD
    assert (
        engram["environment"]["ENGRAM_DATABASE_URL"] == "postgresql://engram@postgres:5432/engram"
    )
    for copied in re.findall(r"^COPY (\S+)", engram["build"]["dockerfile_inline"], re.M):
        assert (REPO / copied).exists(), copied
    assert doc["volumes"] == {"engram-postgres": None, "engram-caddy": None}


def test_example_settings_are_known_and_refused_until_edited() -> None:
    env = example_env()
    names = {n for n in env if n.startswith("ENGRAM_")}
    commented = set(re.findall(r"^# (ENGRAM_[A-Z_]+)=", EXAMPLE.read_text(), re.M))
    assert names | commented <= {v.name for v in VARIABLES}
    env["ENGRAM_DATABASE_URL"] = "postgresql://engram:pw@postgres:5432/engram"
    with pytest.raises(SettingsError, match="example value"):
        load_settings(env)
    env["ENGRAM_JWT_SECRET"] = secrets.token_hex(32)
    settings = load_settings(env)
    assert settings.allows_every_project and settings.mode == "authenticated"


def test_docs_name_every_variable() -> None:
    text = (REPO / "docs" / "settings.md").read_text()
    missing = [v.name for v in VARIABLES if v.name not in text]
    assert not missing, missing
    assert (
        Path(REPO / "docs" / "cloud.env.example").name in (REPO / "docs" / "cloud.md").read_text()
    )
    assert "settings.md" in (REPO / "docs" / "cloud.md").read_text()


# --- the compose file against the Compose Specification, and what it promises --------------

SPEC = REPO / "tests" / "cloud" / "data" / "compose-spec.json"
NASTY_PASSWORD = "p/a+ss@w:rd%2F#?&=$x"
_VARIABLE = re.compile(r"\$\{([A-Z_]+)(?::([?-])([^}]*))?\}")


def interpolate(value: object, env: dict[str, str]) -> object:
    """Compose's interpolation of ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` (what
    this file uses), applied to every string of the document."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.groups()
        found = env.get(name, "")
        if kind == "?" and not found:
            raise ValueError(rest)
        return found or (rest if kind == "-" else "")

    return _VARIABLE.sub(one, value)


def test_compose_file_follows_the_compose_specification() -> None:
    """Docker has no engine here: the file is checked against the Compose Specification's own
    JSON schema (tests/cloud/data/compose-spec.json, from compose-spec/compose-spec)."""
    import json

    import jsonschema

    schema = json.loads(SPEC.read_text())
    doc = yaml.safe_load(COMPOSE.read_text())
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]
    assert errors == []
    broken = {**doc, "services": {**doc["services"], "engram": {**doc["services"]["engram"],
              "ports": [{"published": "x", "bogus": 1}]}}}  # fmt: skip
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))  # the check can fail


def test_the_server_is_published_on_this_host_only_and_reaches_its_database() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert services["engram"]["ports"] == ["127.0.0.1:8080:8080"]
    assert "ports" not in services["postgres"]
    assert all(not p.startswith("8080") for p in services["caddy"]["ports"])
    assert services["caddy"]["profiles"] == ["tls"]  # TLS in front, on request
    for name, service in services.items():  # one network: every service reaches the others
        assert "engram" in service["networks"], name
    caddy_address = services["caddy"]["networks"]["engram"]["ipv4_address"]
    assert caddy_address in (REPO / "docs" / "cloud.md").read_text()
    assert caddy_address in COMPOSE.read_text().split("name: engram-cloud")[0]


def test_a_password_with_url_characters_reaches_the_database_intact(
    cloud_db_url: str,
) -> None:
    """A password holding "/", "+", "@", "%" or "#" is passed beside the URL (PGPASSWORD),
    never inside it, so nothing needs escaping and the database gets it byte for byte."""
    import psycopg
    from sqlalchemy.engine import make_url

    doc = yaml.safe_load(COMPOSE.read_text())
    settings = {**example_env(), "POSTGRES_PASSWORD": NASTY_PASSWORD,
                "ENGRAM_JWT_SECRET": secrets.token_hex(32)}  # fmt: skip
    env = interpolate(doc["services"]["engram"]["environment"], settings)
    assert env["PGPASSWORD"] == NASTY_PASSWORD
    url = make_url(env["ENGRAM_DATABASE_URL"])
    assert url.password is None and url.host == "postgres" and url.database == "engram"
    assert NASTY_PASSWORD not in env["ENGRAM_DATABASE_URL"]
    loaded = load_settings({**settings, **env})  # the server accepts what compose gives it
    assert make_url(loaded.database_url).password is None
    with pytest.raises(ValueError, match="set POSTGRES_PASSWORD"):
        interpolate(doc["services"]["engram"]["environment"], {})
    # The same URL shape against a real server, the password only in PGPASSWORD:
    real = make_url(cloud_db_url).set(password=None)
    dsn = real.set(drivername="postgresql").render_as_string(hide_password=False)
    import os

    old = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = NASTY_PASSWORD
    try:
        with psycopg.connect(dsn) as conn:
            assert conn.info.password == NASTY_PASSWORD
    finally:
        if old is None:
            del os.environ["PGPASSWORD"]
        else:
            os.environ["PGPASSWORD"] = old


def test_forwarded_allow_ips_follows_the_servers_proxy_trust() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    env = doc["services"]["engram"]["environment"]
    assert env["FORWARDED_ALLOW_IPS"] == env["ENGRAM_CLOUD_TRUSTED_PROXIES"]
    base = {**example_env(), "ENGRAM_DATABASE_URL": "postgresql://engram@postgres/engram",
            "ENGRAM_JWT_SECRET": secrets.token_hex(32)}  # fmt: skip
    for trusted in ("", "172.31.73.10"):
        resolved = interpolate(env, {**base, "ENGRAM_CLOUD_TRUSTED_PROXIES": trusted})
        loaded = load_settings({**base, **resolved})
        assert loaded.trusted_proxies == ((trusted,) if trusted else ())
    with pytest.raises(SettingsError, match=re.escape("FORWARDED_ALLOW_IPS='127.0.0.1' differs")):
        load_settings({**base, "FORWARDED_ALLOW_IPS": "127.0.0.1"})  # uvicorn's own default
    with pytest.raises(SettingsError, match="differs"):
        load_settings({**base, "FORWARDED_ALLOW_IPS": "*",
                       "ENGRAM_CLOUD_TRUSTED_PROXIES": "10.0.0.5"})  # fmt: skip
    same = load_settings({**base, "FORWARDED_ALLOW_IPS": "10.0.0.5, 10.0.0.6",
                          "ENGRAM_CLOUD_TRUSTED_PROXIES": "10.0.0.6,10.0.0.5"})  # fmt: skip
    assert set(same.trusted_proxies) == {"10.0.0.5", "10.0.0.6"}
