"""A synthetic store with known answers for consolidation (docs/importance.md): the labelled
memories of ``bench/data/retrieval/sessions.json`` (six projects whose topics deliberately
overlap: several timeouts, several cache bugs, Redis in three roles), plus

* **planted duplicates**: for some memories, one or two copies saved later in other words
  (synonyms, sentences dropped or reordered, a title reworded) — what an agent writes when it
  forgets it already saved something;
* **trivia**: short notes without a topic, last touched months ago;
* **stale facts**: old memories edited in place since (a topic saved again), whose earlier text
  an as-of search must still find;
* **a pinned memory** that is both trivia and a near-duplicate: never merged, never archived;
* optionally ``distractors`` generated notes (``bench/retrieval_bench.py``'s generator).

Everything is an export document (version 0.1.0) with explicit timestamps, imported through the
real store, so ages are what the test says. ``Planted`` holds the answer key.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO / "bench" / "data" / "retrieval" / "sessions.json"

SYNONYMS = {
    "fixed": "resolved", "fix": "resolution", "raised": "increased", "increased": "raised",
    "error": "failure", "errors": "failures", "bug": "problem", "slow": "sluggish",
    "because": "since", "users": "customers", "added": "introduced", "removed": "dropped",
    "changed": "switched", "uses": "relies on", "configured": "set up", "deploy": "release",
    "issue": "problem", "problem": "issue", "query": "lookup", "queries": "lookups",
    "found": "discovered", "need": "require", "needs": "requires", "every": "each",
    "always": "consistently", "now": "these days", "failed": "broke", "failing": "breaking",
    "broken": "failing", "using": "with", "switched": "moved", "after": "following",
    "before": "prior to", "when": "whenever", "instead": "rather", "large": "big",
    "small": "little", "quickly": "fast", "new": "fresh", "old": "previous",
    "timeout": "time limit", "timeouts": "time limits", "request": "call", "requests": "calls",
    "test": "check", "tests": "checks", "run": "execution", "runs": "executions",
    "default": "stock", "value": "setting", "set": "configured", "returns": "gives back",
    "returned": "gave back", "slower": "more sluggish", "faster": "quicker", "wrong": "incorrect",
    "missing": "absent", "works": "functions", "worked": "functioned", "the": "that",
    "we": "the team", "our": "the team's", "it": "this", "was": "had been", "is": "turns out",
}  # fmt: skip
EXTRA_FACTS = (
    "Confirmed again on staging the following week.",
    "A teammate hit the same thing on their laptop.",
    "The runbook links to this now.",
    "Worth re-checking after the next major upgrade.",
)
TRIVIA = (
    "ok", "done", "noted", "looks fine", "checked the logs", "nothing to report",
    "meeting moved to 3pm", "lunch order: pizza", "reran it, passed", "wip",
)  # fmt: skip


@dataclass
class Planted:
    """The document to import and what a correct consolidation must do with it."""

    document: dict[str, Any]
    #: Groups of sync ids that are the same memory in other words (original first).
    duplicates: list[list[str]] = field(default_factory=list)
    trivia: list[str] = field(default_factory=list)
    pinned: str = ""
    #: sync id → (earlier text, the moment it was true, the topic key it lives under)
    stale: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def duplicate_keys(self) -> set[str]:
        """Every memory that consolidation should merge away (originals included)."""
        return {key for group in self.duplicates for key in group}


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _reword(text: str, rng: random.Random, share: float = 0.6) -> str:
    """``text`` with about ``share`` of the words that have a synonym replaced by it."""
    out = []
    for word in text.split(" "):
        bare = word.strip(".,;:()`*").lower()
        if bare in SYNONYMS and rng.random() < share:
            out.append(word.lower().replace(bare, SYNONYMS[bare]))
        else:
            out.append(word)
    return " ".join(out)


def paraphrase(
    title: str, content: str, rng: random.Random, *, partial: bool = False
) -> tuple[str, str]:
    """Another agent's wording of the same memory: reworded, a line dropped (``partial``: only
    the first line and one other kept) and the rest reordered, the title reworded."""
    lines = [line for line in content.splitlines() if line.strip()]
    if partial and len(lines) > 2:
        lines = [lines[0], rng.choice(lines[1:])]
    elif len(lines) > 3 and rng.random() < 0.6:
        lines.pop(rng.randrange(1, len(lines)))  # never the first (What) line
    if len(lines) > 2:
        first, rest = lines[0], lines[1:]
        rng.shuffle(rest)
        lines = [first, *rest]
    reworded = [_reword(line, rng, share=0.9) for line in lines]
    if rng.random() < 0.5:  # a fact only this copy has: the merge must keep it
        reworded.append(rng.choice(EXTRA_FACTS))
    new_title = _reword(title, rng, share=0.8)
    if new_title == title:
        new_title = f"{title} (again)"
    return new_title, "\n".join(reworded)


def _distractor_notes(count: int, seed: int) -> list[tuple[str, str, str, str]]:
    """(project, type, title, content) of ``count`` generated notes."""
    spec = importlib.util.spec_from_file_location(
        "retrieval_bench", REPO / "bench" / "retrieval_bench.py"
    )
    assert spec is not None and spec.loader is not None
    module = sys.modules.get("retrieval_bench")
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["retrieval_bench"] = module
        spec.loader.exec_module(module)
    rng = random.Random(seed)
    notes = []
    for n in range(count):
        comp = rng.choice(module.COMPONENTS)
        kind, title, content = module._note(rng, comp)
        notes.append((rng.choice(module.PROJECTS), kind, title, f"{content}\n(ref noise-{n})"))
    return notes


def build(
    *,
    seed: int = 7,
    duplicated: int = 24,
    trivia: int = 10,
    distractors: int = 0,
    now: datetime | None = None,
) -> Planted:
    """The synthetic store: ``duplicated`` labelled memories get one or two reworded copies."""
    rng = random.Random(seed)
    now = now or datetime.now(UTC)
    sessions = orjson.loads(SESSIONS.read_bytes())
    observations: list[dict[str, Any]] = []
    planted = Planted({"version": "0.1.0", "sessions": [], "observations": observations}, now=now)
    memories = [(s, item) for s in sessions for item in s["items"] if "key" in item]
    for n, (session, item) in enumerate(memories):
        saved = now - timedelta(days=30, minutes=n)  # recent enough to matter
        observations.append({
            "sync_id": f"obs-{item['key']}", "session_id": session["id"],
            "project": session["project"], "type": item["type"], "title": item["title"],
            "content": item["content"], "created_at": _stamp(saved), "updated_at": _stamp(saved),
        })  # fmt: skip
    chosen = rng.sample(range(len(memories)), duplicated)
    for number, index in enumerate(sorted(chosen)):
        session, item = memories[index]
        group = [f"obs-{item['key']}"]
        for copy in range(1 if number % 3 else 2):
            title, content = paraphrase(
                item["title"], item["content"], rng, partial=(number + copy) % 3 == 0
            )
            later = now - timedelta(days=20 - copy, minutes=number)
            key = f"obs-dup-{item['key']}-{copy}"
            group.append(key)
            observations.append({
                "sync_id": key, "session_id": f"{session['id']}-later", "project": session["project"],
                "type": item["type"], "title": title, "content": content,
                "created_at": _stamp(later), "updated_at": _stamp(later),
            })  # fmt: skip
        planted.duplicates.append(group)
    projects = sorted({s["project"] for s in sessions})
    for n in range(trivia):
        old = now - timedelta(days=200 + n)
        key = f"obs-trivia-{n}"
        planted.trivia.append(key)
        observations.append({
            "sync_id": key, "session_id": "chatter", "project": projects[n % len(projects)],
            "type": "manual", "title": TRIVIA[n % len(TRIVIA)], "content": TRIVIA[n % len(TRIVIA)],
            "created_at": _stamp(old), "updated_at": _stamp(old),
        })  # fmt: skip
    # The pinned one is old trivia and a near-copy of another trivia note: kept whole.
    old = now - timedelta(days=400)
    planted.pinned = "obs-pinned-rule"
    observations.append({
        "sync_id": planted.pinned, "session_id": "chatter", "project": projects[0],
        "type": "manual", "title": TRIVIA[0], "content": TRIVIA[0], "pinned": True,
        "created_at": _stamp(old), "updated_at": _stamp(old),
    })  # fmt: skip
    # Stale facts: saved long ago under a topic; the test saves that topic again.
    for n, (project, topic, text) in enumerate((
        (projects[0], "infra/deploy-target", "We deploy the web app to Heroku with git push heroku main"),
        (projects[1], "decision/queue-broker", "Background jobs go through RabbitMQ with one queue per worker"),
    )):  # fmt: skip
        old = now - timedelta(days=120 + n)
        key = f"obs-stale-{n}"
        planted.stale[key] = (text, _stamp(old + timedelta(days=1)), topic)
        observations.append({
            "sync_id": key, "session_id": "history", "project": project, "type": "decision",
            "title": topic.split("/")[1].replace("-", " "), "content": text, "topic_key": topic,
            "created_at": _stamp(old), "updated_at": _stamp(old),
        })  # fmt: skip
    for n, (project, kind, title, content) in enumerate(_distractor_notes(distractors, seed)):
        saved = now - timedelta(days=rng.randint(0, 60), minutes=n)
        observations.append({
            "sync_id": f"obs-noise-{n}", "session_id": f"noise-{n // 5}", "project": project,
            "type": kind, "title": title, "content": content,
            "created_at": _stamp(saved), "updated_at": _stamp(saved),
        })  # fmt: skip
    return planted


def score(planted: Planted, merged_groups: list[list[str]]) -> dict[str, float]:
    """Precision and recall of merged pairs: a pair of memories merged together is right when
    both belong to one planted group. Pairs of two generated distractors are left out (the
    generator writes near-twins from one template: nobody labelled them)."""
    truth = {key: i for i, group in enumerate(planted.duplicates) for key in group}
    found: set[frozenset[str]] = set()
    for group in merged_groups:
        found |= {
            frozenset((a, b))
            for i, a in enumerate(group)
            for b in group[i + 1 :]
            if not (a.startswith("obs-noise-") and b.startswith("obs-noise-"))
        }
    wanted = {
        frozenset((a, b))
        for group in planted.duplicates
        for i, a in enumerate(group)
        for b in group[i + 1 :]
    }
    right = {pair for pair in found if len({truth.get(k, -1 - hash(k)) for k in pair}) == 1}
    precision = len(right) / len(found) if found else 1.0
    recall = len(right & wanted) / len(wanted) if wanted else 1.0
    return {
        "precision": precision,
        "recall": recall,
        "pairs_found": len(found),
        "pairs_planted": len(wanted),
    }
