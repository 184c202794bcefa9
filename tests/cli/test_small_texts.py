"""The small things a new user reads (issue 17 item 13): counts in the right number, the
project list's columns aligned whatever the names, the timeline's focused memory indented on
every line."""

from __future__ import annotations

from pathlib import Path

import orjson

from engram.store import Store
from engram.text import plural
from tests.support import run_engram


def test_plural() -> None:
    assert [plural(n, "memory") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert plural(1, "chunk") == "1 chunk" and plural(3, "chunk") == "3 chunks"
    assert plural(2, "day") == "2 days" and plural(2, "change set") == "2 change sets"
    assert plural(2, "index", "indexes") == "2 indexes"


def test_one_memory_and_one_observation(data_dir: Path, store: Store) -> None:
    store.add_observation(title="Pool size", content="30 connections", project="acme")
    assert "[1 observation]" in store.context("acme")
    found = run_engram("search", "pool", data_dir=data_dir).stdout
    assert found.startswith("Found 1 memory:\n")


def test_project_columns_stay_aligned_for_long_and_wide_names(data_dir: Path) -> None:
    names = ["a", "a-really-quite-long-project-name-for-the-platform-team", "日本語プロジェクト"]
    for i, name in enumerate(names):
        for n in range(i * 11 + 1):
            run_engram("save", f"t{n}", f"c{n}", "--project", name, data_dir=data_dir)
    lines = run_engram("projects", "list", data_dir=data_dir).stdout.splitlines()
    assert lines[0] == "MEMORIES  SESSIONS  PROMPTS  PROJECT"
    # every number column ends where its header ends; the names come last
    for line in lines[1:]:
        assert line[: len(lines[0]) - len("PROJECT")].endswith("  ")
        assert line[:8].strip().isdigit() and line[8:10] == "  "
    assert [line.split("  ")[-1] for line in lines[1:]] == list(reversed(names))
    assert (
        orjson.loads(run_engram("projects", "list", "--json", data_dir=data_dir).stdout)["count"]
        == 3
    )


def test_timeline_indents_every_line_of_the_focus(data_dir: Path) -> None:
    content = "**What**: raised the pool\n**Why**: timeouts\nthird line"
    saved = run_engram("save", "Pool", content, "--project", "acme", "--json", data_dir=data_dir)
    oid = orjson.loads(saved.stdout)["id"]
    shown = run_engram("timeline", str(oid), data_dir=data_dir).stdout.splitlines()
    at = shown.index(f">>> #{oid} [manual] Pool <<<")
    assert shown[at + 1 : at + 4] == [
        "    **What**: raised the pool",
        "    **Why**: timeouts",
        "    third line",
    ]
