"""The stdio transport of ``engram mcp``: the SDK's own, plus an answer for every request it
could not parse.

The SDK's stdio transport parses each line with pydantic and hands what fails to the server as
an exception, which the server only logs: the client never hears back and waits for its
timeout. That is what a request nested deeper than pydantic's JSON parser goes (about 200
levels: ``{"arguments": {"content": [[[[…]]]]}}``), as does any line that is not a valid
JSON-RPC message. :class:`AnsweringReadStream` sits between the transport and the server: when
a failed line still names a request (an ``id`` and a ``method`` can be read from it), it
answers at once — a tool error for ``tools/call`` (what agents act on), a JSON-RPC error for
anything else — and the server never sees the line. Lines that name no request (a broken
notification, garbage) are left to the SDK as before: there is no one to answer.

Reading the envelope of a line the parser refused uses :func:`envelope_of`, a scan over the
line's tokens that never recurses, so depth costs nothing but time linear in the line's size.
"""

from __future__ import annotations

import json
import re
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import pydantic
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCResponse,
)

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

#: JSON tokens: strings (with escapes), punctuation, and everything else up to a delimiter.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+')


def envelope_of(line: str) -> dict[str, Any]:
    """``id``, ``method`` and ``jsonrpc`` of a JSON-RPC line's top-level object, plus
    ``tool`` (``params.name``), for as much of each as the line holds. Never recurses, never
    raises: what cannot be read is left out."""
    found: dict[str, Any] = {}
    containers: list[str] = []  # "{" or "[" per open level
    keys: list[str | None] = []  # per open level: the key whose value it is
    key: str | None = None  # the key waiting for its value in the innermost object
    expect_key = False
    for match in _TOKEN.finditer(line):
        token = match.group()
        first = token[0]
        if first in "{[":
            keys.append(key)
            containers.append(first)
            key, expect_key = None, first == "{"
        elif first in "}]":
            if containers:
                containers.pop()
                keys.pop()
            key, expect_key = None, False
        elif first == ",":
            key, expect_key = None, bool(containers) and containers[-1] == "{"
        elif first == ":":
            continue
        elif expect_key and first == '"':
            key, expect_key = _scalar(token), False
        else:  # a value
            depth = len(containers)
            if depth == 1 and key in ("id", "method", "jsonrpc"):
                found.setdefault(key, _scalar(token))
            elif depth == 2 and keys[1] == "params" and key == "name":
                found.setdefault("tool", _scalar(token))
            key = None
    return found


def _scalar(token: str) -> Any:
    try:
        return json.loads(token)
    except ValueError:
        return None


def _request_of(exc: Exception) -> tuple[int | str, str, dict[str, Any], str] | None:
    """For a line the transport could not parse: its request id, method, envelope and what
    was wrong — or ``None`` when it names no request one could answer."""
    if not isinstance(exc, pydantic.ValidationError) or not exc.errors():
        return None
    errors = exc.errors()
    first = errors[0]
    if first["type"] == "json_invalid" and isinstance(first.get("input"), str):
        envelope = envelope_of(first["input"])  # the whole line: read what can be read
    else:
        # Valid JSON of the wrong shape: errors about a missing member carry the whole
        # top-level object as their input.
        whole = next(
            (
                e["input"]
                for e in errors
                if e["type"] == "missing" and len(e["loc"]) == 2 and isinstance(e["input"], dict)
            ),
            None,
        )
        if whole is None:
            return None
        envelope = {k: whole.get(k) for k in ("id", "method", "jsonrpc")}
        params = whole.get("params")
        if isinstance(params, dict):
            envelope["tool"] = params.get("name")
        first = next((e for e in errors if e.get("input") is not whole), first)  # what's wrong
    request_id, method = envelope.get("id"), envelope.get("method")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    if not isinstance(method, str):
        return None
    message = str(first.get("msg") or "invalid message")
    return request_id, method, envelope, message


def reply_for(exc: Exception) -> JSONRPCMessage | None:
    """The answer to a request line the transport failed to parse (``None``: nobody to
    answer)."""
    request = _request_of(exc)
    if request is None:
        return None
    request_id, method, envelope, problem = request
    too_deep = "recursion limit" in problem
    if too_deep and method == "tools/call":
        # The tool errors every other failure gets (imported here: the server imports us).
        from engram.mcp.server import error_result

        tool = envelope.get("tool") if isinstance(envelope.get("tool"), str) else "the tool"
        result = error_result(
            f"Invalid arguments for {tool}: they are nested deeper than this server reads "
            "(about 200 levels). Nothing was done; check the tool's input schema and call "
            "again.",
            "invalid_arguments",
        )
        # The handshake-era shape every client reads (a missing resultType means complete).
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        dumped.pop("resultType", None)
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=dumped)
    if too_deep:
        error = ErrorData(
            code=INVALID_REQUEST,
            message=f"Invalid request: {method} is nested deeper than this server reads",
        )
    elif problem.startswith("Invalid JSON"):
        error = ErrorData(code=PARSE_ERROR, message=f"Parse error: {problem}")
    else:
        error = ErrorData(code=INVALID_REQUEST, message=f"Invalid request: {problem}")
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


class AnsweringReadStream:
    """The transport's read stream as the server sees it, minus the lines that failed to
    parse but named a request: those are answered on ``write`` right away."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage]
    ) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        """The sender context of the last message (the server restores it per message)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if isinstance(item, Exception) and (reply := reply_for(item)) is not None:
                try:
                    await self._write.send(SessionMessage(reply))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass  # the client is gone: nobody to answer
                continue
            return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None
