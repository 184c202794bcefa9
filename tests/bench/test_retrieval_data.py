"""The retrieval benchmark's labelled data set is well formed, and the script runs on it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from engram import semantic
from engram.settings import Config
from engram.store import Store
from tests.support.bench_scripts import load

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "retrieval_bench.py"
DATA = REPO / "bench" / "data" / "retrieval"
MODES = ["any + context", "any, no context", "all + context", "all, no context"]
#: With the semantic extra the script also runs the hybrid and semantic modes.
SEMANTIC_MODES = ["hybrid", "semantic"] if semantic.available() else []


bench = load("retrieval_bench")


@pytest.fixture(scope="module")
def dataset():
    return bench.load_dataset(DATA)


def _memories(dataset) -> list[dict]:
    return [item for s in dataset.sessions for item in s["items"] if "key" in item]


def test_data_set_size_and_spread(dataset) -> None:
    assert len(dataset.sessions) >= 40
    assert len(_memories(dataset)) >= 150
    assert len(dataset.questions) >= 100
    projects = Counter(s["project"] for s in dataset.sessions)
    assert len(projects) == 6 and min(projects.values()) >= 6
    types = Counter(m["type"] for m in _memories(dataset))
    assert set(types) == bench.MEMORY_TYPES


def test_sessions_start_with_a_prompt_and_memories_are_structured(dataset) -> None:
    for session in dataset.sessions:
        assert "prompt" in session["items"][0], session["id"]
        for memory in (item for item in session["items"] if "key" in item):
            content = memory["content"]
            positions = [
                content.find(f"**{part}**:") for part in ("What", "Why", "Where", "Learned")
            ]
            assert -1 not in positions and positions == sorted(positions), memory["key"]


def test_questions_are_not_copies_of_titles_or_prompts(dataset) -> None:
    titles = {m["title"].casefold() for m in _memories(dataset)}
    prompts = {
        i["prompt"].casefold() for s in dataset.sessions for i in s["items"] if "prompt" in i
    }
    for question in dataset.questions:
        text = question["question"].casefold()
        assert text not in titles and text not in prompts, question["question"]


def test_question_projects_match_their_answers(dataset) -> None:
    project_of = {
        item["key"]: s["project"] for s in dataset.sessions for item in s["items"] if "key" in item
    }
    for question in dataset.questions:
        if "project" in question:
            assert {project_of[a] for a in question["answers"]} == {question["project"]}, question


@pytest.mark.parametrize("name", ["sessions.json", "questions.json"])
def test_files_are_pretty_printed_json(name: str) -> None:
    raw = (DATA / name).read_bytes()
    assert raw == orjson.dumps(orjson.loads(raw), option=orjson.OPT_INDENT_2) + b"\n"


def _write(directory: Path, sessions, questions) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "sessions.json").write_bytes(orjson.dumps(sessions))
    (directory / "questions.json").write_bytes(orjson.dumps(questions))
    return directory


def _good_session() -> dict:
    return {
        "id": "s-1",
        "project": "acme",
        "items": [
            {"prompt": "why is the login slow"},
            {"key": "k1", "type": "bugfix", "title": "Slow login", "content": "**What**: hashing"},
        ],
    }


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s, q: q[0].update(answers=["nope"]), "unknown answer key(s) nope"),
        (lambda s, q: q[0].update(answers=[]), "'answers' must be a non-empty list"),
        (lambda s, q: q[0].update(question="  "), "needs a non-empty 'question'"),
        (lambda s, q: s[0]["items"][1].update(type="rant"), "unknown type 'rant'"),
        (lambda s, q: s[0]["items"][1].update(title=""), "memory needs a non-empty 'title'"),
        (lambda s, q: s[0]["items"].append(dict(s[0]["items"][1])), "duplicate memory key 'k1'"),
        (lambda s, q: s.append(dict(s[0])), "duplicate session id 's-1'"),
        (lambda s, q: s[0]["items"][0].update(extra=1), "a prompt item is exactly"),
        (lambda s, q: s[0].update(items=[]), "'items' must be a non-empty list"),
    ],
)
def test_malformed_data_sets_are_rejected_clearly(tmp_path: Path, mutate, message: str) -> None:
    sessions = [_good_session()]
    questions = [{"question": "how did we fix the slow login?", "answers": ["k1"]}]
    bench.load_dataset(_write(tmp_path / "ok", sessions, questions))  # the baseline is valid
    mutate(sessions, questions)
    with pytest.raises(bench.DatasetError, match=re.escape(message)):
        bench.load_dataset(_write(tmp_path / "bad", sessions, questions))


def test_question_kinds_are_labelled_and_paraphrases_share_no_word(dataset) -> None:
    kinds = Counter(q["kind"] for q in dataset.questions)
    assert kinds["paraphrase"] >= 50 and kinds["keyword"] >= 30 and kinds["question"] >= 100
    bench.check_paraphrases(dataset.sessions, dataset.questions)  # raises on a shared word


@pytest.mark.parametrize(
    ("question", "message"),
    [
        # "logins" and "slow" are in the answer: not a paraphrase.
        ({"question": "why are logins slow?", "kind": "paraphrase"}, "shares words"),
        ({"question": "signing on took ages", "kind": "chat"}, "'kind' must be one of"),
    ],
)
def test_paraphrases_and_kinds_are_checked(tmp_path: Path, question: dict, message: str) -> None:
    good = {"question": "signing on took ages", "kind": "paraphrase", "answers": ["k1"]}
    bench.load_dataset(_write(tmp_path / "ok", [_good_session()], [good]))
    with pytest.raises(bench.DatasetError, match=message):
        bench.load_dataset(
            _write(tmp_path / "bad", [_good_session()], [{**question, "answers": ["k1"]}])
        )


def test_missing_or_broken_files_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(bench.DatasetError, match=re.escape("sessions.json: file not found")):
        bench.load_dataset(tmp_path)
    (tmp_path / "sessions.json").write_text('[{"id": "s-1",')
    (tmp_path / "questions.json").write_text("[]")
    with pytest.raises(bench.DatasetError, match=re.escape("sessions.json: not valid JSON")):
        bench.load_dataset(tmp_path)


def test_script_reports_a_bad_data_set_in_one_line(tmp_path: Path) -> None:
    _write(tmp_path, [_good_session()], [{"question": "q?", "answers": ["missing"]}])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().count("\n") == 0
    assert "unknown answer key(s) missing" in done.stderr


def test_distractors_are_deterministic_and_distinct(tmp_path: Path) -> None:
    titles = []
    for name in ("a", "b"):
        with Store.open(config=Config(data_dir=tmp_path / name)) as store:
            assert bench.add_distractors(store, 40, seed=7) == 40
            notes = store.recent_observations(limit=100)
            assert len(notes) == 40 and len({n.content for n in notes}) == 40
            titles.append(sorted((n.session_id, n.title) for n in notes))
    assert titles[0] == titles[1]


def test_script_runs_in_a_tiny_mode_with_json(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--distractors",
            "25",
            "--weights",
            "1.0",
            "--exact-distractors",
            "30",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["distractors"] == 25
    assert report["dataset"]["questions"] >= 100
    tiebreak = ["any + ctx, no tie-break", "any + ctx, reads count"]  # issue 21
    names = [*MODES, *tiebreak, "any, context 1", *SEMANTIC_MODES]
    assert [m["name"] for m in report["modes"]] == names
    weights = [m["context_weight"] for m in report["modes"]]
    assert weights == [0.5, 0.0, 0.5, 0.0, 0.5, 0.5, 1.0] + [0.5] * len(SEMANTIC_MODES)
    for mode in report["modes"]:
        assert 0 <= mode["hit_at_1"] <= mode["hit_at_5"] <= mode["hit_at_10"] <= 1
        assert mode["hit_at_1"] <= mode["mrr"] <= mode["hit_at_10"]
        assert 0 <= mode["latency_p50_ms"] <= mode["latency_p95_ms"]
        kinds = mode["by_kind"]
        assert set(kinds) == {"keyword", "question", "paraphrase"}
        assert sum(k["questions"] for k in kinds.values()) == report["dataset"]["questions"]
    # Requiring every word finds strictly fewer memories than OR-ing them.
    by_name = {m["name"]: m for m in report["modes"]}
    assert by_name["all, no context"]["hit_at_10"] < by_name["any, no context"]["hit_at_10"]
    # Issue 14: the truth questions find no replaced, deleted or unrelated memory, and the
    # pruning check compared every question.
    assert report["truth"]["forbidden_found"] == 0 and report["truth"]["questions"] >= 10
    assert report["truth"]["answered"] == report["truth"]["with_answers"]
    assert report["pruning"]["questions"] == report["dataset"]["questions"]
    assert 0 <= report["pruning"]["top10_differs"] <= report["pruning"]["questions"]


def test_human_table_lists_every_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--distractors", "0", "--show-misses", "--exact-distractors", "0"]) == 0
    out = capsys.readouterr().out
    for name in MODES:
        assert sum(line.startswith(name) for line in out.splitlines()) == 1
        assert f"not in the top 10 with '{name}'" in out
    assert "hit@10" in out and "p95 ms" in out
    assert "truth (13 questions" in out and "forbidden memories found 0" in out
