"""Regenerate ``tests/fixtures/go/`` with the real Go tool (``engram-go``, upstream 1f46479):
``python -m tests.interop.make_go_fixtures [OUT]``.

Two teammates on the Go tool share the repository ``acme-api``; the Go tool names each one's
project after the clone's directory:

* alice (clone ``work-copy``) works through the Go tool's HTTP API, as its agent hooks do: a
  session with two memories (one with a topic key and ``<``/``&`` in its text), a memory she
  deletes, a prompt, and the session's end with a summary; then ``engram-go sync``.
* carol (clone ``api``) saves one memory with the CLI, syncs and pushes first.
* alice commits her chunk and pulls: both created ``.engram/manifest.json``, so git stops with
  ``CONFLICT (add/add)``, and alice commits the file as git left it (markers included).

Written to OUT (default ``tests/fixtures/go``): ``dot-engram/`` (alice's ``.engram/`` after
that commit: both chunks and the conflicted manifest; not named ``.engram`` so that this
repository's own sync never reads it), ``manifest-alice.json`` (her manifest before the
pull), ``export.json`` (``engram-go export`` of alice's database) and ``engram.db`` (that
database).
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from tests.interop.team import GO, GoUser, make_remote

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "go"

#: What alice does through the Go tool's HTTP API.
SESSION = {"id": "go-alice-1", "project": "work-copy", "directory": "/home/alice/work-copy"}
MEMORIES = [
    {
        "type": "decision",
        "title": "Auth uses <JWT>",
        "content": "**What**: short-lived tokens & a refresh token\n**Why**: stateless API",
        "topic_key": "architecture/auth",
    },
    {
        "type": "bugfix",
        "title": "Flaky login test",
        "content": "**What**: the test raced the token clock; frozen time fixes it",
    },
    {"type": "discovery", "title": "Dropped idea", "content": "sessions in Redis (deleted)"},
]
PROMPT = "why JWT & not server sessions?"
SUMMARY = "## Goal\nauth for the API\n## Accomplished\n- JWT decision"


def build(out: Path) -> None:
    if GO is None:
        raise SystemExit("engram-go not found: set ENGRAM_GO_BIN")
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        root = Path(tmp)
        remote, env = make_remote(root)
        alice = GoUser(root, "alice", remote, env, "work-copy")
        carol = GoUser(root, "carol", remote, env, "api")

        with alice.serve() as api:
            api.post("/sessions", SESSION)
            ids = []
            for memory in MEMORIES:
                body = {**memory, "session_id": SESSION["id"], "project": "work-copy"}
                ids.append(api.post("/observations", body)["id"])
            api.post(
                "/prompts", {"session_id": SESSION["id"], "content": PROMPT, "project": "work-copy"}
            )
            api.delete(f"/observations/{ids[-1]}")
            api.post(f"/sessions/{SESSION['id']}/end", {"summary": SUMMARY})
        alice.go("sync")
        alice.commit("alice: sync engram memories")

        carol.go("save", "Rate limits", "**What**: 100 req/min per token", "--project", "api")
        carol.go("sync")
        carol.commit("carol: sync engram memories")
        carol.push()

        manifest_alice = (alice.path / ".engram" / "manifest.json").read_bytes()
        pulled = alice.pull()
        assert "CONFLICT (add/add)" in pulled.stdout + pulled.stderr, pulled
        alice.git("add", "-A", ".engram")
        alice.git("commit", "-q", "-m", "merge (manifest committed as git left it)")
        alice.go("export", str(root / "export.json"))

        if out.exists():
            shutil.rmtree(out / "dot-engram", ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copytree(alice.path / ".engram", out / "dot-engram")
        (out / "manifest-alice.json").write_bytes(manifest_alice)
        shutil.copyfile(root / "export.json", out / "export.json")
        database = out / "engram.db"
        database.unlink(missing_ok=True)
        source = sqlite3.connect(alice.data / "engram.db")
        copy = sqlite3.connect(database)
        try:
            source.backup(copy)  # one self-contained file (no -wal beside it)
            copy.execute("PRAGMA journal_mode=DELETE")
        finally:
            copy.close()
            source.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
