"""Search: natural-language questions, strict mode, topic keys, filters and hostile input."""

import pytest

from engram.errors import ValidationError
from engram.store import Store
from engram.store.query import build_match, query_words


@pytest.fixture
def corpus(store: Store) -> Store:
    store.add_prompt("the login page keeps timing out after lunch", session_id="s1", project="acme")
    store.add_observation(
        title="Raised session TTL to 8h",
        content="Users were logged out mid-review. Fixed in auth/session.py",
        type="bugfix",
        session_id="s1",
        project="acme",
    )
    store.add_observation(
        title="Chose Postgres for the cloud",
        content="Needs full text search and replication",
        type="decision",
        project="acme",
        topic_key="decision/database",
    )
    store.add_observation(
        title="Flaky CI on ARM",
        content="The runner image lacked tzdata",
        type="bugfix",
        project="infra",
    )
    store.add_observation(
        title="Personal shortcut", content="alias gs=git status", scope="personal", project="acme"
    )
    return store


def test_query_words_drop_stopwords_but_never_everything() -> None:
    assert query_words("How did we fix the login timeout?") == ["fix", "login", "timeout"]
    assert query_words("what is it") == ["what", "is", "it"]
    assert build_match("fixed the bugs") == '"fixed" OR "bugs"'
    assert build_match("fixed the bugs", "all") == '"fixed" "bugs"'
    assert build_match("?!(") is None
    with pytest.raises(ValidationError):
        build_match("x", "some")


def test_a_question_finds_the_memory_through_stemming_and_session_context(corpus: Store) -> None:
    found = corpus.search("how did we fix the login timeout?")
    assert found[0].title == "Raised session TTL to 8h"  # 'timeout' only appears in the prompt
    assert corpus.search("why postgres?")[0].topic_key == "decision/database"


def test_strict_mode_needs_every_word(corpus: Store) -> None:
    assert corpus.search("postgres tzdata", match_mode="all") == []
    ranked = [o.title for o in corpus.search("postgres tzdata")]
    # Direct matches rank above a memory that only mentions it in its session context.
    assert set(ranked[:2]) == {"Chose Postgres for the cloud", "Flaky CI on ARM"}


def test_topic_key_fast_path_comes_first(corpus: Store) -> None:
    found = corpus.search("decision/database")
    assert found[0].topic_key == "decision/database" and found[0].rank == -1000.0


def test_filters(corpus: Store) -> None:
    assert {o.project for o in corpus.search("fix runner ttl", project="infra")} == {"infra"}
    assert all(o.type == "bugfix" for o in corpus.search("fix runner ttl postgres", type="bugfix"))
    assert [o.title for o in corpus.search("git status alias", scope="personal")] == [
        "Personal shortcut"
    ]
    with pytest.raises(ValidationError, match="until"):
        corpus.search("x", until="not a date")
    assert corpus.search("ttl", since="2999-01-01") == []


@pytest.mark.parametrize(
    "nasty",
    [
        '"',
        "(",
        ")",
        "*",
        "NEAR",
        "-",
        ":",
        'login" OR "x',
        "title:ttl",
        "NEAR(a b)",
        "a AND OR NOT b",
        "^ttl",
        "'; DROP TABLE observations; --",
        "日本語 テスト",
        "\x00ttl",
        "{col}: x",
        "[a-z]+.*",
    ],
)
def test_any_text_is_safe(corpus: Store, nasty: str) -> None:
    corpus.search(nasty)  # never raises
    corpus.search(nasty, match_mode="all")
    assert corpus.stats().total_observations == 4


def test_limits(store: Store) -> None:
    for i in range(30):
        store.add_observation(title=f"cache note {i}", content=f"cache entry {i}", project="p")
    assert len(store.search("cache")) == 10
    assert len(store.search("cache", limit=100)) == 20
    assert len(store.search("cache", limit=3)) == 3
    with pytest.raises(ValidationError):
        store.search("cache", limit="many")
    with pytest.raises(ValidationError, match="empty"):
        store.search("   ")


def test_session_context_weight_zero_matches_only_a_memory_s_own_text(tmp_path) -> None:
    from engram.settings import Config

    for weight, expected in ((0.5, ["Raised session TTL to 8h"]), (0.0, [])):
        with Store.open(
            config=Config(data_dir=tmp_path / str(weight), search_context_weight=weight)
        ) as s:
            s.add_prompt(
                "the login page keeps timing out after lunch", session_id="s1", project="acme"
            )
            s.add_observation(
                title="Raised session TTL to 8h",
                content="Users were logged out",
                session_id="s1",
                project="acme",
            )
            assert [o.title for o in s.search("lunch")] == expected
