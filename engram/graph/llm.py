"""An optional LLM extractor for the entity graph, behind the provider interface of
:mod:`engram.ingest.provider` (off by default: ``engram graph ingest --llm`` with
``ANTHROPIC_API_KEY`` set). What it finds is added to what the rules find, never instead.

Privacy: the memory's text goes through :func:`engram.ingest.summarize.prompt_safe` first
(``<private>`` spans and anything that looks like a secret removed). The reply is data: it is
parsed as JSON, names and predicates are checked and cut, and a reply that is not the asked
shape is an error for that memory only (its rule-based graph stands).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from engram.graph.extract import KINDS, MAX_NAME, Entity, Extraction, Triple, normalize
from engram.ingest.provider import LLMProvider, ProviderError

MAX_ENTITIES = 30
MAX_TRIPLES = 60
MAX_INPUT = 6000
DEFAULT_WEIGHT = 0.6
_PREDICATE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
SYSTEM = (
    "You extract a knowledge graph from one note of a software team's shared memory. Return "
    'only JSON: {"entities": [{"name": str, "kind": one of '
    + ", ".join(KINDS)
    + '}], "triples": [{"subject": str, "predicate": snake_case verb such as reads_from, '
    'depends_on, uses, calls, causes, fixes, replaces, "object": str, "weight": number 0..1}]}. '
    "Entities are concrete: files, modules, libraries, services, errors, people, decisions. "
    "Only state what the note says."
)


class LLMExtractor:
    """Entities and triples from a model (see the module docstring)."""

    def __init__(self, provider: LLMProvider) -> None:
        self.provider = provider
        self.name = f"llm:{provider.name}"

    def extract(self, title: str, content: str) -> Extraction:
        from engram.ingest.summarize import prompt_safe

        text = prompt_safe(f"{title}\n\n{content}")[:MAX_INPUT]
        reply = self.provider.complete(SYSTEM, text)
        return parse_reply(reply)


def parse_reply(reply: str) -> Extraction:
    """The extraction a model's reply describes; :class:`ProviderError` when it is not JSON of
    the asked shape."""
    start, end = reply.find("{"), reply.rfind("}")
    try:
        data: Any = orjson.loads(reply[start : end + 1]) if start >= 0 and end > start else None
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise ProviderError("the model's reply is not a JSON object")
    entities: dict[str, Entity] = {}
    for item in _items(data.get("entities"))[:MAX_ENTITIES]:
        name = _name(item.get("name"))
        if name:
            kind = item.get("kind") if item.get("kind") in KINDS else "module"
            entities.setdefault(normalize(name), Entity(name, str(kind)))
    triples: dict[tuple[str, str, str], Triple] = {}
    for item in _items(data.get("triples"))[:MAX_TRIPLES]:
        subject, obj = _name(item.get("subject")), _name(item.get("object"))
        predicate = str(item.get("predicate") or "").strip().lower().replace(" ", "_")
        if not subject or not obj or not _PREDICATE.match(predicate):
            continue
        if normalize(subject) == normalize(obj):
            continue
        a = entities.setdefault(normalize(subject), Entity(subject, "module"))
        b = entities.setdefault(normalize(obj), Entity(obj, "module"))
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
            weight = DEFAULT_WEIGHT
        triples.setdefault((a.norm, predicate, b.norm), Triple(a, predicate, b, float(weight)))
    return Extraction(list(entities.values()), list(triples.values()))


def _items(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _name(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    text = " ".join(value.split())
    if "\0" in text or not text:
        return ""
    return text[:MAX_NAME]


def extractor_from_env() -> LLMExtractor | None:
    """The LLM extractor when a provider is configured (``ANTHROPIC_API_KEY``), else None."""
    from engram.ingest.provider import provider_from_env

    provider = provider_from_env()
    return LLMExtractor(provider) if provider is not None else None
