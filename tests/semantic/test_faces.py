"""Semantic search through every face: the default mode, ``--mode`` on the CLI, ``mode`` on HTTP
and MCP ``mem_search``, ``engram vectorize`` (progress bar and ``--json``), ``engram stats``, and
the background vectorizer of the long-running processes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from litestar.testing import TestClient

from engram.errors import ValidationError
from engram.http.app import create_app
from engram.semantic.background import BackgroundVectorizer
from engram.settings import Config
from engram.store import Store
from tests.mcp.client import call, engram_mcp
from tests.support import run_engram, run_on_terminal
from tests.support.http import BASE_URL
from tests.support.semantic import MEMORIES, needs_model, save

pytestmark = needs_model
DEFAULT = {"ENGRAM_SEARCH_MODE": ""}  # Engram's own default, not the suite's lexical pin
QUESTION = "how do we keep people logged in?"


def ok(*args: str, data_dir: Path, **kw) -> str:
    result = run_engram(*args, data_dir=data_dir, env=DEFAULT, **kw)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _fill(data_dir: Path) -> None:
    for title, content in MEMORIES:
        ok("save", title, content, "--project", "acme", data_dir=data_dir)


def test_hybrid_is_the_default_with_the_extra(semantic_store: Store) -> None:
    ids = [save(semantic_store, t, c) for t, c in MEMORIES]
    found = semantic_store.search(QUESTION)
    assert found[0].id == ids[0]
    assert found[0].found_by == ["semantic"] and found[0].similarity > 0.2
    # A keyword query is still won by the memory holding the words, found by both signals.
    keyword = semantic_store.search("SESSION_COOKIE_AGE")
    assert keyword[0].id == ids[0] and keyword[0].found_by == ["lexical", "semantic"]
    assert keyword[0].to_dict()["found_by"] == ["lexical", "semantic"]
    # The lexical mode is today's search: no found_by, BM25 rank.
    lexical = semantic_store.search("SESSION_COOKIE_AGE", mode="lexical")
    assert lexical[0].found_by is None and "found_by" not in lexical[0].to_dict()
    assert semantic_store.search(QUESTION, mode="lexical") == []


def test_the_setting_and_bad_modes(config: Config, default_mode: None) -> None:
    with Store.open(config=Config(data_dir=config.data_dir, search_mode="lexical")) as store:
        save(store, *MEMORIES[0])
        assert store.search(QUESTION) == []
        assert store.search(QUESTION, mode="semantic")
        with pytest.raises(ValidationError, match="mode must be one of lexical, semantic, hybrid"):
            store.search(QUESTION, mode="fuzzy")
        with pytest.raises(ValidationError, match="match_mode 'all'"):
            store.search(QUESTION, mode="semantic", match_mode="all")
    pinned = Config(data_dir=config.data_dir, search_mode="vector")
    with Store.open(config=pinned) as store, pytest.raises(ValidationError, match="ENGRAM_SEARCH"):
        store.search(QUESTION)


def test_all_words_in_hybrid_mode_only_reorders_word_matches(semantic_store: Store) -> None:
    ids = [save(semantic_store, t, c) for t, c in MEMORIES]
    words = semantic_store.search("cache disk", mode="lexical", match_mode="all")
    found = semantic_store.search("cache disk", mode="hybrid", match_mode="all")
    assert {o.id for o in found} == {o.id for o in words} and ids[1] in {o.id for o in found}
    assert found[0].id == ids[1]


def test_cli_modes_vectorize_and_stats(data_dir: Path) -> None:
    _fill(data_dir)
    assert "0 of 4 memories have vectors" in ok("stats", data_dir=data_dir)
    out = orjson.loads(ok("vectorize", "--json", data_dir=data_dir))
    assert out["embedded"] == 4 and out["remaining"] == 0 and out["skipped"] == 0
    assert out["vectors"] == {"memories": 4, "vectorized": 4, "available": True, "missing": 0}
    assert out["model"].startswith("all-MiniLM-L6-v2-int8:")
    stats = orjson.loads(ok("stats", "--json", data_dir=data_dir))
    assert stats["vectors"]["vectorized"] == 4
    assert "4 of 4 memories have vectors (100%)" in ok("stats", data_dir=data_dir)
    human = ok("search", QUESTION, data_dir=data_dir)
    assert "Raised the session TTL to 8h" in human.splitlines()[2]
    assert "found by: meaning (similarity 0." in human
    found = orjson.loads(ok("search", QUESTION, "--mode", "semantic", "--json", data_dir=data_dir))
    assert found[0]["found_by"] == ["semantic"] and "similarity" in found[0]
    lexical = orjson.loads(ok("search", QUESTION, "--mode", "lexical", "--json", data_dir=data_dir))
    assert lexical == []
    rebuilt = orjson.loads(
        ok("vectorize", "--rebuild", "--project", "acme", "--json", data_dir=data_dir)
    )
    assert rebuilt["embedded"] == 4


def test_vectorize_shows_a_progress_bar_on_a_terminal(data_dir: Path) -> None:
    _fill(data_dir)
    code, screen = run_on_terminal(["vectorize"], data_dir, env=DEFAULT)
    assert code == 0, screen
    assert "Vectorizing memories" in screen
    code, quiet = run_on_terminal(["vectorize", "--json"], data_dir, env=DEFAULT)
    assert code == 0 and "Vectorizing" not in quiet


def test_http_search_mode(store: Store) -> None:
    ids = [save(store, t, c) for t, c in MEMORIES]
    with TestClient(create_app(store), base_url=BASE_URL) as client:
        answer = client.get("/search", params={"q": QUESTION, "mode": "semantic"})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body[0]["id"] == ids[0] and body[0]["found_by"] == ["semantic"]
        assert client.get("/search", params={"q": QUESTION, "mode": "lexical"}).json() == []
        bad = client.get("/search", params={"q": QUESTION, "mode": "fuzzy"})
        assert bad.status_code == 400


def test_the_background_vectorizer_embeds_new_memories(store: Store) -> None:
    vectorizer = BackgroundVectorizer(store)
    vectorizer.start()
    try:
        save(store, *MEMORIES[0])
        assert vectorizer.idle.wait(120)
        while store.vector_coverage().missing:  # a write may land between two runs
            vectorizer.idle.clear()
            vectorizer.notify()
            assert vectorizer.idle.wait(120)
        assert vectorizer.runs >= 1
    finally:
        vectorizer.stop()
    assert store.vector_coverage().vectorized == 1


@pytest.mark.anyio
@pytest.mark.slow
async def test_mcp_search_mode_and_background_vectorizer(data_dir: Path, workdir: Path) -> None:
    async with engram_mcp(data_dir, workdir, "--tools", "all", env=DEFAULT) as session:
        for title, content in MEMORIES:
            await call(session, "mem_save", title=title, content=content)
        found = await call(session, "mem_search", query=QUESTION, mode="semantic")
        assert "Raised the session TTL to 8h" in found["result"].split("\n[2]")[0]
        assert "found by: meaning" in found["result"]
        words = await call(session, "mem_search", query=QUESTION, mode="lexical")
        assert words["result"].startswith("No memories found")
        stats = await call(session, "mem_stats")
        assert "Semantic search:" in stats["result"]


def test_an_exact_topic_key_stays_first_in_hybrid_mode(semantic_store: Store) -> None:
    others = [save(semantic_store, t, c) for t, c in MEMORIES]
    topic = save(
        semantic_store, "Auth decisions", "Tokens are JWTs.", topic_key="architecture/auth"
    )
    found = semantic_store.search("architecture/auth", limit=3)
    assert found[0].id == topic and found[0].found_by == ["lexical"]
    assert len(found) <= 3 and set(o.id for o in found[1:]) <= set(others)
