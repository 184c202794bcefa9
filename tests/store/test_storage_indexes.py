"""The indexes an import writes, and the reads that need them (issue 18, the import's storage
cost): every lookup that matters still reads an index after an index was narrowed or dropped.

The statements are the ones the store really runs (captured with SQLite's trace callback while
the store does the work), planned with ``EXPLAIN QUERY PLAN``: no copy of their SQL here that
could drift from the code.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from engram.settings import Config
from engram.store import Store
from engram.store.schema import MIGRATIONS, SCHEMA_VERSION, migration_hash_prefix
from tests.support.trace import traced


def plan(store: Store, sql: str) -> str:
    return " | ".join(r[3] for r in store.db.rows(f"EXPLAIN QUERY PLAN {sql}"))


def statement(seen: list[str], test: Callable[[str], bool]) -> str:
    found = [s for s in seen if test(" ".join(s.split()))]
    assert found, seen
    return found[0]


def test_the_dedupe_lookup_of_a_save_reads_the_hash_prefix_index(store: Store) -> None:
    store.add_observation(title="t", content="the build uses make", project="acme")
    with traced(store) as seen:
        again = store.add_observation(title="t", content="The  build uses MAKE", project="acme")
    assert again.action == "deduplicated"  # same normalized content, in the window
    lookup = statement(seen, lambda s: s.startswith("SELECT id, sync_id FROM observations WHERE"))
    assert "USING INDEX observations_dedupe" in plan(store, lookup)


def test_the_passive_capture_lookup_reads_the_hash_prefix_index(store: Store) -> None:
    store.add_observation(title="x", content="Always pin the lockfile", project="acme")
    with traced(store) as seen:
        result = store.capture_passive(
            "## Key Learnings:\n1. Always pin the lockfile\n2. Run the linter first", project="acme"
        )
    assert (result.extracted, result.duplicates) == (2, 1)
    lookup = statement(seen, lambda s: s.startswith("SELECT 1 FROM observations WHERE substr("))
    assert "USING INDEX observations_dedupe" in plan(store, lookup)


def test_a_hash_prefix_shared_by_other_rows_does_not_dedupe(store: Store) -> None:
    """The index holds 12 digits of the hash: rows sharing them but not the whole hash, or in
    another project, are read and set aside, never merged."""
    first = store.add_observation(title="t", content="alpha", project="acme").observation
    digest = store.db.scalar("SELECT normalized_hash FROM observations WHERE id = ?", (first.id,))
    # Another memory whose stored hash shares the prefix (as a collision would).
    other = store.add_observation(title="t", content="beta", project="acme").observation
    store.db.conn.execute(
        "UPDATE observations SET normalized_hash = ? WHERE id = ?",
        (digest[:12] + "0" * 52, other.id),
    )
    elsewhere = store.add_observation(title="t", content="alpha", project="other")
    assert elsewhere.action == "created"  # another project: its own memory
    gamma = store.add_observation(title="t", content="gamma", project="acme")
    assert gamma.action == "created"
    store.db.conn.execute(  # gamma's hash now shares alpha's prefix, not its whole hash
        "UPDATE observations SET normalized_hash = ? WHERE id = ?",
        (digest[:12] + "f" * 52, gamma.observation.id),
    )
    again = store.add_observation(title="t", content="alpha", project="acme")
    assert again.action == "deduplicated" and again.observation.id == first.id
    assert again.observation.duplicate_count == 2
    assert store.get_observation(other.id).duplicate_count == 1


def test_a_store_before_the_migration_gets_the_narrow_index(tmp_path) -> None:
    config = Config(data_dir=tmp_path / "old")
    with Store.open(config=config) as store:
        saved = store.add_observation(title="t", content="kept across", project="acme").observation
        conn = store.db.conn
        conn.execute("DROP INDEX observations_dedupe")
        conn.execute("CREATE INDEX observations_dedupe ON observations(normalized_hash, project)")
        conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(migration_hash_prefix)}")
    with Store.open(config=config) as store:
        assert store.db.scalar("PRAGMA user_version") == SCHEMA_VERSION
        ddl = store.db.scalar("SELECT sql FROM sqlite_master WHERE name = 'observations_dedupe'")
        assert "substr(normalized_hash, 1, 12)" in str(ddl)
        again = store.add_observation(title="t", content="kept  across", project="acme")
        assert again.action == "deduplicated" and again.observation.id == saved.id


def test_the_journal_mints_its_mids_in_time_order(store: Store) -> None:
    """New records land together at the end of the journal's unique mid index (and the
    cloud's), instead of on most of its pages: a burst of writes mints mids whose clock part
    never goes back, each still 32 lowercase hex digits with 80 random bits after the clock."""
    for n in range(60):
        store.add_observation(title=f"t{n}", content=f"note number {n}", project="acme")
    mids = [r[0] for r in store.db.rows("SELECT mid FROM sync_journal ORDER BY seq")]
    assert len(mids) >= 60 and len(set(mids)) == len(mids)
    assert all(len(m) == 32 and m == m.lower() and int(m, 16) >= 0 for m in mids)
    clocks = [m[:12] for m in mids]
    assert clocks == sorted(clocks)
    assert len({m[12:] for m in mids}) == len(mids)  # the random part differs within a ms too


def test_a_received_mid_is_never_read_as_a_clock(make_store) -> None:
    """Time order is how this store mints mids, not a rule for others': a received record whose
    mid is any 32 hex digits — random (other tools, older versions), or with a "clock" far ahead
    or at zero — applies as before, and applying it again is still a no-op."""
    source, dest = make_store("source"), make_store("dest")
    for n in range(3):
        source.add_observation(title=f"t{n}", content=f"note {n}", project="acme")
    texts = [e.record for e in source.journal.pending("git:/x")]
    mids = ["f" * 32, "0" * 32, "9a3c5e7f0b1d2c4e6a8f0b2d4c6e8a1f"]
    records = [orjson.loads(t) for t in texts if orjson.loads(t)["entity"] == "observation"]
    assert len(records) == len(mids)
    for record, mid in zip(records, mids, strict=True):
        record["mid"] = mid
    for _ in range(2):
        dest.apply_mutations(records, source="git:/x")
        held = [r[0] for r in dest.db.rows("SELECT mid FROM sync_journal ORDER BY seq")]
        assert sorted(m for m in held if m in mids) == sorted(mids)
    assert len(dest.search("note", project="acme")) == 3
