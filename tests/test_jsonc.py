"""JSONC: reading files with comments and trailing commas, and changing one member in place."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram import jsonc

VSCODE = """// VS Code user MCP servers
{
  /* servers the editor starts */
  "servers": {
    "other": {
      "command": "other-mcp", // keep me
      "args": [],
    },
  },
  "inputs": [],
}
"""


def test_comments_and_trailing_commas_are_read() -> None:
    assert jsonc.loads(VSCODE) == {
        "servers": {"other": {"command": "other-mcp", "args": []}},
        "inputs": [],
    }


def test_comment_markers_inside_strings_are_text() -> None:
    text = '{"url": "http://x/*y*/", "c": "// not a comment", "q": "say \\"hi\\" // x",}'
    assert jsonc.loads(text) == {
        "url": "http://x/*y*/",
        "c": "// not a comment",
        "q": 'say "hi" // x',
    }


def test_adding_a_member_keeps_every_other_byte() -> None:
    entry = {"type": "stdio", "command": "/bin/engram", "args": ["mcp"]}
    out = jsonc.set_member(VSCODE, ("servers", "engram"), entry)
    assert jsonc.loads(out)["servers"] == {
        "engram": entry,
        "other": {"command": "other-mcp", "args": []},
    }
    for kept in ("// VS Code user MCP servers", "/* servers the editor starts */", "// keep me"):
        assert kept in out
    # Only an insertion: removing the new member's text gives the original back.
    assert out.count('"args": [],') == 1 and out.endswith('  "inputs": [],\n}\n')


def test_replacing_a_member_rewrites_only_that_member() -> None:
    text = '{\n  // mine\n  "mcp": {\n    "engram": {"type": "local"}, // old\n  },\n}\n'
    out = jsonc.set_member(text, ("mcp", "engram"), {"type": "local", "enabled": True})
    assert jsonc.loads(out) == {"mcp": {"engram": {"type": "local", "enabled": True}}}
    assert "// mine" in out and "// old" in out


def test_missing_containers_are_created() -> None:
    out = jsonc.set_member('{\n  "theme": "dark", // pretty\n}\n', ("mcp", "engram"), {"a": 1})
    assert jsonc.loads(out) == {"mcp": {"engram": {"a": 1}}, "theme": "dark"}
    assert "// pretty" in out


def test_an_empty_object_holding_a_comment_keeps_it() -> None:
    out = jsonc.set_member('{\n  "servers": { /* none yet */ }\n}', ("servers", "x"), 1)
    assert jsonc.loads(out) == {"servers": {"x": 1}}
    assert "/* none yet */" in out


def test_indentation_of_the_file_is_followed() -> None:
    text = '{\n\t"servers": {\n\t\t"a": 1\n\t}\n}'
    out = jsonc.set_member(text, ("servers", "b"), {"k": [1]})
    assert '\t\t"b": {\n\t\t\t"k": [\n\t\t\t\t1\n\t\t\t]\n\t\t},' in out


@pytest.mark.parametrize(
    "text",
    ['{"a": 1 /* open', '{"a": "open', '{"a": }', "[1, 2", '{"a": 1} trailing'],
)
def test_broken_text_is_an_error(text: str) -> None:
    with pytest.raises(jsonc.JsoncError):
        jsonc.loads(text)


def test_a_non_object_on_the_path_is_refused() -> None:
    with pytest.raises(jsonc.JsoncError, match='"servers" is not an object'):
        jsonc.set_member('{"servers": [1]}', ("servers", "engram"), {})


KEYS = st.text(alphabet="abcxyz_-/* ", min_size=1, max_size=6)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


def _commented(value: object, comments: list[str]) -> str:
    """``value`` as JSON with a comment after every comma."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    out = []
    for number, line in enumerate(text.split("\n")):
        if line.endswith(","):
            line += f" {comments[number % len(comments)]}"
        out.append(line)
    return "\n".join(out)


@settings(max_examples=150, deadline=None)
@given(
    doc=st.dictionaries(KEYS, VALUES, max_size=4),
    key=KEYS,
    value=VALUES,
    comments=st.lists(st.sampled_from(["// c", "/* c, } ] */", '// "quoted"']), min_size=1),
)
def test_setting_a_member_equals_setting_it_in_the_data(
    doc: dict, key: str, value: object, comments: list[str]
) -> None:
    text = _commented({"servers": doc, "other": [1, 2]}, comments)
    out = jsonc.set_member(text, ("servers", key), value)
    assert jsonc.loads(out) == {"servers": {**doc, key: value}, "other": [1, 2]}
