"""The vault's file format: one memory as one Markdown note that Obsidian (or any editor) reads.

```
---
id: 12
sync_id: obs-1a2b3c4d5e6f7a8b
type: decision
topic: architecture/auth
project: acme
scope: project
created: '2026-11-21T10:00:00Z'
updated: '2026-11-21T10:05:00Z'
importance: 0.4                             # one decimal (docs/importance.md)
pinned: true                                # only when pinned
relations:                                  # only when the store has relations
  supersedes: ['[[Old auth model]]']
---
# Title of the memory

## What
…
## Why
…
```

The What/Why/Where/Learned blocks become ``##`` headings (:func:`engram.text.split_blocks` is
the one rule, and it reads those headings back as the same blocks), the title is the ``#``
heading, and the front matter is YAML (PyYAML's safe loader and dumper only). Everything here is
pure: the sync service decides what to do with a parsed note.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from engram.text import split_blocks

try:  # libyaml's C parser and emitter: ~10x faster on a vault of thousands of notes
    from yaml import CSafeDumper as _Dumper
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

#: Front-matter keys the vault writes. Only ``type`` and ``topic`` (with the title and body)
#: are edits; the rest describe the memory and are never applied from a note.
READ_ONLY_KEYS = ("id", "sync_id", "project", "scope", "created", "updated", "importance",
                  "pinned")  # fmt: skip
MAX_NAME_CHARS = 80
# Characters Obsidian refuses in note names, plus path separators and controls.
_UNSAFE_NAME = re.compile(r'[\\/:*?"<>|#^\[\]\x00-\x1f\x7f]+')
_FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n(?P<yaml>.*?)(?:\r?\n)?^(?:---|\.\.\.)[ \t]*$\r?\n?", re.S | re.M
)
_TITLE = re.compile(r"\A#[ \t]+(?P<title>[^\n]*?)[ \t#]*(?:\n|\Z)")


class NoteError(ValueError):
    """A note cannot be read (bad YAML, front matter that is not a mapping, wrong types)."""


@dataclass(frozen=True, slots=True)
class NoteFields:
    """What a note says about its memory."""

    title: str
    content: str
    type: str | None = None
    topic: str | None = None
    sync_id: str | None = None
    project: str | None = None
    scope: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _iso(stamp: str | None) -> str | None:
    """Store text ``2026-11-21 10:00:00`` (UTC) → ``2026-11-21T10:00:00Z``."""
    if not stamp:
        return None
    return stamp.replace(" ", "T") + ("" if stamp.endswith("Z") else "Z")


def render_body(title: str, content: str) -> str:
    """The title as ``#`` heading, then each labelled block under its ``##`` heading."""
    parts = [f"# {' '.join(title.split())}"]
    for block in split_blocks(content):
        if block.label:
            parts.append(f"## {block.label}\n{block.text}".rstrip())
        else:
            parts.append(block.text)
    return "\n\n".join(parts) + "\n"


def wikilink(name: str) -> str:
    """``[[name]]`` — what Obsidian resolves to the note ``name.md`` and draws in its graph."""
    return f"[[{name}]]"


def render_note(
    memory: Mapping[str, Any],
    *,
    importance: float | None = None,
    relations: Mapping[str, list[str]] | None = None,
) -> str:
    """The note of ``memory`` (an observation's fields). ``relations`` maps a relation type to
    the *note names* it points at; both extras are written only when given."""
    meta: dict[str, Any] = {
        "id": memory.get("id"),
        "sync_id": memory["sync_id"],
        "type": memory.get("type") or "manual",
    }
    if memory.get("topic_key"):
        meta["topic"] = memory["topic_key"]
    meta["project"] = memory.get("project") or ""
    meta["scope"] = memory.get("scope") or "project"
    meta["created"] = _iso(memory.get("created_at"))
    meta["updated"] = _iso(memory.get("updated_at"))
    if memory.get("deleted_at"):
        meta["archived"] = _iso(memory["deleted_at"])
    if importance is not None:
        meta["importance"] = importance
    if memory.get("pinned"):
        meta["pinned"] = True
    if relations:
        meta["relations"] = {
            kind: [wikilink(name) for name in names] for kind, names in relations.items() if names
        }
    front = yaml.dump(
        meta, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
        width=1000,
    )  # fmt: skip
    return f"---\n{front}---\n{render_body(memory['title'], memory['content'])}"


def _safe_load(text: str) -> Any:
    """``yaml.safe_load`` through libyaml's safe loader when available (plain data only: no
    Python objects can ever be built from a note)."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _text_field(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise NoteError(f"front matter {key!r} must be text, got {type(value).__name__}")
    text = str(value).strip()
    return text or None


def parse_note(text: str, *, fallback_title: str) -> NoteFields:
    """Read a note: its front matter (may be absent), ``#`` title (else ``fallback_title``,
    the file name) and body. Raises :class:`NoteError` with a reason a person can fix."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    meta: dict[str, Any] = {}
    body = text
    match = _FRONT_MATTER.match(text)
    if match is None and text.startswith("---\n"):
        raise NoteError("front matter starts with '---' but has no closing '---' line")
    if match is not None:
        try:
            loaded = _safe_load(match.group("yaml"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise NoteError(f"front matter is not valid YAML{where}: {problem}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise NoteError("front matter must be a mapping of keys to values")
        meta = {str(k): v for k, v in loaded.items()}
        body = text[match.end() :]
    body = body.lstrip("\n")
    title_match = _TITLE.match(body)
    if title_match is not None:
        title = title_match.group("title").strip()
        body = body[title_match.end() :]
    else:
        title = fallback_title.strip()
    content = body.strip("\n").rstrip()
    return NoteFields(
        title=title,
        content=content,
        type=_text_field(meta, "type"),
        topic=_text_field(meta, "topic"),
        sync_id=_text_field(meta, "sync_id"),
        project=_text_field(meta, "project"),
        scope=_text_field(meta, "scope"),
        meta=meta,
    )


def note_name(title: str) -> str:
    """A readable file name (without ``.md``) for a note titled ``title``: the title minus the
    characters Obsidian refuses, at most 80 characters, never empty or hidden."""
    name = unicodedata.normalize("NFC", title)
    name = _UNSAFE_NAME.sub(" ", name)
    name = " ".join(name.split()).strip(" .")
    if len(name) > MAX_NAME_CHARS:
        name = name[:MAX_NAME_CHARS].rstrip(" .")
    return name or "Untitled"


def digest(data: bytes | str) -> str:
    """SHA-256 hex of a note's bytes (what the state file remembers)."""
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()
