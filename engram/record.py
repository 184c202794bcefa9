"""The mutation record (docs/architecture.md, "Identity, the journal and replication"): the one JSON object that the journal stores, chunk lines
carry and the cloud wire sends. Pure functions only: build, validate, and turn payloads into the
full entity state that applying writes.

Size: over 500 lines on purpose: the record's codec, validation and state rules are one
contract shared by the store, both transports and the server; every function is small and pure.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import time
from typing import Any

from engram.errors import InvalidMutationError
from engram.text import unstorable_reason

ENTITIES = ("session", "observation", "prompt", "relation")
OPS = ("upsert", "delete")
LEGACY_ORIGIN = "0" * 16
EPOCH_TEXT = "1970-01-01 00:00:00"
MAX_FIELD_BYTES = 1 << 20  # a replicated text field larger than 1 MiB is refused
MAX_WALL_MS = 10**13 - 1  # the largest wall time an hlc can carry (13 digits)
#: How far ahead of the receiver's clock a record may be before it waits (a replica) or is refused
#: (the server) (docs/architecture.md, "Identity, the journal and replication").
DEFAULT_MAX_CLOCK_DRIFT_MS = 10 * 60 * 1000

_HLC = re.compile(r"^([0-9]{13})\.([0-9]{5})\.([0-9a-f]{16})$")
_MID = re.compile(r"^[0-9a-f]{32}$")
_ORIGIN = re.compile(r"^[0-9a-f]{16}$")

SESSION_FIELDS = ("id", "project", "directory", "started_at", "ended_at", "summary")
OBSERVATION_FIELDS = (
    "sync_id",
    "session_id",
    "type",
    "title",
    "content",
    "tool_name",
    "project",
    "scope",
    "topic_key",
    "revision_count",
    "duplicate_count",
    "last_seen_at",
    "created_at",
    "updated_at",
    "deleted_at",
)
PROMPT_FIELDS = ("sync_id", "session_id", "content", "project", "created_at")
#: A link between two memories of one project (the Go tool's later relation upsert,
#: docs/graph.md): ``source_id`` and ``target_id`` are observation sync ids *of the record's project*.
RELATION_FIELDS = (
    "sync_id",
    "source_id",
    "target_id",
    "relation",
    "reason",
    "evidence",
    "confidence",
    "judgment_status",
    "marked_by_actor",
    "marked_by_kind",
    "marked_by_model",
    "session_id",
    "project",
    "superseded_at",
    "superseded_by_relation_id",
    "created_at",
    "updated_at",
)
FIELDS = {
    "session": SESSION_FIELDS,
    "observation": OBSERVATION_FIELDS,
    "prompt": PROMPT_FIELDS,
    "relation": RELATION_FIELDS,
}
KEY_FIELD = {"session": "id", "observation": "sync_id", "prompt": "sync_id", "relation": "sync_id"}
#: The user's intent about a memory (docs/importance.md), carried in its payload so it travels
#: with the memory: a pin, an importance override, when the memory was true, why it was
#: deleted (``archived``), which memory superseded it and when someone last confirmed it. A
#: payload leaves out those at their default (so memories that never used them keep their
#: exact bytes); :func:`full_state` fills the defaults in.
INTENT_DEFAULTS: dict[str, Any] = {
    "pinned": False,
    "importance_override": None,
    "valid_from": None,
    "valid_to": None,
    "delete_reason": None,
    "superseded_by": None,
    "reviewed_at": None,
}
INTENT_FIELDS = tuple(INTENT_DEFAULTS)
#: Every replicated field of an entity's state: its payload fields plus, for observations,
#: the intent fields.
STATE_FIELDS = {**FIELDS, "observation": OBSERVATION_FIELDS + INTENT_FIELDS}
_INT_FIELDS = frozenset({"revision_count", "duplicate_count"})
_NUMBER_FIELDS = frozenset({"confidence"})
#: The payload fields of each entity whose value is not simply text or null.
_SPECIAL_FIELDS = {
    entity: frozenset(
        {
            *_INT_FIELDS,
            *_NUMBER_FIELDS,
            "hard",
            *(INTENT_DEFAULTS if entity == "observation" else ()),
        }
    )
    for entity in ENTITIES
}
_REQUIRED_UPSERT = {
    "session": ("id",),
    "observation": ("sync_id", "session_id", "type", "title", "content"),
    "prompt": ("sync_id", "session_id", "content"),
    "relation": ("sync_id", "source_id", "target_id", "relation"),
}
#: The relation vocabulary of the reference (``mem_judge``/``mem_compare``). Records may carry
#: other names (a newer version's): any lowercase identifier is kept and shown as it is.
RELATION_TYPES = ("related", "compatible", "scoped", "conflicts_with", "supersedes", "not_conflict")
#: ``orphaned`` is what the Go tool writes when an endpoint was deleted; Engram derives it instead
#: (a relation whose endpoint is deleted reads as orphaned on every replica) but keeps it.
JUDGMENT_STATUSES = ("pending", "judged", "ignored", "orphaned")
_RELATION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def orphans(relation: str, end: str, delete_reason: str | None) -> bool:
    """Whether a deleted memory at ``end`` (``source`` or ``target``) orphans a relation: it
    does, except the target of a ``supersedes`` relation that was archived (consolidation
    merges memories that way, and archiving what a newer memory replaced is the supersession
    running its course). One rule for the store, the importance links and the dashboard."""
    return not (relation == "supersedes" and end == "target" and delete_reason == "archived")


def new_mid() -> str:
    """The wall clock in ms (12 hex digits), then 80 random bits: never derived from local
    state, so copies and restores cannot reuse one.

    Why the clock first: every journal (and the cloud's) keeps a unique index on the mid, and a
    record's mid is looked up there on every apply. Fully random mids put each chunk's new
    records on most of that index's pages, and every commit rewrites each page it touched: in a
    journal of 1,000,000 rows that was 12 µs a received record, more than the rest of its
    journal row (docs/performance.md, the eighth round). Minted in time order, a chunk's mids
    land together at the index's end. 80 random bits per millisecond keep two machines (or a
    restored copy and its original) from minting the same one.

    (``os.urandom`` is what the ``secrets`` module reads too; importing that module, and the
    ``random`` module it imports, cost every ``engram`` process a few milliseconds.)"""
    return f"{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


def new_origin() -> str:
    return os.urandom(8).hex()


#: The session a save without one joins is ``manual-save-<project>`` (or ``manual-save``).
PSEUDO_SESSION = "manual-save"


def is_agent_session(session_id: str | None) -> bool:
    """Whether a session id names a real session (started by an agent or a hook, or passed
    explicitly) rather than the pseudo session every sessionless save shares: only a real
    session says that two memories belong together (search context, "related" lists)."""
    if not session_id:
        return False
    return session_id != PSEUDO_SESSION and not session_id.startswith(PSEUDO_SESSION + "-")


_key_clock = [0, 0]  # the last key's (wall ms, sequence) in this process
_key_lock = threading.Lock()


def new_key(prefix: str) -> str:
    """A new observation or prompt key: ``prefix`` + the wall clock in ms (12 hex digits) + a
    sequence within that ms (4) + 40 random bits. Unique like a random id, and in save order:
    session context orders a session's memories by ``created_at`` (whole seconds), then by key,
    so a burst of saves (a list of learnings, a fast agent) keeps the order it was made in."""
    with _key_lock:
        now = time.time_ns() // 1_000_000
        wall, sequence = _key_clock
        if now > wall:
            wall, sequence = now, 0
        else:
            sequence += 1
            if sequence > 0xFFFF:
                wall, sequence = wall + 1, 0
        _key_clock[:] = [wall, sequence]
    return f"{prefix}{wall:012x}{sequence:04x}{os.urandom(5).hex()}"


def format_hlc(wall_ms: int, counter: int, origin: str) -> str:
    return f"{wall_ms:013d}.{counter:05d}.{origin}"


def parse_hlc(hlc: str) -> tuple[int, int, str]:
    match = _HLC.match(hlc)
    if not match:
        raise InvalidMutationError(f"invalid hlc {hlc!r}")
    return int(match.group(1)), int(match.group(2)), match.group(3)


def is_valid_hlc(hlc: str) -> bool:
    return bool(_HLC.match(hlc))


def hlc_bound(now_ms: int, max_drift_ms: int) -> str:
    """The greatest hlc a record may carry at ``now_ms``: every valid hlc that compares (as a
    string) greater than this is more than the drift ahead."""
    wall = min(MAX_WALL_MS, max(0, now_ms + max_drift_ms))
    return format_hlc(wall, 99_999, "f" * 16)


def check_clock(hlc: str, now_ms: int, max_drift_ms: int) -> str | None:
    """Why a record with this ``hlc`` may not be applied at ``now_ms`` (``None`` when it may).

    A record whose wall time is more than ``max_drift_ms`` ahead of the receiver's clock would
    win last-writer-wins against every real edit until then and drag every clock that sees it
    forward (docs/architecture.md, "Trust boundaries"): a replica keeps it until real time catches up, the server
    refuses it.
    """
    match = _HLC.match(hlc) if isinstance(hlc, str) else None
    if not match:
        return f"hlc {hlc!r} is not WALLMS.COUNTER.ORIGIN"
    wall = int(match.group(1))
    ahead = wall - now_ms
    if ahead > max_drift_ms:
        return (
            f"hlc {hlc} is {_duration(ahead)} ahead of this clock "
            f"(at most {_duration(max_drift_ms)} allowed)"
        )
    return None


def _duration(ms: int) -> str:
    seconds = ms / 1000
    for unit, size in (("days", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.1f} s"


def moved_key(entity: str, old_key: str, new_project: str) -> str:
    """The key a memory, prompt or relation gets when it moves to ``new_project``
    (docs/architecture.md, "Identity, the journal and replication"): derived, so every replica
    that makes the same move creates the same key."""
    digest = hashlib.sha256(f"{old_key}\0{new_project}".encode()).hexdigest()[:16]
    prefix = {"observation": "obs-", "relation": "rel-"}.get(entity, "prompt-")
    return prefix + digest


def relation_key(project: str, a: str, b: str) -> str:
    """The key of the relation between memories ``a`` and ``b`` of ``project`` when this
    Engram creates it: one relation per pair (whichever way it points), derived, so two
    machines that relate the same pair update one relation instead of making two."""
    low, high = sorted((a, b))
    digest = hashlib.sha256(f"{project}\0{low}\0{high}".encode()).hexdigest()[:16]
    return "rel-" + digest


def build_record(
    *,
    mid: str,
    hlc: str,
    origin: str,
    entity: str,
    key: str,
    op: str,
    project: str,
    scope: str,
    payload: dict[str, Any],
) -> dict[str, Any]:
    """A record with its keys in the normative order."""
    return {
        "mid": mid,
        "hlc": hlc,
        "origin": origin,
        "entity": entity,
        "key": key,
        "op": op,
        "project": project,
        "scope": scope,
        "payload": payload,
    }


def hlc_text(hlc: str) -> str:
    """The wall time of an hlc in the store's timestamp format (deterministic defaults)."""
    from datetime import UTC, datetime

    wall, _, _ = parse_hlc(hlc)
    return datetime.fromtimestamp(wall / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def derived_sync_id(
    entity: str,
    *,
    project: str,
    session_id: str,
    created_at: str,
    content: str,
    title: str | None = None,
) -> str:
    """The sync id of a memory or prompt that arrives without one (the Go tool has none):
    ``sha256(project, session_id, created_at, title, content)`` of its stored values, so every
    machine that imports the same row — from the same export or chunk, any number of times —
    gives it the same key, and importing it again adds nothing. Never random, never the
    importer's origin."""
    return derived_id(entity, project, session_id, created_at, title, content)


def derived_id(
    entity: str, project: str, session_id: str, created_at: str, title: str | None, content: str
) -> str:
    """:func:`derived_sync_id` with its arguments by position."""
    if entity == "observation":
        text = f"{project}\0{session_id}\0{created_at}\0{title or ''}\0{content}"
        return "obs-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    text = f"{project}\0{session_id}\0{created_at}\0{content}"
    return "prompt-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def legacy_mid(key: str, updated_at: str, op: str) -> str:
    """Deterministic mid for rows that predate the journal (same on every machine)."""
    return hashlib.sha256(f"{key}\0{updated_at}\0{op}".encode()).hexdigest()[:32]


def legacy_hlc(updated_at: str, not_after_ms: int | None = None) -> str:
    """``updated_at`` as a clock (origin zero). ``not_after_ms`` caps it: a row dated in the
    future must not outrank every real edit (docs/architecture.md, "Trust boundaries")."""
    from engram.times import store_text_to_ms

    wall = min(MAX_WALL_MS, store_text_to_ms(updated_at))
    if not_after_ms is not None:
        wall = min(wall, not_after_ms)
    return format_hlc(max(0, wall), 0, LEGACY_ORIGIN)


def legacy_record(
    *,
    entity: str,
    op: str,
    payload: dict[str, Any],
    updated_at: str,
    project: str,
    scope: str,
    not_after_ms: int | None = None,
    mid_key: str | None = None,
) -> dict[str, Any]:
    """The journal entry a legacy row gets once: origin zero, hlc from ``updated_at``.

    ``mid_key`` replaces the key in the mid (a session copied into another project must not
    reuse the original's mid). A capped hlc also goes into the mid, so two machines that capped
    differently make two records, which last-writer-wins settles, never one mid with two bodies.
    """
    key = str(payload[KEY_FIELD[entity]])
    hlc = legacy_hlc(updated_at, not_after_ms)
    stamp = updated_at if hlc == legacy_hlc(updated_at) else f"{updated_at}@{hlc}"
    return build_record(
        mid=legacy_mid(mid_key or key, stamp, op),
        hlc=hlc,
        origin=LEGACY_ORIGIN,
        entity=entity,
        key=key,
        op=op,
        project=project,
        scope=scope,
        payload=payload,
    )


def _fail(index: int | None, message: str) -> InvalidMutationError:
    where = f"mutation[{index}]: " if index is not None else ""
    return InvalidMutationError(where + message)


def validate_record(
    record: Any, index: int | None = None, *, text_checked: bool = False
) -> dict[str, Any]:
    """Check a record's envelope and payload; raise :class:`InvalidMutationError` naming the
    problem. Returns the record unchanged.

    ``text_checked``: the record was decoded from JSON text holding no ``\\u0000`` escape, so
    no string in it can hold a NUL (a raw control character is not JSON) or a lone surrogate
    (orjson refuses one): the walk over every string is skipped (it was most of the cost of
    applying a record)."""
    if not isinstance(record, dict):
        raise _fail(index, "a mutation must be a JSON object")
    get = record.get
    mid: Any = get("mid")
    hlc: Any = get("hlc")
    origin: Any = get("origin")
    entity: Any = get("entity")
    op: Any = get("op")
    # (Exact str, the common case, tested at once; anything else goes through each field in
    # turn for the message naming the first that is wrong.)
    if not (
        mid.__class__ is str
        and hlc.__class__ is str
        and origin.__class__ is str
        and entity.__class__ is str
        and op.__class__ is str
        and get("key").__class__ is str
        and get("project").__class__ is str
        and get("scope").__class__ is str
    ):
        for name in ("mid", "hlc", "origin", "entity", "key", "op", "project", "scope"):
            if not isinstance(get(name), str):
                raise _fail(index, f"field {name!r} is required and must be a string")
    if not _MID.match(mid):
        raise _fail(index, f"mid {mid!r} must be 32 lowercase hex digits")
    match = _HLC.match(hlc)
    # An hlc ending in the record's origin proves the origin well formed (16 lowercase hex
    # digits): the origin's own pattern is only needed to say what is wrong.
    if match is None or match.group(3) != origin:
        if not _ORIGIN.match(origin):
            raise _fail(index, f"origin {origin!r} must be 16 lowercase hex digits")
        if not match:
            raise _fail(index, f"hlc {hlc!r} is not WALLMS.COUNTER.ORIGIN")
        raise _fail(index, "hlc and origin disagree")
    if entity not in ENTITIES:
        raise _fail(index, f"unknown entity {entity!r} (expected one of {', '.join(ENTITIES)})")
    if op not in OPS:
        raise _fail(index, f"unknown op {op!r} (expected upsert or delete)")
    key = record["key"]
    if not key or len(key) > 256:
        raise _fail(index, "key must be 1-256 characters")
    if record["scope"] not in ("project", "personal"):
        raise _fail(index, f"scope {record['scope']!r} must be project or personal")
    payload = record.get("payload")
    if not isinstance(payload, dict):
        raise _fail(index, "payload must be a JSON object")
    if not text_checked:
        for name in ("key", "project"):
            if problem := unstorable_reason(record[name]):
                raise _fail(index, f"{name} {problem}")
        if problem := find_unstorable(payload, "payload"):
            raise _fail(index, problem)
    if payload.get(KEY_FIELD[entity]) != key:
        raise _fail(index, f"payload {KEY_FIELD[entity]} does not match key {key!r}")
    if "project" in payload and payload["project"] != record["project"]:
        # The record's project is its address (docs/architecture.md, "Identity, the journal and replication"): a payload
        # naming another project would let a writer of one project plant memories in another.
        raise _fail(
            index,
            f"payload.project {payload['project']!r} does not match project {record['project']!r}",
        )
    special = _SPECIAL_FIELDS[entity]
    for name, value in payload.items():
        if name not in special:
            # Most fields: text or null (checked first: this loop runs for every field of
            # every record an import applies).
            if value is None:
                continue
            if isinstance(value, str):
                if len(value) > MAX_FIELD_BYTES:
                    raise _fail(index, f"payload.{name} is larger than {MAX_FIELD_BYTES} bytes")
                continue
        if entity == "observation" and name in INTENT_DEFAULTS:
            if problem := intent_problem(name, value):
                raise _fail(index, f"payload.{name} {problem}")
        elif name in _INT_FIELDS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise _fail(index, f"payload.{name} must be an integer")
        elif name in _NUMBER_FIELDS:
            if value is not None and (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not 0.0 <= value <= 1.0
            ):
                raise _fail(index, f"payload.{name} must be a number from 0 to 1 or null")
        elif name == "hard":
            if not isinstance(value, bool):
                raise _fail(index, "payload.hard must be true or false")
        elif value is not None and not isinstance(value, str):
            if name in FIELDS[entity]:
                raise _fail(index, f"payload.{name} must be a string or null")
        elif isinstance(value, str) and len(value) > MAX_FIELD_BYTES:
            raise _fail(index, f"payload.{name} is larger than {MAX_FIELD_BYTES} bytes")
    if op == "upsert":
        for name in _REQUIRED_UPSERT[entity]:
            value = payload.get(name)
            if not isinstance(value, str) or not value.strip():
                raise _fail(index, f"payload.{name} is required for {entity} upsert")
    if entity == "relation":
        _check_relation(record, index)
    return record


def _check_relation(record: dict[str, Any], index: int | None) -> None:
    """What only a relation must satisfy: it is an upsert (as the Go tool's; a relation is
    retired by judging it ``ignored``, never deleted), links two different memories by key,
    names its kind as an identifier and its judgment from the known statuses."""
    if record["op"] != "upsert":
        raise _fail(
            index, "relation records are upserts only (judge a relation 'ignored' to retire it)"
        )
    payload = record["payload"]
    for name in ("source_id", "target_id"):
        if len(payload[name]) > 256:
            raise _fail(index, f"payload.{name} must be at most 256 characters")
    if payload["source_id"] == payload["target_id"]:
        raise _fail(index, "a relation must link two different memories")
    if not _RELATION_NAME.match(payload["relation"]):
        raise _fail(
            index,
            f"payload.relation {payload['relation'][:80]!r} must be a lowercase identifier "
            f"(one of {', '.join(RELATION_TYPES)})",
        )
    status = payload.get("judgment_status")
    if status is not None and status not in JUDGMENT_STATUSES:
        raise _fail(
            index,
            f"payload.judgment_status {str(status)[:40]!r} must be one of "
            f"{', '.join(JUDGMENT_STATUSES)}",
        )


def intent_problem(name: str, value: Any) -> str | None:
    """What is wrong with the value of intent field ``name`` (``None`` when it is fine)."""
    if name == "pinned":
        return None if isinstance(value, bool) else "must be true or false"
    if value is None:
        return None
    if name == "importance_override":
        return importance_problem(value)
    if not isinstance(value, str):
        return "must be a string or null"
    if len(value) > 256:
        return "is longer than 256 characters"
    return None


def importance_problem(value: Any) -> str | None:
    """Why ``value`` is not an importance (a finite number from 0 to 1), or ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number from 0 to 1, got {value!r}"
    if not math.isfinite(value):
        return f"must be a finite number from 0 to 1, got {value!r}"
    if not 0 <= value <= 1:
        return f"must be from 0 to 1, got {value!r}"
    return None


def compact_payload(entity: str, state: dict[str, Any]) -> dict[str, Any]:
    """``state`` without the intent fields that hold their default (see :data:`INTENT_DEFAULTS`)."""
    if entity != "observation":
        return state
    return {
        name: value
        for name, value in state.items()
        if name not in INTENT_DEFAULTS or value != INTENT_DEFAULTS[name]
    }


def find_unstorable(value: Any, where: str) -> str | None:
    """The first string anywhere inside ``value`` (field names included) no store can keep.
    Iterative: a deeply nested unknown field must not exhaust Python's recursion limit."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if problem := unstorable_reason(item):
                return f"{path} {problem}"
        elif isinstance(item, dict):
            for name, inner in item.items():
                if problem := unstorable_reason(str(name)):
                    return f"{path} has a field name that {problem}"
                stack.append((inner, f"{path}.{name}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{path}[{i}]") for i, inner in enumerate(item))
    return None


def is_hard_delete(record: dict[str, Any]) -> bool:
    """Sessions and prompts have no soft state: their deletes are always hard (relations have no
    deletes at all)."""
    if record["op"] != "delete":
        return False
    if record["entity"] != "observation":
        return True
    return bool(record["payload"].get("hard", False))


def full_state(record: dict[str, Any]) -> dict[str, Any] | None:
    """The complete entity state an upsert or soft delete sets, with defaults filled in the same
    way on every replica. ``None`` for a soft delete that carries only key fields."""
    entity, op, payload = record["entity"], record["op"], record["payload"]
    if op == "delete" and (entity != "observation" or "title" not in payload):
        return None
    if entity == "session":
        return {
            "id": payload["id"],
            "project": payload.get("project") or record["project"],
            "directory": payload.get("directory") or "",
            "started_at": payload.get("started_at") or EPOCH_TEXT,
            "ended_at": payload.get("ended_at"),
            "summary": payload.get("summary"),
        }
    if entity == "prompt":
        return {
            "sync_id": payload["sync_id"],
            "session_id": payload["session_id"],
            "content": payload["content"],
            "project": payload.get("project") or record["project"],
            "created_at": payload.get("created_at") or EPOCH_TEXT,
        }
    if entity == "relation":
        return relation_state(record)
    # (Every replica must fill the same defaults: tests/test_record_state.py holds the rules
    # as first written and compares; each name is read once, this runs for every record.)
    get = payload.get
    created = get("created_at") or get("updated_at") or EPOCH_TEXT
    deleted_at = get("deleted_at")
    if op == "delete" and not deleted_at:
        deleted_at = hlc_text(record["hlc"])
    own = get("project")
    revisions, duplicates = get("revision_count"), get("duplicate_count")
    return {
        "sync_id": payload["sync_id"],
        "session_id": payload["session_id"],
        "type": payload["type"],
        "title": payload["title"],
        "content": payload["content"],
        "tool_name": get("tool_name"),
        "project": own if own is not None else record["project"],
        "scope": get("scope") or record["scope"],
        "topic_key": get("topic_key"),
        "revision_count": revisions
        if revisions.__class__ is int and revisions >= 1
        else max(1, int(revisions or 1)),
        "duplicate_count": duplicates
        if duplicates.__class__ is int and duplicates >= 1
        else max(1, int(duplicates or 1)),
        "last_seen_at": get("last_seen_at"),
        "created_at": created,
        "updated_at": get("updated_at") or created,
        "deleted_at": deleted_at,
        # the intent fields (INTENT_DEFAULTS, in its order; intent_state's rule)
        "pinned": get("pinned") is True,
        "importance_override": get("importance_override"),
        "valid_from": get("valid_from"),
        "valid_to": get("valid_to"),
        "delete_reason": get("delete_reason"),
        "superseded_by": get("superseded_by"),
        "reviewed_at": get("reviewed_at"),
    }


#: An upsert's payload keys, in their order, when the payload is its entity's full state as
#: it is (a memory's intent fields at their default, left out as every writer leaves them).
_VERBATIM_KEYS = {"observation": OBSERVATION_FIELDS, "prompt": PROMPT_FIELDS,
                  "session": SESSION_FIELDS}  # fmt: skip


def verbatim_state(record: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`full_state` of an upsert whose payload already is that state — every field
    there, in its order, each value one :func:`full_state` keeps as it is (no default to
    fill in), no intent field set: what an exporter writes. A copy of the payload then (plus
    a memory's intent defaults), for less than :func:`full_state`; ``None`` for any other
    record (call :func:`full_state`). tests/store/test_record_state.py holds the two equal."""
    payload = record["payload"]
    entity = record["entity"]
    if record["op"] != "upsert" or tuple(payload) != _VERBATIM_KEYS.get(entity):
        return None
    if entity == "observation":
        revisions, duplicates = payload["revision_count"], payload["duplicate_count"]
        if (
            payload["project"] is None
            or not payload["scope"]
            or revisions.__class__ is not int
            or revisions < 1
            or duplicates.__class__ is not int
            or duplicates < 1
            or not payload["created_at"]
            or not payload["updated_at"]
        ):
            return None
        state: dict[str, Any] = payload.copy()
        state.update(INTENT_DEFAULTS)
        return state
    if entity == "prompt":
        if not payload["project"] or not payload["created_at"]:
            return None
    elif not payload["project"] or not payload["directory"] or not payload["started_at"]:
        return None
    copy: dict[str, Any] = payload.copy()
    return copy


def relation_state(record: dict[str, Any]) -> dict[str, Any]:
    """The full state a relation upsert sets (defaults filled the same way everywhere)."""
    payload = record["payload"]
    created = payload.get("created_at") or payload.get("updated_at") or EPOCH_TEXT
    confidence = payload.get("confidence")
    return {
        "sync_id": payload["sync_id"],
        "source_id": payload["source_id"],
        "target_id": payload["target_id"],
        "relation": payload["relation"],
        "reason": payload.get("reason"),
        "evidence": payload.get("evidence"),
        # A number becomes a float (1 and 1.0 are one state); anything else stays as it is
        # for the validation to refuse.
        "confidence": float(confidence)
        if isinstance(confidence, int | float) and not isinstance(confidence, bool)
        else confidence,
        "judgment_status": payload.get("judgment_status") or "pending",
        "marked_by_actor": payload.get("marked_by_actor"),
        "marked_by_kind": payload.get("marked_by_kind"),
        "marked_by_model": payload.get("marked_by_model"),
        "session_id": payload.get("session_id"),
        "project": record["project"],
        "superseded_at": payload.get("superseded_at"),
        "superseded_by_relation_id": payload.get("superseded_by_relation_id"),
        "created_at": created,
        "updated_at": payload.get("updated_at") or created,
    }


def unknown_fields(entity: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload fields this version does not know (docs/graph.md, "Replication"): kept
    beside the entity and written back with its next local edit."""
    known = set(STATE_FIELDS[entity]) | {"hard"}
    return {name: value for name, value in payload.items() if name not in known}


def intent_state(payload: dict[str, Any]) -> dict[str, Any]:
    """The intent fields a payload sets, with the defaults for those it leaves out."""
    state = {name: payload.get(name, default) for name, default in INTENT_DEFAULTS.items()}
    state["pinned"] = state["pinned"] is True
    return state
