"""A memory's full state (``engram.record.full_state``) is what every replica writes: the
import's faster form must fill every default exactly as the rules were first written
(kept here as the reference), for any payload that validates — counts, intent fields, missing
or empty times, a payload without its project, soft deletes with and without a time."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
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
        entity, project="acme", session_id=session, created_at=created, content=content,
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
