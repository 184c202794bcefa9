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
    assert set(services) == {"postgres", "engram"}
    postgres, engram = services["postgres"], services["engram"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert engram["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "/health/ready" in " ".join(engram["healthcheck"]["test"])
    assert 'CMD ["engram", "cloud", "serve", "--migrate"]' in engram["build"]["dockerfile_inline"]
    assert engram["env_file"] == ".env.cloud"
    assert engram["environment"]["ENGRAM_CLOUD_HOST"] == "0.0.0.0"
    assert engram["environment"]["ENGRAM_DATABASE_URL"].startswith("postgresql://engram:")
    for copied in re.findall(r"^COPY (\S+)", engram["build"]["dockerfile_inline"], re.M):
        assert (REPO / copied).exists(), copied
    assert doc["volumes"] == {"engram-postgres": None}


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
