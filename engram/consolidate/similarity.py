"""Which memories say the same thing: TF-IDF cosine similarity over their words, with candidate
pairs found through shared rare words, so 10,000 memories never cost 50 million comparisons.
With the semantic extra, the embedding vectors a store already holds count too: a candidate pair
whose vectors are at least :data:`VECTOR_SIMILARITY` alike is a duplicate whatever its words
(measured on bench/planted.py: reworded copies ≥ 0.90, different memories ≤ 0.76).

Deterministic: the same memories (and vectors) give the same groups on every machine (so two
machines that consolidate the same set agree). Memories are only compared within one project
and scope.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engram.store.query import STOPWORDS

#: Two memories whose similarity reaches this are duplicates.
DEFAULT_SIMILARITY = 0.6
#: Memories with the same topic key are expected to be about one subject: a lower bar.
SAME_TOPIC_SIMILARITY = 0.4
#: Embedding cosine similarity at which two memories are duplicates (semantic extra).
VECTOR_SIMILARITY = 0.85
#: Every member of a group must be at least this similar to every other (scaled by the bar),
#: so A≈B and B≈C never merge an A and a C that say different things.
LINK_FACTOR = 0.8
#: Words each memory is indexed under for finding candidates, and how common a word may be
#: (memories containing it) before it stops being a useful hint.
TOP_TERMS = 12
MAX_POSTING = 24
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "ly", "s")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix strip so that "timeouts"/"timeout" and "retried"/"retry" meet (cached:
    a store's vocabulary is small, its word count is not)."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            base = word[: -len(suffix)]
            return base + "y" if suffix in ("ies", "ied") else base
    return word


def words(text: str) -> list[str]:
    """The content words of ``text``: lowercased, stemmed, stopwords and 1-letter words out."""
    return [
        stem(w)
        for w in (m.lower() for m in _WORD.findall(text))
        if len(w) > 1 and w not in STOPWORDS
    ]


@dataclass(frozen=True, slots=True)
class Item:
    """What similarity looks at in one memory."""

    key: str  # the memory's sync id: the deterministic order
    block: tuple[str, str]  # (project, scope): only memories of one block are compared
    text: str
    topic_key: str | None = None


class Vectors:
    """TF-IDF vectors of a set of items (document frequencies from that set)."""

    def __init__(self, items: Sequence[Item]) -> None:
        self.items = list(items)
        counts = [Counter(words(item.text)) for item in self.items]
        df: Counter[str] = Counter()
        for c in counts:
            df.update(c.keys())
        n = len(self.items)
        self.df = df
        self.vectors: list[dict[str, float]] = []
        for c in counts:
            vector = {
                w: (1.0 + math.log(k)) * (math.log((n + 1) / (df[w] + 1)) + 1.0)
                for w, k in c.items()
            }
            norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
            self.vectors.append({w: v / norm for w, v in vector.items()})

    def cosine(self, i: int, j: int) -> float:
        a, b = self.vectors[i], self.vectors[j]
        if len(a) > len(b):
            a, b = b, a
        return sum(v * b.get(w, 0.0) for w, v in a.items())

    def candidates(self) -> set[tuple[int, int]]:
        """Pairs (i < j) of one block that share a rare top word or a topic key."""
        postings: dict[tuple[tuple[str, str], str], list[int]] = defaultdict(list)
        for i, vector in enumerate(self.vectors):
            top = sorted(vector.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_TERMS]
            for word, _ in top:
                if self.df[word] <= MAX_POSTING:
                    postings[(self.items[i].block, word)].append(i)
            topic = self.items[i].topic_key
            if topic:
                postings[(self.items[i].block, "\0topic:" + topic)].append(i)
        pairs: set[tuple[int, int]] = set()
        for members in postings.values():
            if len(members) > MAX_POSTING:
                continue
            for x, i in enumerate(members):
                for j in members[x + 1 :]:
                    pairs.add((i, j) if i < j else (j, i))
        return pairs


@dataclass(frozen=True, slots=True)
class Group:
    """Items that say the same thing: indexes into the items (sorted by key) and the lowest
    similarity between two of them."""

    members: tuple[int, ...]
    lowest: float


def find_groups(
    items: Sequence[Item],
    *,
    similarity: float = DEFAULT_SIMILARITY,
    topic_similarity: float = SAME_TOPIC_SIMILARITY,
    embedding: Callable[[int, int], float | None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Group]:
    """Groups of two or more items that say the same thing, sorted by their first key.

    ``embedding(i, j)`` is the cosine similarity of two items' embedding vectors (``None``
    when one has none): it is scaled so that :data:`VECTOR_SIMILARITY` meets the word bar, and
    the better of the two decides."""
    vectors = Vectors(items)
    pairs = sorted(vectors.candidates())

    def bar(i: int, j: int) -> float:
        same_topic = items[i].topic_key and items[i].topic_key == items[j].topic_key
        return min(similarity, topic_similarity) if same_topic else similarity

    def alike(i: int, j: int) -> float:
        score = vectors.cosine(i, j)
        meaning = embedding(i, j) if embedding is not None else None
        if meaning is not None:
            score = max(score, bar(i, j) * meaning / VECTOR_SIMILARITY)
        return score

    similar: dict[int, dict[int, float]] = defaultdict(dict)
    for done, (i, j) in enumerate(pairs, 1):
        score = alike(i, j)
        if score >= bar(i, j):
            similar[i][j] = similar[j][i] = score
        if progress is not None and done % 5000 == 0:
            progress(done, len(pairs))
    order = sorted(range(len(items)), key=lambda i: items[i].key)
    assigned: set[int] = set()
    groups: list[Group] = []
    for anchor in order:
        if anchor in assigned or anchor not in similar:
            continue
        group = [anchor]
        # The anchor's closest matches first; each must be close to everyone already in.
        for other, _ in sorted(similar[anchor].items(), key=lambda kv: (-kv[1], items[kv[0]].key)):
            if other in assigned:
                continue
            if all(
                alike(other, member) >= LINK_FACTOR * bar(other, member) for member in group[1:]
            ):
                group.append(other)
        if len(group) > 1:
            assigned.update(group)
            members = tuple(sorted(group, key=lambda i: items[i].key))
            lowest = min(alike(a, b) for x, a in enumerate(members) for b in members[x + 1 :])
            groups.append(Group(members, lowest))
    return sorted(groups, key=lambda g: items[g.members[0]].key)
