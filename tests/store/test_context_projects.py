"""The context text with its byte budget; stats, project list, merge and prune."""

import pytest

from engram.errors import ValidationError
from engram.store import Store


def test_context_is_empty_without_memories(store: Store) -> None:
    assert store.context("acme") == ""


def test_context_sections_and_previews(store: Store) -> None:
    store.create_session("s1", "acme", "/src")
    store.end_session("s1", "S" * 300)
    store.add_prompt("what broke?", session_id="s1", project="acme")
    store.add_observation(
        title="Fix", content="C" * 400, type="bugfix", session_id="s1", project="acme"
    )
    store.add_observation(title="Other", content="elsewhere", project="zeta")
    text = store.context("acme")
    assert text.startswith("## Memory from Previous Sessions\n\n### Recent Sessions\n")
    assert "- **acme** (" in text and "S" * 200 + "..." in text and "[1 observation]" in text
    assert "### Recent User Prompts\n- " in text and "what broke?" in text
    assert "- [bugfix] **Fix**: " + "C" * 300 + "..." in text
    assert "elsewhere" not in text
    assert "C" * 10 not in store.context("acme", compact=True)


def test_context_byte_budget_cuts_cleanly(store: Store) -> None:
    for i in range(20):
        store.add_observation(title=f"é note {i}", content="é" * 200, project="acme")
    text = store.context("acme", max_bytes=500)
    assert len(text.encode()) <= 500 and text.endswith("\n[truncated]")
    text.encode().decode("utf-8")  # still valid UTF-8
    with pytest.raises(ValidationError):
        store.context("acme", max_bytes=0)


def test_stats_and_project_list(store: Store) -> None:
    store.create_session("s1", "acme", "/src/acme")
    store.add_observation(title="a", content="a", session_id="s1", project="acme")
    store.add_observation(title="b", content="b", project="beta")
    gone = store.add_observation(title="c", content="c", project="beta").observation
    store.delete_observation(gone.id)
    store.add_prompt("p", project="acme")
    st = store.stats()
    assert (st.total_sessions, st.total_observations, st.total_prompts) == (3, 2, 1)
    assert set(st.projects) == {"acme", "beta"}
    projects = {p.name: p for p in store.list_projects()}
    assert projects["acme"].directories == ["/src/acme"]
    assert (projects["acme"].observation_count, projects["acme"].prompt_count) == (1, 1)
    assert projects["beta"].observation_count == 1
    assert store.project_exists("ACME") and not store.project_exists("nope")
    assert store.stats("beta").total_observations == 1


def test_merge_moves_everything_and_journals_exits(store: Store) -> None:
    store.add_observation(title="a", content="a", project="engram-memory")
    store.add_prompt("p", project="engram-memory")
    store.add_observation(title="b", content="b", project="engram")
    before = store.journal.count_pending("t")
    result = store.merge_projects(["Engram-Memory", "engram"], "engram")
    assert result.sources_merged == ["engram-memory"] and result.observations_updated == 1
    assert result.prompts_updated == 1 and result.sessions_updated == 1
    assert store.project_names() == ["engram"]
    ops = [(e.entity, e.op, e.project) for e in store.journal.pending("t")][before:]
    assert ("observation", "delete", "engram-memory") in ops and (
        "observation",
        "upsert",
        "engram",
    ) in ops
    with pytest.raises(ValidationError):
        store.merge_projects(["engram"], "engram")


def test_prune_removes_projects_without_live_memories(store: Store) -> None:
    store.add_prompt("p", project="empty-one")
    store.add_observation(title="a", content="a", project="kept")
    dry = store.prune_projects(dry_run=True)
    assert dry.projects == ["empty-one"] and dry.sessions_deleted == 1 and dry.prompts_deleted == 1
    assert store.project_exists("empty-one")
    done = store.prune_projects()
    assert done.projects == ["empty-one"] and not store.project_exists("empty-one")
    assert store.prune_projects().projects == []
