"""The tools' schemas as the SDK generates them, kept in ``schemas.json`` beside this module, so
that ``engram mcp`` lists its tools without building every tool's pydantic models at start-up.

Building a tool (:meth:`Tool.from_function`: an argument model from the function's signature,
its JSON schema, the output schema) cost ~2 ms a tool, 42 ms for the agent profile's 20 — most
of what ``engram mcp`` adds to an empty MCP server's start-up (issue 18: ≤ 1.2×). So each
tool is listed from the generated schemas and built on its first call (:class:`DeferredTool`);
what a call accepts is what it always was: the arguments are validated against the real model.

The file records a digest of the modules that define the tools (:data:`SOURCES`): when they
changed since it was written (an edit not followed by ``python -m engram.mcp.schemas``), the
server builds every tool at start-up as before, and ``tests/mcp/test_schemas.py`` fails until
the file is written again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

import orjson
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from pydantic import PrivateAttr

SCHEMAS_FILE = Path(__file__).with_name("schemas.json")
#: The modules whose code decides the tools' schemas: signatures, argument types, the merge
#: tool's explicit model.
SOURCES = ("engram.mcp.tools", "engram.mcp.curation_tools", "engram.mcp.server")


class DeferredTool(Tool):
    """A tool listed from its generated schemas; the real one (its argument model) is built on
    the first call and runs every call."""

    _build: Callable[[], Tool] = PrivateAttr()
    _real: Tool | None = PrivateAttr(default=None)

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        if self._real is None:
            self._real = self._build()
        return await self._real.run(arguments, context, convert_result)


def source_digest() -> str:
    """A digest of the code the schemas come from (:data:`SOURCES`)."""
    digest = hashlib.sha256()
    for name in SOURCES:
        module = import_module(name)
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def load() -> dict[str, dict[str, Any]]:
    """The generated schemas by tool name, or none when the file is missing, unreadable or
    older than the code (the server then builds its tools at start-up)."""
    try:
        stored = orjson.loads(SCHEMAS_FILE.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(stored, dict) or stored.get("source") != source_digest():
        return {}
    tools = stored.get("tools")
    if not isinstance(tools, dict):
        return {}
    # (an entry not of the shape generate() writes is left out: that tool is built at start-up)
    return {
        name: entry
        for name, entry in tools.items()
        if isinstance(entry, dict)
        and isinstance(entry.get("input"), dict)
        and isinstance(entry.get("output"), dict)
        and isinstance(entry.get("description"), str)
    }


def deferred(schemas: dict[str, Any], build: Callable[[], Tool], **fields: Any) -> Tool:
    """A :class:`DeferredTool` listed with ``schemas`` (its ``input`` and ``output`` schemas and
    ``description``) whose real tool ``build`` makes; ``fields``: the tool's ``fn``, ``name``,
    ``title`` and ``annotations``, as the real one has them."""
    tool = DeferredTool.model_construct(
        parameters=schemas["input"],
        description=schemas["description"],
        # (only its output schema is read before the first call: the listing)
        fn_metadata=FuncMetadata.model_construct(
            arg_model=ArgModelBase, output_schema=schemas["output"]
        ),
        is_async=False,
        context_kwarg=None,
        **fields,
    )
    tool._build = build
    return tool


def generate(tools: list[Tool]) -> dict[str, Any]:
    """The file's content for ``tools`` (every tool, built the ordinary way)."""
    return {
        "source": source_digest(),
        "tools": {
            tool.name: {
                "input": tool.parameters,
                "output": tool.output_schema,
                "description": tool.description,
            }
            for tool in tools
        },
    }


def write() -> Path:
    """Write :data:`SCHEMAS_FILE` from the tools as the server builds them now."""
    import tempfile

    from engram.mcp.server import every_tool
    from engram.settings import Config
    from engram.store import Store

    with (
        tempfile.TemporaryDirectory() as tmp,
        Store.open(config=Config(data_dir=Path(tmp))) as store,
    ):
        content = generate(every_tool(store))
    SCHEMAS_FILE.write_bytes(orjson.dumps(content, option=orjson.OPT_INDENT_2) + b"\n")
    return SCHEMAS_FILE


if __name__ == "__main__":
    print(f"wrote {write()}")
