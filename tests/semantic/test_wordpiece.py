"""The tokenizer gives the model the token ids it was trained with: the ids below come from the
reference implementation (Hugging Face ``tokenizers`` with the model's own ``tokenizer.json``)."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from engram.semantic.wordpiece import WordPiece, normalize, pre_tokenize

VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"

REFERENCE = {
    "How do we keep people logged in?": [101, 2129, 2079, 2057, 2562, 2111, 26618, 1999, 1029, 102],
    "Café naïve RÉSUMÉ": [101, 7668, 15743, 13746, 102],
    "SESSION_COOKIE_AGE=28800 (8h)": [
        101, 5219, 1035, 17387, 1035, 2287, 1027, 24841, 8889, 1006, 1022, 2232, 1007, 102,
    ],
    "中文 and 日本語": [101, 1746, 1861, 1998, 1864, 1876, 1950, 102],
    "tab\there\x0bvt\u2028ls\u00a0nb": [101, 21628, 2182, 2615, 2102, 1048, 2015, 1050, 2497, 102],
    "emoji \U0001f600 ok": [101, 7861, 29147, 2072, 100, 7929, 102],
    "x" * 101: [101, 100, 102],
    "don't e-mail a.b@c.de": [
        101, 2123, 1005, 1056, 1041, 1011, 5653, 1037, 1012, 1038, 1030, 1039, 1012, 2139, 102,
    ],
    "ǅ İstanbul straße": [101, 100, 9960, 2358, 27807, 102],
    "\x00nul\ufffdrepl\u200bzw": [101, 16371, 20974, 13699, 23858, 2860, 102],
    "": [101, 102],
    "   ": [101, 102],
}  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer() -> WordPiece:
    return WordPiece.bundled()


def test_the_vocabulary_is_the_models_own() -> None:
    raw = resources.files("engram.semantic").joinpath("vocab.txt").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == VOCAB_SHA256


@pytest.mark.parametrize("text", list(REFERENCE))
def test_ids_match_the_reference_tokenizer(tokenizer: WordPiece, text: str) -> None:
    assert tokenizer.encode(text, 256) == REFERENCE[text]


def test_long_texts_are_cut_to_the_length_with_the_closing_token(tokenizer: WordPiece) -> None:
    ids = tokenizer.encode("word " * 1000, 16)
    assert len(ids) == 16
    assert ids[0] == tokenizer.cls and ids[-1] == tokenizer.sep
    assert set(ids[1:-1]) == {tokenizer.ids["word"]}


def test_normalize_and_split_follow_berts_rules() -> None:
    assert normalize("Ünïcödé\u0301 TEXT") == "unicode text"
    assert pre_tokenize("a.b, (c)!") == ["a", ".", "b", ",", "(", "c", ")", "!"]


def test_a_vocabulary_without_special_tokens_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no \[CLS\]"):
        WordPiece(["a", "b"])
