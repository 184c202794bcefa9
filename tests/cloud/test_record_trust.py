"""What the server refuses record by record (issue 12, server side): text PostgreSQL cannot store
(NUL, lone surrogates) and clocks beyond the bound, on the mutation and chunk routes alike — the
rest of the batch lands; and records stored before the clock bound existed no longer win in the
read model once ``repair-clocks`` holds them back."""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
import pytest
from litestar.testing import TestClient
from sqlalchemy import Engine, insert, select

from engram.record import format_hlc
from engram_cloud import clocks, models, read_model, sync_log
from tests.cloud import records as rec
from tests.cloud.test_chunks import CHUNK, push_chunk
from tests.support.cloud import LEGACY_TOKEN, bearer

AUTH = bearer(LEGACY_TOKEN)
FAR_FUTURE = format_hlc(9_999_999_999_999, 99_999, rec.ORIGIN)  # year 2286


def push_raw(client: TestClient, raw: bytes):
    return client.post(
        "/sync/mutations/push",
        content=raw,
        headers={**AUTH, "Content-Type": "application/json"},
    )


def titles(engine: Engine) -> dict[str, str]:
    o = models.observations
    with engine.connect() as conn:
        return {k: t for k, t in conn.execute(select(o.c.sync_id, o.c.title))}


def test_unstorable_text_and_far_clocks_are_rejected_one_by_one(
    client: TestClient, engine: Engine
) -> None:
    good = [rec.observation(title=f"fine {i}") for i in range(3)]
    nul_title = rec.observation(title="planted\x00title")
    nul_unknown = rec.observation(extra={"deep": ["ok", "bad\x00"]})
    nul_key = rec.observation(key="obs-\x00evil")
    future = rec.observation(title="from 2286", hlc=FAR_FUTURE)
    ahead = rec.observation(
        title="eleven minutes ahead",
        hlc=format_hlc(int(time.time() * 1000) + 11 * 60_000, 0, rec.ORIGIN),
    )
    soon = rec.observation(
        title="nine minutes ahead",
        hlc=format_hlc(int(time.time() * 1000) + 9 * 60_000, 0, rec.ORIGIN),
    )
    batch = [good[0], nul_title, good[1], nul_unknown, nul_key, future, ahead, soon, good[2]]
    raw = orjson.dumps(rec.push_body(batch))
    # A lone surrogate cannot even be written by orjson: splice one in as JSON text, the way a
    # record that a lenient writer journaled arrives.
    surrogate = rec.observation(title="SURROGATE")
    raw = raw[:-2] + b"," + orjson.dumps(surrogate).replace(b"SURROGATE", b"\\ud800") + b"]}"
    answer = push_raw(client, raw)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["accepted"] == [r["mid"] for r in (good[0], good[1], soon, good[2])]
    codes = {r["mid"]: (r["error_code"], r["error"]) for r in data["rejected"]}
    assert codes[nul_title["mid"]][0] == "payload_invalid"
    assert "payload.title contains a NUL character" in codes[nul_title["mid"]][1]
    assert "payload.extra.deep[1] contains a NUL" in codes[nul_unknown["mid"]][1]
    assert codes[nul_key["mid"]][0] == "payload_invalid"
    assert codes[surrogate["mid"]] == (
        "payload_invalid",
        "payload.title contains a lone surrogate (not valid Unicode text)",
    )
    assert codes[future["mid"]][0] == "clock_skew" and "days ahead" in codes[future["mid"]][1]
    assert codes[ahead["mid"]][0] == "clock_skew" and "10.0 min allowed" in codes[ahead["mid"]][1]
    assert sorted(titles(engine).values()) == [
        "fine 0",
        "fine 1",
        "fine 2",
        "nine minutes ahead",
    ]


def test_the_drift_is_a_setting(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_clock_drift_s=60)
    two_minutes = rec.observation(hlc=format_hlc(int(time.time() * 1000) + 120_000, 0, rec.ORIGIN))
    data = push_raw(client, orjson.dumps(rec.push_body([two_minutes]))).json()
    assert [r["error_code"] for r in data["rejected"]] == ["clock_skew"]


def test_created_by_with_nul_is_a_400_not_a_500(client: TestClient) -> None:
    answer = push_raw(client, orjson.dumps(rec.push_body([rec.observation()], "al\x00ice")))
    assert answer.status_code == 400
    assert answer.json()["error"] == "created_by contains a NUL character"


def test_the_legacy_entries_shape_rejects_per_record_too(
    client: TestClient, engine: Engine
) -> None:
    entry = {
        "project": "acme",
        "entity": "observation",
        "entity_key": "obs-entry",
        "op": "upsert",
        "payload": {
            "sync_id": "obs-entry",
            "session_id": "s-1",
            "type": "note",
            "title": "ok",
            "content": "fine",
            "updated_at": "2026-11-21 10:00:00",
        },
    }
    bad = {**entry, "entity_key": "obs-bad", "payload": {**entry["payload"], "sync_id": "obs-bad"}}
    bad["payload"]["content"] = "a\x00b"
    data = push_raw(client, orjson.dumps({"entries": [entry, bad]})).json()
    assert len(data["accepted"]) == 1
    assert [r["error_code"] for r in data["rejected"]] == ["payload_invalid"]


def test_a_chunk_with_one_unstorable_row_lands_the_rest(client: TestClient, engine: Engine) -> None:
    rows = [dict(row) for row in CHUNK["observations"]]
    rows.append({**rows[0], "sync_id": "obs-nul", "title": "bad\x00title"})
    rows.append({**rows[0], "sync_id": "obs-late", "updated_at": "2200-01-01 00:00:00"})
    answer = push_chunk(client, {"project": "acme", "data": {**CHUNK, "observations": rows}})
    assert answer.status_code == 200, answer.text
    mutations = answer.json()["mutations"]
    refused = sorted((r["error_code"], r["error"].split(":")[0]) for r in mutations["rejected"])
    assert refused == [
        ("clock_skew", "observation 'obs-late'"),
        ("payload_invalid", "observation 'obs-nul'"),
    ]
    assert mutations["accepted"] == 3  # the session, obs-go1 and the delete of obs-go2
    assert titles(engine) == {"obs-go1": "Use Go"}


def _stored_before_the_rule(engine: Engine, records: list[dict]) -> None:
    """Put records in the log and read model the way the old server did: no clock check."""
    candidates = [sync_log.canonical(r, i) for i, r in enumerate(records)]
    with engine.begin() as conn:
        for c in candidates:
            conn.execute(
                insert(models.mutations).values(
                    mid=c.mid,
                    record_hash=c.digest,
                    project=c.project,
                    entity=c.record["entity"],
                    key=c.record["key"],
                    op=c.record["op"],
                    hlc=c.record["hlc"],
                    origin=c.record["origin"],
                    scope=c.record["scope"],
                    record=c.text,
                )
            )
        read_model.apply(conn, [(c.record, "mallory") for c in candidates])


def test_records_from_before_the_clock_bound_stop_winning(
    client: TestClient, engine: Engine
) -> None:
    key = "obs-" + "1" * 16
    honest = rec.observation(key, title="v1 by alice")
    poisoned = rec.observation(key, title="planted in 2286", hlc=FAR_FUTURE)
    _stored_before_the_rule(engine, [honest, poisoned])
    assert titles(engine) == {key: "planted in 2286"}
    # A real edit is accepted but loses to the far-future clock: the hole this repairs.
    edit = rec.observation(
        key, title="v2 by alice", hlc=rec.next_hlc(wall_ms=int(time.time() * 1000))
    )
    assert push_raw(client, orjson.dumps(rec.push_body([edit]))).json()["accepted"] == [edit["mid"]]
    assert titles(engine) == {key: "planted in 2286"}

    dry = clocks.repair_clocks(engine, max_drift_ms=600_000, dry_run=True)
    assert (dry.held, dry.projects) == (1, ["acme"]) and titles(engine)[key] == "planted in 2286"
    report = clocks.repair_clocks(engine, max_drift_ms=600_000)
    assert (report.held, report.released, report.still_held) == (1, 0, 1)
    assert titles(engine) == {key: "v2 by alice"}
    with engine.connect() as conn:
        held = conn.execute(select(models.mutations.c.mid, models.mutations.c.held)).all()
    assert dict(held)[poisoned["mid"]] == "clock_skew"  # kept in the log, never deleted
    # A hard delete now applies, and a rebuild (which skips held records) agrees.
    gone = rec.delete("observation", key, hlc=rec.next_hlc(wall_ms=int(time.time() * 1000) + 1))
    push_raw(client, orjson.dumps(rec.push_body([gone])))
    assert titles(engine) == {}
    with engine.begin() as conn:
        read_model.rebuild(conn)
    assert titles(engine) == {}
    # Nothing more to do the next time; once real time reaches 2286 the record is released.
    assert not clocks.repair_clocks(engine, max_drift_ms=600_000).changed
    later = clocks.repair_clocks(engine, max_drift_ms=600_000, now_ms=10**13)
    assert (later.released, later.still_held) == (1, 0)
    assert titles(engine) == {key: "planted in 2286"}


@pytest.mark.parametrize("dry_run", [True, False])
def test_repair_clocks_command(engine: Engine, cloud_db_url: str, data_dir, dry_run: bool) -> None:
    from tests.support import run_engram
    from tests.support.cloud import JWT_SECRET

    _stored_before_the_rule(engine, [rec.observation(hlc=FAR_FUTURE, project="widgets")])
    env = {
        "ENGRAM_DATABASE_URL": cloud_db_url,
        "ENGRAM_JWT_SECRET": JWT_SECRET,
        "ENGRAM_CLOUD_ALLOWED_PROJECTS": "*",
    }
    args = ["cloud", "repair-clocks", "--json", *(["--dry-run"] if dry_run else [])]
    result = run_engram(*args, data_dir=data_dir, env=env)
    assert result.returncode == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert data["held"] == 1 and data["projects"] == ["widgets"] and data["dry_run"] is dry_run
    assert data["still_held"] == 1
    with engine.connect() as conn:
        held = conn.execute(select(models.mutations.c.held)).scalars().all()
    assert held == ([None] if dry_run else ["clock_skew"])


def test_records_with_bad_intent_fields_are_rejected_and_good_ones_land(
    client: TestClient, engine: Engine
) -> None:
    """Issue 21: a pin, an importance override and validity travel in payloads; the server
    refuses a record whose importance is out of range or whose pin is not a boolean (the rest of
    the batch lands) and keeps the good ones in its read model."""
    good = rec.observation(title="pinned rule", pinned=True, importance_override=0.7)
    too_big = rec.observation(title="too important", importance_override=1.5)
    text_pin = rec.observation(title="pin as text", pinned="yes")
    answer = push_raw(client, orjson.dumps(rec.push_body([too_big, good, text_pin])))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["accepted"] == [good["mid"]]
    assert {r["mid"] for r in body["rejected"]} == {too_big["mid"], text_pin["mid"]}
    assert {r["error_code"] for r in body["rejected"]} == {"payload_invalid"}
    o = models.observations
    with engine.connect() as conn:
        row = conn.execute(
            select(o.c.pinned, o.c.importance_override).where(o.c.sync_id == good["key"])
        ).one()
    assert tuple(row) == (True, 0.7)
