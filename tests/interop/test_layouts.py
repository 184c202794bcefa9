"""Layouts the real Go tool meets in a repository (issue 16): chunks an earlier Engram wrote
into its folder and manifest (which stop it until one of ours syncs), and its own ``.engram/``
directories in subdirectories, where it writes when run there."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.interop.team import GoUser, Ours, make_remote, needs_go

pytestmark = needs_go
OLD_LAYOUT = Path(__file__).resolve().parents[1] / "fixtures" / "old-layout"


def test_the_old_layout_stops_the_go_tool_until_one_of_ours_syncs(tmp_path: Path) -> None:
    remote, env = make_remote(tmp_path)
    alice = GoUser(tmp_path, "alice", remote, env, "work-copy")
    bob = Ours(tmp_path, "bob", remote, env, "acme-api")
    alice.save("A1 alice", "listed after the old entries")
    alice.go("sync")
    alice.commit("alice: sync")
    # what an earlier Engram had committed: its chunk in chunks/, listed in the manifest
    old = bob.path / ".engram"
    shutil.copytree(OLD_LAYOUT, old)
    bob.commit("an earlier engram's sync")
    bob.push()
    alice.pull()
    assert alice.conflicted() == [".engram/manifest.json"]  # both added it
    alice.commit_merge()
    alice.push()
    stopped = alice.go("sync", "--import", check=False)
    assert stopped.returncode != 0  # its manifest has markers, and our chunk is unreadable to it

    bob.engram("sync", "--bind", "acme")  # the example's own project, to apply it here too
    bob.sync()
    assert not list((bob.path / ".engram" / "chunks").glob("????????????????.jsonl.gz"))
    assert (bob.path / ".engram" / "log" / "92a8b2337df61451.jsonl.gz").is_file()
    alice.pull()
    done = alice.go("sync", "--import")
    assert done.returncode == 0
    assert alice.titles() == ["A1 alice"]  # its own, nothing it cannot read
    assert "A1 alice" in bob.titles()


def test_go_directories_in_subdirectories_are_imported(tmp_path: Path) -> None:
    remote, env = make_remote(tmp_path)
    gus = GoUser(tmp_path, "gus", remote, env, "work-copy")
    bob = Ours(tmp_path, "bob", remote, env, "acme-api")
    service = gus.path / "services" / "api"
    service.mkdir(parents=True)
    gus.go("save", "From a subdirectory", "gus ran the Go tool in services/api", "--project", "api")
    gus.go("sync", cwd=service)  # the Go tool writes where it runs: services/api/.engram
    gus.git("add", "-A")
    gus.git("commit", "-q", "-m", "gus: sync from services/api")
    gus.push()
    bob.pull()
    imported = bob.engram("sync", "--import")
    assert "Imported 1 new chunk from .engram/ and services/api/.engram/" in imported.stdout
    assert bob.titles() == ["From a subdirectory"]  # in the repository's project
    assert not (bob.path / ".engram").exists()  # an import creates nothing
    status = bob.engram("sync", "--status").stdout
    assert "services/api/.engram" in status
