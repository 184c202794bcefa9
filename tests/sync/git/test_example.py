"""``.engram-example/`` (made by ``tests/sync/git/make_example.py`` with real ``engram sync``) is a
valid sync directory that imports into an empty store with its edit and delete applied."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from engram.sync.git.index import read_index
from tests.support import REPO, run_engram

EXAMPLE = REPO / ".engram-example"


def test_example_directory_imports(tmp_path: Path) -> None:
    assert (EXAMPLE / ".gitattributes").read_text().count("log/index.jsonl merge=union") == 1
    assert not (EXAMPLE / "manifest.json").exists() and not (EXAMPLE / "chunks").exists()
    assert "*.db" in (EXAMPLE / ".gitignore").read_text()
    copy = tmp_path / "example"  # import into a copy: the checkout stays untouched
    shutil.copytree(EXAMPLE, copy)
    data = tmp_path / "data"
    done = run_engram("sync", "--import", "--dir", str(copy), "--json", data_dir=data)
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["chunks_imported"] == 1 and report["chunks_failed"] == 0
    # The copy's own project is "example" (its directory); the memories are acme's, so they
    # wait until this machine binds acme to the directory — then the next import applies them.
    assert [h["message"] for h in report["held"]] == [
        "8 records for project acme ignored: `engram sync --bind acme` accepts them"
    ]
    bound = run_engram("sync", "--bind", "acme", "--dir", str(copy), data_dir=data)
    assert bound.returncode == 0 and 'Bound project "acme"' in bound.stdout, bound.stderr
    done = run_engram("sync", "--import", "--dir", str(copy), "--json", data_dir=data)
    report = orjson.loads(done.stdout)
    assert len(report["chunks_reread"]) == 1 and report["imported_ids"] == []
    assert report["held"] == [] and report["mutations"]["applied"] == 8

    found = orjson.loads(run_engram("search", "PostgreSQL", "--json", data_dir=data).stdout)
    assert [m["title"] for m in found] == ["Team server uses PostgreSQL"]
    assert "every laptop keeps SQLite" in found[0]["content"]  # the edit won
    assert found[0]["revision_count"] == 2
    assert orjson.loads(run_engram("search", "S3 chunks", "--json", data_dir=data).stdout) == []
    sessions = orjson.loads(
        run_engram("export", "--canonical", "--project", "acme", data_dir=data).stdout
    )["sessions"]
    assert [s["id"] for s in sessions] == ["s-bugs", "s-design"]

    status = orjson.loads(
        run_engram("sync", "--status", "--dir", str(copy), "--json", data_dir=data).stdout
    )
    assert status["index"] == "ok" and status["pending_import"] == []
    assert status["manifest"] == "missing"  # the Go tool's: nothing of ours goes there
    reading = read_index((EXAMPLE / "log" / "index.jsonl").read_bytes())
    assert [p.name[:16] for p in (EXAMPLE / "log").glob("*.jsonl.gz")] == reading.ids
