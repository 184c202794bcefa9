"""Export and import through one sync directory, in process, with real stores: complete
exports (edits and deletes too), idempotent imports, scopes, projects and cross-project sessions."""

from __future__ import annotations

import orjson

from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.index import read_index
from engram.sync.git.sync import GitSync
from tests.support.sync_git import canonical, export, import_, pull


def write_history(store: Store) -> None:
    """Every kind of write: saves, a topic edit, an update, soft and hard deletes, prompts,
    a session that starts and ends, a session deleted."""
    store.create_session("s-1", "acme", "/src/acme")
    a = store.add_observation(
        title="Auth uses JWT",
        content="tokens expire in 1h",
        project="acme",
        session_id="s-1",
        type="decision",
        topic_key="auth/tokens",
    )
    store.add_observation(
        title="Auth uses JWT",
        content="tokens expire in 2h",
        project="acme",
        session_id="s-1",
        type="decision",
        topic_key="auth/tokens",
    )
    b = store.add_observation(
        title="Flaky test",
        content="retry the db fixture",
        project="acme",
        session_id="s-1",
        type="bugfix",
    )
    c = store.add_observation(
        title="Wrong lead", content="was not the cache", project="acme", session_id="s-1"
    )
    store.update_observation(b.observation.id, content="retry the db fixture twice")
    store.delete_observation(c.observation.id)  # soft
    d = store.add_observation(title="Secret-ish", content="remove me entirely", project="acme")
    store.delete_observation(d.observation.id, hard=True)
    store.add_prompt("why do tokens expire?", session_id="s-1", project="acme")
    gone = store.add_prompt("typo prompt", session_id="s-1", project="acme")
    store.delete_prompt(gone.id)
    store.create_session("s-empty", "acme", "/tmp")
    store.delete_session("s-empty")
    store.end_session("s-1", "auth reviewed")
    assert a.observation.sync_id.startswith("obs-")


def test_everything_travels_and_replicas_converge(make_store, sync_dir: SyncDir) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    write_history(alice)
    report = export(alice, sync_dir, ["acme"])
    assert len(report.chunks) == 1
    assert report.files_written == [".gitignore", ".gitattributes"]
    attributes = (sync_dir.path / ".gitattributes").read_text()
    assert attributes.count("log/index.jsonl merge=union") == 1
    assert "manifest.json" not in attributes.replace("Never on manifest.json", "")
    chunk = report.chunks[0]
    assert (chunk.sessions, chunk.observations, chunk.prompts) == (3, 4, 2)
    assert chunk.mutations == alice.journal.count_pending("nowhere", projects=["acme"])

    result = import_(bob, sync_dir)
    assert result.failures == [] and len(result.chunks_imported) == 1
    assert canonical(bob, ["acme"]) == canonical(alice, ["acme"])
    assert bob.get_session("s-1").summary == "auth reviewed"

    # Importing again changes nothing; bob has nothing of his own to export.
    before = canonical(bob)
    again = import_(bob, sync_dir)
    assert again.chunks_imported == [] and again.chunks_already == 1
    assert canonical(bob) == before
    assert export(bob, sync_dir, ["acme"]).nothing_new


def test_nothing_new_writes_no_file(store: Store, sync_dir: SyncDir) -> None:
    store.add_observation(title="one", content="first", project="acme")
    export(store, sync_dir, ["acme"])
    files = sorted(sync_dir.log_dir.iterdir())
    index = sync_dir.index_path.read_bytes()
    second = export(store, sync_dir, ["acme"])
    assert second.nothing_new and not second.index_rebuilt and not second.manifest.written
    assert sorted(sync_dir.log_dir.iterdir()) == files
    assert sync_dir.index_path.read_bytes() == index


def test_later_edits_and_deletes_go_in_a_new_chunk(make_store, sync_dir: SyncDir) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    saved = alice.add_observation(title="Cache", content="LRU of 100", project="acme")
    export(alice, sync_dir, ["acme"])
    import_(bob, sync_dir)
    alice.update_observation(saved.observation.id, content="LRU of 500")
    second = export(alice, sync_dir, ["acme"])
    assert [c.mutations for c in second.chunks] == [1]
    import_(bob, sync_dir)
    assert bob.search("LRU")[0].content == "LRU of 500"
    alice.delete_observation(saved.observation.id, hard=True)
    export(alice, sync_dir, ["acme"])
    import_(bob, sync_dir)
    assert bob.search("LRU") == []
    assert canonical(bob) == canonical(alice)
    index = read_index(sync_dir.index_path.read_bytes())
    assert index.state == "ok" and len(index.ids) == 3 and index.skipped == 0


def test_personal_scope_stays_local_unless_asked(make_store, sync_dir: SyncDir) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    alice.add_observation(
        title="My editor setup", content="vim keys", project="acme", scope="personal"
    )
    alice.add_observation(title="Team rule", content="squash merges", project="acme")
    export(alice, sync_dir, ["acme"])
    import_(bob, sync_dir)
    assert [o.title for o in bob.search("vim keys squash merges")] == ["Team rule"]
    # moving a shared memory to personal sends teammates a delete
    shared = alice.search("squash")[0]
    alice.update_observation(shared.id, scope="personal")
    export(alice, sync_dir, ["acme"])
    import_(bob, sync_dir)
    assert bob.search("squash") == []
    # asked for: personal memories travel too, and apply where the receiver asks the same way
    carol = make_store("carol")
    other = SyncDir(sync_dir.path.parent / "personal-dir")
    export(alice, other, ["acme"], include_personal=True)
    held = import_(carol, other)
    assert [str(h) for h in held.held] == [
        "2 personal-scope records of project acme ignored: "
        "`engram sync --import --include-personal` accepts them"
    ]
    assert carol.search("vim keys") == []
    asked = GitSync(carol, other).import_chunks(include_personal=True)
    assert asked.chunks_reread == held.chunks_imported and asked.held == []
    assert {o.title for o in carol.search("vim keys squash merges")} == {
        "My editor setup",
        "Team rule",
    }


def test_project_selection_and_all(make_store, sync_dir: SyncDir) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    alice.add_observation(title="acme thing", content="alpha", project="acme")
    alice.add_observation(title="other thing", content="beta", project="other")
    export(alice, sync_dir, ["acme"])
    import_(bob, sync_dir)
    assert [o.project for o in bob.search("alpha beta")] == ["acme"]
    everything = export(alice, sync_dir, None)
    assert everything.total("observations") == 1  # only what the directory lacked
    assert everything.unbound_projects == ["other"]  # and export said so
    # "other" is not this directory's project: bob's import holds it back until he binds it
    held = import_(bob, sync_dir)
    assert [(h.project, h.records) for h in held.held] == [("other", 2)]  # memory + session
    assert [o.project for o in bob.search("alpha beta")] == ["acme"]
    assert GitSync(bob, sync_dir).bind("other")
    import_(bob, sync_dir)
    assert canonical(bob) == canonical(alice)


def test_a_memory_saved_in_another_projects_session_travels_with_its_own_session(
    make_store, sync_dir: SyncDir
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    alice.create_session("s-tools", "tooling", "/src/tools")
    alice.add_observation(
        title="acme fix", content="made in a tooling session", project="acme", session_id="s-tools"
    )
    export(alice, sync_dir, ["acme"])
    import_(bob, sync_dir)
    # Identity is per project: the memory's session is acme's own row of s-tools (same place),
    # and tooling's row stays with tooling.
    session = bob.get_session("s-tools", project="acme")
    assert (session.project, session.directory) == ("acme", "/src/tools")  # not a stub
    assert [s.project for s in bob.recent_sessions(limit=10)] == ["acme"]
    # and later changes of that session follow it into the directory
    alice.end_session("s-tools", "tooling done")
    assert export(alice, sync_dir, ["acme"]).total("sessions") == 1
    import_(bob, sync_dir)
    assert bob.get_session("s-tools").summary == "tooling done"
    # an unrelated session of the other project does not
    alice.create_session("s-unrelated", "tooling", "/src/tools")
    assert export(alice, sync_dir, ["acme"]).nothing_new


def test_mutations_already_in_a_pulled_chunk_are_not_written_again(make_store, tmp_path) -> None:
    """Bob's edit reaches Alice twice: through the cloud and in Bob's chunk after git pull."""
    alice, bob = make_store("alice"), make_store("bob")
    dir_a, dir_b = SyncDir(tmp_path / "a" / ".engram"), SyncDir(tmp_path / "b" / ".engram")
    bob.add_observation(title="Bob's finding", content="index the column", project="acme")
    export(bob, dir_b, ["acme"])
    relayed = [e.record for e in bob.journal.pending("cloud:test", projects=["acme"])]
    alice.apply_mutations(relayed, source="cloud:test")  # the other route
    alice.add_observation(title="Alice's own", content="new work", project="acme")
    pull(dir_b, dir_a)
    report = export(alice, dir_a, ["acme"])
    assert report.chunks_indexed == 1 and report.already_held == len(relayed)
    assert report.total("mutations") == 1  # only Alice's own memory
    assert report.chunks[0].observations == 1
    assert import_(alice, dir_a).chunks_imported == []  # Bob's chunk counts as applied


def test_a_vanished_chunk_is_exported_again(store: Store, sync_dir: SyncDir) -> None:
    """A branch switch or a deleted file removes a chunk: its mutations are not lost."""
    store.add_observation(title="first", content="one", project="acme")
    first = export(store, sync_dir, ["acme"])
    store.add_observation(title="second", content="two", project="acme")
    second = export(store, sync_dir, ["acme"])
    (sync_dir.log_dir / f"{first.chunks[0].id}.jsonl.gz").unlink()
    status = GitSync(store, sync_dir).status(projects=["acme"])
    assert any("no longer in the directory" in p.reason for p in status.problems)
    again = export(store, sync_dir, ["acme"])
    assert again.rescanned
    assert again.total("mutations") == first.chunks[0].mutations
    assert again.already_held == second.chunks[0].mutations  # the remaining chunk still counts


def test_large_exports_split_into_several_chunks(make_store, sync_dir: SyncDir) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    for i in range(60):
        alice.add_observation(
            title=f"memory {i}", content="x" * 400 + f" number {i}", project="acme"
        )
    report = GitSync(alice, sync_dir, author="t", chunk_limit=8 * 1024).export(projects=["acme"])
    assert len(report.chunks) > 3
    assert report.total("mutations") == 61
    result = import_(bob, sync_dir)
    assert len(result.chunks_imported) == len(report.chunks)
    assert canonical(bob) == canonical(alice)
    listed = [orjson.loads(line) for line in sync_dir.index_path.read_bytes().splitlines()]
    assert {c["id"] for c in listed} == {c.id for c in report.chunks}
