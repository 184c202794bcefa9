"""A first pass over the store's main paths (the detailed suites live beside this file)."""

from engram.store import Store


def test_save_search_get_roundtrip(store: Store) -> None:
    saved = store.add_observation(
        title="Fixed login timeout",
        content="**What**: raised the session TTL",
        type="bugfix",
        project="acme",
    )
    assert saved.action == "created"
    found = store.search("how did we fix the login timeout?")
    assert [o.id for o in found] == [saved.observation.id]
    assert store.get_observation(saved.observation.id).title == "Fixed login timeout"
