"""Two-way vault sync over a real store: edits, new notes, deletions, conflicts, the trust rule
(a note never moves a memory into another project or scope), dry runs and bad notes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engram.errors import ValidationError
from engram.store import Store
from engram.vault import VaultSync
from engram.vault.state import STATE_FILE


def save(store: Store, title: str, content: str, **kw) -> int:
    kw.setdefault("project", "acme")
    return store.add_observation(title=title, content=content, **kw).observation.id


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new))


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def vault(store: Store, tmp_path: Path) -> tuple[VaultSync, Path]:
    save(store, "Database choice", "**What**: Postgres **Why**: JSONB", type="decision",
         topic_key="architecture/database")  # fmt: skip
    save(store, "Login bug", "**What**: token expired early", type="bugfix")
    save(store, "Elsewhere", "another project's memory", project="zeta")
    save(store, "My aliases", "personal notes", scope="personal")
    root = tmp_path / "vault"
    service = VaultSync(store, root)
    report = service.export("acme")
    assert sorted(e.path for e in report.written) == ["Database choice.md", "Login bug.md"]
    return service, root


def test_export_writes_one_note_per_shared_memory_and_a_second_run_changes_nothing(
    vault, store: Store
) -> None:
    service, root = vault
    assert sorted(files(root)) == [STATE_FILE, "Database choice.md", "Login bug.md"]
    before = files(root)
    report = service.sync()
    assert report.unchanged == 2 and not report.changed
    assert files(root) == before
    assert VaultSync(store, root).export("acme").unchanged == 2


def test_an_edited_note_becomes_a_journaled_edit_and_the_note_is_rewritten(
    vault, store: Store
) -> None:
    service, root = vault
    note = root / "Database choice.md"
    edit(note, "Postgres", "Postgres, SQLite locally")
    edit(note, "type: decision", "type: architecture")
    journal_before = store.db.scalar("SELECT COUNT(*) FROM sync_journal")
    report = service.sync()
    [event] = report.updated
    assert event.path == "Database choice.md" and event.detail == "content, type"
    obs = store.get_observation(event.id)
    assert "Postgres, SQLite locally" in obs.content and obs.type == "architecture"
    assert obs.topic_key == "architecture/database"
    assert store.db.scalar("SELECT COUNT(*) FROM sync_journal") == journal_before + 1
    assert service.sync().unchanged == 2  # settled: the rewritten note is the new baseline


def test_a_new_note_becomes_a_memory_of_the_vaults_project_whatever_it_claims(
    vault, store: Store
) -> None:
    service, root = vault
    (root / "ideas").mkdir()
    (root / "ideas" / "Cache warmup.md").write_text(
        "---\nproject: zeta\ntype: pattern\ntopic: perf/warmup\n---\n"
        "**What**: warm the cache on deploy\n**Why**: cold starts\n"
    )
    report = service.sync()
    [created] = report.created
    obs = store.get_observation(created.id)
    assert (obs.project, obs.scope, obs.type, obs.topic_key, obs.title) == (
        "acme", "project", "pattern", "perf/warmup", "Cache warmup",
    )  # fmt: skip
    assert obs.tool_name == "engram-vault"
    assert any("project: zeta" in w and "ignored" in w for w in report.warnings)
    text = (root / "ideas" / "Cache warmup.md").read_text()
    assert f"sync_id: {obs.sync_id}" in text and "project: acme" in text
    assert service.sync().unchanged == 3


def test_front_matter_cannot_move_a_memory_to_another_project_or_scope(vault, store: Store) -> None:
    service, root = vault
    note = root / "Login bug.md"
    edit(note, "project: acme", "project: zeta")
    edit(note, "scope: project", "scope: personal")
    edit(note, "token expired early", "token expired early (clock skew)")
    report = service.sync()
    [event] = report.updated
    obs = store.get_observation(event.id)
    assert (obs.project, obs.scope) == ("acme", "project")
    assert "clock skew" in obs.content
    assert sum("ignored" in w for w in report.warnings) == 2
    assert "project: acme" in note.read_text()


def test_a_note_naming_another_projects_memory_cannot_reach_it(vault, store: Store) -> None:
    service, root = vault
    [other] = store.recent_observations("zeta")
    (root / "Sneaky.md").write_text(
        f"---\nsync_id: {other.sync_id}\nproject: zeta\n---\n# Elsewhere\n\nrewritten!\n"
    )
    report = service.sync()
    assert store.get_observation(other.id).content == "another project's memory"
    assert any("outside this vault" in w for w in report.warnings)
    [created] = report.created  # the text is kept, as a new memory of this vault's project
    assert store.get_observation(created.id).project == "acme"


def test_a_personal_note_is_refused_by_a_shared_vault_and_nothing_is_lost(
    vault, store: Store
) -> None:
    service, root = vault
    note = root / "Secret plan.md"
    note.write_text("---\nscope: personal\n---\nonly for me\n")
    report = service.sync()
    assert not report.created
    assert any("personal" in e.detail for e in report.skipped)
    assert note.read_text() == "---\nscope: personal\n---\nonly for me\n"
    assert store.count_observations("acme", "personal") == 1


def test_a_deleted_note_is_reported_and_archived_only_when_asked(vault, store: Store) -> None:
    service, root = vault
    (root / "Login bug.md").unlink()
    report = service.sync()
    [missing] = report.missing
    assert missing.path == "Login bug.md"
    assert store.get_observation(missing.id).deleted_at is None
    assert service.sync().missing  # still reported, still kept
    report = service.sync(apply_deletes=True)
    [archived] = report.archived
    assert store.get_observation(archived.id, include_deleted=True).deleted_at is not None
    assert (root / ".archive" / "Login bug.md").is_file()
    assert "archived:" in (root / ".archive" / "Login bug.md").read_text()
    assert not service.sync().changed


def test_export_writes_a_deleted_note_again(vault, store: Store) -> None:
    _, root = vault
    (root / "Login bug.md").unlink()
    VaultSync(store, root).export("acme")
    assert (root / "Login bug.md").is_file()


def test_store_changes_reach_the_notes(vault, store: Store) -> None:
    service, root = vault
    [bug] = [o for o in store.recent_observations("acme") if o.title == "Login bug"]
    [db] = [o for o in store.recent_observations("acme") if o.title == "Database choice"]
    store.update_observation(bug.id, content="**What**: token expired early; fixed the skew")
    store.delete_observation(db.id)
    new = save(store, "Retry pattern", "exponential backoff")
    report = service.sync()
    assert {e.path for e in report.written} == {"Login bug.md", "Retry pattern.md"}
    assert [e.path for e in report.archived_notes] == [".archive/Database choice.md"]
    assert "fixed the skew" in (root / "Login bug.md").read_text()
    assert not (root / "Database choice.md").exists()
    assert f"id: {new}" in (root / "Retry pattern.md").read_text()
    store.delete_observation(bug.id, hard=True)
    report = service.sync()
    assert [e.path for e in report.removed_notes] == ["Login bug.md"]
    assert not (root / "Login bug.md").exists()


def test_both_changed_is_a_conflict_with_both_versions_and_nothing_overwritten(
    vault, store: Store
) -> None:
    service, root = vault
    note = root / "Login bug.md"
    edit(note, "token expired early", "note side")
    [bug] = [o for o in store.recent_observations("acme") if o.title == "Login bug"]
    store.update_observation(bug.id, content="**What**: store side")
    note_text = note.read_text()
    report = service.sync()
    [conflict] = report.conflicts
    assert conflict.path == "Login bug.md" and conflict.id == bug.id
    assert "note side" in conflict.note["content"] and "store side" in conflict.store["content"]
    assert note.read_text() == note_text
    assert store.get_observation(bug.id).content == "**What**: store side"
    assert service.sync().conflicts  # stays a conflict until someone chooses
    report = service.sync(prefer="note")
    assert [e.path for e in report.updated] == ["Login bug.md"]
    assert "note side" in store.get_observation(bug.id).content
    assert not service.sync().conflicts


def test_prefer_store_rewrites_the_note(vault, store: Store) -> None:
    service, root = vault
    edit(root / "Login bug.md", "token expired early", "note side")
    [bug] = [o for o in store.recent_observations("acme") if o.title == "Login bug"]
    store.update_observation(bug.id, content="**What**: store side")
    service.sync(prefer="store")
    assert "store side" in (root / "Login bug.md").read_text()
    assert store.get_observation(bug.id).content == "**What**: store side"


def test_an_edited_note_of_a_memory_deleted_elsewhere_is_a_conflict(vault, store: Store) -> None:
    service, root = vault
    edit(root / "Login bug.md", "token expired early", "still relevant")
    [bug] = [o for o in store.recent_observations("acme") if o.title == "Login bug"]
    store.delete_observation(bug.id, hard=True)
    report = service.sync()
    [conflict] = report.conflicts
    assert "deleted" in conflict.reason and (root / "Login bug.md").exists()


def test_a_dry_run_writes_nothing_anywhere(vault, store: Store) -> None:
    service, root = vault
    edit(root / "Login bug.md", "token expired early", "edited")
    (root / "New.md").write_text("a brand new note\n")
    (root / "Database choice.md").unlink()
    before_files = files(root)
    before_store = store.canonical_export()
    report = service.sync(dry_run=True, apply_deletes=True)
    assert report.dry_run and report.updated and report.created and report.archived
    assert files(root) == before_files
    assert store.canonical_export() == before_store


def test_an_unreadable_note_is_skipped_and_its_memory_left_alone(vault, store: Store) -> None:
    service, root = vault
    note = root / "Login bug.md"
    note.write_text("---\ntype: [broken\n---\n# Login bug\n\nnew text\n")
    report = service.sync()
    [skipped] = report.skipped
    assert skipped.path == "Login bug.md" and "YAML" in skipped.detail
    assert not report.updated and not report.missing
    assert note.read_text().startswith("---\ntype: [broken")
    (root / "binary.md").write_bytes(b"\xff\xfe\x00bad")
    assert any("UTF-8" in e.detail for e in service.sync().skipped)


def test_copies_and_duplicates_do_not_add_memories_twice(vault, store: Store) -> None:
    service, root = vault
    original = root / "Login bug.md"
    (root / "Login bug copy.md").write_bytes(original.read_bytes())
    report = service.sync()
    assert not report.created
    assert any("not saved twice" in e.detail for e in report.skipped)
    (root / "Topic clash.md").write_text(
        "---\ntopic: architecture/database\n---\nanother db note\n"
    )
    assert any("already the memory" in e.detail for e in service.sync().skipped)
    assert store.count_observations("acme", "project") == 2


def test_a_renamed_note_keeps_its_memory(vault, store: Store) -> None:
    service, root = vault
    (root / "Login bug.md").rename(root / "Auth - login bug.md")
    report = service.sync()
    assert not report.created and not report.missing
    state = orjson.loads((root / STATE_FILE).read_bytes())
    assert "Auth - login bug.md" in {e["path"] for e in state["notes"].values()}


def test_bad_vaults_are_clear_errors(store: Store, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not an Engram vault"):
        VaultSync(store, tmp_path / "nowhere").sync()
    VaultSync(store, tmp_path / "v").export("acme")
    with pytest.raises(ValidationError, match="vault of project 'acme'"):
        VaultSync(store, tmp_path / "v").export("zeta")
    (tmp_path / "v" / STATE_FILE).write_text("{not json")
    with pytest.raises(ValidationError, match="damaged"):
        VaultSync(store, tmp_path / "v").sync()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValidationError, match="not a directory"):
        VaultSync(store, tmp_path / "file").export("acme")


def test_personal_memories_only_when_asked(store: Store, tmp_path: Path) -> None:
    save(store, "Shared", "shared text")
    save(store, "Mine", "personal text", scope="personal")
    root = tmp_path / "v"
    VaultSync(store, root).export("acme", include_personal=True)
    assert (root / "Mine.md").is_file()
    (root / "Private idea.md").write_text("---\nscope: personal\n---\nonly mine\n")
    [created] = VaultSync(store, root).sync().created
    assert store.get_observation(created.id).scope == "personal"


def test_relations_are_written_as_wikilinks(vault, store: Store) -> None:
    """Issue 20: a memory's active relations go into its note as wikilinks to the other
    notes (``supersedes`` on the successor, ``superseded_by`` on the memory it replaced)."""
    service, root = vault
    [database, login] = sorted(store.recent_observations("acme", "project"), key=lambda o: o.id)
    store.relate(database.id, login.id, "supersedes")
    service.sync()
    assert "[[Login bug]]" in (root / "Database choice.md").read_text()
    note = (root / "Login bug.md").read_text()
    assert "superseded_by" in note and "[[Database choice]]" in note


def test_relations_come_from_the_notes_own_project(vault, store: Store) -> None:
    """A key is a memory only within its project: another project's memories with the same
    keys (and a relation between them there) put nothing in this vault's notes."""
    service, root = vault
    [database, login] = sorted(store.recent_observations("acme", "project"), key=lambda o: o.id)
    later = "2099-01-01 00:00:00"

    def twin(obs) -> dict:
        return {"sync_id": obs.sync_id, "session_id": "z-1", "type": "manual",
                "title": f"zeta {obs.title}", "content": "zeta", "project": "zeta",
                "scope": "project", "created_at": later, "updated_at": later}  # fmt: skip

    document = {
        "version": "0.2.0", "exported_at": later,
        "sessions": [{"id": "z-1", "project": "zeta", "directory": "/z", "started_at": later}],
        "observations": [twin(database), twin(login)], "prompts": [],
        "relations": [{"source_id": login.sync_id, "target_id": database.sync_id,
                       "relation": "supersedes", "project": "zeta", "judgment_status": "judged",
                       "created_at": later, "updated_at": later}],
    }  # fmt: skip
    result = store.import_data(document)
    assert result.relations_imported == 1
    service.sync()
    assert "superseded_by" not in (root / "Database choice.md").read_text()
    assert "supersedes" not in (root / "Login bug.md").read_text()
