"""Relations on the team server (issue 20): pushed with the same rules as every record
(validated by the shared codec, the caller's grants per project), applied to the read model
(``cloud_relations``, last writer wins, rebuildable from the log), pulled back by teammates; a
relation never links two projects (its endpoints are keys of its own project); the older
clients' ``entries`` shape carries relations too."""

from __future__ import annotations

from typing import Any

import orjson
from litestar.testing import TestClient
from sqlalchemy import Engine, select

from engram.settings import Config
from engram.store import Store
from engram_cloud import models, read_model
from tests.support.cloud import LEGACY_TOKEN, bearer

AUTH = bearer(LEGACY_TOKEN)


def journal(store: Store) -> list[dict[str, Any]]:
    return [e.as_record() for e in store.journal.pending("cloud:test")]


def local_store(tmp_path, name: str) -> Store:
    directory = tmp_path / name
    directory.mkdir(mode=0o700)
    return Store.open(config=Config(data_dir=directory))


def push(client: TestClient, records: list[dict[str, Any]], headers=AUTH) -> Any:
    return client.post(
        "/sync/mutations/push",
        content=orjson.dumps({"created_by": "alice", "mutations": records}),
        headers=headers,
    )


def relations(engine: Engine) -> list[Any]:
    r = models.relations
    with engine.connect() as conn:
        return conn.execute(select(r).order_by(r.c.project, r.c.sync_id)).all()


def test_relations_push_apply_and_pull(client: TestClient, engine: Engine, tmp_path) -> None:
    alice, bob = local_store(tmp_path, "alice"), local_store(tmp_path, "bob")
    old = alice.add_observation(title="Old", content="redis sessions", project="acme").observation
    new = alice.add_observation(
        title="New", content="postgres sessions", project="acme"
    ).observation
    alice.relate(new.id, old.id, "supersedes", reason="moved")
    answer = push(client, journal(alice)).json()
    assert answer["rejected"] == [] and len(answer["accepted"]) == 4
    [row] = relations(engine)
    assert (row.project, row.relation, row.judgment_status, row.scope, row.contributor) == (
        "acme",
        "supersedes",
        "judged",
        "project",
        "alice",
    )
    assert (row.source_id, row.target_id, row.reason) == (new.sync_id, old.sync_id, "moved")
    pulled = client.get("/sync/mutations/pull", params={"project": "acme"}, headers=AUTH).json()
    result = bob.apply_mutations([orjson.dumps(m) for m in pulled["mutations"]], source="cloud:x")
    assert result.relations == 1
    assert bob.canonical_export() == alice.canonical_export()
    # A later judgment wins in the read model too, and a rebuild from the log agrees.
    rel = bob.list_relations("acme")[0]
    bob.judge_relation(rel.sync_id, "ignored")
    push(client, [e for e in journal(bob) if e["entity"] == "relation"][-1:])
    assert relations(engine)[0].judgment_status == "ignored"
    before = [tuple(r) for r in relations(engine)]
    with engine.begin() as conn:
        read_model.rebuild(conn)
    assert [tuple(r)[:-1] for r in relations(engine)] == [r[:-1] for r in before]


def test_a_relation_never_links_two_projects(client: TestClient, engine: Engine, tmp_path) -> None:
    """A relation of project gamma naming alpha's memories by their (computable) keys is a
    gamma relation: alpha's memories never show it, it waits for gamma memories that never
    come."""
    alice = local_store(tmp_path, "alice")
    a = alice.add_observation(title="A", content="alpha one", project="alpha").observation
    b = alice.add_observation(title="B", content="alpha two", project="alpha").observation
    assert push(client, journal(alice)).json()["rejected"] == []
    hostile = local_store(tmp_path, "mallory")
    x = hostile.add_observation(title="X", content="gamma", project="gamma").observation
    y = hostile.add_observation(title="Y", content="gamma", project="gamma").observation
    hostile.relate(x.id, y.id, "supersedes")
    record = next(r for r in journal(hostile) if r["entity"] == "relation")
    record["payload"].update(source_id=a.sync_id, target_id=b.sync_id)
    answer = push(client, [record]).json()
    assert answer["rejected"] == []  # valid: it names keys of gamma
    [row] = relations(engine)
    assert row.project == "gamma" and row.source_id == a.sync_id
    # Where the payload claims another project, the record itself is refused.
    record2 = {**record, "mid": "e" * 32, "payload": {**record["payload"], "project": "alpha"}}
    refused = push(client, [record2]).json()["rejected"]
    assert refused[0]["error_code"] == "payload_invalid"


def test_grants_apply_to_relations(make_client, make_user, engine: Engine, tmp_path) -> None:
    client = make_client()
    token = make_user("gina", projects=["gamma"])
    store = local_store(tmp_path, "gina")
    a = store.add_observation(title="A", content="one", project="alpha").observation
    b = store.add_observation(title="B", content="two", project="alpha").observation
    store.relate(a.id, b.id, "related")
    relation = [r for r in journal(store) if r["entity"] == "relation"]
    answer = push(client, relation, headers=bearer(token))
    assert answer.status_code == 403
    assert relations(engine) == []


def test_bad_relation_records_are_rejected_one_by_one(client: TestClient, tmp_path) -> None:
    store = local_store(tmp_path, "alice")
    a = store.add_observation(title="A", content="one", project="acme").observation
    b = store.add_observation(title="B", content="two", project="acme").observation
    store.relate(a.id, b.id, "related")
    good = journal(store)
    relation = next(r for r in good if r["entity"] == "relation")
    selfish = {
        **relation,
        "mid": "1" * 32,
        "payload": {**relation["payload"], "target_id": a.sync_id},
    }
    deleting = {**relation, "mid": "2" * 32, "op": "delete"}
    strange = {**relation, "mid": "3" * 32, "payload": {**relation["payload"], "relation": "<b>x"}}
    answer = push(client, [*good, selfish, deleting, strange]).json()
    assert len(answer["accepted"]) == len(good)
    assert [r["error_code"] for r in answer["rejected"]] == ["payload_invalid"] * 3


def test_entries_shape_relations(client: TestClient, engine: Engine) -> None:
    """The reference's ``entries`` push shape with a relation upsert (its payload as a later Go
    version sends it)."""
    payload = {
        "sync_id": "rel-go1", "source_id": "obs-go1", "target_id": "obs-go2",
        "relation": "conflicts_with", "judgment_status": "pending", "marked_by_actor": "engram",
        "marked_by_kind": "system", "project": "acme", "created_at": "2026-11-21 10:00:00",
        "updated_at": "2026-11-21 10:00:00",
    }  # fmt: skip
    entries = [{"project": "acme", "entity": "relation", "entity_key": "rel-go1",
                "op": "upsert", "payload": orjson.dumps(payload).decode()}]  # fmt: skip
    answer = client.post("/sync/mutations/push", json={"entries": entries}, headers=AUTH).json()
    assert answer["rejected"] == [] and len(answer["accepted"]) == 1
    assert relations(engine)[0].relation == "conflicts_with"
