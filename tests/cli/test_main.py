"""The ``engram`` entry point: one command's parser is built to run it (start-up time), and the
command map it uses never drifts from what the ``cmd_*`` modules register."""

from __future__ import annotations

import argparse
import importlib

import pytest

from engram.cli import main


def test_every_command_is_mapped_to_the_module_that_registers_it() -> None:
    registered: dict[str, str] = {}
    for name in main.command_modules():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"engram.cli.{name}").register(sub)
        registered.update(dict.fromkeys(sub.choices, name))
    assert registered == main.COMMAND_MODULES


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["save", "t", "c"], "save"),
        (["--json", "search", "q"], "search"),
        (["--help"], None),
        (["-h", "save"], None),
        ([], None),
        (["--version"], None),
        (["no-such-command"], "no-such-command"),
    ],
)
def test_the_command_word(argv: list[str], command: str | None) -> None:
    assert main._command(argv) == command


def test_a_command_builds_only_its_own_parser() -> None:
    parser = main.build_parser("save")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {c for c, m in main.COMMAND_MODULES.items() if m == "cmd_memory"}
    everything = main.build_parser(None)
    sub = next(a for a in everything._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(main.COMMAND_MODULES)


def test_an_unknown_command_still_lists_every_command(capsys: pytest.CaptureFixture) -> None:
    # a usage error: exit status 2, reported by main() itself (issue 17: as JSON with --json)
    assert main.main(["no-such-command"]) == main.EXIT_USAGE
    err = capsys.readouterr().err
    assert "invalid choice" in err and "'save'" in err and "'cloud'" in err
