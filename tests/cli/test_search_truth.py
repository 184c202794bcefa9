"""Issue 14 through the real ``engram`` command: the issue's three examples, literally, and the
human output saying why each memory matched."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from tests.support import REPO, run_engram


def ok(*args: str, data_dir: Path) -> str:
    result = run_engram(*args, data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    return result.stdout


def titles(*args: str, data_dir: Path) -> list[str]:
    return [m["title"] for m in orjson.loads(ok("search", *args, "--json", data_dir=data_dir))]


def test_a_hard_deleted_secret_is_not_found(data_dir: Path) -> None:
    ok("save", "Token for staging", "the staging token is zebrafish-4471", "--project", "leak",
       data_dir=data_dir)  # fmt: skip
    ok("save", "Unrelated note", "the build uses make", "--project", "leak", data_dir=data_dir)
    ok("delete", "1", "--hard", data_dir=data_dir)
    assert ok("search", "zebrafish", data_dir=data_dir).startswith(
        'No memories found for: "zebrafish"'
    )


def test_an_edited_topic_no_longer_matches_its_old_words(data_dir: Path) -> None:
    topic = ("--topic", "architecture/auth", "--session", "s-auth", "--project", "acme")
    ok("save", "Auth tokens", "JWT access tokens and refresh tokens in a cookie", *topic,
       data_dir=data_dir)  # fmt: skip
    ok("save", "Session length", "sessions last 8 hours", "--session", "s-auth", "--project",
       "acme", data_dir=data_dir)  # fmt: skip
    ok("save", "Auth tokens", "PASETO v4 local tokens", *topic, data_dir=data_dir)
    assert titles("JWT refresh cookie", data_dir=data_dir) == []


def test_sessionless_saves_do_not_match_each_other(data_dir: Path) -> None:
    for title, content in (
        ("Deploy credentials", "the deploy key lives in the vault"),
        ("Prefers tabs", "the user prefers tabs"),
        ("Connection pooling", "pgbouncer in transaction mode"),
        ("Lint", "ruff in CI"),
    ):
        ok("save", title, content, "--project", "acme", data_dir=data_dir)
    assert titles("pgbouncer", data_dir=data_dir) == ["Connection pooling"]


def test_human_and_json_output_say_why(data_dir: Path) -> None:
    ok("save", "Team server uses PostgreSQL", "several processes share it", "--session", "s1",
       "--project", "acme", data_dir=data_dir)  # fmt: skip
    ok("save", "Follow-up", "nothing else", "--session", "s1", "--project", "acme",
       data_dir=data_dir)  # fmt: skip
    human = ok("search", "postgres", data_dir=data_dir)
    assert "    matched: postgres (prefix)\n" in human
    assert "    via session context: postgres\n" in human
    found = orjson.loads(ok("search", "postgres", "--json", data_dir=data_dir))
    assert [m["match"]["tier"] for m in found] == ["prefix", "context"]
    assert found[1]["match"] == {
        "tier": "context",
        "words": [],
        "prefix_words": [],
        "context_words": ["postgres"],
        "context": True,
    }


def test_the_git_sync_docs_example_finds_its_memory(tmp_path: Path) -> None:
    """docs/git-sync.md: import `.engram-example`, bind acme to it, import again, then
    `engram search postgres` finds "Team server uses PostgreSQL"."""
    copy = tmp_path / "example"
    shutil.copytree(REPO / ".engram-example", copy)
    data = tmp_path / "data"
    ok("sync", "--import", "--dir", str(copy), data_dir=data)
    ok("sync", "--bind", "acme", "--dir", str(copy), data_dir=data)
    ok("sync", "--import", "--dir", str(copy), data_dir=data)
    assert titles("postgres", data_dir=data) == ["Team server uses PostgreSQL"]
