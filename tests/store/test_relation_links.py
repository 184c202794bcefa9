"""Relations as the importance formula's links (engram/store/links.py): a memory's link count is
its active relations, it is kept up to date by every write that changes it (here and when
records arrive from elsewhere), and consolidation's supersession is a relation like any other
(one relation model: it replicates as a ``relation`` record and is shown with the memory)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.importance import LINKS_FULL, WEIGHTS
from engram.settings import Config
from engram.store import Store
from engram.store.links import link_count
from engram.store.scoring import SCORE_SQL
from engram.times import now_text
from tests.support.bench_scripts import load

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
    a, b, c = (
        save(store, "Sessions in Redis"),
        save(store, "Sessions in Postgres"),
        save(store, "C"),
    )
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
    assert (
        links(store, a) == 1 and abs(score(store, a) - linked) < 1e-3
    )  # scores are rounded to 4 places
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
    assert (
        links(b, there) == 1 and abs(score(b, there) - alone - step()) < 1e-3
    )  # scores are rounded to 4 places
    # The other memory deleted there: the link goes here too, once the delete arrives.
    a.delete_observation(new.id, hard=True)
    exchange(a, b)
    assert (
        links(b, there) == 0 and abs(score(b, there) - alone) < 1e-3
    )  # scores are rounded to 4 places


def test_consolidation_rescores_the_memories_related_to_what_it_merges(store: Store) -> None:
    """A merge archives its sources (ending their relations but the supersession) and may bring
    its merged memory back: the memories at the other ends are re-scored in the same write."""
    a = save(store, "Sessions live in Redis", "We keep sessions in Redis with a TTL of one hour.")
    b = save(store, "Sessions live in Redis", "We keep the sessions in Redis with a TTL of 1 hour.")
    x = save(store, "Cache", "Something else entirely, about caches.")
    y = save(store, "Logins", "Another matter: how logins are checked.")
    store.relate(x.id, a.id, "conflicts_with")
    alone = {m.id: score(store, m) - (m is x) * step() for m in (x, y)}
    merged = store.consolidate(threshold=0.0).merges[0].merged
    assert links(store, x) == 0 and abs(score(store, x) - alone[x.id]) < 1e-3
    assert _stale(store) == []
    # The merged memory deleted, its sources restored and merged again: its key is revived.
    store.relate(y.id, merged.id, "related")
    store.restore_observations([a.id, b.id])
    store.delete_observation(merged.id)
    assert (links(store, x), links(store, y)) == (1, 0) and _stale(store) == []
    again = store.consolidate(threshold=0.0).merges[0].merged
    assert again.id == merged.id  # a revival, not a new memory
    assert (links(store, x), links(store, y)) == (0, 1)
    assert abs(score(store, x) - alone[x.id]) < 1e-3  # scores are rounded to 4 places
    assert abs(score(store, y) - alone[y.id] - step()) < 1e-3
    assert _stale(store) == []


def test_a_topic_saved_again_gives_its_relations_back(store: Store) -> None:
    """A topic's derived key saved again after a delete (revived when soft-deleted, created
    anew when hard-deleted) is named by the relations it had: the memories at their other ends
    get their link back in the save's write."""
    for hard in (False, True):
        topic = f"auth/tokens-{hard}"
        a = save(store, "Tokens", f"Tokens expire after a day ({hard}).", topic_key=topic)
        x = save(store, "Logins", f"Logins check the token ({hard}).")
        store.relate(x.id, a.id, "related")
        linked = score(store, x)
        store.delete_observation(a.id, hard=hard)
        assert links(store, x) == 0 and score(store, x) < linked
        again = save(store, "Tokens", f"Tokens now expire after an hour ({hard}).", topic_key=topic)
        assert again.sync_id == a.sync_id and links(store, x) == 1
        assert abs(score(store, x) - linked) < 1e-3 and _stale(store) == []


def test_consolidation_links_a_merged_memory_to_its_sources_with_relations(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    plan = load("planted").build(duplicated=4, trivia=0)
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


# --- property: link counts stay exact through any interleaving ---------------------------------

LINK_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.integers(0, 1), st.sampled_from(["p1", "p2"]),
                  st.sampled_from(["project", "personal"])),
        st.tuples(st.just("topic"), st.integers(0, 1), st.sampled_from(["p1", "p2"]),
                  st.sampled_from(["project", "personal"]), st.sampled_from(["t/a", "t/b"])),
        st.tuples(st.just("relate"), st.integers(0, 1), st.integers(0, 30), st.integers(0, 30),
                  st.sampled_from(["supersedes", "conflicts_with", "related"]),
                  st.sampled_from(["judged", "pending", "ignored"])),
        st.tuples(st.just("judge"), st.integers(0, 1), st.integers(0, 30),
                  st.sampled_from(["judged", "pending", "ignored"])),
        st.tuples(st.just("delete"), st.integers(0, 1), st.integers(0, 30),
                  st.sampled_from(["soft", "hard", "archive"])),
        st.tuples(st.just("restore"), st.integers(0, 1), st.integers(0, 30)),
        st.tuples(st.just("move"), st.integers(0, 1), st.integers(0, 30)),
        st.tuples(st.just("scope"), st.integers(0, 1), st.integers(0, 30)),
        st.tuples(st.just("merge"), st.integers(0, 1)),
        st.tuples(st.just("consolidate"), st.integers(0, 1)),
        st.tuples(st.just("sync"), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=30,
)  # fmt: skip


def _stale(store: Store) -> list[tuple]:
    """Memories whose stored importance is not what their current links give."""
    moment = now_text()
    rows = store.db.rows(
        f"SELECT o.id, o.importance, {SCORE_SQL} FROM observations o"
        f" WHERE abs(o.importance - {SCORE_SQL}) > 0.001",
        [moment, moment],
    )
    return [tuple(r) for r in rows]


def _link_step(stores: list[Store], step: tuple) -> None:
    kind, who, *args = step
    s = stores[who]
    rows = s.db.rows("SELECT id, project, deleted_at FROM observations ORDER BY id")
    live = [r[0] for r in rows if r[2] is None]
    gone = [r[0] for r in rows if r[2] is not None]
    try:
        if kind in ("save", "topic"):  # a topic's save updates or revives its derived key
            project, scope, *topic = args
            n = len(rows)
            s.add_observation(title=f"note {n}", content=f"words {n} here", project=project,
                              scope=scope, topic_key=topic[0] if topic else None)  # fmt: skip
        elif kind == "relate" and live:
            a = live[args[0] % len(live)]
            project = next(r[1] for r in rows if r[0] == a)
            others = [r[0] for r in rows if r[2] is None and r[1] == project and r[0] != a]
            if others:
                s.relate(a, others[args[1] % len(others)], args[2], status=args[3])
        elif kind == "judge":
            found = s.list_relations(limit=500)
            if found:
                s.judge_relation(found[args[0] % len(found)].sync_id, args[1])
        elif kind == "delete" and live:
            oid = live[args[0] % len(live)]
            if args[1] == "archive":
                s.archive_observation(oid)
            else:
                s.delete_observation(oid, hard=args[1] == "hard")
        elif kind == "restore" and gone:
            s.restore_observation(gone[args[0] % len(gone)])
        elif kind == "move" and live:
            oid = live[args[0] % len(live)]
            project = next(r[1] for r in rows if r[0] == oid)
            s.update_observation(oid, project="p2" if project == "p1" else "p1")
        elif kind == "scope" and live:
            oid = live[args[0] % len(live)]
            scope = s.get_observation(oid).scope
            s.update_observation(oid, scope="project" if scope == "personal" else "personal")
        elif kind == "merge":
            s.merge_projects(["p1"], "p2")
        elif kind == "consolidate":
            s.consolidate(threshold=0.0)
        elif kind == "sync":
            exchange(s, stores[1 - who])
    except (NotFoundError, ConflictError, ValidationError):
        pass  # refused writes leave no trace


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LINK_STEPS)
# Found by hypothesis (not in CI's runs): a merge archived the target of a conflicts_with
# relation and left the relation's source with the link's score.
@example([("save", 1, "p1", "personal"), ("merge", 1), ("save", 1, "p2", "project"),
          ("save", 1, "p2", "project"), ("relate", 1, 0, 0, "conflicts_with", "judged"),
          ("consolidate", 1)])  # fmt: skip
def test_link_counts_stay_exact_through_any_interleaving(plan: list[tuple]) -> None:
    """Every write that changes a memory's links re-scores it, on the replica that wrote and
    on the replica that received the change (checked after every step, then converged)."""
    with tempfile.TemporaryDirectory() as tmp:
        stores = [Store.open(config=Config(data_dir=Path(tmp) / f"r{i}")) for i in range(2)]
        try:
            for step in plan:
                _link_step(stores, step)
                for s in stores:
                    assert _stale(s) == [], step
            converge(stores)
            assert stores[0].canonical_export() == stores[1].canonical_export()
            for s in stores:
                assert _stale(s) == []
        finally:
            for s in stores:
                s.close()
