"""Importance (issue 21): the first seed's formula, computed at save, overridable, validated;
pins and overrides travel in payloads, computed scores and access counts never do."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from engram import importance
from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.record import INTENT_FIELDS, validate_record
from engram.store import Store
from tests.store.replicas import converge

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def stamp(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).strftime("%Y-%m-%d %H:%M:%S")


# --- the formula ------------------------------------------------------------------------------


def test_the_formula_weighs_the_five_signals_as_the_seed_says() -> None:
    full = importance.compute("x" * 2000, "a/b/c/d", "decision", 3, stamp(0), 10, NOW)
    assert full == 1.0  # every signal at its cap: 0.15 + 0.25 + 0.20 + 0.25 + 0.15
    bare = importance.compute("", None, "manual", 0, stamp(90), 0, NOW)
    assert bare == 0.0  # nothing, 90 days old: recency gone
    # Each signal alone gives exactly its weight (when at its cap).
    assert importance.compute("x" * 4000, None, "manual", 0, stamp(365), 0, NOW) == 0.15
    assert importance.compute("", "a/b/c/d", "bugfix", 0, stamp(365), 0, NOW) == 0.25
    assert importance.compute("", None, "manual", 9, stamp(365), 0, NOW) == 0.20
    assert importance.compute("", None, "manual", 0, stamp(0), 0, NOW) == 0.25
    assert importance.compute("", None, "manual", 0, stamp(365), 50, NOW) == 0.15
    # Linear in between: recency halves at 45 days, length at 1000 characters.
    assert importance.compute("", None, "manual", 0, stamp(45), 0, NOW) == 0.125
    assert importance.compute("x" * 1000, None, "manual", 0, stamp(365), 0, NOW) == 0.075


def test_topic_tags_are_the_topic_segments_and_a_meaningful_type() -> None:
    assert importance.topic_count("architecture/auth", "decision") == 3
    assert importance.topic_count("architecture/auth", "manual") == 2
    assert importance.topic_count(None, "manual") == 0
    assert importance.topic_count("bug//x/", "bug") == 2  # empty segments and repeats once


def test_a_timestamp_from_the_future_counts_as_now() -> None:
    ahead = (NOW + timedelta(days=30)).strftime("%Y-%m-%d %H:%M:%S")
    assert importance.compute("", None, "manual", 0, ahead, 0, NOW) == 0.25
    assert importance.compute("", None, "manual", 0, "not a date", 0, NOW) == 0.25


@pytest.mark.parametrize(
    "bad", [1.5, -0.1, math.nan, math.inf, -math.inf, True, "high", "1e999", None, [0.5]]
)
def test_an_importance_out_of_range_or_not_a_number_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError, match="importance"):
        importance.check_importance(bad)


def test_numbers_and_numeric_text_are_importances_and_auto_clears() -> None:
    assert importance.check_importance(0) == 0.0
    assert importance.check_importance(" 0.75 ") == 0.75
    assert importance.importance_argument("AUTO") == importance.AUTO
    with pytest.raises(ValidationError, match="'auto'"):
        importance.importance_argument("nan")


# --- at save ----------------------------------------------------------------------------------


def test_every_memory_is_scored_when_saved_and_shows_it(store: Store) -> None:
    saved = store.add_observation(
        title="Fixed login timeout", content="x" * 1000, type="bugfix", project="acme",
        topic_key="bug/login-timeout",
    )  # fmt: skip
    obs = saved.observation
    # length 0.5 → 0.075, topics {bug, login-timeout, bugfix} 3/5 → 0.15, fresh → 0.25
    assert obs.importance == pytest.approx(0.475, abs=1e-3)
    assert obs.importance_override is None and obs.pinned is False
    data = saved.to_dict()
    assert data["importance"] == obs.importance and "pinned" in data
    assert store.get_observation(obs.id).to_dict()["importance"] == obs.importance


def test_an_override_is_kept_through_edits_and_auto_drops_it(store: Store) -> None:
    obs = store.add_observation(title="t", content="c", project="acme", importance=0.9).observation
    assert (obs.importance, obs.importance_override) == (0.9, 0.9)
    edited = store.update_observation(obs.id, content="a longer content now")
    assert edited.importance == 0.9  # the user's number, whatever the formula says
    cleared = store.set_importance(obs.id, "auto")
    assert cleared.importance_override is None and cleared.importance < 0.9


@pytest.mark.parametrize("bad", [1.01, -1, math.nan, math.inf, "lots"])
def test_a_save_with_a_bad_importance_writes_nothing(store: Store, bad: object) -> None:
    before = store.canonical_export(), store.journal.count_pending("x")
    with pytest.raises(ValidationError, match="importance"):
        store.add_observation(title="t", content="c", project="acme", importance=bad)
    memory = store.add_observation(title="kept", content="c", project="acme").observation
    with pytest.raises(ValidationError, match="importance"):
        store.update_observation(memory.id, importance=bad)
    assert store.get_observation(memory.id).importance_override is None
    assert store.journal.count_pending("x") == before[1] + 2  # the session and "kept" only


def test_changing_only_intent_is_not_a_revision(store: Store) -> None:
    obs = store.add_observation(title="t", content="c", project="acme").observation
    pinned = store.pin_observation(obs.id)
    assert pinned.pinned and pinned.revision_count == 1
    assert store.update_observation(obs.id, title="t2").revision_count == 2


# --- pins ---------------------------------------------------------------------------------------


def test_pins_on_deleted_or_missing_memories_are_refused_and_change_nothing(store: Store) -> None:
    obs = store.add_observation(title="t", content="c", project="acme").observation
    store.delete_observation(obs.id)
    before = store.canonical_export(), store.journal.count_pending("x")
    with pytest.raises(ConflictError, match="deleted: restore it first"):
        store.pin_observation(obs.id)
    with pytest.raises(NotFoundError):
        store.pin_observation(999)
    with pytest.raises(ValidationError):
        store.pin_observation("not an id")
    assert (store.canonical_export(), store.journal.count_pending("x")) == before
    restored = store.restore_observation(obs.id)
    assert store.pin_observation(restored.id).pinned


def test_a_pinned_memory_is_always_in_the_context_and_first(store: Store) -> None:
    rule = store.add_observation(title="Use pnpm", content="never npm", project="acme")
    for i in range(30):  # more recent memories than the context lists
        store.add_observation(title=f"note {i}", content=f"body {i}", project="acme")
    assert "Use pnpm" not in store.context("acme")
    store.pin_observation(rule.observation.id)
    text = store.context("acme", max_bytes=400)
    assert text.index("### Pinned") < text.index("Use pnpm")
    assert text.count("Use pnpm") == 1  # not listed again among recent memories
    assert "Use pnpm" in store.context("acme", compact=True)


def test_a_pinned_memory_cannot_be_archived(store: Store) -> None:
    obs = store.add_observation(title="t", content="c", project="acme").observation
    store.pin_observation(obs.id)
    with pytest.raises(ConflictError, match="unpin it first"):
        store.archive_observation(obs.id)
    store.pin_observation(obs.id, False)
    assert store.archive_observation(obs.id).id == obs.id
    assert store.get_observation(obs.id, include_deleted=True).delete_reason == "archived"


# --- what travels -------------------------------------------------------------------------------


def test_pins_and_overrides_travel_computed_scores_and_reads_do_not(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    obs = a.add_observation(title="Rule", content="always rebase", project="acme").observation
    plain = a.journal.pending("x")[-1].as_record()["payload"]
    assert not set(INTENT_FIELDS) & set(plain)  # defaults are left out: same bytes as before
    a.update_observation(obs.id, importance=0.8, pinned=True, valid_from="2026-01-01")
    a.search("rebase")
    a.get_observation(obs.id, record_access=True)
    a.access.fold()
    assert a.get_observation(obs.id).access_count == 2
    payload = a.journal.pending("x")[-1].as_record()["payload"]
    assert payload["pinned"] is True and payload["importance_override"] == 0.8
    assert "importance" not in payload and "access_count" not in payload
    converge([a, b])
    copy = b.get_observation_by_sync_id(obs.sync_id, project="acme")
    assert (copy.pinned, copy.importance, copy.valid_from) == (True, 0.8, "2026-01-01 00:00:00")
    assert copy.access_count == 0  # reads are local
    assert a.canonical_export() == b.canonical_export()


@pytest.mark.parametrize(
    ("field", "value"),
    [("pinned", 1), ("pinned", "yes"), ("importance_override", 2), ("importance_override", True),
     ("importance_override", "0.5"), ("valid_to", 20260101), ("superseded_by", ["obs-1"])],
)  # fmt: skip
def test_a_record_with_a_bad_intent_field_is_invalid_and_quarantined(
    store: Store, field: str, value: object
) -> None:
    record = {
        "mid": "a" * 32, "hlc": "1763756100123.00000.9a1b2c3d4e5f6a7b",
        "origin": "9a1b2c3d4e5f6a7b", "entity": "observation", "key": "obs-1",
        "op": "upsert", "project": "acme", "scope": "project",
        "payload": {"sync_id": "obs-1", "session_id": "s", "type": "note", "title": "t",
                    "content": "c", "project": "acme", field: value},
    }  # fmt: skip
    with pytest.raises(ValidationError, match=field):
        validate_record(record)
    result = store.apply_mutations([orjson.dumps(record)], source="git:x")
    assert result.quarantined == {"invalid": 1}
    assert store.count_observations() == 0


def test_the_migration_scores_memories_of_an_older_store(store: Store) -> None:
    store.db.conn.execute("UPDATE observations SET importance = NULL")
    memory = store.add_observation(title="t", content="c", project="acme").observation
    store.db.conn.execute("UPDATE observations SET importance = NULL")
    from engram.store.schema import migration_importance

    migration_importance(store.db.conn)  # idempotent: columns exist, scores are filled in
    assert store.get_observation(memory.id).importance > 0
