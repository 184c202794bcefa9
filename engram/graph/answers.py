"""What the entity graph answers (docs/graph.md): a query's triples, an entity's relationships,
the most connected entities and an ingest's report — one shape on every face.

The store builds these (:mod:`engram.store.graph`) and every face serves them as they are: the
HTTP API answers with these very Structs (its ``/schema`` is built from them), the CLI's
``--json`` and the MCP tools' structured data are their ``to_dict``. This module loads only
when a graph is read or built, never on a plain save or search.
"""

from __future__ import annotations

from engram.store.models import Model


class GraphSource(Model):
    """A memory that states a triple (its local #id on this machine)."""

    id: int
    sync_id: str
    title: str


class GraphTriple(Model, omit_defaults=True):
    """A subject–predicate–object triple with the memories that state it (lowest #id first;
    ``source`` is the first of them)."""

    subject: str
    subject_kind: str
    predicate: str
    object: str
    object_kind: str
    weight: float
    project: str
    source: GraphSource
    sources: list[GraphSource]
    path: int | None = None  # which connecting chain the triple belongs to


class GraphEntityName(Model):
    """An entity a question names."""

    name: str
    kind: str
    project: str


class GraphAnswer(Model):
    """A graph query's answer: the entities the question names and the triples connecting
    them (``connected``), else the triples around them."""

    question: str
    project: str
    entities: list[GraphEntityName]
    connected: bool
    triples: list[GraphTriple]
    count: int
    not_ingested: int  # memories the graph does not hold yet
    elapsed_ms: float


class IngestReport(Model):
    """What one ingest did."""

    extractor: str
    memories: int  # memories read and (re)written into the graph
    entities: int  # distinct entities those memories mention
    relationships: int  # triples they state
    remaining: int  # memories of the selection still not ingested
    elapsed_ms: float
    errors: list[str]


class GraphEntity(Model):
    """An entity with how connected it is: its triples (``degree``) and the memories naming
    it."""

    id: int
    name: str
    kind: str
    project: str
    degree: int
    memories: int


class EntityRelationship(Model):
    """One relationship of an entity, seen from it (``direction`` out: it is the subject)."""

    predicate: str
    direction: str  # out | in
    target: str
    target_kind: str
    weight: float
    source: GraphSource
    sources: list[GraphSource]


class EntityRelationships(Model):
    """Every relationship of an entity, strongest first (empty when the graph has no such
    entity; ``kind`` is then None)."""

    entity: str
    kind: str | None
    relationships: list[EntityRelationship]
    count: int
