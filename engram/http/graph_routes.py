"""The HTTP routes of issue 20 — relations between memories and the entity graph — each a thin
shell over one store method (``relate``, ``judge_relation``, ``relations_for``,
``graph_query``, ``graph_ingest``, ``graph_relationships``), answering with what the store
returns (:class:`~engram.store.models.MemoryRelations`, :mod:`engram.graph.answers`)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.types import ControllerRouterHandler

from engram.graph.answers import EntityRelationships, GraphAnswer, GraphEntity, IngestReport
from engram.http.models import (
    GraphIngest,
    MemoryRelations,
    Relation,
    RelationCreate,
    RelationJudge,
)
from engram.http.routes import (
    ObservationId,
    Offset,
    Project,
    StoreArg,
    _errors,
    _get,
    _patch,
    _post,
)


def _limit(default: int, maximum: int) -> Any:
    """A strict count (``Annotated[int, _limit(…)]``): these routes are new, no Go-era script
    sends them junk to tolerate."""
    return QueryParameter(ge=1, le=maximum, description=f"how many (default {default})")


GraphLimit = Annotated[int, _limit(10, 100)]
ListLimit = Annotated[int, _limit(50, 1000)]
RelationId = FromPath[str]


class RelationRoutes(Controller):
    path = "/relations"
    tags = ("relations",)

    @_post("/", status_code=201, responses=_errors(400, 404, 413), summary="Relate two memories")
    def create(self, store: StoreArg, data: JSONBody[RelationCreate]) -> Relation:
        """One relation per pair of memories of one project: relating a pair again replaces
        what it said. ``supersedes``: the source replaces the target (which then ranks right
        below it in search)."""
        rel = store.relate(
            data.source_id,
            data.target_id,
            data.relation,
            reason=data.reason,
            evidence=data.evidence,
            confidence=data.confidence,
            status=data.status,
            kind="api",
            project=data.project,
        )
        return rel

    @_get("/", responses=_errors(400), summary="Relations, newest first")
    def listing(
        self, store: StoreArg, project: Project = None, limit: ListLimit = 50, offset: Offset = 0
    ) -> list[Relation]:
        return store.list_relations(project, limit=limit, offset=offset)

    @_get("/conflicts", responses=_errors(400), summary="Pending conflicts (memories to review)")
    def conflicts(
        self, store: StoreArg, project: Project = None, limit: ListLimit = 50
    ) -> list[Relation]:
        store.detect_conflicts(limit=None)
        return store.review_queue(project, limit=limit)

    @_get("/{relation_id:str}", responses=_errors(400, 404), summary="One relation")
    def one(self, store: StoreArg, relation_id: RelationId, project: Project = None) -> Relation:
        return store.get_relation(relation_id, project=project)

    @_patch("/{relation_id:str}", responses=_errors(400, 404, 413), summary="Judge a relation")
    def judge(
        self, store: StoreArg, relation_id: RelationId, data: JSONBody[RelationJudge]
    ) -> Relation:
        """``judged`` confirms (optionally as another ``relation``), ``ignored`` dismisses,
        ``pending`` reopens."""
        rel = store.judge_relation(
            relation_id,
            data.status,
            relation=data.relation,
            reason=data.reason,
            evidence=data.evidence,
            confidence=data.confidence,
            kind="api",
        )
        return rel


@_get(
    "/observations/{observation_id:int}/relations",
    tags=["relations"],
    responses=_errors(400, 404),
    summary="A memory's relations and whether it needs review",
)
def memory_relations(store: StoreArg, observation_id: ObservationId) -> MemoryRelations:
    return store.relations_for(observation_id)


class GraphRoutes(Controller):
    path = "/graph"
    tags = ("graph",)

    @_get("/query", responses=_errors(400), summary="Answer a question with triples")
    def query(
        self,
        store: StoreArg,
        q: Annotated[str, QueryParameter(description="e.g. what connects X to Y?")],
        project: Project = None,
        limit: GraphLimit = 10,
    ) -> GraphAnswer:
        """The entities the question names and the triples connecting them (shortest chains
        first), each with the memories that state it."""
        return store.graph_query(q, project=project, limit=limit)

    @_post(
        "/ingest",
        status_code=200,
        responses=_errors(400, 404, 413),
        summary="Extract entities and relationships from memories",
    )
    def ingest(self, store: StoreArg, data: JSONBody[GraphIngest]) -> IngestReport:
        """One memory (``id``), or every memory of ``project`` (``all_projects``: every
        project) not in the graph as it is now (``force``: all again). Rules only."""
        project = None if data.all_projects else data.project
        return store.graph_ingest(data.id, project=project, force=data.force)

    @_get("/entities", responses=_errors(400), summary="The most connected entities")
    def entities(
        self, store: StoreArg, project: Project = None, limit: ListLimit = 50
    ) -> list[GraphEntity]:
        return store.graph_entities(project, limit=limit)

    @_get("/entities/{name:str}", responses=_errors(400), summary="An entity's relationships")
    def entity(
        self, store: StoreArg, name: FromPath[str], project: Project = None, limit: ListLimit = 50
    ) -> EntityRelationships:
        """Empty ``relationships`` when the graph has no such entity."""
        return store.graph_relationships(name, project=project, limit=limit)


ROUTES: list[ControllerRouterHandler] = [RelationRoutes, memory_relations, GraphRoutes]
