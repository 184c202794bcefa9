"""Retrieval benchmark: do conversational questions find the memories they are about?

    .venv/bin/python bench/retrieval_bench.py                   # 2,000 distractors, human table
    .venv/bin/python bench/retrieval_bench.py --distractors 0 --json
    .venv/bin/python bench/retrieval_bench.py --weights 0.25,0.75,1.0 --show-misses
    .venv/bin/python bench/retrieval_bench.py --lexical-only   # skip semantic/hybrid modes

The labelled data set lives in ``bench/data/retrieval/``: ``sessions.json`` (hand-written agent
sessions across six projects, each an ordered list of user prompts and saved memories) and
``questions.json`` (hand-written questions, each with the keys of the memories that answer it).

A fresh temporary store is filled through the real :class:`engram.store.Store` API, session by
session in order (so every memory gets its real session context: the memories saved just before
it and the prompt that led to it), after ``--distractors`` generated developer notes from other
sessions and projects so that ranking matters. Every question is then searched with
``project=None`` in four modes — ``match_mode`` any/all, with the session-context column at the
default weight and without it (weight 0) — and the script prints hit@1/5/10, MRR@10 and query
latency per mode, plus each mode's hit@10 against the no-context OR baseline measured in the same
run. The context column is computed when a memory is stored and its weight applies at query time,
so the no-context store is the same database file opened with ``search_context_weight=0``.

Two more checks (issue 14):

* **Truth** (``truth.json``): agent sessions and plain sessionless saves are added, then a memory
  is edited, one hard-deleted and one soft-deleted; questions phrased with the replaced or
  deleted text, or with a word of one sessionless save, must not find the memories named
  ``forbidden`` in their top 10 (and must find their ``answers``).
* **Pruning**: search skips rows holding only very common words once they cannot reach the top
  10 (engram/store/ranking.py). On a store big enough for that to happen (``--exact-distractors``,
  default 10,000), every question is searched with pruning and with exact ranking of every
  match (``search_pruning=False``), and the script counts the questions whose top 10 differ.

With the semantic extra installed, every memory is then embedded (``store.vectorize()``) and two
more modes run: ``hybrid`` (the default search with the extra) and ``semantic`` (vectors only).
Each mode's hit@10 and MRR are also reported per kind of question: ``keyword`` (error messages,
identifiers, short phrases), ``question`` (conversational) and ``paraphrase`` (no content word
in common with the answer: :func:`check_paraphrases` enforces it with the index's own tokenizer).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engram import semantic  # noqa: E402
from engram.settings import Config  # noqa: E402
from engram.store import Store  # noqa: E402
from engram.store.query import query_words  # noqa: E402

DATA_DIR = REPO / "bench" / "data" / "retrieval"
MEMORY_TYPES = frozenset(
    {"bugfix", "decision", "architecture", "discovery", "pattern", "config", "learning"}
)
CUTOFFS = (1, 5, 10)
QUESTION_KINDS = ("keyword", "question", "paraphrase")
DEFAULT_SEED = 20240601
EXACT_DISTRACTORS = 10_000


class DatasetError(ValueError):
    """The data set is malformed; the message names the file and the offending item."""


# --- the labelled data set ------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    sessions: list[dict[str, Any]]
    questions: list[dict[str, Any]]

    @property
    def memory_count(self) -> int:
        return sum(1 for s in self.sessions for item in s["items"] if "key" in item)

    @property
    def prompt_count(self) -> int:
        return sum(1 for s in self.sessions for item in s["items"] if "prompt" in item)


def _read_json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found") from None
    except orjson.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from None


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _check_session(index: int, session: Any, keys: set[str], ids: set[str]) -> None:
    where = f"sessions.json[{index}]"
    if not isinstance(session, dict):
        raise DatasetError(f"{where}: expected an object")
    for field in ("id", "project"):
        if not _text(session.get(field)):
            raise DatasetError(f"{where}: '{field}' must be a non-empty string")
    if session["id"] in ids:
        raise DatasetError(f"{where}: duplicate session id {session['id']!r}")
    ids.add(session["id"])
    items = session.get("items")
    if not isinstance(items, list) or not items:
        raise DatasetError(f"{where} ({session['id']}): 'items' must be a non-empty list")
    for position, item in enumerate(items):
        spot = f"{where} ({session['id']}) item {position}"
        if not isinstance(item, dict):
            raise DatasetError(f"{spot}: expected an object")
        if "prompt" in item:
            if not _text(item["prompt"]) or len(item) != 1:
                raise DatasetError(f"{spot}: a prompt item is exactly {{'prompt': '<text>'}}")
            continue
        for field in ("key", "type", "title", "content"):
            if not _text(item.get(field)):
                raise DatasetError(f"{spot}: memory needs a non-empty '{field}'")
        if item["type"] not in MEMORY_TYPES:
            raise DatasetError(f"{spot}: unknown type {item['type']!r}")
        if item["key"] in keys:
            raise DatasetError(f"{spot}: duplicate memory key {item['key']!r}")
        keys.add(item["key"])


def load_dataset(directory: Path = DATA_DIR) -> Dataset:
    """Read and validate ``sessions.json`` and ``questions.json`` (raises :class:`DatasetError`)."""
    sessions = _read_json(directory / "sessions.json")
    questions = _read_json(directory / "questions.json")
    if not isinstance(sessions, list) or not sessions:
        raise DatasetError("sessions.json: expected a non-empty list of sessions")
    if not isinstance(questions, list) or not questions:
        raise DatasetError("questions.json: expected a non-empty list of questions")
    keys: set[str] = set()
    ids: set[str] = set()
    for index, session in enumerate(sessions):
        _check_session(index, session, keys, ids)
    for index, question in enumerate(questions):
        where = f"questions.json[{index}]"
        if not isinstance(question, dict) or not _text(question.get("question")):
            raise DatasetError(f"{where}: needs a non-empty 'question'")
        answers = question.get("answers")
        if not isinstance(answers, list) or not answers:
            raise DatasetError(f"{where}: 'answers' must be a non-empty list of memory keys")
        unknown = [a for a in answers if a not in keys]
        if unknown:
            raise DatasetError(f"{where}: unknown answer key(s) {', '.join(map(str, unknown))}")
        if "project" in question and not _text(question["project"]):
            raise DatasetError(f"{where}: 'project', when given, must be a non-empty string")
        kind = question.setdefault("kind", "question")
        if kind not in QUESTION_KINDS:
            raise DatasetError(
                f"{where}: 'kind' must be one of {', '.join(QUESTION_KINDS)}, got {kind!r}"
            )
    check_paraphrases(sessions, questions)
    return Dataset(sessions, questions)


def load_truth(directory: Path = DATA_DIR) -> dict[str, Any]:
    """Read and validate ``truth.json`` (raises :class:`DatasetError`)."""
    truth = _read_json(directory / "truth.json")
    if not isinstance(truth, dict):
        raise DatasetError("truth.json: expected an object")
    keys: set[str] = set()
    ids: set[str] = set()
    for index, session in enumerate(truth.get("sessions") or []):
        _check_session(index, session, keys, ids)
    for index, item in enumerate(truth.get("sessionless") or []):
        for field in ("key", "project", "type", "title", "content"):
            if not _text(item.get(field)):
                raise DatasetError(f"truth.json sessionless[{index}]: needs a non-empty '{field}'")
        keys.add(item["key"])
    for index, change in enumerate(truth.get("changes") or []):
        if change.get("key") not in keys:
            raise DatasetError(f"truth.json changes[{index}]: unknown key {change.get('key')!r}")
        if change.get("action") not in ("edit", "soft_delete", "hard_delete"):
            raise DatasetError(f"truth.json changes[{index}]: unknown action")
    for index, question in enumerate(truth.get("questions") or []):
        named = [*question.get("answers", []), *question.get("forbidden", [])]
        if not _text(question.get("question")) or any(k not in keys for k in named):
            raise DatasetError(f"truth.json questions[{index}]: bad question or unknown key")
    return truth


def check_paraphrases(sessions: list[dict[str, Any]], questions: list[dict[str, Any]]) -> None:
    """A paraphrase question shares no searchable word with any of its answers: none of its
    words (after the search's stoplist) matches the answer's title or content in an FTS5 index
    with the store's tokenizer, as a word or, for 4+ letters, as the start of one."""
    memories = {i["key"]: i for s in sessions for i in s["items"] if "key" in i}
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(title, content, tokenize='porter unicode61')")
    for index, question in enumerate(questions):
        if question.get("kind") != "paraphrase":
            continue
        shared = []
        for key in question["answers"]:
            conn.execute("DELETE FROM t")
            conn.execute(
                "INSERT INTO t VALUES (?, ?)", (memories[key]["title"], memories[key]["content"])
            )
            for word in query_words(question["question"]):
                term = '"' + word.replace('"', '""') + '"' + ("*" if len(word) >= 4 else "")
                if conn.execute("SELECT 1 FROM t WHERE t MATCH ?", (term,)).fetchone():
                    shared.append(f"{word!r} ({key})")
        if shared:
            raise DatasetError(
                f"questions.json[{index}]: a paraphrase shares words with its answer: "
                + ", ".join(shared)
            )


# --- distractors: deterministic developer notes from other sessions ----------------------------
# Their vocabulary deliberately overlaps the labelled corpus (timeouts, caches, Redis, logins,
# CI runners, migrations …) so a question has to beat many plausible near-misses.

COMPONENTS = (
    "invoice export",
    "search indexer",
    "notification worker",
    "password reset flow",
    "report scheduler",
    "avatar upload",
    "audit log writer",
    "checkout page",
    "webhook dispatcher",
    "feature flag client",
    "image resizer",
    "email digest job",
    "SSO callback",
    "GraphQL gateway",
    "inventory sync",
    "PDF renderer",
    "metrics exporter",
    "billing cron",
    "shipping label service",
    "tenant onboarding",
    "session store",
    "login form",
    "booking calendar",
    "CSV importer",
    "mobile sync endpoint",
    "admin dashboard",
    "push sender",
    "rate limiter",
    "token refresh",
    "job queue",
)
DEPENDENCIES = (
    "Redis",
    "Postgres",
    "the payments API",
    "Elasticsearch",
    "S3",
    "the SMTP relay",
    "Kafka",
    "the geocoding API",
    "LDAP",
    "the tax service",
    "Memcached",
    "DynamoDB",
    "RabbitMQ",
    "the CRM API",
    "OpenSearch",
    "Snowflake",
    "the Shopify API",
    "Stripe",
    "the FCM endpoint",
)
TIMEOUT_ERRORS = (
    "ReadTimeout",
    "context deadline exceeded",
    "ETIMEDOUT",
    "504 Gateway Timeout",
    "psycopg2.errors.QueryCanceled",
    "asyncio.TimeoutError",
    "SocketTimeoutException",
    "upstream request timeout",
)
BUSY_TIMES = (
    "month-end billing runs",
    "the nightly backup window",
    "Monday morning peaks",
    "deploys",
    "index rebuilds",
    "the marketing email blast",
    "Black Friday",
    "the weekly full sync",
)
DIRECTORIES = (
    "app/services",
    "src/workers",
    "internal/handlers",
    "pkg/client",
    "lib/jobs",
    "api/views",
    "src/components",
    "deploy/helm",
    "terraform/modules",
    "jobs",
    "src/screens",
    "core",
)
LIBRARIES = (
    ("sqlalchemy", "2.0"),
    ("pydantic", "2.5"),
    ("celery", "5.3"),
    ("react-router", "6.22"),
    ("webpack", "5.90"),
    ("urllib3", "2.0"),
    ("boto3", "1.34"),
    ("jest", "29"),
    ("next", "14"),
    ("gunicorn", "21.2"),
    ("redis-py", "5.0"),
    ("psycopg", "3.1"),
    ("expo", "50"),
    ("terraform-provider-aws", "5.40"),
    ("dbt-core", "1.7"),
    ("fastapi", "0.110"),
)
UPGRADE_ERRORS = (
    "AttributeError: module has no attribute 'DEFAULT_TIMEOUT'",
    "TypeError: __init__() got an unexpected keyword argument 'retries'",
    "ImportError: cannot import name 'json' from 'itsdangerous'",
    "ValidationError: field required",
    "Module not found: Can't resolve 'process'",
    "DeprecationWarning turned into an error by -W error",
    "Error: Unsupported engine for package",
)
CACHE_THINGS = (
    ("prices", "price:{sku}"),
    ("user permissions", "perms:{user_id}"),
    ("feature flags", "flags:{env}"),
    ("search facets", "facets:{query_hash}"),
    ("avatars", "avatar:{user_id}"),
    ("exchange rates", "fx:{pair}"),
    ("tenant settings", "settings:{tenant}"),
    ("court availability", "slots:{court}"),
    ("API responses", "resp:{path}"),
    ("compiled templates", "tpl:{name}"),
)
CACHE_EVENTS = (
    "an admin edit",
    "a bulk import",
    "a plan downgrade",
    "a role change",
    "a deploy",
    "a price update from the ERP",
    "a tenant rename",
)
CACHE_MISSING = ("the tenant id", "the locale", "the user id", "the API version", "the date")
TABLES = (
    "orders",
    "invoices",
    "events",
    "audit_log",
    "sessions",
    "bookings",
    "line_items",
    "notifications",
    "payments",
    "users",
    "job_runs",
    "photos",
)
COLUMNS = ("created_at", "tenant_id", "user_id", "status", "external_id", "email", "updated_at")
FLAKY_CAUSES = (
    ("the test order", "pytest-randomly exposed a shared fixture"),
    ("wall-clock time", "a sleep-based assertion"),
    ("a real network call", "an unmocked DNS lookup"),
    ("port reuse", "a hard-coded port 8080"),
    ("timezone", "the CI runner's TZ being UTC while laptops use local time"),
    ("dict ordering in a snapshot", "an unsorted JSON dump"),
)
DECISIONS = (
    ("background jobs", "Celery", "RQ"),
    ("feature flags", "Unleash", "LaunchDarkly"),
    ("search", "OpenSearch", "Postgres full-text"),
    ("queues", "SQS", "RabbitMQ"),
    ("schema migrations", "Alembic", "hand-written SQL"),
    ("HTTP client", "httpx", "requests"),
    ("state management", "Zustand", "Redux"),
    ("infrastructure", "Terraform", "Pulumi"),
    ("logging", "structlog", "the stdlib logging config"),
    ("e2e tests", "Playwright", "Cypress"),
    ("image storage", "S3 with CloudFront", "the app server's disk"),
    ("session storage", "signed cookies", "Redis"),
    ("secrets", "Vault", "env files"),
)
SETTINGS = (
    ("pool_size", "20"),
    ("statement_timeout", "30s"),
    ("max_retries", "5"),
    ("keepalive_timeout", "75s"),
    ("worker_concurrency", "8"),
    ("cache TTL", "300 s"),
    ("request body limit", "25 MB"),
    ("log level", "INFO"),
    ("idle_in_transaction_timeout", "60s"),
    ("prefetch count", "10"),
    ("readinessProbe periodSeconds", "5"),
    ("HPA max replicas", "12"),
)
AUTH_EVENTS = (
    ("the signing key rotation", "the JWKS cache kept the old key for 24 h"),
    ("the move to the new IdP", "the token audience still named the old client id"),
    ("a daylight saving change", "expiry was computed in local time"),
    ("scaling to three replicas", "each replica generated its own secret at start-up"),
    ("the clock drift on one node", "iat was 40 s in the future"),
)
CI_FAILURES = (
    ("toomanyrequests: You have reached your pull rate limit", "pull through the ECR cache"),
    ("no space left on device", "prune the builder cache before each job"),
    ("Error: The operation was canceled.", "raise timeout-minutes and split the job"),
    ("npm ERR! code EINTEGRITY", "regenerate the lockfile and cache by its hash"),
    ("exec format error", "build the image for linux/arm64 as well"),
    ("fatal: could not read Username for 'https://github.com'", "use the job token for submodules"),
)
CRASH_CAUSES = (
    ("readinessProbe hit /health before migrations finished", "startupProbe with 30 attempts"),
    ("the new image expected an env var that wasn't set", "fail-fast config validation"),
    ("the memory limit was 256Mi and the JVM took 300", "limits from VPA recommendations"),
    ("a missing ConfigMap key after the rename", "kustomize configMapGenerator"),
)
PROMPTS = (
    "the {comp} is acting up again, can you take a look",
    "can you check why {comp} fails in staging",
    "{comp} is slow today, find out why",
    "clean up the {comp} code and fix whatever is broken",
    "customers are complaining about the {comp}",
    "we need to decide how {comp} should work going forward",
    "review the {comp} before the release",
    "the on-call asked about {comp} errors overnight",
)
PROJECTS = (
    "billing-api",
    "auth-gateway",
    "search-indexer",
    "admin-portal",
    "warehouse-scanner",
    "docs-site",
    "notify-service",
    "legacy-admin",
    "partner-portal",
    "analytics-jobs",
    "courtside",
    "orders-etl",
    "fieldnotes",
    "platform-infra",
)


def _slug(text: str) -> str:
    return "_".join(text.lower().replace("'", "").split())


def _note(rng: random.Random, comp: str) -> tuple[str, str, str]:
    """One distractor memory about ``comp``: (type, title, content)."""
    path = f"{rng.choice(DIRECTORIES)}/{_slug(comp)}.{rng.choice(('py', 'ts', 'go', 'yaml'))}"
    dep = rng.choice(DEPENDENCIES)
    n = rng.randint(2, 90)
    kind = rng.randrange(12)
    if kind == 0:
        err = rng.choice(TIMEOUT_ERRORS)
        return (
            "bugfix",
            f"{comp.capitalize()} timed out talking to {dep}",
            f"**What**: {comp} called {dep} without a deadline; during {rng.choice(BUSY_TIMES)} p99 "
            f"reached {n * 130} ms and requests failed with `{err}`. Added a {n % 10 + 2} s timeout "
            f"and {n % 3 + 1} retries with backoff.\n**Why**: {dep} slows down under load.\n"
            f"**Where**: {path}\n**Learned**: Every call to {dep} needs an explicit timeout.",
        )
    if kind == 1:
        thing, key = rng.choice(CACHE_THINGS)
        return (
            "bugfix",
            f"Stale {thing} in the {comp} after {rng.choice(CACHE_EVENTS)}",
            f"**What**: {comp} cached {thing} under `{key}` for {n} minutes and nothing invalidated "
            f"it, so users kept seeing old values. Invalidation now happens in the save hook.\n"
            f"**Why**: The key did not include {rng.choice(CACHE_MISSING)}.\n**Where**: {path}\n"
            f"**Learned**: Decide who invalidates a cache entry when you add it.",
        )
    if kind == 2:
        table, column = rng.choice(TABLES), rng.choice(COLUMNS)
        return (
            "bugfix",
            f"{comp.capitalize()} slow: sequential scan on {table}",
            f"**What**: EXPLAIN ANALYZE showed a seq scan on {table} ({n} M rows) filtered by "
            f"{column}. Added an index concurrently; {n * 40} ms → {n % 9 + 3} ms.\n"
            f"**Why**: The query was added without checking the plan.\n**Where**: {path}, "
            f"migrations\n**Learned**: Check the plan of every new query on production-sized data.",
        )
    if kind == 3:
        cause, detail = rng.choice(FLAKY_CAUSES)
        return (
            "bugfix",
            f"Flaky test in {comp} depended on {cause}",
            f"**What**: test_{_slug(comp)} failed about 1 run in {n} on CI because of {detail}. "
            f"Fixed the test to control {cause} explicitly.\n**Why**: Passing locally hid it.\n"
            f"**Where**: tests/{_slug(comp)}_test.py\n**Learned**: Retry-on-failure hides flakes.",
        )
    if kind == 4:
        (lib, version), err = rng.choice(LIBRARIES), rng.choice(UPGRADE_ERRORS)
        return (
            "bugfix",
            f"{lib} {version} upgrade broke the {comp}",
            f"**What**: After bumping {lib} to {version} the {comp} failed with `{err}`. Adjusted "
            f"the call sites and pinned the minor version.\n**Why**: The changelog listed it as a "
            f"breaking change we missed.\n**Where**: {path}, lockfile\n**Learned**: Read the "
            f"upgrade notes before bumping majors or minors of core libraries.",
        )
    if kind == 5:
        setting, value = rng.choice(SETTINGS)
        return (
            "config",
            f"{comp.capitalize()}: {setting} set to {value}",
            f"**What**: Set {setting} = {value} for the {comp} (was the default).\n**Why**: "
            f"{dep} struggled during {rng.choice(BUSY_TIMES)}.\n**Where**: {path}\n**Learned**: "
            f"Write down why a non-default value was chosen.",
        )
    if kind == 6:
        purpose, chosen, other = rng.choice(DECISIONS)
        return (
            "decision",
            f"Use {chosen} for {purpose} in the {comp}",
            f"**What**: The {comp} uses {chosen} for {purpose} instead of {other}.\n**Why**: "
            f"{other} needed more operational work for our team of {n % 7 + 2}.\n**Where**: {path}\n"
            f"**Learned**: Prefer what the team already operates.",
        )
    if kind == 7:
        return (
            "bugfix",
            f"{comp.capitalize()} memory grew until the process was killed",
            f"**What**: RSS of the {comp} grew to {n % 6 + 1}.{n % 10} GB over a day; a module-level "
            f"dict kept every {dep} client ever created. Reuse one client per process.\n**Why**: "
            f"OOMKilled restarts every few hours.\n**Where**: {path}\n**Learned**: Graph memory per "
            f"process, not per host.",
        )
    if kind == 8:
        event, cause = rng.choice(AUTH_EVENTS)
        return (
            "bugfix",
            f"{comp.capitalize()} rejected valid tokens after {event}",
            f"**What**: Users were logged out or got 401 from the {comp} after {event}: {cause}.\n"
            f"**Why**: Token validation had no tolerance for the change.\n**Where**: {path}\n"
            f"**Learned**: Allow {n % 50 + 10} s of leeway and refresh keys on unknown kid.",
        )
    if kind == 9:
        err, fix = rng.choice(CI_FAILURES)
        return (
            "bugfix",
            f"CI job for the {comp} failing: {err.split(':')[0]}",
            f"**What**: The {comp} pipeline failed with `{err}` on about {n}% of runs. Fix: {fix}.\n"
            f"**Why**: The runners are shared by every repository.\n**Where**: .github/workflows/"
            f"{_slug(comp)}.yml\n**Learned**: Look at the runner, not only the code.",
        )
    if kind == 10:
        cause, fix = rng.choice(CRASH_CAUSES)
        return (
            "discovery",
            f"{comp.capitalize()} pods in CrashLoopBackOff after the release",
            f"**What**: After release {n}.{n % 10} the {comp} pods crash-looped: {cause}. Added "
            f"{fix}.\n**Why**: The failure only shows with production config.\n**Where**: {path}\n"
            f"**Learned**: Check `kubectl describe pod` events before reading logs.",
        )
    table = rng.choice(TABLES)
    return (
        "pattern",
        f"Idempotent consumers for {table} events in the {comp}",
        f"**What**: The {comp} stores processed message ids in a {table}_processed table with a "
        f"unique constraint and skips duplicates; {dep} delivers at least once.\n**Why**: "
        f"Redeliveries after {rng.choice(BUSY_TIMES)} created duplicate {table}.\n**Where**: {path}\n"
        f"**Learned**: Assume at-least-once delivery from every queue and webhook.",
    )


def add_distractors(store: Store, count: int, seed: int) -> int:
    """Save ``count`` generated notes in sessions of 2–6 memories, each after a prompt."""
    rng = random.Random(seed)
    saved = 0
    session_number = 0
    while saved < count:
        session_number += 1
        project = rng.choice(PROJECTS)
        session_id = f"noise-{session_number:05d}"
        comp = rng.choice(COMPONENTS)
        store.add_prompt(
            rng.choice(PROMPTS).format(comp=comp), session_id=session_id, project=project
        )
        for _ in range(min(rng.randint(2, 6), count - saved)):
            kind, title, content = _note(
                rng, comp if rng.random() < 0.6 else rng.choice(COMPONENTS)
            )
            # A serial number keeps every note distinct, so none is folded by dedupe.
            content += f"\n(ref {session_id}-{saved})"
            store.add_observation(
                title=title, content=content, type=kind, session_id=session_id, project=project
            )
            saved += 1
    return saved


# --- building and measuring -------------------------------------------------------------------


def add_dataset(store: Store, dataset: Dataset) -> dict[str, int]:
    """Replay every session in order; returns the observation id of each memory key."""
    ids: dict[str, int] = {}
    for session in dataset.sessions:
        for item in session["items"]:
            if "prompt" in item:
                store.add_prompt(
                    item["prompt"], session_id=session["id"], project=session["project"]
                )
                continue
            saved = store.add_observation(
                title=item["title"],
                content=item["content"],
                type=item["type"],
                session_id=session["id"],
                project=session["project"],
            )
            ids[item["key"]] = saved.observation.id
    return ids


@dataclass
class ModeResult:
    name: str
    search_mode: str
    match_mode: str
    context_weight: float
    hit_at_1: float
    hit_at_5: float
    hit_at_10: float
    mrr: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p95_ms: float
    by_kind: dict[str, dict[str, float]]
    misses: list[str]


def _percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def evaluate(
    store: Store,
    questions: list[dict[str, Any]],
    ids: dict[str, int],
    name: str,
    match_mode: str,
    search_mode: str = "lexical",
    count_reads: bool = False,
) -> ModeResult:
    """Search every question (``project=None``, top 10) and score where the first answer lands.

    Reads are not counted (``count_reads`` False) so that every mode ranks the same store: a
    counted read raises its memory's importance, which then breaks later ties.
    """
    depth = max(CUTOFFS)
    search = {"limit": depth, "match_mode": match_mode, "mode": search_mode, "project": None}
    # Warm caches (and load the model).
    store.search(questions[0]["question"], **search, record_access=False)
    hits = dict.fromkeys(CUTOFFS, 0)
    reciprocal = 0.0
    latencies: list[float] = []
    misses: list[str] = []
    ranks: list[tuple[str, int | None]] = []
    for question in questions:
        wanted = {ids[key] for key in question["answers"]}
        started = time.perf_counter()
        found = store.search(question["question"], **search, record_access=count_reads)
        latencies.append((time.perf_counter() - started) * 1000)
        rank = next((i for i, obs in enumerate(found, 1) if obs.id in wanted), None)
        ranks.append((question.get("kind", "question"), rank))
        if rank is None:
            misses.append(question["question"])
            continue
        reciprocal += 1 / rank
        for cutoff in CUTOFFS:
            hits[cutoff] += rank <= cutoff
    total = len(questions)
    latencies.sort()
    by_kind = {}
    for kind in QUESTION_KINDS:
        of_kind = [r for k, r in ranks if k == kind]
        if of_kind:
            by_kind[kind] = {
                "questions": len(of_kind),
                "hit_at_10": round(sum(r is not None for r in of_kind) / len(of_kind), 4),
                "mrr": round(sum(1 / r for r in of_kind if r) / len(of_kind), 4),
            }
    return ModeResult(
        name=name,
        search_mode=search_mode,
        match_mode=match_mode,
        context_weight=float(store.config.search_context_weight),
        hit_at_1=hits[1] / total,
        hit_at_5=hits[5] / total,
        hit_at_10=hits[10] / total,
        mrr=reciprocal / total,
        latency_mean_ms=statistics.fmean(latencies),
        latency_p50_ms=_percentile(latencies, 0.50),
        latency_p95_ms=_percentile(latencies, 0.95),
        by_kind=by_kind,
        misses=misses,
    )


def check_truth(store: Store, truth: dict[str, Any]) -> dict[str, Any]:
    """Add the truth scenario to ``store``, apply its edits and deletes, and score its
    questions: forbidden memories found (must be 0) and answers found, per kind."""
    ids: dict[str, int] = {}
    for session in truth["sessions"]:
        for item in session["items"]:
            if "prompt" in item:
                store.add_prompt(
                    item["prompt"], session_id=session["id"], project=session["project"]
                )
                continue
            saved = store.add_observation(
                title=item["title"], content=item["content"], type=item["type"],
                session_id=session["id"], project=session["project"],
            )  # fmt: skip
            ids[item["key"]] = saved.observation.id
    for item in truth["sessionless"]:  # no session: plain CLI/HTTP saves
        saved = store.add_observation(
            title=item["title"], content=item["content"], type=item["type"], project=item["project"]
        )
        ids[item["key"]] = saved.observation.id
    for change in truth["changes"]:
        oid = ids[change["key"]]
        if change["action"] == "edit":
            store.update_observation(oid, title=change.get("title"), content=change.get("content"))
        else:
            store.delete_observation(oid, hard=change["action"] == "hard_delete")
    kinds: dict[str, dict[str, int]] = {}
    failures: list[str] = []
    for question in truth["questions"]:
        found = [o.id for o in store.search(question["question"], limit=10, mode="lexical")]
        tally = kinds.setdefault(question.get("kind", "other"), {
            "questions": 0, "forbidden_found": 0, "with_answers": 0, "answered": 0})  # fmt: skip
        tally["questions"] += 1
        if any(ids[k] in found for k in question.get("forbidden", [])):
            tally["forbidden_found"] += 1
            failures.append(f"forbidden found: {question['question']}")
        if question.get("answers"):
            tally["with_answers"] += 1
            if any(ids[k] in found for k in question["answers"]):
                tally["answered"] += 1
            else:
                failures.append(f"answer missing: {question['question']}")
    return {
        "questions": len(truth["questions"]),
        "forbidden_found": sum(t["forbidden_found"] for t in kinds.values()),
        "answered": sum(t["answered"] for t in kinds.values()),
        "with_answers": sum(t["with_answers"] for t in kinds.values()),
        "by_kind": kinds,
        "failures": failures,
    }


def compare_exact(dataset: Dataset, distractors: int, seed: int, quiet: bool) -> dict[str, Any]:
    """Search every question with pruning and with exact ranking on a store of
    ``distractors`` + the labelled memories; count the questions whose top 10 differ."""
    with tempfile.TemporaryDirectory(prefix="engram-retrieval-exact-") as tmp:
        data_dir = Path(tmp)
        with Store.open(config=Config(data_dir=data_dir)) as store:
            _progress(f"pruning check: adding {distractors} distractor memories …", quiet)
            add_distractors(store, distractors, seed)
            ids = add_dataset(store, dataset)
        results: dict[bool, list[list[int]]] = {}
        timing: dict[bool, list[float]] = {}
        modes: dict[bool, ModeResult] = {}
        for prune in (True, False):
            with Store.open(config=Config(data_dir=data_dir, search_pruning=prune)) as store:
                modes[prune] = evaluate(
                    store, dataset.questions, ids, "pruned" if prune else "exact", "any"
                )
                results[prune], timing[prune] = [], []
                for question in dataset.questions:
                    started = time.perf_counter()
                    # Not counted as reads: counting them changes importance between the
                    # two passes (a fold re-scores), and the tie-break with it, which is not
                    # what this compares (it made 16 of 20 differences, the 4 left are
                    # pruning's).
                    found = store.search(
                        question["question"], limit=10, mode="lexical", record_access=False
                    )
                    timing[prune].append((time.perf_counter() - started) * 1000)
                    results[prune].append([o.id for o in found])
    differ = sum(a != b for a, b in zip(results[True], results[False], strict=True))
    return {
        "memories": distractors + dataset.memory_count,
        "questions": len(dataset.questions),
        "top10_differs": differ,
        "top10_differs_share": round(differ / len(dataset.questions), 4),
        "pruned": {"hit_at_10": round(modes[True].hit_at_10, 4), "mrr": round(modes[True].mrr, 4),
                   "latency_p50_ms": round(statistics.median(timing[True]), 3)},
        "exact": {"hit_at_10": round(modes[False].hit_at_10, 4), "mrr": round(modes[False].mrr, 4),
                  "latency_p50_ms": round(statistics.median(timing[False]), 3)},
    }  # fmt: skip


def _rounded(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}


def _progress(message: str, quiet: bool) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def run(
    dataset: Dataset,
    distractors: int,
    seed: int,
    extra_weights: list[float],
    quiet: bool = False,
    truth: dict[str, Any] | None = None,
    exact_distractors: int = 0,
    with_semantic: bool = True,
) -> dict[str, Any]:
    """Build the store in a temporary directory, run every mode, return the figures (the
    semantic and hybrid modes when the extra is installed and ``with_semantic``)."""
    with_semantic = with_semantic and semantic.available()
    with tempfile.TemporaryDirectory(prefix="engram-retrieval-") as tmp:
        data_dir = Path(tmp)
        default_weight = Config(data_dir=data_dir).search_context_weight
        started = time.perf_counter()
        with Store.open(config=Config(data_dir=data_dir)) as store:
            if distractors:
                _progress(f"adding {distractors} distractor memories …", quiet)
                add_distractors(store, distractors, seed)
            _progress(f"replaying {len(dataset.sessions)} labelled sessions …", quiet)
            ids = add_dataset(store, dataset)
            vectorize_seconds = None
            if with_semantic:
                _progress("embedding every memory …", quiet)
                vectorize_seconds = store.vectorize().seconds
        build_seconds = time.perf_counter() - started
        _progress(f"searching {len(dataset.questions)} questions per mode …", quiet)
        # (name, match_mode, context weight, importance breaks ties, reads counted)
        plans = [
            ("any + context", "any", default_weight, "lexical", True, False),
            ("any, no context", "any", 0.0, "lexical", True, False),
            ("all + context", "all", default_weight, "lexical", True, False),
            ("all, no context", "all", 0.0, "lexical", True, False),
            # Importance as a tie-breaker must lose nothing (docs/importance.md): the same
            # default mode with ties left in BM25 order, and with reads counted (its cost).
            ("any + ctx, no tie-break", "any", default_weight, "lexical", False, False),
            ("any + ctx, reads count", "any", default_weight, "lexical", True, True),
        ]
        plans += [(f"any, context {w:g}", "any", w, "lexical", True, False) for w in extra_weights]
        if with_semantic:
            plans += [
                ("hybrid", "any", default_weight, "hybrid", True, False),
                ("semantic", "any", default_weight, "semantic", True, False),
            ]
        modes = []
        for name, match_mode, weight, search_mode, tiebreak, count_reads in plans:
            config = Config(
                data_dir=data_dir, search_context_weight=weight, importance_tiebreak=tiebreak
            )
            with Store.open(config=config) as store:
                modes.append(
                    evaluate(
                        store, dataset.questions, ids, name, match_mode, search_mode, count_reads
                    )
                )
        truth_report = None
        if truth is not None:
            _progress("truth: edits, deletes and sessionless saves …", quiet)
            with Store.open(config=Config(data_dir=data_dir)) as store:
                truth_report = check_truth(store, truth)
    exact = compare_exact(dataset, exact_distractors, seed, quiet) if exact_distractors else None
    return {
        "dataset": {
            "sessions": len(dataset.sessions),
            "memories": dataset.memory_count,
            "prompts": dataset.prompt_count,
            "questions": len(dataset.questions),
        },
        "distractors": distractors,
        "seed": seed,
        "build_seconds": round(build_seconds, 2),
        "vectorize_seconds": vectorize_seconds,
        "baseline": "any, no context",
        "modes": [_rounded(asdict(mode)) for mode in modes],
        "truth": truth_report,
        "pruning": exact,
    }


def render_table(report: dict[str, Any], show_misses: bool) -> str:
    d = report["dataset"]
    total = d["memories"] + report["distractors"]
    lines = [
        f"Retrieval benchmark: {d['questions']} questions over {d['memories']} labelled memories "
        f"({d['sessions']} sessions, {d['prompts']} prompts) + {report['distractors']} distractors "
        f"= {total} memories; store built in {report['build_seconds']:.1f} s",
        "",
        f"{'mode':<24} {'weight':>6} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'MRR':>6} "
        f"{'vs base':>8} {'mean ms':>8} {'p50 ms':>7} {'p95 ms':>7}",
    ]
    base = next(m for m in report["modes"] if m["name"] == report["baseline"])
    for m in report["modes"]:
        ratio = m["hit_at_10"] / base["hit_at_10"] if base["hit_at_10"] else float("nan")
        lines.append(
            f"{m['name']:<24} {m['context_weight']:>6.2f} {m['hit_at_1']:>6.3f} {m['hit_at_5']:>6.3f} "
            f"{m['hit_at_10']:>6.3f} {m['mrr']:>6.3f} {ratio:>7.2f}x {m['latency_mean_ms']:>8.2f} "
            f"{m['latency_p50_ms']:>7.2f} {m['latency_p95_ms']:>7.2f}"
        )
    lines.append("")
    lines.append(
        "'vs base' = hit@10 relative to match_mode=any without the session-context column."
    )
    lines.append(
        "Importance breaks near ties in every mode but 'no tie-break'; only 'reads count' "
        "counts each result as a read (the default outside this benchmark)."
    )
    truth = report.get("truth")
    if truth:
        lines += [
            "",
            f"truth ({truth['questions']} questions after edits, deletes and sessionless saves): "
            f"forbidden memories found {truth['forbidden_found']} (target 0), "
            f"answers found {truth['answered']}/{truth['with_answers']}",
        ]
        for kind, tally in truth["by_kind"].items():
            lines.append(
                f"  {kind:<12} {tally['questions']} questions, forbidden found "
                f"{tally['forbidden_found']}, answered {tally['answered']}/{tally['with_answers']}"
            )
        lines.extend(f"  - {failure}" for failure in truth["failures"])
    exact = report.get("pruning")
    if exact:
        lines += [
            "",
            f"pruning vs exact ranking ({exact['memories']} memories, {exact['questions']} "
            f"questions): top 10 differs on {exact['top10_differs']} "
            f"({exact['top10_differs_share']:.1%}, target < 5%)",
            f"  pruned: hit@10 {exact['pruned']['hit_at_10']:.3f}, MRR {exact['pruned']['mrr']:.3f}, "
            f"p50 {exact['pruned']['latency_p50_ms']:.2f} ms",
            f"  exact:  hit@10 {exact['exact']['hit_at_10']:.3f}, MRR {exact['exact']['mrr']:.3f}, "
            f"p50 {exact['exact']['latency_p50_ms']:.2f} ms",
        ]
    kinds = [k for k in QUESTION_KINDS if any(k in m["by_kind"] for m in report["modes"])]
    lines += [
        "",
        "hit@10 / MRR by kind of question:",
        f"  {'mode':<18}"
        + "".join(
            f" {k + ' (' + str(report['modes'][0]['by_kind'][k]['questions']) + ')':>22}"
            for k in kinds
        ),
    ]
    for m in report["modes"]:
        cells = "".join(
            f" {m['by_kind'][k]['hit_at_10']:>10.3f} / {m['by_kind'][k]['mrr']:.3f}"
            if k in m["by_kind"]
            else f" {'-':>22}"
            for k in kinds
        )
        lines.append(f"  {m['name']:<18}{cells}")  # indented: one line per mode starts with it
    if show_misses:
        for m in report["modes"]:
            lines.append("")
            lines.append(f"not in the top 10 with '{m['name']}' ({len(m['misses'])}):")
            lines.extend(f"  - {q}" for q in m["misses"])
    return "\n".join(lines)


def _weights(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError("context weights cannot be negative")
    return values


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("cannot be negative")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Hit@k, MRR and latency of store.search on a labelled set of conversational "
        "questions, with and without the session-context column."
    )
    parser.add_argument(
        "--distractors",
        type=_count,
        default=2000,
        help="generated notes from other sessions added first (default 2000)",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="seed of the distractor generator"
    )
    parser.add_argument(
        "--weights",
        type=_weights,
        default=[],
        help="extra context weights to try with match_mode=any, e.g. 0.25,0.75,1.0",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA_DIR,
        help="directory holding sessions.json and questions.json",
    )
    parser.add_argument(
        "--show-misses",
        action="store_true",
        help="list the questions each mode did not find in its top 10",
    )
    parser.add_argument(
        "--exact-distractors",
        type=_count,
        default=EXACT_DISTRACTORS,
        help="distractors of the store that compares pruned and exact ranking "
        f"(default {EXACT_DISTRACTORS:,}; 0 skips that check)",
    )
    parser.add_argument(
        "--lexical-only",
        action="store_true",
        help="skip the semantic and hybrid modes (they run when the semantic extra is installed)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    try:
        dataset = load_dataset(args.data)
        truth = load_truth(args.data) if (args.data / "truth.json").exists() else None
    except DatasetError as exc:
        print(f"retrieval_bench: bad data set: {exc}", file=sys.stderr)
        return 2
    report = run(
        dataset,
        args.distractors,
        args.seed,
        args.weights,
        quiet=args.json,
        truth=truth,
        exact_distractors=args.exact_distractors,
        with_semantic=not args.lexical_only,
    )
    if args.json:
        if not args.show_misses:
            for mode in report["modes"]:
                del mode["misses"]
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render_table(report, args.show_misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
