"""Deterministic, realistic developer-note text for benchmarks (memories and queries).

Every benchmark that needs a large store builds it from here, so figures are comparable.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

PROJECTS = [
    "acme-web",
    "billing-api",
    "infra",
    "data-pipeline",
    "mobile-app",
    "cli-tool",
    "docs-site",
]
TYPES = ["bugfix", "decision", "architecture", "discovery", "pattern", "config", "learning"]
COMPONENTS = [
    "login form",
    "session cache",
    "payment webhook",
    "CSV importer",
    "search index",
    "rate limiter",
    "auth middleware",
    "image resizer",
    "email queue",
    "feature flags",
    "background worker",
    "GraphQL resolver",
    "migration runner",
    "CI pipeline",
    "Docker build",
    "websocket gateway",
    "S3 uploader",
    "PDF export",
    "onboarding wizard",
    "audit log",
    "retry policy",
    "connection pool",
    "cron scheduler",
    "metrics exporter",
    "config loader",
    "TLS termination",
    "dark mode toggle",
]
PROBLEMS = [
    "timed out after 30 seconds",
    "leaked database connections",
    "returned stale data",
    "crashed on empty input",
    "double-charged customers",
    "dropped messages under load",
    "deadlocked during deploys",
    "ignored the timezone",
    "blew up memory on large files",
    "raced with the cache invalidation",
    "failed only on ARM runners",
    "logged secrets",
    "retried forever",
    "broke on unicode filenames",
    "was slow on cold start",
]
FIXES = [
    "added an index on the lookup column",
    "moved the work to a background job",
    "switched to streaming reads",
    "wrapped the write in a transaction",
    "pinned the library version",
    "added exponential backoff with jitter",
    "normalized timestamps to UTC at the edge",
    "capped the pool size and added a health check",
    "made the handler idempotent with a request id",
    "replaced the regex with a proper parser",
    "cached the result for five minutes",
    "validated input with a schema before processing",
    "split the job into batches of 500",
]
LIBRARIES = [
    "SQLAlchemy",
    "Redis",
    "Celery",
    "FastAPI",
    "React Query",
    "Postgres",
    "nginx",
    "Kafka",
    "boto3",
    "pydantic",
    "Terraform",
    "GitHub Actions",
    "Sentry",
    "uvicorn",
    "Playwright",
]
LESSONS = [
    "the staging data never had more than a thousand rows",
    "the default timeout is far too generous",
    "retries without jitter made the outage worse",
    "the bug only appears with daylight saving time",
    "our mocks hid the real driver behaviour",
    "the vendor SDK swallows errors silently",
    "load tests must use production-sized payloads",
    "feature flags need an owner and an expiry",
]
FILES = [
    "src/auth/session.py",
    "api/webhooks.py",
    "workers/email.py",
    "infra/main.tf",
    "app/cache.ts",
    "pipeline/ingest.py",
    "cli/commands/sync.go",
    "web/components/Login.tsx",
    "db/migrations/0042.sql",
    ".github/workflows/ci.yml",
    "docker/Dockerfile",
    "lib/retry.ts",
    "settings/base.py",
]
QUESTION_FORMS = [
    "how did we fix the {c} that {p}?",
    "why did the {c} {p}?",
    "{c} {p}",
    "what did we learn about {lib}?",
    "which change fixed the {c}?",
    "did we ever see the {c} problem before?",
    "{lib} {c}",
    "what was the decision about the {c}",
    "where is the {c} code that {p}",
    "remember the {c} issue?",
]


def note(rng: random.Random, i: int) -> dict[str, str]:
    component, problem, fix = rng.choice(COMPONENTS), rng.choice(PROBLEMS), rng.choice(FIXES)
    library, lesson, path = rng.choice(LIBRARIES), rng.choice(LESSONS), rng.choice(FILES)
    kind = rng.choice(TYPES)
    title = {
        "bugfix": f"Fixed {component} that {problem}",
        "decision": f"Chose {library} for the {component}",
        "architecture": f"{component.capitalize()} now goes through {library}",
        "discovery": f"Found why the {component} {problem}",
        "pattern": f"Pattern: {fix} in the {component}",
        "config": f"Configured {library} for the {component}",
        "learning": f"Learned: {lesson}",
    }[kind]
    content = (
        f"**What**: {fix} for the {component} (case {i}).\n"
        f"**Why**: the {component} {problem} in production; users noticed within hours.\n"
        f"**Where**: {path}, plus the {library} settings.\n"
        f"**Learned**: {lesson}."
    )
    return {"title": title, "content": content, "type": kind, "project": rng.choice(PROJECTS)}


def notes(n: int, seed: int = 42) -> Iterator[dict[str, str]]:
    rng = random.Random(seed)
    for i in range(n):
        yield note(rng, i)


def queries(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(QUESTION_FORMS).format(
            c=rng.choice(COMPONENTS), p=rng.choice(PROBLEMS), lib=rng.choice(LIBRARIES)
        )
        for _ in range(n)
    ]


def export_document(n: int, seed: int = 42, per_session: int = 8) -> dict:
    """An ``engram export`` document (version 0.1.0) holding ``n`` observations."""
    sessions, observations = [], []
    for i, item in enumerate(notes(n, seed)):
        session_id = f"bench-{i // per_session}"
        if i % per_session == 0:
            sessions.append(
                {
                    "id": session_id,
                    "project": item["project"],
                    "directory": f"/src/{item['project']}",
                    "started_at": "2026-01-01 00:00:00",
                }
            )
        stamp = f"2026-{1 + (i // 200000) % 12:02d}-{1 + (i // 8000) % 28:02d} {(i // 400) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}"
        observations.append(
            {
                "sync_id": f"obs-{i:016x}",
                "session_id": session_id,
                **item,
                "scope": "project",
                "created_at": stamp,
                "updated_at": stamp,
            }
        )
    return {
        "version": "0.1.0",
        "exported_at": "2026-01-01 00:00:00",
        "sessions": sessions,
        "observations": observations,
        "prompts": [],
    }
