"""``engram summarize``: learnings from recent memories and commits, saved as memories.

Sources are the project's memories of the last ``days`` days (not earlier learnings) and, when
the project has a repository, its commits of the same window. An LLM provider extracts
learnings as JSON ``{"learnings": [{"text", "confidence", "sources"}]}``; without one (no
``ANTHROPIC_API_KEY``) an offline extractive pass takes the ``Learned`` blocks and "Key
Learnings" items people already wrote, plus fix/revert commits, each with a fixed confidence.

Privacy: every text put into a prompt goes through :func:`prompt_safe` first — ``<private>``
spans and anything that looks like a secret are removed — so neither leaves the machine.

Each learning is saved once: its topic key is ``learning/<hash of its text>``, so running
summarize again (or on another machine) adds nothing for learnings already saved.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from engram.errors import NotFoundError, ValidationError
from engram.ingest.git import MEMORY_TYPE as COMMIT_TYPE
from engram.ingest.git import check_days, read_commits, repo_root
from engram.ingest.provider import LLMProvider, ProviderError
from engram.secrets import redact_secrets
from engram.text import extract_learnings, split_blocks, strip_private, topic_sync_id
from engram.times import STORE_FORMAT

if TYPE_CHECKING:
    from engram.store import Store

LEARNING_TYPE = "learning"
TOOL_NAME = "engram-summarize"
MAX_SOURCES = 200
MAX_SOURCE_CHARS = 1500
_FIX_SUBJECT = re.compile(r"^\s*(?:fix(?:es|ed)?|hotfix|revert|perf)\b[\s:(!]", re.I)
_PRIVATE_OPEN = re.compile(r"<private>.*\Z", re.I | re.S)

SYSTEM = (
    "You extract durable engineering learnings for a software team's shared memory. Read the "
    "numbered sources (memories and commits) and return only JSON: "
    '{"learnings": [{"text": str, "confidence": number 0..1, "sources": [source ids]}]}. '
    "A learning is a reusable fact, decision rationale, gotcha or convention, stated in one or "
    "two sentences that make sense without the sources. Skip trivia and anything uncertain."
)


def prompt_safe(text: str) -> str:
    """What of ``text`` may leave the machine: no ``<private>`` span (an unclosed tag hides
    the rest) and no secret."""
    text = _PRIVATE_OPEN.sub("[REDACTED]", strip_private(text))
    return redact_secrets(text).text


@dataclass(slots=True)
class Source:
    id: str  # "m12" (a memory) or "c1a2b3c4d5e6" (a commit)
    kind: str
    title: str
    text: str


@dataclass(slots=True)
class Learning:
    text: str
    confidence: float
    sources: list[str]

    @property
    def topic_key(self) -> str:
        digest = hashlib.sha256(" ".join(self.text.lower().split()).encode()).hexdigest()
        return f"learning/{digest[:16]}"


@dataclass(slots=True)
class SummaryReport:
    project: str
    days: int
    provider: str
    min_confidence: float
    sources: int = 0
    learnings: list[dict[str, Any]] = field(default_factory=list)
    saved: int = 0
    already_present: int = 0
    below_confidence: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_confidence(value: Any) -> float:
    if isinstance(value, bool):
        raise ValidationError("min_confidence must be a number", field="min_confidence")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValidationError(
            f"min_confidence must be a number between 0 and 1, got {value!r}",
            field="min_confidence",
        ) from None
    if not 0.0 <= number <= 1.0:
        raise ValidationError(
            f"min_confidence must be between 0 and 1, got {number}", field="min_confidence"
        )
    return number


def gather_sources(
    store: Store, project: str, days: int, repo: str | Path | None
) -> tuple[list[Source], list[str]]:
    """The memories and commits of the window, newest first (capped), and any warnings."""
    since = (datetime.now(UTC) - timedelta(days=days)).strftime(STORE_FORMAT)
    sources: list[Source] = []
    # Shared memories only: a personal one must neither reach a provider nor a shared learning.
    for obs in store.recent_observations(project, "project", limit=MAX_SOURCES, since=since):
        if obs.type == LEARNING_TYPE and obs.tool_name == TOOL_NAME:
            continue  # our own output is not evidence
        if obs.type == COMMIT_TYPE:
            continue  # ingested commits are read from git itself below
        sources.append(Source(f"m{obs.id}", "memory", obs.title, obs.content))
    warnings: list[str] = []
    if repo is not None:
        try:
            root = repo_root(repo)
            for commit in read_commits(root, days)[:MAX_SOURCES]:
                text = commit.subject + ("\n" + commit.body.strip() if commit.body.strip() else "")
                sources.append(Source(f"c{commit.sha[:12]}", "commit", commit.subject, text))
        except ValidationError as exc:
            warnings.append(f"commits not read: {exc}")
    return sources[: MAX_SOURCES * 2], warnings


def offline_learnings(sources: list[Source]) -> list[Learning]:
    """Learnings people already wrote down, without any model: ``Learned`` blocks (0.8),
    "Key Learnings" items (0.7) and fix/revert commit subjects (0.5). The same text found in
    several sources counts once, a little more confident."""
    found: dict[str, Learning] = {}

    def add(text: str, confidence: float, source: str) -> None:
        # A private span's placeholder says nothing a learning needs.
        text = " ".join(text.replace("**", "").replace("[REDACTED]", " ").split())
        if len(text) < 12:
            return
        key = text.lower()
        if key in found:
            item = found[key]
            if source not in item.sources:
                item.sources.append(source)
                item.confidence = min(1.0, round(max(item.confidence, confidence) + 0.1, 2))
            return
        found[key] = Learning(text, confidence, [source])

    for source in sources:
        if source.kind == "commit":
            if _FIX_SUBJECT.match(source.title):
                add(source.title, 0.5, source.id)
            continue
        for block in split_blocks(source.text):
            if block.label == "Learned" and block.text.strip():
                add(block.text, 0.8, source.id)
        for item in extract_learnings(source.text):
            add(item, 0.7, source.id)
    return list(found.values())


def build_prompt(sources: list[Source]) -> str:
    """The numbered sources, each cut to a readable size, every text made :func:`prompt_safe`."""
    lines = ["Sources:"]
    for source in sources:
        text = prompt_safe(source.text)[:MAX_SOURCE_CHARS]
        title = prompt_safe(source.title)
        lines.append(f"[{source.id}] ({source.kind}) {title}\n{text}")
    lines.append('Answer with the JSON object only: {"learnings": [...]}')
    return "\n\n".join(lines)


def parse_learnings(reply: str, known: set[str]) -> list[Learning]:
    """The provider's JSON (tolerating a code fence or text around it); unknown source ids are
    dropped, confidences clamped to 0..1. A reply without that JSON is a ProviderError."""
    match = re.search(r"\{.*\}", reply, re.S)
    try:
        data = orjson.loads(match.group(0)) if match else None
        items = data["learnings"] if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise ValueError
    except (ValueError, orjson.JSONDecodeError):
        raise ProviderError('the model\'s reply holds no {"learnings": [...]} JSON') from None
    learnings: list[Learning] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            continue
        try:
            confidence = min(1.0, max(0.0, float(item.get("confidence", 0.5))))
        except (TypeError, ValueError):
            confidence = 0.5
        sources = [str(s) for s in item.get("sources") or [] if str(s) in known]
        text = " ".join(item["text"].split())
        if text:
            learnings.append(Learning(text, confidence, sources))
    return learnings


def _content(learning: Learning, by_id: dict[str, Source], provider: str) -> str:
    cited = []
    for sid in learning.sources:
        source = by_id[sid]
        ref = f"#{sid[1:]}" if source.kind == "memory" else f"commit {sid[1:]}"
        cited.append(f'{ref} "{source.title[:80]}"')
    return "\n".join(
        [
            f"**What**: {learning.text}",
            f"**Why**: extracted by {provider} from {len(learning.sources)} source(s); "
            f"confidence {learning.confidence:.2f}",
            f"**Where**: {'; '.join(cited) if cited else 'no source named'}",
        ]
    )


def summarize(
    store: Store,
    project: str,
    *,
    days: int = 7,
    min_confidence: float = 0.6,
    provider: LLMProvider | None = None,
    repo: str | Path | None = None,
    dry_run: bool = False,
) -> SummaryReport:
    """Extract learnings of the last ``days`` days and save those at or above
    ``min_confidence`` as ``learning`` memories (with their confidence and sources)."""
    days = check_days(days)
    min_confidence = check_confidence(min_confidence)
    if not project:
        raise ValidationError("summarize needs a project", field="project")
    sources, warnings = gather_sources(store, project, days, repo)
    name = provider.name if provider is not None else "offline"
    report = SummaryReport(project, days, name, min_confidence, len(sources), warnings=warnings)
    if not sources:
        return report
    if provider is None:
        learnings = offline_learnings(sources)
    else:
        reply = provider.complete(SYSTEM, build_prompt(sources))
        learnings = parse_learnings(reply, {s.id for s in sources})
    by_id = {s.id: s for s in sources}
    for learning in sorted(learnings, key=lambda item: -item.confidence):
        entry = {**asdict(learning), "topic_key": learning.topic_key}
        if learning.confidence < min_confidence:
            report.below_confidence += 1
            continue
        report.learnings.append(entry)
        try:
            store.get_observation_by_sync_id(
                topic_sync_id(project, "project", learning.topic_key), project=project
            )
            report.already_present += 1
            entry["status"] = "already saved"
            continue
        except NotFoundError:
            pass
        if dry_run:
            entry["status"] = "would be saved"
            continue
        title = learning.text if len(learning.text) <= 120 else learning.text[:119] + "…"
        saved = store.add_observation(
            title=title,
            content=_content(learning, by_id, name),
            type=LEARNING_TYPE,
            project=project,
            scope="project",
            topic_key=learning.topic_key,
            tool_name=TOOL_NAME,
        )
        entry.update(status="saved", id=saved.observation.id)
        report.saved += 1
    return report
