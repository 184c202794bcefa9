"""Search as of a date (issue 21): what was true then — superseded facts, earlier texts of
memories edited in place, validity windows set by hand — and needs_review, and importance as a
tie-breaker that never outranks a clearly better match."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.errors import ValidationError
from engram.store import Store
from engram.store.asof import parse_as_of
from engram.store.models import NO_INTENT, Observation
from engram.store.tiebreak import break_ties
from tests.store.replicas import converge


def days_ago(n: int) -> str:
    return (datetime.now(UTC) - timedelta(days=n)).strftime("%Y-%m-%d %H:%M:%S")


def old(store: Store, key: str, title: str, content: str, days: int, **extra) -> None:
    """A memory saved ``days`` ago (through an import, which keeps its timestamps)."""
    store.import_data({"version": "0.1.0", "observations": [{
        "sync_id": key, "session_id": "s", "project": "acme", "title": title,
        "content": content, "created_at": days_ago(days), "updated_at": days_ago(days), **extra,
    }]})  # fmt: skip


def contents(found: list[Observation]) -> list[str]:
    return [o.content for o in found]


def test_a_memory_edited_in_place_answers_with_its_earlier_text(store: Store) -> None:
    old(store, "obs-deploy", "Deploy target", "We deploy to Heroku with git push", 100,
        topic_key="infra/deploy")  # fmt: skip
    saved = store.add_observation(title="Deploy target", content="We deploy to Fly.io now",
                                  project="acme", topic_key="infra/deploy")  # fmt: skip
    assert saved.action == "topic_updated"
    assert contents(store.search("deploy")) == ["We deploy to Fly.io now"]
    assert contents(store.search("deploy", as_of=days_ago(50)[:10])) == [
        "We deploy to Heroku with git push"
    ]
    assert store.search("heroku", as_of=days_ago(50)) and not store.search("heroku")
    assert store.search("deploy", as_of=days_ago(200)[:10]) == []  # not saved yet then


def test_a_consolidated_fact_is_found_as_it_was_before_the_merge(store: Store) -> None:
    text = "**What**: raised the gunicorn worker timeout to 60s for the SSO redirect"
    old(store, "obs-a", "Login timeout fix", text, 40)
    old(store, "obs-b", "Fixed login timeouts", text + ". Nginx proxy_read_timeout matched.", 30)
    report = store.consolidate()
    assert report.merged == 2
    now = store.search("gunicorn timeout")
    assert [o.sync_id for o in now] == [report.merges[0].merged.sync_id]
    then = store.search("gunicorn timeout", as_of=days_ago(35)[:10])
    assert [o.sync_id for o in then] == ["obs-a"]  # obs-b was not saved yet, the merge not made
    both = store.search("gunicorn timeout", as_of=days_ago(1))
    assert {o.sync_id for o in both} == {"obs-a", "obs-b"}


def test_a_validity_window_set_later_still_applies_to_earlier_dates(store: Store) -> None:
    old(store, "obs-py", "Python version", "The service runs on Python 3.9", 300)
    memory = store.get_observation_by_sync_id("obs-py", project="acme")
    store.set_validity(memory.id, valid_to=days_ago(100)[:10])
    assert store.search("python", as_of=days_ago(200)[:10])
    assert store.search("python", as_of=days_ago(50)[:10]) == []
    assert store.search("python")  # the live store still holds it: validity is for as-of
    store.set_validity(memory.id, valid_from=days_ago(250)[:10])
    assert store.search("python", as_of=days_ago(280)[:10]) == []


def test_deleted_later_means_it_was_there_before(store: Store) -> None:
    old(store, "obs-x", "Feature flag", "flags live in LaunchDarkly", 60)
    memory = store.get_observation_by_sync_id("obs-x", project="acme")
    store.delete_observation(memory.id)
    assert store.search("launchdarkly") == []
    assert [o.sync_id for o in store.search("launchdarkly", as_of=days_ago(10))] == ["obs-x"]
    assert store.search("launchdarkly", as_of=days_ago(10))[0].deleted_at is None
    hard = store.add_observation(title="Secret note", content="launchdarkly key", project="acme")
    store.delete_observation(hard.observation.id, hard=True)
    assert all(o.id != hard.observation.id for o in store.search("launchdarkly", as_of=days_ago(0)))


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", "2026-02-30T10:00", "12/01/2026"])
def test_a_bad_date_is_refused_naming_as_of(store: Store, bad: str) -> None:
    store.add_observation(title="t", content="c", project="acme")
    with pytest.raises(ValidationError, match="as_of"):
        store.search("c", as_of=bad)


def test_a_date_means_the_end_of_that_day_a_time_that_instant() -> None:
    assert parse_as_of("2026-09-01") == "2026-09-01 23:59:59"
    assert parse_as_of("2026-09-01T14:30:00Z") == "2026-09-01 14:30:00"
    assert parse_as_of("2026-09-01T14:30:00+02:00") == "2026-09-01 12:30:00"


def test_as_of_follows_the_same_history_on_every_replica(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old(a, "obs-d", "Deploy", "Heroku", 100, topic_key="infra/deploy")
    a.add_observation(title="Deploy", content="Fly.io", project="acme", topic_key="infra/deploy")
    converge([a, b])
    when = days_ago(50)
    assert contents(b.search("deploy", as_of=when)) == contents(a.search("deploy", as_of=when))
    assert contents(b.search("deploy", as_of=when)) == ["Heroku"]


# --- review -------------------------------------------------------------------------------------


def test_memories_untouched_and_unread_need_review_until_read_or_confirmed(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    old(a, "obs-stale", "Old runbook", "restart the worker with supervisorctl", 120)
    old(a, "obs-fresh", "New runbook", "restart the worker with systemctl", 10)
    assert [o.sync_id for o in a.needs_review()] == ["obs-stale"]
    assert a.needs_review(days=5) and len(a.needs_review(days=5)) == 2
    stale = a.get_observation_by_sync_id("obs-stale", project="acme")
    confirmed = a.mark_reviewed(stale.id)
    assert confirmed.reviewed_at and a.needs_review() == []
    converge([a, b])  # a confirmation is the user's intent: it syncs
    assert b.get_observation_by_sync_id("obs-stale", project="acme").reviewed_at
    assert b.needs_review() == []
    old(b, "obs-read", "Read often", "supervisorctl status", 200)
    b.search("supervisorctl status")  # reading it is activity too
    assert [o.sync_id for o in b.needs_review()] == []
    with pytest.raises(ValidationError, match="days"):
        b.needs_review(days=0)


# --- importance breaks ties ---------------------------------------------------------------------


def _result(key: str, rank: float, importance: float) -> Observation:
    return Observation(
        id=0, sync_id=key, session_id="s", type="t", title=key, content="", tool_name=None,
        project="p", scope="project", topic_key=None, revision_count=1, duplicate_count=1,
        last_seen_at=None, created_at="", updated_at="", deleted_at=None,
        **{**NO_INTENT, "importance": importance}, rank=rank,
    )  # fmt: skip


def test_importance_reorders_only_practically_tied_results() -> None:
    ranked = [
        _result("best", -10.0, 0.1),  # clearly better: stays first whatever its importance
        _result("tie-low", -5.0, 0.2),
        _result("tie-high", -4.995, 0.9),  # within 0.2 % of -5.0
        _result("close", -4.95, 1.0),  # 1 % worse: a real difference, never jumps
        _result("worse", -4.0, 1.0),
    ]
    order = ["best", "tie-high", "tie-low", "close", "worse"]
    assert [r.sync_id for r in break_ties(ranked)] == order


def test_a_more_important_twin_comes_first_in_search(store: Store) -> None:
    one = store.add_observation(title="Redis eviction", content="allkeys-lru", project="a")
    two = store.add_observation(title="Redis eviction", content="allkeys-lru", project="b")
    clearly = store.add_observation(
        title="Redis eviction policy for Redis eviction", content="redis eviction allkeys-lru",
        project="c", importance=0.0,
    )  # fmt: skip
    store.set_importance(two.observation.id, 0.95)
    store.set_importance(one.observation.id, 0.05)
    found = [o.id for o in store.search("redis eviction", record_access=False)]
    assert found[0] == clearly.observation.id  # the better match, importance 0
    assert found[1:] == [two.observation.id, one.observation.id]


def test_as_of_reads_the_kept_revisions_when_the_journal_no_longer_holds_the_text(
    store: Store,
) -> None:
    """Issue 21 with issue 17's revisions: DESIGN §3 lets the journal be compacted, so search as
    of a moment takes a memory's earlier text from the revisions kept for history too; with the
    journal's old states gone (as a compaction would drop them) it still answers with what the
    memory said then, and a moment before every kept version still finds nothing."""
    old(store, "obs-deploy", "Deploy target", "We deploy to Heroku with git push", 100,
        topic_key="infra/deploy")  # fmt: skip
    old(store, "obs-db", "Database", "Postgres 13 on RDS", 90)
    store.add_observation(title="Deploy target", content="We deploy to Fly.io now",
                          project="acme", topic_key="infra/deploy")  # fmt: skip
    oid = store.get_observation_by_sync_id("obs-db", project="acme").id
    store.update_observation(oid, content="Postgres 16 on RDS")
    with store.db.write() as conn:  # compaction: only each memory's latest state stays
        conn.execute(
            """DELETE FROM sync_journal WHERE entity = 'observation' AND hlc < (
                   SELECT o.hlc FROM observations o
                   WHERE o.project = sync_journal.project AND o.sync_id = sync_journal.key)"""
        )
    then = days_ago(50)[:10]
    assert contents(store.search("deploy", as_of=then)) == ["We deploy to Heroku with git push"]
    assert contents(store.search("postgres", as_of=then)) == ["Postgres 13 on RDS"]
    assert contents(store.search("postgres")) == ["Postgres 16 on RDS"]
    assert store.search("deploy", as_of=days_ago(200)[:10]) == []
