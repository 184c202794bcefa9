"""The entity graph (issue 20): entities and typed relationships extracted from memories,
stored per machine and re-derivable from the memories at any time (never synced: a teammate's
machine derives the same graph from the same memories, docs/graph.md).

* **Ingest** (:meth:`GraphMixin.graph_ingest`) reads memories with the rule extractor
  (:mod:`engram.graph.extract`, optionally helped by an LLM extractor,
  :mod:`engram.graph.llm`) and records, per memory, the entities it mentions and the triples
  it states, tagged with the memory's clock (``graph_ingested.hlc``). A memory whose clock moved
  since (edited here or by a replica) is "not ingested" again.
* **Keeping it honest**: whenever a memory's row changes or goes, its graph rows go with it
  (:func:`forget`, called from :mod:`engram.store.fts` on every write path), and entities no
  memory mentions any more are dropped, so no deleted text lingers in the graph.
* **Queries** (:meth:`GraphMixin.graph_query`): the entities a question names are looked up by
  their normalized names; with two or more, the shortest chains of triples connecting them are
  returned (at most :data:`MAX_HOPS` hops), else the triples around the one named; every triple
  lists the memories that state it. Answers are the Structs of :mod:`engram.graph.answers`,
  which every face serves as they are.

Size: over 500 lines on purpose: ingesting, keeping honest and reading one graph share its
tables' rules; the extraction itself lives in :mod:`engram.graph`.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engram.errors import NotFoundError, StoreUnavailableError, ValidationError
from engram.project import project_name
from engram.store.base import StoreBase
from engram.store.graph_rows import forget
from engram.store.query import STOPWORDS
from engram.text import require_storable
from engram.times import now_text

if TYPE_CHECKING:  # the graph's answers and rules load only when a graph is read or built
    from engram.graph.answers import (
        EntityRelationships,
        GraphAnswer,
        GraphEntity,
        GraphTriple,
        IngestReport,
    )
    from engram.graph.extract import Extraction
    from engram.graph.llm import LLMExtractor

RULES = "rules"
MAX_HOPS = 3
MAX_VISITED = 5000
MAX_QUESTION = 2000
MAX_SOURCES = 5
BATCH = 200
#: How many memories a query brings into the graph first, when some are not ingested yet.
CATCH_UP = 2000
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#._/-]*")


class GraphMixin(StoreBase):
    # --- ingest -----------------------------------------------------------------------------

    def _selection(self, project: str | None) -> tuple[str, list[Any]]:
        if project:
            return "o.project = ?", [project_name(project)]
        return "1", []

    def graph_pending(self, project: str | None = None) -> int:
        """Live memories (of ``project``, or all) the graph does not hold. (Any change to a
        memory's text takes it out of the graph, so held means held as it is now.)"""
        where, params = self._selection(project)
        return int(
            self.db.scalar(
                f"""SELECT COUNT(*) FROM observations o
                    WHERE o.deleted_at IS NULL AND {where} AND NOT EXISTS
                      (SELECT 1 FROM graph_ingested g WHERE g.observation_id = o.id)""",
                params,
            )
            or 0
        )

    def graph_ingest(
        self,
        memory: Any = None,
        *,
        project: str | None = None,
        force: bool = False,
        limit: int | None = None,
        extractor: LLMExtractor | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> IngestReport:
        """Bring memories into the graph: one (``memory``: its #id), or every live memory of
        ``project`` (``None``: every project) not ingested as it is now (``force``: all of
        them again). ``extractor`` adds an LLM's entities and relationships to the rules'."""
        from engram.graph.answers import IngestReport

        started = time.perf_counter()
        report = IngestReport(
            extractor=RULES if extractor is None else f"{RULES}+{extractor.name}",
            memories=0, entities=0, relationships=0, remaining=0, elapsed_ms=0.0, errors=[],
        )  # fmt: skip
        where, params = self._selection(project)
        if memory is not None:
            from engram.store.checks import check_id

            oid = check_id(str(memory).strip().removeprefix("#"))
            ids = [
                r[0]
                for r in self.db.rows(
                    "SELECT id FROM observations WHERE id = ? AND deleted_at IS NULL", (oid,)
                )
            ]
            if not ids:
                raise NotFoundError(f"Observation #{oid} not found")
        else:
            stale = (
                ""
                if force
                else (
                    "AND NOT EXISTS (SELECT 1 FROM graph_ingested g WHERE g.observation_id = o.id)"
                )
            )
            tail = "" if limit is None else f" LIMIT {max(0, int(limit))}"
            ids = [
                r[0]
                for r in self.db.rows(
                    f"""SELECT o.id FROM observations o
                    WHERE o.deleted_at IS NULL AND {where} {stale} ORDER BY o.id{tail}""",
                    params,
                )
            ]
        entities: set[int] = set()
        done = 0
        for start in range(0, len(ids), BATCH):
            part = ids[start : start + BATCH]
            rows = self.db.rows(
                f"""SELECT id, project, title, content, type, topic_key, hlc FROM observations
                    WHERE id IN ({", ".join("?" for _ in part)}) AND deleted_at IS NULL""",
                part,
            )
            found = [(row, self._extract(row, extractor, report)) for row in rows]
            with self.db.write() as conn:
                cache: dict[tuple[str, str], int] = {}
                for row, extraction in found:
                    # The row may have changed between the read and this transaction.
                    now = conn.execute(
                        "SELECT hlc FROM observations WHERE id = ? AND deleted_at IS NULL",
                        (row["id"],),
                    ).fetchone()
                    if now is None or now[0] != row["hlc"]:
                        continue
                    forget(conn, [row["id"]])
                    written = _store(conn, row, extraction, report.extractor, cache)
                    entities.update(written)
                    report.relationships += len(extraction.triples)
                    report.memories += 1
            done += len(part)
            if progress is not None:
                progress(done, len(ids))
        report.entities = len(entities)
        report.remaining = self.graph_pending(project)
        report.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        return report

    @staticmethod
    def _extract(
        row: sqlite3.Row, extractor: LLMExtractor | None, report: IngestReport
    ) -> Extraction:
        from engram.graph.extract import extract  # the rules load only when a graph is built

        found = extract(row["title"], row["content"], row["type"], row["topic_key"])
        if extractor is None:
            return found
        try:
            extra = extractor.extract(row["title"], row["content"])
        except Exception as exc:  # the provider failed: the rules' graph still stands
            if len(report.errors) < 5:
                report.errors.append(f"#{row['id']}: {exc}")
            return found
        return _merged(found, extra)

    # --- queries ----------------------------------------------------------------------------

    def _catch_up(self, project: str | None) -> int:
        """Ingest (rules only) what the graph lacks before answering, up to :data:`CATCH_UP`
        memories; returns how many still wait. Every change of a memory appends to the
        journal, so while its last seq stays where the last complete catch-up saw it, there is
        nothing to look for (one index probe instead of a pass over the memories)."""
        mark = (project, self.db.scalar("SELECT MAX(seq) FROM sync_journal"))
        caught: set[Any] = self.__dict__.setdefault("_graph_caught_up", set())
        if mark in caught:
            return 0
        pending = self.graph_pending(project)
        if pending:
            try:
                with self.db.without_waiting():  # a query never waits for another writer
                    pending = self.graph_ingest(project=project, limit=CATCH_UP).remaining
            except StoreUnavailableError:
                return pending
        if pending == 0:
            caught.clear()
            caught.add((project, self.db.scalar("SELECT MAX(seq) FROM sync_journal")))
        return pending

    def graph_query(
        self, question: str, *, project: str | None = None, limit: int = 10
    ) -> GraphAnswer:
        """Triples that answer ``question`` ("what connects the auth middleware to the session
        store?"), each with the memories that state it."""
        from engram.graph.answers import GraphAnswer, GraphEntityName

        started = time.perf_counter()
        question = _check_question(question)
        limit = _check_limit(limit)
        name = project_name(project) if project else None
        remaining = self._catch_up(name)
        with self.db.read() as conn:
            matched = _matched_entities(conn, question, name)
            triples, connected = [], False
            if len(matched) >= 2:
                triples = _paths(conn, [m["id"] for m in matched], limit)
                connected = bool(triples)
            if not triples and matched:
                triples = _around(conn, [m["id"] for m in matched], limit)
            if not matched:
                loose = _loose_entities(conn, question, name)
                triples = _around(conn, [m["id"] for m in loose], limit) if loose else []
        return GraphAnswer(
            question=question,
            project=name or "",
            entities=[
                GraphEntityName(name=m["name"], kind=m["kind"], project=m["project"])
                for m in matched
            ],
            connected=connected,
            triples=[_public(t) for t in triples],
            count=len(triples),
            not_ingested=remaining,
            elapsed_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    def graph_relationships(
        self, entity: str, *, project: str | None = None, limit: int = 50
    ) -> EntityRelationships:
        """Every relationship of the entity named ``entity`` (case-insensitive), strongest first;
        an empty list when the graph has no such entity."""
        if not isinstance(entity, str) or not entity.strip():
            raise ValidationError("give an entity name", field="entity_name")
        require_storable(entity, "entity_name")
        limit = _check_limit(limit, 500)
        name = project_name(project) if project else None
        self._catch_up(name)
        from engram.graph.answers import EntityRelationship, EntityRelationships
        from engram.graph.extract import normalize

        norm = normalize(entity)
        with self.db.read() as conn:
            clauses, params = ["e.norm = ?"], [norm]
            if name:
                clauses.append("e.project = ?")
                params.append(name)
            rows = conn.execute(
                f"SELECT * FROM graph_entities e WHERE {' AND '.join(clauses)} ORDER BY project",
                params,
            ).fetchall()
            ids = [r["id"] for r in rows]
            triples = _around(conn, ids, limit) if ids else []
        relationships = []
        for t in triples:
            outgoing = t["subject_norm"] == norm
            relationships.append(
                EntityRelationship(
                    predicate=t["predicate"],
                    direction="out" if outgoing else "in",
                    target=t["object"] if outgoing else t["subject"],
                    target_kind=t["object_kind"] if outgoing else t["subject_kind"],
                    weight=t["weight"],
                    source=t["source"],
                    sources=t["sources"],
                )
            )
        return EntityRelationships(
            entity=rows[0]["name"] if rows else entity.strip(),
            kind=rows[0]["kind"] if rows else None,
            relationships=relationships,
            count=len(relationships),
        )

    def graph_entities(self, project: str | None = None, *, limit: int = 50) -> list[GraphEntity]:
        """The most connected entities (of ``project``, or all), with their degree."""
        from engram.graph.answers import GraphEntity

        limit = _check_limit(limit, 1000)
        name = project_name(project) if project else None
        self._catch_up(name)
        where, params = ("e.project = ?", [name]) if name else ("1", [])
        rows = self.db.rows(
            f"""SELECT e.id, e.name, e.kind, e.project,
                   (SELECT COUNT(*) FROM graph_triples t WHERE t.subject = e.id OR t.object = e.id)
                     AS degree,
                   (SELECT COUNT(*) FROM graph_mentions m WHERE m.entity = e.id) AS memories
                FROM graph_entities e WHERE {where}
                ORDER BY degree DESC, memories DESC, e.norm LIMIT ?""",
            [*params, limit],
        )
        return [GraphEntity(**dict(r)) for r in rows]

    def graph_of_memory(self, memory: Any) -> dict[str, Any]:
        """The entities one memory mentions and the triples it states (ingesting it first when
        the graph does not hold it as it is now)."""
        from engram.store.checks import check_id

        oid = check_id(str(memory).strip().removeprefix("#"))
        obs = self.get_observation(oid)
        if self.db.one("SELECT 1 FROM graph_ingested WHERE observation_id = ?", (oid,)) is None:
            self.graph_ingest(oid)
        with self.db.read() as conn:
            entities = [
                dict(r)
                for r in conn.execute(
                    """SELECT e.name, e.kind FROM graph_mentions m JOIN graph_entities e
                   ON e.id = m.entity WHERE m.observation_id = ? ORDER BY e.norm""",
                    (oid,),
                )
            ]
            triples = [
                dict(r)
                for r in conn.execute(
                    """SELECT s.name AS subject, t.predicate, o.name AS object, t.weight
                   FROM graph_triples t JOIN graph_entities s ON s.id = t.subject
                   JOIN graph_entities o ON o.id = t.object
                   WHERE t.observation_id = ? ORDER BY t.weight DESC, s.norm, t.predicate""",
                    (oid,),
                )
            ]
        return {
            "id": obs.id,
            "sync_id": obs.sync_id,
            "title": obs.title,
            "entities": entities,
            "triples": triples,
        }


# --- writing one memory's graph ------------------------------------------------------------------


def _store(
    conn: sqlite3.Connection,
    row: sqlite3.Row,
    extraction: Extraction,
    extractor: str,
    cache: dict[tuple[str, str], int],
) -> set[int]:
    project = row["project"]

    def entity_id(name: str, kind: str, norm: str) -> int:
        key = (project, norm)
        found = cache.get(key)
        if found is None:
            conn.execute(
                "INSERT OR IGNORE INTO graph_entities(project, norm, name, kind) VALUES (?, ?, ?, ?)",
                (project, norm, name, kind),
            )
            found = conn.execute(
                "SELECT id FROM graph_entities WHERE project = ? AND norm = ?", key
            ).fetchone()[0]
            cache[key] = found
        return found

    ids = {e.norm: entity_id(e.name, e.kind, e.norm) for e in extraction.entities if e.norm}
    conn.executemany(
        "INSERT OR IGNORE INTO graph_mentions(observation_id, entity) VALUES (?, ?)",
        [(row["id"], i) for i in sorted(set(ids.values()))],
    )
    triples = []
    for t in extraction.triples:
        subject = ids.get(t.subject.norm) or entity_id(
            t.subject.name, t.subject.kind, t.subject.norm
        )
        obj = ids.get(t.object.norm) or entity_id(t.object.name, t.object.kind, t.object.norm)
        triples.append((row["id"], subject, t.predicate, obj, t.weight))
    conn.executemany(
        """INSERT INTO graph_triples(observation_id, subject, predicate, object, weight)
           VALUES (?, ?, ?, ?, ?)
           ON CONFLICT DO UPDATE SET weight = MAX(weight, excluded.weight)""",
        triples,
    )
    conn.execute(
        """INSERT OR REPLACE INTO graph_ingested(observation_id, hlc, extractor, ingested_at)
           VALUES (?, ?, ?, ?)""",
        (row["id"], row["hlc"], extractor, now_text()),
    )
    return set(ids.values())


def _merged(rules: Extraction, extra: Extraction) -> Extraction:
    entities = {e.norm: e for e in rules.entities}
    for e in extra.entities:
        entities.setdefault(e.norm, e)
    triples = {(t.subject.norm, t.predicate, t.object.norm): t for t in rules.triples}
    for t in extra.triples:
        triples.setdefault((t.subject.norm, t.predicate, t.object.norm), t)
    from engram.graph.extract import Extraction

    return Extraction(list(entities.values()), list(triples.values()))


# --- reading -----------------------------------------------------------------------------------


def _check_question(question: Any) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ValidationError("question cannot be empty", field="question")
    require_storable(question, "question")
    text = question.strip()
    if len(text) > MAX_QUESTION:
        raise ValidationError(
            f"question is {len(text):,} characters, over the {MAX_QUESTION:,} allowed",
            field="question",
        )
    return text


def _check_limit(limit: Any, maximum: int = 100) -> int:
    if isinstance(limit, bool):
        raise ValidationError("limit must be an integer", field="limit")
    try:
        value = int(limit)
    except (TypeError, ValueError):
        raise ValidationError(f"limit must be an integer, got {limit!r}", field="limit") from None
    if value < 1:
        raise ValidationError("limit must be at least 1", field="limit")
    return min(value, maximum)


def _candidate_norms(question: str) -> list[str]:
    """Names a question may use for entities: what the extractor finds in it, and its word
    runs of one to four words (stop words alone never count)."""
    from engram.graph.extract import normalize, question_entities

    names = {e.norm for e in question_entities(question)}
    words = _WORDS.findall(question)
    for size in range(1, 5):
        for start in range(0, len(words) - size + 1):
            run = words[start : start + size]
            if all(w.lower() in STOPWORDS for w in run):
                continue
            if run[0].lower() in STOPWORDS or run[-1].lower() in STOPWORDS:
                continue
            names.add(normalize(" ".join(run)))
    return sorted(n for n in names if n)


def _matched_entities(
    conn: sqlite3.Connection, question: str, project: str | None
) -> list[sqlite3.Row]:
    """The graph's entities the question names, longest names first; a name inside a longer
    matched one ("session" in "session store") is left out."""
    norms = _candidate_norms(question)
    if not norms:
        return []
    marks = ", ".join("?" for _ in norms)
    clauses, params = [f"norm IN ({marks})"], list(norms)
    if project:
        clauses.append("project = ?")
        params.append(project)
    rows = conn.execute(
        f"SELECT * FROM graph_entities WHERE {' AND '.join(clauses)}", params
    ).fetchall()
    rows.sort(key=lambda r: (-len(r["norm"]), r["norm"], r["project"]))
    kept: list[sqlite3.Row] = []
    for row in rows:
        inside = any(
            re.search(rf"(?<!\w){re.escape(row['norm'])}(?!\w)", k["norm"])
            for k in kept
            if k["norm"] != row["norm"]
        )
        if not inside:
            kept.append(row)
    return kept


def _loose_entities(
    conn: sqlite3.Connection, question: str, project: str | None
) -> list[sqlite3.Row]:
    """When no entity is named exactly: entities whose name contains a word of the question
    (four letters or more, not a stop word)."""
    words = sorted(
        {w.lower() for w in _WORDS.findall(question) if len(w) >= 4 and w.lower() not in STOPWORDS}
    )[:8]
    found: dict[int, sqlite3.Row] = {}
    for word in words:
        pattern = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        clauses, params = ["norm LIKE ? ESCAPE '\\'"], [pattern]
        if project:
            clauses.append("project = ?")
            params.append(project)
        for row in conn.execute(
            f"SELECT * FROM graph_entities WHERE {' AND '.join(clauses)} LIMIT 20", params
        ):
            found[row["id"]] = row
    return list(found.values())


# The graph tables hold live memories only (every change or deletion of a memory takes its rows
# out, see :func:`forget`), so walking the graph needs no join to the memories; only the
# triples shown are joined to their source memories.


def _neighbours(conn: sqlite3.Connection, nodes: list[int]) -> dict[int, list[tuple[str, int]]]:
    """Each node's neighbours (either direction), as ``(norm, id)`` sorted by name: the walk
    visits them in the same order on every machine (local ids differ, names do not)."""
    found: dict[int, set[tuple[str, int]]] = {}
    for start in range(0, len(nodes), 400):
        part = nodes[start : start + 400]
        marks = ", ".join("?" for _ in part)
        rows = conn.execute(
            f"""SELECT t.subject, t.object, s.norm, o.norm FROM graph_triples t
                    JOIN graph_entities s ON s.id = t.subject
                    JOIN graph_entities o ON o.id = t.object
                WHERE t.subject IN ({marks})
                UNION
                SELECT t.subject, t.object, s.norm, o.norm FROM graph_triples t
                    JOIN graph_entities s ON s.id = t.subject
                    JOIN graph_entities o ON o.id = t.object
                WHERE t.object IN ({marks})""",
            [*part, *part],
        ).fetchall()
        for subject, obj, s_norm, o_norm in rows:
            found.setdefault(subject, set()).add((o_norm, obj))
            found.setdefault(obj, set()).add((s_norm, subject))
    return {node: sorted(items) for node, items in found.items()}


def _shortest(conn: sqlite3.Connection, start: int, goal: int) -> list[int] | None:
    """The entities of a shortest chain from ``start`` to ``goal`` (at most :data:`MAX_HOPS`
    triples), searched from both ends at once; ``None`` when there is none that short."""
    if start == goal:
        return None
    # entity → the entity it was reached from
    sides: list[dict[int, int | None]] = [{start: None}, {goal: None}]
    fronts = [[start], [goal]]
    for _ in range(MAX_HOPS):
        side = 0 if len(fronts[0]) <= len(fronts[1]) else 1
        if not fronts[side]:
            return None
        mine, theirs = sides[side], sides[1 - side]
        neighbours = _neighbours(conn, fronts[side])
        nxt: list[int] = []
        for node in fronts[side]:
            for _, other in neighbours.get(node, []):
                if other in mine:
                    continue
                mine[other] = node
                nxt.append(other)
                if other in theirs:
                    half: list[int] = []
                    step: int | None = other
                    while step is not None:
                        half.append(step)
                        step = mine[step]
                    rest: list[int] = []
                    step = theirs[other]
                    while step is not None:
                        rest.append(step)
                        step = theirs[step]
                    chain = [*reversed(half), *rest]
                    return chain if side == 0 else list(reversed(chain))
        fronts[side] = nxt
        if len(sides[0]) + len(sides[1]) > MAX_VISITED:
            return None
    return None


_TRIPLE = """
SELECT t.subject, t.predicate, t.object, MAX(t.weight) AS weight, COUNT(*) AS memories,
       s.name AS s_name, s.kind AS s_kind, s.norm AS s_norm, s.project,
       o.name AS o_name, o.kind AS o_kind, o.norm AS o_norm
FROM graph_triples t
JOIN graph_entities s ON s.id = t.subject
JOIN graph_entities o ON o.id = t.object
"""
_ORDER = "weight DESC, memories DESC, s_norm, t.predicate, o_norm"


def _item(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    """One triple as answers show it, with the memories that state it (lowest #id first), and
    the lookup keys of its ends (``*_norm``)."""
    from engram.graph.answers import GraphSource

    sources = [
        GraphSource(id=r[0], sync_id=r[1], title=r[2])
        for r in conn.execute(
            """SELECT o.id, o.sync_id, o.title FROM graph_triples t
               JOIN observations o ON o.id = t.observation_id AND o.deleted_at IS NULL
               WHERE t.subject = ? AND t.predicate = ? AND t.object = ?
               ORDER BY o.id LIMIT ?""",
            (row["subject"], row["predicate"], row["object"], MAX_SOURCES),
        )
    ]
    return {
        "subject": row["s_name"], "subject_kind": row["s_kind"], "subject_norm": row["s_norm"],
        "predicate": row["predicate"],
        "object": row["o_name"], "object_kind": row["o_kind"], "object_norm": row["o_norm"],
        "weight": row["weight"], "project": row["project"],
        "source": sources[0] if sources else None, "sources": sources,
    }  # fmt: skip


def _public(item: dict[str, Any]) -> GraphTriple:
    """A triple as answers show it (without the lookup keys)."""
    from engram.graph.answers import GraphTriple

    return GraphTriple(**{k: v for k, v in item.items() if not k.endswith("_norm")})


def _around(conn: sqlite3.Connection, ids: list[int], limit: int) -> list[dict[str, Any]]:
    """The strongest triples touching the entities ``ids`` (ranked in SQL: a much-named
    entity's thousands of triples are never all read)."""
    if not ids:
        return []
    marks = ", ".join("?" for _ in ids)
    rows = conn.execute(
        f"""{_TRIPLE} WHERE t.subject IN ({marks}) OR t.object IN ({marks})
            GROUP BY t.subject, t.predicate, t.object ORDER BY {_ORDER} LIMIT ?""",
        [*ids, *ids, limit],
    ).fetchall()
    return [_item(conn, row) for row in rows]


def _link(conn: sqlite3.Connection, a: int, b: int) -> sqlite3.Row | None:
    """The strongest triple between two entities, whichever way it points."""
    row: sqlite3.Row | None = conn.execute(
        f"""{_TRIPLE} WHERE (t.subject = ?1 AND t.object = ?2) OR (t.subject = ?2 AND t.object = ?1)
            GROUP BY t.subject, t.predicate, t.object
            ORDER BY t.predicate = 'related_to', {_ORDER} LIMIT 1""",
        (a, b),
    ).fetchone()
    return row


def _paths(conn: sqlite3.Connection, ids: list[int], limit: int) -> list[dict[str, Any]]:
    """The triples of the shortest chains (≤ :data:`MAX_HOPS`) linking the named entities one
    after the other; ``path`` numbers the chain each triple belongs to."""
    results: list[dict[str, Any]] = []
    seen: set[tuple[int, str, int]] = set()
    for chain_no, (start, goal) in enumerate(itertools.pairwise(ids), 1):
        chain = _shortest(conn, start, goal)
        for a, b in itertools.pairwise(chain or []):
            row = _link(conn, a, b)
            key = (row["subject"], row["predicate"], row["object"]) if row else None
            if row is None or key in seen:
                continue
            seen.add(key)  # type: ignore[arg-type]
            results.append({**_item(conn, row), "path": chain_no})
    return results[:limit]
