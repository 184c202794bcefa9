"""Project detection from a directory (real git repositories) and name normalization."""

import subprocess
from pathlib import Path

import orjson
import pytest

from engram.bindings import Bindings
from engram.project import detect_project, normalize_project, repo_name_from_url


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@x",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@x",
            "HOME": str(cwd),
            "PATH": "/usr/bin:/bin",
        },
    )


def make_repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    if remote:
        git("remote", "add", "origin", remote, cwd=path)
    return path


@pytest.mark.parametrize(
    ("raw", "expected", "warns"),
    [
        ("Acme", "acme", True),
        ("acme", "acme", False),
        (" my--app__x ", "my-app_x", True),
        ("", "", False),
    ],
)
def test_normalization(raw: str, expected: str, warns: bool) -> None:
    name, warning = normalize_project(raw)
    assert name == expected
    assert (warning is not None) == warns
    if warns:
        assert f'"{raw}" → "{expected}"' in warning


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:org/Widget.git",
        "https://github.com/org/Widget",
        "https://h/org/Widget.git/",
        "/srv/git/Widget.git",
    ],
)
def test_repo_name_from_remote_urls(url: str) -> None:
    assert repo_name_from_url(url) == "Widget"


def test_git_remote_wins_over_directory_name(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "checkout-dir", "git@github.com:org/Widget.git")
    (repo / "src" / "deep").mkdir(parents=True)
    found = detect_project(repo / "src" / "deep")
    assert (found.project, found.source, found.path) == ("widget", "git_remote", str(repo))


def test_git_root_name_without_remote(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "Gadget")
    found = detect_project(repo)
    assert (found.project, found.source) == ("gadget", "git_root")


def test_config_file_counts_once_accepted_here(tmp_path: Path, capsys) -> None:
    """A committed config.json is a suggestion: until this machine accepts that name, detection
    keeps to the remote (and says once on stderr that a suggestion waits); then it wins."""
    bindings = Bindings(tmp_path / "data")
    repo = make_repo(tmp_path / "repo", "https://x/org/remote-name.git")
    (repo / ".engram").mkdir()
    (repo / ".engram" / "config.json").write_bytes(orjson.dumps({"project_name": "Chosen"}))
    waiting = detect_project(repo, bindings=bindings)
    assert (waiting.project, waiting.source) == ("remote-name", "git_remote")
    assert (
        waiting.suggested_project == "chosen" and "engram sync --accept-config" in waiting.warning
    )
    detect_project(repo / "src", bindings=bindings)  # said once per process, not per call
    assert capsys.readouterr().err.count('suggests project "chosen"') == 1

    bindings.accept_config(repo / ".engram", "chosen")
    assert detect_project(repo / ".engram", bindings=bindings).project == "chosen"
    assert detect_project(repo, bindings=bindings).source == "config"
    # a later commit naming another project is a new suggestion, not covered by the acceptance
    (repo / ".engram" / "config.json").write_bytes(orjson.dumps({"project_name": "elsewhere"}))
    assert detect_project(repo, bindings=bindings).project == "remote-name"


def test_a_config_file_behind_a_symlink_is_never_read(tmp_path: Path) -> None:
    bindings = Bindings(tmp_path / "data")
    repo = make_repo(tmp_path / "repo", "https://x/org/remote-name.git")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config.json").write_bytes(b'{"project_name": "linked"}')
    (repo / ".engram").symlink_to(tmp_path / "elsewhere")
    bindings.accept_config(tmp_path / "elsewhere", "linked")
    found = detect_project(repo, bindings=bindings)
    assert (found.project, found.suggested_project) == ("remote-name", "")


def test_linked_worktree_resolves_to_the_main_checkout(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "mainrepo")
    (repo / "f").write_text("x")
    git("add", "f", cwd=repo)
    git("commit", "-qm", "init", cwd=repo)
    git("worktree", "add", "-q", str(tmp_path / "feature-wt"), cwd=repo)
    found = detect_project(tmp_path / "feature-wt")
    assert (found.project, found.source, found.path) == ("mainrepo", "git_root", str(repo))


def test_single_child_repository_is_promoted(tmp_path: Path) -> None:
    make_repo(tmp_path / "parent" / "only-child")
    (tmp_path / "parent" / "notes").mkdir()
    found = detect_project(tmp_path / "parent")
    assert (found.project, found.source) == ("only-child", "git_child")
    assert "only-child" in found.warning


def test_several_child_repositories_are_ambiguous(tmp_path: Path) -> None:
    make_repo(tmp_path / "ws" / "alpha")
    make_repo(tmp_path / "ws" / "beta")
    make_repo(tmp_path / "ws" / "node_modules")  # noise directories are ignored
    found = detect_project(tmp_path / "ws")
    assert found.ambiguous and found.project == ""
    assert found.available_projects == ["alpha", "beta"]


def test_plain_directory_uses_its_name(tmp_path: Path) -> None:
    plain = tmp_path / "Just A Dir"
    plain.mkdir()
    found = detect_project(plain)
    assert (found.project, found.source) == ("just a dir", "dir_basename")


def test_a_suggested_name_cannot_drive_the_terminal(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path / "repo", "https://x/org/remote-name.git")
    (repo / ".engram").mkdir()
    evil = "acme\x1b]52;c;cm0gLXJmIH4=\x07"
    (repo / ".engram" / "config.json").write_bytes(orjson.dumps({"project_name": evil}))
    found = detect_project(repo, bindings=Bindings(tmp_path / "data"))
    assert found.project == "remote-name"
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]52" in err
