"""The `engram` command through real processes: human output, --json, exit codes, errors."""

import subprocess
from pathlib import Path

import orjson
import pytest

from tests.support import run_engram


def ok(*args: str, data_dir: Path, **kw) -> subprocess.CompletedProcess[str]:
    result = run_engram(*args, data_dir=data_dir, **kw)
    assert result.returncode == 0, result.stderr
    return result


def fails(*args: str, data_dir: Path, **kw) -> str:
    result = run_engram(*args, data_dir=data_dir, **kw)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("engram: error: "), result.stderr
    return lines[0]


def test_save_then_search_human_and_json(data_dir: Path, tmp_path: Path) -> None:
    out = ok(
        "save",
        "Fixed login timeout",
        "**What**: raised TTL",
        "--type",
        "bugfix",
        "--project",
        "acme",
        data_dir=data_dir,
    ).stdout
    assert out.startswith('Memory saved: #1 "Fixed login timeout" (bugfix)')
    saved = orjson.loads(
        ok(
            "save",
            "Chose Postgres",
            "for the cloud",
            "--json",
            "--project",
            "acme",
            data_dir=data_dir,
        ).stdout
    )
    assert saved["id"] == 2 and saved["sync_id"].startswith("obs-") and saved["action"] == "created"
    human = ok("search", "how did we fix the login?", data_dir=data_dir).stdout
    assert (
        human.startswith("Found ")
        and human.splitlines()[2] == "[1] #1 (bugfix) — Fixed login timeout"
    )
    found = orjson.loads(ok("--json", "search", "postgres OR login", data_dir=data_dir).stdout)
    assert isinstance(found, list) and {o["id"] for o in found} == {1, 2} and "rank" in found[0]
    assert ok("search", "nothing-like-this", data_dir=data_dir).stdout.startswith(
        "No memories found"
    )


def test_content_from_stdin_and_project_from_the_directory(data_dir: Path, tmp_path: Path) -> None:
    work = tmp_path / "My-Service"
    work.mkdir()
    saved = orjson.loads(
        ok(
            "save",
            "From stdin",
            "-",
            "--json",
            data_dir=data_dir,
            cwd=work,
            input="a long\nmulti-line body",
        ).stdout
    )
    assert saved["content"] == "a long\nmulti-line body" and saved["project"] == "my-service"
    ctx = ok("context", data_dir=data_dir, cwd=work).stdout
    assert "### Recent Observations" in ctx and "From stdin" in ctx
    # A project named on purpose must exist (issue 17 item 6: as MCP refuses it, with a
    # did-you-mean); an empty project of this directory is simply empty.
    assert 'Unknown project "other"' in fails("context", "other", data_dir=data_dir)
    assert "No previous session memories" in ok("context", data_dir=data_dir, cwd=tmp_path).stdout


def test_get_timeline_stats_delete(data_dir: Path) -> None:
    for i in range(3):
        ok("save", f"step {i}", f"did {i}", "--project", "p", "--session", "s1", data_dir=data_dir)
    assert ok("get", "2", data_dir=data_dir).stdout.startswith("#2 [manual] step 1\ndid 1")
    tl = ok("timeline", "2", data_dir=data_dir).stdout
    assert ">>> #2 [manual] step 1 <<<" in tl and "#1 [manual] step 0" in tl and "#3" in tl
    stats = orjson.loads(ok("stats", "--json", data_dir=data_dir).stdout)
    assert stats["total_observations"] == 3 and stats["database"].endswith("engram.db")
    assert ok("delete", "1", data_dir=data_dir).stdout.strip() == "Memory #1 soft-deleted"
    assert (
        ok("delete", "2", "--hard", data_dir=data_dir).stdout.strip()
        == "Memory #2 permanently deleted"
    )
    line = fails("delete", "session", "s1", data_dir=data_dir)
    assert "still has 2 observation(s)" in line
    assert "not found" in fails("delete", "prompt", "9", data_dir=data_dir)


def test_get_lays_out_blocks_written_on_one_line(data_dir: Path) -> None:
    """The README's own example writes What and Why on one line; `get` shows them apart, as the
    TUI and the dashboard do, while --json keeps the content as saved."""
    content = "**What**: memories live in SQLite with FTS5 **Why**: zero setup, works offline"
    ok("save", "Chose SQLite", content, "--project", "p", data_dir=data_dir)
    shown = ok("get", "1", data_dir=data_dir).stdout
    assert "What: memories live in SQLite with FTS5\nWhy: zero setup, works offline\n" in shown
    assert orjson.loads(ok("get", "1", "--json", data_dir=data_dir).stdout)["content"] == content


def test_errors_are_one_line_with_json_too(data_dir: Path) -> None:
    assert (
        fails("save", "", "x", data_dir=data_dir)
        == "engram: error: title is required and cannot be empty"
    )
    assert "Observation #99 not found" in fails("get", "99", data_dir=data_dir)
    result = run_engram("--json", "get", "abc", data_dir=data_dir)
    assert result.returncode == 1 and orjson.loads(result.stdout) == {
        "error": "id must be an integer (got 'abc')"
    }
    assert "query cannot be empty" in fails("search", " ", data_dir=data_dir)
    assert "invalid date" in fails("search", "x", "--since", "soon", data_dir=data_dir)


@pytest.mark.parametrize(
    "query", ['"', "(", "*", "NEAR", "-x", "a:b", 'unbalanced "quote', "NOT AND OR"]
)
def test_fts_syntax_in_queries_is_just_text(data_dir: Path, query: str) -> None:
    ok("search", "--", query, data_dir=data_dir)  # "--" lets a query start with "-"


def test_export_import_roundtrip_and_bad_files(data_dir: Path, tmp_path: Path) -> None:
    ok("save", "a", "b", "--project", "p", data_dir=data_dir)
    backup = tmp_path / "backup.json"
    assert "Exported to" in ok("export", str(backup), data_dir=data_dir).stdout
    doc = orjson.loads(backup.read_bytes())
    assert doc["version"] == "0.1.0" and len(doc["observations"]) == 1
    other = tmp_path / "other-data"
    out = ok("import", str(backup), data_dir=other).stdout
    assert "1 observations" in out
    assert "(3 already present, skipped)" not in out
    again = orjson.loads(ok("import", str(backup), "--json", data_dir=other).stdout)
    assert again["observations_imported"] == 0 and again["skipped"] == 2
    assert orjson.loads(ok("export", data_dir=data_dir).stdout)["observations"][0]["title"] == "a"
    canonical = orjson.loads(ok("export", "--canonical", data_dir=data_dir).stdout)
    assert "id" not in canonical["observations"][0] and canonical["tombstones"] == []

    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(backup.read_bytes()[:40])
    assert "is not valid JSON" in fails("import", str(truncated), data_dir=other)
    wrong = tmp_path / "wrong.json"
    wrong.write_bytes(orjson.dumps({"version": "2.0.0", "observations": []}))
    assert "unsupported export version '2.0.0'" in fails("import", str(wrong), data_dir=other)
    assert "No such file" in fails("import", str(tmp_path / "missing.json"), data_dir=other)


def test_projects_commands(data_dir: Path) -> None:
    ok("save", "a", "x", "--project", "engram", data_dir=data_dir)
    ok("save", "b", "y", "--project", "engram-memory", data_dir=data_dir)
    listing = orjson.loads(ok("projects", "list", "--json", data_dir=data_dir).stdout)
    assert listing["count"] == 2
    assert (
        "Merged engram-memory into engram"
        in ok("projects", "merge", "engram-memory", "--to", "engram", data_dir=data_dir).stdout
    )
    assert "Nothing to prune" in ok("projects", "prune", data_dir=data_dir).stdout


def test_help_version_and_unusable_data_dir(data_dir: Path, tmp_path: Path) -> None:
    assert "usage: engram" in ok("--help", data_dir=data_dir).stdout
    for command in ("save", "search", "export", "projects"):
        assert "usage: engram " + command in ok(command, "--help", data_dir=data_dir).stdout
    assert ok("version", data_dir=data_dir).stdout.startswith("engram ")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert "cannot create data directory" in fails("stats", data_dir=blocker / "data")


def test_import_shows_progress_only_on_a_terminal(data_dir: Path, tmp_path: Path) -> None:
    from tests.support import run_on_terminal

    doc = {
        "version": "0.1.0",
        "sessions": [],
        "prompts": [],
        "observations": [
            {"session_id": "s", "title": f"t{i}", "content": f"c{i}", "sync_id": f"obs-{i:016x}"}
            for i in range(2500)
        ],
    }
    path = tmp_path / "big.json"
    path.write_bytes(orjson.dumps(doc))
    code, shown = run_on_terminal(["import", str(path)], data_dir)
    assert code == 0 and "Importing" in shown
    code, quiet = run_on_terminal(["import", str(path), "--quiet"], tmp_path / "other")
    assert code == 0 and "Importing" not in quiet
    piped = ok("import", str(path), data_dir=tmp_path / "third")
    assert "Importing" not in piped.stderr and "2500 observations" in piped.stdout
