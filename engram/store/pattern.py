"""Regular-expression search over memories' text: the first seed's ``POST /search`` (the Hub
API) in our terms, as a store method so every face could offer it the same way.

* The pattern is untrusted input, so it runs on RE2 (``google-re2``): matching is linear in the
  text, whatever the pattern — ``(a+)+$`` cannot backtrack for minutes as it can in Python's
  ``re``. Constructs RE2 refuses (backreferences, look-around) are a clear "invalid regular
  expression" error, and RE2's memory budget bounds what one compiled pattern may cost.
* Linear is not free: a pattern that matches nothing still reads every candidate. The scan is
  also bounded in time (``time_limit``); when it runs out the answer says so, with what it found.
* Filters mirror the seed's: ``session_id`` is a substring of Engram session ids (the seed's
  ``*<id>*`` filename glob), ``tags`` match types and topic keys, dates bound ``created_at``.
* Results are memories' text, newest first, cut at ``max_chars``: scanning stops once the answer
  is full, so a common word costs a few rows, not the whole store.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from engram.errors import NotFoundError, ValidationError
from engram.store.base import StoreBase

MAX_QUERY_CHARS = 500
MAX_RESULT_CHARS = 4000
#: Characters of each memory a filter-only search shows (the seed's "first 500 chars").
SNIPPET_CHARS = 500
#: How long one search may scan before it answers with what it has.
TIME_LIMIT_SECONDS = 5.0
#: The seed's session id pattern.
SESSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")
MAX_TAGS = 50
MAX_TAG_CHARS = 200
#: RE2's budget for one compiled pattern (its default is 8 MiB; patterns here are ≤ 500 chars).
RE2_MAX_MEM = 8 << 20
_BATCH = 256
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: Patterns anchored to the whole text (or turning per-line anchors off) may match a memory
#: alone but not the same memory inside a batch: they are matched one memory at a time.
_ABSOLUTE_ANCHORS = re.compile(r"\\[Az]|\(\?[a-zA-Z]*-[a-zA-Z]*m")


@dataclass(slots=True)
class PatternResult:
    """What a pattern search found: ``text`` is the answer, cut at the limit."""

    query: str
    text: str
    matched: int
    scanned: int
    #: How many memories the filters select, counted only when the scan stopped early.
    candidates: int | None
    truncated: bool
    stopped_early: bool
    elapsed_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def compile_pattern(query: str) -> Any:
    """``query`` compiled by RE2, or a :class:`ValidationError` saying what is wrong with it."""
    import re2  # imported on use: the CLI's start-up never pays for it

    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(
            f"query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}", field="query"
        )
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.max_mem = RE2_MAX_MEM
    try:
        re2.compile(query, options=options)  # errors then quote the user's pattern, not ours
        # (?m): ^ and $ match at every line, as in ripgrep, which the seed's clients expect.
        return re2.compile(f"(?m){query}", options=options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValidationError(
            f"query is not a valid regular expression: {reason} (RE2 syntax: no "
            "backreferences or look-around)",
            field="query",
        ) from None


def _day(value: str | None, field: str) -> date | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE.match(value):
        raise ValidationError(f"{field} must be a date as YYYY-MM-DD, got {value!r}", field=field)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{field} is not a real date: {value!r}", field=field) from None


def _tags(tags: list[str] | None) -> list[str]:
    if not tags:
        return []
    if len(tags) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags, got {len(tags)}", field="tags")
    cleaned = []
    for tag in tags:
        value = tag.strip().lower() if isinstance(tag, str) else ""
        if not value or len(value) > MAX_TAG_CHARS:
            raise ValidationError(
                f"each tag must be a non-empty text of at most {MAX_TAG_CHARS} characters, "
                f"got {tag!r}",
                field="tags",
            )
        cleaned.append(value)
    return cleaned


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"


def _memory_text(row: Any) -> str:
    """One memory as the answer shows it: a header naming it, then its title and content."""
    topic = f" {row['topic_key']}" if row["topic_key"] else ""
    header = (
        f"{row['session_id']} #{row['id']} [{row['type']}]{topic} "
        f"{row['project']} {row['created_at']}"
    )
    return f"{header}\n{row['title']}\n{row['content']}"


class PatternSearchMixin(StoreBase):
    def pattern_search(
        self,
        query: str | None = None,
        *,
        session_id: str | None = None,
        tags: list[str] | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
        max_chars: int = MAX_RESULT_CHARS,
        time_limit: float = TIME_LIMIT_SECONDS,
    ) -> PatternResult:
        """Live memories whose title or content matches the regular expression ``query``
        (case-sensitive, as ripgrep; ``(?i)`` for either case), newest first.

        At least one of the arguments must be given. Without ``query`` every memory the
        filters select is shown, each cut at :data:`SNIPPET_CHARS`. Raises
        :class:`ValidationError` for a bad pattern, session id, tag or date, and
        :class:`NotFoundError` when the filters select no memory at all.
        """
        started = time.perf_counter()
        query = query or ""
        tag_list = _tags(tags)
        if session_id is not None and not SESSION_ID_PATTERN.match(session_id):
            raise ValidationError(
                f"session_id may contain only letters, digits, '_', '.' and '-', got "
                f"{session_id!r}",
                field="session_id",
            )
        first, last = _day(date_from, "date_from"), _day(date_to, "date_to")
        if first and last and first > last:
            raise ValidationError(
                f"date_from {date_from} is after date_to {date_to}", field="date_from"
            )
        if not (query or session_id or tag_list or first or last):
            raise ValidationError(
                "give at least one of query, session_id, tags, date_from or date_to",
                field="query",
            )
        pattern = compile_pattern(query) if query else None

        clauses, params = ["o.deleted_at IS NULL"], []
        if session_id:
            clauses.append("instr(o.session_id, ?) > 0")
            params.append(session_id)
        if tag_list:
            marks = ", ".join("?" for _ in tag_list)
            either = [f"lower(o.type) IN ({marks})", f"o.topic_key IN ({marks})"]
            params += [*tag_list, *tag_list]
            for tag in tag_list:  # a tag also names every topic under it: "auth" ⊃ "auth/jwt"
                either.append("o.topic_key LIKE ? ESCAPE '\\'")
                params.append(_like_prefix(tag))
            clauses.append(f"({' OR '.join(either)})")
        if first:
            clauses.append("o.created_at >= ?")
            params.append(f"{first.isoformat()} 00:00:00")
        if last:
            clauses.append("o.created_at < ?")
            params.append(f"{(last + timedelta(days=1)).isoformat()} 00:00:00")
        where = " AND ".join(clauses)
        filtered = bool(session_id or tag_list or first or last)
        # A batch's rows joined by newlines match when one of them does (given the per-line
        # anchors below), so one RE2 call per batch skips the rows that cannot match: RE2's
        # per-call cost is a few microseconds, its scanning is fast.
        batch_filter = pattern is not None and not _ABSOLUTE_ANCHORS.search(query)
        deadline = started + max(0.0, time_limit)
        pieces: list[str] = []
        size = matched = scanned = 0
        truncated = stopped_early = False
        with self.db.read() as conn:
            cursor = conn.execute(
                "SELECT o.id, o.session_id, o.type, o.title, o.content, o.project, o.topic_key,"
                f" o.created_at FROM observations o WHERE {where}"
                " ORDER BY o.created_at DESC, o.id DESC",
                params,
            )
            while True:
                if time.perf_counter() >= deadline:
                    stopped_early = cursor.fetchone() is not None
                    break
                batch = cursor.fetchmany(_BATCH)
                if not batch:
                    break
                texts = [f"{row['title']}\n{row['content']}" for row in batch]
                if (
                    batch_filter
                    and pattern is not None
                    and pattern.search("\n".join(texts)) is None
                ):
                    scanned += len(batch)
                    continue
                for place, (row, text) in enumerate(zip(batch, texts, strict=True), 1):
                    scanned += 1
                    if pattern is not None and pattern.search(text) is None:
                        continue
                    matched += 1
                    shown = _memory_text(row)
                    if pattern is None and len(shown) > SNIPPET_CHARS:
                        shown = shown[:SNIPPET_CHARS]
                    piece = ("\n\n" if pieces else "") + shown
                    pieces.append(piece)
                    size += len(piece)
                    if size >= max_chars:
                        # "more than shown": text was cut, or memories were left unread.
                        unread = place < len(batch) or cursor.fetchone() is not None
                        truncated = size > max_chars or unread
                        break
                if size >= max_chars:
                    break
            candidates = None
            if stopped_early:
                candidates = int(
                    conn.execute(
                        f"SELECT COUNT(*) FROM observations o WHERE {where}", params
                    ).fetchone()[0]
                )
        if scanned == 0 and filtered and not stopped_early:
            raise NotFoundError(_nothing_selected(session_id, tag_list, date_from, date_to))
        text = "".join(pieces)[:max_chars]
        return PatternResult(
            query=query,
            text=text,
            matched=matched,
            scanned=scanned,
            candidates=candidates,
            truncated=truncated,
            stopped_early=stopped_early,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
        )


def _nothing_selected(
    session_id: str | None, tags: list[str], date_from: str | None, date_to: str | None
) -> str:
    parts = []
    if session_id:
        parts.append(f"session_id {session_id!r}")
    if tags:
        parts.append(f"tags {tags}")
    if date_from or date_to:
        parts.append(f"dates {date_from or '…'} to {date_to or '…'}")
    return "no matching sessions: no memory matches " + ", ".join(parts)
