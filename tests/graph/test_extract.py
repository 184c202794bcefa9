"""The rule extractor of the entity graph: which entities and relationships a memory's text
gives, deterministically, and that hostile text stays text."""

from __future__ import annotations

import time

import pytest

from engram.graph.extract import extract, normalize, question_entities
from engram.graph.llm import parse_reply
from engram.ingest.provider import ProviderError


def triples(title: str, content: str, type: str = "") -> set[tuple[str, str, str]]:
    return {
        (t.subject.name, t.predicate, t.object.name) for t in extract(title, content, type).triples
    }


def kinds(title: str, content: str, type: str = "") -> dict[str, str]:
    return {e.name: e.kind for e in extract(title, content, type).entities}


def test_components_and_verbs() -> None:
    found = triples("Auth", "The auth middleware reads session tokens from the session store.")
    assert ("auth middleware", "reads_from", "session store") in found
    assert kinds("Auth", "The auth middleware reads from the session store.") == {
        "auth middleware": "module",
        "session store": "service",
    }
    # A clause that goes on with "and" keeps its subject.
    found = triples(
        "Auth", "The auth middleware validates the JWT and loads users from the user cache."
    )
    assert ("auth middleware", "validates", "JWT") in found
    assert ("auth middleware", "reads_from", "user cache") in found
    # Negation turns the predicate round.
    assert ("billing service", "not_uses", "Redis") in triples(
        "Billing", "The billing service no longer uses Redis."
    )


def test_every_kind() -> None:
    found = kinds(
        "Login timeout fix",
        "Fixed TimeoutError in src/auth/login.py: the login handler calls engram.store.search "
        "and https://api.example.com/v1. Reviewed by Dana Scully, cc @bob. Run `pip install httpx`.",
        "bugfix",
    )
    assert found["TimeoutError"] == "error" and found["src/auth/login.py"] == "file"
    assert found["login handler"] == "module" and found["engram.store.search"] == "module"
    assert found["api.example.com"] == "service" and found["Dana Scully"] == "person"
    assert found["@bob"] == "person" and found["httpx"] == "library"
    decision = kinds("Use PostgreSQL", "We decided to use PostgreSQL over MySQL.", "decision")
    assert decision["Use PostgreSQL"] == "decision"
    assert ("Use PostgreSQL", "chose", "PostgreSQL") in triples(
        "Use PostgreSQL", "We decided to use PostgreSQL over MySQL.", "decision"
    )
    assert ("Use PostgreSQL", "rejected", "MySQL") in triples(
        "Use PostgreSQL", "We decided to use PostgreSQL over MySQL.", "decision"
    )


def test_names_are_normalized_and_questions_read_the_same_way() -> None:
    assert normalize("  Session Stores ") == "session store"
    assert normalize("Redis") == "redis" and normalize("src/a.py") == "src/a.py"
    names = [
        e.norm for e in question_entities("What connects the auth middleware to the session store?")
    ]
    assert names == ["auth middleware", "session store"]


def test_the_same_text_gives_the_same_graph() -> None:
    text = "The API gateway forwards requests to the billing service, which depends on Stripe."
    assert extract("Gateway", text).to_dict() == extract("Gateway", text).to_dict()
    assert ("api gateway", "connects_to", "billing service") in triples("Gateway", text)
    assert ("billing service", "depends_on", "Stripe") in triples("Gateway", text)


@pytest.mark.parametrize(
    "text",
    [
        'x" OR 1=1; DROP TABLE graph_entities; --',
        "NEAR(a b) * ^ : {col} (((",
        "<script>alert(1)</script> the xss handler",
        "`" * 500 + "a/" * 2000,
        "word " * 5000,
        "\u202e right-to-left override text",
    ],
)
def test_hostile_text_is_only_text(text: str) -> None:
    started = time.perf_counter()
    found = extract("Hostile", text)
    assert time.perf_counter() - started < 5  # no catastrophic regex backtracking
    for entity in found.entities:
        assert len(entity.name) <= 200


def test_llm_replies_are_data() -> None:
    reply = (
        'Sure! {"entities": [{"name": "auth middleware", "kind": "module"}, {"name": "x", '
        '"kind": "weapon"}], "triples": [{"subject": "auth middleware", "predicate": "reads from",'
        ' "object": "session store", "weight": 3}, {"subject": "a", "predicate": "DROP TABLE;--", '
        '"object": "b"}, {"subject": "same", "predicate": "is", "object": "same"}]}'
    )
    found = parse_reply(reply)
    assert {e.name: e.kind for e in found.entities} == {
        "auth middleware": "module",
        "x": "module",
        "session store": "module",
    }
    assert [(t.predicate, t.weight) for t in found.triples] == [("reads_from", 0.6)]
    with pytest.raises(ProviderError):
        parse_reply("no json here")
