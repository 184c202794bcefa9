"""Against a real ``engram cloud serve``: wrong bearer tokens are throttled per client address
(the count lives in PostgreSQL), forwarded headers are believed only from configured proxies, and
the server prunes the audit log and holds back far-future records when it starts."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from sqlalchemy import Engine, func, insert, select, text

from engram_cloud import controls, models, ratelimit
from tests.cloud import records as rec
from tests.cloud.test_record_trust import FAR_FUTURE, _stored_before_the_rule
from tests.support.cloud import LEGACY_TOKEN, RunningServer, bearer

WRONG = "egt_" + "w" * 43


def test_wrong_tokens_are_throttled_per_address_whatever_the_headers_say(
    serve: Callable[..., RunningServer], engine: Engine
) -> None:
    server = serve()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        # No credentials at all is not a guess: never counted.
        for _ in range(ratelimit.MAX_BAD_TOKENS + 5):
            assert http.get("/api/v1/whoami").status_code == 401
        assert http.get("/api/v1/whoami", headers=bearer(LEGACY_TOKEN)).status_code == 200
        # A rotated X-Forwarded-For is nobody's word here (no trusted proxy is configured):
        # every guess counts against the real peer, 127.0.0.1.
        codes = [
            http.get(
                "/api/v1/whoami",
                headers={**bearer(f"{WRONG}{i}"), "X-Forwarded-For": f"198.51.100.{i}"},
            ).status_code
            for i in range(ratelimit.MAX_BAD_TOKENS + 3)
        ]
        assert codes == [401] * ratelimit.MAX_BAD_TOKENS + [429] * 3
        refused = http.get("/api/v1/whoami", headers=bearer(LEGACY_TOKEN))
        assert refused.status_code == 429  # even the right token, from this address
        assert refused.json()["error_code"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 300
        # Once the failures age out of the window, the address is served again.
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE cloud_login_attempts SET attempted_at = now() - interval '6 min'")
            )
        assert http.get("/api/v1/whoami", headers=bearer(LEGACY_TOKEN)).status_code == 200
    with engine.connect() as conn:
        keys = set(conn.execute(select(models.login_attempts.c.key)).scalars())
    assert keys == {"bearer:127.0.0.1"}


def test_forwarded_headers_count_only_from_a_trusted_proxy(
    serve: Callable[..., RunningServer],
) -> None:
    server = serve(ENGRAM_CLOUD_TRUSTED_PROXIES="127.0.0.1")
    assert "trusting X-Forwarded-For/-Proto from 127.0.0.1" in server.output()
    with httpx.Client(base_url=server.url, timeout=30) as http:
        attacker = {"X-Forwarded-For": "203.0.113.7"}
        for _ in range(ratelimit.MAX_BAD_TOKENS):
            assert http.get("/api/v1/whoami", headers={**attacker, **bearer(WRONG)}).status_code
        blocked = http.get("/api/v1/whoami", headers={**attacker, **bearer(LEGACY_TOKEN)})
        assert blocked.status_code == 429
        # The proxy's other clients (and the proxy itself) are not locked out by one of them.
        other = http.get(
            "/api/v1/whoami", headers={"X-Forwarded-For": "203.0.113.8", **bearer(LEGACY_TOKEN)}
        )
        assert other.status_code == 200
        assert http.get("/api/v1/whoami", headers=bearer(LEGACY_TOKEN)).status_code == 200


def test_start_up_prunes_the_audit_log_and_holds_back_far_clocks(
    serve: Callable[..., RunningServer], engine: Engine
) -> None:
    key = "obs-" + "2" * 16
    _stored_before_the_rule(
        engine,
        [
            rec.observation(key, title="honest"),
            rec.observation(key, title="from 2286", hlc=FAR_FUTURE),
        ],
    )
    row = {
        "contributor": "x",
        "project": "acme",
        "action": "mutation_push",
        "outcome": "accepted",
        "entry_count": 1,
    }
    with engine.begin() as conn:
        conn.execute(insert(models.sync_audit_log), [row] * 4)
        conn.execute(
            text(
                "UPDATE cloud_sync_audit_log SET occurred_at = now() - interval '400 days' "
                "WHERE id < 4"
            )
        )
    server = serve(ENGRAM_CLOUD_AUDIT_RETENTION_DAYS="365")
    assert "clock bound: 1 record(s) held back" in server.output()
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(models.sync_audit_log)).scalar() == 1
        title = conn.execute(
            select(models.observations.c.title).where(models.observations.c.sync_id == key)
        ).scalar_one()
    assert title == "honest"
    with engine.connect() as conn:
        assert controls.audit_rows(conn)[0]["contributor"] == "x"
