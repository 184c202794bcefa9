"""The CLI refuses the mistakes MCP refuses, in the same words (issue 17 items 6 and 10): an
unknown project merged, searched or read gets a did-you-mean; ``delete`` takes several ids (all
or none); a count below 1 is refused; soft deletes are undone with ``restore`` and shown with
``--deleted``."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.support import run_engram


def run(data_dir: Path, *args: str):
    return run_engram(*args, data_dir=data_dir)


def error_line(data_dir: Path, *args: str) -> str:
    result = run(data_dir, *args)
    assert result.returncode == 1, (args, result.stdout)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("engram: error: "), result.stderr
    return lines[0]


def saved(data_dir: Path, title: str, project: str = "acme-web") -> int:
    result = run(data_dir, "save", title, f"about {title}", "--project", project, "--json")
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout)["id"]


def test_unknown_projects_are_refused_with_a_did_you_mean(data_dir: Path) -> None:
    saved(data_dir, "Pool size")
    merge = error_line(data_dir, "projects", "merge", "acme-wbe", "--to", "acme-web")
    assert 'Unknown project "acme-wbe"' in merge and 'Did you mean "acme-web"?' in merge
    listed = run(data_dir, "projects", "list").stdout.splitlines()
    assert listed[1:] == ["       1         1        0  acme-web"]  # nothing moved
    assert 'Did you mean "acme-web"?' in error_line(
        data_dir, "search", "pool", "--project", "acmee"
    )
    assert 'Did you mean "acme-web"?' in error_line(data_dir, "context", "acme-webb")
    assert 'Unknown project "nosuchproject"' in error_line(data_dir, "context", "nosuchproject")
    as_json = orjson.loads(run(data_dir, "search", "pool", "--project", "acmee", "--json").stdout)
    assert as_json["error_code"] == "unknown_project"
    assert as_json["available_projects"] == ["acme-web"]


def test_delete_takes_several_ids_all_or_none(data_dir: Path) -> None:
    one, two, three = (saved(data_dir, t) for t in ("One", "Two", "Three"))
    assert "#99 not found" in error_line(data_dir, "delete", str(one), "99")
    assert run(data_dir, "get", str(one)).returncode == 0  # nothing was deleted
    deleted = run(data_dir, "delete", str(one), str(two))
    assert deleted.returncode == 0, deleted.stderr
    assert f"Memory #{one} soft-deleted" in deleted.stdout
    assert f"Memory #{two} soft-deleted" in deleted.stdout
    both = orjson.loads(run(data_dir, "delete", str(three), "--hard", "--json").stdout)
    assert both == {"id": three, "status": "deleted", "hard_delete": True}
    assert "one session at a time" in error_line(data_dir, "delete", "session", "a", "b")


def test_counts_below_one_are_refused(data_dir: Path) -> None:
    saved(data_dir, "Pool size")
    assert error_line(data_dir, "search", "pool", "--limit", "-3") == (
        "engram: error: limit must be at least 1 (got -3)"
    )
    assert "limit must be at least 1 (got 0)" in error_line(data_dir, "list", "--limit", "0")
    # the curation lists check their counts the same way (one check, in the store)
    for command in ("archived", "review"):
        said = error_line(data_dir, command, "--limit", "-3")
        assert said == "engram: error: limit must be at least 1 (got -3)", command
    assert "days must be at least 1 (got 0)" in error_line(data_dir, "review", "--days", "0")
    assert "id must be an integer (got 'abc')" in error_line(data_dir, "get", "abc")


def test_restore_and_deleted(data_dir: Path) -> None:
    oid = saved(data_dir, "Cache keys")
    run(data_dir, "delete", str(oid))
    said = error_line(data_dir, "get", str(oid))
    assert f"Observation #{oid} was deleted at" in said and f"engram restore {oid}" in said
    shown = run(data_dir, "get", str(oid), "--deleted").stdout
    assert shown.startswith(f"#{oid} [manual] Cache keys") and "\nDeleted: " in shown
    assert run(data_dir, "search", "cache").stdout.startswith("No memories found")
    found = run(data_dir, "search", "cache", "--deleted").stdout
    assert found.startswith("Found 1 memory:") and "Cache keys [deleted " in found
    assert "No memories." in run(data_dir, "list").stdout
    listed = orjson.loads(run(data_dir, "list", "--deleted", "--json").stdout)
    assert listed["total"] == 1 and listed["observations"][0]["deleted_at"]
    back = run(data_dir, "restore", str(oid))
    assert back.returncode == 0 and f"Memory #{oid} restored: Cache keys" in back.stdout
    assert run(data_dir, "get", str(oid)).returncode == 0
    assert "is not deleted" in error_line(data_dir, "restore", str(oid))
    assert "Memories 1–1 of 1" in run(data_dir, "list").stdout
