"""``Database.shared_in_bulk`` (engram/store/db.py): inside a write transaction of a bulk run
(an import's group of chunks), one object for the whole transaction, settled once just before
it commits and dropped when it rolls back; outside a bulk run, none (the caller keeps its own,
and settles it itself)."""

from __future__ import annotations

import pytest

from engram.store import Store


def _note(store: Store) -> tuple[list[list[str]], object]:
    made: list[list[str]] = []

    def make() -> list[str]:
        made.append([])
        return made[-1]

    def settle(notes: list[str]) -> None:  # written inside the transaction, before COMMIT
        store.db.conn.execute(
            "INSERT INTO sync_targets(target) VALUES (?)", (",".join(notes) or "-",)
        )

    return made, (make, settle)


def _targets(store: Store) -> list[str]:
    return [r[0] for r in store.db.rows("SELECT target FROM sync_targets ORDER BY target")]


def test_outside_a_bulk_run_nothing_is_shared(store: Store) -> None:
    made, (make, settle) = _note(store)
    with store.db.write():
        assert store.db.shared_in_bulk("k", make, settle) is None
    with store.db.bulk_writes():
        assert store.db.shared_in_bulk("k", make, settle) is None  # (no transaction)
        with store.db.read():
            assert store.db.shared_in_bulk("k", make, settle) is None  # (a read's)
    assert made == [] and _targets(store) == []


def test_one_object_for_the_transaction_settled_before_it_commits(store: Store) -> None:
    made, (make, settle) = _note(store)
    with store.db.bulk_writes():
        with store.db.write():
            for name in ("a", "b"):
                with store.db.write():  # (each batch's own, nested)
                    shared = store.db.shared_in_bulk("k", make, settle)
                    assert shared is not None
                    shared.append(name)
        assert len(made) == 1 and _targets(store) == ["a,b"]
        with store.db.write():  # the next transaction gets its own
            shared = store.db.shared_in_bulk("k", make, settle)
            assert shared is not None and shared == []
            shared.append("c")
    assert len(made) == 2 and _targets(store) == ["a,b", "c"]


def test_a_transaction_rolled_back_drops_what_it_shared(store: Store) -> None:
    made, (make, settle) = _note(store)
    with store.db.bulk_writes():
        with pytest.raises(RuntimeError), store.db.write():
            shared = store.db.shared_in_bulk("k", make, settle)
            assert shared is not None
            shared.append("lost")
            raise RuntimeError("a bad chunk")
        with store.db.write():
            shared = store.db.shared_in_bulk("k", make, settle)
            assert shared == []
    assert len(made) == 2 and _targets(store) == ["-"]
