"""A memory's full state (``engram.record.full_state``) is what every replica writes: the
import's faster form must fill every default exactly as the rules were first written
(kept here as the reference), for any payload that validates — counts, intent fields, missing
or empty times, a payload without its project, soft deletes with and without a time."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from engram.errors import InvalidMutationError
from engram.record import (
    EPOCH_TEXT,
    INTENT_DEFAULTS,
    STATE_FIELDS,
    full_state,
    hlc_text,
    validate_record,
)


def reference_state(record: dict[str, Any]) -> dict[str, Any] | None:
    """A memory's state as first written (before the import's faster form)."""
    op, payload = record["op"], record["payload"]
    if op == "delete" and "title" not in payload:
        return None
    when = payload.get("updated_at") or payload.get("created_at") or EPOCH_TEXT
    created = payload.get("created_at") or when
    deleted_at = payload.get("deleted_at")
    if op == "delete" and not deleted_at:
        deleted_at = hlc_text(record["hlc"])
    intent = {name: payload.get(name, default) for name, default in INTENT_DEFAULTS.items()}
    intent["pinned"] = intent["pinned"] is True
    return {
        "sync_id": payload["sync_id"],
        "session_id": payload["session_id"],
        "type": payload["type"],
        "title": payload["title"],
        "content": payload["content"],
        "tool_name": payload.get("tool_name"),
        "project": payload.get("project")
        if payload.get("project") is not None
        else record["project"],
        "scope": payload.get("scope") or record["scope"],
        "topic_key": payload.get("topic_key"),
        "revision_count": max(1, int(payload.get("revision_count") or 1)),
        "duplicate_count": max(1, int(payload.get("duplicate_count") or 1)),
        "last_seen_at": payload.get("last_seen_at"),
        "created_at": created,
        "updated_at": payload.get("updated_at") or created,
        "deleted_at": deleted_at,
        **intent,
    }


texts = st.one_of(st.none(), st.sampled_from(["", " ", "2026-01-02 03:04:05", "x"]))
absent = st.just(...)  # (the field is left out of the payload)


def optional(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(absent, values)


payload_fields = {
    "tool_name": optional(texts),
    "project": optional(st.sampled_from([None, "acme"])),
    "scope": optional(st.sampled_from([None, "", "project", "personal"])),
    "topic_key": optional(texts),
    "revision_count": optional(st.integers(-3, 5)),
    "duplicate_count": optional(st.integers(-3, 5)),
    "last_seen_at": optional(texts),
    "created_at": optional(texts),
    "updated_at": optional(texts),
    "deleted_at": optional(texts),
    "pinned": optional(st.booleans()),
    "importance_override": optional(st.one_of(st.none(), st.sampled_from([0, 0.5, 1]))),
    "valid_from": optional(texts),
    "valid_to": optional(texts),
    "delete_reason": optional(st.sampled_from([None, "archived", "merged"])),
    "superseded_by": optional(texts),
    "reviewed_at": optional(texts),
    "hard": optional(st.just(False)),
}


@st.composite
def memory_records(draw: st.DrawFn) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "sync_id": "obs-1",
        "session_id": "s-1",
        "type": "decision",
        "title": "a title",
        "content": "some content",
    }
    for name, values in payload_fields.items():
        value = draw(values)
        if value is not ...:
            payload[name] = value
    op = draw(st.sampled_from(["upsert", "delete"]))
    if op == "delete" and draw(st.booleans()):
        payload = {"sync_id": "obs-1"}  # a soft delete of key fields only
    origin = "0123456789abcdef"
    return {
        "mid": "0" * 32,
        "hlc": f"{draw(st.integers(0, 10**13 - 1)):013d}.00000.{origin}",
        "origin": origin,
        "entity": "observation",
        "key": "obs-1",
        "op": op,
        "project": "acme",
        "scope": draw(st.sampled_from(["project", "personal"])),
        "payload": payload,
    }


@settings(max_examples=400)
@given(memory_records())
def test_a_memory_state_fills_the_defaults_as_first_written(record: dict[str, Any]) -> None:
    try:
        validate_record(record)
    except InvalidMutationError:
        return  # never applied
    state = full_state(record)
    assert state == reference_state(record)
    if state is not None:
        assert tuple(state) == STATE_FIELDS["observation"]  # the order rows are built in
        for name in ("revision_count", "duplicate_count"):
            assert type(state[name]) is int
        assert type(state["pinned"]) is bool


@given(
    st.sampled_from(["observation", "prompt"]),
    st.text(max_size=8),
    st.text(max_size=8),
    st.one_of(st.none(), st.text(max_size=8)),
    st.text(max_size=8),
)
def test_a_derived_key_is_the_digest_of_the_fields_joined(
    entity: str, session: str, created: str, title: str | None, content: str
) -> None:
    """The Go-derived key every machine computes alike (the import computes it for every
    memory and prompt): sha256 of project, session, creation time, (a memory's) title and
    content joined by NUL, as first written."""
    import hashlib

    from engram.record import derived_sync_id

    parts = ["acme", session, created] + ([title or ""] if entity == "observation" else [])
    digest = hashlib.sha256("\0".join([*parts, content]).encode()).hexdigest()[:16]
    prefix = "obs-" if entity == "observation" else "prompt-"
    key = derived_sync_id(
        entity,
        project="acme",
        session_id=session,
        created_at=created,
        content=content,
        title=title,
    )
    assert key == prefix + digest


GOOD = {
    "mid": "0" * 32,
    "hlc": "1700000000000.00000.0123456789abcdef",
    "origin": "0123456789abcdef",
    "entity": "observation",
    "key": "obs-1",
    "op": "delete",
    "project": "acme",
    "scope": "project",
    "payload": {"sync_id": "obs-1"},
}


def test_an_envelope_is_refused_with_the_first_problem_named() -> None:
    """The checks' order decides the message: the import's shortcut (an hlc ending in the
    origin proves the origin) must name the same problem as checking each field in turn."""
    import enum

    import pytest

    cases = [
        ({"mid": 1, "hlc": 2}, "field 'mid' is required and must be a string"),
        ({"scope": None}, "field 'scope' is required and must be a string"),
        ({"origin": "XYZ", "hlc": "nonsense"}, "origin 'XYZ' must be 16 lowercase hex digits"),
        ({"hlc": "1700000000000.00000.0123456789ABCDEF"}, "is not WALLMS.COUNTER.ORIGIN"),
        ({"origin": "fedcba9876543210"}, "hlc and origin disagree"),
        ({"mid": "A" * 32, "origin": "XYZ"}, "must be 32 lowercase hex digits"),
    ]
    for change, message in cases:
        with pytest.raises(InvalidMutationError, match=message.replace("(", r"\(")):
            validate_record({**GOOD, **change}, 3)
    validate_record(GOOD)

    class Scope(enum.StrEnum):
        PROJECT = "project"

    validate_record({**GOOD, "scope": Scope.PROJECT})  # any string, not only exactly str


# --- the import's shortcut for an exporter's records: the payload as the state -----------------

#: A time as an exporter writes it, mostly (else a default is filled in).
times = st.sampled_from(["2026-01-02 03:04:05"] * 5 + [None, "", " ", "x"])
_SHAPES = {
    "observation": {
        "sync_id": st.just("obs-1"),
        "session_id": st.just("s-1"),
        "type": st.just("decision"),
        "title": st.sampled_from(["a title", "é ☃ 🐘", "tab\there"]),
        "content": st.sampled_from(["some content", "ünïcode\nlines", 'quote " back \\ slash']),
        "tool_name": texts,
        "project": st.sampled_from(["acme"] * 9 + [None]),
        "scope": st.sampled_from(["project", "personal", "", None]),
        "topic_key": texts,
        "revision_count": st.sampled_from([1] * 6 + [2, 0, -1, True, 1.0, None]),
        "duplicate_count": st.sampled_from([1] * 6 + [3, 0, False, 2.0, None]),
        "last_seen_at": texts,
        "created_at": times,
        "updated_at": times,
        "deleted_at": st.sampled_from([None, None, None, "2026-01-02 03:04:05", ""]),
    },
    "prompt": {
        "sync_id": st.just("prompt-1"),
        "session_id": st.just("s-1"),
        "content": st.sampled_from(["what now?", "é ☃ 🐘", "what now?", ""]),
        "project": st.sampled_from(["acme"] * 8 + [None, ""]),
        "created_at": times,
    },
    "session": {
        "id": st.just("s-1"),
        "project": st.sampled_from(["acme"] * 8 + [None, ""]),
        "directory": st.sampled_from(["/src", "/src", "", None]),
        "started_at": times,
        "ended_at": texts,
        "summary": st.sampled_from([None, "done", ""]),
    },
}
_KEYS = {"observation": "obs-1", "prompt": "prompt-1", "session": "s-1"}


@st.composite
def exported_records(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A record as an exporter writes it (its payload the entity's state, in order, as the
    exact text orjson writes) — or nearly: every way it may stray from that, one or several
    at once (a field missing or extra, an intent field set, keys out of order, a count that
    is a bool or a float, a default to fill in, an envelope that disagrees with its payload,
    another spelling of the same JSON)."""
    import json

    import orjson

    entity = draw(st.sampled_from(["observation", "observation", "prompt", "session"]))
    payload = {name: draw(values) for name, values in _SHAPES[entity].items()}
    if draw(st.integers(0, 9)) == 0:
        del payload[draw(st.sampled_from(sorted(payload)))]
    if entity == "observation" and draw(st.integers(0, 4)) == 0:
        name = draw(st.sampled_from(sorted(payload_fields)))
        value = draw(payload_fields[name])
        if value is not ...:
            payload[name] = value  # an intent field (or ``hard``), set or at its default
    if draw(st.integers(0, 9)) == 0:
        payload["extra"] = draw(st.sampled_from([None, 1, "x"]))
    if draw(st.integers(0, 9)) == 0:
        payload = dict(draw(st.permutations(list(payload.items()))))
    record = {
        "mid": "0" * 32,
        "hlc": "1700000000000.00000.0123456789abcdef",
        "origin": "0123456789abcdef",
        "entity": entity,
        "key": _KEYS[entity],
        "op": draw(st.sampled_from(["upsert", "upsert", "upsert", "delete"])),
        "project": draw(st.sampled_from(["acme"] * 9 + ["other"])),
        "scope": draw(st.sampled_from(["project", "project", "personal"])),
        "payload": payload,
    }
    if draw(st.integers(0, 19)) == 0:
        record = dict(draw(st.permutations(list(record.items()))))
    spelling = draw(st.sampled_from(["orjson", "orjson", "orjson", "spaces", "ascii", "compact",
                                     "trailing"]))  # fmt: skip
    if spelling == "orjson":
        text = orjson.dumps(record).decode()
    elif spelling == "spaces":
        text = json.dumps(record, ensure_ascii=False)
    elif spelling == "ascii":
        text = json.dumps(record, separators=(",", ":"))
    elif spelling == "compact":
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
    else:
        text = orjson.dumps(record).decode() + " "
    return record, text


@settings(max_examples=1500)
@given(exported_records())
def test_a_payload_taken_as_its_state_is_the_full_state_and_elides_alike(
    exported: tuple[dict[str, Any], str],
) -> None:
    """``verbatim_state`` (the payload copied as the state) gives exactly ``full_state`` —
    same values of the same types in the same order — whenever it gives one, and for such a
    state ``elides_verbatim`` (the record's own text) decides the journal's elision as
    comparing with the rebuilt text does, for the received text and for none."""
    import orjson

    from engram.record import verbatim_state
    from engram.store.journal import elides_verbatim, state_text

    record, text = exported
    try:
        record = validate_record(record)
    except InvalidMutationError:
        return  # never applied
    state = verbatim_state(record)
    event(f"taken as it is: {state is not None}")
    if state is None:
        return
    full = full_state(record)
    assert full is not None
    assert list(state.items()) == list(full.items())
    assert [type(v) for v in state.values()] == [type(v) for v in full.values()]
    for received in (text, None):
        stored = received if received is not None else orjson.dumps(record).decode()
        elided = elides_verbatim(record, received, state)
        event(f"elided: {elided}")
        assert elided == (stored == state_text(record, state))


def test_an_exporters_record_is_taken_as_it_is_and_elided() -> None:
    """The shortcut's common case (the import's): taken, and elided."""
    import orjson

    from engram.record import verbatim_state
    from engram.store.journal import elides_verbatim

    payload = {"sync_id": "obs-1", "session_id": "s-1", "type": "decision", "title": "t",
               "content": "c", "tool_name": None, "project": "acme", "scope": "project",
               "topic_key": None, "revision_count": 1, "duplicate_count": 1,
               "last_seen_at": None, "created_at": "2026-01-02 03:04:05",
               "updated_at": "2026-01-02 03:04:05", "deleted_at": None}  # fmt: skip
    record = {**GOOD, "op": "upsert", "payload": payload}
    state = verbatim_state(record)
    assert state is not None and state == full_state(record)
    assert elides_verbatim(record, orjson.dumps(record).decode(), state)
    assert not elides_verbatim(record, orjson.dumps(record).decode() + " ", state)
    assert verbatim_state({**record, "payload": {**payload, "pinned": True}}) is None
    assert verbatim_state({**record, "payload": {**payload, "revision_count": True}}) is None
