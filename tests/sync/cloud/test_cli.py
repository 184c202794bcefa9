"""The cloud commands through real ``engram`` processes against a real server: config, enroll,
``sync --cloud`` (push, ``--import``, ``--status``), ``cloud status`` (human and ``--json``),
every failure with its reason code in one line, ``cloud repair`` and ``cloud upgrade …``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import psycopg
import pytest

from engram.store import Store
from tests.support import free_port, run_engram
from tests.support.sync_cloud import TOKEN, CloudServer


def write_full_journal_text(db: Path) -> None:
    """Store every elided journal record with its full text, as versions before elided records
    did (so a test can corrupt a record's text in place)."""
    with Store.open(db) as store, store.db.write() as conn:
        for (seq,) in conn.execute("SELECT seq FROM sync_journal WHERE record = ''").fetchall():
            text = store.journal.entry(seq).record
            conn.execute("UPDATE sync_journal SET record = ? WHERE seq = ?", (text, seq))


class Machine:
    """One local data directory driven through the real CLI."""

    def __init__(self, home: Path, server: CloudServer, token: str | None = TOKEN) -> None:
        self.home = home
        self.env = {"ENGRAM_PORT": str(free_port())}  # no local daemon listens there
        self.cwd = home.parent
        args = ["cloud", "config", "--server", server.url]
        if token:
            args += ["--token", token]
        self.ok(*args)

    def run(self, *args: str, **kw):
        return run_engram(*args, data_dir=self.home, env=self.env, cwd=self.cwd, **kw)

    def ok(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, f"{args}: {result.stderr}"
        return result.stdout

    def json(self, *args: str) -> dict:
        result = self.run(*args, "--json")
        return orjson.loads(result.stdout)


@pytest.fixture
def machine(tmp_path: Path) -> Callable[..., Machine]:
    def make(name: str, server: CloudServer, token: str | None = TOKEN) -> Machine:
        return Machine(tmp_path / name, server, token)

    return make


def test_round_trip_through_the_cli(server: CloudServer, machine: Callable[..., Machine]) -> None:
    a, b = machine("a", server), machine("b", server)
    assert 'Project "acme" enrolled for cloud sync' in a.ok("cloud", "enroll", "acme")
    assert "already enrolled" in a.ok("cloud", "enroll", "acme")
    b.ok("cloud", "enroll", "acme")
    a.ok("save", "Pool size", "Raised the pool to 30 connections", "--project", "acme")
    a.ok("save", "Cache", "Redis keys expire after 10 minutes", "--project", "acme")
    pushed = a.ok("sync", "--cloud", "--project", "acme")
    assert 'Pushed 3 mutation(s) of project "acme"' in pushed  # a session and two memories
    assert "Nothing new to push" in a.ok("sync", "--cloud", "--project", "acme")
    pulled = b.ok("sync", "--cloud", "--import", "--project", "acme")
    assert 'Pulled 3 mutation(s) of project "acme"' in pulled
    assert "Observations: 2 change(s)" in pulled
    assert "Already up to date" in b.ok("sync", "--cloud", "--import", "--project", "acme")
    assert "Redis keys expire" in b.ok("search", "redis", "--project", "acme")
    # ENGRAM_CLOUD_SYNC=1 picks the cloud transport too.
    b.env["ENGRAM_CLOUD_SYNC"] = "1"
    status = b.ok("sync", "--status", "--project", "acme")
    assert "Enrolled:        yes" in status and "Pending push:    0" in status
    del b.env["ENGRAM_CLOUD_SYNC"]

    human = a.ok("cloud", "status", "--project", "acme")
    for line in (
        f"Cloud status: configured (target=cloud:{server.url})",
        f"Server: {server.url}",
        "Server source: cloud.json",
        "Auth status: ready (token read from cloud.json",
        "Sync readiness: ready",
        "Project enrollment: enrolled (acme)",
        "Local daemon: not running",
        "Pending: 0 to push, 0 quarantined",
    ):
        assert line in human, human
    assert "Sync diagnostic" not in human
    data = a.json("cloud", "status", "--project", "acme")
    assert data["reason_code"] is None and data["sync"]["enabled"] is True
    assert data["auth"]["ok"] is True and "token" not in orjson.dumps(data).decode().replace(
        "token_", ""
    )
    assert "Project enrollment: not checked" in a.ok("cloud", "status")
    assert "unenrolled" in a.ok("cloud", "unenroll", "acme")
    assert "blocked_unenrolled" in a.ok("cloud", "status", "--project", "acme")


def test_each_failure_says_what_is_wrong_in_one_line(
    make_server: Callable[..., CloudServer], machine: Callable[..., Machine]
) -> None:
    server = make_server(allowed="acme")
    a = machine("a", server)
    a.ok("cloud", "enroll", "acme")
    a.ok("save", "Note", "something to share", "--project", "acme")

    def fails(m: Machine, *args: str) -> str:
        result = m.run("sync", "--cloud", *args)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        return lines[0]

    # Not enrolled.
    assert fails(a, "--project", "widgets").startswith(
        'engram: error: cloud sync blocked_unenrolled: project "widgets" is not enrolled'
    )
    # Not allowed by the server (403).
    a.ok("cloud", "enroll", "widgets")
    a.ok("save", "W", "widgets memory", "--project", "widgets")
    assert "cloud sync policy_forbidden:" in fails(a, "--project", "widgets")
    status = a.json("cloud", "status", "--project", "widgets")
    assert status["reason_code"] == "policy_forbidden"
    # Wrong token (401).
    wrong = machine("wrong", server, token="not-the-token")
    wrong.ok("cloud", "enroll", "acme")
    assert "cloud sync auth_required:" in fails(wrong, "--project", "acme", "--import")
    human = wrong.ok("cloud", "status", "--project", "acme")
    assert "Auth status: auth_required" in human and "reason_code: auth_required" in human
    # Paused on the server (409): pushes refused, pulls still work.
    server.admin("pause", "acme", "--reason", "migration")
    line = fails(a, "--project", "acme")
    assert "cloud sync paused:" in line and 'sync is paused for project "acme"' in line
    assert a.json("cloud", "status", "--project", "acme")["reason_code"] == "paused"
    # With --json the failure is one flat object on stdout, and nothing on stderr.
    as_json = a.run("sync", "--cloud", "--project", "acme", "--json")
    assert as_json.returncode == 1 and as_json.stderr == ""
    failure = orjson.loads(as_json.stdout)
    assert isinstance(failure["error"], str) and "sync is paused" in failure["error"]
    assert failure["reason_code"] == "paused" and failure["project"] == "acme"
    assert a.run("sync", "--cloud", "--import", "--project", "acme").returncode == 0
    server.admin("resume", "acme")
    assert "Pushed 2 mutation(s)" in a.ok("sync", "--cloud", "--project", "acme")
    assert a.json("cloud", "status", "--project", "acme")["reason_code"] is None
    # The server is down.
    server.stop()
    assert "cloud sync transport_failed: cannot reach" in fails(a, "--project", "acme", "--import")
    offline = a.json("cloud", "status", "--project", "acme")
    assert offline["reason_code"] == "transport_failed"
    # Not configured at all.
    a.ok("cloud", "config", "--clear")
    assert "cloud sync is not configured" in a.run("sync", "--cloud").stderr
    bare = a.ok("cloud", "status", "--project", "acme")
    assert "Cloud status: not configured" in bare and "cloud_not_configured" in bare
    # --all is refused in cloud mode.
    a.ok("cloud", "config", "--server", server.url, "--token", TOKEN)
    assert "one project at a time" in a.run("sync", "--cloud", "--all").stderr


def test_repair_retries_the_quarantine(
    server: CloudServer, machine: Callable[..., Machine]
) -> None:
    a = machine("a", server)
    a.ok("cloud", "enroll", "acme")
    a.ok("save", "One", "first memory", "--project", "acme")
    a.ok("sync", "--cloud", "--project", "acme")
    db = a.home / "engram.db"
    target = f"cloud:{server.url}"
    with psycopg.connect(server.db_url.replace("+psycopg", "")) as conn:
        assert conn.execute("SELECT count(*) FROM cloud_mutations").fetchone()[0] == 2
    import sqlite3

    write_full_journal_text(db)
    with sqlite3.connect(db) as conn:  # corrupt one sent record, and make it pending again
        seq = conn.execute(
            "SELECT MAX(seq) FROM sync_journal WHERE entity = 'observation'"
        ).fetchone()[0]
        conn.execute(
            "UPDATE sync_journal SET record = json_set(record, '$.payload.title', 'x')"
            " WHERE seq = ?",
            (seq,),
        )
        conn.execute("DELETE FROM sync_delivery WHERE target = ? AND seq = ?", (target, seq))
    pushed = a.run("sync", "--cloud", "--project", "acme")
    assert pushed.returncode == 1 and "mid_conflict" in pushed.stdout
    status = a.ok("cloud", "status", "--project", "acme")
    assert "Pending: 0 to push, 1 quarantined" in status and "reason_code: quarantined" in status
    listed = a.ok("cloud", "repair", "--dry-run")
    assert "1 rejected record(s) would be retried" in listed
    still = a.run("cloud", "repair")
    assert still.returncode == 1 and "Still quarantined: 1" in still.stdout
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE sync_journal SET record = json_set(record, '$.payload.title', 'One')"
            " WHERE seq = ?",
            (seq,),
        )
    fixed = a.ok("cloud", "repair")
    assert "acme: 1 accepted, 0 rejected again" in fixed
    assert a.json("cloud", "status", "--project", "acme")["reason_code"] is None


def test_upgrade_doctor_bootstrap_status_repair_rollback(
    server: CloudServer, machine: Callable[..., Machine], tmp_path: Path
) -> None:
    bare = Machine.__new__(Machine)
    bare.home, bare.env, bare.cwd = tmp_path / "bare", {}, tmp_path
    blocked = bare.run("cloud", "upgrade", "doctor", "--project", "acme")
    assert blocked.returncode == 1 and "reason_code: cloud_not_configured" in blocked.stdout

    a = machine("a", server)
    for i in range(5):
        a.ok("save", f"Memory {i}", f"existing knowledge number {i}", "--project", "acme")
    doctor = a.ok("cloud", "upgrade", "doctor", "--project", "acme")
    assert "status: ready" in doctor and "not enrolled yet" in doctor
    assert "pending: 6, quarantined: 0, unjournaled: 0" in doctor  # a session, five memories
    assert "would journal: 0 session(s), 0 observation(s), 0 prompt(s)" in a.ok(
        "cloud", "upgrade", "repair", "--project", "acme", "--dry-run"
    )
    boot = a.json("cloud", "upgrade", "bootstrap", "--project", "acme")
    assert boot["stage"] == "bootstrap_verified" and boot["newly_enrolled"] is True
    assert boot["local_mutations"] == boot["server_mutations"] == 6
    assert "stage: bootstrap_verified" in a.ok("cloud", "upgrade", "status", "--project", "acme")

    # The server loses two mutations (restored from an old backup): bootstrap again notices,
    # pushes them again and verifies.
    with psycopg.connect(server.db_url.replace("+psycopg", "")) as conn:
        conn.execute(
            "DELETE FROM cloud_mutations WHERE seq IN "
            "(SELECT seq FROM cloud_mutations ORDER BY seq DESC LIMIT 2)"
        )
    again = a.json("cloud", "upgrade", "bootstrap", "--project", "acme", "--resume")
    assert again["stage"] == "bootstrap_verified" and again["repushed"] == 2
    mids = server.mids("acme")
    assert len(mids) == 6 and not [m for m, n in Counter(mids).items() if n > 1]

    rollback = a.ok("cloud", "upgrade", "rollback", "--project", "acme")
    assert "rolled back" in rollback
    after = a.json("cloud", "upgrade", "status", "--project", "acme")
    assert after["stage"] == "rolled_back" and after["enrolled"] is False and after["cursor"] == 0
    assert "existing knowledge number 3" in a.ok("search", "knowledge", "--project", "acme")


def test_records_the_server_cannot_store_are_quarantined_and_the_rest_pushed(
    server: CloudServer, machine: Callable[..., Machine]
) -> None:
    """A store that already holds records with a NUL or a lone surrogate (written before the
    store refused them) pushes everything else: the server rejects those two one by one, the
    client keeps them in its quarantine, and the next sync has nothing left to send."""
    import sqlite3

    a = machine("a", server)
    a.ok("cloud", "enroll", "acme")
    for title in ("first", "second", "third", "fourth"):
        a.ok("save", title, f"the {title} memory", "--project", "acme")
    write_full_journal_text(a.home / "engram.db")
    with sqlite3.connect(a.home / "engram.db") as db:
        for title, bad in (("second", "sec\\u0000ond"), ("third", "th\\ud800ird")):
            changed = db.execute(
                "UPDATE sync_journal SET record = replace(record, ?, ?) WHERE record LIKE ?",
                (f'"title":"{title}"', f'"title":"{bad}"', f'%"title":"{title}"%'),
            ).rowcount
            assert changed == 1
    result = a.run("sync", "--cloud", "--project", "acme")
    assert result.returncode == 1, result.stderr
    assert 'Pushed 3 mutation(s) of project "acme"' in result.stdout  # session, first, fourth
    assert "2 rejected and quarantined" in result.stdout
    assert "payload.title contains a NUL character" in result.stdout
    assert "payload.title contains a lone surrogate" in result.stdout
    assert len(server.mids("acme")) == 3
    assert "Nothing new to push" in a.ok("sync", "--cloud", "--project", "acme")
    status = a.json("cloud", "status", "--project", "acme", "--offline")
    assert status["sync"]["quarantined_count"] == 2 and status["sync"]["pending_count"] == 0
    assert status["reason_code"] == "quarantined"
