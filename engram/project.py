"""Which project a directory belongs to, and how project names are normalized.

Detection reads git's own files (no subprocess, so the CLI stays fast) in the order the Go tool
uses: ``.engram/config.json`` → git ``origin`` remote → git root name → a single child
repository → ambiguous → directory name. A linked worktree resolves to its main checkout.

A committed ``.engram/config.json`` is only a *suggestion*: anyone who can push to the
repository can write one, and it must not decide where this machine's memories go. It counts
once the user accepted that exact name here (``engram sync --accept-config``, recorded by
:mod:`engram.bindings`); until then detection falls back to the remote or root and says, once
per process on stderr and in the resolution's warning, that a suggestion is waiting.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engram.errors import ValidationError

if TYPE_CHECKING:
    from engram.bindings import Bindings

NOISE_DIRS = frozenset(
    {
        "node_modules",
        "vendor",
        ".venv",
        "venv",
        "__pycache__",
        "target",
        "dist",
        "build",
        ".idea",
        ".vscode",
    }
)
CHILD_SCAN_LIMIT = 20
CHILD_SCAN_SECONDS = 0.2


def normalize_project(name: str | None) -> tuple[str, str | None]:
    """Lowercase, trim, collapse ``--`` and ``__``. Returns the name and a warning if it changed.

    ``-`` and ``_`` are not interchangeable; an empty name stays empty.
    """
    raw = name or ""
    out = raw.strip().lower()
    while "--" in out or "__" in out:
        out = out.replace("--", "-").replace("__", "_")
    warning = None
    if out != raw and raw:
        warning = f'⚠️ Project name normalized: "{raw}" → "{out}"'
    return out, warning


def project_name(name: str | None) -> str:
    """The normalized form of ``name`` without the warning."""
    return normalize_project(name)[0]


@dataclass(frozen=True, slots=True)
class GitRepository:
    """Where a directory's git repository lives."""

    worktree: Path  # top of the worktree that contains the directory
    main_worktree: Path  # top of the repository's main checkout (same for linked worktrees)
    git_dir: Path
    common_dir: Path

    def origin_url(self) -> str | None:
        config = configparser.RawConfigParser(strict=False, interpolation=None)
        try:
            config.read(self.common_dir / "config", encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            return None
        section = 'remote "origin"'
        if config.has_section(section) and config.has_option(section, "url"):
            return config.get(section, "url").strip() or None
        return None


def _read_gitdir_file(path: Path) -> Path | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return (path.parent / target).resolve() if not target.is_absolute() else target


def find_repository(start: Path) -> GitRepository | None:
    """The git repository containing ``start`` (a linked worktree maps to its main checkout)."""
    current = start.resolve()
    for directory in (current, *current.parents):
        marker = directory / ".git"
        if marker.is_dir():
            git_dir = marker
        elif marker.is_file():
            resolved = _read_gitdir_file(marker)
            if resolved is None:
                continue
            git_dir = resolved
        else:
            continue
        common_dir = git_dir
        commondir_file = git_dir / "commondir"
        if commondir_file.is_file():
            try:
                common_dir = (git_dir / commondir_file.read_text().strip()).resolve()
            except OSError:
                pass
        main = common_dir.parent if common_dir.name == ".git" else directory
        return GitRepository(directory, main, git_dir, common_dir)
    return None


_URL_TAIL = re.compile(r"[/:]([^/:]+?)(?:\.git)?/*$")


def repo_name_from_url(url: str) -> str | None:
    """``git@host:org/repo.git`` or ``https://host/org/repo`` → ``repo``."""
    match = _URL_TAIL.search(url.strip())
    if match:
        return match.group(1)
    name = Path(url.strip().rstrip("/")).name
    return name.removesuffix(".git") or None


@dataclass(slots=True)
class ProjectResolution:
    """The outcome of resolving a project, in the envelope shape agents see."""

    project: str
    source: str  # config | git_remote | git_root | git_child | ambiguous | dir_basename | …
    path: str
    cwd: str
    warning: str = ""
    available_projects: list[str] = field(default_factory=list)
    #: A ``config.json`` project that would apply if the user accepted it (else "").
    suggested_project: str = ""

    @property
    def ambiguous(self) -> bool:
        return self.source == "ambiguous"

    def to_dict(self) -> dict[str, object]:
        return {
            "project": self.project,
            "project_source": self.source,
            "project_path": self.path,
            "cwd": self.cwd,
            "available_projects": self.available_projects,
            "warning": self.warning,
        }


@dataclass(frozen=True, slots=True)
class ConfigSuggestion:
    """A ``.engram/config.json`` that names a project, found from some directory."""

    project: str  # normalized
    sync_dir: Path  # the ``.engram`` directory holding it
    base: Path  # the directory containing that ``.engram``

    def describe(self) -> str:
        return f'{self.sync_dir / CONFIG_FILE} suggests project "{self.project}"'


CONFIG_FILE = "config.json"


def read_config_suggestion(sync_dir: Path) -> ConfigSuggestion | None:
    """The project named by ``sync_dir/config.json``, if it is a real file (never through a
    symbolic link) with a non-empty ``project_name``."""
    candidate = sync_dir / CONFIG_FILE
    if sync_dir.is_symlink() or candidate.is_symlink() or not candidate.is_file():
        return None
    import orjson  # (only here: loading it costs every engram start-up a few milliseconds)

    try:
        data = orjson.loads(candidate.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    name = project_name(str(data.get("project_name") or ""))
    return ConfigSuggestion(name, sync_dir, sync_dir.parent) if name else None


def _config_project(directory: Path, stop: Path | None) -> ConfigSuggestion | None:
    """The nearest ``.engram/config.json`` project_name from ``directory`` up to ``stop``."""
    current = directory
    while True:
        found = read_config_suggestion(current / ".engram")
        if found is not None:
            return found
        if stop is None or current == stop or current.parent == current:
            return None
        current = current.parent


def find_config_suggestion(cwd: str | os.PathLike[str] | None = None) -> ConfigSuggestion | None:
    """The ``config.json`` project detection would consider for ``cwd``, accepted or not."""
    here = Path(cwd if cwd is not None else os.getcwd()).resolve()
    repo = find_repository(here)
    if repo is None:
        return _config_project(here, here)
    config = _config_project(here, repo.worktree)
    if config is None and repo.main_worktree != repo.worktree:
        config = _config_project(repo.main_worktree, repo.main_worktree)
    return config


#: Suggestions already announced on stderr by this process (once each).
_ANNOUNCED: set[tuple[str, str]] = set()


def suggestion_warning(config: ConfigSuggestion) -> str:
    return (
        f"{config.describe()}, which is not accepted on this machine, so it is not used; "
        "run `engram sync --accept-config` there to accept it"
    )


def _announce(config: ConfigSuggestion) -> None:
    key = (str(config.sync_dir), config.project)
    if key in _ANNOUNCED:
        return
    _ANNOUNCED.add(key)
    from engram.terminal import for_terminal  # the name comes from a committed file

    sys.stderr.write(f"engram: note: {for_terminal(suggestion_warning(config))}\n")


def _accepted(config: ConfigSuggestion, bindings: Bindings | None) -> bool:
    if bindings is None:
        from engram.bindings import Bindings

        bindings = Bindings.default()
    try:
        return bindings.accepted_config(config.sync_dir) == config.project
    except ValidationError:  # an unreadable bindings file accepts nothing
        return False


def _repository_project(repo: GitRepository) -> tuple[str, str]:
    url = repo.origin_url()
    if url:
        name = repo_name_from_url(url)
        if name:
            return name, "git_remote"
    return repo.main_worktree.name, "git_root"


def _child_repositories(directory: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    deadline = time.monotonic() + CHILD_SCAN_SECONDS
    examined = 0
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if examined >= CHILD_SCAN_LIMIT or time.monotonic() > deadline:
            break
        if entry.name.startswith(".") or entry.name in NOISE_DIRS:
            continue
        try:
            if not entry.is_dir():
                continue
        except OSError:
            continue
        examined += 1
        child = Path(entry.path)
        if (child / ".git").exists():
            repo = find_repository(child)
            if repo is not None:
                name, _ = _repository_project(repo)
                found.append((name, child))
    return found


def detect_project(
    cwd: str | os.PathLike[str] | None = None,
    *,
    bindings: Bindings | None = None,
    announce: bool = True,
) -> ProjectResolution:
    """Resolve the project of ``cwd`` (default: the process's working directory).

    ``bindings`` holds the accepted config suggestions (default: the data directory's);
    ``announce=False`` keeps a waiting suggestion out of stderr (it is still in ``warning``).
    """
    here = Path(cwd if cwd is not None else os.getcwd()).resolve()
    config = find_config_suggestion(here)
    if config is not None:
        if _accepted(config, bindings):
            return ProjectResolution(config.project, "config", str(config.base), str(here))
        if announce:
            _announce(config)
    found = detect_without_config(here)
    if config is not None:
        found.warning = "; ".join(w for w in (found.warning, suggestion_warning(config)) if w)
        found.suggested_project = config.project
    return found


def detect_without_config(here: Path) -> ProjectResolution:
    """The project of ``here`` from git (remote, root), child repositories or its name alone,
    never from a ``config.json``: what a repository is called whatever its files say."""
    repo = find_repository(here)
    if repo is not None:
        name, source = _repository_project(repo)
        return ProjectResolution(project_name(name), source, str(repo.main_worktree), str(here))
    children = _child_repositories(here)
    if len(children) == 1:
        name, path = children[0]
        return ProjectResolution(
            project_name(name),
            "git_child",
            str(path),
            str(here),
            warning=f"auto-promoted child repository: {path.name}",
        )
    if len(children) > 1:
        names = sorted({project_name(n) for n, _ in children})
        return ProjectResolution(
            "",
            "ambiguous",
            str(here),
            str(here),
            warning="several git repositories below the working directory; choose one",
            available_projects=names,
        )
    return ProjectResolution(
        project_name(here.name) or "unknown", "dir_basename", str(here), str(here)
    )
