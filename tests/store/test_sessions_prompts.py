"""Sessions (create/complete, end, delete rules) and user prompts."""

import time

import pytest

from engram.errors import ConflictError, NotFoundError, ValidationError
from engram.store import Store


def test_create_completes_blanks_but_never_overwrites(store: Store) -> None:
    store.create_session("s1", "Acme", "")
    store.create_session("s1", "acme", "/src/acme")
    store.create_session("s1", "acme", "/elsewhere")
    s = store.get_session("s1", project="acme")
    assert (s.project, s.directory, s.active) == ("acme", "/src/acme", True)


def test_one_session_id_in_two_projects_is_two_sessions(store: Store) -> None:
    """Identity is per project (docs/architecture.md, "Identity, the journal and replication"): the same id named in another project is that
    project's own session; by id alone, reads take the most recent, ending ends every open one,
    deleting asks which."""
    store.create_session("s1", "acme", "/src/acme")
    # A write naming the session but no project joins the session's project.
    assert store.add_prompt("why?", session_id="s1").project == "acme"
    store.add_observation(title="t", content="c", project="other", session_id="s1")
    assert store.get_session("s1", project="acme").directory == "/src/acme"
    # Its own row in "other", in the same place (it is the same agent session).
    assert store.get_session("s1", project="other").directory == "/src/acme"
    assert store.get_session("s1").project == "other"  # the most recent
    assert [o.title for o in store.session_observations("s1", project="acme")] == []
    assert [o.title for o in store.session_observations("s1", project="other")] == ["t"]
    store.end_session("s1", "done")
    assert all(not store.get_session("s1", project=p).active for p in ("acme", "other"))
    with pytest.raises(ValidationError, match="several projects"):
        store.delete_session("s1")
    store.delete_session("s1", project="acme")
    with pytest.raises(NotFoundError):
        store.get_session("s1", project="acme")


def test_a_session_id_planted_in_another_project_captures_nothing(make_store) -> None:
    """Anyone who may write to a shared project can create a session with any id there. A
    face naming that id alone still gets this machine's own session, its writes stay in
    their project, and ending it writes no summary into the other project."""
    victim = make_store("victim")
    victim.create_session("s-agent", "alpha", "/src/alpha")
    planted = {"id": "s-agent", "project": "evil", "directory": "/x",
               "started_at": "2999-01-01 00:00:00"}  # fmt: skip
    record = {
        "mid": "e" * 32, "hlc": f"{time.time_ns() // 1_000_000:013d}.00000.{'b' * 16}",
        "origin": "b" * 16, "entity": "session", "key": "s-agent", "op": "upsert",
        "project": "evil", "scope": "project", "payload": planted,
    }  # fmt: skip
    assert victim.apply_mutations([record], source="git:/shared").applied == 1
    assert victim.get_session("s-agent").project == "alpha"
    assert victim.add_prompt("secret plan", session_id="s-agent").project == "alpha"
    saved = victim.add_observation(title="t", content="secret", session_id="s-agent")
    assert saved.observation.project == "alpha"
    victim.end_session("s-agent", "summary of secret work")
    assert victim.get_session("s-agent", project="evil").summary is None
    assert victim.journal.count_pending("x", projects=["evil"]) == 1  # only the planted record
    only_theirs = make_store("bystander")
    only_theirs.apply_mutations([record], source="git:/shared")
    with pytest.raises(ValidationError, match="another machine"):
        only_theirs.end_session("s-agent", "would leak")


def test_end_sets_summary_and_unknown_sessions_are_404(store: Store) -> None:
    store.create_session("s1", "acme", "/x")
    ended = store.end_session("s1", "did things")
    assert ended.ended_at is not None and ended.summary == "did things" and not ended.active
    with pytest.raises(NotFoundError):
        store.end_session("nope")
    with pytest.raises(ValidationError):
        store.create_session("  ")
    with pytest.raises(ValidationError):
        store.create_session("x" * 200)


def test_delete_session_rules(store: Store) -> None:
    store.create_session("s1", "acme", "/x")
    store.add_observation(title="t", content="c", session_id="s1", project="acme")
    store.add_prompt("why?", session_id="s2", project="acme")
    with pytest.raises(ConflictError, match="1 observation"):
        store.delete_session("s1")
    store.delete_session("s2")  # deletes its prompt too
    assert store.recent_prompts() == []
    with pytest.raises(NotFoundError):
        store.delete_session("s2")


def test_recent_sessions_order_by_activity_with_counts(store: Store) -> None:
    store.create_session("old", "acme", "/x")
    store.create_session("new", "acme", "/x")
    store.add_observation(title="t", content="c", session_id="old", project="acme")
    store.db.conn.execute("UPDATE sessions SET started_at = '2001-01-01 00:00:00' WHERE id = 'new'")
    sessions = store.recent_sessions("acme")
    assert [(s.id, s.observation_count) for s in sessions] == [("old", 1), ("new", 0)]
    assert store.recent_sessions(project="none") == []


def test_prompts_save_search_and_delete(store: Store) -> None:
    p = store.add_prompt(
        "Please fix the <private>secret</private> flaky login test", project="Acme"
    )
    assert p.content == "Please fix the [REDACTED] flaky login test" and p.project == "acme"
    assert p.session_id == "manual-save-acme" and p.sync_id.startswith("prompt-")
    assert [x.id for x in store.search_prompts("why is login flaky?")] == [p.id]
    assert store.search_prompts('"(* NEAR') == []
    with pytest.raises(ValidationError):
        store.add_prompt("   ")
    with pytest.raises(ValidationError):
        store.search_prompts("")
    store.delete_prompt(p.id)
    with pytest.raises(NotFoundError):
        store.delete_prompt(p.id)
    with pytest.raises(ValidationError):
        store.get_prompt("x")
