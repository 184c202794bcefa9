"""The import gate, record by record, in process with real stores: every way a record can try
to reach outside the directory's projects or into personal scope, and what still passes."""

from __future__ import annotations

import orjson
import pytest

from engram.bindings import Bindings
from engram.errors import NotFoundError, ValidationError
from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.scope import personal_sql
from engram.sync.git.sync import GitSync
from tests.support.sync_git import import_
from tests.sync.git import hostile
from tests.sync.git.gofixtures import OBSERVATIONS, PROMPTS, SESSIONS, write_go_chunk


def held(report) -> list[tuple[str, int, bool]]:
    return [(h.project, h.records, h.personal) for h in report.held]


def test_a_payload_naming_another_project_is_held(store: Store, sync_dir: SyncDir) -> None:
    record = hostile.observation(
        "obs-liar000000001", project="payroll", title="Lies", record_project="acme"
    )
    hostile.write_chunk(sync_dir.path, [record])
    report = import_(store, sync_dir)
    assert held(report) == [("payroll", 1, False)]
    with pytest.raises(NotFoundError):
        store.get_observation_by_sync_id("obs-liar000000001")


def test_a_key_of_another_project_reaches_nothing_there(store: Store, sync_dir: SyncDir) -> None:
    """This directory may write acme; records of acme naming payroll's keys address
    (acme, key): payroll's memory, tombstone and session stay exactly as they were."""
    mine = store.add_observation(title="Payroll secret", content="rotate", project="payroll")
    gone = store.add_observation(title="Old payroll", content="bye", project="payroll")
    store.delete_observation(gone.observation.id, hard=True)  # leaves a payroll tombstone
    store.create_session("s-payroll", "payroll", "/src/payroll")
    key = mine.observation.sync_id
    hostile.write_chunk(
        sync_dir.path,
        [
            hostile.observation(key, project="acme", title="Now acme's"),
            hostile.hard_delete(key, project="acme"),
            hostile.observation(gone.observation.sync_id, project="acme", title="Resurrected"),
            hostile.session("s-payroll", project="acme", summary="hijacked"),
            hostile.hard_delete("s-payroll", project="acme", entity="session"),
        ],
    )
    before = store.canonical_export(projects=["payroll"], include_personal=True)
    report = import_(store, sync_dir)
    assert report.failures == [] and report.held == []
    assert store.canonical_export(projects=["payroll"], include_personal=True) == before


def test_personal_memories_here_cannot_be_replaced_or_deleted(
    store: Store, sync_dir: SyncDir
) -> None:
    mine = store.add_observation(
        title="My notes", content="mine", project="acme", scope="personal", topic_key="me/notes"
    )
    key = mine.observation.sync_id
    hostile.write_chunk(
        sync_dir.path,
        [
            hostile.observation(key, project="acme", title="Replaced", scope="project"),
            hostile.observation(
                "obs-personal00001", project="acme", title="A personal one", scope="personal"
            ),
            hostile.observation(  # the payload says personal, the envelope does not
                "obs-personal00002",
                project="acme",
                title="Sneaky",
                scope="personal",
                record_scope="project",
            ),
        ],
    )
    report = import_(store, sync_dir)
    assert held(report) == [("acme", 3, True)]
    assert store.get_observation_by_sync_id(key).title == "My notes"
    # asked for, they apply (the receiving user's choice)
    asked = GitSync(store, sync_dir).import_chunks(include_personal=True)
    assert asked.held == [] and asked.applied.applied == 3
    assert store.get_observation_by_sync_id(key).title == "Replaced"


def test_sessions_keep_to_their_project(store: Store, sync_dir: SyncDir) -> None:
    store.create_session("s-payroll", "payroll", "/src/payroll")
    hostile.write_chunk(
        sync_dir.path,
        [
            hostile.session("s-payroll", project="payroll", summary="hijacked"),
            hostile.hard_delete("s-payroll", project="payroll", entity="session"),
            hostile.session("s-blank", project=""),  # belongs to no project: harmless
            hostile.session("s-acme", project="acme"),
        ],
    )
    report = import_(store, sync_dir)
    assert held(report) == [("payroll", 2, False)]
    session = store.get_session("s-payroll")
    assert (session.project, session.summary) == ("payroll", None)
    assert store.get_session("s-blank").project == ""
    assert store.get_session("s-acme").project == "acme"


def test_go_rows_land_in_the_directory_project_whatever_name_they_carry(
    make_store, tmp_path
) -> None:
    """The Go tool names a project after the clone's directory ("Acme" here); two machines
    whose repository is "widget" both apply the rows to widget, with the same mids."""
    sessions = [{**s, "project": "my-clone-dir"} for s in SESSIONS]
    observations = [{**o, "project": "my-clone-dir"} for o in OBSERVATIONS]
    prompts = [{**p, "project": "my-clone-dir"} for p in PROMPTS]
    journals = []
    for name in ("one", "two"):
        directory = SyncDir(tmp_path / name / "widget" / ".engram")
        write_go_chunk(directory.path, sessions, observations, prompts)
        replica = make_store(name)
        report = import_(replica, directory)
        assert report.failures == [] and report.held == []
        assert {o.project for o in replica.recent_observations(limit=10)} == {"widget"}
        assert replica.get_session("go-s1").project == "widget"
        journals.append(sorted(e.record for e in replica.journal.pending("none")))
    assert journals[0] == journals[1]
    records = [orjson.loads(r) for r in journals[0]]
    assert {r["project"] for r in records} == {"widget"}
    assert {r["payload"]["project"] for r in records} == {"widget"}


def test_binding_state_lives_beside_the_store(store: Store, sync_dir: SyncDir) -> None:
    sync = GitSync(store, sync_dir)
    assert sync.scope().projects == {"acme"}
    assert sync.bind("Payroll") and not sync.bind("payroll")  # normalized, idempotent
    again = GitSync(store, sync_dir, bindings=Bindings(store.db.path.parent))
    assert again.scope().projects == {"acme", "payroll"}
    assert (store.db.path.parent / "bindings.json").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ValidationError, match="repository's own project"):
        sync.unbind("acme")
    assert sync.unbind("payroll") and not sync.unbind("payroll")
    assert sync.scope().projects == {"acme"}


def test_the_personal_lookup_searches_by_address_and_never_scans(store: Store) -> None:
    """Asked as ``project = ? AND sync_id IN (...)``, SQLite scanned the whole project for every
    batch (import 35% slower at 100,000 memories): the lookup must search an index per key."""
    for i in range(30):
        store.add_observation(title=f"memory {i}", content="x", project="acme")
    plan = store.db.conn.execute(
        "EXPLAIN QUERY PLAN " + personal_sql(3), ["obs-1", "obs-2", "obs-3", "acme", "acme"]
    ).fetchall()
    details = [row[3] for row in plan]
    # each key through an index on the key (not one on the project alone)
    assert any(d.startswith("SEARCH o USING") and "sync_id=?" in d for d in details), details
    assert any(d.startswith("SEARCH t USING") and "key=?" in d for d in details), details
    assert not any(d.startswith(("SCAN o", "SCAN t")) for d in details), details


def test_the_personal_lookup_never_reads_the_rows_of_project_memories(store: Store) -> None:
    """Through the unique index of every address, each key found meant reading its row for its
    scope (3.7 µs a key at 100,000 memories): the lookup searches the index of personal
    memories only (a row is read only for a key found there); and it still finds them, and
    their tombstones."""
    mine = store.add_observation(title="mine", content="x", project="acme", scope="personal")
    ours = store.add_observation(title="ours", content="y", project="acme", scope="project")
    gone = store.add_observation(title="gone", content="z", project="acme", scope="personal")
    store.delete_observation(gone.observation.id, hard=True)
    keys = [mine.observation.sync_id, ours.observation.sync_id, gone.observation.sync_id]
    sql = personal_sql(3)
    details = [row[3] for row in store.db.conn.execute(
        "EXPLAIN QUERY PLAN " + sql, [*keys, "acme", "acme"]
    ).fetchall()]  # fmt: skip
    assert any(d.startswith("SEARCH o USING") and "INDEX observations_personal (" in d
               for d in details), details  # fmt: skip
    found = {row[0] for row in store.db.conn.execute(sql, [*keys, "acme", "acme"])}
    assert found == {keys[0], keys[2]}
    assert {row[0] for row in store.db.conn.execute(sql, [*keys, "beta", "beta"])} == set()


def test_a_store_before_the_migration_gets_the_personal_index(tmp_path) -> None:
    from engram.settings import Config
    from engram.store.schema import MIGRATIONS, SCHEMA_VERSION, migration_personal_index

    config = Config(data_dir=tmp_path / "old")
    with Store.open(config=config) as store:
        kept = store.add_observation(title="t", content="c", project="acme", scope="personal")
        store.db.conn.execute("DROP INDEX observations_personal")
        store.db.conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(migration_personal_index)}")
    with Store.open(config=config) as store:
        assert store.db.scalar("PRAGMA user_version") == SCHEMA_VERSION
        found = store.db.conn.execute(personal_sql(1), [kept.observation.sync_id, "acme", "acme"])
        assert [row[0] for row in found] == [kept.observation.sync_id]


def test_the_personal_index_leaves_other_statements_prepared_once(store: Store) -> None:
    """SQLite decides whether a statement may use a partial index by comparing its terms with
    the index's condition: against ``scope = 'personal'`` a term ``scope = ?`` (a save's
    duplicate lookup, a topic's) made the statement depend on the value bound to it, prepared
    again on every run (saves 15% slower). Against ``scope IS 'personal'`` no statement's term
    compares (no statement compares the scope with a parameter by IS)."""
    import re
    from pathlib import Path

    import engram

    ddl = str(store.db.scalar("SELECT sql FROM sqlite_master WHERE name = 'observations_personal'"))
    assert ddl.endswith("WHERE scope IS 'personal'"), ddl
    source = "\n".join(p.read_text() for p in Path(engram.__file__).parent.rglob("*.py"))
    assert not re.search(r"scope\s+IS\s+\?", source, re.IGNORECASE)
