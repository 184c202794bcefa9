"""A Go user switches to Engram (their database upgraded in place) and later goes back to the
Go tool, keeping what they wrote in between, with the real Go tool (issue 16); and double
imports of what the Go tool wrote add nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from tests.interop.team import PROJECT, GoUser, Ours, make_remote, needs_go

pytestmark = needs_go


def test_switch_then_go_back_keeping_everything_once(tmp_path: Path) -> None:
    remote, env = make_remote(tmp_path)
    frank = GoUser(tmp_path, "frank", remote, env, "frank-wc")
    bob = Ours(tmp_path, "bob", remote, env, "acme-api")
    frank.save("F1 frank on Go", "before switching")
    frank.sync()
    bob.save("B1 bob", "reaches frank as a Go chunk")
    bob.sync("--go-compat")
    frank.pull()
    frank.go("sync", "--import")
    assert frank.titles() == ["B1 bob", "F1 frank on Go"]

    # frank switches: his database is upgraded in place (a backup kept), his memories keep
    # the clone's name until he merges it into the repository's project, and bob's memory
    # that came to him through the Go tool is not doubled.
    frank.engram("sync", "--import")
    [backup] = frank.data.glob("engram.db.go-backup-*")
    frank.engram("projects", "merge", "frank-wc", "--to", PROJECT)
    frank.engram("save", "F2 frank on Engram", "written after the upgrade")
    frank.engram("sync")
    frank.commit("frank: sync")
    frank.push()
    ours = orjson.loads(frank.engram("export", "--project", PROJECT).stdout)
    titles = sorted(o["title"] for o in ours["observations"] if not o["deleted_at"])
    assert titles == ["B1 bob", "F1 frank on Go", "F2 frank on Engram"]
    # the Go tool cannot write to the upgraded database: hence the way back
    refused = frank.go("save", "nope", "x", check=False)
    assert refused.returncode != 0 and "sync_id" in refused.stderr

    # the way back (docs/git-sync.md): sync for Go teammates first, then export only what the
    # backup lacks, put the backup back, import that
    frank.pull()
    frank.engram("sync", "--import")
    frank.engram("sync", "--go-compat")
    frank.commit("frank: sync for Go")
    frank.push()
    since = frank.root / "since-upgrade.json"
    frank.engram("export", "--all", "--format", "go", "--missing-from", str(backup), str(since))
    exported = orjson.loads(since.read_bytes())
    assert exported["observations"] is None  # F2 is in a Go chunk now; the rest in the backup
    for name in ("engram.db", "engram.db-wal", "engram.db-shm"):
        if (frank.data / name).exists():
            (frank.data / name).rename(frank.data / f"{name}.engram")
    shutil.copyfile(backup, frank.data / "engram.db")
    frank.go("import", str(since))
    frank.go("sync", "--import")
    assert frank.titles() == ["B1 bob", "F1 frank on Go", "F2 frank on Engram"]

    # back on the Go tool, everything works again, and bob gets it once
    frank.save("F3 frank on Go again", "after going back")
    frank.sync()
    bob.sync("--go-compat")
    assert bob.titles() == sorted(
        ["B1 bob", "F1 frank on Go", "F2 frank on Engram", "F3 frank on Go again"]
    )


def test_the_way_back_without_a_repository_keeps_memories_written_since(tmp_path: Path) -> None:
    """Memories written after the upgrade that no Go chunk holds go into the export."""
    remote, env = make_remote(tmp_path)
    gina = GoUser(tmp_path, "gina", remote, env, "solo")
    gina.save("G1 on Go", "before")
    gina.engram("save", "G2 on Engram", "after the upgrade", "--project", "solo")
    [backup] = gina.data.glob("engram.db.go-backup-*")
    since = gina.root / "since.json"
    gina.engram("export", "--all", "--format", "go", "--missing-from", str(backup), str(since))
    assert [o["title"] for o in orjson.loads(since.read_bytes())["observations"]] == [
        "G2 on Engram"
    ]
    for name in ("engram.db", "engram.db-wal", "engram.db-shm"):
        (gina.data / name).unlink(missing_ok=True)
    shutil.copyfile(backup, gina.data / "engram.db")
    gina.go("import", str(since))
    assert gina.titles() == ["G1 on Go", "G2 on Engram"]
    assert "G2" in gina.go("search", "Engram").stdout
    bad = gina.engram(
        "export", "--format", "go", "--missing-from", str(since), str(since), check=False
    )
    assert bad.returncode != 0 and "not a database of the Go tool" in bad.stderr


def test_double_imports_add_nothing(tmp_path: Path) -> None:
    remote, env = make_remote(tmp_path)
    alice = GoUser(tmp_path, "alice", remote, env, "work-copy")
    bob = Ours(tmp_path, "bob", remote, env, "acme-api")
    carl = Ours(tmp_path, "carl", remote, env, "acme-api")
    alice.save("Go memory", "exported and synced")
    alice.sync()
    export = alice.root / "go-export.json"
    alice.go("export", str(export))
    for who in (bob, carl):
        for _ in range(2):  # the same Go export, twice, on two machines
            done = who.engram("import", str(export), "--json")
        assert orjson.loads(done.stdout)["observations_imported"] == 0
    assert bob.canonical() == carl.canonical()
    # the same rows from the Go chunk (repository's project) and from the export (the clone's
    # name, merged into it) meet in one memory
    for who in (bob, carl):
        who.sync()
        who.engram("projects", "merge", "work-copy", "--to", PROJECT)
        who.engram("sync", "--import")
        assert who.titles() == ["Go memory"]
    for who in (bob, carl, bob):  # each one's merge reaches the other
        who.sync()
    assert bob.canonical() == carl.canonical()
