"""A memory of ours that went through the Go tool (which keeps no sync_id) and came back is
one memory, not two, whichever arrives first, on every replica (issue 16)."""

from __future__ import annotations

from typing import Any

import orjson

from engram.store import Store
from engram.sync.git.go_writer import go_export


def records(store: Store) -> list[dict[str, Any]]:
    return [entry.as_record() for entry in store.journal.pending("none")]


def through_go(store: Store) -> dict[str, Any]:
    """What comes back from a Go teammate: our Go export as the Go tool re-exports it (its
    rows have no sync_id)."""
    document = orjson.loads(go_export(store.export_data("acme")))
    for section in ("observations", "prompts"):
        for row in document[section] or ():
            row.pop("sync_id")
    return document


def live(store: Store) -> list[str]:
    document = orjson.loads(store.canonical_export())
    return sorted(
        [o["title"] for o in document["observations"] if o["deleted_at"] is None]
        + [p["content"] for p in document["prompts"]]
    )


def write_originals(store: Store) -> None:
    store.create_session("s-1", "acme", "/src/acme")
    store.add_observation(title="Cache", content="LRU", project="acme", session_id="s-1")
    store.add_prompt("how big?", session_id="s-1", project="acme")


def test_a_copy_imported_next_to_its_original_is_retired(make_store) -> None:
    ours = make_store("ours")
    write_originals(ours)
    result = ours.import_data(through_go(ours))
    assert (result.observations_imported, result.prompts_imported) == (1, 1)
    assert result.copies_retired == 2
    assert live(ours) == ["Cache", "how big?"]
    # importing it again changes nothing
    again = ours.import_data(through_go(ours))
    assert again.copies_retired == 0 and live(ours) == ["Cache", "how big?"]


def test_whichever_arrives_first_every_replica_ends_the_same(make_store) -> None:
    ours = make_store("ours")
    write_originals(ours)
    came_back = through_go(ours)
    upgraded = make_store("upgraded")  # a Go teammate who switched: the copies first
    upgraded.import_data(came_back)
    result = upgraded.apply_mutations(records(ours), source="git:test")
    assert result.copies_retired == 2
    assert live(upgraded) == ["Cache", "how big?"]
    ours.import_data(came_back)  # the original first, then the copies
    third = make_store("third")  # sees only the other two replicas' journals
    third.apply_mutations(records(upgraded), source="git:test")
    third.apply_mutations(records(ours), source="git:test")
    ours.apply_mutations(records(upgraded), source="git:test")
    upgraded.apply_mutations(records(ours), source="git:test")
    assert ours.canonical_export() == upgraded.canonical_export() == third.canonical_export()
    assert live(third) == ["Cache", "how big?"]


def test_a_copy_edited_for_real_is_kept(make_store) -> None:
    ours = make_store("ours")
    write_originals(ours)
    upgraded = make_store("upgraded")
    upgraded.import_data(through_go(ours))
    [copy] = upgraded.recent_observations(project="acme", limit=5)
    upgraded.update_observation(copy.id, content="LRU, 512 entries")  # a real edit
    result = upgraded.apply_mutations(records(ours), source="git:test")
    assert result.copies_retired == 1  # only the prompt
    assert sorted(o.content for o in upgraded.recent_observations(project="acme")) == [
        "LRU",
        "LRU, 512 entries",
    ]


def test_same_text_in_another_session_is_another_memory(make_store) -> None:
    ours = make_store("ours")
    write_originals(ours)
    document = through_go(ours)
    for section in ("observations", "prompts"):
        for row in document[section]:
            row["session_id"] = "s-elsewhere"
    result = ours.import_data(document)
    assert result.copies_retired == 0 and len(live(ours)) == 4


def test_the_cli_import_says_what_came_back_through_go(tmp_path) -> None:
    from engram.settings import Config
    from tests.support import run_engram

    data = tmp_path / "data"
    with Store.open(config=Config(data_dir=data)) as store:
        write_originals(store)
        document = through_go(store)
    path = tmp_path / "back.json"
    path.write_bytes(orjson.dumps(document))
    done = run_engram("import", str(path), data_dir=data)
    assert done.returncode == 0, done.stderr
    assert "2 of them were memories of this store that came back through the Go tool" in (
        done.stdout
    )
