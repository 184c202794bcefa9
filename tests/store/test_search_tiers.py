"""Search says why a memory matched, ranks by tiers, and finds the word forms people type
(issue 14; docs/search.md)."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.settings import Config
from engram.store import Store, ranking
from engram.store.query import plan_words
from engram.store.ranking import row_count
from engram.times import STORE_FORMAT


@pytest.fixture(autouse=True)
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """One second between saves, so session order does not depend on random sync ids."""
    start = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)
    ticks = itertools.count()

    def now_text() -> str:
        return (start + timedelta(seconds=next(ticks))).strftime(STORE_FORMAT)

    for module in ("observations", "prompts"):
        monkeypatch.setattr(f"engram.store.{module}.now_text", now_text)


def save(store: Store, title: str, content: str, **kwargs) -> int:
    kwargs.setdefault("project", "acme")
    return store.add_observation(title=title, content=content, **kwargs).observation.id


def matches(store: Store, query: str, **kwargs) -> list[tuple[str, dict]]:
    return [(o.title, o.match.to_dict()) for o in store.search(query, **kwargs)]


def test_word_forms_people_type(store: Store) -> None:
    save(store, "Team server uses PostgreSQL", "several processes share one database")
    save(store, "Login", "authentication goes through the SSO middleware")
    save(store, "Cluster", "we deploy to k8s with helm")
    save(store, "Operator", "k8ssandra runs the cassandra ring")
    save(store, "People", "every user has a role")
    assert [t for t, _ in matches(store, "postgres")] == ["Team server uses PostgreSQL"]
    assert [t for t, _ in matches(store, "auth")] == ["Login"]
    assert [t for t, _ in matches(store, "k8s")] == ["Cluster"]  # short words stay literal
    # "uses" stems to "us": a prefix that short would match every "user"; it stays a word.
    assert [t for t, _ in matches(store, "uses")] == ["Team server uses PostgreSQL"]
    _title, match = matches(store, "postgres")[0]
    assert match == {
        "tier": "prefix",
        "words": [],
        "prefix_words": ["postgres"],
        "context_words": [],
        "context": False,
    }


def test_exact_words_rank_above_prefixes_above_context(store: Store) -> None:
    # BM25 alone would put the context-only memory first: "postgres" is all over its context.
    store.add_prompt("postgres postgres postgres is slow", session_id="s1", project="acme")
    save(store, "Context only", "nothing about databases here", session_id="s1")
    save(store, "Prefix only", "we run PostgreSQL 16 in production, a long note " * 5)
    save(store, "Exact word", "a postgres note, among many other words " * 5)
    found = matches(store, "postgres")
    assert [t for t, _ in found] == ["Exact word", "Prefix only", "Context only"]
    assert [m["tier"] for _, m in found] == ["words", "prefix", "context"]
    assert found[2][1]["context_words"] == ["postgres"] and found[2][1]["context"] is True
    assert found[0][1]["words"] == ["postgres"] and found[0][1]["context"] is False


def test_every_result_names_its_words(store: Store) -> None:
    store.add_prompt("the login page times out after lunch", session_id="s1", project="acme")
    save(store, "Raised session TTL", "users were logged out mid-review", session_id="s1")
    [(title, match)] = matches(store, "how did we fix the login timeout in the session?")
    assert title == "Raised session TTL"
    assert match["tier"] == "words"
    assert match["words"] == ["session"]
    assert match["context_words"] == ["login"] and match["context"] is True


def test_strict_mode_and_context_weight_zero(tmp_path: Path) -> None:
    with Store.open(config=Config(data_dir=tmp_path / "w0", search_context_weight=0)) as store:
        store.add_prompt("the walrus is angry", session_id="s1", project="acme")
        save(store, "A", "plain text about seals", session_id="s1")
        assert store.search("walrus") == []
        [(_title, match)] = matches(store, "seal", match_mode="all")
        assert match["context_words"] == [] and match["tier"] == "words"
    with Store.open(config=Config(data_dir=tmp_path / "w1")) as store:
        store.add_prompt("the walrus is angry", session_id="s1", project="acme")
        save(store, "A", "plain text about seals", session_id="s1")
        assert matches(store, "walrus seal", match_mode="all")[0][1]["tier"] == "words"
        assert matches(store, "walrus", match_mode="all")[0][1]["tier"] == "context"


def test_topic_fast_path_says_so(store: Store) -> None:
    save(store, "Auth decision", "PASETO", topic_key="architecture/auth")
    [(_title, match)] = matches(store, "architecture/auth")
    assert match["tier"] == "topic"


def test_prompt_search_uses_word_forms_and_says_why(store: Store) -> None:
    store.add_prompt("move the database to PostgreSQL", session_id="s1", project="acme")
    store.add_prompt("the postgres pool is exhausted", session_id="s1", project="acme")
    found = store.search_prompts("postgres")
    assert [p.content for p in found] == [
        "the postgres pool is exhausted",
        "move the database to PostgreSQL",
    ]
    assert [p.match.tier for p in found] == ["words", "prefix"]
    assert found[1].to_dict()["match"]["prefix_words"] == ["postgres"]


def test_filters_that_reject_the_best_matches_still_find_the_rest(store: Store) -> None:
    for i in range(120):
        save(store, f"Cache note {i}", "cache cache cache eviction", project="big")
    save(store, "Small", "one cache mention among other words", project="small")
    found = store.search("cache", project="small")
    assert [o.title for o in found] == ["Small"]
    assert found[0].match.tier == "words"


def test_row_count_reads_the_index(store: Store) -> None:
    for i in range(5):
        save(store, f"n{i}", "text")
    store.delete_observation(1, hard=True)
    assert row_count(store.db.conn, "observations_fts") == 4
    assert row_count(store.db.conn, "prompts_fts") == 0


def test_words_the_index_cannot_hold_are_dropped() -> None:
    assert [w.text for w in plan_words("___ __ postgres?")] == ["postgres"]
    assert plan_words("k8s")[0].prefix is False
    assert plan_words("auth")[0].prefix is True
    assert plan_words("uses")[0].prefix is False  # its stem "us" is too short


WORDS = (
    "cache timeout login redis postgres queue worker deploy migration index session token "
    "retry webhook invoice export upload image report billing flaky runner docker pipeline"
).split()


def test_pruned_ranking_matches_exact_ranking_on_a_broad_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning skips rows that hold only very common words; on this corpus (3,000 memories,
    broad questions, steps made small so that pruning happens at this size) the top 10 must be
    exactly what ranking every match gives."""
    monkeypatch.setattr(ranking, "GROUP_BUDGET", 300)
    monkeypatch.setattr(ranking, "SMALL_QUERY", 600)
    steps: list[ranking.Ranking] = []

    def counted(*args, **kwargs) -> ranking.Ranking:
        steps.append(ranking.rank(*args, **kwargs))
        return steps[-1]

    monkeypatch.setattr("engram.store.search.rank", counted)
    rng = random.Random(14)
    with Store.open(config=Config(data_dir=tmp_path / "d")) as store:
        for i in range(3000):
            picked = rng.sample(WORDS, 6)
            store.add_observation(
                title=" ".join(picked[:2]),
                content=" ".join(picked[2:]) + f" note {i}",
                project="acme",
                session_id=f"s{i // 6}",
            )
        # The saves' deferred conflict checks run now, not during the first run's searches:
        # a relation they make is a link, which changes importance (docs/graph.md).
        store.detect_conflicts(limit=None)
    queries = [" ".join(rng.sample(WORDS, rng.randint(2, 6))) for _ in range(60)]
    results = {}
    for prune in (True, False):
        config = Config(data_dir=tmp_path / "d", search_pruning=prune)
        with Store.open(config=config) as store:
            # Reads not counted: both runs must rank the same store (counted reads raise
            # importance, which breaks near ties: docs/importance.md).
            results[prune] = [
                [(o.id, o.match.tier) for o in store.search(q, limit=10, record_access=False)]
                for q in queries
            ]
    assert results[True] == results[False]
    assert sum(r.pruned for r in steps[: len(queries)]) >= 10  # pruning did happen


def test_every_explanation_is_what_the_index_itself_matches(store: Store) -> None:
    """The words a result names (itself, as a prefix, in its context) are exactly those the
    store's own index matches in that memory: explanations are worked out in a scratch index
    of the results' texts, and must never disagree with the real one (phrases such as
    "k8s_pods", prefixes, accents, context)."""
    rng = random.Random(18)
    extra = ["k8s_pods", "PostgreSQL", "authentication", "café", "naïve", "run_tests", "users"]
    for i in range(60):
        words = rng.sample(WORDS, 5) + rng.sample(extra, 2)
        if i % 3 == 0:
            store.add_prompt(" ".join(rng.sample(WORDS + extra, 6)), session_id=f"s{i}",
                             project="acme")  # fmt: skip
        save(store, " ".join(words[:2]), " ".join(words[2:]), session_id=f"s{i}")
    own = "{title content tool_name type project topic_key}"
    conn = store.db.conn

    def holds(rowid: int, expression: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM observations_fts WHERE observations_fts MATCH ? AND rowid = ?",
                (expression, rowid),
            ).fetchone()
            is not None
        )

    queries = ["k8s_pods cache", "postgres auth", "cafe naive", "run_tests user", "token caché"]
    queries += [" ".join(rng.sample(WORDS + extra, 3)) for _ in range(20)]
    checked = 0
    for query in queries:
        for mode in ("any", "all"):
            for found in store.search(query, match_mode=mode, record_access=False):
                for word in plan_words(query):
                    phrase = f'"{word.text}"'
                    exact = holds(found.id, f"{own} : {phrase}")
                    prefix = word.prefix and holds(found.id, f"{own} : {phrase}*")
                    context = holds(
                        found.id, f"search_context : {phrase}{'*' if word.prefix else ''}"
                    )
                    assert (word.text in found.match.words) == exact, (query, found.title)
                    assert (word.text in found.match.prefix_words) == (prefix and not exact)
                    assert (word.text in found.match.context_words) == context
                    checked += 1
    assert checked > 200


def test_scores_equal_to_nine_decimals_tie_and_rowids_order_them() -> None:
    """The same phrases summed in another order differ in the last bits: such rows tie, and
    tied rows come in rowid order whatever order the ranking statement gave them."""
    hits = [ranking.Hit(9, 1, -2.5), ranking.Hit(5, 1, -1.0000000001), ranking.Hit(3, 1, -1.0)]
    assert [h.rowid for h in ranking.tie_ordered(hits)] == [9, 3, 5]
    plain = [ranking.Hit(5, 1, -2.0), ranking.Hit(3, 1, -1.0), ranking.Hit(1, 3, -3.0)]
    assert ranking.tie_ordered(plain) is plain  # nothing ties: kept as the statement gave it
    tiers = [ranking.Hit(5, 1, -1.0), ranking.Hit(3, 2, -1.0)]
    assert ranking.tie_ordered(tiers) is tiers  # equal scores in two tiers do not tie


def test_texts_holding_every_word_as_a_whole_token_are_explained_without_fts5(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Most results hold each query word itself: told by looking for the word between
    separators, with no text tokenized. Anything else (another form of the word, a letter of
    another script next to it, a word of several tokens, a context text) goes to FTS5."""
    from engram.store import terms

    probes = [w.probe for w in plan_words("regression pool")]
    matched: list[list[str]] = []
    real = terms._match

    def counted(texts, probes_, found) -> None:
        matched.append([own for _, own, _ in texts])
        real(texts, probes_, found)

    monkeypatch.setattr(terms, "_match", counted)
    texts = [
        ("Regression in the pool, again", ""),  # both, whole tokens: no FTS5
        ("pool_size regression.", ""),  # "_" and "." end tokens
        ("regressions in the pool", ""),  # another form: FTS5 says it is the word
        ("éregression pool", ""),  # "é" belongs to the token: FTS5 (no match)
        ("regression pool", "pool party"),  # a context to match: FTS5
    ]
    found = terms.find(texts, probes)
    assert matched == [[t for t, _ in texts[2:]]]
    assert [f.words for f in found] == [
        ["regression", "pool"], ["regression", "pool"], ["regression", "pool"], ["pool"],
        ["regression", "pool"],
    ]  # fmt: skip
    assert found[3].prefix_words == [] and found[4].context_words == ["pool"]
    phrase = [w.probe for w in plan_words("k8s_pods")]
    assert terms.find([("k8s_pods here", "")], phrase)[0].words == ["k8s_pods"]
    assert len(matched) == 2  # a word of several tokens is matched by FTS5
    # Every occurrence is looked at (the first may be inside a longer token); only ASCII
    # letters fold (the Kelvin sign lowers to "k" in Python, but is not an ASCII letter).
    kafka = [w.probe for w in plan_words("kafka pool")]
    found = terms.find([("xpool kafkas POOL KAFKA", ""), ("\u212aafka pool", "")], kafka)
    assert len(matched) == 3 and matched[-1] == ["\u212aafka pool"]
    assert found[0].words == ["kafka", "pool"]


def test_a_query_s_new_words_are_stemmed_together_and_remembered(monkeypatch) -> None:
    """One scratch transaction for every word not stemmed before (not one each); a word asked
    for again is not tokenized again; a plan handed out can be changed without changing the
    next one."""
    from engram.store import terms

    words = ["zyxwvu_pods", "qwertyings", "_", "qwertyings"]
    assert terms.stems_of(words) == [("zyxwvu", "pod"), ("qwerti",), (), ("qwerti",)]
    inserts: list[int] = []
    real = terms._scratch

    def counting() -> object:
        conn = real()
        conn.set_trace_callback(lambda sql: inserts.append(1) if sql == "BEGIN" else None)
        return conn

    monkeypatch.setattr(terms, "_scratch", counting)
    try:
        assert terms.stems_of(["qwertyings", "asdfghs", "lkjhgs"]) == [
            ("qwerti",), ("asdfgh",), ("lkjhg",)
        ]  # fmt: skip
        assert len(inserts) == 1  # the two new words, in one scratch transaction
        assert terms.stems("asdfghs") == ("asdfgh",) and len(inserts) == 1
    finally:
        real().set_trace_callback(None)
    plan = plan_words("mnbvcx poiuyt")
    plan.pop()
    assert [w.text for w in plan_words("mnbvcx poiuyt")] == ["mnbvcx", "poiuyt"]


def _reference_break_ties(results: list, band: float) -> list:
    """The tie-break as first written (tiebreak.tied per pair), to check the faster one by."""
    from engram.store.tiebreak import tied

    ordered: list = []
    start = 0
    while start < len(results):
        end = start + 1
        while end < len(results) and tied(results[start], results[end], band):
            end += 1
        run = results[start:end]
        ordered += sorted(run, key=lambda r: -float(getattr(r, "importance", 0.0) or 0.0))
        start = end
    return ordered


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([-3.0, -2.001, -2.0, -1.999, -1.0, 0.0])),
            st.sampled_from(["words", "prefix", None]),
            st.sampled_from([0.0, 0.2, 0.5, 0.9]),
        ),
        max_size=12,
    )
)
def test_breaking_ties_orders_as_the_rule_says(rows: list) -> None:
    from types import SimpleNamespace

    from engram.store.tiebreak import TIE_BAND, break_ties

    results = [
        SimpleNamespace(rank=r, match=SimpleNamespace(tier=t) if t else None, importance=i, n=n)
        for n, (r, t, i) in enumerate(rows)
    ]
    for band in (TIE_BAND, 0.01):
        expected = [r.n for r in _reference_break_ties(results, band)]
        assert [r.n for r in break_ties(results, band)] == expected


@given(st.lists(st.tuples(st.integers(1, 9), st.sampled_from([1, 3]),
                          st.sampled_from([-2.0, -1.0000000001, -1.0, -0.5])), max_size=8))  # fmt: skip
def test_tied_hits_end_in_rowid_order_whatever_order_equal_scores_came_in(rows: list) -> None:
    """The statement orders equal scores by rowid; scores equal to nine decimals but not in
    their last bits still tie, and are put in rowid order."""
    hits = sorted(
        {ranking.Hit(r, t, s) for r, t, s in rows}, key=lambda h: (h.tier, h.score, h.rowid)
    )
    assert ranking.tie_ordered(hits) == sorted(hits, key=ranking._order)


def test_every_word_uses_a_prefix_form_only_while_the_index_holds_a_longer_term(
    data_dir: Path,
) -> None:
    """Where no indexed term extends a word's stem, "word"* matches what "word" matches (the
    same rows, instances and IDF) at more cost, so the word itself is asked for; a later save,
    by this store or another process, that adds a longer term brings the prefix form back."""
    config = Config(data_dir=data_dir)
    with Store.open(config=config) as store, Store.open(config=config) as other:
        save(store, "Rate limiter", "the limiter drops requests")
        statements: list[str] = []
        store.db.conn.set_trace_callback(statements.append)

        def asked(query: str) -> list[str]:
            statements.clear()
            found = store.search(query, match_mode="all", record_access=False)
            assert [s for s in statements if "bm25" in s], "no ranking statement ran"
            return [o.title for o in found]

        assert asked("limiter") == ["Rate limiter"]
        assert any("MATCH '(\"limiter\")'" in s for s in statements)  # no longer term: itself
        save(store, "Limiterless", "a limiterless queue")  # this store adds a longer term
        assert sorted(asked("limiter")) == ["Limiterless", "Rate limiter"]
        assert any('"limiter"*' in s for s in statements)
        assert asked("droppers requests") == []
        assert asked("drops requests") == ["Rate limiter"]
        other.add_observation(title="Dropsy", content="dropsical requests", project="acme")
        assert sorted(asked("drops requests")) == ["Dropsy", "Rate limiter"]  # another writer
        # A question of more new words than are looked up per search keeps their prefix forms.
        assert asked("limiter quickly slowly bravely calmly") == []
        assert not any("fts_vocab" in s for s in statements)
        assert all(f'"{w}"*' in " ".join(statements) for w in ("quickly", "calmly", "limiter"))
        store.db.conn.set_trace_callback(None)


def test_equal_scores_come_in_rowid_order_and_the_lowest_rowids_make_the_page(
    data_dir: Path,
) -> None:
    """The ranking statement sorts by score alone (each key compared costs), so equal scores
    keep FTS5's rowid order, and the page cut keeps the lowest rowids, in both modes."""
    config = Config(data_dir=data_dir, importance_tiebreak=False)
    with Store.open(config=config) as store:
        ids = [save(store, f"Twin {i:02d}", "identical words in every twin") for i in range(40)]
        for mode in ("all", "any"):
            for query in ("twin identical", "identical"):
                found = store.search(query, match_mode=mode, limit=10, record_access=False)
                assert [o.id for o in found] == ids[:10], (mode, query)


def test_a_question_of_thousands_of_words_is_answered_and_explained(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile input: a pasted document as the question. The word counts, the vocabulary
    look-ups and the explanations are asked in pieces (SQLite joins at most 500 SELECTs in one
    statement), so the search answers instead of failing."""
    monkeypatch.setattr(ranking, "SMALL_QUERY", 1)  # plan the query as a large store does
    save(store, "Rate limiter", "the limiter drops requests")
    save(store, "Limiters", "limiters everywhere")
    rng = random.Random(7)
    noise = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(9)) for _ in range(1500)
    ]
    question = " ".join([*noise, "limiter", "drops"])
    found = store.search(question, record_access=False)
    assert [o.title for o in found][:1] == ["Rate limiter"]
    assert found[0].match.words == ["limiter", "drops"]
    assert store.search(" ".join([*noise, "limiter"]), match_mode="all") == []
    assert [o.title for o in store.search("limiter drops", match_mode="all")] == ["Rate limiter"]
