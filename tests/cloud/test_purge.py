"""Delete for good on the team server (issue 14): a hard delete blanks the key's earlier
records in the log at once, and ``engram cloud purge`` leaves no byte of the text in the files of
the log, the read model or its full-text index — checked by reading PostgreSQL's files."""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import orjson
from litestar.testing import TestClient
from sqlalchemy import Engine, select, text

from engram_cloud import models, purge, sync_log
from tests.cloud import records as rec
from tests.support.cloud import LEGACY_TOKEN, bearer

SECRET = "zebrafish-4471"


def push(engine: Engine, records: list[dict[str, Any]]) -> sync_log.PushResult:
    candidates, rejected = sync_log.prepare(records)
    assert not rejected, rejected
    with engine.begin() as conn:
        return sync_log.push(conn, candidates, contributor="alice")


def log_texts(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(select(models.mutations.c.record))]


def files_holding(engine: Engine, needle: bytes) -> list[str]:
    """The files of our tables (heap, TOAST, indexes) that contain ``needle``, after a
    checkpoint wrote every dirty page."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("CHECKPOINT"))
        root = Path(conn.execute(text("SHOW data_directory")).scalar_one())
        paths = conn.execute(
            text(
                """SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c
                   WHERE c.relname LIKE 'cloud_%' OR c.relname LIKE 'ix_cloud_%'
                      OR c.oid IN (SELECT reltoastrelid FROM pg_class WHERE relname LIKE 'cloud_%')
                      OR c.oid IN (SELECT i.indexrelid FROM pg_index i JOIN pg_class t
                                   ON t.oid = i.indrelid WHERE t.relname LIKE 'pg_toast_%')"""
            )
        ).all()
    found = []
    for name, relative in paths:
        if relative is None:
            continue
        for file in root.glob(relative + "*"):
            if needle in file.read_bytes():
                found.append(name)
    return sorted(set(found))


def test_a_hard_delete_blanks_the_keys_earlier_records_at_once(engine: Engine) -> None:
    h = [rec.next_hlc() for _ in range(3)]
    upsert = rec.observation("obs-s", content=f"the staging token is {SECRET}", hlc=h[0])
    soft = rec.observation("obs-s", content=f"the staging token is {SECRET}", hlc=h[1],
                           op="delete", deleted_at="2026-11-21 10:30:00", hard=False)  # fmt: skip
    other = rec.observation("obs-keep", content=f"another note quoting {SECRET}")
    push(engine, [upsert, soft, other])
    push(engine, [rec.delete("observation", "obs-s", hlc=h[2])])
    texts = log_texts(engine)
    assert sum(SECRET in t for t in texts) == 1  # only the memory that was not deleted
    # Mids, clocks and hashes stay: a client's retry of the original is still accepted.
    retry = push(engine, [upsert])
    assert retry.duplicates == 1 and retry.inserted == 0
    with engine.connect() as conn:
        assert conn.execute(select(models.tombstones.c.key)).scalars().all() == ["obs-s"]


def test_purge_leaves_no_byte_in_the_tables_files(engine: Engine) -> None:
    for i in range(200):  # the secret shares pages with ordinary memories
        push(engine, [rec.observation(f"obs-{i}", content=f"ordinary text {i} " * 20)])
    h = [rec.next_hlc() for _ in range(2)]
    push(
        engine,
        [rec.observation("obs-s", content=f"the staging token is {SECRET} " * 200, hlc=h[0])],
    )  # fmt: skip  (long: it goes to TOAST)
    push(engine, [rec.prompt("p-s", content=f"keep {SECRET} safe")])
    assert files_holding(engine, SECRET.encode())
    push(engine, [rec.delete("observation", "obs-s", hlc=h[1]), rec.delete("prompt", "p-s")])
    # Blanked and deleted, but dead tuples and index entries still hold the bytes.
    assert files_holding(engine, SECRET.encode())
    report = purge.purge(engine)
    assert report.hard_deletes == 2 and "cloud_mutations" in report.tables_vacuumed
    assert files_holding(engine, SECRET.encode()) == []
    assert files_holding(engine, b"zebrafish") == []  # nor the full-text index's lexeme
    with engine.connect() as conn:
        assert conn.execute(select(models.observations.c.sync_id).where(
            models.observations.c.sync_id == "obs-7")).scalar_one() == "obs-7"  # fmt: skip


def test_purge_blanks_old_log_records_and_chunks(
    client: TestClient, engine: Engine, monkeypatch
) -> None:
    chunk = {"sessions": [], "prompts": [], "mutations": [], "observations": [
        {"sync_id": "obs-go", "session_id": "s-go", "type": "decision", "title": "Token",
         "content": f"the token is {SECRET}", "scope": "project",
         "created_at": "2026-01-02 03:05:00", "updated_at": "2026-01-02 03:05:00"}]}  # fmt: skip
    body = {"chunk_id": "deadbeef", "created_by": "gopher", "project": "acme", "data": chunk}
    pushed = client.post("/sync/push", json=body, headers=bearer(LEGACY_TOKEN))
    assert pushed.status_code == 200, pushed.text
    # A hard delete stored before push-time blanking existed: the log still has the text.
    monkeypatch.setattr(purge, "blank_before", lambda conn, records: 0)
    push(
        engine,
        [rec.delete("observation", "obs-go", hlc=rec.next_hlc(wall_ms=int(time.time() * 1000)))],
    )
    monkeypatch.undo()
    assert any(SECRET in t for t in log_texts(engine))
    report = purge.purge(engine, vacuum=False)
    assert report.records_blanked >= 1 and report.chunks_blanked == 1
    assert not any(SECRET in t for t in log_texts(engine))
    fetched = client.get(f"/sync/pull/{pushed.json()['chunk_id']}", headers=bearer(LEGACY_TOKEN),
                         params={"project": "acme"})  # fmt: skip
    raw = fetched.content
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    assert SECRET.encode() not in raw and b"[deleted]" in raw
    assert orjson.loads(raw)


def test_engram_cloud_purge_command(
    engine: Engine, cloud_db_url: str, data_dir: Path, monkeypatch, capsys
) -> None:
    from engram.cli.main import main

    h = [rec.next_hlc() for _ in range(2)]
    push(engine, [rec.observation("obs-s", content=f"token {SECRET}", hlc=h[0])])
    push(engine, [rec.delete("observation", "obs-s", hlc=h[1])])
    monkeypatch.setenv("ENGRAM_DATABASE_URL", cloud_db_url)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(data_dir))
    assert main(["cloud", "purge", "--json"]) == 0
    report = orjson.loads(capsys.readouterr().out)
    assert report["hard_deletes"] == 1 and "cloud_observations" in report["tables_vacuumed"]
    assert files_holding(engine, SECRET.encode()) == []
