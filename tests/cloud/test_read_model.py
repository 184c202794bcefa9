"""The read model: last writer wins per (project, entity, key), tombstones, stubs, search, and
a rebuild from the log that gives the same tables."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, func, select, text

from engram_cloud import models, read_model, sync_log
from tests.cloud import records as rec


def push(engine: Engine, records: list[dict[str, Any]], contributor: str = "alice"):
    candidates, rejected = sync_log.prepare(records)
    assert not rejected, rejected
    with engine.begin() as conn:
        return sync_log.push(conn, candidates, contributor=contributor)


def snapshot(conn: Connection) -> dict[str, list[tuple]]:
    out = {}
    for table in models.READ_MODEL_TABLES:
        cols = [c for c in table.c if c.name not in ("applied_at", "search")]
        out[table.name] = [
            tuple(r) for r in conn.execute(select(*cols).order_by(*table.primary_key))
        ]
    return out


def observation_row(engine: Engine, key: str, project: str = "acme"):
    o = models.observations
    with engine.connect() as conn:
        return conn.execute(select(o).where(o.c.project == project, o.c.sync_id == key)).first()


def tombstone(engine: Engine, entity: str, key: str):
    t = models.tombstones
    with engine.connect() as conn:
        return conn.execute(select(t).where(t.c.entity == entity, t.c.key == key)).first()


def test_greatest_clock_wins_in_any_order(engine: Engine) -> None:
    h1, h2, h3 = rec.next_hlc(), rec.next_hlc(), rec.next_hlc()
    v1 = rec.observation("obs-a", title="first", hlc=h1)
    v3 = rec.observation("obs-a", title="third", hlc=h3)
    v2 = rec.observation("obs-a", title="second", hlc=h2)
    push(engine, [v1, v3])
    result = push(engine, [v2])  # older than what is there: stored in the log, not applied
    assert result.inserted == 1 and result.applied.stale == 1
    row = observation_row(engine, "obs-a")
    assert row.title == "third" and row.hlc == h3 and row.contributor == "alice"
    # The same key in another project is another entity.
    push(engine, [rec.observation("obs-a", project="widgets", title="elsewhere")])
    assert observation_row(engine, "obs-a").title == "third"
    assert observation_row(engine, "obs-a", "widgets").title == "elsewhere"


def test_hard_delete_leaves_a_tombstone_and_newer_upsert_revives(engine: Engine) -> None:
    h = [rec.next_hlc() for _ in range(4)]
    push(engine, [rec.observation("obs-b", hlc=h[0])])
    push(engine, [rec.delete("observation", "obs-b", hlc=h[2])])
    assert observation_row(engine, "obs-b") is None
    assert tombstone(engine, "observation", "obs-b").hlc == h[2]
    push(engine, [rec.observation("obs-b", title="resurrected?", hlc=h[1])])
    assert observation_row(engine, "obs-b") is None  # an older upsert cannot resurrect it
    push(engine, [rec.observation("obs-b", title="revived", hlc=h[3])])
    assert observation_row(engine, "obs-b").title == "revived"
    assert tombstone(engine, "observation", "obs-b") is None


def test_soft_deletes(engine: Engine) -> None:
    full = rec.observation("obs-c", op="delete", deleted_at="2026-11-21 12:00:00", hard=False)
    push(engine, [full])
    row = observation_row(engine, "obs-c")
    assert row.deleted_at == "2026-11-21 12:00:00" and row.title == full["payload"]["title"]
    # A delete carrying only keys marks the row, or leaves a tombstone when there is none.
    push(engine, [rec.observation("obs-d")])
    push(
        engine,
        [
            rec.delete("observation", "obs-d", hard=False, deleted_at="2026-11-22 08:00:00"),
            rec.delete("observation", "obs-e", hard=False),
        ],
    )
    marked = observation_row(engine, "obs-d")
    assert marked.deleted_at == "2026-11-22 08:00:00" and marked.updated_at == marked.deleted_at
    assert observation_row(engine, "obs-e") is None and tombstone(engine, "observation", "obs-e")
    # Within one batch: an upsert then a key-only delete keeps the row, marked deleted.
    push(engine, [rec.observation("obs-f"), rec.delete("observation", "obs-f", hard=False)])
    assert observation_row(engine, "obs-f").deleted_at == "2026-11-21 11:00:00"


def test_sessions_prompts_and_stubs(engine: Engine) -> None:
    push(
        engine,
        [rec.observation("obs-g", session_id="s-late"), rec.prompt("p-1", session_id="s-late")],
    )
    s = models.sessions
    with engine.connect() as conn:
        stub = conn.execute(select(s).where(s.c.id == "s-late")).one()
    assert stub.directory == "" and stub.hlc == ""
    push(engine, [rec.session("s-late", directory="/src/real", summary="done")])
    with engine.connect() as conn:
        real = conn.execute(select(s).where(s.c.id == "s-late")).one()
        assert real.directory == "/src/real" and real.summary == "done"
        assert conn.execute(select(models.prompts.c.content)).scalar_one() == "why is login slow?"
    push(engine, [rec.delete("session", "s-late"), rec.delete("prompt", "p-1")])
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(models.prompts)).scalar_one() == 0
    # A deleted session is not recreated as a stub by a later memory.
    push(engine, [rec.observation("obs-h", session_id="s-late")])
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s)).scalar_one() == 0


def test_full_text_search(engine: Engine) -> None:
    push(
        engine,
        [
            rec.observation(
                "obs-i", title="Connection pooling", content="We raised max connections"
            ),
            rec.observation("obs-j", title="Dark mode", content="CSS variables for themes"),
            rec.prompt("p-2", content="how do themes switch?"),
        ],
    )
    with engine.connect() as conn:
        hits = (
            conn.execute(
                text(
                    """SELECT sync_id FROM cloud_observations
               WHERE search @@ websearch_to_tsquery('english', :q)
               ORDER BY ts_rank_cd(search, websearch_to_tsquery('english', :q)) DESC"""
                ),
                {"q": "connections pool"},
            )
            .scalars()
            .all()
        )
        hostile = conn.execute(
            text(
                "SELECT count(*) FROM cloud_observations WHERE search @@ websearch_to_tsquery('english', :q)"
            ),
            {"q": "\"unbalanced ' OR 1=1 -- & | ! ( :*"},
        ).scalar_one()
        prompts = (
            conn.execute(
                text(
                    "SELECT sync_id FROM cloud_prompts WHERE search @@ websearch_to_tsquery('english', 'theme')"
                )
            )
            .scalars()
            .all()
        )
    assert hits == ["obs-i"] and hostile == 0 and prompts == ["p-2"]


def test_rebuild_gives_the_same_tables(engine: Engine) -> None:
    h = [rec.next_hlc() for _ in range(6)]
    push(
        engine,
        [
            rec.session("s-1", hlc=h[0]),
            rec.observation("obs-k", hlc=h[1]),
            rec.prompt("p-3", hlc=h[2]),
        ],
    )
    push(
        engine,
        [
            rec.observation("obs-k", title="edited", hlc=h[4]),
            rec.observation("obs-l", session_id="s-2", hlc=h[3]),
        ],
    )
    push(
        engine,
        [rec.delete("observation", "obs-l", hlc=h[5]), rec.observation("obs-m", project="widgets")],
    )
    with engine.begin() as conn:
        before = snapshot(conn)
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": sync_log.PUSH_LOCK})
        stats = read_model.rebuild(conn, batch=2)
        after = snapshot(conn)
    assert after == before and stats.applied == 7
    with engine.begin() as conn:
        read_model.rebuild(conn, "widgets")
        assert snapshot(conn) == before
