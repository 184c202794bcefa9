"""What the real Go tool wrote (``tests/fixtures/go``, see its README), read by Engram without
the Go binary: its chunks and the manifest two Go users left with ``CONFLICT (add/add)``
markers, its database upgraded in place, and its JSON export imported twice."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.go_writer import go_export
from engram.sync.git.manifest import read_manifest
from engram.sync.git.sync import GitSync
from tests.support import run_engram

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "go"
LIVE = {"Auth uses <JWT>", "Flaky login test", "Rate limits"}  # and "Dropped idea", deleted


def repository(tmp_path: Path) -> SyncDir:
    """alice's committed ``.engram/`` in a checkout whose project is ``acme-api``."""
    target = tmp_path / "acme-api" / ".engram"
    shutil.copytree(FIXTURES / "dot-engram", target)
    return SyncDir(target)


def memories(store: Store, project: str = "acme-api") -> dict[str, dict]:
    """Live memories of ``project`` by title; fails on a duplicate title."""
    document = orjson.loads(store.canonical_export(projects=[project]))
    live = [o for o in document["observations"] if o["deleted_at"] is None and o["content"]]
    titles = [o["title"] for o in live]
    assert len(titles) == len(set(titles)), f"duplicates: {sorted(titles)}"
    return {o["title"]: o for o in live}


def test_go_chunks_land_in_the_repository_project_and_the_manifest_is_repaired(
    make_store, tmp_path: Path
) -> None:
    sync_dir = repository(tmp_path)
    store = make_store("ours")
    before = read_manifest(sync_dir.manifest_path.read_bytes())
    assert before.state == "conflicted" and [e.created_by for e in before.entries.values()] == [
        "alice",
        "carol",
    ]
    report = GitSync(store, sync_dir, author="bob").import_chunks()
    assert report.failures == [] and len(report.chunks_imported) == 2
    assert set(memories(store)) == LIVE  # from work-copy and api alike
    session = store.get_session("go-alice-1")
    assert session.project == "acme-api" and session.summary.startswith("## Goal")
    assert [p.content for p in store.recent_prompts("acme-api")] == [
        "why JWT & not server sessions?"
    ]
    assert memories(store)["Auth uses <JWT>"]["topic_key"] == "architecture/auth"
    # the manifest is what the Go tool writes, both entries kept with who wrote them and when
    after = sync_dir.manifest_path.read_bytes()
    assert report.manifest.repaired == "conflicted"
    repaired = read_manifest(after)
    assert repaired.state == "ok" and list(repaired.entries.values()) == list(
        before.entries.values()
    )
    alice = (FIXTURES / "manifest-alice.json").read_bytes()
    assert after.startswith(alice[: alice.rindex(b"    }") + 5])  # her entry, byte for byte
    assert b"<<<<<<<" not in after and not after.endswith(b"\n")  # as the Go tool writes it
    # importing again adds nothing
    again = GitSync(store, sync_dir, author="bob").import_chunks()
    assert again.chunks_imported == [] and sync_dir.manifest_path.read_bytes() == after


def test_two_machines_reading_the_go_chunks_agree(make_store, tmp_path: Path) -> None:
    first, second = make_store("one"), make_store("two")
    GitSync(first, repository(tmp_path / "a")).import_chunks()
    GitSync(second, repository(tmp_path / "b")).import_chunks()
    assert first.canonical_export() == second.canonical_export()


def test_upgraded_go_database_merged_into_the_repository_project_meets_its_chunks(
    tmp_path: Path,
) -> None:
    """alice upgrades: her Go database is migrated in place (backup kept), her memories keep
    the clone's name until she merges it into the repository's project, after which the
    repository's chunks (hers among them) add nothing twice."""
    data = tmp_path / "alice-data"
    data.mkdir()
    shutil.copyfile(FIXTURES / "engram.db", data / "engram.db")
    with Store.open(config=Config(data_dir=data)) as store:
        assert list(data.glob("engram.db.go-backup-*"))
        assert set(memories(store, "work-copy")) == {"Auth uses <JWT>", "Flaky login test"}
        store.merge_projects(["work-copy"], "acme-api")
        report = GitSync(store, repository(tmp_path), author="alice").import_chunks()
        assert report.failures == []
        assert set(memories(store)) == LIVE
        assert not memories(store, "work-copy")


def test_the_go_export_imported_twice_or_on_two_machines_adds_nothing(
    make_store, tmp_path: Path
) -> None:
    document = orjson.loads((FIXTURES / "export.json").read_bytes())
    assert all("sync_id" not in o for o in document["observations"])  # the Go tool has none
    store = make_store("ours")
    first = store.import_data(document)
    assert (first.observations_imported, first.prompts_imported) == (3, 1)
    again = store.import_data(document)
    assert (again.observations_imported, again.prompts_imported, again.sessions_imported) == (
        0,
        0,
        0,
    )
    other = make_store("other")
    other.import_data(document)
    assert other.canonical_export() == store.canonical_export()
    assert set(memories(store, "work-copy")) == {"Auth uses <JWT>", "Flaky login test"}


def test_the_cli_import_says_nothing_was_added_the_second_time(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = str(FIXTURES / "export.json")
    first = run_engram("import", path, "--json", data_dir=data)
    assert first.returncode == 0, first.stderr
    assert orjson.loads(first.stdout)["observations_imported"] == 3
    second = run_engram("import", path, "--json", data_dir=data)
    assert second.returncode == 0, second.stderr
    assert orjson.loads(second.stdout)["observations_imported"] == 0


@pytest.mark.parametrize("section", ["sessions", "observations", "prompts"])
def test_our_go_export_has_the_go_tools_shapes(make_store, section: str) -> None:
    """``engram export --format go`` of what came from the Go tool's export gives back its
    rows field for field, in its field order (plus ``sync_id``, which the Go tool ignores)."""
    raw = (FIXTURES / "export.json").read_bytes()
    theirs = orjson.loads(raw)
    store = make_store("ours")
    store.import_data(theirs)
    ours = orjson.loads(go_export(store.export_data("work-copy")))
    assert list(ours) == list(theirs)
    for mine, go in zip(ours[section], theirs[section], strict=True):
        mine.pop("sync_id", None)
        assert list(mine) == list(go) and mine == go


def test_the_way_back_exports_only_what_the_backup_lacks(tmp_path: Path) -> None:
    """After the upgrade, ``engram export --format go --missing-from BACKUP`` holds the
    memories written since (for ``engram-go import`` into the restored backup), not the ones
    the backup has, even after a project merge re-keyed them."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(FIXTURES / "engram.db", data / "engram.db")
    with Store.open(config=Config(data_dir=data)) as store:
        store.merge_projects(["work-copy"], "acme-api")
        store.add_observation(title="Written since", content="after the upgrade", project="x")
        store.add_prompt("and a prompt", session_id="s-new", project="x")
    [backup] = data.glob("engram.db.go-backup-*")
    out = tmp_path / "since.json"
    done = run_engram(
        "export", "--all", "--format", "go", "--missing-from", str(backup), str(out),
        data_dir=data,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = orjson.loads(out.read_bytes())
    assert [o["title"] for o in document["observations"]] == ["Written since"]
    assert [p["content"] for p in document["prompts"]] == ["and a prompt"]
    assert {s["id"] for s in document["sessions"]} == {"manual-save-x", "s-new"}
    for wrong, message in (
        (["--missing-from", str(backup)], "add --format go"),
        (["--format", "go", "--missing-from", str(out)], "not a database of the Go tool"),
        (["--format", "go", "--missing-from", str(tmp_path / "nope")], "no such file"),
    ):
        bad = run_engram("export", *wrong, data_dir=data)
        assert bad.returncode != 0 and message in bad.stderr, bad.stderr


def test_a_go_directory_in_a_subdirectory_is_imported_alone(make_store, tmp_path: Path) -> None:
    """The Go tool writes ``.engram/`` where it runs: a repository whose only Go directory is
    ``services/api/.engram`` still imports (into the repository's project), and the import
    creates nothing at the top."""
    import subprocess

    repo = tmp_path / "acme-api"
    nested = repo / "services" / "api" / ".engram"
    (nested / "chunks").mkdir(parents=True)
    shutil.copyfile(FIXTURES / "manifest-alice.json", nested / "manifest.json")
    name = "cf9ec22c.jsonl.gz"
    shutil.copyfile(FIXTURES / "dot-engram" / "chunks" / name, nested / "chunks" / name)
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "go sync"],
    ):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    store = make_store("ours")
    report = GitSync(store, SyncDir(repo / ".engram")).import_chunks()
    assert report.go_dirs == ["services/api/.engram"] and report.chunks_imported == ["cf9ec22c"]
    assert set(memories(store)) == {"Auth uses <JWT>", "Flaky login test"}
    assert not (repo / ".engram").exists()
    status = GitSync(store, SyncDir(repo / ".engram")).status()
    assert status.go_dirs == ["services/api/.engram"] and status.go_chunks == 1
