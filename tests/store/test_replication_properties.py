"""Property tests of DESIGN §3's invariants: random interleavings of writes on several replicas,
mutations exchanged partially, in random orders and with duplicates, always converge to identical
canonical exports."""

import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.config import Config
from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.store import Store

from .replicas import converge, exchange

REPLICAS = 3
words = st.sampled_from(["alpha", "beta", "gamma", "delta"])

save = st.tuples(
    st.just("save"),
    st.integers(0, REPLICAS - 1),
    words,
    words,
    st.sampled_from(["p1", "p2"]),
    st.sampled_from(["project", "personal"]),
    st.sampled_from([None, "t/a", "t/b"]),
    st.sampled_from([None, "s1", "s2"]),
)
update = st.tuples(
    st.just("update"),
    st.integers(0, REPLICAS - 1),
    st.integers(0, 50),
    st.sampled_from(["title", "content", "project", "scope", "topic"]),
    words,
)
delete = st.tuples(
    st.just("delete"), st.integers(0, REPLICAS - 1), st.integers(0, 50), st.booleans()
)
prompt = st.tuples(
    st.just("prompt"), st.integers(0, REPLICAS - 1), words, st.sampled_from([None, "s1", "s2"])
)
delete_prompt = st.tuples(
    st.just("delete_prompt"), st.integers(0, REPLICAS - 1), st.integers(0, 50)
)
session = st.tuples(
    st.just("session"),
    st.integers(0, REPLICAS - 1),
    st.sampled_from(["s1", "s2"]),
    st.sampled_from(["start", "end", "delete"]),
)
merge = st.tuples(st.just("merge"), st.integers(0, REPLICAS - 1), st.booleans())
sync = st.tuples(
    st.just("sync"),
    st.integers(0, REPLICAS - 1),
    st.integers(0, REPLICAS - 1),
    st.integers(1, 30),
    st.integers(0, 2**16),
    st.booleans(),
)
steps = st.lists(
    st.one_of(save, save, update, delete, prompt, delete_prompt, session, merge, sync, sync),
    min_size=1,
    max_size=40,
)


def pick(ids: list[int], index: int) -> int | None:
    return ids[index % len(ids)] if ids else None


def run_step(stores: list[Store], step: tuple) -> None:
    kind, who, *args = step
    s = stores[who]
    live = [o.id for o in s.recent_observations(limit=200)]
    try:
        if kind == "save":
            title, content, project, scope, topic, session_id = args
            s.add_observation(
                title=title,
                content=content,
                project=project,
                scope=scope,
                topic_key=topic,
                session_id=session_id,
            )
        elif kind == "update" and (oid := pick(live, args[0])) is not None:
            field, value = args[1], args[2]
            if field == "project":
                value = "p1" if value in ("alpha", "beta") else "p2"
            elif field == "scope":
                value = "personal" if value in ("alpha", "beta") else "project"
            elif field == "topic":
                field, value = "topic_key", f"t/{value}"
            s.update_observation(oid, **{field: value})
        elif kind == "delete" and (oid := pick(live, args[0])) is not None:
            s.delete_observation(oid, hard=args[1])
        elif kind == "prompt":
            s.add_prompt(args[0], session_id=args[1], project="p1")
        elif kind == "delete_prompt" and (
            pid := pick([p.id for p in s.recent_prompts(limit=200)], args[0])
        ):
            s.delete_prompt(pid)
        elif kind == "session":
            session_id, action = args
            if action == "start":
                s.create_session(session_id, "p1", f"/src/{who}")
            elif action == "end":
                s.end_session(session_id, f"summary by {who}")
            else:
                s.delete_session(session_id)
        elif kind == "merge":
            s.merge_projects(["p1"], "p2") if args[0] else s.merge_projects(["p2"], "p1")
        elif kind == "sync":
            dst, limit, seed, dup = args
            if dst != who:
                exchange(s, stores[dst], rng=random.Random(seed), duplicate=dup, limit=limit)
    except (NotFoundError, ConflictError, ValidationError):
        pass  # refused writes are part of the game: they must leave no trace


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.integers(0, 2**16))
def test_any_interleaving_converges(plan: list[tuple], seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = [Store.open(config=Config(data_dir=Path(tmp) / f"r{i}")) for i in range(REPLICAS)]
        try:
            for step in plan:
                run_step(stores, step)
            converge(stores, rng=random.Random(seed))
            exports = [s.canonical_export() for s in stores]
            assert exports[0] == exports[1] == exports[2]
            for s in stores:  # every write path kept both full-text indexes exact
                for fts in ("observations_fts", "prompts_fts"):
                    s.db.conn.execute(
                        f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)"
                    )
            # Idempotence: replaying every journal everywhere again changes nothing.
            for src in stores:
                records = [e.record for e in src.journal.pending("replay")]
                for dst in stores:
                    if dst is not src:
                        dst.apply_mutations(records, source="replay")
            assert [s.canonical_export() for s in stores] == exports
        finally:
            for s in stores:
                s.close()
