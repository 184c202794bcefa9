"""Property: whatever three replicas write and however their chunks are exchanged (each through
its own clone of the sync directory, pulled at random moments), once everyone has pulled and
imported everything, their shared memories are byte-identical.

A hostile committer joins in (issue 12): chunks planted in a clone carry records of a project
the repository is not bound to, personal-scope records, and project-scope records aimed at a
replica's personal memories; others carry a far-future clock, NUL text, or an acme key named
inside another project. They must change nothing they have no right to — every honest memory of
another project or of personal scope stays as its owner left it, no acme memory carries a hostile
clock or text — and the replicas still converge. Memories also legitimately move to another
project."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.errors import NotFoundError, ValidationError
from engram.record import build_record, format_hlc, new_mid
from engram.settings import Config
from engram.store import Store
from engram.sync.git.chunk import encode_chunk
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from tests.sync.git import hostile

REPLICAS = 3
TOPICS = ["arch/db", "arch/auth", "ops/deploy"]

step = st.one_of(
    st.tuples(st.just("save"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("topic"), st.integers(0, REPLICAS - 1), st.integers(0, len(TOPICS) - 1)),
    st.tuples(st.just("personal"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("edit"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("soft"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("hard"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("export"), st.integers(0, REPLICAS - 1), st.just(0)),
    # an export that also writes Go-format chunks for teammates on the Go tool
    st.tuples(st.just("go-export"), st.integers(0, REPLICAS - 1), st.just(0)),
    st.tuples(st.just("pull"), st.integers(0, REPLICAS - 1), st.integers(0, REPLICAS - 1)),
    st.tuples(st.just("import"), st.integers(0, REPLICAS - 1), st.just(0)),
    st.tuples(st.just("other"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("plant"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("move"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
    st.tuples(st.just("hostile"), st.integers(0, REPLICAS - 1), st.integers(0, 3 * 50)),
    # issue 20: relations made and judged anywhere travel with the chunks too
    st.tuples(st.just("relate"), st.integers(0, REPLICAS - 1), st.integers(0, 50 * 50)),
    st.tuples(st.just("judge"), st.integers(0, REPLICAS - 1), st.integers(0, 50)),
)


MALLORY = "0badc0de0badc0de"


def hostile_chunk(directory: SyncDir, target, kind: int) -> None:
    """Commit (copy into the clone) a chunk holding one hostile record about ``target``."""
    project, hlc, content = "acme", format_hlc(9_999_999_999_999, 99_999, MALLORY), "EVIL"
    if kind == 1:
        hlc, content = format_hlc(time.time_ns() // 1_000_000, 0, MALLORY), "EVIL \x00"
    elif kind == 2:  # acme's key named inside another project
        project, hlc = "evil", format_hlc(time.time_ns() // 1_000_000, 0, MALLORY)
    payload = {
        "sync_id": target.sync_id, "session_id": target.session_id, "type": "note",
        "title": "t", "content": content, "project": project, "scope": "project",
    }  # fmt: skip
    record = build_record(
        mid=new_mid(), hlc=hlc, origin=MALLORY, entity="observation", key=target.sync_id,
        op="upsert", project=project, scope="project", payload=payload,
    )  # fmt: skip
    chunk = encode_chunk(
        [orjson.dumps(record) + b"\n"], {}, created_by="mallory", created_at="2030-01-01T00:00:00Z"
    )
    directory.chunks_dir.mkdir(parents=True, exist_ok=True)
    (directory.chunks_dir / f"{chunk.id}.jsonl.gz").write_bytes(chunk.compressed())


def pull(source: SyncDir, destination: SyncDir) -> None:
    for folder in (source.log_dir, source.chunks_dir):
        target = destination.path / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for path in folder.glob("*.jsonl.gz"):
            if not (target / path.name).exists():
                shutil.copy(path, target / path.name)


def shared_view(store: Store, personal: set[str]) -> dict:
    """The canonical export without personal memories. The tombstone of a hard-deleted
    personal memory stays on its machine only (it never travels, as it should), but the
    store's canonical export cannot tell its scope yet (sync_tombstones has no scope column;
    reported to the lead), so it is left out of the comparison here. So is a key of a personal
    memory that a hostile record reused in project scope: its owner keeps the personal memory
    (nothing from elsewhere may replace it), the others hold the planted one."""
    document = orjson.loads(store.canonical_export(projects=["acme"], include_personal=False))
    document["tombstones"] = [t for t in document["tombstones"] if t["key"] not in personal]
    document["observations"] = [o for o in document["observations"] if o["sync_id"] not in personal]
    return document


#: Honest memories that no chunk may touch: replica → sync_id → (project, title), and the keys
#: their owner itself hard-deleted or moved away since.
HONEST: dict[int, dict[str, tuple[str, str]]] = {}
GONE: set[str] = set()


def plant(directory: SyncDir, arg: int, personal: set[str]) -> None:
    """Mallory's chunk: another project's memory (new, and over an "other" key), a personal
    one, and project-scope records aimed at a personal memory."""
    others = sorted(k for owned in HONEST.values() for k in owned if k not in personal)
    mine = sorted(personal)
    records = [
        hostile.session("s-mallory", project="acme"),  # the session its memories name
        hostile.observation(f"obs-mallory{arg:07d}", project="other", title="mallory other"),
        hostile.observation(
            f"obs-mallorp{arg:07d}", project="acme", title="mallory personal", scope="personal"
        ),
    ]
    if others:
        key = others[arg % len(others)]
        records.append(hostile.observation(key, project="other", title="mallory overwrite"))
        records.append(hostile.hard_delete(key, project="other"))
    if mine:
        key = mine[arg % len(mine)]
        records.append(hostile.observation(key, project="acme", title="mallory replaces"))
        records.append(hostile.hard_delete(key, project="acme"))
    hostile.write_chunk(directory.path, records[: 3 + arg % (len(records) - 2)])


def live_ids(store: Store) -> list[int]:
    return [o.id for o in store.recent_observations("acme", limit=500)]


def apply_step(stores, dirs, kind: str, who: int, arg: int, personal: set[str]) -> None:
    store, directory = stores[who], dirs[who]
    sync = GitSync(store, directory, author=f"r{who}")
    if kind == "save":
        store.add_observation(title=f"memory {arg} by {who}", content=f"text {arg}", project="acme")
    elif kind == "topic":
        store.add_observation(
            title=f"topic {TOPICS[arg]}",
            content=f"version by {who}",
            project="acme",
            topic_key=TOPICS[arg],
        )
    elif kind == "personal":
        saved = store.add_observation(
            title=f"mine {arg}", content="private", project="acme", scope="personal"
        )
        personal.add(saved.observation.sync_id)
        HONEST.setdefault(who, {})[saved.observation.sync_id] = ("acme", saved.observation.title)
    elif kind == "other":
        saved = store.add_observation(title=f"other {arg} by {who}", content="x", project="other")
        HONEST.setdefault(who, {})[saved.observation.sync_id] = ("other", saved.observation.title)
    elif kind == "plant":
        plant(directory, arg, personal)
    elif kind in ("edit", "soft", "hard"):
        ids = live_ids(store)
        if not ids:
            return
        target = ids[arg % len(ids)]
        try:
            if kind == "hard":
                GONE.add(store.get_observation(target).sync_id)
            if kind == "edit":
                store.update_observation(target, content=f"edited {arg} by {who}")
            else:
                store.delete_observation(target, hard=kind == "hard")
        except NotFoundError:
            pass
    elif kind == "move":
        ids = live_ids(store)
        if ids:
            target = ids[arg % len(ids)]
            GONE.add(store.get_observation(target).sync_id)  # it lives on under a derived key
            store.update_observation(target, project="elsewhere")
    elif kind == "hostile":
        live = store.recent_observations("acme", limit=500)
        if live:
            hostile_chunk(directory, live[arg % len(live)], arg % 3)
    elif kind == "relate":
        ids = live_ids(store)
        if len(ids) >= 2:
            a, b = ids[arg % len(ids)], ids[(arg // 50) % len(ids)]
            kinds = ("supersedes", "conflicts_with", "related")
            try:
                store.relate(a, b, kinds[arg % 3], status=("judged", "pending")[arg % 2])
            except ValidationError:  # itself, or a cycle of supersession: refused, no trace
                pass
    elif kind == "judge":
        found = [r.sync_id for r in store.list_relations("acme") if r.active]
        if found:
            try:
                store.judge_relation(found[arg % len(found)], ("judged", "ignored")[arg % 2])
            except ValidationError:
                pass
    elif kind == "export":
        sync.export(projects=["acme"])
    elif kind == "go-export":
        sync.export(projects=["acme"], go_compat=True)
    elif kind == "pull":
        pull(dirs[arg], directory)
    else:
        assert sync.import_chunks().failures == []


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=30))
def test_replicas_converge_whatever_the_exchange_order(steps) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stores = [Store.open(config=Config(data_dir=root / f"data{i}")) for i in range(REPLICAS)]
        # every clone of the repository is called "acme", the project the replicas write
        dirs = [SyncDir(root / f"clone{i}" / "acme" / ".engram") for i in range(REPLICAS)]
        personal: set[str] = set()
        HONEST.clear()
        GONE.clear()
        try:
            for kind, who, arg in steps:
                apply_step(stores, dirs, kind, who, arg, personal)
            # everyone exports, pulls from everyone, imports
            for i in range(REPLICAS):
                apply_step(stores, dirs, "export", i, 0, personal)
            for i in range(REPLICAS):
                for j in range(REPLICAS):
                    pull(dirs[j], dirs[i])
                apply_step(stores, dirs, "import", i, 0, personal)
                assert GitSync(stores[i], dirs[i]).status(projects=["acme"]).pending_export == 0
            views = [shared_view(s, personal) for s in stores]
            assert views[0] == views[1] == views[2]
            for who, owned in HONEST.items():  # no honest memory lost or changed
                for key, (project, title) in owned.items():
                    if key not in GONE:
                        found = stores[who].get_observation_by_sync_id(key, project=project)
                        assert found.title == title
            for store in stores:
                everything = orjson.loads(store.canonical_export(include_personal=True))
                planted = [o for o in everything["observations"] if "mallory" in o["title"]]
                assert all(o["project"] == "acme" and o["scope"] == "project" for o in planted)
            for section in ("observations", "sessions", "prompts", "relations", "tombstones"):
                for row in views[0][section]:  # no hostile record changed an acme memory
                    assert not row["hlc"].endswith(MALLORY) and "EVIL" not in str(row)
        finally:
            for store in stores:
                store.close()
