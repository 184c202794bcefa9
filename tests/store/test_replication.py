"""The journal and applying remote mutations: atomicity, idempotence, last writer wins."""

import random
import shutil
import time

import orjson
import pytest

from engram.record import format_hlc
from engram.settings import Config
from engram.store import Store, quarantine

from .replicas import converge, exchange


def test_every_write_journals_exactly_one_mutation_in_its_transaction(store: Store) -> None:
    store.add_observation(title="t", content="c", project="p", session_id="s")  # session + obs
    assert store.journal.count_pending("x") == 2
    store.db.conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON sync_journal BEGIN SELECT RAISE(ABORT, 'boom'); END"
    )
    with pytest.raises(Exception, match="boom"):
        store.add_observation(title="t2", content="c2", project="p", session_id="s")
    with pytest.raises(Exception, match="boom"):
        store.update_observation(1, title="changed")
    assert store.stats().total_observations == 1
    assert store.get_observation(1).title == "t"  # the failed update left nothing behind


def test_records_have_the_normative_shape(store: Store) -> None:
    store.add_observation(title="t", content="c", project="p", topic_key="a/b")
    record = store.journal.pending("x")[-1].as_record()
    assert list(record) == [
        "mid",
        "hlc",
        "origin",
        "entity",
        "key",
        "op",
        "project",
        "scope",
        "payload",
    ]
    assert len(record["mid"]) == 32 and record["hlc"].endswith("." + record["origin"])
    assert record["payload"]["topic_key"] == "a/b" and record["key"] == record["payload"]["sync_id"]


def test_applying_twice_is_applying_once(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    a.add_observation(title="t", content="c", project="p")
    records = [e.record for e in a.journal.pending("x")]
    first = b.apply_mutations(records, source="peer:a")
    second = b.apply_mutations(records, source="peer:a")
    assert (first.applied, second.duplicates, second.applied) == (2, 2, 0)
    assert b.canonical_export() == a.canonical_export()


def test_an_invalid_record_is_quarantined_and_the_rest_of_the_batch_applies(make_store) -> None:
    """Before issue 12 one bad record failed the whole batch (and the git importer skipped the
    whole chunk); now it waits in the quarantine with its reason and the others apply."""
    a, b = make_store("a"), make_store("b")
    a.add_observation(title="t", content="c", project="p")
    records = [e.record for e in a.journal.pending("x")]
    bad = orjson.loads(records[1])
    bad["entity"] = "pin"  # an entity no version has (relations are one now)
    result = b.apply_mutations([*records, orjson.dumps(bad), "{not json"], source="peer:a")
    assert (result.applied, result.quarantined) == (2, {"invalid": 2})
    assert b.canonical_export() == a.canonical_export()
    held = quarantine.listing(b.db)
    assert [(q.reason, q.source) for q in held] == [("invalid", "peer:a")] * 2
    assert "unknown entity 'pin'" in held[0].error and "invalid JSON" in held[1].error
    again = b.apply_mutations([orjson.dumps(bad)], source="peer:a")  # the same record again
    assert again.quarantined == {"invalid": 1} and len(quarantine.listing(b.db)) == 2


def test_last_writer_wins_regardless_of_arrival_order(make_store) -> None:
    a, b, c = make_store("a"), make_store("b"), make_store("c")
    obs = a.add_observation(title="v1", content="c", project="p").observation
    exchange(a, b)
    b.update_observation(b.get_observation_by_sync_id(obs.sync_id).id, title="v2 from b")
    exchange(b, a)  # a has seen b's edit, so a's next clock value is later: a wins
    a.update_observation(obs.id, title="v3 from a")
    exchange(a, c)  # c receives the newest edit first, then the older one
    exchange(b, c)
    converge([a, b, c])
    titles = {s.get_observation_by_sync_id(obs.sync_id).title for s in (a, b, c)}
    assert titles == {"v3 from a"}
    assert a.canonical_export() == b.canonical_export() == c.canonical_export()


def test_hard_delete_tombstone_beats_an_older_upsert_arriving_late(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    obs = a.add_observation(title="t", content="secret", project="p").observation
    upserts = [e.record for e in a.journal.pending("x")]
    a.delete_observation(obs.id, hard=True)
    delete = [e.record for e in a.journal.pending("x")][len(upserts) :]
    b.apply_mutations(delete, source="peer:a")
    b.apply_mutations(upserts, source="peer:a")  # older: must not resurrect
    assert b.db.scalar("SELECT COUNT(*) FROM observations") == 0
    assert a.canonical_export() == b.canonical_export()


def test_deleted_text_leaves_the_journal_once_every_target_has_the_delete(make_store) -> None:
    alone = make_store("alone")
    obs = alone.add_observation(title="t", content="secret one", project="p").observation
    alone.delete_observation(obs.id, hard=True)  # no targets at all: blanked at once
    assert all("secret" not in e.record for e in alone.journal.pending("x"))

    a, b = make_store("a"), make_store("b")
    obs = a.add_observation(title="t", content="secret two", project="p").observation
    exchange(a, b)  # a now knows one target, which holds the upsert
    soft = a.add_observation(title="kept", content="secret but only moved", project="p").observation
    a.update_observation(soft.id, project="q")  # leaving a selection is not a delete
    a.delete_observation(obs.id, hard=True)
    assert any("secret two" in e.record for e in a.journal.pending("y"))  # b lacks the delete
    exchange(a, b)
    records = "".join(e.record for e in a.journal.pending("y"))
    assert "secret two" not in records and "secret but only moved" in records
    for replica in (a, b):  # nor in what either keeps for its elided records (issue 18)
        assert "secret two" not in "".join(e.record for e in replica.journal.pending("z"))
        kept = replica.db.rows("SELECT title, content FROM sync_kept_observations")
        assert not any("secret two" in str(tuple(r)) for r in kept)


def test_a_received_text_kept_verbatim_is_blanked_once_every_target_has_the_delete(
    make_store,
) -> None:
    """A received record whose text is not what its row rebuilds to (another writer's
    formatting) is kept verbatim; once a hard delete of its key is held by every target this
    replica knows, its text is blanked."""
    a, b = make_store("a"), make_store("b")
    obs = a.add_observation(title="t", content="secret three", project="p").observation
    spaced = [orjson.dumps(orjson.loads(e.record), option=orjson.OPT_INDENT_2).decode()
              for e in a.journal.pending("b")]  # fmt: skip
    b.apply_mutations(spaced, source="peer:a")
    kept = [r[0] for r in b.db.rows("SELECT record FROM sync_journal") if "secret three" in r[0]]
    assert len(kept) == 1 and kept[0] in spaced  # the exact text, not what b would write
    a.delete_observation(obs.id, hard=True)
    delete = [e.record for e in a.journal.pending("b") if e.op == "delete"]
    b.apply_mutations(delete, source="peer:a")  # peer:a, b's one target, holds the delete
    assert not any("secret three" in r[0] for r in b.db.rows("SELECT record FROM sync_journal"))


def test_stub_session_is_replaced_by_the_real_one(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    a.create_session("s1", "p", "/src/p")
    a.add_observation(title="t", content="c", project="p", session_id="s1")
    session_rec, obs_rec = [e.record for e in a.journal.pending("x")]
    b.apply_mutations([obs_rec], source="peer:a")
    assert b.get_session("s1").directory == ""  # stub
    b.apply_mutations([session_rec], source="peer:a")
    assert b.get_session("s1").directory == "/src/p"
    assert b.canonical_export() == a.canonical_export()


def test_remote_clock_advances_the_local_one(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    a.add_observation(title="t", content="c", project="p")
    record = orjson.loads(a.journal.pending("x")[-1].record)
    # Ahead, but within the allowed drift (10 minutes by default): applied, clock follows.
    future = format_hlc(time.time_ns() // 1_000_000 + 5 * 60_000, 3, record["origin"])
    b.apply_mutations([{**record, "hlc": future}], source="peer:a")
    b.add_observation(title="later", content="d", project="p")
    assert b.journal.pending("x")[-1].hlc > future


def test_mutations_are_not_sent_back_where_they_came_from(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    a.add_observation(title="t", content="c", project="p")
    exchange(a, b)
    assert b.journal.count_pending(f"peer:{id(a)}") == 0
    assert b.journal.count_pending("peer:someone-else") == 2  # relayed to others


def test_moving_out_of_a_shared_selection_deletes_it_for_that_target(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    obs = a.add_observation(title="t", content="c", project="p").observation
    exchange(a, b, include_personal=False)
    a.update_observation(obs.id, scope="personal")
    exchange(a, b, include_personal=False)
    assert b.get_observation_by_sync_id(obs.sync_id).deleted_at is not None
    assert b.search("t") == []


def test_a_copied_database_gets_a_new_origin(tmp_path) -> None:
    first = Store.open(config=Config(data_dir=tmp_path / "one"))
    origin = first.origin
    first.close()
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    with Store.open(config=Config(data_dir=tmp_path / "one")) as same:
        assert same.origin == origin
    with Store.open(config=Config(data_dir=tmp_path / "two")) as copy:
        assert copy.origin != origin


def test_random_order_and_duplicates_converge(make_store) -> None:
    rng = random.Random(7)
    a, b = make_store("a"), make_store("b")
    for i in range(20):
        a.add_observation(title=f"t{i}", content=f"c{i}", project="p", topic_key=f"t/{i % 4}")
    for obs in a.recent_observations(limit=5):
        a.delete_observation(obs.id, hard=obs.id % 2 == 0)
    exchange(a, b, rng=rng, duplicate=True)
    assert a.canonical_export() == b.canonical_export()
