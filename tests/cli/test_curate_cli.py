"""Importance, pins, review, restore and consolidation through the `engram` command (real
processes): human text, --json, one-line errors that change nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store
from tests.support import run_engram


def ok(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    result = run_engram(*args, data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    return result


def fails(*args: str, data_dir: Path) -> str:
    result = run_engram(*args, data_dir=data_dir)
    assert result.returncode == 1, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("engram: error: "), result.stderr
    return lines[0]


def snapshot(data_dir: Path) -> bytes:
    with Store.open(config=Config(data_dir=data_dir)) as store:
        return store.canonical_export()


def test_importance_is_shown_and_overridable(data_dir: Path) -> None:
    saved = orjson.loads(
        ok(
            "save",
            "Use pnpm",
            "never npm",
            "--project",
            "acme",
            "--importance",
            "0.8",
            "--json",
            data_dir=data_dir,
        ).stdout
    )
    assert saved["importance"] == 0.8 and saved["importance_override"] == 0.8
    assert "Importance: 0.80 (set by hand)" in ok("get", "1", data_dir=data_dir).stdout
    assert "importance: 0.80" in ok("search", "pnpm", data_dir=data_dir).stdout
    auto = orjson.loads(ok("importance", "1", "auto", "--json", data_dir=data_dir).stdout)
    assert auto["importance_override"] is None and 0 < auto["importance"] < 0.8


@pytest.mark.parametrize("bad", ["1.5", "-0.2", "nan", "inf", "lots"])
def test_a_bad_importance_is_one_line_and_nothing_is_saved(data_dir: Path, bad: str) -> None:
    ok("save", "kept", "c", "--project", "acme", data_dir=data_dir)
    before = snapshot(data_dir)
    assert "importance" in fails("save", "t", "c", "--project", "acme", "--importance", bad,
                                 data_dir=data_dir)  # fmt: skip
    assert "importance" in fails("importance", "1", bad, data_dir=data_dir)
    assert snapshot(data_dir) == before


def test_pin_archive_restore_and_review(data_dir: Path) -> None:
    ok("save", "Rule", "always rebase", "--project", "acme", data_dir=data_dir)
    assert ok("pin", "1", data_dir=data_dir).stdout.startswith("Memory #1 pinned")
    assert "### Pinned" in ok("context", "acme", data_dir=data_dir).stdout
    assert "unpin it first" in fails("archive", "1", data_dir=data_dir)
    ok("unpin", "1", data_dir=data_dir)
    ok("archive", "1", data_dir=data_dir)
    assert "restore it first" in fails("pin", "1", data_dir=data_dir)
    assert "Rule" in ok("archived", data_dir=data_dir).stdout
    restored = orjson.loads(ok("restore", "1", "--json", data_dir=data_dir).stdout)
    assert restored["deleted_at"] is None and restored["delete_reason"] is None
    assert "not deleted" in fails("restore", "1", data_dir=data_dir)
    assert "Nothing to review" in ok("review", data_dir=data_dir).stdout
    listed = orjson.loads(ok("review", "--days", "1", "--json", data_dir=data_dir).stdout)
    assert listed == []  # saved and read today
    marked = orjson.loads(ok("review", "--mark", "1", "--json", data_dir=data_dir).stdout)
    assert marked["reviewed_at"]
    assert "days" in fails("review", "--days", "0", data_dir=data_dir)


def test_validity_and_as_of(data_dir: Path) -> None:
    ok("save", "Python version", "runs on Python 3.9", "--project", "acme", data_dir=data_dir)
    ok("validity", "1", "--from", "2020-01-01", "--to", "2026-06-01", data_dir=data_dir)
    then = orjson.loads(ok("search", "python", "--as-of", "2025-01-01", "--json",
                           data_dir=data_dir).stdout)  # fmt: skip
    assert [o["id"] for o in then] == [1]
    later = ok("search", "python", "--as-of", "2026-07-01T00:00:00Z", data_dir=data_dir).stdout
    assert later.startswith("No memories found")
    assert "as_of" in fails("search", "python", "--as-of", "last week", data_dir=data_dir)
    assert "valid_to" in fails("validity", "1", "--to", "2019-01-01", data_dir=data_dir)


def test_consolidate_dry_run_then_run(data_dir: Path) -> None:
    text = "**What**: raised the gunicorn worker timeout to 60s\n**Why**: slow SSO redirect"
    ok("save", "Login timeout fix", text, "--project", "acme", data_dir=data_dir)
    ok("save", "Fixed the login timeouts", text + "\nnginx matched", "--project", "acme",
       data_dir=data_dir)  # fmt: skip
    before = snapshot(data_dir)
    dry = orjson.loads(ok("consolidate", "--dry-run", "--json", data_dir=data_dir).stdout)
    assert dry["dry_run"] and dry["merged"] == 2 and dry["merges"][0]["status"] == "planned"
    assert snapshot(data_dir) == before
    human = ok("consolidate", "--project", "acme", data_dir=data_dir).stdout
    assert "Did merge: 2 near-duplicates into 1 memory" in human
    assert "Merge into #3" in human
    assert "max" in fails("consolidate", "--max", "0", data_dir=data_dir)
    assert "threshold" in fails("consolidate", "--threshold", "2", data_dir=data_dir)
    assert "ANTHROPIC_API_KEY" in fails("consolidate", "--llm", data_dir=data_dir)
