"""Issue 18 (sixth round): what a store imported from a sync directory is held by that directory
because its journal rows name it as their source (no delivery row each): never exported back
there, exported to every other directory, counted there in ``status``, and written again if the
directory loses its chunks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from tests.support.sync_git import export, import_, synthetic_records


def test_what_a_directory_brought_is_not_exported_back_but_is_elsewhere(
    make_store: Callable[[str], Store], tmp_path: Path
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    dir_a = SyncDir(tmp_path / "acme" / ".engram")
    dir_b = SyncDir(tmp_path / "other" / "acme" / ".engram")
    for i in range(3):
        alice.add_observation(title=f"finding {i}", content=f"walrus {i}", project="acme")
    sent = export(alice, dir_a, ["acme"]).total("mutations")
    assert import_(bob, dir_a).failures == []
    assert bob.db.scalar("SELECT COUNT(*) FROM sync_delivery") == 0  # no row per record
    status = GitSync(bob, dir_a).status(projects=["acme"])
    assert status.pending_export == 0
    assert status.project_memories == 3  # held there: it brought them
    assert export(bob, dir_a, ["acme"]).nothing_new
    assert GitSync(bob, dir_b).status(projects=["acme"]).pending_export == sent
    report = export(bob, dir_b, ["acme"])
    assert report.total("mutations") == sent
    assert GitSync(bob, dir_b).status(projects=["acme"]).project_memories == 3
    # Bob's own new memory goes to both.
    bob.add_observation(title="bob's", content="otter", project="acme")
    assert export(bob, dir_a, ["acme"]).total("mutations") == 1
    assert export(bob, dir_b, ["acme"]).total("mutations") == 1


def test_a_directory_that_lost_its_chunks_gets_what_it_brought_again(
    store: Store, tmp_path: Path
) -> None:
    sync_dir = SyncDir(tmp_path / "acme" / ".engram")
    lines = synthetic_records(5)
    other = SyncDir(tmp_path / "elsewhere" / "acme" / ".engram")
    # Another replica's chunk arrives (as by git pull), and is imported.
    with Store.open(config=store_config(tmp_path / "writer")) as writer:
        writer.apply_mutations(lines, source="git:seed")
        export(writer, other, ["acme"])
    for path in (other.path / "log").glob("*.jsonl.gz"):
        (sync_dir.path / "log").mkdir(parents=True, exist_ok=True)
        (sync_dir.path / "log" / path.name).write_bytes(path.read_bytes())
    assert import_(store, sync_dir).failures == []
    assert export(store, sync_dir, ["acme"]).nothing_new
    for path in (sync_dir.path / "log").glob("*.jsonl.gz"):
        path.unlink()  # a branch switch: the directory no longer holds them
    again = export(store, sync_dir, ["acme"])
    assert again.rescanned
    assert again.total("mutations") == len(lines)
    assert export(store, sync_dir, ["acme"]).nothing_new


def store_config(path: Path):  # type: ignore[no-untyped-def]
    from engram.settings import Config

    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Config(data_dir=path)
