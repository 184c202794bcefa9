"""Issue 18: how export and the cloud push read the journal. Set-wise (each elided record's
state comes in the query that selects the record), they must send exactly the bytes the
record-by-record rebuild gives (``journal.entries``, which every other reader uses): records
elided or stored with their text, states kept after edits, moves and deletes, relations,
sessions, prompts, intent fields, records received from elsewhere, and elided records whose
state is nowhere (left out). The journal is counted only for a progress bar that can show."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import orjson
import pytest

from engram.record import build_record, format_hlc, new_mid
from engram.store import Store
from engram.store.journal import JournalEntry, entries
from engram.sync.git.chunk import pack_chunks
from engram.sync.git.gitdir import SyncDir
from engram.sync.git.sync import GitSync
from engram.sync.progress import no_progress
from tests.store.replicas import exchange
from tests.store.test_lean_writes import state_record
from tests.support.sync_git import export
from tests.support.trace import traced

ORIGIN = "d4d4d4d4d4d4d4d4"


def write_everything(store: Store, other: Store) -> None:
    """Every kind of journal row an export can meet."""
    store.create_session("s-1", "acme", "/src/acme")
    kept = store.add_observation(title="Tokens", content="v1", project="acme", session_id="s-1")
    store.update_observation(kept.observation.id, content="v2")  # v1's state is kept
    store.update_observation(kept.observation.id, content='v3 \u00e9\u2028 "quoted"\n\ttab')
    pinned = store.add_observation(title="Pinned", content="always", project="acme")
    store.pin_observation(pinned.observation.id)
    store.set_importance(pinned.observation.id, 0.3)
    store.set_validity(pinned.observation.id, valid_from="2026-01-01")
    soft = store.add_observation(title="Wrong lead", content="not the cache", project="acme")
    store.delete_observation(soft.observation.id)
    store.add_observation(title="Mine", content="personal note", project="acme", scope="personal")
    store.add_observation(title="Elsewhere", content="other project", project="beta")
    a = store.add_observation(title="New way", content="use the queue", project="acme")
    b = store.add_observation(title="Old way", content="use cron", project="acme")
    store.relate(a.observation.id, b.observation.id, "supersedes", reason="moved")
    store.add_prompt("why do tokens expire?", session_id="s-1", project="acme")
    gone = store.add_prompt("typo prompt", session_id="s-1", project="acme")
    store.delete_prompt(gone.id)
    store.end_session("s-1", "auth reviewed")
    secret = store.add_observation(title="Secret", content="remove me", project="acme")
    store.journal.mark_delivered("cloud:somewhere", [1])  # a target: nothing blanked at once
    store.delete_observation(secret.observation.id, hard=True)  # its earlier state is kept
    # From elsewhere: another replica's records (elided when their text rebuilds), one with a
    # spelling of its own (kept verbatim), and a newer write replacing a local row.
    other.add_observation(title="Theirs", content="from the other side", project="acme")
    other.add_prompt("their prompt", session_id="s-2", project="acme")
    exchange(other, store)
    payload = {"sync_id": "obs-verbatim",
               "session_id": "s-2", "type": "manual", "title": "Verbatim", "content": "spelled",
               "tool_name": None, "project": "acme", "scope": "project", "topic_key": None,
               "revision_count": 1, "duplicate_count": 1, "last_seen_at": None,
               "created_at": "2026-11-01 10:00:00", "updated_at": "2026-11-01 10:00:00",
               "deleted_at": None, "pinned": False}  # fmt: skip
    record = build_record(mid=new_mid(), hlc=format_hlc(1_790_000_000_000, 0, ORIGIN),
                          origin=ORIGIN, entity="observation", key="obs-verbatim", op="upsert",
                          project="acme", scope="project", payload=payload)  # fmt: skip
    store.apply_mutations([orjson.dumps(record, option=orjson.OPT_INDENT_2).decode()],
                          source="peer:other")  # fmt: skip
    exchange(store, other)
    other.update_observation(
        other.get_observation_by_sync_id(kept.observation.sync_id, project="acme").id,
        content="v4 from the other side",
    )
    exchange(other, store)
    with store.db.write() as conn:
        # A journal written before records were elided: the text stored.
        row = conn.execute(
            "SELECT * FROM sync_journal WHERE record = '' AND entity = 'prompt' ORDER BY seq"
        ).fetchone()
        [entry] = entries(conn, [row])
        conn.execute("UPDATE sync_journal SET record = ? WHERE seq = ?", (entry.record, row[0]))
        # An elided record whose state is nowhere (a journal from before states were kept).
        conn.execute(
            "DELETE FROM sync_kept_observations WHERE seq = (SELECT MIN(seq) FROM "
            "sync_kept_observations)"
        )


def one_by_one(store: Store, target: str, projects: list[str] | None, personal: bool) -> list:
    """What the journal holds for ``target``, each record rebuilt on its own (the reference)."""
    with store.db.read() as conn:
        rows = conn.execute("SELECT * FROM sync_journal ORDER BY seq").fetchall()
        found = entries(conn, rows)
        held = {r[0] for r in conn.execute("SELECT seq FROM sync_delivery WHERE target = ?",
                                           (target,))}  # fmt: skip
    return [
        e
        for e in found
        if (projects is None or e.project in projects)
        and (personal or e.scope != "personal")
        and e.seq not in held
        and e.source != target
    ]


def test_pending_reads_every_record_as_the_one_by_one_rebuild(make_store) -> None:
    store, other = make_store("a"), make_store("b")
    write_everything(store, other)
    raw = dict(store.db.rows("SELECT seq, record FROM sync_journal"))
    assert sum(1 for text in raw.values() if text == "") >= 15  # mostly elided
    assert store.db.scalar("SELECT COUNT(*) FROM sync_kept_observations") >= 2
    assert any("\n" in text for text in raw.values())  # the verbatim one, as received
    everything = one_by_one(store, "fresh", None, True)
    assert len(everything) < len(raw)  # the record whose state is nowhere is left out
    assert {e.entity for e in everything} == {"session", "observation", "prompt", "relation"}
    for projects in (None, ["acme"], ["beta"], []):
        for personal in (True, False):
            expected = one_by_one(store, "fresh", projects, personal)
            got = store.journal.pending("fresh", projects=projects, include_personal=personal)
            assert got == expected
            batches = store.journal.iter_pending(
                "fresh", projects=projects, include_personal=personal, batch=3
            )
            assert [e for batch in batches for e in batch] == expected
    # The rebuild itself, against a record built independently from each row as it now is.
    current = {
        seq for (seq,) in store.db.rows(
            """SELECT j.seq FROM sync_journal j JOIN observations o ON j.entity = 'observation'
                 AND o.project = j.project AND o.sync_id = j.key AND o.hlc = j.hlc
               WHERE j.record = ''""")
    }  # fmt: skip
    assert len(current) >= 5
    assert all(e.record == state_record(store, e.seq) for e in everything if e.seq in current)
    assert any('"pinned":true,"importance_override":0.3,"valid_from"' in e.record
               for e in everything if e.seq in current)  # fmt: skip
    # What a cloud push sends: one project, in pushes of a few, after what was sent.
    sent = store.journal.pending("cloud:somewhere", projects=["acme"], after_seq=3, limit=4)
    assert (
        sent == [e for e in one_by_one(store, "cloud:somewhere", ["acme"], False) if e.seq > 3][:4]
    )
    assert all(isinstance(e, JournalEntry) for e in sent)


def test_one_statement_reads_a_batch_however_many_records_are_elided(make_store) -> None:
    store, other = make_store("a"), make_store("b")
    write_everything(store, other)
    with traced(store) as seen:
        found = store.journal.pending("fresh", include_personal=True)
    assert len(found) > 20
    assert len([s for s in seen if s.lstrip().upper().startswith("SELECT")]) <= 2, seen


def test_exported_chunks_are_the_bytes_of_the_records_rebuilt_one_by_one(
    make_store, sync_dir: SyncDir
) -> None:
    store, other = make_store("a"), make_store("b")
    write_everything(store, other)
    expected = one_by_one(store, sync_dir.target, None, True)
    report = export(store, sync_dir, None, include_personal=True)
    [written] = report.chunks
    data = (sync_dir.log_dir / f"{written.id}.jsonl.gz").read_bytes()
    header = orjson.loads(gzip.decompress(data).split(b"\n", 1)[0])
    [(chunk, items)] = pack_chunks(
        expected, created_by=header["created_by"], created_at=header["created_at"]
    )
    assert (chunk.id, chunk.compressed()) == (written.id, data)
    assert items == expected


def test_an_export_counts_what_it_sends_only_for_a_bar_that_can_show(
    make_store, sync_dir: SyncDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.cli.progress import factory

    store = make_store("a")
    store.add_observation(title="t", content="c", project="acme")
    with traced(store) as seen:
        GitSync(store, sync_dir, author="tester").export(projects=["acme"])
    assert not any("COUNT(" in s for s in seen)
    store.add_observation(title="u", content="d", project="acme")
    totals: list[int] = []

    @contextmanager
    def bar(label: str, total: int) -> Iterator[Callable[[int], None]]:
        totals.append(total)
        yield lambda n: None

    GitSync(store, sync_dir, author="tester", progress=bar).export(projects=["acme"])
    assert totals == [1]
    # The CLI's bars: none without a terminal, or when quiet (no count then either).
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert factory() is no_progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert factory(quiet=True) is no_progress
    assert factory() is not no_progress
