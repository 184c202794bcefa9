"""POST /sync/mutations/push: exactly-once, per-record answers, limits and bad input."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable

import orjson
import pytest
import zstandard
from litestar.testing import TestClient
from sqlalchemy import Engine, func, select

from engram.store import Store
from engram_cloud import models
from tests.cloud import records as rec
from tests.support.cloud import LEGACY_TOKEN, bearer

AUTH = bearer(LEGACY_TOKEN)


def push(client: TestClient, body: object, **headers: str):
    return client.post(
        "/sync/mutations/push", content=orjson.dumps(body), headers={**AUTH, **headers}
    )


def log_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(models.mutations)).scalar_one()


def test_records_of_a_real_store_are_accepted_exactly_once(
    client: TestClient, engine: Engine, store: Store
) -> None:
    store.create_session("s-1", "acme", "/src/acme")
    store.add_observation(
        title="Login timeout",
        content="Pool exhausted",
        type="bugfix",
        project="acme",
        session_id="s-1",
    )
    store.add_prompt("why is login slow?", session_id="s-1", project="acme")
    records = rec.store_records(store)
    first = push(client, rec.push_body(records))
    assert first.status_code == 200, first.text
    answer = first.json()
    assert answer["accepted"] == [r["mid"] for r in records]
    assert answer["rejected"] == [] and answer["latest_seq"] == len(records)
    # The retry after a lost answer: accepted again, nothing stored twice.
    again = push(client, rec.push_body(records)).json()
    assert again["accepted"] == answer["accepted"] and again["latest_seq"] == len(records)
    assert log_count(engine) == len(records)
    # The same mid twice in one batch is stored once.
    one = rec.observation()
    twice = push(client, rec.push_body([one, one])).json()
    assert twice["accepted"] == [one["mid"], one["mid"]] and log_count(engine) == len(records) + 1


def test_same_mid_different_content_is_a_conflict_and_blocks_nothing(
    client: TestClient, engine: Engine
) -> None:
    original = rec.observation()
    push(client, rec.push_body([original]))
    forged = {**original, "payload": {**original["payload"], "title": "Something else"}}
    fresh = rec.observation()
    answer = push(client, rec.push_body([forged, fresh])).json()
    assert answer["accepted"] == [fresh["mid"]]
    assert answer["rejected"] == [
        {
            "mid": original["mid"],
            "error_code": "mid_conflict",
            "error": f"mid {original['mid']} is already stored with different content",
        }
    ]
    with engine.connect() as conn:
        title = conn.execute(
            select(models.observations.c.title).where(
                models.observations.c.sync_id == original["key"]
            )
        ).scalar_one()
    assert title == original["payload"]["title"]


def test_extra_keys_and_a_pulled_seq_are_not_part_of_the_content(client: TestClient) -> None:
    record = rec.observation()
    push(client, rec.push_body([record]))
    relayed = {**record, "seq": 1, "note": "relayed"}
    assert push(client, rec.push_body([relayed])).json()["accepted"] == [record["mid"]]


def bad_records() -> list[tuple[str, dict, str, str]]:
    good = rec.observation()
    other = rec.observation(project="widgets")
    return [
        ("unknown entity", {**good, "entity": "pin"}, "payload_invalid", "unknown entity"),
        ("relation without ends", {**good, "entity": "relation"}, "payload_invalid", "source_id"),
        ("unknown op", {**good, "op": "merge"}, "payload_invalid", "unknown op"),
        ("mismatched key", {**good, "key": "obs-other"}, "payload_invalid", "does not match key"),
        (
            "no project",
            {k: v for k, v in good.items() if k != "project"},
            "empty_project",
            "specify a project",
        ),
        ("blank project", {**good, "project": "  "}, "empty_project", "specify a project"),
        ("bad mid", {**good, "mid": "XYZ"}, "payload_invalid", "32 lowercase hex"),
        ("hlc vs origin", {**good, "origin": "ffffffffffffffff"}, "payload_invalid", "disagree"),
        (
            "not normalized",
            {**good, "project": "Acme", "payload": {**good["payload"], "project": "Acme"}},
            "payload_invalid",
            "not normalized",
        ),
        (
            "payload project",
            {**other, "payload": {**other["payload"], "project": "acme"}},
            "payload_invalid",
            "does not match project",
        ),
        (
            "long project",
            {**good, "project": "p" * 300, "payload": {**good["payload"], "project": "p" * 300}},
            "payload_invalid",
            "longer than 200 bytes",
        ),
        (
            "payload not object",
            {**good, "payload": "[]"},
            "payload_invalid",
            "payload must be a JSON object",
        ),
        (
            "huge field",
            {**good, "payload": {**good["payload"], "content": "x" * (1 << 20 + 1)}},
            "payload_invalid",
            "larger than",
        ),
    ]


def test_one_bad_record_never_blocks_the_rest(client: TestClient, engine: Engine) -> None:
    cases = bad_records()
    good = rec.observation()
    items = [case[1] for case in cases] + [good, "not an object"]
    answer = push(client, rec.push_body(items)).json()
    assert answer["accepted"] == [good["mid"]]
    rejected = answer["rejected"]
    assert len(rejected) == len(cases) + 1
    for (name, record, code, text), got in zip(cases, rejected, strict=False):
        assert got["error_code"] == code, name
        assert text in got["error"], (name, got)
        assert got["mid"] == record.get("mid"), name
    assert rejected[-1] == {
        "mid": None,
        "error_code": "payload_invalid",
        "error": "a mutation must be a JSON object",
    }
    assert log_count(engine) == 1


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "payload_invalid"),
        (b"", 400, "payload_invalid"),
        (b"[1, 2]", 400, "payload_invalid"),
        (b'{"created_by": "x"}', 400, "payload_invalid"),
        (b'{"mutations": {}}', 400, "payload_invalid"),
        (b'{"mutations": []}', 400, "empty_batch"),
        (b'{"mutations": [{}], "created_by": 7}', 400, "payload_invalid"),
    ],
)
def test_bad_bodies(client: TestClient, body: bytes, status: int, code: str) -> None:
    response = client.post("/sync/mutations/push", content=body, headers=AUTH)
    assert response.status_code == status
    assert response.json()["error_code"] == code
    assert set(response.json()) >= {"error_class", "error_code", "error"}


def test_batch_limit(client: TestClient, engine: Engine) -> None:
    items = [rec.observation() for _ in range(501)]
    response = push(client, rec.push_body(items))
    assert response.status_code == 400
    assert response.json() == {
        "error_class": "invalid_request",
        "error_code": "batch_too_large",
        "error": "batch too large: max 500 mutations per request",
    }
    assert push(client, rec.push_body(items[:500])).json()["accepted"] == [
        r["mid"] for r in items[:500]
    ]
    assert log_count(engine) == 500


def test_body_limit_and_inflated_size(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_push_bytes=4096)
    big = rec.push_body([rec.observation(content="x" * 5000)])
    response = push(client, big)
    assert response.status_code == 413
    assert response.json() == {
        "error_class": "repairable",
        "error_code": "upgrade_repairable_payload_too_large",
        "error": "push payload too large (max 4096 bytes)",
    }
    # Small on the wire, too large once inflated: refused the same way (no zip bombs).
    for encoded, encoding in (
        (gzip.compress(orjson.dumps(big)), "gzip"),
        (zstandard.ZstdCompressor().compress(orjson.dumps(big)), "zstd"),
    ):
        assert len(encoded) < 4096
        response = client.post(
            "/sync/mutations/push", content=encoded, headers={**AUTH, "Content-Encoding": encoding}
        )
        assert response.status_code == 413, encoding


def test_compressed_bodies(client: TestClient, engine: Engine) -> None:
    def body() -> bytes:
        return orjson.dumps(rec.push_body([rec.observation()]))

    variants = [
        (zstandard.ZstdCompressor().compress(body()), {"Content-Encoding": "zstd"}),
        (gzip.compress(body()), {"Content-Encoding": "gzip"}),
        (gzip.compress(body()), {}),  # a proxy dropped the header: the magic bytes tell
        (zstandard.ZstdCompressor().compress(body()), {}),
        (gzip.compress(body()), {"Content-Type": "application/vnd.engram.sync+gzip; version=1"}),
    ]
    for content, headers in variants:
        response = client.post("/sync/mutations/push", content=content, headers={**AUTH, **headers})
        assert response.status_code == 200, (headers, response.text)
        assert len(response.json()["accepted"]) == 1
    assert log_count(engine) == len(variants)


@pytest.mark.parametrize(
    ("content", "headers", "status", "text"),
    [
        (gzip.compress(b"x" * 100)[:10] + b"\xff" * 20, {}, 400, "corrupt gzip body"),
        (
            gzip.compress(b'{"mutations": []}')[:-6],
            {"Content-Encoding": "gzip"},
            400,
            "truncated gzip",
        ),
        (b"\x28\xb5\x2f\xfdgarbage", {}, 400, "corrupt zstd body"),
        (
            zstandard.ZstdCompressor().compress(bytes(range(256)) * 12)[:50],
            {"Content-Encoding": "zstd"},
            400,
            "truncated zstd",
        ),
        (b"plain", {"Content-Encoding": "br"}, 415, "unsupported Content-Encoding"),
        (
            gzip.compress(b"{}"),
            {"Content-Type": "application/vnd.engram.sync+gzip; version=2"},
            400,
            "envelope version",
        ),
    ],
    ids=[
        "corrupt-gzip",
        "truncated-gzip",
        "corrupt-zstd",
        "truncated-zstd",
        "brotli",
        "envelope-v2",
    ],
)
def test_corrupt_compression(
    client: TestClient,
    engine: Engine,
    content: bytes,
    headers: dict[str, str],
    status: int,
    text: str,
) -> None:
    response = client.post("/sync/mutations/push", content=content, headers={**AUTH, **headers})
    assert response.status_code == status
    assert text in response.json()["error"]
    assert log_count(engine) == 0


def test_hostile_text_is_data(client: TestClient, engine: Engine) -> None:
    project = "x'; drop table cloud_mutations; -"
    nasty = rec.observation(
        project=project,
        title="Robert'); DROP TABLE cloud_observations;-- <script>alert(1)</script>",
        content="' OR 1=1 -- \\x00 %s %(x)s $1 :name " + "ünïcødé 𝔘 " * 20,
    )
    wide = rec.observation(content=" ".join(os.urandom(8).hex() + "𝔘é" for _ in range(40_000)))
    assert len(wide["payload"]["content"].encode()) < 1 << 20
    answer = push(client, rec.push_body([nasty, wide])).json()
    assert answer["accepted"] == [nasty["mid"], wide["mid"]], answer
    pulled = client.get("/sync/mutations/pull", headers=AUTH).json()["mutations"]
    assert [{k: v for k, v in m.items() if k != "seq"} for m in pulled] == [nasty, wide]
    with engine.connect() as conn:
        projects = set(conn.execute(select(models.observations.c.project)).scalars())
    assert projects == {project, "acme"}


def test_legacy_entries_shape(client: TestClient, engine: Engine) -> None:
    entries = [
        {
            "project": "acme",
            "entity": "session",
            "entity_key": "s-9",
            "op": "upsert",
            "payload": {"id": "s-9", "directory": "/src/acme", "started_at": "2026-11-20 08:00:00"},
        },
        {
            "project": "acme",
            "entity": "observation",
            "entity_key": "obs-9",
            "op": "upsert",
            "payload": orjson.dumps(
                {
                    "sync_id": "obs-9",
                    "session_id": "s-9",
                    "type": "decision",
                    "title": "Use PostgreSQL",
                    "content": "for the team server",
                    "scope": "project",
                }
            ).decode(),
        },
        {
            "project": "",
            "entity": "observation",
            "entity_key": "obs-x",
            "op": "upsert",
            "payload": {},
        },
        {
            "project": "acme",
            "entity": "relation",
            "entity_key": "r-1",
            "op": "upsert",
            "payload": {},
        },
        {
            "project": "acme",
            "entity": "observation",
            "entity_key": "obs-y",
            "op": "upsert",
            "payload": {"sync_id": "obs-z"},
        },
    ]
    answer = client.post("/sync/mutations/push", json={"entries": entries}, headers=AUTH).json()
    assert len(answer["accepted"]) == 2 and answer["accepted_seqs"] == [1, 2]
    codes = [r["error_code"] for r in answer["rejected"]]
    # Relations are supported since issue 20: one without its endpoints is invalid, as any
    # malformed record (before, every relation entry was "unsupported_entity").
    assert codes == ["empty_project", "payload_invalid", "payload_invalid"]
    assert "source_id is required" in answer["rejected"][1]["error"]
    # Legacy mids are deterministic: pushing the same entries again stores nothing new.
    again = client.post("/sync/mutations/push", json={"entries": entries[:2]}, headers=AUTH).json()
    assert again["accepted"] == answer["accepted"] and again["accepted_seqs"] == [1, 2]
    assert log_count(engine) == 2
