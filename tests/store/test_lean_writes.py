"""Issue 18: what a save costs. A local write's journal record is stored elided (its row is its
payload) and rebuilt byte for byte when a transport reads it; when the row moves on (a newer
write from here or elsewhere, a move, a hard delete) its state is kept for the record, so the
journal still holds every state it replicated. Saves run a bounded number of statements, and
the lookups on the save path read the index meant for them."""

from __future__ import annotations

import orjson
import pytest

from engram.record import STATE_FIELDS, build_record, compact_payload
from engram.store import Store, vector_queue
from engram.sync.cloud import state as cloud_state

from .replicas import converge, exchange

#: One step of a stored importance (rounded to 4 places), with room for float error.
ONE_STEP = 1e-4 + 1e-9


def raw_records(store: Store) -> list[str]:
    return [r[0] for r in store.db.rows("SELECT record FROM sync_journal ORDER BY seq")]


def state_record(store: Store, seq: int) -> str:
    """The record text a journal row must read as: its row's state, in the normative shape."""
    row = store.db.one("SELECT * FROM sync_journal WHERE seq = ?", (seq,))
    table = {"session": "sessions", "observation": "observations", "prompt": "user_prompts"}
    key = "id" if row["entity"] == "session" else "sync_id"
    fields = STATE_FIELDS[row["entity"]]
    found = store.db.one(
        f"SELECT {', '.join(fields)} FROM {table[row['entity']]} WHERE project = ? AND {key} = ?",
        (row["project"], row["key"]),
    )
    payload = dict(zip(fields, tuple(found), strict=True))
    op = "upsert"
    if row["entity"] == "observation":
        payload["pinned"] = bool(payload["pinned"])
        if payload["deleted_at"] is not None:
            op, payload["hard"] = "delete", False
        payload = compact_payload("observation", payload)
    record = build_record(mid=row["mid"], hlc=row["hlc"], origin=row["origin"],
                          entity=row["entity"], key=row["key"], op=op, project=row["project"],
                          scope=payload.get("scope", "project"), payload=payload)  # fmt: skip
    return orjson.dumps(record).decode()


def test_a_local_save_keeps_no_second_copy_of_its_text(store: Store) -> None:
    saved = store.add_observation(
        title="Auth tokens", content="JWT with refresh tokens", project="acme", session_id="s1"
    ).observation
    store.add_prompt("how do we keep people logged in?", session_id="s1", project="acme")
    assert raw_records(store) == ["", "", ""]  # session, memory, prompt: no payload stored
    entries = store.journal.pending("t")
    assert [e.entity for e in entries] == ["session", "observation", "prompt"]
    assert all(e.record == state_record(store, e.seq) for e in entries)
    memory = entries[1].as_record()
    assert memory["payload"]["content"] == "JWT with refresh tokens"
    assert memory["payload"]["sync_id"] == saved.sync_id and memory["op"] == "upsert"
    # The same bytes every time, whatever else is written meanwhile.
    store.add_observation(title="Other", content="unrelated", project="acme")
    assert store.journal.pending("t")[1].record == entries[1].record
    assert store.journal.entry(entries[1].seq).record == entries[1].record


def test_a_soft_delete_reads_as_a_delete_with_the_full_state(store: Store) -> None:
    oid = store.add_observation(title="t", content="c", project="acme").observation.id
    store.delete_observation(oid)
    [_, delete] = [e for e in store.journal.pending("t") if e.entity == "observation"]
    record = delete.as_record()
    assert record["op"] == "delete" and record["payload"]["hard"] is False
    assert record["payload"]["deleted_at"] is not None and record["payload"]["content"] == "c"


def test_a_newer_local_write_keeps_the_state_it_replaced(make_store) -> None:
    """The row moved on twice: the first two records read as they were written (from the kept
    states), and every state reaches a replica, in order."""
    a, b = make_store("a"), make_store("b")
    oid = a.add_observation(title="t", content="v1", project="acme").observation.id
    first = max(e.seq for e in a.journal.pending("t"))
    before = a.journal.entry(first).record
    a.update_observation(oid, content="v2")
    a.update_observation(oid, content="v3")
    assert raw_records(a) == ["", "", "", ""]  # the session and three memory states: no text
    entries = [e for e in a.journal.pending("t") if e.entity == "observation"]
    assert [e.as_record()["payload"]["content"] for e in entries] == ["v1", "v2", "v3"]
    assert a.journal.entry(first).record == before  # byte for byte, after the row moved on
    assert a.db.scalar("SELECT COUNT(*) FROM sync_kept_observations") == 2
    mids = cloud_state.local_mids(a, "cloud:t", "acme")
    assert set(mids.values()) == {e.seq for e in a.journal.pending("t")}
    exchange(a, b)
    converge([a, b])
    assert b.get_observation_by_sync_id(entries[0].key, project="acme").content == "v3"
    assert a.canonical_export() == b.canonical_export()


def test_a_hard_delete_keeps_earlier_states_until_blanked(store: Store) -> None:
    """Like a record stored with its text: the state a hard delete removes stays readable for
    the record until every target holds the delete, then its text is blanked."""
    oid = store.add_observation(title="secret plan", content="launch on friday", project="acme")
    seq = max(e.seq for e in store.journal.pending("t"))
    store.delete_observation(oid.observation.id, hard=True)  # no targets: blanked at once
    payload = orjson.loads(store.journal.entry(seq).record)["payload"]
    assert (payload["title"], payload["content"]) == ("[deleted]", "[deleted]")
    assert payload["sync_id"] == oid.observation.sync_id


def test_the_kept_state_tables_hold_every_replicated_field() -> None:
    """A replicated field added later must be kept too (a new migration adds the column)."""
    from engram.store.journal import ENTITY_TABLES
    from engram.store.schema import KEPT_FIELDS

    # (Relations are journaled with their text: nothing is kept for them.)
    assert {entity: tuple(STATE_FIELDS[entity]) for entity in ENTITY_TABLES} == KEPT_FIELDS


def test_a_journal_row_deleted_takes_its_kept_state_along(store: Store) -> None:
    oid = store.add_observation(title="t", content="v1", project="acme").observation.id
    store.update_observation(oid, content="v2")
    seq = store.db.scalar("SELECT seq FROM sync_kept_observations")
    with store.db.write() as conn:
        conn.execute("DELETE FROM sync_journal WHERE seq = ?", (seq,))
    assert store.db.scalar("SELECT COUNT(*) FROM sync_kept_observations") == 0


def test_a_record_already_sent_stays_held_where_it_went(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    oid = a.add_observation(title="t", content="v1", project="acme").observation.id
    exchange(a, b)  # b holds v1
    a.update_observation(oid, content="v2")
    assert [e.as_record()["payload"]["content"] for e in a.journal.pending("fresh")
            if e.entity == "observation"] == ["v1", "v2"]  # fmt: skip
    assert [e.as_record()["payload"]["content"] for e in a.journal.pending(f"peer:{id(b)}")
            if e.entity == "observation"] == ["v2"]  # fmt: skip
    exchange(a, b)
    assert a.canonical_export() == b.canonical_export()
    assert b.get_observation_by_sync_id(a.get_observation(oid).sync_id, project="acme").content == (
        "v2"
    )


def test_a_record_from_elsewhere_never_costs_this_replica_its_own_write(make_store) -> None:
    """a's unsent write is overwritten by a newer one from b: a's record keeps its state, so a
    target that has neither still receives a's write (and b's)."""
    a, b = make_store("a"), make_store("b")
    saved = a.add_observation(title="t", content="from a", project="acme").observation
    exchange(a, b)
    b.update_observation(
        b.get_observation_by_sync_id(saved.sync_id, project="acme").id, content="from b"
    )
    mine = max(e.seq for e in a.journal.pending("third") if e.key == saved.sync_id)
    assert a.db.scalar("SELECT record FROM sync_journal WHERE seq = ?", (mine,)) == ""
    exchange(b, a)  # b's newer write replaces a's row
    assert orjson.loads(a.journal.entry(mine).record)["payload"]["content"] == "from a"
    contents = [
        e.as_record()["payload"]["content"]
        for e in a.journal.pending("third")
        if e.key == saved.sync_id
    ]
    assert contents == ["from a", "from b"]
    assert a.get_observation(saved.id).content == "from b"


def test_records_written_with_their_text_still_read_as_written(store: Store) -> None:
    """Journals written before records were elided keep their text, and read as it."""
    store.add_observation(title="t", content="c", project="acme")
    seq = max(e.seq for e in store.journal.pending("t"))
    text = store.journal.entry(seq).record
    with store.db.write() as conn:
        conn.execute("UPDATE sync_journal SET record = ? WHERE seq = ?", (text, seq))
    store.update_observation(1, content="changed")  # the old record keeps its own text
    assert [e.record for e in store.journal.pending("t") if e.seq == seq] == [text]


def test_a_save_runs_few_statements(store: Store) -> None:
    store.add_observation(title="a", content="first", project="acme")  # the project exists
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        store.add_observation(title="b", content="second", project="acme")
    finally:
        store.db.conn.set_trace_callback(None)
    ours = [s for s in seen if not s.startswith("--")]  # (FTS5's own statements start so)
    # BEGIN, session, dedupe, clock read and write, row, FTS, vector queue, journal, the
    # graph's conflict-check queue (the check itself runs off the save path), COMMIT.
    assert len(ours) <= 11, ours
    assert not any("sync_tombstones" in s for s in ours)  # a fresh random key has none
    assert not any(s.startswith("SELECT *") for s in ours)  # no read-back of what it wrote


def plan(store: Store, sql: str, params: tuple) -> str:
    return " ".join(r[3] for r in store.db.rows(f"EXPLAIN QUERY PLAN {sql}", params))


def test_save_path_lookups_read_their_own_index(store: Store) -> None:
    """Without statistics SQLite preferred the project's time index for the dedupe and session
    lookups, reading every memory of the project saved in the window."""
    dedupe = plan(
        store,
        """SELECT id, sync_id FROM observations
           WHERE substr(normalized_hash, 1, 12) = ? AND +normalized_hash = ? AND +project = ?
             AND scope = ? AND type = ? AND title = ? AND +created_at >= ? AND deleted_at IS NULL
           ORDER BY +created_at DESC, id DESC LIMIT 1""",
        ("h", "h", "acme", "project", "manual", "t", "2026-01-01 00:00:00"),
    )
    assert "observations_dedupe" in dedupe
    led = plan(
        store,
        """SELECT id FROM observations WHERE session_id = ? AND project = ?
             AND deleted_at IS NULL AND created_at >= ? AND created_at <= ?""",
        ("s1", "acme", "2026-01-01 00:00:00", "2026-01-02 00:00:00"),
    )
    assert "observations_session" in led


def test_a_received_record_is_stored_elided_when_its_row_rebuilds_it(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    a.add_observation(title="t", content="from a", project="acme", session_id="s1")
    sent = [e.record for e in a.journal.pending("b")]
    b.apply_mutations(sent, source="peer:a")
    assert raw_records(b) == ["", ""]  # b's rows are the payloads, byte for byte
    assert [e.record for e in b.journal.pending("elsewhere")] == sent  # relayed as received
    assert b.journal.pending("peer:a") == []  # never sent back where it came from


def test_strict_search_ranks_a_word_itself_above_prefix_only_rows(store: Store) -> None:
    """All-words search ranks tier 1 without telling words from prefixes row by row; a row
    holding the words only as prefixes (here with a better BM25) must still come second."""
    filler = " ".join(f"word{i}" for i in range(300))  # a long text: a weaker BM25
    exact = store.add_observation(title="Note", content=f"zebraf sighting {filler}", project="p")
    prefix = store.add_observation(
        title="Zebrafish", content="zebrafish zebrafish zebrafish zebrafish", project="p"
    )
    for i in range(3):  # other rows, so BM25 has something to weigh
        store.add_observation(title=f"Other {i}", content="unrelated text", project="p")
    found = store.search("zebraf", match_mode="all", mode="lexical")
    assert [(o.id, o.match.tier) for o in found] == [
        (exact.observation.id, "words"),
        (prefix.observation.id, "prefix"),
    ]


def contexts(store: Store) -> dict[str, str]:
    return {r[0]: r[1] for r in store.db.rows("SELECT sync_id, search_context FROM observations")}


def test_a_bulk_apply_derives_the_same_contexts_as_saving_one_by_one(make_store) -> None:
    """A batch of many records (an import's chunk) inserts its memories unindexed and derives
    their sessions' contexts at the end: the same contexts, index and vector queue as the
    replica that saved them one by one, in any arrival order, with edits and deletes of the new
    rows inside the batch."""
    from engram.store.replication import BULK_RECORDS

    a = make_store("a")
    ids = []
    for i in range(BULK_RECORDS + 10):
        if i % 7 == 0:
            a.add_prompt(f"how do we handle case {i}?", session_id=f"s{i // 20}", project="p")
        ids.append(a.add_observation(title=f"Memory {i}", content=f"walrus fact number {i}",
                                     project="p", session_id=f"s{i // 20}").observation.id)  # fmt: skip
    a.update_observation(ids[3], content="walrus fact three, edited")
    a.delete_observation(ids[5])  # soft
    a.delete_observation(ids[8], hard=True)
    records = [e.record for e in a.journal.pending("x")]
    assert len(records) >= BULK_RECORDS
    for order in (records, records[::-1]):
        b = make_store(f"b{len(order)}{order[0][:8]}")
        b.apply_mutations(order, source="peer:a")
        assert contexts(b) == contexts(a)
        assert b.canonical_export() == a.canonical_export()
        b.db.conn.execute(
            "INSERT INTO observations_fts(observations_fts, rank) VALUES ('integrity-check', 1)"
        )
        live = b.db.rows("SELECT id FROM observations WHERE deleted_at IS NULL")
        with b.db.write() as conn:  # what the vectorizer takes up when it starts
            vector_queue.QUEUE.take_new(conn)
        queued = b.db.rows("SELECT obs_id FROM vector_pending")
        assert {r[0] for r in live} <= {r[0] for r in queued}
        assert [o.title for o in b.search("walrus fact three edited", limit=1)] == ["Memory 3"]


def test_any_word_search_ranks_own_text_above_context_only_rows(store: Store) -> None:
    """The usual search ranks tier 1 with one BM25 per row; a row matching only through its
    session context (here scored among the best) must still come after every row holding the
    word in its own text."""
    filler = " ".join(f"word{i}" for i in range(300))  # long texts: weak BM25
    own = [
        store.add_observation(title=f"Note {i}", content=f"walrus {i} {filler}", project="p")
        for i in range(11)
    ]
    first = store.add_observation(title="Walrus", content="walrus", project="p", session_id="s1")
    later = store.add_observation(title="Short", content="tiny", project="p", session_id="s1")
    found = store.search("walrus", mode="lexical", limit=13)
    assert [o.match.tier for o in found] == ["words"] * 12 + ["context"]
    assert found[0].id == first.observation.id and found[-1].id == later.observation.id
    assert {o.id for o in found[1:12]} == {s.observation.id for s in own}


def test_an_imported_document_is_journaled_elided_with_the_same_records(make_store) -> None:
    """``engram import`` journals each row with a deterministic legacy record: stored elided
    (the row is its payload), read back as exactly the record every machine writes."""
    from engram.record import legacy_record

    doc = {
        "version": "0.1.0",
        "sessions": [{"id": "s1", "project": "acme", "directory": "/src", "started_at":
                      "2026-01-01 10:00:00", "ended_at": None, "summary": None}],
        "observations": [{"id": 1, "sync_id": "obs-1", "session_id": "s1", "type": "decision",
                          "title": "T", "content": "C", "tool_name": None, "project": "acme",
                          "scope": "project", "topic_key": None, "revision_count": 1,
                          "duplicate_count": 1, "last_seen_at": None,
                          "created_at": "2026-01-01 10:00:01",
                          "updated_at": "2026-01-01 10:00:01", "deleted_at": None}],
        "prompts": [],
    }  # fmt: skip
    a, b = make_store("a"), make_store("b")
    for store in (a, b):
        store.import_data(doc)
        assert set(raw_records(store)) == {""}
    memory = next(e for e in a.journal.pending("t") if e.entity == "observation")
    state = {k: v for k, v in doc["observations"][0].items() if k != "id"}
    expected = legacy_record(entity="observation", op="upsert", payload=state,
                             updated_at=state["updated_at"], project="acme", scope="project")  # fmt: skip
    assert memory.as_record() == expected
    assert [e.record for e in a.journal.pending("t")] == [e.record for e in b.journal.pending("t")]


def test_every_word_search_scores_one_phrase_per_word(store: Store) -> None:
    """A word's prefix phrase matches the word itself too (its Porter stem starts it), so the
    every-word statement asks for one phrase per word: the same rows as asking for both forms,
    at about half the BM25 work (the exact phrase is only used to tell tiers apart)."""
    saved = [
        store.add_observation(title=t, content=c, project="p")
        for t, c in (("Limiter", "the rate limiter and the zebraf"),
                     ("Limits", "limiting the zebrafish"), ("Other", "the limiter works"))
    ]  # fmt: skip
    for word in ("limiter", "regression", "running", "authentication", "databases"):
        both = store.db.scalar(
            "SELECT count(*) FROM observations_fts WHERE observations_fts MATCH ?",
            (f'"{word}" NOT "{word}"*',),
        )
        assert both == 0  # nothing holds the word without its prefix form
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        found = store.search("limiter zebraf", match_mode="all", mode="lexical")
    finally:
        store.db.conn.set_trace_callback(None)
    ranking = [s for s in seen if "observations_fts MATCH" in s]
    assert ranking and all('"limiter" OR' not in s for s in ranking), ranking
    assert {o.id for o in found} == {saved[0].observation.id, saved[1].observation.id}
    explained = {o.id: o.match.prefix_words for o in found}  # still told apart there
    assert explained == {saved[0].observation.id: [], saved[1].observation.id: ["zebraf"]}


def test_a_bulk_apply_without_relations_scores_rows_as_it_inserts_them(make_store) -> None:
    """No relation can name a memory of a store that holds none, so a bulk apply scores each
    new row in its INSERT (no UPDATE with the scoring function at the end), and the scores are
    the ones a full rescore gives."""
    from engram.store import scoring
    from engram.store.replication import BULK_RECORDS

    a, b = make_store("a"), make_store("b")
    for i in range(BULK_RECORDS + 5):
        a.add_observation(title=f"Memory {i}", content="walrus " * (i * 10 + 1), type="decision",
                          project="p", topic_key=f"topic/{i}" if i % 3 else None)  # fmt: skip
    seen: list[str] = []
    b.db.conn.set_trace_callback(seen.append)
    try:
        b.apply_mutations([e.record for e in a.journal.pending("x")], source="peer:a")
    finally:
        b.db.conn.set_trace_callback(None)
    assert not any("engram_importance" in s for s in seen)
    stored = dict(b.db.rows("SELECT id, importance FROM observations"))
    with b.db.write() as conn:
        scoring.rescore_where(conn, "1")
    rescored = dict(b.db.rows("SELECT id, importance FROM observations"))
    assert stored.keys() == rescored.keys() and all(v is not None for v in stored.values())
    # Scores are rounded to 4 places (importance.py) at two instants a moment apart: recency
    # moves by ~3e-8 a second, enough to round to the neighbouring step now and then.
    assert all(abs(stored[k] - rescored[k]) <= ONE_STEP for k in stored)


def test_an_import_scores_its_memories_as_it_inserts_them(make_store) -> None:
    """``engram import`` into a store without relations scores each memory in its INSERT (no
    UPDATE with the scoring function at the end), the scores a full rescore gives; a document's
    relations still rescore their ends."""
    from engram.store import scoring

    a = make_store("a")
    for i in range(6):
        a.add_observation(title=f"Memory {i}", content="walrus " * (i * 40 + 1), type="decision",
                          project="p", topic_key=f"topic/{i}" if i % 2 else None)  # fmt: skip
    doc = a.export_data()
    b = make_store("b")
    seen: list[str] = []
    b.db.conn.set_trace_callback(seen.append)
    try:
        b.import_data(doc)
    finally:
        b.db.conn.set_trace_callback(None)
    assert not any("engram_importance" in s for s in seen)
    stored = dict(b.db.rows("SELECT id, importance FROM observations"))
    with b.db.write() as conn:
        scoring.rescore_where(conn, "1")
    rescored = dict(b.db.rows("SELECT id, importance FROM observations"))
    assert len(stored) == 6 and all(abs(stored[k] - rescored[k]) <= ONE_STEP for k in stored)


def test_memories_built_from_rows_by_position_equal_those_built_by_name(store: Store) -> None:
    """Observation.from_rows (what search builds its results with) reads columns by position,
    looked up once per statement: it must give what reading each field by name gives, with or
    without the intent columns and a rank."""
    from engram.store.models import NO_INTENT, Observation, _intent

    store.add_observation(title="a", content="one", project="p")
    saved = store.add_observation(title="b", content="two", project="p", topic_key="t/b")
    store.update_observation(saved.observation.id, pinned=True, importance=0.75)
    conn = store.db.conn

    def by_name(row) -> Observation:
        keys = row.keys()
        intent = _intent(row) if "pinned" in keys else NO_INTENT
        fields = {f: row[f] for f in Observation.__struct_fields__[:16]}
        return Observation(**fields, **intent, rank=row["rank"] if "rank" in keys else None)

    for sql in (
        "SELECT * FROM observations ORDER BY id",
        "SELECT o.*, -1.5 AS rank FROM observations o ORDER BY id",
        "SELECT id, sync_id, session_id, type, title, content, tool_name, project, scope,"
        " topic_key, revision_count, duplicate_count, last_seen_at, created_at, updated_at,"
        " deleted_at FROM observations ORDER BY id",
    ):
        rows = conn.execute(sql).fetchall()
        expected = [by_name(r) for r in rows]
        assert Observation.from_rows(rows) == expected
        assert [Observation.from_row(r) for r in rows] == expected
    pinned = Observation.from_rows(conn.execute("SELECT * FROM observations").fetchall())[1]
    assert pinned.importance == 0.75 and pinned.pinned is True
    assert Observation.from_rows([]) == []


def test_the_write_ahead_log_is_checkpointed_every_few_thousand_pages(store: Store) -> None:
    """A save writes ~25 pages: checkpointing at SQLite's default 1,000 cost a burst of saves a
    tenth of its CPU; a log grown by one large transaction is cut back after its checkpoint."""
    from engram.store.db import WAL_CHECKPOINT_PAGES, WAL_LIMIT_BYTES

    assert store.db.one("PRAGMA wal_autocheckpoint")[0] == WAL_CHECKPOINT_PAGES >= 4000
    assert store.db.one("PRAGMA journal_size_limit")[0] == WAL_LIMIT_BYTES > 0


def test_a_search_reads_its_ranking_and_relation_notes_in_one_transaction(
    store: Store,
) -> None:
    for i in range(5):
        store.add_observation(title=f"redis note {i}", content="pool size", project="acme")
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        found = store.search("redis pool", mode="lexical", record_access=False)
    finally:
        store.db.conn.set_trace_callback(None)
    assert len(found) == 5
    assert [s for s in seen if s.startswith("BEGIN")] == ["BEGIN"], seen


def test_a_save_suggests_a_topic_key_only_when_asked(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suggestion (for saves without a topic key) is shown by some faces, never needed by
    the save itself: worked out when read, off the save path."""
    import engram.text

    calls: list[tuple[str, ...]] = []
    real = engram.text.suggest_topic_key

    def counted(*args: str) -> str:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(engram.text, "suggest_topic_key", counted)
    saved = store.add_observation(
        title="Fixed login timeout", content="raised the TTL", type="bugfix", project="acme"
    )
    assert calls == []
    assert saved.suggested_topic_key == real("bugfix", "Fixed login timeout", "raised the TTL")
    assert saved.to_dict()["suggested_topic_key"] == saved.suggested_topic_key
    assert calls and set(calls) == {("bugfix", "Fixed login timeout", "raised the TTL")}
    topic = store.add_observation(title="a", content="b", project="acme", topic_key="x/y")
    assert topic.suggested_topic_key is None and topic.to_dict()["suggested_topic_key"] is None
