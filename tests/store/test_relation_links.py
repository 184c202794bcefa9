"""Relations as the importance formula's links (engram/store/links.py): a memory's link count is
its active relations, it is kept up to date by every write that changes it (here and when
records arrive from elsewhere), and consolidation's supersession is a relation like any other
(one relation model: it replicates as a ``relation`` record and is shown with the memory)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from engram.importance import LINKS_FULL, WEIGHTS
from engram.store import Store
from engram.store.links import link_count

from .replicas import converge, exchange


def save(store: Store, title: str, content: str | None = None, **kw):
    return store.add_observation(
        title=title, content=content or f"{title} body", project=kw.pop("project", "acme"), **kw
    ).observation


def links(store: Store, memory) -> int:
    return link_count(store.db.conn, memory.project, memory.sync_id)


def score(store: Store, memory) -> float:
    return store.get_observation(memory.id, include_deleted=True).importance


def step() -> float:
    return WEIGHTS["links"] / LINKS_FULL  # what one link adds to a score


def test_a_relation_is_a_link_of_both_memories_and_rescores_them(store: Store) -> None:
    a, b, c = save(store, "Sessions in Redis"), save(store, "Sessions in Postgres"), save(store, "C")
    before = {m.id: score(store, m) for m in (a, b, c)}
    rel = store.relate(b.id, a.id, "supersedes")
    assert (links(store, a), links(store, b), links(store, c)) == (1, 1, 0)
    assert store.relation_count(a.id) == links(store, a)  # the face's count is the formula's
    for m in (a, b):
        assert abs(score(store, m) - before[m.id] - step()) < 1e-3  # scores are rounded to 4 places
    assert score(store, c) == before[c.id]
    store.judge_relation(rel.sync_id, "ignored")  # a dismissed relation is no link
    assert (links(store, a), links(store, b)) == (0, 0)
    assert abs(score(store, a) - before[a.id]) < 1e-3  # scores are rounded to 4 places


def test_deleting_the_other_memory_takes_the_link_away_and_restoring_brings_it_back(
    store: Store,
) -> None:
    a, b = save(store, "A"), save(store, "B")
    store.relate(a.id, b.id, "related")
    linked = score(store, a)
    store.delete_observation(b.id)
    assert links(store, a) == 0 and score(store, a) < linked
    assert store.relation_count(a.id) == 0  # orphaned
    store.restore_observation(b.id)
    assert links(store, a) == 1 and abs(score(store, a) - linked) < 1e-3  # scores are rounded to 4 places
    store.delete_observation(b.id, hard=True)
    assert links(store, a) == 0 and score(store, a) < linked


def test_a_relation_arriving_from_elsewhere_rescores_like_a_local_one(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old, new = save(a, "Old"), save(a, "New")
    exchange(a, b)
    there = b.get_observation_by_sync_id(old.sync_id, project="acme")
    alone = score(b, there)
    a.relate(new.id, old.id, "supersedes")
    exchange(a, b)
    assert links(b, there) == 1 and abs(score(b, there) - alone - step()) < 1e-3  # scores are rounded to 4 places
    # The other memory deleted there: the link goes here too, once the delete arrives.
    a.delete_observation(new.id, hard=True)
    exchange(a, b)
    assert links(b, there) == 0 and abs(score(b, there) - alone) < 1e-3  # scores are rounded to 4 places


def _planted():
    path = Path(__file__).resolve().parents[2] / "bench" / "planted.py"
    if "planted" not in sys.modules:
        spec = importlib.util.spec_from_file_location("planted", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["planted"] = module
        spec.loader.exec_module(module)
    return sys.modules["planted"]


def test_consolidation_links_a_merged_memory_to_its_sources_with_relations(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    plan = _planted().build(duplicated=4, trivia=0)
    a.import_data(plan.document)
    report = a.consolidate()
    step_ = report.merges[0]
    merged = a.get_observation(step_.merged.id)
    found = a.relations_for(merged.id).relations
    assert sorted(r.target_id for r in found) == sorted(s.sync_id for s in step_.sources)
    for rel in found:
        # Judged by Engram, still active although its target was archived, and counted.
        assert (rel.relation, rel.state, rel.marked_by_kind) == ("supersedes", "judged", "system")
        assert rel.source_id == merged.sync_id and rel.target.deleted
        assert rel.note(merged.sync_id).endswith("— archived")
    assert links(a, merged) == len(step_.sources)
    # The relations replicate as relation records: another machine shows the same.
    converge([a, b])
    there = b.get_observation_by_sync_id(merged.sync_id, project=merged.project)
    assert len(b.relations_for(there.id).relations) == len(step_.sources)
    assert links(b, there) == len(step_.sources)
    assert b.canonical_export() == a.canonical_export()
    # Restoring a source ends its supersession: the relation is kept, judged ignored.
    source = a.restore_observation(step_.sources[0].id)
    ended = [r for r in a.relations_for(source.id).relations if r.source_id == merged.sync_id]
    assert [(r.relation, r.state) for r in ended] == [("supersedes", "ignored")]
    assert links(a, merged) == len(step_.sources) - 1
    converge([a, b])
    assert links(b, there) == len(step_.sources) - 1
