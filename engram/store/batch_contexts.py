"""Session contexts of a bulk apply (an import's chunk): foreseen before its rows are written,
checked set-wise at its end (the rule and its one-row spellings: :mod:`engram.store.search_context`).

An import inserts each new memory with the context :func:`foresee` works out from its whole
batch — the rule followed in Python (:func:`contexts`) over the batch's new memories and
prompts — so that each row is written once. At the batch's end every session the foresight
cannot vouch for (:meth:`Foreseen.unproven`) is derived again by :func:`rederive_sessions`,
which reads the sessions' rows and prompts and rewrites only the rows whose context differs.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_right
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from engram.record import is_agent_session
from engram.store import fts
from engram.store.search_context import PIECE_CHARS, _derived

#: A memory as the rule sees it: ``(session_id, project, scope, created_at, sync_id, piece)``,
#: its piece being its title and content as a neighbour quotes them (``search_context._piece``), or
#: ``None`` when it is deleted.
Memory = tuple[str, str, str, str, str, str | None]
#: A prompt as the rule sees it: ``(session_id, project, created_at, sync_id, content)``.
Prompt = tuple[str, str, str, str, str]


def contexts(
    memories: Sequence[Memory], prompts: Sequence[Prompt]
) -> tuple[list[str], set[tuple[str, str]]]:
    """The rule of :func:`derive` in Python, over memories and prompts of any sessions: each
    memory's context among those given, in their order, and the sessions ``(session_id,
    project)`` whose contexts the rule does not decide (two prompts share their time and key
    tail: SQL takes either, so only the store can say which).

    Strings compare as SQLite's BINARY collation does (UTF-8 byte order is code point order)
    and pieces are cut by characters as ``substr`` cuts them (stored text holds no NUL)."""
    # Each session's prompts: (created_at, key tail) in the rule's order, and their pieces.
    led: dict[tuple[str, str], tuple[list[tuple[str, str]], list[str]]] = {}
    undecided: set[tuple[str, str]] = set()
    for session_id, project, created_at, key, content in prompts:
        marks = led.setdefault((session_id, project), ([], []))
        marks[0].append((created_at, key[key.find("-") + 1 :]))  # (see _key_tail)
        marks[1].append(content[:PIECE_CHARS])
    for session, (keys, pieces) in led.items():
        if len(keys) > 1:
            order = sorted(range(len(keys)), key=keys.__getitem__)
            keys[:] = [keys[i] for i in order]
            pieces[:] = [pieces[i] for i in order]
            if any(a == b for a, b in pairwise(keys)):
                undecided.add(session)
    out = [""] * len(memories)
    # Sorted by one string per memory: its place's parts joined by NUL (which no stored text
    # holds, and which sorts below every other character) order as the tuple of them would,
    # at a fraction of the cost of comparing tuples.
    places = ["\0".join(memory[:5]) for memory in memories]
    # The partition (session, project, scope) of the memory before, compared field by field.
    in_session: str | None = None
    in_project: str | None = None
    in_scope: str | None = None
    agent = False
    nearest: str | None = None  # the pieces of the two live memories before, in the partition
    second: str | None = None
    led_here: tuple[list[tuple[str, str]], list[str]] | None = None  # the session's prompts
    for i in sorted(range(len(memories)), key=places.__getitem__):
        session_id, project, scope, created_at, sync_id, piece = memories[i]
        if session_id != in_session or project != in_project or scope != in_scope:
            in_session, in_project, in_scope = session_id, project, scope
            agent = is_agent_session(session_id)
            nearest = second = None
            led_here = led.get((session_id, project))
        if piece is None or not agent:
            continue  # no context (and a deleted memory is no neighbour either)
        prompt = None
        if led_here is not None:  # the latest at or before it (a key tail breaks a tie)
            at = bisect_right(led_here[0], (created_at, sync_id[sync_id.find("-") + 1 :])) - 1
            if at >= 0:
                prompt = led_here[1][at]
        # _join((nearest, second, prompt)), spelled out: a call per memory cost a third of
        # this loop (tests/store/test_foreseen_contexts.py pins both to derive()).
        if nearest is not None:
            if second is not None:
                nearest_two = nearest + "\n" + second
                out[i] = nearest_two if prompt is None else nearest_two + "\n" + prompt
            else:
                out[i] = nearest if prompt is None else nearest + "\n" + prompt
        elif prompt is not None:
            out[i] = prompt
        nearest, second = piece, nearest
    return out, undecided


@dataclass(slots=True)
class Foreseen:
    """The session contexts a bulk batch's new memories are inserted with, worked out before
    the batch writes anything from what it brings (:func:`foresee`), so that each row is
    written once, with its context, instead of with '' and again at the batch's end.

    A session's foresight is *proven* when the store held no memory or prompt of it before
    the batch (:attr:`unsure` says which did) and nothing but the batch's new rows entered,
    left or changed in it since (:attr:`ContextRefresh.touched`, and the sessions the
    one-by-one path inserted into): then every context is the rule's over the rows the
    session holds. Every other session is derived again set-wise at the batch's end, which
    rewrites only the rows whose context differs."""

    #: The context of each new memory, by project and key (absent: '').
    contexts: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Every agent session ``(session_id, project)`` a new memory or prompt of the batch joins.
    sessions: set[tuple[str, str]] = field(default_factory=set)
    #: Those whose foresight cannot stand alone: the store held rows of them before the
    #: batch, or two of their prompts tie (:func:`contexts`).
    unsure: set[tuple[str, str]] = field(default_factory=set)

    def unproven(self, touched: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        """The sessions to derive again at the batch's end, given those touched otherwise."""
        return self.unsure | (self.sessions & set(touched))


def foresee(
    conn: sqlite3.Connection,
    memories: Sequence[dict[str, Any]],
    prompts: Sequence[dict[str, Any]],
) -> Foreseen:
    """The contexts of a batch's new memories (their full states) by the rule, from the
    batch's new memories and prompts alone; call before the batch writes any of them (which
    sessions the store already holds rows of is looked up here, set-wise)."""
    marks = [(s["session_id"], s["project"], s["created_at"], s["sync_id"], s["content"])
             for s in prompts]  # fmt: skip
    # (Each piece is _piece(title, content), spelled out: a call per memory.)
    found, undecided = contexts(
        [(s["session_id"], s["project"], s["scope"] or "project", s["created_at"], s["sync_id"],
          f"{s['title']} {s['content']}"[:PIECE_CHARS] if s["deleted_at"] is None else None)
         for s in memories],
        marks,
    )  # fmt: skip
    foreseen = Foreseen()
    by_project = foreseen.contexts
    for state, context in zip(memories, found, strict=True):
        if context:
            if (keys := by_project.get(state["project"])) is None:
                keys = by_project[state["project"]] = {}
            keys[state["sync_id"]] = context
    # (A session only prompts join has no new memory: it needs the check only when the
    # store holds memories of it, and then it is unsure.)
    sessions = {(s["session_id"], s["project"]) for s in memories}
    sessions.update((mark[0], mark[1]) for mark in marks)
    foreseen.sessions = {s for s in sessions if is_agent_session(s[0])}
    foreseen.unsure = undecided | _held_sessions(conn, sorted(foreseen.sessions))
    return foreseen


def _held_sessions(
    conn: sqlite3.Connection, sessions: list[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Which of ``sessions`` (``(session_id, project)``) have a memory (live or not) or a
    prompt in the store, each looked up through its session index."""
    held: set[tuple[str, str]] = set()
    for start in range(0, len(sessions), 400):
        part = sessions[start : start + 400]
        rows = conn.execute(
            f"""WITH wanted(sid, pid) AS (VALUES {", ".join("(?, ?)" for _ in part)})
                SELECT sid, pid FROM wanted
                WHERE EXISTS (SELECT 1 FROM observations INDEXED BY observations_session
                              WHERE session_id = sid AND project = pid)
                   OR EXISTS (SELECT 1 FROM user_prompts INDEXED BY user_prompts_context
                              WHERE session_id = sid AND project = pid)""",
            [value for pair in part for value in pair],
        )
        held.update((sid, pid) for sid, pid in rows)
    return held


def _read_and_derived(
    conn: sqlite3.Connection, sessions: list[tuple[str, str]]
) -> list[tuple[int, str, str]]:
    """``(rowid, stored context, context by the rule)`` of every live observation of
    ``sessions`` (``(session_id, project)`` pairs): their rows and prompts read with two
    statements, the rule followed in Python (:func:`contexts`). What :func:`_derived` gives
    — its window functions and the prompt looked up per row took 7.8 µs a row in an import,
    this 5 µs (tests/store/test_foreseen_contexts.py pins the two together)."""
    if not sessions:
        return []
    values = ", ".join("(?, ?)" for _ in sessions)
    params = [value for pair in sessions for value in pair]
    # Joined from the sessions wanted, each looked up through its session index (see
    # _derived for why not an IN list).
    rows = conn.execute(
        f"""WITH wanted(sid, pid) AS (VALUES {values})
            SELECT o.id, o.search_context, o.session_id, o.project, o.scope, o.created_at,
                   o.sync_id, substr(o.title || ' ' || o.content, 1, {PIECE_CHARS})
            FROM wanted CROSS JOIN observations o INDEXED BY observations_session
              ON o.session_id = sid AND o.project = pid
            WHERE o.deleted_at IS NULL""",
        params,
    ).fetchall()
    prompts = conn.execute(
        f"""WITH wanted(sid, pid) AS (VALUES {values})
            SELECT p.session_id, p.project, p.created_at, p.sync_id,
                   substr(p.content, 1, {PIECE_CHARS})
            FROM wanted CROSS JOIN user_prompts p INDEXED BY user_prompts_context
              ON p.session_id = sid AND p.project = pid""",
        params,
    ).fetchall()
    found, undecided = contexts([row[2:] for row in rows], prompts)
    if undecided:  # two prompts tie: the store's own choice, as derive() makes it
        return _derived(conn, sessions)
    return [(row[0], row[1], context) for row, context in zip(rows, found, strict=True)]


def rederive_sessions(
    conn: sqlite3.Connection, sessions: set[tuple[str, str]], index: fts.DeferredIndex
) -> int:
    """Recompute the context of every live observation of these agent sessions
    (``(session_id, project)``) in a few set-based statements, for a batch that inserted many
    memories (their rows not indexed yet, see :meth:`fts.DeferredIndex.inserted`); rows whose
    context changes are re-indexed at the batch's index flush. Returns how many changed."""
    wanted = sorted(s for s in sessions if is_agent_session(s[0]))
    changed = 0
    for start in range(0, len(wanted), 400):
        updates = [
            (context, rowid)
            for rowid, current, context in _read_and_derived(conn, wanted[start : start + 400])
            if context != current
        ]
        # In rowid order, one statement (a bulk import changes most rows of its sessions);
        # their indexed values noted first, a few statements for all.
        updates.sort(key=lambda update: update[1])
        index.before_changes([rowid for _, rowid in updates], own_text=False)
        conn.executemany("UPDATE observations SET search_context = ? WHERE id = ?", updates)
        changed += len(updates)
    return changed
