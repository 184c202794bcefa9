"""``engram sync`` as a user runs it: texts, ``--json``, exit codes, where ``.engram/`` goes,
and progress bars only on a terminal."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from engram.settings import Config
from engram.store import Store
from engram.sync.git.gitdir import SyncDir, locate
from tests.support import run_engram, run_on_terminal
from tests.support.sync_git import synthetic_records


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "acme"
    path.mkdir()
    git("init", "-q", cwd=path)
    (path / "src").mkdir()
    return path


def test_export_import_status_texts(repo: Path, tmp_path: Path) -> None:
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    saved = run_engram(
        "save", "Cache policy", "**What**: LRU", "--project", "acme", data_dir=alice, cwd=repo
    )
    assert saved.returncode == 0, saved.stderr
    first = run_engram("sync", data_dir=alice, cwd=repo / "src")  # from a subdirectory
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert out.startswith('Exporting memories for project "acme"...\nCreated chunk ')
    assert "  Sessions:     1\n  Observations: 1\n  Prompts:      0\n" in out
    assert "Add to git:\n  git add " in out and 'git commit -m "sync engram memories"' in out
    chunks = list((repo / ".engram" / "log").glob("*.jsonl.gz"))  # at the repository top
    assert len(chunks) == 1 and chunks[0].name[:16] in out
    assert not (repo / ".engram" / "chunks").exists()  # the Go tool's folder: not ours
    assert not (repo / ".engram" / "manifest.json").exists()

    again = run_engram("sync", data_dir=alice, cwd=repo)
    assert "Nothing new to sync" in again.stdout and again.returncode == 0

    status = run_engram("sync", "--status", data_dir=bob, cwd=repo)
    assert status.returncode == 0, status.stderr
    assert "  Local chunks:    0\n  Remote chunks:   1\n  Pending import:  1\n" in status.stdout
    # (issue 17: counts in the right number, and the project's own memories: none imported yet)
    assert (
        '1 chunk, 0 memories of project "acme" imported so far (all projects: 1 memory)'
        " — contributors:" in status.stdout
    )

    imported = run_engram("sync", "--import", data_dir=bob, cwd=repo)
    assert imported.returncode == 0, imported.stderr
    assert "Imported 1 new chunk from .engram/" in imported.stdout
    assert "Already up to date — no new chunks to import.\n(1 chunk already imported)" in (
        run_engram("sync", "--import", data_dir=bob, cwd=repo).stdout
    )
    found = run_engram("search", "LRU", "--json", data_dir=bob, cwd=repo)
    assert orjson.loads(found.stdout)[0]["title"] == "Cache policy"

    data = orjson.loads(run_engram("sync", "--status", "--json", data_dir=bob, cwd=repo).stdout)
    assert data["chunks"] == 1 and data["applied"] == 1 and data["pending_import"] == []
    assert data["index"] == "ok" and data["manifest"] == "missing"
    assert data["target"].startswith("git:")


def test_json_output_and_all_projects(repo: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    for project in ("acme", "other"):
        run_engram("save", f"{project} note", "text", "--project", project, data_dir=data_dir)
    done = run_engram("sync", "--all", "--json", data_dir=data_dir, cwd=repo)
    report = orjson.loads(done.stdout)
    assert report["projects"] is None and report["observations"] == 2
    assert report["nothing_new"] is False and len(report["chunks"]) == 1
    assert set(report) >= {
        "directory",
        "target",
        "sessions",
        "prompts",
        "mutations",
        "problems",
        "manifest",
        "index_rebuilt",
        "go_compat",
        "go_chunks",
    }


def test_bad_usage_and_bad_chunks_exit_non_zero(repo: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    both = run_engram("sync", "--import", "--status", data_dir=data_dir, cwd=repo)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    cloud = run_engram("sync", "--cloud", data_dir=data_dir, cwd=repo)  # no server configured
    assert cloud.returncode == 1 and "cloud sync is not configured" in cloud.stderr
    missing = run_engram("sync", "--import", "--dir", str(tmp_path / "nope"), data_dir=data_dir)
    assert missing.returncode == 1 and "no sync directory at" in missing.stderr

    run_engram("save", "Note", "text", "--project", "acme", data_dir=data_dir, cwd=repo)
    run_engram("sync", data_dir=data_dir, cwd=repo)
    chunk = next((repo / ".engram" / "log").glob("*.jsonl.gz"))
    chunk.write_bytes(chunk.read_bytes()[:-20])
    failed = run_engram("sync", "--import", data_dir=tmp_path / "other", cwd=repo)
    assert failed.returncode == 1
    assert f"  {chunk.name[:16]}: truncated" in failed.stdout
    assert "1 chunk(s) could not be imported" in failed.stderr
    as_json = run_engram("sync", "--import", "--json", data_dir=tmp_path / "other", cwd=repo)
    assert as_json.returncode == 1
    assert orjson.loads(as_json.stdout)["failures"][0]["chunk"] == chunk.name[:16]


def test_sync_directory_is_at_the_main_worktree(repo: Path, tmp_path: Path) -> None:
    git(
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@e",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
        cwd=repo,
    )
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", str(linked), cwd=repo)
    assert locate(cwd=linked) == SyncDir(repo.resolve() / ".engram")
    assert locate(cwd=repo / "src") == SyncDir(repo.resolve() / ".engram")
    assert locate("custom", cwd=repo) == SyncDir(repo / "custom")
    outside = tmp_path / "plain"
    outside.mkdir()
    assert locate(cwd=outside) == SyncDir(outside.resolve() / ".engram")


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(repo: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.apply_mutations(synthetic_records(3000, size=50), source="seed:test")
    code, quiet = run_on_terminal(
        ["sync", "--project", "acme", "--quiet", "--dir", "q"], data_dir, repo
    )
    assert code == 0 and "Exporting mutations" not in quiet
    code, shown = run_on_terminal(["sync", "--project", "acme", "--dir", "shown"], data_dir, repo)
    assert code == 0 and "Exporting mutations" in shown
    piped = run_engram("sync", "--project", "acme", "--dir", "piped", data_dir=data_dir, cwd=repo)
    assert "Exporting mutations" not in piped.stderr
    code, shown = run_on_terminal(["sync", "--import", "--dir", "shown"], tmp_path / "d2", repo)
    assert code == 0 and "Importing chunks" in shown


def test_nothing_to_export_creates_nothing_and_names_unknown_projects(
    repo: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    run_engram("save", "Note", "text", "--project", "acme", data_dir=data_dir, cwd=repo)
    typo = run_engram("sync", "--project", "acmee", data_dir=data_dir, cwd=repo)
    assert typo.returncode == 0
    assert 'no memories of project "acmee" (projects here: acme;' in typo.stdout
    assert not (repo / ".engram").exists()  # nothing to write: no directory either


def test_go_compat_on_off_and_bad_uses(repo: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    run_engram("save", "Note", "for Go teammates", data_dir=data_dir, cwd=repo)
    on = run_engram("sync", "--go-compat", "on", data_dir=data_dir, cwd=repo)
    assert on.returncode == 0, on.stderr
    assert "Go compat on: every engram sync here also writes for Go teammates" in on.stdout
    assert "For Go teammates: Go-format chunk " in on.stdout  # one chunk, in the right number
    assert "creations only" in on.stdout
    assert len(list((repo / ".engram" / "chunks").glob("????????.jsonl.gz"))) == 1
    status = run_engram("sync", "--status", data_dir=data_dir, cwd=repo)
    assert "Go compat:       on" in status.stdout
    run_engram("save", "Later", "remembered setting", data_dir=data_dir, cwd=repo)
    again = run_engram("sync", "--json", data_dir=data_dir, cwd=repo)
    assert len(orjson.loads(again.stdout)["go_chunks"]) == 1  # the setting, remembered
    off = run_engram("sync", "--go-compat", "off", data_dir=data_dir, cwd=repo)
    assert "Go compat off" in off.stdout
    assert (
        "Go compat:       off" in run_engram("sync", "--status", data_dir=data_dir, cwd=repo).stdout
    )
    for wrong in (["--import"], ["--status"], ["--cloud"]):
        bad = run_engram("sync", "--go-compat", *wrong, data_dir=data_dir, cwd=repo)
        assert bad.returncode != 0 and "--go-compat" in bad.stderr, (wrong, bad.stderr)
