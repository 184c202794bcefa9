"""The embedding model's tokenizer: BERT's uncased WordPiece, in plain Python.

The model (all-MiniLM-L6-v2) reads token ids from the ``bert-base-uncased`` vocabulary that ships
beside this file (``vocab.txt``; where it comes from is in ``VOCAB.md``). Writing the few rules
here instead of depending on a tokenizer library keeps the extra small and keeps every network
client (the usual tokenizer packages pull in a model-hub client) out of the install.

The rules are BERT's: clean the text (drop control characters, turn every kind of whitespace
into a space), put spaces around CJK ideographs, strip accents, lowercase, split on whitespace
and on every punctuation character, then split each word greedily into the longest pieces the
vocabulary knows (``##`` marks a piece that continues a word); a word with no such split, or
longer than 100 characters, becomes ``[UNK]``. ``tests/semantic/test_wordpiece.py`` pins the ids
this produces for awkward inputs.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources

CLS, SEP, PAD, UNK = "[CLS]", "[SEP]", "[PAD]", "[UNK]"
MAX_WORD_CHARS = 100
CONTINUATION = "##"


def _is_control(char: str) -> bool:
    # Unassigned code points (Cn) stay: the reference tokenizer keeps them as unknown words.
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or char.isspace()


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    # Every non-letter, non-digit ASCII symbol counts ($, ^, `...), as in BERT's own rules.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B920 <= cp <= 0x2CEAF  # sic: the reference tokenizer's range
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def normalize(text: str) -> str:
    """BERT's normalizer: cleaned, CJK spaced out, accents stripped, lowercased."""
    out: list[str] = []
    for char in text:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            continue
        if _is_whitespace(char):
            out.append(" ")
        elif _is_cjk(cp):
            out.append(f" {char} ")
        else:
            out.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def pre_tokenize(text: str) -> list[str]:
    """Words of normalized text: split on whitespace, each punctuation character on its own."""
    words: list[str] = []
    for chunk in text.split():
        current: list[str] = []
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
    return words


class WordPiece:
    """Text → token ids for the vocabulary in ``vocab`` (one token per line, id = line number)."""

    def __init__(self, vocab: Sequence[str]) -> None:
        self.ids = {token: index for index, token in enumerate(vocab)}
        for special in (CLS, SEP, PAD, UNK):
            if special not in self.ids:
                raise ValueError(f"the vocabulary has no {special} token")
        self.cls, self.sep, self.pad, self.unk = (self.ids[t] for t in (CLS, SEP, PAD, UNK))
        # Most words repeat across memories; splitting each distinct word once saves most of
        # the tokenizer's time on a bulk run.
        self._split = lru_cache(maxsize=65536)(self._split_word)

    @classmethod
    def bundled(cls) -> WordPiece:
        """The tokenizer of the bundled model (``vocab.txt`` beside this module)."""
        text = resources.files("engram.semantic").joinpath("vocab.txt").read_text("utf-8")
        return cls(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"))

    def _split_word(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_WORD_CHARS:
            return (self.unk,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
                found = self.ids.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk,)
            pieces.append(found)
            start = end
        return tuple(pieces)

    def encode(self, text: str, max_length: int) -> list[int]:
        """``[CLS]`` + the text's ids, cut to fit ``max_length`` with the closing ``[SEP]``."""
        room = max_length - 2
        ids: list[int] = [self.cls]
        for word in pre_tokenize(normalize(text)):
            ids.extend(self._split(word))
            if len(ids) > room:
                break
        del ids[room + 1 :]
        ids.append(self.sep)
        return ids
