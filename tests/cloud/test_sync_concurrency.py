"""The cursor under concurrency, and a database restart in the middle of a push."""

from __future__ import annotations

import threading
import time

import orjson
import psycopg
from litestar.testing import TestClient
from sqlalchemy import Engine, func, select

from engram_cloud import models, sync_log
from tests.cloud import records as rec
from tests.support import wait_until
from tests.support.cloud import LEGACY_TOKEN, bearer
from tests.support.postgres import PostgresCluster

AUTH = bearer(LEGACY_TOKEN)


def test_a_puller_never_misses_a_late_commit(engine: Engine) -> None:
    """Pushers commit concurrently, some holding their transaction open for a while after
    writing; a puller following ``next`` must still see every record exactly once, in order."""
    pushers, batches, size = 4, 6, 5
    done = threading.Event()
    errors: list[BaseException] = []

    def pusher(number: int) -> None:
        try:
            for batch in range(batches):
                records = [rec.observation(project=f"p{number % 2}") for _ in range(size)]
                candidates, _ = sync_log.prepare(records)
                with engine.begin() as conn:
                    sync_log.push(conn, candidates, contributor=f"pusher-{number}")
                    if (number + batch) % 3 == 0:
                        time.sleep(0.05)  # commit late, after writing
        except BaseException as exc:  # reported below
            errors.append(exc)

    seen: list[int] = []

    def puller() -> None:
        cursor = 0
        try:
            while True:
                finished = done.is_set()
                with engine.connect() as conn:
                    page = sync_log.pull(conn, since=cursor, projects=None, limit=7)
                seen.extend(seq for seq, _ in page.rows)
                cursor = page.next
                if finished and not page.rows:
                    return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=pusher, args=(n,)) for n in range(pushers)]
    reader = threading.Thread(target=puller)
    reader.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join()
    assert not errors, errors
    with engine.connect() as conn:
        stored = (
            conn.execute(select(models.mutations.c.seq).order_by(models.mutations.c.seq))
            .scalars()
            .all()
        )
    assert len(stored) == pushers * batches * size
    assert seen == stored  # every seq once, in increasing order, none skipped


def test_database_restart_in_the_middle_of_a_push(
    client: TestClient, engine: Engine, postgres_cluster: PostgresCluster, cloud_db_url: str
) -> None:
    existing = rec.observation("obs-held")
    assert (
        client.post(
            "/sync/mutations/push", json=rec.push_body([existing]), headers=AUTH
        ).status_code
        == 200
    )
    batch = [rec.observation() for _ in range(20)] + [rec.observation("obs-held", title="edited")]
    database = cloud_db_url.rsplit("/", 1)[1]
    blocker = psycopg.connect(postgres_cluster.dsn(database))
    # Hold the read-model row the push will update: it blocks after writing its log rows.
    blocker.execute("SELECT 1 FROM cloud_observations WHERE sync_id = 'obs-held' FOR UPDATE")
    answers: list[int] = []
    request = threading.Thread(
        target=lambda: answers.append(
            client.post("/sync/mutations/push", json=rec.push_body(batch), headers=AUTH).status_code
        )
    )
    request.start()

    def stuck() -> bool:  # the push waits inside its transaction
        waiting = blocker.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = %s",
            (database,),
        ).fetchone()
        return bool(waiting and waiting[0])

    wait_until(stuck)
    postgres_cluster.restart()
    request.join(30)
    blocker.close()
    assert answers == [503]  # the push failed as a whole: nothing half-stored
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(models.mutations)).scalar_one() == 1

    # The client retries until the server answers: nothing lost, nothing twice.
    def pushed():  # the answer once the server takes the push again
        answer = client.post("/sync/mutations/push", json=rec.push_body(batch), headers=AUTH)
        return answer if answer.status_code == 200 else None

    response = wait_until(pushed, timeout=10, every=0.2)
    assert len(response.json()["accepted"]) == len(batch)
    # The answer of a committed push got lost: the retry is accepted again, stored once.
    postgres_cluster.restart()
    again = client.post("/sync/mutations/push", json=rec.push_body(batch), headers=AUTH)
    assert again.status_code == 200 and again.json()["accepted"] == response.json()["accepted"]
    with engine.connect() as conn:
        mids = conn.execute(select(models.mutations.c.mid)).scalars().all()
        title = conn.execute(
            select(models.observations.c.title).where(models.observations.c.sync_id == "obs-held")
        ).scalar_one()
    assert sorted(mids) == sorted({existing["mid"], *(r["mid"] for r in batch)})
    assert title == "edited"
    pulled = client.get("/sync/mutations/pull", headers=AUTH).json()["mutations"]
    assert [orjson.dumps({k: v for k, v in m.items() if k != "seq"}) for m in pulled] == [
        orjson.dumps(r) for r in [existing, *batch]
    ]
