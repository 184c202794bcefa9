"""One validation for every face (issue 17 item 6): ids, counts and project names are checked by
the store, in the same words whichever face asked."""

from __future__ import annotations

import pytest

from engram.errors import NotFoundError, ProjectResolutionError, ValidationError
from engram.store import Store
from engram.store.checks import check_count, check_id


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "id must be an integer (got 'abc')"),
        (None, "id must be an integer (got None)"),
        (True, "id must be an integer (got True)"),
        (1.5, "id must be an integer (got 1.5)"),
        (0, "id must be a positive integer (got 0)"),
        (-3, "id must be a positive integer (got -3)"),
        (2**63, "id is out of range"),
    ],
)
def test_bad_ids_are_named(value, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        check_id(value)
    assert str(caught.value).startswith(message)


def test_good_ids() -> None:
    assert check_id("12") == check_id(12) == check_id(12.0) == 12


def test_counts_below_one_are_refused_not_defaulted(store: Store) -> None:
    store.add_observation(title="t", content="something", project="acme")
    with pytest.raises(ValidationError, match=r"limit must be at least 1 \(got -3\)"):
        store.search("something", limit=-3)
    with pytest.raises(ValidationError, match=r"limit must be at least 1 \(got 0\)"):
        store.search("something", limit=0)
    assert len(store.search("something", limit=10_000)) == 1  # above the maximum: the maximum
    assert check_count(None, "limit", default=7) == 7
    with pytest.raises(ValidationError, match="must be a whole number"):
        check_count("many", "limit", default=7)


def test_an_unknown_project_gets_a_did_you_mean(store: Store) -> None:
    store.add_observation(title="t", content="c", project="acme-web")
    with pytest.raises(ProjectResolutionError) as caught:
        store.require_project("acmee")
    error = caught.value
    assert error.code == "unknown_project" and error.available_projects == ["acme-web"]
    assert 'Did you mean "acme-web"?' in str(error)
    assert isinstance(error, NotFoundError)  # HTTP 404, and "not found" for every caller
    assert store.require_project("ACME-Web") == "acme-web"
    assert store.require_project("fresh", also_known=["fresh"]) == "fresh"


def test_merging_an_unknown_project_is_refused_and_moves_nothing(store: Store) -> None:
    store.add_observation(title="t", content="c", project="acme-web")
    pending = store.journal.count_pending("t")
    with pytest.raises(ProjectResolutionError, match='Unknown project "nosuch"'):
        store.merge_projects(["nosuch"], "acme-web")
    with pytest.raises(ProjectResolutionError, match='Unknown project "nosuch"'):
        store.merge_projects(["acme-web", "nosuch"], "other")  # one unknown: nothing moves
    assert store.project_names() == ["acme-web"]
    assert store.journal.count_pending("t") == pending
