"""Vault export and two-way sync between the store and a directory of Markdown notes.

* **Export** writes one note per memory of the vault's project (archived ones under
  ``.archive/``) and records each in the state file. It never overwrites a note edited since the
  last sync and never reads edits into the store: it only says what ``vault sync`` would apply.
* **Sync** does both directions. For every memory it compares the note's bytes and the memory's
  content with what the state file remembers:

  - only the note changed → its title, body, ``type`` and ``topic`` become an ordinary journaled
    edit (``Store.update_observation``), so it reaches the team on the next git or cloud sync;
  - only the memory changed (a teammate's edit arrived) → the note is rewritten;
  - both changed → a **conflict**: reported with both versions, nothing overwritten, until
    ``--prefer note`` or ``--prefer store`` says which one wins;
  - a note without a known ``sync_id`` (made by hand, or a copy) → a new memory of the vault's
    project; its front matter can never move a memory into another project or scope;
  - a deleted note → reported; the memory is archived only with ``--apply-deletes``.

``dry_run`` reports the same decisions and writes nothing: no store write, no file, no state.

Size: over 500 lines on purpose: the decision table of one two-way sync (note ↔ memory),
whose dry run must take exactly the same decisions.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from engram.errors import EngramError, NotFoundError, ValidationError
from engram.files import NEW_FILE_MODE, fsync_directory
from engram.platform import set_mode
from engram.project import normalize_project
from engram.sync.progress import ProgressFactory, no_progress
from engram.text import normalize_scope, normalize_topic_key, normalized_hash, strip_private
from engram.vault.note import (
    NoteError,
    NoteFields,
    digest,
    note_name,
    parse_note,
    render_note,
)
from engram.vault.state import NoteEntry, VaultState, load_state, save_state

if TYPE_CHECKING:
    from engram.store import Store

ARCHIVE_DIR = ".archive"
NEW_NOTE_TYPE = "manual"
VAULT_TOOL = "engram-vault"
Prefer = Literal["note", "store"]


# --- reports ---------------------------------------------------------------------------------


@dataclass(slots=True)
class NoteEvent:
    """One thing that happened (or, in a dry run, would happen) to one note."""

    path: str
    sync_id: str | None = None
    id: int | None = None
    detail: str = ""


@dataclass(slots=True)
class Conflict:
    """A note and its memory both changed since the last sync: both versions, nothing lost."""

    path: str
    sync_id: str
    id: int | None
    reason: str
    note: dict[str, Any]
    store: dict[str, Any]


@dataclass(slots=True)
class VaultReport:
    """What an export or a sync did, by kind; ``dry_run`` reports say what it would do."""

    directory: str
    project: str
    dry_run: bool = False
    written: list[NoteEvent] = field(default_factory=list)  # notes (re)written from the store
    archived_notes: list[NoteEvent] = field(default_factory=list)  # moved under .archive/
    removed_notes: list[NoteEvent] = field(default_factory=list)  # memory gone from the store
    created: list[NoteEvent] = field(default_factory=list)  # memories made from new notes
    updated: list[NoteEvent] = field(default_factory=list)  # memories edited from notes
    archived: list[NoteEvent] = field(default_factory=list)  # memories archived (deleted note)
    pending_edits: list[NoteEvent] = field(default_factory=list)  # export: edits not applied
    missing: list[NoteEvent] = field(default_factory=list)  # deleted notes, memory kept
    conflicts: list[Conflict] = field(default_factory=list)
    skipped: list[NoteEvent] = field(default_factory=list)  # unreadable or refused notes
    warnings: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def changed(self) -> bool:
        return any(
            (self.written, self.archived_notes, self.removed_notes, self.created, self.updated,
             self.archived)
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["counts"] = {key: len(value) for key, value in data.items() if isinstance(value, list)}
        return data


# --- the memories of a vault -----------------------------------------------------------------


def shown_importance(memory: dict[str, Any]) -> float | None:
    """The importance a note shows: one decimal, so scores drifting with every read and day
    (docs/importance.md) do not rewrite the note each time."""
    value = memory.get("importance")
    return None if value is None else round(float(value), 1)


def memory_hash(memory: dict[str, Any]) -> str:
    """What, in a memory, a note shows and may edit: if this changes, the note is stale."""
    fields = [
        memory.get("title"), memory.get("content"), memory.get("type"), memory.get("topic_key"),
        memory.get("project"), memory.get("scope"), bool(memory.get("deleted_at")),
        shown_importance(memory), bool(memory.get("pinned")), memory.get("relations"),
    ]  # fmt: skip
    return digest(orjson.dumps(fields, option=orjson.OPT_SORT_KEYS))


def _relations(store: Store, memory: dict[str, Any]) -> dict[str, list[str]]:
    """Relation type → target sync ids: the memory's active relations in its own project
    (docs/graph.md); a memory without any has no ``relations`` key in its front matter."""
    found: dict[str, list[str]] = {}
    for relation in store.relations_of(memory["sync_id"], project=memory["project"]):
        found.setdefault(str(relation["type"]), []).append(str(relation["target"]))
    return found


def _selection(store: Store, state: VaultState) -> dict[str, dict[str, Any]]:
    """Every memory of the vault's project (archived ones included; personal ones only when
    the vault includes them), by sync id, with relations resolved to sync ids."""
    memories: dict[str, dict[str, Any]] = {}
    scores = {
        r[0]: r[1]
        for r in store.db.rows(
            "SELECT sync_id, COALESCE(importance_override, importance) FROM observations"
            " WHERE project = ?",
            (state.project,),
        )
    }
    for row in store.export_data(state.project)["observations"]:
        if row["project"] != state.project:
            continue
        row["importance"] = scores.get(row["sync_id"])
        if row["scope"] == "personal" and not state.include_personal:
            continue
        relations = _relations(store, row)
        if relations:
            row["relations"] = relations
        memories[row["sync_id"]] = row
    return memories


# --- files -----------------------------------------------------------------------------------


@dataclass(slots=True)
class DiskNote:
    path: str
    raw: bytes
    hash: str
    fields: NoteFields | None = None
    error: str | None = None


def _scan(root: Path, *, archive: bool) -> Iterator[tuple[str, Path]]:
    """``(relative path, file)`` of every note: ``*.md`` outside hidden folders (``.obsidian``,
    ``.trash``, ``.git``…); with ``archive``, those under ``.archive/`` instead."""
    base = root / ARCHIVE_DIR if archive else root
    if not base.is_dir():
        return
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".md") and not name.startswith("."):
                path = Path(folder) / name
                yield path.relative_to(root).as_posix(), path


def _write_note(path: Path, text: str) -> None:
    """Replace ``path`` through a temp file beside it (an editor never sees half a note). Not
    fsynced one by one: the state file is written, fsynced, after all notes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    try:
        set_mode(fd, NEW_FILE_MODE)  # mkstemp makes 0600; a note is an ordinary document
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _version(fields: NoteFields | dict[str, Any]) -> dict[str, Any]:
    """The comparable shape of a note or a memory, shown for conflicts."""
    if isinstance(fields, NoteFields):
        return {"title": fields.title, "content": fields.content, "type": fields.type,
                "topic_key": fields.topic}  # fmt: skip
    return {"title": fields["title"], "content": fields["content"], "type": fields["type"],
            "topic_key": fields["topic_key"], "archived": bool(fields.get("deleted_at"))}  # fmt: skip


# --- the service -----------------------------------------------------------------------------


class VaultSync:
    """Export and sync of one vault directory over one store."""

    def __init__(
        self, store: Store, directory: str | Path, *, progress: ProgressFactory = no_progress
    ) -> None:
        self.store = store
        self.root = Path(directory).expanduser()
        self.progress = progress

    # --- entry points -----------------------------------------------------------------------

    def export(
        self, project: str, *, include_personal: bool = False, dry_run: bool = False
    ) -> VaultReport:
        """Write the notes of ``project``'s memories into the vault (creating it)."""
        name = normalize_project(project)[0]
        if not name:
            raise ValidationError("a vault needs a project: pass --project", field="project")
        if self.root.exists() and not self.root.is_dir():
            raise ValidationError(f"{self.root} exists and is not a directory")
        state = load_state(self.root)
        if state is not None and state.project != name:
            raise ValidationError(
                f"{self.root} is the vault of project {state.project!r}, not {name!r}; "
                "export into another directory"
            )
        if state is None:
            state = VaultState(name, include_personal)
        state.include_personal = include_personal or state.include_personal
        return self._run(state, dry_run=dry_run, apply_store=False)

    def sync(
        self,
        *,
        dry_run: bool = False,
        apply_deletes: bool = False,
        prefer: Prefer | None = None,
        project: str | None = None,
    ) -> VaultReport:
        """Apply note edits to the store and store changes to the notes (see the module)."""
        state = load_state(self.root)
        if state is None:
            raise ValidationError(
                f"{self.root} is not an Engram vault (no .engram-vault.json): create it with "
                "'engram vault export DIR --project P' first"
            )
        if project and normalize_project(project)[0] != state.project:
            raise ValidationError(
                f"{self.root} is the vault of project {state.project!r}, not {project!r}"
            )
        if prefer not in (None, "note", "store"):
            raise ValidationError("prefer must be 'note' or 'store'", field="prefer")
        return self._run(
            state, dry_run=dry_run, apply_store=True, apply_deletes=apply_deletes, prefer=prefer
        )

    # --- the one pass both share ------------------------------------------------------------

    def _run(
        self,
        state: VaultState,
        *,
        dry_run: bool,
        apply_store: bool,
        apply_deletes: bool = False,
        prefer: Prefer | None = None,
    ) -> VaultReport:
        self.state = state
        self.dry_run = dry_run
        self.apply_store = apply_store
        self.prefer = prefer
        self.report = VaultReport(str(self.root), state.project, dry_run=dry_run)
        self._hashes: dict[str, tuple[str, str]] = {}
        memories = _selection(self.store, state)
        self.memories = memories
        notes, archive_notes = self._read_disk()
        self.taken = {p.lower() for p in (*notes, *archive_notes)}
        self.taken.update(e.path.lower() for e in state.notes.values())
        owners, new_notes = self._claims(notes)

        keys = sorted(set(memories) | set(state.notes) | set(owners))
        with self.progress("vault", len(keys) + len(new_notes)) as advance:
            for key in keys:
                self._one(key, memories.get(key), owners.get(key), archive_notes, apply_deletes)
                advance(1)
            for note in new_notes:
                self._new_note(note)
                advance(1)
        if not dry_run:
            self.root.mkdir(parents=True, exist_ok=True)
            fsync_directory(self.root)
            save_state(self.root, state)
        return self.report

    def _read_disk(self) -> tuple[dict[str, DiskNote], dict[str, DiskNote]]:
        known = {e.path: (key, e) for key, e in self.state.notes.items()}
        notes: dict[str, DiskNote] = {}
        archive: dict[str, DiskNote] = {}
        for is_archive, target in ((False, notes), (True, archive)):
            for rel, path in _scan(self.root, archive=is_archive):
                try:
                    raw = path.read_bytes()
                except OSError as exc:
                    self.report.skipped.append(NoteEvent(rel, detail=f"unreadable: {exc}"))
                    continue
                note = DiskNote(rel, raw, digest(raw))
                target[rel] = note
                if is_archive:
                    continue
                entry = known.get(rel)
                if entry is not None and entry[1].note == note.hash:
                    continue  # unchanged since the last sync: no need to parse it
                try:
                    text = raw.decode("utf-8")
                    note.fields = parse_note(text, fallback_title=Path(rel).stem)
                except (UnicodeDecodeError, NoteError) as exc:
                    reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc
                    note.error = str(reason)
        return notes, archive

    def _claims(self, notes: dict[str, DiskNote]) -> tuple[dict[str, DiskNote], list[DiskNote]]:
        """Which note stands for which memory, and which notes are new."""
        by_path = {e.path: key for key, e in self.state.notes.items()}
        owners: dict[str, DiskNote] = {}
        new: list[DiskNote] = []
        # First the notes still at their recorded path, then moved or renamed ones.
        ordered = sorted(notes.values(), key=lambda n: (n.path not in by_path, n.path))
        for note in ordered:
            recorded = by_path.get(note.path)
            if note.error is not None:
                self.report.skipped.append(NoteEvent(note.path, recorded, detail=note.error))
                if recorded is not None:
                    owners[recorded] = note  # its memory is left alone while it is unreadable
                continue
            if note.fields is None:  # unchanged at its recorded path
                owners[recorded] = note  # type: ignore[index]
                continue
            claimed = note.fields.sync_id
            if recorded is not None and claimed in (None, recorded):
                owners[recorded] = note
            elif claimed and claimed not in owners and self._may_claim(note, claimed):
                owners[claimed] = note
            else:
                new.append(note)
        return owners, new

    def _may_claim(self, note: DiskNote, sync_id: str) -> bool:
        """A note naming a sync id stands for that memory only if the memory is in this
        vault's selection (or was); naming another project's memory gets it refused."""
        if sync_id in self.memories or sync_id in self.state.notes:
            return True
        try:
            other = self.store.get_observation_by_sync_id(sync_id)
        except NotFoundError:
            return False  # unknown here: the note becomes a new memory
        self.report.warnings.append(
            f"{note.path}: sync_id {sync_id} belongs to project {other.project!r} "
            f"(scope {other.scope}), outside this vault: treated as a new note"
        )
        return False

    # --- one memory -------------------------------------------------------------------------

    def _one(
        self,
        key: str,
        memory: dict[str, Any] | None,
        note: DiskNote | None,
        archive: dict[str, DiskNote],
        apply_deletes: bool,
    ) -> None:
        entry = self.state.notes.get(key)
        if note is not None and note.error is not None:
            return  # reported as skipped; nothing changes until it is readable again
        if memory is None:
            self._gone(key, entry, note)
        elif memory.get("deleted_at"):
            self._archived(key, memory, entry, note, archive)
        elif note is None:
            if entry is None or not self.apply_store:  # export writes a deleted note again
                path = entry.path if entry is not None else self._new_path(memory)
                self._write(key, memory, path, self.report.written)
            else:
                self._deleted_note(key, memory, entry, apply_deletes, archive)
        else:
            self._live(key, memory, entry, note)

    def _live(
        self, key: str, memory: dict[str, Any], entry: NoteEntry | None, note: DiskNote
    ) -> None:
        rendered = self._render(memory)
        note_changed = entry is None or note.hash != entry.note or note.path != entry.path
        memory_changed = entry is None or memory_hash(memory) != entry.memory
        if entry is not None and note.hash == entry.note:
            note_changed = False
        if not note_changed:
            if note.raw != rendered.encode():
                self._write(key, memory, note.path, self.report.written, rendered=rendered)
            else:
                self._record(key, note.path, note.hash, memory)
                self.report.unchanged += 1
            return
        fields = note.fields or parse_note(note.raw.decode(), fallback_title=Path(note.path).stem)
        edits = self._edits(memory, fields, note.path)
        if not edits:  # the note only looks different (or says what the store already says)
            self._write(key, memory, note.path, self.report.written, rendered=rendered, quiet=True)
            return
        if memory_changed and self.prefer != "note":
            if self.prefer == "store":
                self._write(key, memory, note.path, self.report.written, rendered=rendered)
                return
            why = "no earlier sync to compare with" if entry is None else "both changed"
            self._conflict(key, memory, note.path, fields, why)
            return
        if not self.apply_store:
            self.report.pending_edits.append(
                NoteEvent(note.path, key, memory["id"], ", ".join(sorted(edits)))
            )
            return
        self._apply_edits(key, memory, note, edits)

    def _edits(self, memory: dict[str, Any], fields: NoteFields, path: str) -> dict[str, Any]:
        """The store fields a note changes, compared with how the note shows the memory now.
        Project and scope are never taken from a note (the trust rule of git import)."""
        shown = parse_note(self._render(memory), fallback_title="")
        edits: dict[str, Any] = {}
        if fields.title and fields.title != shown.title:
            edits["title"] = fields.title
        if fields.content != shown.content:
            edits["content"] = fields.content
        if fields.type and fields.type != memory["type"]:
            edits["type"] = fields.type
        topic = normalize_topic_key(fields.topic)
        if topic != memory["topic_key"]:
            edits["topic_key"] = topic or ""
        if fields.project and normalize_project(fields.project)[0] != memory["project"]:
            self.report.warnings.append(
                f"{path}: 'project: {fields.project}' ignored: a note cannot move a memory "
                f"to another project (use 'engram projects merge' or mem_update)"
            )
        if fields.scope and normalize_scope(fields.scope) != memory["scope"]:
            self.report.warnings.append(
                f"{path}: 'scope: {fields.scope}' ignored: a note cannot change a memory's scope"
            )
        return edits

    def _apply_edits(
        self, key: str, memory: dict[str, Any], note: DiskNote, edits: dict[str, Any]
    ) -> None:
        event = NoteEvent(note.path, key, memory["id"], ", ".join(sorted(edits)))
        if self.dry_run:
            self.report.updated.append(event)
            return
        warnings: list[str] = []
        try:
            self.store.update_observation(memory["id"], warnings=warnings, **edits)
        except EngramError as exc:
            self.report.skipped.append(NoteEvent(note.path, key, memory["id"], str(exc)))
            return
        self.report.updated.append(event)
        self.report.warnings.extend(f"{note.path}: {w}" for w in warnings)
        fresh = self._reload(key)
        self._write(key, fresh, note.path, [], rendered=self._render(fresh))

    def _deleted_note(
        self,
        key: str,
        memory: dict[str, Any],
        entry: NoteEntry,
        apply_deletes: bool,
        archive: dict[str, DiskNote],
    ) -> None:
        event = NoteEvent(entry.path, key, memory["id"])
        if not (apply_deletes and self.apply_store):
            event.detail = "note deleted; memory kept (--apply-deletes archives it)"
            self.report.missing.append(event)
            return
        if memory_hash(memory) != entry.memory:
            self._conflict(key, memory, entry.path, None, "note deleted, memory changed since")
            return
        self.report.archived.append(event)
        if self.dry_run:
            return
        self.store.delete_observation(memory["id"])
        fresh = self._reload(key)
        self._write(key, fresh, self._archive_path(entry.path), [], rendered=self._render(fresh))

    def _archived(
        self,
        key: str,
        memory: dict[str, Any],
        entry: NoteEntry | None,
        note: DiskNote | None,
        archive: dict[str, DiskNote],
    ) -> None:
        """A soft-deleted memory: its note belongs under ``.archive/``."""
        rendered = self._render(memory)
        if note is not None:  # a live note for an archived memory: archived since the last sync
            if self._edit_kept(key, memory, entry, note, "memory archived in the store"):
                return
            target = self._archive_path(note.path)
            self._write(key, memory, target, self.report.archived_notes, rendered=rendered)
            self._remove(note.path)
            return
        path = entry.path if entry is not None else self._archive_path(self._new_path(memory))
        if not path.startswith(ARCHIVE_DIR + "/"):
            path = self._archive_path(path)
        current = archive.get(path)
        if current is not None and current.raw == rendered.encode():
            self._record(key, path, current.hash, memory)
            self.report.unchanged += 1
            return
        events = self.report.written if current is None and entry is None else []
        self._write(key, memory, path, events, rendered=rendered)

    def _gone(self, key: str, entry: NoteEntry | None, note: DiskNote | None) -> None:
        """The memory left this vault's selection (hard-deleted, moved to another project or
        to personal scope): an untouched note goes too, an edited one is a conflict."""
        if note is None:
            if entry is not None and not self.dry_run:
                del self.state.notes[key]
            return
        if self._edit_kept(key, None, entry, note, "memory deleted or moved in the store"):
            return
        self.report.removed_notes.append(NoteEvent(note.path, key))
        if not self.dry_run:
            self._remove(note.path)
            self.state.notes.pop(key, None)

    # --- new notes --------------------------------------------------------------------------

    def _edit_kept(
        self,
        key: str,
        memory: dict[str, Any] | None,
        entry: NoteEntry | None,
        note: DiskNote,
        reason: str,
    ) -> bool:
        """A note edited since the last sync whose memory the store archived, deleted or moved
        (``reason``): unless ``--prefer store``, it is kept — saved as a new memory
        (``--prefer note``, when it reads as one) or reported as a conflict. Whether it was."""
        edited = entry is None or note.hash != entry.note
        if not edited or self.prefer == "store":
            return False
        if self.prefer == "note" and note.fields is not None:
            self._new_note(note)
            return True
        fields = note.fields or parse_note(note.raw.decode(), fallback_title="")
        self._conflict(key, memory, note.path, fields, reason)
        return True

    def _new_note(self, note: DiskNote) -> None:
        fields = note.fields
        assert fields is not None
        if not fields.content.strip():
            self.report.skipped.append(NoteEvent(note.path, detail="empty note: nothing to save"))
            return
        if fields.scope and normalize_scope(fields.scope) == "personal":
            if not self.state.include_personal:
                self.report.skipped.append(
                    NoteEvent(
                        note.path,
                        detail="scope: personal, but this vault holds shared memories only "
                        "(export it with --include-personal to add personal ones)",
                    )
                )
                return
            scope = "personal"
        else:
            scope = "project"
        if fields.project and normalize_project(fields.project)[0] != self.state.project:
            self.report.warnings.append(
                f"{note.path}: 'project: {fields.project}' ignored: new notes become memories "
                f"of this vault's project {self.state.project!r}"
            )
        if problem := self._duplicate(fields, scope):
            self.report.skipped.append(NoteEvent(note.path, detail=problem))
            return
        if not self.apply_store:
            self.report.pending_edits.append(NoteEvent(note.path, detail="new note"))
            return
        event = NoteEvent(note.path, detail=scope)
        self.report.created.append(event)
        if self.dry_run:
            return
        try:
            saved = self.store.add_observation(
                title=fields.title,
                content=fields.content,
                type=fields.type or NEW_NOTE_TYPE,
                project=self.state.project,
                scope=scope,
                topic_key=fields.topic,
                tool_name=VAULT_TOOL,
            )
        except EngramError as exc:
            self.report.created.remove(event)
            self.report.skipped.append(NoteEvent(note.path, detail=str(exc)))
            return
        obs = saved.observation
        event.sync_id, event.id = obs.sync_id, obs.id
        self.report.warnings.extend(f"{note.path}: {w}" for w in saved.warnings if "REDACTED" in w)
        fresh = self._reload(obs.sync_id)
        self.memories[obs.sync_id] = fresh
        self._write(obs.sync_id, fresh, note.path, [], rendered=self._render(fresh))

    def _duplicate(self, fields: NoteFields, scope: str) -> str | None:
        """Why a new note would not become a new memory: the store would count it as a
        duplicate of, or fold it into, a memory that already has a note."""
        digest_ = normalized_hash(strip_private(fields.content))
        topic = normalize_topic_key(fields.topic)
        for key, memory in self.memories.items():
            if memory.get("deleted_at") or memory["scope"] != scope:
                continue
            where = self.state.notes.get(key)
            shown = where.path if where is not None else f"#{memory['id']}"
            if topic and memory["topic_key"] == topic:
                return f"topic {topic!r} is already the memory in {shown}: edit that note"
            if memory["title"] == fields.title and digest_ in self._content_hashes(key, memory):
                return f"same title and text as {shown}: not saved twice"
        return None

    def _content_hashes(self, key: str, memory: dict[str, Any]) -> tuple[str, str]:
        """A memory's text as stored and as its note shows it (blocks as headings)."""
        cached = self._hashes.get(key)
        if cached is None:
            shown = parse_note(self._render(memory), fallback_title="").content
            cached = (normalized_hash(memory["content"]), normalized_hash(shown))
            self._hashes[key] = cached
        return cached

    # --- helpers ----------------------------------------------------------------------------

    def _render(self, memory: dict[str, Any]) -> str:
        """The note of a memory, its relations as wikilinks to the other notes' names."""
        names: dict[str, list[str]] = {}
        for kind, targets in (memory.get("relations") or {}).items():
            for target in targets:
                entry = self.state.notes.get(target)
                names.setdefault(kind, []).append(Path(entry.path).stem if entry else target)
        return render_note(memory, importance=shown_importance(memory), relations=names)

    def _reload(self, key: str) -> dict[str, Any]:
        obs = self.store.get_observation_by_sync_id(key, project=self.state.project).to_dict()
        relations = _relations(self.store, obs)
        if relations:
            obs["relations"] = relations
        return obs

    def _conflict(
        self,
        key: str,
        memory: dict[str, Any] | None,
        path: str,
        fields: NoteFields | None,
        reason: str,
    ) -> None:
        self.report.conflicts.append(
            Conflict(
                path=path,
                sync_id=key,
                id=None if memory is None else memory["id"],
                reason=reason,
                note={} if fields is None else _version(fields),
                store={} if memory is None else _version(memory),
            )
        )

    def _new_path(self, memory: dict[str, Any]) -> str:
        """A free, readable file name for a memory's first note."""
        base = note_name(memory["title"])
        candidate = f"{base}.md"
        if candidate.lower() in self.taken:
            candidate = f"{base} ({memory['sync_id'].removeprefix('obs-')[:8]}).md"
        number = 2
        while candidate.lower() in self.taken:
            candidate = f"{base} ({memory['sync_id'].removeprefix('obs-')[:8]}-{number}).md"
            number += 1
        self.taken.add(candidate.lower())
        return candidate

    @staticmethod
    def _archive_path(path: str) -> str:
        if path.startswith(ARCHIVE_DIR + "/"):
            return path
        return f"{ARCHIVE_DIR}/{Path(path).name}"

    def _write(
        self,
        key: str,
        memory: dict[str, Any],
        path: str,
        events: list[NoteEvent],
        *,
        rendered: str | None = None,
        quiet: bool = False,
    ) -> None:
        text = rendered if rendered is not None else self._render(memory)
        if not quiet:
            events.append(NoteEvent(path, key, memory.get("id")))
        if self.dry_run:
            return
        _write_note(self.root / path, text)
        self._record(key, path, digest(text), memory)

    def _record(self, key: str, path: str, note_hash: str, memory: dict[str, Any]) -> None:
        if not self.dry_run:
            self.state.notes[key] = NoteEntry(path, note_hash, memory_hash(memory))

    def _remove(self, path: str) -> None:
        if not self.dry_run:
            with contextlib.suppress(FileNotFoundError):
                (self.root / path).unlink()
