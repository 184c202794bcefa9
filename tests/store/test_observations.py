"""Saving, deduplicating, topic upserts, updating and deleting memories."""

import pytest

from engram.errors import NotFoundError, ValidationError
from engram.store import Store
from engram.text import topic_sync_id


def save(store: Store, title: str = "Fixed login timeout", content: str = "raised the TTL", **kw):
    return store.add_observation(title=title, content=content, **{"project": "acme", **kw})


@pytest.mark.parametrize(
    ("title", "content", "field"),
    [("", "x", "title"), ("  ", "x", "title"), ("t", "", "content"), ("t", "\n\t", "content")],
)
def test_empty_title_or_content_is_refused_and_writes_nothing(
    store: Store, title, content, field
) -> None:
    with pytest.raises(ValidationError) as err:
        store.add_observation(title=title, content=content, project="acme")
    assert err.value.field == field and "cannot be empty" in str(err.value)
    assert store.stats().total_observations == 0
    assert store.journal.count_pending("t", include_personal=True) == 0


def test_private_text_never_reaches_the_database(store: Store) -> None:
    saved = save(
        store, title="Key <private>k</private>", content="token <private>sk-123</private>!"
    )
    assert saved.observation.title == "Key [REDACTED]"
    assert saved.observation.content == "token [REDACTED]!"
    raw = store.db.rows("SELECT record FROM sync_journal")
    assert all("sk-123" not in r[0] for r in raw)
    assert all("sk-123" not in e.record for e in store.journal.pending("t"))  # the text sent


def test_oversized_content_is_truncated_with_a_warning(store: Store) -> None:
    big = "x" * (store.config.max_observation_length + 10)
    saved = save(store, content=big)
    assert saved.truncated and saved.original_bytes == len(big)
    assert saved.observation.content.endswith("... [truncated]")
    assert any("truncated" in w for w in saved.warnings)


def test_same_content_within_the_window_counts_a_duplicate(store: Store) -> None:
    first = save(store, type="bugfix")
    again = save(store, content="  Raised   the ttl ", type="bugfix")
    assert again.action == "deduplicated"
    assert again.observation.id == first.observation.id
    assert again.observation.duplicate_count == 2
    assert save(store, type="decision").action == "created"  # another type is another memory
    assert save(store, title="Other title", type="bugfix").action == "created"


def test_duplicates_outside_the_window_are_new_memories(store: Store) -> None:
    first = save(store)
    store.db.conn.execute(
        "UPDATE observations SET created_at = '2000-01-01 00:00:00' WHERE id = ?",
        (first.observation.id,),
    )
    assert save(store).action == "created"


def test_topic_key_upserts_one_memory_with_a_deterministic_sync_id(store: Store) -> None:
    first = save(store, title="Auth model", content="sessions", topic_key="Architecture/Auth")
    assert first.observation.topic_key == "architecture/auth"
    assert first.observation.sync_id == topic_sync_id("acme", "project", "architecture/auth")
    second = save(store, title="Auth model v2", content="JWT", topic_key="architecture/auth")
    assert second.action == "topic_updated"
    assert second.observation.id == first.observation.id
    assert second.observation.revision_count == 2 and second.observation.content == "JWT"
    personal = save(
        store, title="Mine", content="JWT", topic_key="architecture/auth", scope="personal"
    )
    assert personal.observation.id != first.observation.id


def test_topic_key_still_works_after_the_first_memory_moved_away(store: Store) -> None:
    first = save(store, title="Auth", content="a", topic_key="arch/auth")
    moved = store.update_observation(first.observation.id, project="elsewhere")
    again = save(store, title="Auth", content="b", topic_key="arch/auth")
    # The move left the topic's derived key free in the old project (a tombstone there, and
    # the memory lives on under its moved key): the new save takes the derived key again.
    assert again.action == "created" and again.observation.sync_id == first.observation.sync_id
    assert moved.sync_id != first.observation.sync_id and moved.project == "elsewhere"
    assert store.get_observation(moved.id).content == "a"


def test_suggested_topic_key_and_similar_project_warning(store: Store) -> None:
    save(store, project="engram")
    saved = save(store, project="Engram-memory", content="other")
    assert saved.suggested_topic_key == "bug/fixed-login-timeout"
    assert any('Similar project found: "engram"' in w for w in saved.warnings)
    assert any("Project name normalized" in w for w in saved.warnings)


def test_update_changes_fields_and_counts_a_revision(store: Store) -> None:
    obs = save(store).observation
    updated = store.update_observation(
        obs.id, title="New title", topic_key="bug/login", scope="personal"
    )
    assert (updated.title, updated.topic_key, updated.scope, updated.revision_count) == (
        "New title",
        "bug/login",
        "personal",
        2,
    )
    assert store.update_observation(obs.id, topic_key="").topic_key is None


@pytest.mark.parametrize("kwargs", [{}, {"title": "  "}, {"content": ""}])
def test_update_rejects_nothing_or_empty_fields(store: Store, kwargs) -> None:
    obs = save(store).observation
    with pytest.raises(ValidationError):
        store.update_observation(obs.id, **kwargs)
    assert store.get_observation(obs.id).revision_count == 1


@pytest.mark.parametrize("bad", ["abc", None, -1, 0, "1.5", True])
def test_bad_ids_are_validation_errors(store: Store, bad) -> None:
    with pytest.raises(ValidationError):
        store.get_observation(bad)


def test_unknown_ids_are_not_found(store: Store) -> None:
    for call in (
        lambda: store.get_observation(42),
        lambda: store.update_observation(42, title="x"),
        lambda: store.delete_observation(42),
        lambda: store.timeline(42),
    ):
        with pytest.raises(NotFoundError, match="#42 not found"):
            call()


def test_soft_delete_hides_everywhere_and_hard_delete_purges(store: Store) -> None:
    obs = save(store).observation
    store.delete_observation(obs.id)
    assert store.search("login") == [] and store.recent_observations() == []
    with pytest.raises(NotFoundError):
        store.get_observation(obs.id)
    assert store.get_observation(obs.id, include_deleted=True).deleted_at is not None
    with pytest.raises(NotFoundError):
        store.delete_observation(obs.id)  # already soft-deleted
    store.delete_observation(obs.id, hard=True)
    assert store.db.scalar("SELECT COUNT(*) FROM observations") == 0
    assert store.db.scalar("SELECT COUNT(*) FROM sync_tombstones") == 1


def test_recent_lists_filter_and_page(store: Store) -> None:
    ids = [
        save(
            store, title=f"t{i}", content=f"c{i}", type="bugfix" if i % 2 else "decision"
        ).observation.id
        for i in range(5)
    ]
    save(store, title="p", content="personal note", scope="personal")
    assert store.recent_observations(limit=2)[0].id > ids[-1]
    assert [o.id for o in store.recent_observations(type="bugfix")] == [ids[3], ids[1]]
    assert len(store.recent_observations(scope="personal")) == 1
    page = store.recent_observations(limit=2, offset=2, scope="project")
    assert [o.id for o in page] == [ids[2], ids[1]]
    assert store.count_observations(scope="project") == 5
    with pytest.raises(ValidationError, match="since"):
        store.recent_observations(since="yesterday-ish")


def test_timeline_shows_neighbours_in_the_same_session(store: Store) -> None:
    ids = [
        save(store, title=f"step {i}", content=f"did {i}", session_id="s1").observation.id
        for i in range(7)
    ]
    save(store, title="elsewhere", content="other session", session_id="s2")
    tl = store.timeline(ids[3], before=2, after=10)
    assert [e.id for e in tl.before] == ids[1:3] and [e.id for e in tl.after] == ids[4:]
    assert tl.total_in_range == 7 and tl.session_info is not None and tl.session_info.id == "s1"


def test_passive_capture_saves_learnings_once(store: Store) -> None:
    text = "Done.\n## Key Learnings:\n1. bcrypt cost twelve balances our servers well\n2. short\n"
    result = store.capture_passive(text, project="acme")
    assert (result.extracted, result.saved, result.duplicates) == (1, 1, 0)
    obs = store.recent_observations()[0]
    assert (obs.type, obs.tool_name, obs.title) == (
        "passive",
        "mcp-passive",
        "bcrypt cost twelve balances our servers well",
    )
    again = store.capture_passive(text, project="acme")
    assert (again.saved, again.duplicates) == (0, 1)
