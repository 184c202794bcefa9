"""Requests the SDK cannot handle by itself get an answer at once from a real ``engram mcp``:
numbers SQLite cannot hold are tool errors (not a generic "Error executing tool" after a slow
traceback), and requests nested deeper than the SDK's JSON parser reads get a tool error or a
JSON-RPC error instead of no answer at all."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from engram.mcp.transport import envelope_of
from tests.mcp.client import call, engram_mcp, fail, saved_id
from tests.support import engram_env

HUGE = 2**70
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
#: Not a timing check: only how long a test waits before calling a missing answer a failure.
NO_ANSWER_AFTER = 60


@pytest.mark.anyio
async def test_numbers_beyond_sqlite_are_tool_errors(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all") as s:
        oid = saved_id(await call(s, "mem_save", title="Kept", content="untouched"))
        for tool, arguments in (
            ("mem_get_observation", {"id": HUGE}),
            ("mem_update", {"id": HUGE, "title": "x"}),
            ("mem_delete", {"id": HUGE}),
            ("mem_timeline", {"observation_id": HUGE}),
        ):
            error = await fail(s, tool, **arguments)
            assert error["error_code"] == "invalid_arguments", (tool, error)
            assert "less than or equal to 9223372036854775807" in error["error"]
        # counts are read as the Go tool reads them (issue 16): too many is "all there are"
        for side in ("before", "after"):
            shown = await call(s, "mem_timeline", observation_id=oid, **{side: HUGE})
            assert "Kept" in shown["result"]
        assert (await fail(s, "mem_get_observation", id=-HUGE))["error_code"] == (
            "invalid_arguments"
        )
        assert "Kept" in (await call(s, "mem_get_observation", id=oid))["result"]


class RawServer:
    """``engram mcp`` driven line by line, for requests no SDK client would send."""

    def __init__(self, data_dir: Path, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engram", "mcp", "--tools", "all"],  # admin tools too
            cwd=cwd,
            env=engram_env(data_dir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        self.send(
            orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        )
        assert self.answer(0)["result"]["serverInfo"]["name"] == "engram"
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, line: bytes | str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() if isinstance(line, str) else line)
        self.process.stdin.write(b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: object) -> dict:
        """The answer to ``request_id`` (other lines are skipped); fails if none comes."""
        out = self.process.stdout
        assert out is not None
        while True:
            ready, _, _ = select.select([out], [], [], NO_ANSWER_AFTER)
            assert ready, f"no answer to request {request_id!r}"
            line = out.readline()
            assert line, "the server closed its output"
            message = json.loads(line)  # ids may exceed 64 bits
            if message.get("id") == request_id:
                return message

    def call(self, request_id: object, tool: str, arguments: str) -> dict:
        self.send(
            f'{{"jsonrpc": "2.0", "id": {json.dumps(request_id)}, '
            f'"method": "tools/call", "params": {{"name": "{tool}", "arguments": {arguments}}}}}'
        )
        return self.answer(request_id)

    def close(self) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=30)
        self.process.stdout.close()
        return code


@pytest.fixture
def raw(data_dir: Path, workdir: Path) -> Iterator[RawServer]:
    server = RawServer(data_dir, workdir)
    yield server
    if server.process.poll() is None:
        assert server.close() == 0


def tool_error(message: dict) -> dict:
    result = message["result"]
    assert result["isError"] is True and "structuredContent" not in result
    return orjson.loads(result["content"][0]["text"])


def test_deeply_nested_arguments_get_a_tool_error_at_once(raw: RawServer) -> None:
    for request_id, arguments in (
        (1, f'{{"title": "t", "content": {DEEP}}}'),
        ("deep-object", f'{{"title": "t", "content": "c", "extra": {DEEP_OBJECT}}}'),
        (2, DEEP),  # arguments itself nested
        (HUGE, f'{{"title": "t", "content": {DEEP}}}'),  # and an id no 64-bit integer holds
    ):
        error = tool_error(raw.call(request_id, "mem_save", arguments))
        assert error["error_code"] == "invalid_arguments"
        assert error["error"].startswith("Invalid arguments for mem_save: they are nested deeper")
    saved = raw.call(3, "mem_save", '{"title": "Still serving", "content": "after deep calls"}')
    assert not saved["result"]["isError"]
    assert saved["result"]["structuredContent"]["result"].startswith('Memory saved: #1 "Still')


def test_other_requests_get_a_json_rpc_error(raw: RawServer) -> None:
    raw.send(f'{{"jsonrpc": "2.0", "id": "r-1", "method": "tools/list", "params": {DEEP_OBJECT}}}')
    deep = raw.answer("r-1")
    assert deep["error"]["code"] == -32600 and "nested deeper" in deep["error"]["message"]

    raw.send('{"jsonrpc": "1.0", "id": 41, "method": "tools/list"}')  # not JSON-RPC 2.0
    assert raw.answer(41)["error"]["code"] == -32600

    raw.send('{"jsonrpc": "2.0", "id": 42, "method": "tools/list", "params": {"x": tru}}')
    assert raw.answer(42)["error"]["code"] == -32700  # names a request, but is not JSON

    raw.send(f'{{"jsonrpc": "2.0", "id": {HUGE}, "method": "tools/list"}}')  # a valid request
    assert raw.answer(HUGE)["result"]["tools"][0]["name"] == "mem_save"
    raw.send(
        b'{"jsonrpc": "2.0", "id": 43, "method": "tools/call", "params": {"name": "mem_stats"}}'
    )
    assert "Observations: 0" in raw.answer(43)["result"]["structuredContent"]["result"]


def test_lines_that_name_no_request_still_get_no_answer(raw: RawServer) -> None:
    """A notification or garbage has no id to answer: the server stays quiet and serves on."""
    raw.send(f'{{"jsonrpc": "2.0", "method": "notifications/progress", "params": {DEEP}}}')
    raw.send(b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}')  # not a valid id
    raw.send(b"\xff\xfe garbage")
    raw.send(
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "mem_stats"}}'
    )
    answer = raw.answer(7)  # the first answer that comes is this one
    assert "Observations: 0" in answer["result"]["structuredContent"]["result"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mem_save"}}',
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "tool": "mem_save"},
        ),
        (  # order does not matter; arguments before the name
            '{"params": {"arguments": {"id": 9, "name": "x", "method": "m"}, "name": "mem_get"},'
            ' "method": "tools/call", "id": "a\\"b"}',
            {"id": 'a"b', "method": "tools/call", "tool": "mem_get"},
        ),
        (  # nested ids and names are not the envelope's
            '{"params": [{"id": 1, "name": "no"}], "x": {"id": 2}, "id": null, "method": 3}',
            {"id": None, "method": 3},
        ),
        (
            '{"id": ' + str(HUGE) + ', "method": "ping", "params": ' + DEEP + "}",
            {"id": HUGE, "method": "ping"},
        ),
        ('{"jsonrpc": "2.0", "id": 2, "method": ', {"jsonrpc": "2.0", "id": 2}),  # cut short
        ("[1, 2, 3]", {}),
        ("", {}),
        ('"just a string"', {}),
        ("}}}]]]", {}),
    ],
)
def test_the_envelope_of_a_refused_line(line: str, expected: dict) -> None:
    assert envelope_of(line) == expected
