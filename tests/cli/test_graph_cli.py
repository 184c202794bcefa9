"""``engram graph`` through real processes (issue 20): query, show, ingest, relate, judge,
conflicts; human text and --json; bad input is one line on stderr and exit 1."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.cli.test_cli import fails, ok

MEMORIES = [
    (
        "Auth middleware",
        "The auth middleware validates the JWT and loads the user from the session cache.",
    ),
    ("Session cache", "The session cache reads entries from the session store when a key expires."),
    ("Session store", "We keep sessions in Redis with a 30 minute TTL"),
    ("Session store", "We keep sessions in PostgreSQL with a 30 minute TTL"),
]


def seed(data_dir: Path) -> list[int]:
    return [
        orjson.loads(ok("save", t, c, "--project", "acme", "--json", data_dir=data_dir).stdout)[
            "id"
        ]
        for t, c in MEMORIES
    ]


def test_graph_commands(data_dir: Path) -> None:
    ids = seed(data_dir)
    done = ok("graph", "ingest", "--project", "acme", data_dir=data_dir).stdout
    assert "Graph of project 'acme': 4 memories read" in done
    again = orjson.loads(ok("graph", "ingest", "--all", "--json", data_dir=data_dir).stdout)
    assert again["memories"] == 0 and again["remaining"] == 0
    answer = ok(
        "graph", "query", "what connects the auth middleware to the session store?",
        "--project", "acme", data_dir=data_dir,
    ).stdout  # fmt: skip
    assert answer.startswith("What connects auth middleware and session store:")
    assert (
        f'auth middleware —reads_from→ session cache  (0.90) from #{ids[0]} "Auth middleware"'
        in answer
    )
    shown = ok("graph", "show", "session cache", "--project", "acme", data_dir=data_dir).stdout
    assert shown.startswith("session cache (service):") and "—reads_from→ session store" in shown
    # The two "Session store" memories conflict: found on the first read after the saves.
    conflicts = orjson.loads(
        ok("graph", "conflicts", "--project", "acme", "--json", data_dir=data_dir).stdout
    )
    [conflict] = conflicts
    assert (conflict["source"]["id"], conflict["target"]["id"]) == (ids[3], ids[2])
    memory = ok("graph", "show", f"#{ids[2]}", data_dir=data_dir).stdout
    assert "Review: needs review" in memory and f"contested by #{ids[3]}" in memory
    judged = ok(
        "graph", "judge", conflict["sync_id"], "judged", "--as", "supersedes", data_dir=data_dir
    ).stdout
    assert judged.startswith(
        f"Relation {conflict['sync_id']}: #{ids[3]} supersedes #{ids[2]} (judged)"
    )
    got = ok("get", str(ids[2]), data_dir=data_dir).stdout
    assert f"superseded by #{ids[3]} (Session store)  [{conflict['sync_id']}]" in got
    found = ok("search", "sessions redis", "--project", "acme", data_dir=data_dir).stdout
    assert f"↳ supersedes #{ids[2]} (Session store)" in found
    assert found.index(f"#{ids[3]} ") < found.index(f"#{ids[2]} ")
    made = orjson.loads(
        ok(
            "graph", "relate", str(ids[0]), "related", str(ids[1]), "--json", data_dir=data_dir
        ).stdout
    )
    assert made["relation"] == "related" and made["state"] == "judged"


def test_graph_errors(data_dir: Path) -> None:
    ids = seed(data_dir)
    other = orjson.loads(
        ok("save", "W", "widgets", "--project", "widgets", "--json", data_dir=data_dir).stdout
    )["id"]
    assert "never links two projects" in fails(
        "graph", "relate", str(ids[0]), "related", str(other), data_dir=data_dir
    )
    assert "relation must be one of" in fails(
        "graph", "relate", str(ids[0]), "loves", str(ids[1]), data_dir=data_dir
    )
    assert "#999 not found" in fails(
        "graph", "relate", str(ids[0]), "related", "999", data_dir=data_dir
    )
    assert "not found" in fails("graph", "judge", "rel-nothing", "judged", data_dir=data_dir)
    assert "question cannot be empty" in fails(
        "graph", "query", " ", "--project", "acme", data_dir=data_dir
    )
    assert "ANTHROPIC_API_KEY" in fails(
        "graph",
        "ingest",
        "--llm",
        "--project",
        "acme",
        data_dir=data_dir,
        env={"ANTHROPIC_API_KEY": ""},
    )
    bad = ok("graph", "show", "nothing at all", "--project", "acme", data_dir=data_dir).stdout
    assert bad.startswith('No entity "nothing at all"')
