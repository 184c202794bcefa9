"""Pure text rules: privacy stripping, truncation, hashing, topic keys, passive capture.

Nothing here touches the database, so every rule is trivially testable and shared by the store,
the sync code and the faces.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_SURROGATE = re.compile("[\ud800-\udfff]")
PRIVATE_TAG = re.compile(r"<private>.*?</private>", re.IGNORECASE | re.DOTALL)
TRUNCATION_MARKER = "... [truncated]"
TOPIC_KEY_MAX = 120


def unstorable_reason(text: str) -> str | None:
    """Why ``text`` cannot be stored and replicated as is, or ``None``.

    A NUL character is refused by PostgreSQL (so one such memory would block a whole cloud push)
    and cut short by many tools; a lone surrogate (what undecodable bytes in a command line turn
    into) is not encodable as UTF-8 at all. Both are refused at the edge, never silently changed.
    """
    if "\0" in text:
        return "contains a NUL character"
    if not text.isascii() and _SURROGATE.search(text):  # (ASCII holds no surrogate)
        return "contains a lone surrogate (not valid Unicode text)"
    return None


def require_storable(value: str | None, field: str) -> None:
    """Raise :class:`~engram.errors.ValidationError` naming ``field`` when ``value`` cannot be
    stored (see :func:`unstorable_reason`)."""
    if value is None:
        return
    if reason := unstorable_reason(value):
        from engram.errors import ValidationError

        raise ValidationError(f"{field} {reason}", field=field)


def strip_private(text: str) -> str:
    """Replace every ``<private>…</private>`` span with ``[REDACTED]`` and trim."""
    return PRIVATE_TAG.sub("[REDACTED]", text).strip()


def cut_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``limit`` bytes."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


@dataclass(frozen=True, slots=True)
class Truncation:
    text: str
    truncated: bool
    original_bytes: int
    limit_bytes: int

    @property
    def warning(self) -> str | None:
        if not self.truncated:
            return None
        return (
            f"⚠ WARNING: Content was truncated from {self.original_bytes} to "
            f"{self.limit_bytes} bytes. Consider splitting into smaller observations."
        )


def truncate(text: str, limit: int) -> Truncation:
    """Cut ``text`` to ``limit`` UTF-8 bytes (never mid-character) and mark the cut."""
    size = len(text.encode("utf-8"))
    if size <= limit:
        return Truncation(text, False, size, limit)
    return Truncation(cut_utf8(text, limit) + TRUNCATION_MARKER, True, size, limit)


def preview(text: str, limit: int) -> str:
    """First ``limit`` characters plus ``...`` when cut (for human-facing previews)."""
    if len(text) <= limit:
        return text
    return text[:limit] + "..."


def normalized_hash(content: str) -> str:
    """Dedupe key: SHA-256 of the content with whitespace runs collapsed, lowercased."""
    return hashlib.sha256(collapsed(content).lower().encode("utf-8")).hexdigest()


def collapsed(text: str) -> str:
    """``" ".join(text.split())``: whitespace runs as one space, none at either end. ASCII
    text whose only whitespace besides spaces is newlines, tabs and carriage returns (nearly
    every memory) is collapsed in place instead of split into words and joined (0.99 against
    1.31 µs on an import's memories; every save and import hashes its content)."""
    if not text.isascii():
        return " ".join(text.split())
    for character in "\n\t\r":
        if character in text:
            text = text.replace(character, " ")
    if not text.isprintable():  # another control character (some are whitespace): split
        return " ".join(text.split())
    while "  " in text:
        text = text.replace("  ", " ")
    return text.strip(" ")


def normalize_scope(scope: str | None) -> str:
    """``personal`` stays personal; anything else is ``project``."""
    return "personal" if (scope or "").strip().lower() == "personal" else "project"


def normalize_topic_key(topic_key: str | None) -> str | None:
    """Trim, lowercase, whitespace runs → ``-``, at most 120 characters; blank → ``None``."""
    if topic_key is None:
        return None
    key = "-".join(topic_key.strip().lower().split())[:TOPIC_KEY_MAX]
    return key or None


def topic_sync_id(project: str, scope: str, topic_key: str) -> str:
    """The deterministic sync id of a memory first saved under a topic key (docs/architecture.md, "Identity, the journal and replication")."""
    digest = hashlib.sha256(f"{project}\0{scope}\0{topic_key}".encode()).hexdigest()
    return "obs-" + digest[:16]


# --- topic-key suggestion -------------------------------------------------------------------

_TYPE_FAMILIES = {
    "architecture": "architecture",
    "design": "architecture",
    "adr": "architecture",
    "refactor": "architecture",
    "bug": "bug",
    "bugfix": "bug",
    "fix": "bug",
    "incident": "bug",
    "hotfix": "bug",
    "decision": "decision",
    "pattern": "pattern",
    "convention": "pattern",
    "guideline": "pattern",
    "config": "config",
    "setup": "config",
    "infra": "config",
    "infrastructure": "config",
    "ci": "config",
    "discovery": "discovery",
    "investigation": "discovery",
    "root_cause": "discovery",
    "root-cause": "discovery",
    "learning": "learning",
    "learn": "learning",
    "session_summary": "session",
}

_KEYWORD_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bug", ("bug", "fix", "panic", "error", "crash", "regression", "incident", "hotfix")),
    ("architecture", ("architecture", "design", "adr", "boundary", "hexagonal", "refactor")),
    ("decision", ("decision", "tradeoff", "chose", "choose", "decide")),
    ("pattern", ("pattern", "convention", "naming", "guideline")),
    ("config", ("config", "setup", "environment", "env", "docker", "pipeline")),
    ("discovery", ("discovery", "investigate", "investigation", "found", "root cause")),
    ("learning", ("learned", "learning")),
)

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def _segment(text: str, limit: int = 100) -> str:
    words = _NON_ALNUM.sub(" ", text.lower()).split()
    return "-".join(words)[:limit].strip("-")


def topic_family(type_: str, title: str, content: str) -> str:
    kind = (type_ or "").strip().lower()
    if kind in _TYPE_FAMILIES:
        return _TYPE_FAMILIES[kind]
    haystack = f"{title} {content}".lower()
    for family, words in _KEYWORD_FAMILIES:
        if any(word in haystack for word in words):
            return family
    segment = _segment(kind)
    if segment and segment != "manual":
        return segment
    return "topic"


def suggest_topic_key(type_: str = "", title: str = "", content: str = "") -> str:
    """A stable ``family/segment`` key for a memory, e.g. ``bug/login-timeout``.

    Raises ``ValueError`` when both title and content are empty.
    """
    title = strip_private(title or "")
    content = strip_private(content or "")
    if not title and not content:
        raise ValueError("title or content is required to suggest a topic key")
    family = topic_family(type_, title, content)
    segment = _segment(title)
    if not segment:
        segment = _segment(" ".join(content.lower().split()[:8]))
    if not segment:
        segment = "general"
    if segment.startswith(family + "-"):
        segment = segment[len(family) + 1 :]
    if not segment or segment == family:
        segment = "general"
    return f"{family}/{segment}"


# --- passive capture ------------------------------------------------------------------------

_LEARNING_HEADER = re.compile(
    r"^#{2,3}\s+(?:aprendizajes(?:\s+clave)?|key\s+learnings?|learnings?)\s*:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_NEXT_HEADING = re.compile(r"\n#{1,3} ")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+(.+)$", re.MULTILINE)
_BULLET = re.compile(r"^\s*[-*]\s+(.+)$", re.MULTILINE)
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")
_ITALIC = re.compile(r"\*(.+?)\*")


def _clean_learning(item: str) -> str:
    item = _BOLD.sub(r"\1", item)
    item = _CODE.sub(r"\1", item)
    item = _ITALIC.sub(r"\1", item)
    return " ".join(item.split())


def extract_learnings(text: str) -> list[str]:
    """The items of the last "Key Learnings" section that yields any (numbered, else bullets).

    Items shorter than 20 bytes or 4 words are dropped as noise.
    """
    headers = list(_LEARNING_HEADER.finditer(text or ""))
    for header in reversed(headers):
        body = text[header.end() :]
        stop = _NEXT_HEADING.search(body)
        if stop:
            body = body[: stop.start()]
        for pattern in (_NUMBERED, _BULLET):
            items = [_clean_learning(m.group(1)) for m in pattern.finditer(body)]
            items = [i for i in items if len(i.encode()) >= 20 and len(i.split()) >= 4]
            if items:
                return items
    return []


# --- similar names --------------------------------------------------------------------------


def levenshtein(a: str, b: str) -> int:
    """Edit distance between two strings."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def find_similar(name: str, candidates: list[str], max_distance: int = 3) -> list[str]:
    """Candidates that look like ``name``: same ignoring case, substring, or close spelling.

    Best first: exact case-insensitive matches, then substrings, then by edit distance.
    """
    target = name.strip().lower()
    if not target:
        return []
    ranked: list[tuple[int, int, str]] = []
    for candidate in candidates:
        other = candidate.strip().lower()
        if not other or candidate == name:
            continue
        if other == target:
            ranked.append((0, 0, candidate))
        elif target in other or other in target:
            ranked.append((1, abs(len(other) - len(target)), candidate))
        else:
            distance = levenshtein(target, other)
            if distance <= max_distance:
                ranked.append((2, distance, candidate))
    ranked.sort()
    return [c for _, _, c in ranked]


# --- the structure agents give a memory ---------------------------------------------------------

# "**What**: …", "What: …", "## What", "- **Why** — …" (any case); the rest of the line, if any,
# starts the block's text.
_LABEL_LINE = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?P<label>what|why|where|learned)\s*"
    r"(?:\*\*|__)?\s*(?:[:\-—–]\s*(?:\*\*|__)?|(?:\*\*|__)?\s*$)(?P<rest>.*)$",
    re.IGNORECASE,
)


# A bold label in the middle of a line ("… **Why**: …", "… __Where:__ …"): agents and the MCP
# tool description often write every block on one line. Only bold ones count mid-line, so a
# sentence saying "why: because" stays text.
_INLINE_LABEL = re.compile(
    r"\s+(?=(?:\*\*|__)\s*(?:what|why|where|learned)\s*"
    r"(?::\s*(?:\*\*|__)|(?:\*\*|__)\s*[:\-—–]))",
    re.IGNORECASE,
)


def _break_before_label(match: re.Match[str]) -> str:
    """A line break before a mid-line label; none after a bullet or heading mark at the start of
    a line, where the label already starts the line."""
    text = match.string
    line_start = text.rfind("\n", 0, match.start()) + 1
    if not text[line_start : match.start()].strip(" \t-*+#"):
        return match.group(0)
    return "\n"


@dataclass(frozen=True, slots=True)
class Block:
    """One labelled part of a memory (``label`` is ``""`` for text before the first label)."""

    label: str
    text: str


def split_blocks(content: str) -> list[Block]:
    """Split ``content`` into labelled blocks; text without labels is one unlabelled block.

    A label starts a block at the start of a line ("What: …", "## Why", "- **Where** — …") or,
    in bold, in the middle of one ("**What**: x **Why**: y"); a sentence mentioning "why" stays
    text.
    """
    blocks: list[Block] = []
    label = ""
    lines: list[str] = []

    def close() -> None:
        text = "\n".join(lines).strip("\n")
        if label or text.strip():
            blocks.append(Block(label, text.rstrip()))

    for line in _INLINE_LABEL.sub(_break_before_label, content).splitlines():
        match = _LABEL_LINE.match(line)
        if match:
            close()
            label = match.group("label").capitalize()
            rest = match.group("rest").strip()
            lines = [rest] if rest else []
        else:
            lines.append(line)
    close()
    return blocks


_EMPHASIS = re.compile(r"\*\*|__")


def one_line(text: str, limit: int = 400) -> str:
    """Whitespace collapsed to single spaces and Markdown bold markers dropped, cut to
    ``limit`` characters (for previews)."""
    flat = " ".join(_EMPHASIS.sub("", text[: limit * 4]).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def plural(count: int, word: str, words: str | None = None) -> str:
    """``"1 memory"``, ``"2 memories"``: a count with its noun in the right number
    (``words`` when the plural is not ``word + "s"``)."""
    if count == 1:
        return f"{count} {word}"
    if words is None:
        words = (
            word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"
        )
    return f"{count} {words}"
