"""The dashboard's memory graph (issue 20): a memory's relations to other memories, and a
project's graph of entities (files, modules, libraries, services, errors, people, decisions)
drawn on the server as inline SVG — no script, no CDN.

The server derives the entity graph the way every client does (the rules of
:mod:`engram.graph.extract`), from the read model's newest :data:`GRAPH_MEMORIES` live memories of
the project: entities are never synced, each machine derives them. Labels are teammates' input,
so every one is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Any

from markupsafe import Markup
from sqlalchemy import Connection, and_, or_, select

from engram.graph.extract import extract
from engram.record import orphans
from engram_cloud import models

GRAPH_MEMORIES = 500
GRAPH_NODES = 36
GRAPH_TRIPLES = 40
WIDTH, HEIGHT = 760, 560
KIND_COLORS = {
    "file": "#3451b2",
    "module": "#1b7f4b",
    "library": "#b26b00",
    "service": "#0f7b8a",
    "error": "#b42318",
    "person": "#8e3ab2",
    "decision": "#595f66",
}
_NOTES = {
    "supersedes": ("supersedes", "superseded by"),
    "conflicts_with": ("conflicts with", "contested by"),
}

# --- a memory's relations ---------------------------------------------------------------------


def memory_relations(conn: Connection, obs: Any) -> tuple[list[dict[str, Any]], bool]:
    """The relations naming ``obs`` in its project (oldest first), each with the other memory
    as the read model knows it, and whether ``obs`` needs review (a pending conflict)."""
    r, o = models.relations, models.observations
    rows = conn.execute(
        select(r)
        .where(
            r.c.project == obs.project,
            or_(r.c.source_id == obs.sync_id, r.c.target_id == obs.sync_id),
        )
        .order_by(r.c.created_at, r.c.sync_id)
    ).all()
    others = {row.target_id if row.source_id == obs.sync_id else row.source_id for row in rows}
    found = {
        m.sync_id: m
        for m in conn.execute(
            select(
                o.c.sync_id,
                o.c.session_id,
                o.c.title,
                o.c.scope,
                o.c.deleted_at,
                o.c.delete_reason,
            ).where(and_(o.c.project == obs.project, o.c.sync_id.in_(sorted(others))))
        )
    }
    out = []
    for row in rows:
        outgoing = row.source_id == obs.sync_id
        other_key = row.target_id if outgoing else row.source_id
        other = found.get(other_key)
        if row.scope != "personal" and (
            obs.scope == "personal" or (other is not None and other.scope == "personal")
        ):
            continue  # a shared relation never exposes a personal memory
        if row.superseded_at:
            state = "superseded"
        elif other is None:
            state = "waiting"  # its memory has not arrived on the server yet
        elif _orphaned(row.relation, outgoing, obs, other):
            state = "orphaned"
        else:
            state = row.judgment_status
        verbs = _NOTES.get(row.relation, (row.relation.replace("_", " "),) * 2)
        out.append(
            {
                "sync_id": row.sync_id,
                "relation": row.relation,
                "verb": verbs[0] if outgoing else verbs[1],
                "state": state,
                "reason": row.reason,
                "contributor": row.contributor,
                "other_sync_id": other_key,
                "other_title": other.title if other is not None else None,
                "other_session": other.session_id if other is not None else None,
            }
        )
    review = any(x["relation"] == "conflicts_with" and x["state"] == "pending" for x in out)
    return out, review


def _orphaned(relation: str, outgoing: bool, obs: Any, other: Any) -> bool:
    """The store's rule (:func:`engram.record.orphans`) for the relation between ``obs`` and
    ``other``, ``obs`` being its source when ``outgoing``."""
    source, target = (obs, other) if outgoing else (other, obs)
    return (source.deleted_at is not None and orphans(relation, "source", None)) or (
        target.deleted_at is not None and orphans(relation, "target", target.delete_reason)
    )


def link_count(relations: list[dict[str, Any]]) -> int:
    """The importance formula's links among a memory's relations (engram/store/links.py)."""
    return sum(r["state"] in ("pending", "judged") for r in relations)


# --- a project's entity graph -----------------------------------------------------------------


@dataclass(slots=True)
class Node:
    norm: str
    name: str
    kind: str
    degree: int = 0
    x: float = 0.0
    y: float = 0.0


@dataclass(slots=True)
class ProjectGraph:
    memories: int
    nodes: list[Node] = field(default_factory=list)
    #: (subject, predicate, object, weight, [(sync_id, session_id, title)])
    triples: list[tuple[Node, str, Node, float, list[tuple[str, str, str]]]] = field(
        default_factory=list
    )

    @property
    def svg(self) -> Markup:
        return draw(self)


def project_graph(conn: Connection, project: str) -> ProjectGraph:
    """The entity graph of ``project``'s newest live memories, its most connected entities."""
    o = models.observations
    rows = conn.execute(
        select(o.c.sync_id, o.c.session_id, o.c.title, o.c.content, o.c.type)
        .where(o.c.project == project, o.c.deleted_at.is_(None), o.c.scope == "project")
        .order_by(o.c.created_at.desc(), o.c.sync_id.desc())
        .limit(GRAPH_MEMORIES)
    ).all()
    nodes: dict[str, Node] = {}
    edges: dict[tuple[str, str, str], list[Any]] = {}
    for row in rows:
        found = extract(row.title, row.content, row.type)
        for entity in found.entities:
            nodes.setdefault(entity.norm, Node(entity.norm, entity.name, entity.kind))
        for t in found.triples:
            item = edges.setdefault((t.subject.norm, t.predicate, t.object.norm), [0.0, []])
            item[0] = max(item[0], t.weight)
            if len(item[1]) < 3:
                item[1].append((row.sync_id, row.session_id, row.title))
    for (a, _, b), _item in edges.items():
        nodes[a].degree += 1
        nodes[b].degree += 1
    kept = sorted(nodes.values(), key=lambda n: (-n.degree, n.norm))[:GRAPH_NODES]
    kept = [n for n in kept if n.degree]
    keep = {n.norm for n in kept}
    graph = ProjectGraph(memories=len(rows), nodes=kept)
    ranked = sorted(edges.items(), key=lambda kv: (-kv[1][0], kv[0]))
    for (a, predicate, b), (weight, sources) in ranked:
        if a in keep and b in keep and len(graph.triples) < GRAPH_TRIPLES:
            graph.triples.append((nodes[a], predicate, nodes[b], weight, sources))
    _layout(graph)
    return graph


def _layout(graph: ProjectGraph) -> None:
    """Deterministic: entities on a circle, grouped by kind (the most connected in the middle
    ring), so the same memories always give the same picture."""
    ordered = sorted(graph.nodes, key=lambda n: (list(KIND_COLORS).index(n.kind), n.norm))
    count = len(ordered)
    cx, cy = WIDTH / 2, HEIGHT / 2
    for i, node in enumerate(ordered):
        angle = 2 * math.pi * i / max(count, 1) - math.pi / 2
        radius = (HEIGHT / 2 - 70) * (0.55 if node.degree >= 4 and count > 8 else 1.0)
        node.x, node.y = cx + radius * math.cos(angle) * 1.3, cy + radius * math.sin(angle)


def draw(graph: ProjectGraph) -> Markup:
    """The graph as inline SVG: a line per relationship (its predicate in a tooltip), a dot
    per entity coloured by kind, names escaped."""
    parts = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
        f'aria-label="Entities and their relationships" data-testid="project-graph">'
    ]
    for subject, predicate, obj, weight, _ in graph.triples:
        width = 1 + 2 * weight
        parts.append(
            f'<line x1="{subject.x:.1f}" y1="{subject.y:.1f}" x2="{obj.x:.1f}" y2="{obj.y:.1f}" '
            f'stroke="#9aa1a9" stroke-width="{width:.1f}"><title>'
            f"{escape(subject.name)} {escape(predicate)} {escape(obj.name)}</title></line>"
        )
    for node in graph.nodes:
        color = KIND_COLORS.get(node.kind, "#595f66")
        radius = 5 + min(node.degree, 8)
        label = escape(node.name if len(node.name) <= 28 else node.name[:27] + "…")
        parts.append(
            f'<g><circle cx="{node.x:.1f}" cy="{node.y:.1f}" r="{radius}" fill="{color}">'
            f"<title>{escape(node.name)} ({escape(node.kind)})</title></circle>"
            f'<text x="{node.x:.1f}" y="{node.y - radius - 4:.1f}" font-size="11" '
            f'text-anchor="middle" fill="#1d2125">{label}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
