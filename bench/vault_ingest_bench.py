"""Vault, git-ingest and secret-detection benchmark (issue 23 figures).

* vault export of N memories (default 10,000) into an empty directory, a sync that finds
  nothing to do, and a sync after 100 notes were edited by hand;
* ingest-git of a repository of C commits (default 1,000, made with ``git fast-import``),
  then the same ingest again (idempotent: nothing added);
* the secret detector: µs per 1 KB memory, and the store's save p50 with and without it
  (the save path budget is ~0.5 ms p50).

  .venv/bin/python bench/vault_ingest_bench.py [--memories 10000] [--commits 1000] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.ingest.git import ingest_git
from engram.record import build_record, format_hlc, new_mid, new_origin
from engram.secrets import redact_secrets
from engram.settings import Config
from engram.store import Store
from engram.vault import VaultSync

TEXT = (
    "**What**: fixed the login timeout in the session middleware by extending the token "
    "refresh window. **Why**: users were logged out mid-edit. **Where**: auth/session.py, "
    "auth/refresh.py **Learned**: run the refresh before the expiry check. "
) * 3


def _memories(count: int, project: str = "acme") -> list[str]:
    origin = new_origin()
    session = {"id": "s-bench", "project": project, "directory": "/src", "started_at":
               "2026-01-01 00:00:00", "ended_at": None, "summary": None}  # fmt: skip
    records = [build_record(mid=new_mid(), hlc=format_hlc(1_700_000_000_000, 0, origin),
                            origin=origin, entity="session", key="s-bench", op="upsert",
                            project=project, scope="project", payload=session)]  # fmt: skip
    for i in range(count):
        key = f"obs-{i:016x}"
        payload = {
            "sync_id": key, "session_id": "s-bench", "type": "bugfix",
            "title": f"Login timeout fix number {i}", "content": f"{TEXT} (#{i})",
            "tool_name": None, "project": project, "scope": "project", "topic_key": None,
            "revision_count": 1, "duplicate_count": 1, "last_seen_at": None,
            "created_at": "2026-01-01 00:00:00", "updated_at": "2026-01-01 00:00:00",
            "deleted_at": None,
        }  # fmt: skip
        records.append(build_record(mid=new_mid(), hlc=format_hlc(1_700_000_000_001 + i, 0,
                       origin), origin=origin, entity="observation", key=key, op="upsert",
                       project=project, scope="project", payload=payload))  # fmt: skip
    return [orjson.dumps(r).decode() for r in records]


def bench_vault(count: int, work: Path) -> dict[str, float]:
    with Store.open(config=Config(data_dir=work / "vault-data")) as store:
        store.apply_mutations(_memories(count), source="bench")
        root = work / "vault"
        start = time.perf_counter()
        report = VaultSync(store, root).export("acme")
        export_s = time.perf_counter() - start
        assert len(report.written) == count, report.to_dict()["counts"]
        start = time.perf_counter()
        report = VaultSync(store, root).sync()
        noop_s = time.perf_counter() - start
        assert report.unchanged == count
        for path in sorted(root.glob("*.md"))[:100]:
            path.write_text(path.read_text().replace("Learned", "Learned\nedited by hand."))
        start = time.perf_counter()
        report = VaultSync(store, root).sync()
        edit_s = time.perf_counter() - start
        assert len(report.updated) == 100, report.to_dict()["counts"]
    return {"memories": count, "export_s": export_s, "notes_per_s": count / export_s,
            "sync_nothing_s": noop_s, "sync_100_edits_s": edit_s}  # fmt: skip


def _make_repo(path: Path, commits: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    now = int(time.time()) - commits * 60
    lines: list[str] = []
    for i in range(commits):
        message = f"fix: change number {i}\n\nBecause reason {i}.\n".encode()
        blob = f"value {i}\n".encode()
        lines.append("commit refs/heads/main")
        lines.append(f"author Dev{i % 7} <dev{i % 7}@example.com> {now + i * 60} +0000")
        lines.append(f"committer Dev <dev@example.com> {now + i * 60} +0000")
        lines.append(f"data {len(message)}")
        lines.append(message.decode())
        lines.append(f"M 100644 inline src/module_{i % 50}.py")
        lines.append(f"data {len(blob)}")
        lines.append(blob.decode())
    stream = "\n".join(lines) + "\n"
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=stream.encode(),
                   check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "main"], check=True)


def bench_ingest(commits: int, work: Path) -> dict[str, float]:
    repo = work / "repo"
    _make_repo(repo, commits)
    with Store.open(config=Config(data_dir=work / "ingest-data")) as store:
        start = time.perf_counter()
        report = ingest_git(store, repo, "repo", days=36500)
        first_s = time.perf_counter() - start
        assert len(report.added) == commits, (len(report.added), report.commits_read)
        start = time.perf_counter()
        again = ingest_git(store, repo, "repo", days=36500)
        second_s = time.perf_counter() - start
        assert not again.added
    return {"commits": commits, "ingest_s": first_s, "commits_per_s": commits / first_s,
            "second_ingest_s": second_s}  # fmt: skip


def bench_secrets(work: Path) -> dict[str, float]:
    kb = TEXT[:1024]
    runs = 5000
    start = time.perf_counter()
    for _ in range(runs):
        redact_secrets(kb)
    detect_us = (time.perf_counter() - start) / runs * 1e6
    result = {"detect_1kb_us": detect_us}
    with Store.open(config=Config(data_dir=work / "save-data")) as store:
        # Interleaved, so both see the same table size and cache state.
        times: dict[bool, list[float]] = {False: [], True: []}
        for i in range(2000):
            allow = bool(i % 2)
            start = time.perf_counter()
            store.add_observation(title=f"m {i}", content=f"{kb} {i}", project="acme",
                                  allow_secrets=allow)  # fmt: skip
            times[allow].append(time.perf_counter() - start)
        result["save_p50_ms_with_detector"] = statistics.median(times[False]) * 1000
        result["save_p50_ms_without"] = statistics.median(times[True]) * 1000
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=1_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        figures = {
            "vault": bench_vault(args.memories, work),
            "ingest": bench_ingest(args.commits, work),
            "secrets": bench_secrets(work),
        }
    if args.json:
        print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
        return
    for section, values in figures.items():
        print(section)
        for key, value in values.items():
            print(f"  {key:28} {value:,.3f}" if isinstance(value, float) else f"  {key:28} {value}")


if __name__ == "__main__":
    main()
