"""Issue 18 (the import, sixth round): a record received through a target counts as held by that
target because the journal row says where it came from (``sync_journal.source``), not because
of a delivery row. What every reader of "delivered" and "pending" sees must be what the delivery
rows said before: never sent back where it came from, sent everywhere else, purge's blanking
waits for every target, a target that lost what we sent gets it again, and an existing store
loses the rows that only repeated the source (engram/store/journal.py, migration
``migration_delivery_by_source``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.settings import Config
from engram.store import Store
from engram.store.replication import BULK_RECORDS
from engram.store.schema import MIGRATIONS, SCHEMA_VERSION, migration_delivery_by_source
from tests.store.test_storage_indexes import plan
from tests.support.trace import traced


def records_of(store: Store) -> list[str]:
    """Every record of ``store``'s journal, as it travels."""
    return [e.record for e in store.journal.pending("nowhere")]


def delivery_rows(store: Store) -> list[tuple[str, str]]:
    return [
        (r[0], r[1])
        for r in store.db.rows(
            "SELECT d.target, j.mid FROM sync_delivery d JOIN sync_journal j USING (seq)"
            " ORDER BY d.target, d.seq"
        )
    ]


def seqs(store: Store, source: str) -> list[int]:
    return [r[0] for r in store.db.rows("SELECT seq FROM sync_journal WHERE source = ?", (source,))]


def saved(store: Store, count: int, project: str = "acme", word: str = "walrus") -> None:
    for i in range(count):
        store.add_observation(title=f"{word} {i}", content=f"{word} note {i}", project=project)


@pytest.mark.parametrize("count", [3, BULK_RECORDS + 10], ids=["one-by-one", "bulk"])
def test_a_received_record_is_never_sent_back_to_its_source_but_is_to_others(
    make_store: Callable[[str], Store], count: int
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    saved(alice, count)
    records = records_of(alice)
    result = bob.apply_mutations(records, source="git:/a/.engram")
    assert result.observations == count
    assert delivery_rows(bob) == []  # no row repeats where a record came from
    assert bob.journal.pending("git:/a/.engram") == []
    assert bob.journal.count_pending("git:/a/.engram") == 0
    assert bob.journal.count_pending("git:/a/.engram", projects=["acme"]) == 0
    for other in ("git:/b/.engram", "cloud:http://server"):
        assert [e.record for e in bob.journal.pending(other)] == records
        assert bob.journal.count_pending(other, projects=["acme"]) == len(records)
    assert bob.journal.targets() == ["git:/a/.engram"]
    # Delivered to another target: held by both, pending nowhere.
    bob.journal.mark_delivered("cloud:http://server", seqs(bob, "git:/a/.engram"))
    assert bob.journal.count_pending("cloud:http://server") == 0
    assert {t for t, _ in delivery_rows(bob)} == {"cloud:http://server"}
    assert bob.journal.targets() == ["cloud:http://server", "git:/a/.engram"]


def test_a_record_arriving_from_two_sources_is_held_by_both(
    make_store: Callable[[str], Store],
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    saved(alice, BULK_RECORDS + 5)
    records = records_of(alice)
    bob.apply_mutations(records, source="git:/a/.engram")
    again = bob.apply_mutations(records, source="cloud:http://server")
    assert again.duplicates == len(records)
    for target in ("git:/a/.engram", "cloud:http://server"):
        assert bob.journal.count_pending(target) == 0
    assert bob.journal.count_pending("git:/c/.engram") == len(records)
    # The second source needs its rows (the journal names only the first); the first none.
    assert {t for t, _ in delivery_rows(bob)} == {"cloud:http://server"}
    assert len(delivery_rows(bob)) == len(records)
    # Importing again through either changes nothing (idempotent).
    before = delivery_rows(bob)
    bob.apply_mutations(records, source="git:/a/.engram")
    bob.apply_mutations(records, source="cloud:http://server")
    assert delivery_rows(bob) == before
    assert bob.journal.mark_delivered("git:/a/.engram", seqs(bob, "git:/a/.engram")) == 0
    assert delivery_rows(bob) == before


def test_a_target_name_in_a_record_cannot_suppress_delivery_elsewhere(
    make_store: Callable[[str], Store],
) -> None:
    """Where a record came from is what the transport says, never what the record says: a
    record naming another target (in its title, text or session) is still sent there."""
    alice, bob = make_store("alice"), make_store("bob")
    alice.create_session("cloud:http://server", "acme", "/src/acme")
    alice.add_observation(title="cloud:http://server", content="source git:/b/.engram",
                          project="acme", session_id="cloud:http://server")  # fmt: skip
    records = records_of(alice)
    result = bob.apply_mutations(records, source="git:/a/.engram")
    assert result.quarantined_total == 0
    assert len(seqs(bob, "git:/a/.engram")) == len(records)
    for target in ("cloud:http://server", "git:/b/.engram"):
        assert bob.journal.count_pending(target) == len(records)
    assert bob.journal.count_pending("git:/a/.engram") == 0


def test_a_forgotten_target_gets_what_it_sent_again_and_later_records_are_held(
    make_store: Callable[[str], Store],
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    saved(alice, 3)
    first = records_of(alice)
    bob.apply_mutations(first, source="git:/a/.engram")
    bob.journal.forget_target("git:/a/.engram")  # its chunk files vanished
    assert bob.journal.count_pending("git:/a/.engram") == len(first)
    bob.journal.mark_delivered("git:/a/.engram", seqs(bob, "git:/a/.engram"))
    assert bob.journal.count_pending("git:/a/.engram") == 0
    saved(alice, 2, word="otter")
    later = [r for r in records_of(alice) if r not in first]
    bob.apply_mutations(later, source="git:/a/.engram")
    assert bob.journal.count_pending("git:/a/.engram") == 0
    assert bob.journal.count_pending("git:/b/.engram") == len(first) + len(later)
    assert len(delivery_rows(bob)) == len(first)  # the rows sent again; none for the new ones


def test_forgetting_one_delivery_of_a_received_record_sends_it_again(
    make_store: Callable[[str], Store],
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    saved(alice, 3)
    bob.apply_mutations(records_of(alice), source="cloud:http://server")
    first = seqs(bob, "cloud:http://server")[0]
    bob.journal.forget_delivered("cloud:http://server", [first])
    assert first in [e.seq for e in bob.journal.pending("cloud:http://server")]


def journal_texts(store: Store) -> str:
    """Every text the journal keeps (records and the states kept for elided ones)."""
    rows = store.db.rows("SELECT record FROM sync_journal")
    kept = store.db.rows("SELECT title, content FROM sync_kept_observations")
    return " ".join([r[0] for r in rows] + [f"{r[0]} {r[1]}" for r in kept])


def test_blanking_a_received_delete_waits_for_every_target_but_not_for_its_source(
    make_store: Callable[[str], Store],
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    oid = alice.add_observation(title="Token", content="zebrafish-4471", project="p").observation.id
    alice.add_observation(title="Other", content="walrus-99 stays", project="p")
    alice.update_observation(oid, content="zebrafish-4471 edited")
    bob.apply_mutations(records_of(alice), source="git:/a/.engram")
    bob.journal.mark_delivered("cloud:http://server", seqs(bob, "git:/a/.engram"))
    held = set(records_of(alice))
    alice.delete_observation(oid, hard=True)
    bob.apply_mutations([r for r in records_of(alice) if r not in held], source="git:/a/.engram")
    # The source holds the delete; the cloud does not yet: the old text stays for it.
    assert "zebrafish-4471 edited" in journal_texts(bob)
    pending = bob.journal.pending("cloud:http://server")
    assert [e.op for e in pending] == ["delete"]
    bob.journal.mark_delivered("cloud:http://server", [e.seq for e in pending])
    assert "zebrafish" not in journal_texts(bob)
    assert any("walrus-99 stays" in e.record for e in bob.journal.pending("git:/z"))  # kept


def test_blanking_a_received_delete_with_only_its_source_as_target_is_at_once(
    make_store: Callable[[str], Store],
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    oid = alice.add_observation(title="Token", content="zebrafish-4471", project="p").observation.id
    bob.apply_mutations(records_of(alice), source="git:/a/.engram")
    held = set(records_of(alice))
    alice.delete_observation(oid, hard=True)
    bob.apply_mutations([r for r in records_of(alice) if r not in held], source="git:/a/.engram")
    assert bob.journal.targets() == ["git:/a/.engram"]
    assert "zebrafish" not in journal_texts(bob)


def test_a_local_delete_is_blanked_only_once_a_source_only_target_holds_it(
    make_store: Callable[[str], Store],
) -> None:
    """A target this store only ever received from is still a target: a local hard delete
    keeps its earlier text until that target holds the delete."""
    alice, bob = make_store("alice"), make_store("bob")
    saved(alice, 1)
    bob.apply_mutations(records_of(alice), source="git:/a/.engram")
    oid = bob.add_observation(title="Token", content="zebrafish-4471", project="p").observation.id
    bob.delete_observation(oid, hard=True)
    assert "zebrafish" in journal_texts(bob)
    pending = bob.journal.pending("git:/a/.engram")
    bob.journal.mark_delivered("git:/a/.engram", [e.seq for e in pending])
    assert "zebrafish" not in journal_texts(bob)


def old_style(store: Store) -> None:
    """Make ``store`` what the version before the migration wrote: a delivery row for every
    received record's source, no target list."""
    conn = store.db.conn
    conn.execute(
        "INSERT OR IGNORE INTO sync_delivery(target, seq, delivered_at)"
        " SELECT source, seq, '2026-01-01 00:00:00' FROM sync_journal WHERE source != 'local'"
    )
    conn.execute("DROP TABLE sync_targets")
    conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(migration_delivery_by_source)}")


def old_pending(store: Store, target: str) -> int:
    """What the version before the migration counted as pending for ``target``."""
    return int(
        store.db.scalar(
            "SELECT COUNT(*) FROM sync_journal j WHERE NOT EXISTS"
            " (SELECT 1 FROM sync_delivery d WHERE d.target = ? AND d.seq = j.seq)",
            (target,),
        )
    )


TARGETS = ["cloud:http://server", "git:/a/.engram", "git:/f/.engram", "git:/new/.engram"]


def test_the_migration_drops_the_rows_that_repeat_the_source_and_resends_nothing(
    tmp_path, make_store: Callable[[str], Store]
) -> None:
    alice = make_store("alice")
    saved(alice, 4)
    records = records_of(alice)
    config = Config(data_dir=tmp_path / "old")
    with Store.open(config=config) as store:
        store.apply_mutations(records[:2], source="git:/a/.engram")
        store.apply_mutations(records[2:], source="git:/f/.engram")
        store.apply_mutations(records, source="cloud:http://server")  # relayed: rows needed
        saved(store, 2, project="mine", word="otter")
        local = seqs(store, "local")
        store.journal.mark_delivered("git:/a/.engram", local[:1])
        old_style(store)
        # A target forgotten before the migration: what it sent waits to be sent again.
        store.db.conn.execute("DELETE FROM sync_delivery WHERE target = 'git:/f/.engram'")
        assert len(delivery_rows(store)) == len(records) + 2 + 1
        before = {t: old_pending(store, t) for t in TARGETS}
    assert before == {"cloud:http://server": len(local), "git:/a/.engram": len(records) - 2 + len(local) - 1,
                      "git:/f/.engram": len(records) + len(local),
                      "git:/new/.engram": len(records) + len(local)}  # fmt: skip
    with Store.open(config=config) as store:
        assert store.db.scalar("PRAGMA user_version") == SCHEMA_VERSION
        rows = delivery_rows(store)
        # Only the rows that repeated a record's source are gone.
        assert [t for t, _ in rows] == ["cloud:http://server"] * len(records) + ["git:/a/.engram"]
        assert {t: store.journal.count_pending(t) for t in TARGETS} == before
        assert store.journal.targets() == TARGETS[:3]
        store.db.conn.execute(
            f"PRAGMA user_version = {MIGRATIONS.index(migration_delivery_by_source)}"
        )
    with Store.open(config=config) as store:  # run again: idempotent
        assert delivery_rows(store) == rows
        assert {t: store.journal.count_pending(t) for t in TARGETS} == before


def test_pending_reads_stay_on_their_indexes(make_store: Callable[[str], Store]) -> None:
    """What a target lacks is read in journal order (or by the project index), each delivery
    looked up by its key: the source rule reads the row at hand, no new scan."""
    alice, bob = make_store("alice"), make_store("bob")
    saved(alice, 3)
    bob.apply_mutations(records_of(alice), source="git:/a/.engram")
    with traced(bob) as seen:
        bob.journal.pending("cloud:x")
        bob.journal.pending("cloud:x", projects=["acme"])
        bob.journal.count_pending("cloud:x")
        bob.journal.count_pending("cloud:x", projects=["acme"])
    reads = [s for s in seen if "FROM sync_journal j" in s and "sync_delivery" in s]
    assert len(reads) == 4
    for sql in reads:
        found = plan(bob, sql)
        assert "SCAN d" not in found and "SCAN q" not in found, found
        assert "SEARCH d USING PRIMARY KEY" in found, found
        if "j.project IN" in sql:
            assert "USING INDEX sync_journal_project" in found or "USING COVERING" in found, found
