"""Where a sync directory may write on this machine (docs/architecture.md, "Trust boundaries"),
and the gate that sorts a chunk's records into "apply" and "hold back".

A directory may write the projects **bound** to it here: the repository's own name (from its
``origin`` remote or its root, never from a file it contains), the ``project_name`` of its
``.engram/config.json`` once the user accepted it, and every project bound with
``engram sync --bind``. Personal-scope records apply only when the importing user asks
(``--include-personal``). The store knows nothing of bindings: the importer filters records
here, before :meth:`engram.store.Store.apply_mutations`.

A record is judged by every project it names (the record's and its payload's), so a chunk
cannot plant, overwrite or delete anything in a project the directory is not bound to; and by
every scope it touches — its own, its payload's, and that of the row or tombstone at its
address in the store — so a personal memory here can be neither replaced nor deleted by a
record that claims project scope. Rows of *other* projects that happen to share a key are not
consulted: a record of project P addresses ``(P, key)`` only, which the store enforces
(docs/architecture.md, "Identity, the journal and replication"), and judging by them would make replicas that hold such
a row decide differently from those that do not.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.bindings import Bindings
from engram.project import ConfigSuggestion, detect_without_config, read_config_suggestion
from engram.sync.git.gitdir import SyncDir

_ENTITIES = ("observation", "prompt", "session", "relation")
_SOURCES = {
    "git_remote": "from the repository's remote",
    "git_root": "from the repository's folder name",
    "git_child": "from the child repository",
    "dir_basename": "from the folder's name",
}


def describe_source(source: str) -> str:
    """How the repository's own project was found, for people."""
    return _SOURCES.get(source, "detected")


_LOOKUP_BATCH = 500


@dataclass(frozen=True, slots=True)
class DirectoryScope:
    """What one sync directory may write on this machine."""

    directory: str
    #: The repository's own project (remote or root name); None when it cannot be told.
    detected: str | None
    detected_source: str
    #: Projects bound with ``engram sync --bind``.
    bound: tuple[str, ...] = ()
    #: ``config.json``'s project, when the user accepted that name here.
    accepted_config: str | None = None
    #: ``config.json``'s project when it is not accepted (a suggestion waiting), else None.
    suggestion: ConfigSuggestion | None = None
    include_personal: bool = False

    @property
    def projects(self) -> frozenset[str]:
        names = {*self.bound, self.detected, self.accepted_config}
        return frozenset(n for n in names if n)

    @property
    def repository_project(self) -> str | None:
        """Where Go-format rows land: the accepted config's project, else the detected one."""
        return self.accepted_config or self.detected

    def allows(self, project: str) -> bool:
        return project in self.projects

    def to_dict(self) -> dict[str, Any]:
        return {
            "projects": sorted(self.projects),
            "detected": self.detected,
            "detected_source": self.detected_source,
            "bound": sorted(self.bound),
            "accepted_config": self.accepted_config,
            "suggested_project": self.suggestion.project if self.suggestion else None,
            "include_personal": self.include_personal,
        }


def directory_scope(
    sync_dir: SyncDir, bindings: Bindings, *, include_personal: bool = False
) -> DirectoryScope:
    """The scope of ``sync_dir`` from the repository around it and this machine's bindings."""
    found = detect_without_config(sync_dir.path.parent)
    detected = None if found.ambiguous else (found.project or None)
    trust = bindings.get(sync_dir.path)
    config = read_config_suggestion(sync_dir.path)
    accepted = None
    if config is not None and trust.accepted_config == config.project:
        accepted, config = config.project, None
    return DirectoryScope(
        directory=str(sync_dir.path),
        detected=detected,
        detected_source=found.source,
        bound=tuple(sorted(set(trust.bound))),
        accepted_config=accepted,
        suggestion=config,
        include_personal=include_personal,
    )


# --- the gate ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Verdicts:
    """One batch judged: the positions allowed, and what was held back (project, personal)."""

    allowed: list[int] = field(default_factory=list)
    held: Counter[tuple[str, bool]] = field(default_factory=Counter)


def _claims(record: dict[str, Any]) -> tuple[set[str], bool] | None:
    """The projects a record names and whether it claims personal scope, as applying it would
    read them (see ``engram.record.full_state``); None for a record too malformed to tell (the
    store refuses those itself)."""
    project, scope, payload = record.get("project"), record.get("scope"), record.get("payload")
    entity = record.get("entity")
    if not isinstance(project, str) or not isinstance(scope, str) or not isinstance(payload, dict):
        return None
    if entity not in _ENTITIES:
        return None
    names = {project}
    own = payload.get("project")
    if entity == "observation":
        if own is not None:
            names.add(own if isinstance(own, str) else str(own))
    elif own:
        names.add(own if isinstance(own, str) else str(own))
    personal = scope == "personal" or (
        entity == "observation" and payload.get("scope") == "personal"
    )
    return names, personal


def personal_sql(count: int) -> str:
    """The lookup behind :func:`_personal_here` for ``count`` keys of one project (parameters:
    the keys, then the project twice). Written as a join from the keys so that SQLite looks each
    one up through an index of addresses instead of scanning the whole project (which it
    prefers for ``project = ? AND sync_id IN (…)``: 20x slower on 100,000 memories), and that
    index is the one of personal memories only: SQLite would take the unique index of every
    address, then read each found key's row for its scope (12x slower at 100,000). (``IS``:
    the index's own condition, see ``migration_personal_index``.)"""
    values = ", ".join("(?)" for _ in range(count))
    return f"""WITH wanted(key) AS (VALUES {values})
        SELECT o.sync_id FROM wanted CROSS JOIN observations o INDEXED BY observations_personal
          ON o.sync_id = wanted.key AND o.project = ? AND o.scope IS 'personal'
        UNION ALL
        SELECT t.key FROM wanted CROSS JOIN sync_tombstones t
          ON t.entity = 'observation' AND t.key = wanted.key AND t.project = ?
             AND t.scope = 'personal'"""


def _personal_here(
    conn: sqlite3.Connection, addresses: dict[str, set[str]]
) -> set[tuple[str, str]]:
    """Of the memory addresses given (project → keys), those where this store holds a
    personal memory or the tombstone of one (only memories have a scope)."""
    found: set[tuple[str, str]] = set()
    for project, keys in addresses.items():
        names = sorted(keys)
        for start in range(0, len(names), _LOOKUP_BATCH):
            part = names[start : start + _LOOKUP_BATCH]
            rows = conn.execute(personal_sql(len(part)), [*part, project, project]).fetchall()
            found.update((project, row[0]) for row in rows)
    return found


#: The gate's verdict on a record that it may be applied (see :func:`_outcome`).
_ALLOW = "allow"


def _outcome(
    record: dict[str, Any], scope: DirectoryScope, allowed: frozenset[str]
) -> str | tuple[str, bool] | frozenset[str]:
    """The gate's verdict on a record from its claims alone (:func:`_claims`): apply it
    (``_ALLOW``), hold it back under ``(project, personal)``, or — a memory of the projects
    named — apply it unless the memory at its address in one of them is personal here. The
    same for every record with the same entity, project, scope and payload project and
    scope."""
    claim = _claims(record)
    if claim is None:
        return _ALLOW  # (the store refuses it with its own message)
    names, personal = claim
    entity = record["entity"]
    if entity == "session":
        names.discard("")  # a session without a project can reach no project's memories
    if not names <= allowed:
        refused = sorted(names - allowed)
        return (record["project"] if record["project"] in refused else refused[0], False)
    if personal:
        return _ALLOW if scope.include_personal else (record["project"], True)
    if entity == "observation" and not scope.include_personal:
        return frozenset(names)
    return _ALLOW


def judge(
    conn: sqlite3.Connection, scope: DirectoryScope, records: Sequence[dict[str, Any] | None]
) -> Verdicts:
    """Which of ``records`` this directory may write here (``None`` entries — unparseable —
    are allowed through: the store refuses them with its own message).

    A record's verdict depends on its claims only (entity, project, scope, and its payload's
    project and scope), so it is worked out once per combination (a chunk holds a handful),
    except for the memories the scope allows: each one is held back if the memory at its
    address is personal here, looked up for all of them at once (never when personal
    records are allowed anyway)."""
    allowed = scope.projects  # computed once: this runs per record
    outcomes: dict[tuple[Any, ...], str | tuple[str, bool] | frozenset[str]] = {}
    verdicts = Verdicts()
    positions, held = verdicts.allowed, verdicts.held
    # (position, projects named, key, project) of each memory allowed unless personal here
    checks: list[tuple[int, frozenset[str], str, str]] = []
    for position, record in enumerate(records):
        if record is None:
            positions.append(position)
            continue
        payload = record.get("payload")
        own = payload.get("project") if payload.__class__ is dict else None
        if payload.__class__ is dict and (own is None or own.__class__ is str):
            # (a payload project of another type is judged on its own: 1 and True are one
            # key of a dict but name different projects)
            entity = record.get("entity")
            combination = (
                entity,
                record.get("project"),
                record.get("scope"),
                own,
                payload.get("scope") if entity == "observation" else None,
            )
            try:
                outcome = outcomes.get(combination)
            except TypeError:  # (an unhashable claim: judged on its own)
                outcome = _outcome(record, scope, allowed)
            else:
                if outcome is None:
                    outcome = outcomes[combination] = _outcome(record, scope, allowed)
        else:
            outcome = _outcome(record, scope, allowed)
        if outcome is _ALLOW:
            positions.append(position)
        elif isinstance(outcome, frozenset):
            key = record.get("key")
            if isinstance(key, str):
                checks.append((position, outcome, key, record["project"]))
            else:
                positions.append(position)
        else:
            held[outcome] += 1  # type: ignore[index]
    if checks:
        addresses: dict[str, set[str]] = {}
        for _, names, key, _ in checks:
            for project in names:
                addresses.setdefault(project, set()).add(key)
        personal_here = _personal_here(conn, addresses)
        for position, names, key, project in checks:
            if personal_here and any((name, key) in personal_here for name in names):
                held[(project, True)] += 1
            else:
                positions.append(position)
        positions.sort()
    return verdicts
