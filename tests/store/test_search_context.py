"""Session context is derived, never a second copy of the truth (docs/search.md, issue 14):
only real agent sessions give it, it never crosses project or scope, and every edit or delete of
a memory or prompt re-derives the rows whose context used it — locally and when the change
arrives from another replica."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from engram.store import Store
from engram.store.search_context import is_agent_session, rederive_all
from engram.times import STORE_FORMAT

from .replicas import exchange


@pytest.fixture(autouse=True)
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each save one second after the previous: within one second, memories are ordered by
    their random sync id (docs/architecture.md), which would make these tests depend on luck."""
    start = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
    ticks = itertools.count()

    def now_text() -> str:
        return (start + timedelta(seconds=next(ticks))).strftime(STORE_FORMAT)

    for module in ("observations", "prompts"):
        monkeypatch.setattr(f"engram.store.{module}.now_text", now_text)


def context_of(store: Store, observation_id: int) -> str:
    return str(
        store.db.scalar("SELECT search_context FROM observations WHERE id = ?", (observation_id,))
    )


def titles(store: Store, query: str, **filters) -> list[str]:
    return [o.title for o in store.search(query, **filters)]


def save(store: Store, title: str, content: str, **kwargs) -> int:
    kwargs.setdefault("project", "acme")
    return store.add_observation(title=title, content=content, **kwargs).observation.id


def test_pseudo_sessions_are_not_agent_sessions() -> None:
    assert not is_agent_session("manual-save")
    assert not is_agent_session("manual-save-acme")
    assert not is_agent_session("")
    assert is_agent_session("s-42")
    assert is_agent_session("manual-saver")  # only the exact pseudo names


# --- the three examples, on the store ---------------------------------------------------


def test_a_hard_deleted_secret_is_not_found_through_a_neighbour(store: Store) -> None:
    secret = save(store, "Token for staging", "the staging token is zebrafish-4471", project="leak")
    save(store, "Unrelated note", "the build uses make", project="leak")
    store.delete_observation(secret, hard=True)
    assert store.search("zebrafish") == []
    assert "zebrafish" not in str(
        store.db.scalar("SELECT group_concat(search_context) FROM observations")
    )


def test_a_hard_deleted_secret_in_an_agent_session_leaves_no_context(store: Store) -> None:
    secret = save(
        store, "Token for staging", "the staging token is zebrafish-4471", session_id="s1"
    )
    after = [
        save(store, f"Note {i}", f"the build uses make, step {i}", session_id="s1")
        for i in range(3)
    ]
    assert "zebrafish" in context_of(store, after[0])  # context works while the memory lives
    store.delete_observation(secret, hard=True)
    assert store.search("zebrafish") == []
    assert all("zebrafish" not in context_of(store, oid) for oid in after)


def test_an_edited_memory_no_longer_matches_through_its_neighbours(store: Store) -> None:
    store.add_prompt("how do we keep people logged in?", session_id="s1", project="acme")
    store.add_observation(
        title="Auth tokens",
        content="JWT access tokens with refresh tokens in an httpOnly cookie",
        topic_key="architecture/auth",
        session_id="s1",
        project="acme",
    )
    save(store, "Session length", "sessions last 8 hours", session_id="s1")
    save(store, "Logout", "logout clears the server-side session", session_id="s1")
    assert "Session length" in titles(store, "JWT refresh cookie")
    store.add_observation(
        title="Auth tokens",
        content="PASETO v4 local tokens, rotated daily",
        topic_key="architecture/auth",
        session_id="s1",
        project="acme",
    )
    assert titles(store, "JWT refresh cookie") == []
    assert titles(store, "PASETO") == ["Auth tokens", "Session length", "Logout"]


def test_sessionless_saves_do_not_match_each_other(store: Store) -> None:
    save(store, "Deploy credentials", "deploy with the ops key from the vault")
    save(store, "Prefers tabs", "the user prefers tabs over spaces")
    save(store, "Connection pooling", "pgbouncer runs in transaction mode")
    save(store, "Lint rule", "ruff runs in CI")
    save(store, "Editor", "the team uses neovim")
    assert titles(store, "pgbouncer") == ["Connection pooling"]
    assert titles(store, "vault tabs") == ["Deploy credentials", "Prefers tabs"] or titles(
        store, "vault tabs"
    ) == ["Prefers tabs", "Deploy credentials"]
    assert store.db.scalar("SELECT COUNT(*) FROM observations WHERE search_context != ''") == 0


# --- where context comes from -------------------------------------------------------------------


def test_context_holds_the_two_memories_before_and_the_prompt(store: Store) -> None:
    store.add_prompt("the login page times out after lunch", session_id="s1", project="acme")
    first = save(store, "First", "alpha", session_id="s1")
    save(store, "Second", "beta", session_id="s1")
    third = save(store, "Third", "gamma", session_id="s1")
    fourth = save(store, "Fourth", "delta", session_id="s1")
    assert context_of(store, first) == "the login page times out after lunch"
    assert (
        context_of(store, third) == "Second beta\nFirst alpha\nthe login page times out after lunch"
    )
    assert "First" not in context_of(store, fourth)


def test_context_never_crosses_project_or_scope(store: Store) -> None:
    save(store, "Other project", "walrus", session_id="s1", project="other")
    save(store, "Personal", "narwhal", session_id="s1", scope="personal")
    shared = save(store, "Shared", "plain text", session_id="s1")
    assert context_of(store, shared) == ""
    assert titles(store, "walrus") == ["Other project"]
    assert titles(store, "narwhal") == ["Personal"]


def test_a_prompt_of_another_project_is_not_context(store: Store) -> None:
    store.add_prompt("talk about the walrus", session_id="s1", project="other")
    oid = save(store, "Shared", "plain text", session_id="s1")
    assert context_of(store, oid) == ""


# --- re-derivation on every change --------------------------------------------------------------


def test_soft_delete_and_edit_re_derive_the_rows_after(store: Store) -> None:
    a = save(store, "A", "walrus", session_id="s1")
    b = save(store, "B", "two", session_id="s1")
    c = save(store, "C", "three", session_id="s1")
    d = save(store, "D", "four", session_id="s1")
    assert "walrus" in context_of(store, b) and "walrus" in context_of(store, c)
    store.update_observation(a, content="seal")
    assert "walrus" not in context_of(store, b) + context_of(store, c)
    assert "seal" in context_of(store, c)
    store.delete_observation(b)
    assert context_of(store, b) == ""  # a deleted row indexes no one else's text
    assert context_of(store, c) == "A seal"
    assert context_of(store, d) == "C three\nA seal"
    assert titles(store, "seal") == ["A", "C", "D"]


def test_moving_a_memory_re_derives_both_places(store: Store) -> None:
    a = save(store, "A", "walrus", session_id="s1")
    b = save(store, "B", "two", session_id="s1")
    store.update_observation(a, project="elsewhere")
    assert context_of(store, b) == ""
    store.update_observation(b, scope="personal")
    assert context_of(store, b) == ""
    store.update_observation(a, project="acme")
    store.update_observation(b, scope="project")
    assert context_of(store, b) == "A walrus"


def test_editing_and_deleting_a_prompt_re_derive_what_it_led_to(store: Store) -> None:
    prompt = store.add_prompt("the walrus is angry", session_id="s1", project="acme")
    a = save(store, "A", "one", session_id="s1")
    assert titles(store, "walrus") == ["A"]
    store.delete_prompt(prompt.id)
    assert context_of(store, a) == ""
    assert titles(store, "walrus") == []


# --- replicas -----------------------------------------------------------------------------------


def test_a_hard_delete_from_a_replica_re_derives_context(store: Store, make_store) -> None:
    other = make_store("other")
    secret = save(store, "Token", "zebrafish-4471 is the token", session_id="s1")
    after = save(store, "Next", "the build uses make", session_id="s1")
    exchange(store, other)
    mirrored = other.get_observation_by_sync_id(store.get_observation(after).sync_id).id
    assert "zebrafish" in context_of(other, mirrored)
    store.delete_observation(secret, hard=True)
    exchange(store, other)
    assert context_of(other, mirrored) == ""
    assert other.search("zebrafish") == []


def test_an_edit_from_a_replica_re_derives_context(store: Store, make_store) -> None:
    other = make_store("other")
    store.add_prompt("the walrus is angry", session_id="s1", project="acme")
    a = save(store, "A", "JWT refresh cookie", session_id="s1")
    b = save(store, "B", "two", session_id="s1")
    exchange(store, other)
    store.update_observation(a, content="PASETO")
    prompt = store.recent_prompts()[0]
    store.delete_prompt(prompt.id)
    exchange(store, other)
    mirrored = other.get_observation_by_sync_id(store.get_observation(b).sync_id).id
    assert context_of(other, mirrored) == "A PASETO"
    assert other.search("JWT refresh cookie") == []
    assert other.search("walrus") == []


def test_an_out_of_order_arrival_re_derives_the_two_rows_after_it(store: Store, make_store) -> None:
    source = make_store("source")
    ids = [save(source, f"M{i}", f"word{i}", session_id="s1") for i in range(4)]
    entries = source.journal.pending("peer")
    first = source.get_observation(ids[0]).sync_id
    late = [e.record for e in entries if e.key == first]
    rest = [e.record for e in entries if e.key != first]
    store.apply_mutations(rest, source="peer")
    store.apply_mutations(late, source="peer")
    for oid in ids:
        mine = store.get_observation_by_sync_id(source.get_observation(oid).sync_id).id
        assert context_of(store, mine) == context_of(source, oid)
    assert rederive_all_changes(store) == 0


def rederive_all_changes(store: Store) -> int:
    """How many rows the bulk derivation would change (0: every context is already right)."""
    with store.db.write() as conn:
        changed = rederive_all(conn)
        conn.execute("ROLLBACK")
        conn.execute("BEGIN IMMEDIATE")  # leave the transaction for write() to commit
    return changed


def test_import_derives_context_like_a_live_save(store: Store, make_store) -> None:
    source = make_store("source")
    source.add_prompt("the walrus is angry", session_id="s1", project="acme")
    for i in range(4):
        save(source, f"M{i}", f"word{i}", session_id="s1")
    save(source, "Lonely", "sessionless")
    doc = source.export_data()
    doc["observations"].reverse()  # out of order on purpose
    store.import_data(doc)
    assert rederive_all_changes(store) == 0
    assert {o.title for o in store.search("walrus")} == {"M0", "M1", "M2", "M3"}


def test_the_migration_re_derives_contexts_written_by_the_old_rules(tmp_path) -> None:
    """A database of the schema before (contexts from the manual-save pseudo session, of deleted
    rows, across scopes) comes out of the search migration with only what the new rules give."""
    from engram.settings import Config
    from engram.store.schema import MIGRATIONS, SCHEMA_VERSION, V1_TABLES, migration_9

    config = Config(data_dir=tmp_path / "old")
    with Store.open(config=config) as store:
        save(store, "Token", "zebrafish-4471")
        plain = save(store, "Plain", "the build uses make")
        save(store, "Agent 1", "walrus", session_id="s1")
        agent = save(store, "Agent 2", "seal", session_id="s1")
        conn = store.db.conn
        conn.execute("DROP TABLE observations_fts_vocab")
        conn.execute("DROP TABLE prompts_fts_vocab")
        conn.execute("DROP TABLE observations_fts")
        conn.execute("DROP TABLE prompts_fts")
        fts_ddl = V1_TABLES[
            V1_TABLES.index("CREATE VIRTUAL TABLE IF NOT EXISTS observations_fts") :
        ]
        fts_ddl = fts_ddl[: fts_ddl.index("-- Replication")]
        conn.executescript(fts_ddl)
        conn.execute(
            "UPDATE observations SET search_context = 'Token zebrafish-4471' WHERE id = ?", (plain,)
        )
        conn.execute(
            "UPDATE observations SET search_context = 'stale JWT text' WHERE id = ?", (agent,)
        )
        conn.execute("INSERT INTO observations_fts(observations_fts) VALUES ('rebuild')")
        conn.execute("DROP TABLE store_purge")
        # Back to just before the search migration (later ones re-run harmlessly).
        conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(migration_9)}")
    with Store.open(config=config) as store:
        assert store.db.scalar("PRAGMA user_version") == SCHEMA_VERSION
        assert context_of(store, plain) == ""
        assert context_of(store, agent) == "Agent 1 walrus"
        assert [o.title for o in store.search("zebrafish")] == ["Token"]
        assert store.search("JWT") == []
        ddl = store.db.scalar("SELECT sql FROM sqlite_master WHERE name = 'observations_fts'")
        assert "prefix=" not in str(
            ddl
        )  # the lean migration: prefixes are read from the main index
        assert [o.title for o in store.search("walru")] == ["Agent 1", "Agent 2"]  # a prefix
        assert [o.match.tier for o in store.search("walrus")] == ["words", "context"]
        store.db.conn.execute(
            "INSERT INTO observations_fts(observations_fts, rank) VALUES ('integrity-check', 1)"
        )


def test_saves_within_one_second_keep_their_order(store: Store, monkeypatch) -> None:
    """created_at has whole seconds; keys are minted in time order, so a burst of saves (a list
    of learnings, a fast agent) is still ordered as it was made, on every replica."""
    for module in ("observations", "prompts"):
        monkeypatch.setattr(f"engram.store.{module}.now_text", lambda: "2026-11-21 10:00:00")
    ids = [save(store, f"M{i}", f"word{i}", session_id="burst") for i in range(6)]
    for earlier, later in zip(ids, ids[2:], strict=False):
        # Each memory is indexed with the two saved just before it.
        assert context_of(store, later).startswith(f"M{ids.index(later) - 1} ")
        assert f"M{ids.index(earlier)} " in context_of(store, later)
