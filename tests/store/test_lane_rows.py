"""Issue 18, the fresh lane's Python (engram/store/fresh_lane.py): the rows a bulk apply
builds for its new memories, journal rows and stub sessions — built with fewer lookups, scored
by one scorer per batch, stub sessions written without looking up the sessions that are here —
are exactly the rows applying the same records one at a time writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engram import importance
from engram.store import scoring

from .test_foreseen_contexts import _record, filler, memory, one_and_bulk
from .test_fresh_lane import written


def session(key: str, *, project: str = "p") -> dict[str, Any]:
    payload = {"id": key, "project": project, "directory": "/src",
               "started_at": "2026-11-01 09:00:00", "ended_at": None, "summary": None}  # fmt: skip
    return _record("session", key, payload, project=project)


def session_delete(key: str, *, project: str = "p") -> dict[str, Any]:
    return _record("session", key, {"id": key, "project": project}, op="delete",
                   project=project)  # fmt: skip


def with_intent(record: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A memory record whose payload also carries intent fields (a pin, an override …)."""
    record["payload"].update(fields)
    return record


def exported(record: dict[str, Any]) -> dict[str, Any]:
    """A memory record with every field of its state in its order, as an exporter writes it
    (the row rebuilds exactly this text)."""
    from engram.record import OBSERVATION_FIELDS

    payload = record["payload"]
    record["payload"] = {name: payload.get(name) for name in OBSERVATION_FIELDS}
    record["payload"].update(revision_count=1, duplicate_count=1)
    return record


def mixed_batch() -> list[dict[str, Any]]:
    """New memories naming a session held before the batch, a session deleted here before
    it (a tombstone: no stub), new sessions (stubs) and a session that arrives after its
    memories; pinned ones, overridden ones, confirmed ones (scored from their review), one
    soft-deleted as it arrives, one in another project."""
    batch = filler()
    batch += [
        memory("obs-held-1", "s-held", 200, "In a held session", "walrus one"),
        memory("obs-gone-1", "s-gone", 201, "In a deleted session", "walrus two"),
        with_intent(memory("obs-pin", "s-new", 202, "Pinned", "walrus three"), pinned=True),
        with_intent(
            memory("obs-over", "s-new", 203, "Overridden", "walrus four"), importance_override=0.75
        ),
        with_intent(
            memory("obs-seen", "s-new", 204, "Confirmed", "walrus five"),
            reviewed_at="2026-11-20 10:00:00",
        ),
        memory("obs-del", "s-new", 205, "Deleted", "walrus six", deleted=True),
        memory("obs-late", "s-late", 206, "Before its session", "walrus seven"),
        session("s-late"),
        memory("obs-q", "s-held", 207, "Another project", "walrus eight", project="q"),
    ]
    return batch


def test_new_rows_are_the_rows_applied_one_by_one_write(make_store) -> None:
    before = [session("s-held"), memory("obs-held-0", "s-held", 1, "Held", "walrus zero"),
              session("s-gone"), session_delete("s-gone")]  # fmt: skip
    one, bulk = one_and_bulk(make_store, before, mixed_batch())
    assert written(bulk) == written(one)
    assert bulk.canonical_export() == one.canonical_export()
    rows = "SELECT sync_id, pinned, typeof(pinned), importance FROM observations ORDER BY id"
    assert bulk.db.rows(rows) == one.db.rows(rows)
    pin = "SELECT pinned, typeof(pinned) FROM observations WHERE sync_id = 'obs-pin'"
    assert tuple(bulk.db.rows(pin)[0]) == (1, "integer")
    sessions = {r[0] for r in bulk.db.rows("SELECT id FROM sessions WHERE project = 'p'")}
    assert "s-gone" not in sessions and {"s-held", "s-new", "s-late"} <= sessions


def test_a_store_without_tombstones_writes_stub_sessions_without_looking_them_up(
    make_store,
) -> None:
    """A stub's ``INSERT OR IGNORE`` leaves a session that is here as it is: only a tombstone
    must be looked for, and a store that holds none needs no lookup (before: one per project
    per run of new records, 7,529 statements in an import of 100,000)."""
    before = [session("s-held"), memory("obs-held-0", "s-held", 1, "Held", "walrus zero")]
    batch = [record for record in mixed_batch() if record["key"] != "obs-gone-1"]
    seen: list[str] = []
    one, bulk = one_and_bulk(make_store, before, batch, seen)
    # (The batch's own session record, s-late, is looked up as every record's address is.)
    probes = [s for s in seen if "CROSS JOIN sessions" in s]
    assert not [s for s in probes if "'s-new'" in s or "'s-held'" in s], probes
    assert written(bulk) == written(one)
    held = bulk.db.rows("SELECT directory, hlc FROM sessions WHERE id = 's-held' AND project = 'p'")
    assert [tuple(r) for r in held] == [("/src", before[0]["hlc"])]  # not turned into a stub


def test_a_session_deleted_during_the_batch_gets_no_stub_afterwards(make_store) -> None:
    """The batch deletes a session (its tombstone appears mid-batch), then a memory names it:
    no stub, on either path."""
    batch = filler()
    batch += [session("s-brief"), session_delete("s-brief")]
    batch.append(memory("obs-after", "s-brief", 300, "After", "walrus after"))
    one, bulk = one_and_bulk(make_store, [], batch)
    assert written(bulk) == written(one)


@settings(max_examples=300, deadline=None)
@given(
    contents=st.lists(st.text(max_size=2500), min_size=1, max_size=8),
    topic_key=st.one_of(st.none(), st.sampled_from(["", "a", "a/b", "A/b/c/d/e/f", " / "])),
    kind=st.one_of(st.none(), st.sampled_from(["manual", "Bug", "decision", " "])),
    changed=st.lists(
        st.one_of(
            st.none(),
            st.just(""),
            st.just("not a time"),
            st.sampled_from(
                [
                    "2026-11-25 01:00:00",
                    "2026-11-24 23:59:59",
                    "2026-08-01 00:00:00",
                    "2025-01-01 00:00:00",
                    "2027-01-01 00:00:00",
                    "2026-11-25T01:00:00Z",
                ]
            ),
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_the_batch_scorer_scores_as_the_formula(
    contents: list[str], topic_key: str | None, kind: str | None, changed: list[str | None]
) -> None:
    """Bit for bit what ``compute`` (and the SQL function) gives a memory with no link and no
    read, times repeated within one batch included."""
    now = datetime(2026, 11, 25, 1, 0, tzinfo=UTC)
    score = importance.unlinked_scorer(now)
    by_text = scoring.unlinked_scorer("2026-11-25 01:00:00")
    for content in contents:
        for at in changed:
            expected = importance.compute(content, topic_key, kind, 0, at, 0, now)
            assert score(content, topic_key, kind, at).hex() == expected.hex()
            if at is not None:
                assert by_text(content, topic_key, kind, at) == scoring.unlinked_score(
                    content, topic_key, kind, at, "2026-11-25 01:00:00"
                )


def test_received_texts_are_elided_exactly_when_their_rows_rebuild_them(make_store) -> None:
    """A record the lane takes as its own state (its payload as it is) is journaled elided
    only when its exact text is the one its row rebuilds to: another spelling of the same
    JSON, its keys in another order, or a payload that needs a default keeps its text — as
    applied one record at a time."""
    import json

    import orjson

    records = filler()
    spelled: dict[str, str] = {}
    for i, how in enumerate(["orjson", "spaces", "ascii", "reordered", "default", "scope"]):
        record = exported(memory(f"obs-s{i}", "s-spell", 400 + i, f"Spelled {how}",
                                 f"walrus é {i}"))  # fmt: skip
        if how == "reordered":
            record["payload"] = dict(reversed(list(record["payload"].items())))
        elif how == "default":
            record["payload"]["updated_at"] = ""  # (filled in from created_at)
        elif how == "scope":
            record["scope"] = "personal"  # (the payload says project: the row's text does)
        spelled[record["key"]] = how
        records.append(record)
    texts = []
    for record in records:
        how = spelled.get(record["key"], "orjson")
        if how == "spaces":
            texts.append(json.dumps(record, ensure_ascii=False))
        elif how == "ascii":
            texts.append(json.dumps(record, separators=(",", ":")))
        else:
            texts.append(orjson.dumps(record).decode())
    one, bulk = one_and_bulk(make_store, [], texts)  # type: ignore[arg-type]
    assert written(bulk) == written(one)
    stored = dict(bulk.db.rows("SELECT key, record FROM sync_journal WHERE key LIKE 'obs-s%'"))
    assert {key: text == "" for key, text in stored.items()} == {
        key: how == "orjson" for key, how in spelled.items()
    }
