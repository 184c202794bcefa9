"""Consolidation (issue 21) on a synthetic store with planted duplicates, trivia, stale facts
and a pinned memory (bench/planted.py): it merges exactly the planted duplicates, archives the
trivia, keeps the pin, reports what it did, loses nothing when stopped half-way and changes
nothing in a dry run."""

from __future__ import annotations

import math

import pytest

from engram.errors import ConflictError, ValidationError
from engram.store import Store
from tests.store.replicas import converge
from tests.support.bench_scripts import load

planted = load("planted")


@pytest.fixture
def synthetic(store: Store):
    plan = planted.build()
    store.import_data(plan.document)
    return store, plan


def merged_groups(report) -> list[list[str]]:
    return [[s.sync_id for s in step.sources] for step in report.merges if step.status == "merged"]


def live_keys(store: Store) -> set[str]:
    return {
        r[0] for r in store.db.rows("SELECT sync_id FROM observations WHERE deleted_at IS NULL")
    }


def test_consolidation_merges_exactly_the_planted_duplicates(synthetic, capsys) -> None:
    store, plan = synthetic
    before = live_keys(store)
    report = store.consolidate()
    figures = planted.score(plan, merged_groups(report))
    with capsys.disabled():
        print(
            f"\nconsolidation of the planted store: precision {figures['precision']:.3f}, "
            f"recall {figures['recall']:.3f} ({figures['pairs_found']} pairs merged, "
            f"{figures['pairs_planted']} planted)"
        )
    assert figures["precision"] == 1.0 and figures["recall"] == 1.0
    assert report.merged == len(plan.duplicate_keys)
    assert report.merged_into == len(plan.duplicates)
    # Trivia archived, the pin kept although it is trivia and a near-copy of trivia.
    archived = {a.memory.sync_id for a in report.archives if a.status == "archived"}
    assert archived == set(plan.trivia)
    assert plan.pinned in live_keys(store) and report.pinned_kept == 1
    # Every change is accounted for: the live set lost exactly what the report names.
    merged_into = {step.merged.sync_id for step in report.merges}
    assert live_keys(store) == (before - plan.duplicate_keys - set(plan.trivia)) | merged_into
    assert report.processed == len(before) and report.rescored == len(before)


def test_each_merged_memory_keeps_every_distinct_fact_and_links_its_sources(synthetic) -> None:
    store, _plan = synthetic
    report = store.consolidate()
    for step in report.merges:
        merged = store.get_observation(step.merged.id)
        sources = [store.get_observation(s.id, include_deleted=True) for s in step.sources]
        for source in sources:
            assert source.delete_reason == "archived" and source.superseded_by == merged.sync_id
            assert source.valid_to is not None
            for line in source.content.splitlines():  # the extra fact a copy carried survives
                if line in planted.EXTRA_FACTS:
                    assert line in merged.content
        # Its validity starts where its sources' ends: one answer for every moment.
        assert merged.valid_from is None and {s.valid_to for s in sources} == {merged.created_at}
        assert merged.duplicate_count == len(sources)
        assert merged.importance > max(s.importance for s in step.sources)  # links and recency


def test_the_merged_key_comes_from_the_sources_so_two_machines_agree(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    plan = planted.build(duplicated=6, trivia=2)
    a.import_data(plan.document)
    b.import_data(plan.document)
    report_a, report_b = a.consolidate(), b.consolidate()
    keys_a = sorted(step.merged.sync_id for step in report_a.merges)
    assert keys_a == sorted(step.merged.sync_id for step in report_b.merges)
    converge([a, b])
    assert a.canonical_export() == b.canonical_export()
    assert len(live_keys(a)) == len(live_keys(b))


def test_a_dry_run_changes_nothing_and_plans_what_a_run_then_does(synthetic) -> None:
    store, _plan = synthetic
    store.search("redis")  # a pending read: a dry run must not fold it either
    store.db.conn.execute("UPDATE observations SET importance = 0.5")  # stale stored scores
    state = (
        store.canonical_export(),
        store.journal.count_pending("x"),
        store.db.rows("SELECT id, importance, access_count FROM observations ORDER BY id"),
        store.access.pending_bytes(),
    )
    dry = store.consolidate(dry_run=True)
    assert state == (
        store.canonical_export(),
        store.journal.count_pending("x"),
        store.db.rows("SELECT id, importance, access_count FROM observations ORDER BY id"),
        store.access.pending_bytes(),
    )
    assert dry.dry_run and all(step.status == "planned" for step in dry.merges)
    real = store.consolidate()
    assert merged_groups(real) == [[s.sync_id for s in step.sources] for step in dry.merges]
    assert {a.memory.sync_id for a in real.archives} == {a.memory.sync_id for a in dry.archives}
    assert (dry.merged, dry.archived) == (real.merged, real.archived)


def test_stopped_half_way_nothing_is_lost_and_the_next_run_finishes(synthetic) -> None:
    store, plan = synthetic
    before = live_keys(store)

    def stop(stage: str, done: int, total: int) -> None:
        if stage == "merged" and done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.consolidate(progress=stop)
    # Each memory is either as it was or fully merged: no source archived without its merge.
    halfway = live_keys(store)
    for group in plan.duplicates:
        gone = [key for key in group if key not in halfway]
        assert gone in ([], group)
    assert len(before - halfway) == sum(len(g) for g in plan.duplicates[:3])
    report = store.consolidate()
    assert report.merged == len(plan.duplicate_keys) - sum(len(g) for g in plan.duplicates[:3])
    assert not {key for key in live_keys(store) if key in plan.duplicate_keys}
    assert store.consolidate(dry_run=True).merged == 0  # nothing left to do


def test_max_changes_caps_a_run_and_never_splits_a_merge(synthetic) -> None:
    store, plan = synthetic
    report = store.consolidate(max_changes=5)
    done = report.merged + report.archived
    assert done <= 5 and report.over_max > 0
    for step in report.merges:
        assert step.status in ("merged", "over_max")
    rest = store.consolidate()
    assert report.merged + rest.merged == len(plan.duplicate_keys)
    assert report.archived + rest.archived == len(plan.trivia)


def test_a_memory_changed_since_the_plan_is_skipped_not_clobbered(synthetic) -> None:
    store, plan = synthetic
    first = plan.duplicates[0][0]
    target = store.get_observation_by_sync_id(first)

    def edit_meanwhile(stage: str, done: int, total: int) -> None:
        if stage == "scored":
            store.update_observation(target.id, content=target.content + "\nEdited meanwhile.")

    report = store.consolidate(progress=edit_meanwhile)
    skipped = [s for s in report.merges if s.status == "skipped"]
    assert [s.sources[0].sync_id for s in skipped] == [first]
    assert report.skipped == 1
    assert "Edited meanwhile." in store.get_observation(target.id).content  # not archived


def test_archived_and_merged_memories_can_be_restored(synthetic) -> None:
    store, _plan = synthetic
    report = store.consolidate()
    trivia = next(a.memory for a in report.archives if a.status == "archived")
    back = store.restore_observation(trivia.id)
    assert back.deleted_at is None and back.delete_reason is None
    step = report.merges[0]
    source = store.restore_observation(step.sources[0].id)
    assert source.superseded_by is None and source.valid_to is None
    merged = store.get_observation(step.merged.id)
    assert merged.deleted_at is None  # the merged memory stays; the user decides
    with pytest.raises(ConflictError, match="not deleted"):
        store.restore_observation(source.id)
    assert store.archived_observations(limit=1000)  # the rest is still listed as archived


@pytest.mark.parametrize(
    ("options", "field"),
    [({"threshold": 1.5}, "threshold"), ({"threshold": math.nan}, "threshold"),
     ({"threshold": "x"}, "threshold"), ({"similarity": 0}, "similarity"),
     ({"similarity": 2}, "similarity"), ({"max_changes": 0}, "max"),
     ({"max_changes": 2.5}, "max"), ({"max_changes": True}, "max")],
)  # fmt: skip
def test_bad_options_are_refused_before_anything_changes(synthetic, options, field) -> None:
    store, _ = synthetic
    before = store.canonical_export()
    with pytest.raises(ValidationError, match=field):
        store.consolidate(**options)
    assert store.canonical_export() == before


def test_one_project_is_consolidated_alone(synthetic) -> None:
    store, plan = synthetic
    project = store.get_observation_by_sync_id(plan.duplicates[0][0]).project
    report = store.consolidate(project)
    assert report.merges and {step.project for step in report.merges} == {project}
    assert {a.project for a in report.archives} <= {project}


class FakeModel:
    """An LLM provider (engram.ingest.provider.LLMProvider) that answers from a script."""

    name = "fake:model"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.prompts: list[str] = []

    def complete(self, system: str, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.fail:
            from engram.ingest.provider import ProviderError

            raise ProviderError("the model is down")
        return "Merged by the model."


def test_an_llm_may_write_the_merged_text_and_a_failure_keeps_the_plain_merge(make_store) -> None:
    plan = planted.build(duplicated=3, trivia=0)
    a, b = make_store("a"), make_store("b")
    a.import_data(plan.document)
    b.import_data(plan.document)
    model = FakeModel()
    report = a.consolidate(merge_provider=model)
    assert report.merge_provider == "fake:model" and len(model.prompts) == 3
    assert a.get_observation(report.merges[0].merged.id).content == "Merged by the model."
    down = b.consolidate(merge_provider=FakeModel(fail=True))
    assert len(down.warnings) == 3 and "kept the plain merge" in down.warnings[0]
    assert b.get_observation(down.merges[0].merged.id).content != "Merged by the model."


PARAPHRASES = [
    ("Staging DB out of connections",
     "The staging database ran out of connections; we raised max_connections to 200 in "
     "postgresql.conf."),
    ("Postgres connection limit on staging",
     "Postgres on staging hit its connection cap, so the limit in the server config went up "
     "to 200."),
    ("Frontend bundle too large",
     "The JavaScript bundle grew past 2 MB; we split vendor code and lazy-load the charts page."),
]  # fmt: skip


def test_with_the_semantic_extra_stored_vectors_find_duplicates_in_other_words(
    store: Store,
) -> None:
    from engram import semantic

    if not semantic.available():
        pytest.skip(semantic.ENABLE_HINT)
    for title, content in PARAPHRASES:
        store.add_observation(title=title, content=content, project="acme")
    # Words alone: the two say the same thing in too few shared words.
    assert store.consolidate(dry_run=True).merged == 0
    store.vectorize()  # consolidation only uses vectors that exist; it never runs the model
    report = store.consolidate()
    assert report.merged == 2
    assert {s.title for s in report.merges[0].sources} == {t for t, _ in PARAPHRASES[:2]}


def test_the_planted_stale_facts_need_review_and_answer_as_of_their_time(synthetic) -> None:
    store, plan = synthetic
    due = {o.sync_id for o in store.needs_review(limit=1000)}
    assert set(plan.stale) <= due and set(plan.trivia) <= due
    for key, (old_text, true_then, topic) in plan.stale.items():
        project = store.get_observation_by_sync_id(key).project
        saved = store.add_observation(
            title=topic, content=f"Now: not {old_text}", project=project, topic_key=topic
        )
        assert saved.action == "topic_updated" and saved.observation.sync_id == key
        words = " ".join(old_text.split()[:6])
        then = store.search(words, project=project, as_of=true_then, record_access=False)
        assert [o.content for o in then if o.sync_id == key] == [old_text]
        now = store.search(words, project=project, record_access=False)
        assert [o.content for o in now if o.sync_id == key] == [f"Now: not {old_text}"]
    report = store.consolidate()
    archived = {a.memory.sync_id for a in report.archives if a.status == "archived"}
    assert not archived & set(plan.stale)  # updated today: no longer stale
    assert not {o.sync_id for o in store.needs_review(limit=1000)} & set(plan.stale)
