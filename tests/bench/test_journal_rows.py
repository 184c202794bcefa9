"""``bench/journal_rows.py``: every variant still applies to the journal as the schema defines
it, and writes every row (its smallest run, on a real store's journal rows)."""

from __future__ import annotations

import sqlite3

import pytest

from engram.settings import Config
from engram.store import Store
from tests.support.bench_scripts import load

bench = load("journal_rows")


@pytest.fixture(scope="module")
def journal(tmp_path_factory) -> tuple[list[str], list[tuple]]:
    """The columns (without ``seq``) and rows of a real store's journal."""
    config = Config(data_dir=tmp_path_factory.mktemp("source"))
    with Store.open(config=config) as store:
        for n in range(3):
            store.add_observation(title=f"t{n}", content=f"note {n}", project="acme")
    conn = sqlite3.connect(config.db_path)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(sync_journal)") if r[1] != "seq"]
    rows = conn.execute(f"SELECT {', '.join(columns)} FROM sync_journal ORDER BY seq").fetchall()
    conn.close()
    assert len(rows) >= 3
    return columns, rows


@pytest.mark.parametrize("variant", list(bench.VARIANTS))
def test_every_variant_writes_every_row(tmp_path, journal, variant: str) -> None:
    columns, rows = journal
    table, indexes = bench.journal_schema(tmp_path)
    schema = bench.Schema(table, dict(indexes), list(columns))
    bench.VARIANTS[variant](schema)
    preload = bench.copies(rows, columns, 2)
    target = tmp_path / "journal.db"
    _, _, size = bench.write(target, schema, rows, 2, preload)
    assert size > 0
    conn = sqlite3.connect(target)
    assert conn.execute("SELECT COUNT(*) FROM sync_journal").fetchone()[0] == 3 * len(rows)
    mids = {r[0] for r in conn.execute("SELECT mid FROM sync_journal")}
    assert len(mids) == 3 * len(rows)  # the copies' mids are their own
    conn.close()


def test_the_copies_are_an_older_history(journal) -> None:
    columns, rows = journal
    key, hlc = columns.index("key"), columns.index("hlc")
    older = bench.copies(rows, columns, 2)
    assert max(r[key] for r in older) < min(r[key] for r in rows)
    assert max(r[hlc] for r in older) < min(r[hlc] for r in rows)
