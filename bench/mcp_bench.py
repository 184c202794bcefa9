"""MCP server benchmark (issue 3 targets), through the SDK's real stdio client.

Prints:
  * start-up: process start → first `tools/list` answer, for `engram mcp` and for an empty
    `MCPServer` with one tool started the same way (`python <script>`), medians of interleaved
    runs; target ratio ≤ 1.2× (the processes' CPU time too, steadier on a busy machine);
  * round trips over stdio on a store of N memories (default 10,000, all in the server's
    project): `mem_save` and `mem_search` p50/p95 (target p50 ≤ 5 ms), beside the baseline
    server's one-tool round trip (the transport's floor) and the same searches run in-process
    on the store, both measured in the same run.

    .venv/bin/python bench/mcp_bench.py [--n 10000] [--calls 300] [--starts 7] [--json]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import devnotes

from engram.settings import Config
from engram.store import Store

PROJECT = "acme-web"
BASELINE = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("baseline")


@server.tool()
def echo(text: str) -> str:
    \"\"\"Return the text.\"\"\"
    return text


server.run()
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def build_store(data_dir: Path, n: int) -> float:
    """N realistic memories, all in PROJECT, imported in one transaction."""
    doc = devnotes.export_document(n)
    for row in (*doc["sessions"], *doc["observations"], *doc["prompts"]):
        row["project"] = PROJECT
    start = time.perf_counter()
    with Store.open(config=Config(data_dir=data_dir)) as store:
        store.import_data(doc)
    return time.perf_counter() - start


def store_search_times(data_dir: Path, queries: list[str], mode: str) -> list[float]:
    """The same searches in-process on the store, without MCP: what the tool cannot go below."""
    times = []
    with Store.open(config=Config(data_dir=data_dir)) as store:
        for query in queries:
            start = time.perf_counter()
            store.search(query, project=PROJECT, mode=mode)
            times.append(time.perf_counter() - start)
    return times


def params(argv: list[str], env: dict[str, str], cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def time_to_tools_list(server: StdioServerParameters) -> tuple[float, float]:
    """Wall time from spawning the server to its first tools/list answer, and the CPU time the
    process used in all (less sensitive than wall time to other work on a busy machine)."""
    cpu_before = children_cpu()
    with open(os.devnull, "w") as errlog:
        start = time.perf_counter()
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            wall = time.perf_counter() - start
    return wall, children_cpu() - cpu_before


async def round_trips(server: StdioServerParameters, calls: list[tuple[str, dict]]) -> list[float]:
    """Latency of each call in order, after a short warm-up (first calls pay lazy imports)."""
    times: list[float] = []
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            for name, arguments in calls[:10]:
                await session.call_tool(name, arguments)
            for name, arguments in calls:
                start = time.perf_counter()
                result = await session.call_tool(name, arguments)
                times.append(time.perf_counter() - start)
                if result.is_error:
                    raise SystemExit(f"{name} failed: {result.content[0].text}")
    return times


async def run(args: argparse.Namespace) -> dict[str, object]:
    results: dict[str, object] = {"n": args.n}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data_dir, cwd = root / "data", root / PROJECT
        cwd.mkdir()
        results["build_store_s"] = round(build_store(data_dir, args.n), 2)
        env = {
            **os.environ,
            "ENGRAM_DATA_DIR": str(data_dir),
            "PYTHONUNBUFFERED": "1",
            "ENGRAM_SEARCH_MODE": args.mode,
        }
        results["search_mode"] = args.mode
        env.pop("ENGRAM_PROJECT", None)
        script = root / "baseline_server.py"
        script.write_text(BASELINE)
        engram = params([sys.executable, "-m", "engram", "mcp"], env, cwd)
        baseline = params([sys.executable, str(script)], env, cwd)

        engram_starts, baseline_starts = [], []
        for _ in range(args.starts):  # interleaved, so machine noise hits both alike
            baseline_starts.append(await time_to_tools_list(baseline))
            engram_starts.append(await time_to_tools_list(engram))
        for what, index in (("", 0), ("cpu_", 1)):
            mine = statistics.median(t[index] for t in engram_starts)
            theirs = statistics.median(t[index] for t in baseline_starts)
            results[f"startup_{what}engram_ms"] = ms(mine)
            results[f"startup_{what}baseline_ms"] = ms(theirs)
            results[f"startup_{what}ratio"] = round(mine / theirs, 3)

        queries = devnotes.queries(args.calls)
        saves = [
            (
                "mem_save",
                {
                    "title": f"Bench memory {i}",
                    "content": f"**What**: {note['content']} (run {i})",
                    "type": note["type"],
                },
            )
            for i, note in zip(range(args.calls), devnotes.notes(args.calls, seed=99), strict=True)
        ]
        searches = [("mem_search", {"query": q}) for q in queries]
        save_times = await round_trips(engram, saves)
        search_times = await round_trips(engram, searches)
        floor = await round_trips(baseline, [("echo", {"text": q}) for q in queries])
        in_process = store_search_times(data_dir, queries, args.mode)
        for label, times in (
            ("save", save_times),
            ("search", search_times),
            ("echo", floor),
            ("store_search", in_process),
        ):
            results[f"{label}_p50_ms"] = ms(statistics.median(times))
            results[f"{label}_p95_ms"] = ms(pct(times, 0.95))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10_000, help="memories in the store")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per tool")
    parser.add_argument("--starts", type=int, default=7, help="start-ups timed per server")
    parser.add_argument(
        "--mode",
        default="lexical",
        help="search mode of the server and the in-process searches (default lexical)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = anyio.run(run, args)
    if args.json:
        print(orjson.dumps(r, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"store: {r['n']:,} memories in project {PROJECT} (built in {r['build_store_s']} s)")
    print(
        f"start-up to first tools/list: engram mcp {r['startup_engram_ms']} ms, empty MCPServer "
        f"{r['startup_baseline_ms']} ms → ratio {r['startup_ratio']}× (target ≤ 1.2×)"
    )
    print(
        f"  CPU time of those processes: engram mcp {r['startup_cpu_engram_ms']} ms, empty "
        f"MCPServer {r['startup_cpu_baseline_ms']} ms → ratio {r['startup_cpu_ratio']}×"
    )
    for label, name in (("save", "mem_save"), ("search", "mem_search")):
        print(
            f"{name:<11} round trip: p50 {r[f'{label}_p50_ms']} ms, p95 {r[f'{label}_p95_ms']} ms"
            " (target p50 ≤ 5 ms)"
        )
    print(
        f"transport floor (baseline echo tool): p50 {r['echo_p50_ms']} ms, "
        f"p95 {r['echo_p95_ms']} ms"
    )
    print(
        f"store.search in-process, same queries: p50 {r['store_search_p50_ms']} ms, "
        f"p95 {r['store_search_p95_ms']} ms"
    )


if __name__ == "__main__":
    main()
