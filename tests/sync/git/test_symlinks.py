"""Issue 12, hole 5: symbolic links inside ``.engram/`` (git checks them out as links) are
refused with a clear error, and nothing is ever created, renamed or deleted outside
``.engram/`` — by export, import or status."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engram.errors import ValidationError
from engram.store import Store
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from tests.support import run_engram
from tests.support.sync_git import export, import_
from tests.sync.git import hostile
from tests.sync.git.clones import Clone


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and mtime: any change shows."""
    found = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(base) / name
            stat = os.lstat(path)
            found[str(path.relative_to(folder))] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the sync directory, with a stale-looking temp file and a chunk."""
    folder = tmp_path / "outside"
    (folder / "chunks").mkdir(parents=True)
    (folder / ".manifest.json.abc.tmp").write_text("precious")
    (folder / "chunks" / ".x.jsonl.gz.1.tmp").write_text("precious")
    (folder / "manifest.json").write_text('{"version": 2, "chunks": []}')
    return folder


def ready(store: Store, sync_dir: SyncDir) -> None:
    store.add_observation(title="One", content="first", project="acme")
    export(store, sync_dir, ["acme"])
    store.add_observation(title="Two", content="pending export", project="acme")


@pytest.mark.parametrize(
    "name,target",
    [
        (".", "."),  # .engram itself
        ("chunks", "chunks"),
        ("sync.lock", "owned.lock"),
        ("manifest.json", "manifest.json"),
        (".gitignore", "gitignore"),
        ("config.json", "config.json"),
        ("chunks/.evil.jsonl.gz.1.tmp", ".manifest.json.abc.tmp"),
        ("log", "chunks"),
        ("log/index.jsonl", "manifest.json"),
        ("log/.evil.jsonl.gz.1.tmp", ".manifest.json.abc.tmp"),
    ],
)
def test_links_inside_the_directory_are_refused(
    name: str, target: str, store: Store, sync_dir: SyncDir, outside: Path
) -> None:
    ready(store, sync_dir)
    link = sync_dir.path if name == "." else sync_dir.path / name
    if name == ".":
        os.rename(sync_dir.path, outside / "was-engram")
    elif link.is_dir():
        os.rename(link, outside / "was-chunks")
    elif link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / target)
    before = snapshot(outside)
    sync = GitSync(store, sync_dir)
    for action in (
        lambda: sync.export(projects=["acme"]),
        sync.import_chunks,
        sync.status,
        lambda: sync.bind("other"),
        sync.accept_config,
    ):
        with pytest.raises(ValidationError, match=r"is a symbolic link.*refused"):
            action()
    assert snapshot(outside) == before


def test_a_chunk_file_that_is_a_link_is_refused_by_name(
    make_store, sync_dir: SyncDir, outside: Path, tmp_path: Path
) -> None:
    alice, bob = make_store("alice"), make_store("bob")
    ready(alice, sync_dir)
    good = export(alice, sync_dir, ["acme"]).chunks[0].id
    # a valid chunk lives outside; a link with its name points there
    planted = hostile.write_chunk(
        outside, [hostile.observation("obs-outside000001", project="acme", title="Outside")]
    )
    (sync_dir.log_dir / f"{planted}.jsonl.gz").symlink_to(outside / "log" / f"{planted}.jsonl.gz")
    # and one under the Go tool's folder, as a Go chunk would be named
    sync_dir.chunks_dir.mkdir()
    (sync_dir.chunks_dir / "0badf00d.jsonl.gz").symlink_to(outside / "log" / f"{planted}.jsonl.gz")
    before = snapshot(outside)
    report = import_(bob, sync_dir)
    assert good in report.chunks_imported
    assert sorted((f.chunk, "symbolic link" in f.reason) for f in report.failures) == sorted(
        [(planted, True), ("0badf00d", True)]
    )
    assert {o.title for o in bob.recent_observations(limit=10)} == {"One", "Two"}
    status = GitSync(bob, sync_dir).status()
    assert any(p.chunk == planted and "symbolic link" in p.reason for p in status.problems)
    assert export(alice, sync_dir, ["acme"]).nothing_new
    assert snapshot(outside) == before


@pytest.mark.parametrize("name", ["chunks", "sync.lock"])
def test_a_committed_link_never_writes_outside_the_clone(world, name: str) -> None:
    """Through git: mallory commits ``.engram/chunks`` (or ``sync.lock``) as a link to a
    directory beside the victim's clone; the victim's export and import refuse it."""
    root, remote, env = world
    mallory = Clone(root, "mallory", remote, env)
    (mallory.path / ".engram").mkdir()
    (mallory.path / ".engram" / name).symlink_to(Path("..") / ".." / "victim-outside" / name)
    mallory.git("add", ".engram")
    mallory.git("commit", "-q", "-m", "a link")
    mallory.git("push", "-q")

    victim = Clone(root, "victim", remote, env)
    assert (victim.path / ".engram" / name).is_symlink()
    outside = root / "victim-outside"
    (outside / "chunks").mkdir(parents=True)
    before = snapshot(outside)
    victim.save("Mine", "**What**: stays home")
    for args in (("sync",), ("sync", "--import"), ("sync", "--status")):
        done = run_engram(*args, data_dir=victim.data, cwd=victim.path, env=env)
        assert done.returncode == 1, done.stdout
        assert "is a symbolic link" in done.stderr and "refused" in done.stderr
    assert snapshot(outside) == before
