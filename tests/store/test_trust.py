"""Issue 12 at the store: the holes a hostile teammate or record found, each closed.

* hole 1 — a record of one project names another project's keys (identity is per project);
* hole 2 — a record stamped far in the future (the clock bound, and repairing a store whose
  clock such a record already poisoned);
* hole 4 — NUL and other unstorable text (refused at the store's edge and in records);
* the topic case — a topic re-saved after its memory was deleted revives the derived key.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from engram.errors import ValidationError
from engram.record import build_record, format_hlc, new_mid, new_origin
from engram.settings import Config
from engram.store import Store, quarantine
from engram.text import topic_sync_id
from tests.support import engram_env

from .replicas import converge, exchange

MALLORY = "0badc0de0badc0de"
FAR_FUTURE = format_hlc(9_999_999_999_999, 99_999, MALLORY)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def forged(
    op: str,
    entity: str,
    project: str,
    key: str,
    payload: dict,
    *,
    hlc: str | None = None,
    scope: str = "project",
) -> dict:
    """A record as a hostile replica would write it (valid envelope, its own origin)."""
    return build_record(
        mid=new_mid(),
        hlc=hlc or format_hlc(now_ms(), 0, MALLORY),
        origin=MALLORY,
        entity=entity,
        key=key,
        op=op,
        project=project,
        scope=scope,
        payload=payload,
    )


def upsert_of(obs, *, project: str, content: str, hlc: str | None = None) -> dict:
    payload = {
        "sync_id": obs.sync_id,
        "session_id": obs.session_id,
        "type": obs.type,
        "title": obs.title,
        "content": content,
        "project": project,
        "scope": "project",
        "topic_key": obs.topic_key,
    }
    return forged("upsert", "observation", project, obs.sync_id, payload, hlc=hlc)


def hard_delete_of(key: str, *, project: str, hlc: str | None = None) -> dict:
    payload = {"sync_id": key, "project": project, "deleted_at": None, "hard": True}
    return forged("delete", "observation", project, key, payload, hlc=hlc)


def live(store: Store, project: str) -> dict[str, str]:
    return {o.sync_id: o.content for o in store.recent_observations(project, limit=100)}


# --- hole 1: identity is per project ------------------------------------------------------------


def test_a_record_of_one_project_cannot_reach_another_projects_keys(make_store) -> None:
    victim = make_store("victim")
    plain = victim.add_observation(title="Deploy", content="blue-green", project="alpha")
    topic = victim.add_observation(
        title="Auth", content="redis sessions", project="alpha", topic_key="architecture/auth"
    ).observation
    victim.create_session("s-alpha", "alpha", "/src/alpha")
    # The topic memory's key is computable from public names: that is what made it a target.
    assert topic.sync_id == topic_sync_id("alpha", "project", "architecture/auth")
    before = victim.canonical_export(projects=["alpha"])
    result = victim.apply_mutations(
        [
            hard_delete_of(plain.observation.sync_id, project="gamma"),
            upsert_of(topic, project="gamma", content="ATTACKER TEXT"),
            forged(
                "delete",
                "session",
                "gamma",
                "s-alpha",
                {"id": "s-alpha", "project": "gamma", "hard": True},
            ),
        ],
        source="git:/elsewhere",
    )
    assert result.applied == 3  # valid records of gamma: they changed gamma, nothing else
    assert victim.canonical_export(projects=["alpha"]) == before
    assert live(victim, "alpha") == {
        plain.observation.sync_id: "blue-green",
        topic.sync_id: "redis sessions",
    }
    assert live(victim, "gamma") == {topic.sync_id: "ATTACKER TEXT"}
    assert victim.get_session("s-alpha", project="alpha").directory == "/src/alpha"


def test_a_payload_naming_another_project_is_quarantined_not_applied(make_store) -> None:
    victim = make_store("victim")
    memory = victim.add_observation(title="t", content="alpha text", project="alpha").observation
    sneaky = upsert_of(memory, project="gamma", content="ATTACKER TEXT")
    sneaky["payload"]["project"] = "alpha"  # a gamma record carrying an alpha payload
    result = victim.apply_mutations([sneaky], source="git:/elsewhere")
    assert result.quarantined == {"invalid": 1} and result.applied == 0
    assert live(victim, "alpha") == {memory.sync_id: "alpha text"} and live(victim, "gamma") == {}
    (held,) = quarantine.listing(victim.db)
    assert (held.reason, held.project, held.key, held.origin) == (
        "invalid",
        "gamma",
        memory.sync_id,
        MALLORY,
    )
    assert "payload.project 'alpha' does not match project 'gamma'" in held.error


def test_moving_a_memory_is_a_delete_there_and_a_create_here_on_every_replica(make_store) -> None:
    a, b, c = make_store("a"), make_store("b"), make_store("c")
    memory = a.add_observation(title="t", content="moving", project="alpha").observation
    a.add_prompt("why move it?", project="alpha", session_id=memory.session_id)
    converge([a, b, c])
    moved = a.update_observation(memory.id, project="beta")
    assert moved.id == memory.id and moved.sync_id != memory.sync_id  # same local id, new key
    b.merge_projects(["alpha"], "beta")  # the same move, made independently by a teammate
    converge([a, b, c], rng=random.Random(3))
    exports = {s.canonical_export() for s in (a, b, c)}
    assert len(exports) == 1
    for store in (a, b, c):
        assert live(store, "alpha") == {} and live(store, "beta") == {moved.sync_id: "moving"}
        assert [p.project for p in store.recent_prompts(limit=10)] == ["beta"]


# --- hole 2: the clock bound --------------------------------------------------------------------


def test_a_far_future_record_waits_moves_no_clock_and_never_beats_real_edits(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    memory = a.add_observation(title="t", content="honest v1", project="p").observation
    exchange(a, b)
    attack = [
        upsert_of(memory, project="p", content="FOREVER", hlc=FAR_FUTURE),
        hard_delete_of(memory.sync_id, project="p", hlc=format_hlc(9_999_999_999_999, 1, MALLORY)),
    ]
    result = b.apply_mutations(attack, source="git:/elsewhere")
    assert result.quarantined == {"clock_skew": 2} and result.applied == 0
    assert b.journal.clock_wall_ms() <= now_ms() + 1000  # the clock did not move
    held = quarantine.listing(b.db)
    assert {q.reason for q in held} == {"clock_skew"} and "ahead of this clock" in held[0].error
    a.update_observation(memory.id, content="honest v2")
    exchange(a, b)
    assert live(b, "p") == {memory.sync_id: "honest v2"}
    a.delete_observation(memory.id, hard=True)
    exchange(a, b)
    assert live(b, "p") == {} and a.canonical_export() == b.canonical_export()
    # Later writes of b are valid everywhere (no 14-digit roll-over).
    b.add_observation(title="after", content="still fine", project="p")
    assert all(len(e.hlc) == 36 for e in b.journal.pending("x"))
    assert b.apply_mutations([], source="git:/elsewhere").quarantined == {}  # still waiting


def test_a_waiting_record_applies_by_itself_once_within_the_drift(make_store, tmp_path) -> None:
    a = make_store("a")
    memory = a.add_observation(title="t", content="v1", project="p").observation
    soon = upsert_of(memory, project="p", content="from a fast clock",
                     hlc=format_hlc(now_ms() + 5 * 60_000, 0, MALLORY))  # fmt: skip
    tight = Config(data_dir=tmp_path / "b", max_clock_drift_ms=60_000)
    with Store.open(config=tight) as b:
        exchange(a, b)
        assert b.apply_mutations([soon], source="git:/x").quarantined == {"clock_skew": 1}
        assert live(b, "p") == {memory.sync_id: "v1"}
    # Time passing is the same as the drift growing: reopened with 10 minutes, the next apply
    # (even of nothing) finds the record within the bound and applies it.
    with Store.open(config=Config(data_dir=tmp_path / "b")) as b:
        result = b.apply_mutations([], source="git:/x")
        assert (result.released, result.applied) == (1, 1)
        assert live(b, "p") == {memory.sync_id: "from a fast clock"}
        assert quarantine.listing(b.db) == []


def test_ticks_stay_valid_whatever_the_persisted_clock_says(store: Store) -> None:
    store.db.conn.execute("UPDATE sync_clock SET wall_ms = 9999999999999, counter = 99999")
    with store.db.write() as conn:
        hlc, _ = store.journal.tick(conn)
    wall = int(hlc.split(".")[0])
    assert len(hlc) == 36 and wall <= now_ms() + 1000


def poison(data_dir: Path) -> dict[str, object]:
    """A store as the code before the clock bound left it after one far-future record: the
    record applied, the clock dragged to the year 2286, later local writes stamped there (one
    of them rolled over to a 14-digit wall time). Returns what the test needs to know."""
    before_the_rule = Config(data_dir=data_dir, max_clock_drift_ms=10**15)
    with Store.open(config=before_the_rule) as victim:
        honest = victim.add_observation(title="t", content="honest v1", project="p").observation
        other = victim.add_observation(title="o", content="other v1", project="p").observation
        result = victim.apply_mutations(
            [
                upsert_of(
                    honest, project="p", content="ATTACK", hlc=format_hlc(10**13 - 1, 0, MALLORY)
                )
            ],
            source="git:/elsewhere",
        )
        assert result.applied == 1 and victim.journal.clock_wall_ms() == 9_999_999_999_999
        edited = victim.update_observation(other.id, content="other v2, written after")
        assert victim.db.scalar(
            "SELECT hlc FROM observations WHERE id = ?", (edited.id,)
        ).startswith("9999999999999.")
        late = victim.add_observation(title="late", content="late memory", project="p")
        rolled = f"10000000000000.00000.{victim.origin}"  # what the old clock produced next
        with victim.db.write() as conn:
            seq = conn.execute(
                "SELECT seq FROM sync_journal WHERE key = ? ORDER BY seq DESC LIMIT 1",
                (late.observation.sync_id,),
            ).fetchone()[0]
            # The versions that rolled over stored every record's full text.
            record = {**victim.journal.entry(seq).as_record(), "hlc": rolled}
            conn.execute(
                "UPDATE sync_journal SET hlc = ?, record = ? WHERE seq = ?",
                (rolled, orjson.dumps(record).decode(), seq),
            )
            conn.execute(
                "UPDATE observations SET hlc = ? WHERE id = ?", (rolled, late.observation.id)
            )
            conn.execute("UPDATE sync_clock SET wall_ms = 10000000000000, counter = 0")
    return {"honest": honest, "other": other, "late": late.observation}


def test_a_poisoned_store_repairs_itself_on_open_without_losing_a_memory(
    tmp_path: Path, make_store
) -> None:
    known = poison(tmp_path / "victim")
    with Store.open(config=Config(data_dir=tmp_path / "victim")) as victim:
        bound = now_ms() + victim.journal.max_drift_ms
        assert victim.journal.clock_wall_ms() <= bound
        journal = victim.journal.pending("x")
        assert all(len(e.hlc) == 36 and int(e.hlc[:13]) <= bound for e in journal)
        # The attacker's record waits in the quarantine; the memory it took over is honest again.
        assert live(victim, "p") == {
            known["honest"].sync_id: "honest v1",
            known["other"].sync_id: "other v2, written after",  # local writes kept…
            known["late"].sync_id: "late memory",  # …the 14-digit one too
        }
        (held,) = quarantine.listing(victim.db)
        assert (held.reason, held.key, held.source) == (
            "clock_skew",
            known["honest"].sync_id,
            "git:/elsewhere",
        )
        for fts in ("observations_fts", "prompts_fts"):
            victim.db.conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
        # (Search contexts derived from the attacker's text are re-derived by issue 14's work.)
        assert all("ATTACK" not in o.content for o in victim.search("ATTACK", project="p"))
        # A teammate that never saw the attack receives the repaired journal and agrees.
        peer = make_store("peer")
        exchange(victim, peer)
        assert peer.canonical_export() == victim.canonical_export()
        # And a real edit made after the repair wins everywhere.
        victim.update_observation(known["honest"].id, content="honest v3")
        exchange(victim, peer)
        assert live(peer, "p")[known["honest"].sync_id] == "honest v3"
        assert victim.repair_clock().repaired is False  # `engram doctor` finds nothing left


def test_engram_doctor_finds_far_future_records_even_when_the_clock_looks_sane(
    tmp_path: Path,
) -> None:
    """The cheap check on open looks at the clock only; `engram doctor` scans every record
    (here the clock was set back by hand, the far-future records stayed)."""
    known = poison(tmp_path / "victim")
    with Store.open(config=Config(data_dir=tmp_path / "victim", max_clock_drift_ms=10**15)) as s:
        s.db.conn.execute("UPDATE sync_clock SET wall_ms = ?, counter = 0", (now_ms(),))
    doctor = subprocess.run(
        [sys.executable, "-m", "engram", "doctor", "--json"],
        env=engram_env(tmp_path / "victim"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert doctor.returncode == 0, doctor.stderr
    report = orjson.loads(doctor.stdout)
    assert report["clock"]["repaired"] is True
    assert (report["clock"]["quarantined"], report["clock"]["rejournaled"]) == (1, 2)
    assert report["quarantine"]["inbound"] == {"clock_skew": 1}
    with Store.open(config=Config(data_dir=tmp_path / "victim")) as victim:
        assert live(victim, "p")[known["honest"].sync_id] == "honest v1"
        assert live(victim, "p")[known["late"].sync_id] == "late memory"
    again = subprocess.run(
        [sys.executable, "-m", "engram", "doctor"],
        env=engram_env(tmp_path / "victim"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.stdout.startswith("Clock: ok") and "1 clock_skew" in again.stdout


@pytest.mark.skipif(shutil.which("faketime") is None, reason="faketime is not installed")
def test_a_machine_whose_clock_ran_in_2200_keeps_its_memories(tmp_path: Path) -> None:
    """Real processes under a real wrong clock (faketime): saves made while the machine
    believed it was 2200 stay, and are journaled again under sane clocks once time is right."""
    env = engram_env(tmp_path / "data")
    wrong = ["faketime", "2200-01-01 00:00:00", sys.executable, "-m", "engram"]
    for title in ("first", "second"):
        done = subprocess.run(
            [*wrong, "save", title, f"{title} note", "--project", "p"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    with Store.open(config=Config(data_dir=tmp_path / "data")) as store:
        assert sorted(o.title for o in store.recent_observations("p")) == ["first", "second"]
        assert all(int(e.hlc[:13]) <= now_ms() + 1000 for e in store.journal.pending("x"))
        assert store.journal.clock_wall_ms() <= now_ms() + 1000


# --- hole 4: NUL and other unstorable text ---------------------------------------------------------

BAD_TEXTS = ("nul\x00inside", "lone \udcff surrogate")


@pytest.mark.parametrize("bad", BAD_TEXTS)
@pytest.mark.parametrize(
    "field", ["title", "content", "type", "topic_key", "tool_name", "project", "session_id"]
)
def test_saving_refuses_unstorable_text_naming_the_field(store: Store, field: str, bad: str):
    fields = {"title": "t", "content": "c", "project": "p", field: bad}
    with pytest.raises(ValidationError) as caught:
        store.add_observation(**fields)
    assert caught.value.field == field and field in str(caught.value)
    assert store.stats().total_observations == 0 and store.journal.count_pending("x") == 0


@pytest.mark.parametrize("bad", BAD_TEXTS)
def test_every_other_write_refuses_unstorable_text(store: Store, bad: str) -> None:
    memory = store.add_observation(title="t", content="c", project="p").observation
    store.create_session("s1", "p", "/src")
    written = store.journal.count_pending("x")
    attempts = {
        "title": lambda: store.update_observation(memory.id, title=bad),
        "project": lambda: store.update_observation(memory.id, project=bad),
        "content": lambda: store.add_prompt(bad, project="p"),
        "directory": lambda: store.create_session("s2", "p", bad),
        "summary": lambda: store.end_session("s1", bad),
        "session_id": lambda: store.create_session(bad, "p"),
    }
    for field, attempt in attempts.items():
        with pytest.raises(ValidationError) as caught:
            attempt()
        assert caught.value.field == field
    with pytest.raises(ValidationError, match=r"observations\[0\]\.content"):
        store.import_data(
            {
                "version": "0.1.0",
                "observations": [{"session_id": "s", "title": "t", "content": bad}],
            }
        )
    assert store.journal.count_pending("x") == written  # nothing was written by any of them


def test_records_carrying_nul_are_quarantined_and_the_rest_applies(make_store) -> None:
    a, b = make_store("a"), make_store("b")
    memory = a.add_observation(title="t", content="clean", project="p").observation
    records = [e.as_record() for e in a.journal.pending("x")]
    dirty = upsert_of(memory, project="p", content="a NUL \x00 here")
    dirty_key = forged("upsert", "session", "p", "s\x00x", {"id": "s\x00x", "project": "p"})
    result = b.apply_mutations([*records, dirty, dirty_key], source="cloud:x")
    assert result.applied == 2 and result.quarantined == {"invalid": 2}
    assert live(b, "p") == {memory.sync_id: "clean"}
    errors = sorted(q.error for q in quarantine.listing(b.db))
    assert "NUL" in errors[0] and "NUL" in errors[1]


# --- the topic case ------------------------------------------------------------------------------


def live_by_topic(store: Store) -> dict[tuple[str, str, str], int]:
    counts: dict[tuple[str, str, str], int] = {}
    for o in store.recent_observations(limit=500):
        if o.topic_key:
            address = (o.project, o.scope, o.topic_key)
            counts[address] = counts.get(address, 0) + 1
    return counts


def test_a_topic_saved_again_after_a_delete_revives_its_key_instead_of_a_second_memory(
    make_store,
) -> None:
    a, b = make_store("a"), make_store("b")
    first = a.add_observation(title="Auth", content="v1", project="p", topic_key="arch/auth")
    derived = first.observation.sync_id
    exchange(a, b)
    a.delete_observation(first.observation.id)  # soft
    again = a.add_observation(title="Auth", content="v2 by a", project="p", topic_key="arch/auth")
    assert again.observation.sync_id == derived  # revived, not a new random key
    b.add_observation(title="Auth", content="v2 by b", project="p", topic_key="arch/auth")
    converge([a, b])
    assert a.canonical_export() == b.canonical_export()
    assert live_by_topic(a) == {("p", "project", "arch/auth"): 1}
    # Hard-deleted (a tombstone) and saved again: the newer save beats the tombstone.
    a.delete_observation(again.observation.id, hard=True)
    b.add_observation(title="Auth", content="v3 by b", project="p", topic_key="arch/auth")
    revived = a.add_observation(title="Auth", content="v3 by a", project="p", topic_key="arch/auth")
    assert revived.observation.sync_id == derived
    converge([a, b])
    assert a.canonical_export() == b.canonical_export()
    assert [o.sync_id for o in a.recent_observations(limit=10)] == [derived]


@pytest.mark.parametrize("seed", range(6))
def test_random_saves_deletes_and_topic_resaves_on_three_replicas_keep_one_memory_per_topic(
    make_store, seed: int
) -> None:
    rng = random.Random(seed)
    stores = [make_store(f"{name}{seed}") for name in ("a", "b", "c")]
    topics = ["arch/auth", "arch/db"]
    for _ in range(60):
        store = rng.choice(stores)
        action = rng.random()
        if action < 0.45:
            store.add_observation(
                title="T", content=f"c{rng.random()}", project=rng.choice(["p", "q"]),
                topic_key=rng.choice(topics),
            )  # fmt: skip
        elif action < 0.7:
            mine = store.recent_observations(limit=50)
            if mine:
                store.delete_observation(rng.choice(mine).id, hard=rng.random() < 0.3)
        else:
            src, dst = rng.sample(stores, 2)
            exchange(src, dst, rng=rng, limit=rng.randint(1, 20))
    converge(stores, rng=rng)
    exports = {s.canonical_export() for s in stores}
    assert len(exports) == 1
    for store in stores:
        assert all(n == 1 for n in live_by_topic(store).values()), live_by_topic(store)


# --- the schema migration ------------------------------------------------------------------------


def test_a_store_made_by_the_previous_schema_keeps_every_memory(tmp_path: Path) -> None:
    """A version-4 database (identity by key alone), with a memory saved into another
    project's session, a tombstone and a deleted row's id, is rebuilt in place: same local ids,
    full-text search still finds everything, and the foreign session gets its own row."""
    import sqlite3

    from engram.record import legacy_record
    from engram.store.schema import MIGRATIONS, SCHEMA_VERSION

    path = tmp_path / "data" / "engram.db"
    path.parent.mkdir()
    conn = sqlite3.connect(path, isolation_level=None)
    for step in MIGRATIONS[:4]:
        step(conn)
    conn.execute("PRAGMA user_version = 4")
    conn.execute(
        "INSERT INTO sync_clock(id, origin, machine_fingerprint, wall_ms) VALUES (1, ?, '', ?)",
        (new_origin(), now_ms()),
    )
    conn.execute(
        "INSERT INTO sessions VALUES ('s-tools', 'tooling', '/src/tools', '2026-01-01 09:00:00',"
        " NULL, NULL, ?)",
        (format_hlc(now_ms() - 1000, 0, MALLORY),),
    )
    rows = [
        (1, "obs-a", "s-tools", "fix", "Login fix", "raised the TTL", "acme"),
        (2, "obs-b", "s-tools", "note", "Tool note", "pinned ruff", "tooling"),
        (5, "obs-c", "s-tools", "note", "Later", "kept after a gap in ids", "acme"),
    ]
    for rowid, key, session, kind, title, content, project in rows:
        conn.execute(
            """INSERT INTO observations(id, sync_id, session_id, type, title, content, project,
                   created_at, updated_at, hlc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (rowid, key, session, kind, title, content, project, "2026-01-01 10:00:00",
             "2026-01-01 10:00:00", format_hlc(now_ms() - 500, rowid, MALLORY)),
        )  # fmt: skip
        # Indexed as version 4 did (today's fts module also keeps tables later versions add).
        conn.execute(
            "INSERT INTO observations_fts(rowid, title, content, type, project, search_context)"
            " VALUES (?, ?, ?, ?, ?, '')",
            (rowid, title, content, kind, project),
        )
    conn.execute("UPDATE sqlite_sequence SET seq = 9 WHERE name = 'observations'")
    # What a migration written in parallel might have added before this one runs.
    conn.execute("ALTER TABLE observations ADD COLUMN importance REAL")
    conn.execute("UPDATE observations SET importance = 0.5 WHERE id = 5")
    conn.execute("CREATE INDEX observations_importance ON observations(importance)")
    conn.execute(
        "INSERT INTO sync_tombstones(entity, key, hlc, project, deleted_at, scope)"
        " VALUES ('observation', 'obs-gone', ?, 'acme', '2026-01-01 11:00:00', 'project')",
        (format_hlc(now_ms() - 100, 0, MALLORY),),
    )
    record = legacy_record(entity="observation", op="upsert", payload={"sync_id": "obs-a"},
                           updated_at="2026-01-01 10:00:00", project="acme", scope="project")  # fmt: skip
    conn.execute(
        """INSERT INTO sync_journal(mid, hlc, origin, entity, key, op, project, scope, record,
               recorded_at) VALUES (?, ?, ?, 'observation', 'obs-a', 'upsert', 'acme', 'project',
               ?, '2026-01-01 10:00:00')""",
        (record["mid"], record["hlc"], record["origin"], orjson.dumps(record).decode()),
    )
    conn.close()

    with Store.open(config=Config(data_dir=path.parent)) as store:
        assert store.db.scalar("PRAGMA user_version") == SCHEMA_VERSION
        kept = {o.id: (o.sync_id, o.project, o.title) for o in store.recent_observations(limit=9)}
        assert kept == {
            1: ("obs-a", "acme", "Login fix"),
            2: ("obs-b", "tooling", "Tool note"),
            5: ("obs-c", "acme", "Later"),
        }
        # FTS rowids still point right: #1 holds the word; #5, saved after it in the same agent
        # session, is found only through its session context (issue 14's migration derives it).
        found = store.search("TTL")
        assert [(o.id, o.match.tier) for o in found] == [(1, "words"), (5, "context")]
        assert [o.id for o in store.search("ruff")] == [2]
        # acme's memories named tooling's session: acme has its own copy now, journaled.
        copy = store.get_session("s-tools", project="acme")
        assert (copy.directory, copy.started_at) == ("/src/tools", "2026-01-01 09:00:00")
        sessions = [e for e in store.journal.pending("x") if e.entity == "session"]
        assert [(e.project, e.key) for e in sessions] == [("acme", "s-tools")]
        assert store.get_session("s-tools", project="tooling").directory == "/src/tools"
        tomb = store.db.one("SELECT project, key FROM sync_tombstones")
        assert tuple(tomb) == ("acme", "obs-gone")
        assert store.db.scalar("SELECT importance FROM observations WHERE id = 5") == 0.5
        assert store.db.one("SELECT 1 FROM sqlite_master WHERE name = 'observations_importance'")
        new = store.add_observation(title="new", content="after the upgrade", project="acme")
        assert new.observation.id == 10  # AUTOINCREMENT never reuses a deleted row's id
        for name in ("observations_fts", "prompts_fts"):
            store.db.conn.execute(f"INSERT INTO {name}({name}, rank) VALUES ('integrity-check', 1)")


def test_an_import_dated_in_the_future_does_not_outrank_later_edits(store: Store) -> None:
    """A legacy row (an export document, a Go database) dated in the year 2999 is stamped no
    later than now, so the clock stays sane and a later edit still wins everywhere."""
    document = {
        "version": "0.1.0",
        "observations": [{"sync_id": "obs-future", "session_id": "s", "title": "t",
                          "content": "dated 2999", "project": "p",
                          "created_at": "2999-01-01 00:00:00",
                          "updated_at": "2999-01-01 00:00:00"}],
    }  # fmt: skip
    store.import_data(document)
    (entry,) = [e for e in store.journal.pending("x") if e.entity == "observation"]
    assert int(entry.hlc[:13]) <= now_ms() + 1000
    assert store.journal.clock_wall_ms() <= now_ms() + 1000
    edited = store.update_observation(store.recent_observations(limit=1)[0].id, content="now")
    assert store.journal.pending("x")[-1].hlc > entry.hlc and edited.content == "now"
