"""``Store.pattern_search``: the Hub API's regular-expression search, on a real store."""

from __future__ import annotations

import re

import pytest

from engram.errors import NotFoundError, ValidationError
from engram.store import Store
from engram.store.pattern import MAX_RESULT_CHARS, SNIPPET_CHARS
from tests.support.hub import SAMPLE, fill, memory


@pytest.fixture
def filled(store: Store) -> Store:
    fill(store, SAMPLE)
    return store


def titles(text: str) -> list[str]:
    """The title line of each memory in an answer (the line after each header)."""
    lines = text.split("\n")
    return [lines[i + 1] for i, line in enumerate(lines) if re.match(r"^\S+ #\d+ \[", line)]


def test_a_regex_finds_live_memories_newest_first(filled: Store) -> None:
    result = filled.pattern_search("tailscale.*mesh|headscale")
    # "Gone" also matches but is deleted; newest first.
    assert titles(result.text) == ["Headscale", "Tailscale mesh"]
    assert result.matched == 2 and not result.truncated and not result.stopped_early
    assert "Nodes join the tailscale mesh at boot." in result.text


def test_matching_is_case_sensitive_unless_the_pattern_says_otherwise(filled: Store) -> None:
    assert titles(filled.pattern_search("TAILSCALE").text) == []
    assert titles(filled.pattern_search("(?i)TAILSCALE").text) == ["Tailscale mesh"]


def test_session_id_is_the_seeds_glob_on_session_ids(filled: Store) -> None:
    # "*Session_42*" matches Session_42 and Chatrecall_Session_42, not Session_7.
    found = filled.pattern_search("", session_id="Session_42")
    assert titles(found.text) == ["Edge deploy", "Tailscale mesh"]
    assert titles(filled.pattern_search("mesh", session_id="Session_42").text) == ["Tailscale mesh"]


def test_tags_match_types_topic_keys_and_topics_under_them(filled: Store) -> None:
    assert titles(filled.pattern_search(tags=["architecture"]).text) == ["Headscale"]
    assert titles(filled.pattern_search(tags=["network/mesh"]).text) == ["Tailscale mesh"]
    assert titles(filled.pattern_search(tags=["network"]).text) == ["Tailscale mesh"]
    assert titles(filled.pattern_search(tags=["AUTH", "edge"]).text) == [
        "Login fix",
        "Edge deploy",
    ]
    # A LIKE wildcard in a tag is only a character.
    with pytest.raises(NotFoundError):
        filled.pattern_search(tags=["netw%"])


def test_dates_bound_creation_days_inclusively(filled: Store) -> None:
    found = filled.pattern_search(date_from="2026-03-15", date_to="2026-03-31")
    assert titles(found.text) == ["Edge deploy", "Headscale"]
    assert titles(filled.pattern_search(date_to="2026-03-01").text) == ["Tailscale mesh"]
    assert titles(filled.pattern_search(date_from="2026-04-02").text) == ["Login fix"]


def test_filters_that_select_nothing_are_not_found(filled: Store) -> None:
    for kwargs in (
        {"session_id": "nobody"},
        {"tags": ["nothing"]},
        {"date_from": "2027-01-01"},
        {"query": "mesh", "session_id": "nobody"},
    ):
        with pytest.raises(NotFoundError, match="no matching sessions"):
            filled.pattern_search(**kwargs)
    # A text query that matches nothing is an empty answer, not an error.
    assert filled.pattern_search("no such words anywhere").text == ""


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({}, "query", "at least one of"),
        ({"query": "", "tags": []}, "query", "at least one of"),
        ({"query": "("}, "query", "not a valid regular expression"),
        ({"query": r"(a)\1"}, "query", "no backreferences"),
        ({"query": "(?<=a)b"}, "query", "not a valid regular expression"),
        ({"query": "x" * 501}, "query", "limit is 500"),
        ({"session_id": "a/b"}, "session_id", "letters, digits"),
        ({"session_id": "*"}, "session_id", "letters, digits"),
        ({"date_from": "2026-3-1"}, "date_from", "YYYY-MM-DD"),
        ({"date_to": "2026-02-30"}, "date_to", "not a real date"),
        ({"date_from": "2026-03-02", "date_to": "2026-03-01"}, "date_from", "after"),
        ({"tags": [" "]}, "tags", "non-empty"),
        ({"tags": ["x"] * 51}, "tags", "at most 50"),
    ],
)
def test_bad_input_is_a_clear_error(filled: Store, kwargs: dict, field: str, message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)) as caught:
        filled.pattern_search(**kwargs)
    assert caught.value.field == field


def test_a_pattern_that_backtracks_exponentially_elsewhere_is_linear_here(store: Store) -> None:
    # (a+)+$ against "aaaa…!" takes Python's re exponential time; RE2 answers at once.
    fill(store, [memory(1, "many a!", "a" * 50_000 + "!")])
    result = store.pattern_search("(a+)+$")
    assert result.matched == 0 and result.scanned == 1 and not result.stopped_early


def test_the_answer_is_cut_at_4000_characters_and_stops_reading(store: Store) -> None:
    fill(store, [memory(n, f"note {n}", "word " * 300) for n in range(1, 60)])
    result = store.pattern_search("word")
    assert len(result.text) == MAX_RESULT_CHARS
    assert result.truncated
    assert result.scanned < 59  # it stopped once the answer was full
    assert titles(result.text)[0] == "note 59"


def test_filter_only_answers_show_the_start_of_each_memory(store: Store) -> None:
    fill(store, [memory(1, "long", "x" * 2000, topic="big")])
    result = store.pattern_search(tags=["big"])
    assert len(result.text) == SNIPPET_CHARS
    # With a query the whole memory is shown (up to the answer's limit).
    assert len(store.pattern_search("x+").text) > SNIPPET_CHARS


def test_the_scan_is_bounded_in_time(filled: Store) -> None:
    result = filled.pattern_search("nothing matches this", time_limit=0)
    assert result.stopped_early
    assert result.scanned < result.candidates


def test_anchors_match_at_every_line_as_in_ripgrep(store: Store) -> None:
    fill(store, [memory(1, "first", "intro\nTODO: rotate the keys\nend")])
    assert store.pattern_search("^TODO").matched == 1
    assert store.pattern_search("keys$").matched == 1
    assert store.pattern_search("^first$").matched == 1  # the title is a line too
    assert store.pattern_search(r"\Aintro").matched == 0  # the text starts with the title
    assert store.pattern_search(r"\Afirst").matched == 1


def test_whole_text_anchors_see_each_memory_alone(store: Store) -> None:
    # Matching a batch of memories at once must not change what \A and \z mean.
    fill(store, [memory(n, f"note {n}", f"body {n}") for n in range(1, 6)])
    assert store.pattern_search(r"\Anote 3").matched == 1
    assert store.pattern_search(r"body 2\z").matched == 1
    assert store.pattern_search(r"(?s-m)^note 4.*4$").matched == 1


def test_an_error_quotes_the_pattern_as_given(store: Store) -> None:
    with pytest.raises(ValidationError) as caught:
        store.pattern_search("a)")
    assert "(?m)" not in str(caught.value)
