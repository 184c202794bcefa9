"""The sync directory on disk: where ``.engram/`` is, its git housekeeping files, listing its
chunk files, atomic writes, and the lock that keeps two ``engram sync`` runs from interleaving.

``.engram/`` lives at the top of the repository's main worktree (found from any subdirectory or
linked worktree), so one repository has one sync directory; outside git it is ``./.engram``.

Two tools share it (docs/git-sync.md, "The directory"). Our chunks and our union-safe index live in ``log/``; the Go
tool's ``manifest.json`` and ``chunks/`` stay the Go tool's, so a teammate still running it
never meets a file it cannot parse. Earlier versions of Engram wrote our chunks into
``chunks/``: they are still read there (and moved to ``log/`` by the next export).

Git checks symbolic links out as links, so a committer could point ``.engram``, ``log/``,
``chunks/``, ``sync.lock`` or a chunk file anywhere on a teammate's disk. Nothing here follows
one: :func:`refuse_symlinks` stops every operation on a directory whose own paths are links
(with a clear error), chunk files that are links are reported and never read, and the lock file
is opened without following links — so nothing is ever created, renamed or deleted outside
``.engram/``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engram.errors import ConflictError, ValidationError
from engram.files import TEMP_SUFFIX, write_atomic
from engram.platform import lock_file
from engram.project import find_repository
from engram.sync.git.chunk import CHUNK_FILE

SYNC_DIR_NAME = ".engram"
#: The Go tool's index and chunk folder (also where earlier versions of Engram wrote).
MANIFEST = "manifest.json"
CHUNKS = "chunks"
#: Our chunks and our index.
LOG = "log"
INDEX = "index.jsonl"
LOCK_FILE = "sync.lock"
CONFIG = "config.json"
#: The directory's own files: none of them may be a symbolic link.
OWN_PATHS = (
    CHUNKS, LOG, f"{LOG}/{INDEX}", MANIFEST, LOCK_FILE, CONFIG, ".gitignore", ".gitattributes",
)  # fmt: skip
LOCK_TIMEOUT_SECONDS = 30.0

GITIGNORE = """\
# Written by engram: files that are local to one machine and must never be committed.
*.db
*.db-shm
*.db-wal
*.lock
*.tmp
"""
UNION_LINE = f"{LOG}/{INDEX} merge=union"
GITATTRIBUTES = f"""\
# Written by engram: concurrent syncs only ever add lines to our index, and engram rewrites it
# from the chunk files anyway, so git merges it by keeping both sides instead of stopping.
# Never on manifest.json: that is the Go tool's, and a union of two JSON documents stops it.
{UNION_LINE}
{LOG}/*.jsonl.gz binary
{CHUNKS}/*.jsonl.gz binary
"""
#: What earlier versions of Engram wrote: a union merge of the Go manifest (which the Go tool
#: then cannot parse). :func:`ensure_layout` takes that line out.
OLD_UNION_LINE = "manifest.json merge=union"
OLD_GITATTRIBUTES = """\
# Written by engram: concurrent syncs only ever add lines to the manifest, and engram rebuilds
# it from the chunk files anyway, so git merges it by keeping both sides instead of stopping.
manifest.json merge=union
chunks/*.jsonl.gz binary
"""


@dataclass(frozen=True, slots=True)
class SyncDir:
    """One sync directory and the replication target it stands for."""

    path: Path

    @property
    def target(self) -> str:
        """The journal target of this directory: ``git:<real path>``."""
        return "git:" + os.path.realpath(self.path)

    @property
    def chunks_dir(self) -> Path:
        """The Go tool's chunk folder."""
        return self.path / CHUNKS

    @property
    def manifest_path(self) -> Path:
        """The Go tool's index."""
        return self.path / MANIFEST

    @property
    def log_dir(self) -> Path:
        """Our chunk folder."""
        return self.path / LOG

    @property
    def index_path(self) -> Path:
        """Our index (``log/index.jsonl``)."""
        return self.log_dir / INDEX

    def exists(self) -> bool:
        return self.path.is_dir()

    def in_repository(self) -> bool:
        """Whether git tracks the folder this directory is in (else there is nothing to add
        the chunks to: they are shared some other way, or not at all)."""
        return find_repository(self.path.parent) is not None

    def display(self) -> str:
        """The directory as a human types it: relative to the working directory when that is
        inside the project that holds it (``.engram/``, ``../.engram/``), else absolute."""
        here, path = Path.cwd().resolve(), self.path.resolve()
        if here != path.parent and path.parent not in here.parents:
            return str(path)
        return os.path.relpath(path, here) + "/"


def locate(override: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> SyncDir:
    """``--dir`` if given, else ``.engram/`` at the top of the main worktree of the repository
    containing ``cwd``, else ``cwd/.engram``."""
    here = Path(cwd if cwd is not None else Path.cwd())
    if override is not None and str(override).strip():
        path = Path(override).expanduser()
        return SyncDir(path if path.is_absolute() else here / path)
    repo = find_repository(here)
    base = repo.main_worktree if repo is not None else here
    return SyncDir(base / SYNC_DIR_NAME)


def _link_error(path: Path, what: str) -> ValidationError:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return ValidationError(
        f"{path} is a symbolic link{target}; refused: engram never follows links inside a "
        f"sync directory ({what}). Remove the link (and the commit that added it) and run again."
    )


def _is_temp_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def refuse_symlinks(sync_dir: SyncDir) -> None:
    """Raise :class:`ValidationError` if ``.engram`` itself, one of its own files
    (``chunks/``, the manifest, ``sync.lock``, ``config.json``, git's files) or a temp file is
    a symbolic link. Chunk files that are links are refused one by one by :func:`chunk_files`."""
    if sync_dir.path.is_symlink():
        raise _link_error(sync_dir.path, "the sync directory itself")
    if not sync_dir.path.is_dir():
        return
    for name in OWN_PATHS:
        if (sync_dir.path / name).is_symlink():
            raise _link_error(sync_dir.path / name, name)
    for folder in (sync_dir.path, sync_dir.chunks_dir, sync_dir.log_dir):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in os.scandir(folder):
                if _is_temp_name(entry.name) and entry.is_symlink():
                    raise _link_error(Path(entry.path), "a temp file")


def _gitattributes(current: str | None) -> str | None:
    """The ``.gitattributes`` text to write: ours when missing (or exactly what an earlier
    version wrote), else the team's file without the old manifest union line and with our
    index line; ``None`` when it needs no change."""
    if current is None or current == OLD_GITATTRIBUTES:
        return GITATTRIBUTES
    lines = current.splitlines()
    kept = [line for line in lines if line.split("#")[0].split() != OLD_UNION_LINE.split()]
    if not any(line.split("#")[0].split() == UNION_LINE.split() for line in kept):
        kept.append(UNION_LINE)
    if kept == lines:
        return None
    return "\n".join(kept) + "\n"


def ensure_layout(sync_dir: SyncDir) -> list[str]:
    """Create the directory, ``log/``, ``.gitignore`` and ``.gitattributes`` when missing
    (existing files are left as the team edited them, except that the union merge an earlier
    version set on the Go manifest is taken out). Returns the files written."""
    refuse_symlinks(sync_dir)
    if sync_dir.path.exists() and not sync_dir.path.is_dir():
        raise ValidationError(f"{sync_dir.path} exists and is not a directory")
    sync_dir.log_dir.mkdir(parents=True, exist_ok=True)
    written = []
    ignore = sync_dir.path / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, GITIGNORE.encode())
        written.append(".gitignore")
    attributes = sync_dir.path / ".gitattributes"
    try:
        current: str | None = attributes.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        current = None
    text = _gitattributes(current)
    if text is not None:
        write_atomic(attributes, text.encode())
        written.append(".gitattributes")
    return written


@dataclass(frozen=True, slots=True)
class ChunkFile:
    """A chunk file found in the directory: its id, path, and folder (``log`` or ``chunks``;
    for a Go directory elsewhere in the repository, its path relative to the repository)."""

    id: str
    path: Path
    place: str = LOG


@dataclass(slots=True)
class ChunkFiles:
    """What :func:`chunk_files` found."""

    #: chunk files, one per id (``log/`` wins over ``chunks/`` when both hold an id), by id
    files: list[ChunkFile] = field(default_factory=list)
    #: names in ``log/`` or ``chunks/`` that are not chunk files (our temp files excluded)
    strangers: list[str] = field(default_factory=list)
    #: chunk files that are symbolic links (refused: never read)
    links: list[ChunkFile] = field(default_factory=list)


def scan_folder(folder: Path, place: str, found: ChunkFiles, *, skip: tuple[str, ...] = ()) -> None:
    """Add the chunk files of one folder to ``found`` (ids already found are kept)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    known = {f.id for f in found.files} | {f.id for f in found.links}
    prefix = f"{place}/" if place else ""
    for entry in entries:
        match = CHUNK_FILE.match(entry.name)
        if match and entry.is_symlink():
            if match.group(1) not in known:
                found.links.append(ChunkFile(match.group(1), Path(entry.path), place))
        elif match and entry.is_file(follow_symlinks=False):
            if match.group(1) not in known:
                found.files.append(ChunkFile(match.group(1), Path(entry.path), place))
                known.add(match.group(1))
        elif not _is_temp_name(entry.name) and entry.name not in skip:
            found.strangers.append(prefix + entry.name)


def chunk_files(sync_dir: SyncDir) -> ChunkFiles:
    """The chunk files of ``log/`` and ``chunks/`` (any format in either), sorted by id."""
    found = ChunkFiles()
    scan_folder(sync_dir.log_dir, LOG, found, skip=(INDEX,))
    scan_folder(sync_dir.chunks_dir, CHUNKS, found)
    found.files.sort(key=lambda f: f.id)
    found.strangers.sort()
    return found


def remove_stale_temp_files(sync_dir: SyncDir) -> int:
    """Delete temp files an interrupted export left behind (call with the lock held)."""
    removed = 0
    for folder in (sync_dir.path, sync_dir.chunks_dir, sync_dir.log_dir):
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(folder):
                if _is_temp_name(entry.name):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
    return removed


@contextlib.contextmanager
def locked(
    sync_dir: SyncDir, timeout: float = LOCK_TIMEOUT_SECONDS, *, required: bool = True
) -> Iterator[None]:
    """Hold ``.engram/sync.lock`` (an OS lock, released even if the process is killed).

    ``required=False`` (imports, which only read the directory) goes on unguarded when the
    lock file cannot be created, e.g. in a read-only checkout.
    """
    refuse_symlinks(sync_dir)
    try:
        sync_dir.path.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link planted after the check above still never creates a file elsewhere.
        fd = os.open(
            sync_dir.path / LOCK_FILE,
            os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0),
            0o644,
        )
        handle = os.fdopen(fd, "a+b")
    except OSError:
        if required:
            raise
        yield
        return
    try:
        deadline = time.monotonic() + timeout
        while True:
            if lock_file(handle.fileno(), wait=False):
                break
            if time.monotonic() > deadline:
                raise ConflictError(
                    f"another engram sync is running on {sync_dir.path} "
                    f"(waited {timeout:.0f}s); try again when it is done"
                )
            time.sleep(0.1)
        yield
    finally:
        handle.close()
