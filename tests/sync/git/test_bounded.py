"""Issue 12, hole 5 (git): a hostile chunk never costs more than ~200 MB, whatever it inflates
to, and one refused for its size is not read again until its file changes; a legitimate
100 MB Go-format chunk still imports. Peak memory is measured on the real ``engram sync
--import`` process (``wait4``'s rusage of that one child)."""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from engram.sync.git.gitdir import SyncDir
from tests.support import engram_env
from tests.sync.git import hostile

MiB = 1024 * 1024
SIZE = 48 * MiB
BUDGET_MB = 200
HEADER = (
    b'{"engram_chunk":2,"created_by":"mallory","created_at":"2030-01-01T00:00:00Z","counts":{}}\n'
)


#: The real CLI, plus its own peak RSS written to stderr at exit. (``wait4``'s rusage would
#: not do: on Linux a child's maxrss includes the pytest process it was forked from.)
MEASURED_CLI = """
import atexit, sys
def peak():
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("VmHWM:"))
    sys.stderr.write("peak-kb %s\\n" % line.split()[1])
atexit.register(peak)
from engram.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def import_measured(data_dir: Path, sync_dir: SyncDir) -> tuple[dict, float]:
    """Run ``engram sync --import --json`` and return its report and its peak RSS in MB."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURED_CLI, "sync", "--import", "--json", "--dir",
         str(sync_dir.path)],
        env=engram_env(data_dir),
        capture_output=True,
        timeout=600,
    )  # fmt: skip
    [peak] = [line for line in done.stderr.decode().splitlines() if line.startswith("peak-kb")]
    return orjson.loads(done.stdout), int(peak.split()[1]) / 1024


def place(sync_dir: SyncDir, data: bytes, *, go: bool) -> str:
    chunk_id = hashlib.sha256(data).hexdigest()[: 8 if go else 16]
    sync_dir.chunks_dir.mkdir(parents=True, exist_ok=True)
    (sync_dir.chunks_dir / f"{chunk_id}.jsonl.gz").write_bytes(gzip.compress(data, 9))
    return chunk_id


def jsonl_long_line() -> bytes:
    return HEADER + b'{"mid":"' + b"a" * SIZE + b'"}\n'


def jsonl_many_records() -> bytes:
    line = orjson.dumps(hostile.observation("obs-bomb0000000001", project="acme", title="x"))
    return HEADER + (line + b"\n") * (SIZE // (len(line) + 1) + 1)


def jsonl_blank_lines() -> bytes:
    return HEADER + b"\n" * SIZE


def go_long_string() -> bytes:
    return b'{"sessions":[{"id":"' + b"a" * SIZE + b'"}]}'


def go_many_rows() -> bytes:
    row = (
        b'{"id":"s-1","project":"p","directory":"/x","started_at":"2026-01-01 00:00:00",'
        b'"summary":"' + b"z" * 400 + b'"},'
    )
    return b'{"sessions":[' + row * (SIZE // len(row) + 1) + row[:-1] + b"]}"


def go_deep_nesting() -> bytes:
    depth = SIZE // 5
    return b'{"sessions":[' + b'["",' * depth + b"1" + b"]" * depth + b"]}"


@pytest.mark.parametrize(
    "build,go,refused",
    [
        (jsonl_long_line, False, True),
        (jsonl_many_records, False, True),
        (jsonl_blank_lines, False, True),
        (go_long_string, True, True),
        (go_many_rows, True, False),
        (go_deep_nesting, True, True),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_a_tiny_chunk_that_inflates_to_48_mib_stays_under_200_mb(
    build: Callable[[], bytes], go: bool, refused: bool, tmp_path: Path, make_store
) -> None:
    sync_dir = SyncDir(tmp_path / "acme" / ".engram")
    data = build()
    assert len(data) >= SIZE
    bomb = place(sync_dir, data, go=go)
    assert (sync_dir.chunks_dir / f"{bomb}.jsonl.gz").stat().st_size < 512 * 1024
    del data
    good = hostile.write_chunk(
        sync_dir.path, [hostile.observation("obs-good00000001", project="acme", title="Good")]
    )
    report, peak = import_measured(tmp_path / "data", sync_dir)
    assert peak < BUDGET_MB, f"peak RSS {peak:.0f} MB"
    assert good in report["imported_ids"]
    failed = {f["chunk"]: f["reason"] for f in report["failures"]}
    if refused:
        assert list(failed) == [bomb] and "refused" in failed[bomb]
    else:
        assert failed == {} and bomb in report["imported_ids"]


def test_a_chunk_refused_for_size_is_not_read_again_until_it_changes(tmp_path: Path) -> None:
    sync_dir = SyncDir(tmp_path / "acme" / ".engram")
    bomb = place(sync_dir, jsonl_many_records(), go=False)
    data = tmp_path / "data"
    first, _ = import_measured(data, sync_dir)
    [failure] = first["failures"]
    assert failure["chunk"] == bomb and "inflates to more than 32 MiB" in failure["reason"]
    second, _ = import_measured(data, sync_dir)
    assert [f["chunk"] for f in second["failures"]] == [bomb]
    assert second["failures"][0]["reason"].startswith("refused earlier, file unchanged:")
    path = sync_dir.chunks_dir / f"{bomb}.jsonl.gz"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    third, _ = import_measured(data, sync_dir)  # a changed file is read again
    assert third["failures"][0]["reason"].startswith("inflates to more than")


def legitimate_go_document(target: int) -> bytes:
    """A Go-tool export of one project: sessions, observations of ~5 KB, prompts."""
    rng = random.Random(12)
    words = [f"word{i}" for i in range(3000)]
    sessions, observations, prompts = [], [], []
    size, n = 0, 0
    while size < target:
        if n % 40 == 0:
            session = f"go-s{n // 40}"
            sessions.append({"id": session, "project": "acme", "directory": "/src/acme",
                             "started_at": "2026-01-02 03:00:00", "ended_at": None,
                             "summary": None})  # fmt: skip
        content = " ".join(rng.choice(words) for _ in range(700))
        observations.append({
            "id": n + 1, "sync_id": f"obs-go{n:012d}", "session_id": session,
            "type": "discovery", "title": f"Note {n}", "content": content,
            "project": "acme", "scope": "project", "topic_key": None, "revision_count": 1,
            "duplicate_count": 1, "created_at": "2026-01-02 03:10:00",
            "updated_at": "2026-01-02 03:10:00",
        })  # fmt: skip
        if n % 10 == 0:
            prompts.append({"id": n + 1, "sync_id": f"prompt-go{n:010d}", "session_id": session,
                            "content": f"question {n}", "project": "acme",
                            "created_at": "2026-01-02 03:05:00"})  # fmt: skip
        size += len(content) + 300
        n += 1
    return orjson.dumps({"sessions": sessions, "observations": observations, "prompts": prompts})


@pytest.mark.slow
def test_a_legitimate_100_mb_go_chunk_still_imports(tmp_path: Path) -> None:
    sync_dir = SyncDir(tmp_path / "acme" / ".engram")
    data = legitimate_go_document(101 * 1000 * 1000)
    assert len(data) >= 100 * 1000 * 1000
    chunk = hashlib.sha256(data).hexdigest()[:8]
    sync_dir.chunks_dir.mkdir(parents=True)
    (sync_dir.chunks_dir / f"{chunk}.jsonl.gz").write_bytes(gzip.compress(data, 1))
    observations = data.count(b'"sync_id":"obs-go')
    del data
    report, peak = import_measured(tmp_path / "data", sync_dir)
    print(f"100 MB Go chunk: peak RSS {peak:.0f} MB")
    assert report["failures"] == [] and report["imported_ids"] == [chunk]
    assert report["mutations"]["observations"] == observations
    assert peak < BUDGET_MB, f"peak RSS {peak:.0f} MB"
