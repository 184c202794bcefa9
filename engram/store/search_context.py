"""Session context: what an observation's ``search_context`` column holds, and keeping it true.

The rule (docs/search.md): a live observation saved in a real agent session is indexed with
the text of the two live observations just before it in the same session, project and scope
(ordered by ``created_at``, then ``sync_id``, so every replica agrees) and the latest prompt of
that session and project at or before it (ordered the same way; within one second, prompt and
memory keys — minted in time order, without their prefix — tell which came first). Saves outside an agent session — plain CLI and HTTP
saves land in the ``manual-save-<project>`` pseudo session — and deleted rows have none.

The column is *derived*, never a second copy of the truth: every write path notes the
observations and prompts it is about to change in a :class:`ContextRefresh` and settles it after
the change, inside the same transaction; that re-derives every row whose context used them (the
two rows after an observation's old and new places, the rows a prompt led to), so no replaced or
deleted text stays searchable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from engram.record import PSEUDO_SESSION, is_agent_session
from engram.store import fts

#: Characters of each piece (a neighbour's title and content, or the prompt): the retrieval
#: bench found 300 as good as 1000, at a third of the index.
PIECE_CHARS = 300
#: How many earlier observations of the session a memory is indexed with.
NEIGHBOURS = 2
# SQL spelling of is_agent_session (LIKE would treat "_" as a wildcard).
_AGENT_SQL = (
    f"(session_id != '' AND session_id != '{PSEUDO_SESSION}'"
    f" AND substr(session_id, 1, {len(PSEUDO_SESSION) + 1}) != '{PSEUDO_SESSION}-')"
)


@dataclass(frozen=True, slots=True)
class _Spot:
    """Where an observation sits among its session's memories."""

    id: int
    session_id: str
    project: str
    scope: str
    created_at: str
    sync_id: str
    live: bool


@dataclass(frozen=True, slots=True)
class _PromptSpot:
    session_id: str
    project: str
    created_at: str
    sync_id: str


# A key without its "obs-"/"prompt-" prefix: minted in time order (engram.record.new_key), so
# it tells which of a prompt and a memory saved in the same second came first.
_KEY_TAIL_SQL = "substr({0}, instr({0}, '-') + 1)"


def _key_tail(key: str) -> str:
    return key[key.find("-") + 1 :]


def _piece(title: str, content: str) -> str:
    return f"{title} {content}"[:PIECE_CHARS]


def _join(pieces: Iterable[str | None]) -> str:
    """A context from its pieces — the nearest memory before, the one before that, the
    prompt — those present (every spelling of the rule ends here)."""
    return "\n".join([piece for piece in pieces if piece is not None])


def derive(
    conn: sqlite3.Connection,
    *,
    session_id: str,
    project: str,
    scope: str,
    created_at: str,
    sync_id: str,
    live: bool = True,
) -> str:
    """The context an observation at this place gets ('' outside an agent session or when the
    observation is deleted)."""
    if not live or not is_agent_session(session_id):
        return ""
    rows = conn.execute(
        """SELECT title, content FROM observations
           WHERE session_id = ? AND project = ? AND scope = ? AND deleted_at IS NULL
             AND (created_at < ? OR (created_at = ? AND sync_id < ?))
           ORDER BY created_at DESC, sync_id DESC LIMIT ?""",
        (session_id, project, scope, created_at, created_at, sync_id, NEIGHBOURS),
    ).fetchall()
    tail = _KEY_TAIL_SQL.format("sync_id")
    prompt = conn.execute(
        f"""SELECT content FROM user_prompts
            WHERE session_id = ? AND project = ?
              AND (created_at < ? OR (created_at = ? AND {tail} <= ?))
            ORDER BY created_at DESC, {tail} DESC LIMIT 1""",
        (session_id, project, created_at, created_at, _key_tail(sync_id)),
    ).fetchone()
    pieces = [_piece(r[0], r[1]) for r in rows]
    return _join((*pieces, None if prompt is None else str(prompt[0])[:PIECE_CHARS]))


def derive_state(conn: sqlite3.Connection, state: dict[str, Any]) -> str:
    """:func:`derive` for a row about to be inserted (a replicated payload or a new save)."""
    return derive(
        conn,
        session_id=state["session_id"],
        project=state["project"],
        scope=state.get("scope") or "project",
        created_at=state["created_at"],
        sync_id=state["sync_id"],
        live=state.get("deleted_at") is None,
    )


def _spot(conn: sqlite3.Connection, rowid: int) -> _Spot | None:
    row = conn.execute(
        """SELECT id, session_id, project, scope, created_at, sync_id, deleted_at
           FROM observations WHERE id = ?""",
        (rowid,),
    ).fetchone()
    if row is None:
        return None
    return _Spot(row[0], row[1], row[2], row[3], row[4], row[5], row[6] is None)


def _state_spot(rowid: int, state: dict[str, Any]) -> _Spot:
    """Where observation ``rowid`` sits when its replicated state is ``state``."""
    return _Spot(rowid, state["session_id"], state["project"], state.get("scope") or "project",
                 state["created_at"], state["sync_id"], state.get("deleted_at") is None)  # fmt: skip


def _prompt_spot(conn: sqlite3.Connection, rowid: int) -> _PromptSpot | None:
    row = conn.execute(
        "SELECT session_id, project, created_at, sync_id FROM user_prompts WHERE id = ?",
        (rowid,),
    ).fetchone()
    return None if row is None else _PromptSpot(row[0], row[1], row[2], row[3])


def _following(conn: sqlite3.Connection, spot: _Spot) -> list[int]:
    """The live rows whose context window holds this place: the two just after it."""
    if not is_agent_session(spot.session_id):
        return []
    rows = conn.execute(
        """SELECT id FROM observations
           WHERE session_id = ? AND project = ? AND scope = ? AND deleted_at IS NULL
             AND (created_at > ? OR (created_at = ? AND sync_id > ?))
           ORDER BY created_at, sync_id LIMIT ?""",
        (spot.session_id, spot.project, spot.scope, spot.created_at, spot.created_at,
         spot.sync_id, NEIGHBOURS),
    ).fetchall()  # fmt: skip
    return [r[0] for r in rows]


def _led_by(conn: sqlite3.Connection, spot: _PromptSpot) -> list[int]:
    """The live rows that may pick the prompt at this place as theirs: those saved at or after
    it and no later than the session's next prompt saved in a later second (a superset is
    harmless). Not the next prompt by key: within one second the rule orders prompts by key
    tail, which the key's order need not follow ("obs-0012" sorts after "0013", its tail
    before), and the rows after a prompt of the same second were missed."""
    if not is_agent_session(spot.session_id):
        return []
    following = conn.execute(
        """SELECT created_at FROM user_prompts
           WHERE session_id = ? AND project = ? AND created_at > ?
           ORDER BY created_at LIMIT 1""",
        (spot.session_id, spot.project, spot.created_at),
    ).fetchone()
    sql = """SELECT id FROM observations
             WHERE session_id = ? AND project = ? AND deleted_at IS NULL AND created_at >= ?"""
    params: list[object] = [spot.session_id, spot.project, spot.created_at]
    if following is not None:
        sql += " AND created_at <= ?"
        params.append(following[0])
    return [r[0] for r in conn.execute(sql, params).fetchall()]


@dataclass
class ContextRefresh:
    """The rows one write touches, re-derived when it settles (in the caller's transaction).

    Rows are named by their local id (which a move to another project keeps). Call
    :meth:`observation` / :meth:`prompt` *before* changing or deleting a row (a prompt also after
    inserting it), :meth:`inserted` after inserting an observation, then :meth:`settle` after
    the change (and :meth:`flush` at the end when ``deferred``). ``index`` is the batch's
    deferred FTS maintenance when the caller has one (replication), else the index is updated at
    once.
    """

    conn: sqlite3.Connection
    index: fts.DeferredIndex | None = None
    #: Collect the rows each :meth:`settle` finds and re-derive them once, at :meth:`flush`: a
    #: batch that brings a session's prompts after its memories (as a Go chunk does) would
    #: otherwise re-derive the session's memories once per prompt. A row's context is read from
    #: its neighbours' own text, never from their context, so the order of re-derivation does
    #: not matter; which rows need it is still found after each change.
    deferred: bool = False
    _observations: dict[int, list[_Spot]] = field(default_factory=dict)
    _prompts: dict[int, list[_PromptSpot]] = field(default_factory=dict)
    _rows: set[int] = field(default_factory=set)
    _due: set[int] = field(default_factory=set)
    #: Places (deferred :meth:`changed`) whose following rows are due at the flush.
    _places: set[_Spot] = field(default_factory=set)
    #: Every session ``(session_id, project)`` a noted row was or is in: what a
    #: :class:`Foreseen` batch must derive again (its new rows were not all it got).
    touched: set[tuple[str, str]] = field(default_factory=set)

    def observation(self, rowid: int) -> None:
        """Note an observation about to change or be deleted (its current place, if any)."""
        spots = self._observations.setdefault(rowid, [])
        spot = _spot(self.conn, rowid)
        if spot is not None:
            spots.append(spot)
            self.touched.add((spot.session_id, spot.project))

    def inserted(self, rowid: int, state: dict[str, Any]) -> None:
        """Note an observation just inserted with its derived context: only the rows after it
        (if it arrived out of order) need work."""
        spot = _state_spot(rowid, state)
        self.touched.add((spot.session_id, spot.project))
        if spot.live:
            self._rows.update(_following(self.conn, spot))

    def prompt(self, rowid: int) -> None:
        """Note a prompt about to change, be deleted, or just inserted."""
        spot = _prompt_spot(self.conn, rowid)
        self._prompts.setdefault(rowid, [])
        if spot is not None:
            self._prompts[rowid].append(spot)
            self.touched.add((spot.session_id, spot.project))

    def changed(self, rowid: int, before: dict[str, Any], after: dict[str, Any] | None) -> None:
        """Note an observation just changed in place by a caller that knew its replicated
        state ``before`` and ``after`` the change (``None``: soft-deleted): what
        :meth:`observation` then :meth:`settle` would find, without reading the row twice."""
        spots = {_state_spot(rowid, state) for state in (before, after) if state is not None}
        self.touched.update((spot.session_id, spot.project) for spot in spots)
        if (
            after is not None
            and len(spots) == 1
            and _piece(before["title"], before["content"])
            == _piece(after["title"], after["content"])
        ):
            # The same place and the same piece: a row's context never quotes the row itself,
            # and the rows after it quote only its piece, so no context changes (an edit past
            # a long memory's first PIECE_CHARS characters, a pin, a topic: most of an import's
            # edits, each of which re-derived the row and the two after it, ~10 statements).
            return
        if self.deferred:  # the rows after them are found at the flush (most need no lookup)
            self._due.add(rowid)
            self._places.update(spot for spot in spots if spot.live)
            return
        self._rows.add(rowid)
        for spot in spots:
            if spot.live:
                self._rows.update(_following(self.conn, spot))

    def settle(self) -> int:
        """Re-derive every row whose context may have used what was noted; returns how many
        rows' context changed."""
        rows, self._rows = self._rows, set()
        for rowid, spots in self._observations.items():
            now = _spot(self.conn, rowid)
            if now is not None:
                spots = [*spots, now]
                rows.add(now.id)
                self.touched.add((now.session_id, now.project))
            for spot in set(spots):
                if spot.live:
                    rows.update(_following(self.conn, spot))
        for rowid, prompt_spots in self._prompts.items():
            now_prompt = _prompt_spot(self.conn, rowid)
            if now_prompt is not None:
                self.touched.add((now_prompt.session_id, now_prompt.project))
            for prompt_spot in {*prompt_spots, *([now_prompt] if now_prompt else [])}:
                rows.update(_led_by(self.conn, prompt_spot))
        self._observations.clear()
        self._prompts.clear()
        if self.deferred:
            self._due |= rows
            return 0
        return rederive(self.conn, rows, self.index)

    def flush(self, derived: Collection[tuple[str, str]] = ()) -> int:
        """Re-derive the rows deferred settles collected (before the batch's index flush).
        ``derived``: agent sessions (``(session_id, project)``) whose live rows the caller has
        just derived set-wise (:func:`rederive_sessions`): nothing of theirs is done again.

        The rows after a noted place are looked up now rather than when it was noted: any row
        that came there since came with its own bookkeeping, and one that left did too."""
        rows, self._due = self._due, set()
        places, self._places = self._places, set()
        for spot in places:
            if (spot.session_id, spot.project) not in derived:
                rows.update(_following(self.conn, spot))
        return rederive(self.conn, rows, self.index, derived)


def rederive(
    conn: sqlite3.Connection,
    ids: Iterable[int],
    index: fts.DeferredIndex | None = None,
    derived: Collection[tuple[str, str]] = (),
) -> int:
    """Recompute the context of these observations (rowids), rewriting the row and its index
    entry only where it changed; returns how many changed. The live rows of ``derived``
    sessions are skipped (derived set-wise by the caller, by the same rule)."""
    changed = 0
    for rowid in sorted(set(ids)):
        row = conn.execute(
            """SELECT session_id, project, scope, created_at, sync_id, deleted_at, search_context
               FROM observations WHERE id = ?""",
            (rowid,),
        ).fetchone()
        if row is None or (row[5] is None and (row[0], row[1]) in derived):
            continue
        context = derive(
            conn,
            session_id=row[0],
            project=row[1],
            scope=row[2],
            created_at=row[3],
            sync_id=row[4],
            live=row[5] is None,
        )
        if context == row[6]:
            continue
        if index is not None:
            index.before_change("observations", "id", rowid, own_text=False)
        else:
            fts.remove(conn, "observations", "id", rowid, own_text=False)
        conn.execute("UPDATE observations SET search_context = ? WHERE id = ?", (context, rowid))
        if index is None:
            fts.restore(conn, "observations", "id", rowid)
        changed += 1
    return changed


def _derived(
    conn: sqlite3.Connection, sessions: list[tuple[str, str]] | None = None
) -> list[tuple[int, str, str]]:
    """``(rowid, stored context, context by the rule)`` of every live observation of an agent
    session (of ``sessions``, ``(session_id, project)`` pairs, when given), by one set-based
    statement: the rule of :func:`derive` spelled as window functions."""
    wanted, source, params = "", "observations", []
    if sessions is not None:
        # Joined from the sessions wanted, each looked up through the session index (an IN
        # list made SQLite scan the whole index, and for a few hundred sessions it builds an
        # automatic index of the whole table instead: a bulk apply into a large store spent
        # most of its derivation there).
        wanted = f"WITH wanted(sid, pid) AS (VALUES {', '.join('(?, ?)' for _ in sessions)}) "
        source = (
            "wanted CROSS JOIN observations INDEXED BY observations_session"
            " ON session_id = sid AND project = pid"
        )
        params = [value for pair in sessions for value in pair]
    rows = conn.execute(
        f"""{wanted}SELECT id, search_context, prev1, prev2,
                   (SELECT substr(p.content, 1, {PIECE_CHARS}) FROM user_prompts p
                    WHERE p.session_id = w.session_id AND p.project = w.project
                      AND (p.created_at < w.created_at OR (p.created_at = w.created_at
                           AND {_KEY_TAIL_SQL.format("p.sync_id")}
                               <= {_KEY_TAIL_SQL.format("w.sync_id")}))
                    ORDER BY p.created_at DESC, {_KEY_TAIL_SQL.format("p.sync_id")} DESC
                    LIMIT 1) AS prompt
            FROM (SELECT id, session_id, project, created_at, sync_id, search_context,
                         LAG(piece, 1) OVER win AS prev1, LAG(piece, 2) OVER win AS prev2
                  FROM (SELECT id, session_id, project, scope, created_at, sync_id,
                               search_context,
                               substr(title || ' ' || content, 1, {PIECE_CHARS}) AS piece
                        FROM {source} WHERE deleted_at IS NULL AND {_AGENT_SQL})
                  WINDOW win AS (PARTITION BY session_id, project, scope
                                 ORDER BY created_at, sync_id)) AS w""",
        params,
    ).fetchall()
    return [
        (rowid, current, _join((prev1, prev2, prompt)))
        for rowid, current, prev1, prev2, prompt in rows
    ]


def rederive_all(conn: sqlite3.Connection) -> int:
    """Recompute every observation's context by the rule above, in bulk (migrations, rebuilds).

    Writes only the column: the caller rebuilds the FTS index afterwards. Returns how many rows
    changed.
    """
    updates = [(context, rowid) for rowid, current, context in _derived(conn) if context != current]
    updates += [
        ("", r[0])
        for r in conn.execute(
            f"""SELECT id FROM observations WHERE search_context != ''
                AND (deleted_at IS NOT NULL OR NOT {_AGENT_SQL})"""
        )
    ]
    conn.executemany("UPDATE observations SET search_context = ? WHERE id = ?", updates)
    return len(updates)
