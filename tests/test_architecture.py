"""docs/architecture.md draws the code as a tree with one line per module: it must list every
module of engram/ and cloud/ (and no module that is gone); a module over 500 lines says why."""

from __future__ import annotations

import re

from tests.support import REPO


def _drawn() -> set[str]:
    text = (REPO / "docs" / "architecture.md").read_text()
    block = re.search(r"```text\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```text tree"
    drawn: set[str] = set()
    stack: list[str] = []
    for line in block.group(1).splitlines():
        match = re.match(r"^( *)(\S+)", line)
        if not match:
            continue
        depth, name = len(match.group(1)) // 2, match.group(2)
        stack = stack[:depth]
        if name.endswith("/"):
            stack.append(name.rstrip("/"))
        elif name.endswith(".py"):
            drawn.add("/".join([*stack, name]))
    return drawn


def test_the_tree_lists_every_module_and_only_those() -> None:
    actual = {
        str(path.relative_to(REPO))
        for root in ("engram", "cloud")
        for path in (REPO / root).rglob("*.py")
        if path.name != "__init__.py"
    }
    drawn = _drawn()
    assert actual - drawn == set(), "modules missing from docs/architecture.md"
    assert drawn - actual == set(), "modules drawn in docs/architecture.md that do not exist"


#: A module longer than this says at its top why (a ``Size:`` paragraph in its docstring).
LONG_MODULE_LINES = 500


def test_long_modules_say_why_they_are_long() -> None:
    import ast

    unexplained = []
    for root in ("engram", "cloud"):
        for path in (REPO / root).rglob("*.py"):
            text = path.read_text()
            if text.count("\n") <= LONG_MODULE_LINES:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Size:" not in doc:
                unexplained.append(str(path.relative_to(REPO)))
    assert unexplained == [], "modules over 500 lines without a 'Size:' reason at their top"
