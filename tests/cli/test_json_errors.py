"""``--json`` is uniform (issue 17, item 7): every failure — a usage error argparse refuses, a
store error, a cloud error — is one ``{"error": "..."}`` object on stdout, and with ``--json``
nothing is written to stderr, so a script reads every outcome from one stream."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.support import run_engram


def test_usage_errors_are_json_with_the_flag(data_dir: Path) -> None:
    for args in (["search", "--json"], ["--json", "search"], ["--json", "nosuchcommand"],
                 ["save", "only-a-title", "--json"], ["search", "x", "--limit", "many", "--json"]):  # fmt: skip
        result = run_engram(*args, data_dir=data_dir)
        assert result.returncode == 2, args
        assert result.stderr == "", args
        error = orjson.loads(result.stdout)
        assert isinstance(error["error"], str) and error["error"].startswith("engram"), args
        assert error["usage"].startswith("usage: engram"), args


def test_usage_errors_stay_argparse_text_without_the_flag(data_dir: Path) -> None:
    result = run_engram("search", data_dir=data_dir)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: engram search")
    assert result.stderr.rstrip().endswith(
        "engram search: error: the following arguments are required: query"
    )


def test_a_json_after_double_dash_is_text_not_the_flag(data_dir: Path) -> None:
    result = run_engram("save", "--", data_dir=data_dir)
    assert result.returncode == 2 and result.stdout == "" and "usage:" in result.stderr


def test_errors_go_to_stdout_only_with_json(data_dir: Path) -> None:
    result = run_engram("get", "42", "--json", data_dir=data_dir)
    assert result.returncode == 1
    assert result.stderr == ""
    assert orjson.loads(result.stdout) == {"error": "Observation #42 not found"}
    human = run_engram("get", "42", data_dir=data_dir)
    assert human.returncode == 1 and human.stdout == ""
    assert human.stderr == "engram: error: Observation #42 not found\n"
