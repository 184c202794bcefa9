"""Settings in one place: every ``ENGRAM_*`` variable the code names is listed (with its default
and meaning) in its program's settings module, read through it, and documented in the generated
docs/settings.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engram import settings
from engram_cloud import settings as server_settings
from tests.support import REPO

NAME = re.compile(r"\"((?:ENGRAM|ANTHROPIC)_[A-Z_]+)\"")


def _named_in(package: Path) -> set[str]:
    found: set[str] = set()
    for path in package.rglob("*.py"):
        found.update(NAME.findall(path.read_text()))
    return found


def test_the_settings_page_is_current() -> None:
    assert (REPO / "docs" / "settings.md").read_text() == settings.settings_page(), (
        "docs/settings.md is stale: run python -m engram.settings > docs/settings.md"
    )


@pytest.mark.parametrize(
    ("package", "variables"),
    [("engram", settings.VARIABLES), ("cloud", server_settings.VARIABLES)],
)
def test_every_variable_the_code_names_is_listed_and_every_listed_one_is_read(
    package: str, variables: tuple[settings.Variable, ...]
) -> None:
    listed = {v.name for v in variables}
    named = _named_in(REPO / package)
    assert named - listed == set(), "read but not listed in its settings module"
    assert listed - named == set(), "listed but never read"


def test_no_module_reads_the_environment_behind_the_settings_back() -> None:
    readers = re.compile(r"os\.environ\.get\(|os\.getenv\(")
    allowed = {REPO / "engram" / "settings.py", REPO / "engram" / "sync" / "progress.py"}
    offenders = [
        str(path.relative_to(REPO))
        for root in ("engram", "cloud")
        for path in (REPO / root).rglob("*.py")
        if path not in allowed and readers.search(path.read_text())
    ]
    assert offenders == []


def test_an_unlisted_name_is_a_programming_error() -> None:
    with pytest.raises(KeyError, match="ENGRAM_NOPE"):
        settings.raw("ENGRAM_NOPE", {})
    with pytest.raises(KeyError, match="ENGRAM_NOPE"):
        server_settings.raw("ENGRAM_NOPE", {})
    assert settings.raw("ENGRAM_PROJECT", {"ENGRAM_PROJECT": "  acme "}) == "acme"
