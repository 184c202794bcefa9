"""Pure text rules: privacy, truncation, hashing, topic keys, passive capture, similar names."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram import text


def test_private_spans_are_redacted_case_insensitively_across_lines() -> None:
    raw = "Set up API with <private>sk-abc</private> and <PRIVATE>multi\nline</Private>  "
    assert text.strip_private(raw) == "Set up API with [REDACTED] and [REDACTED]"


def test_truncation_is_utf8_safe_and_marked() -> None:
    cut = text.truncate("é" * 10, 5)  # 20 bytes; 5 bytes would split the third é
    assert cut.truncated and cut.text == "éé" + text.TRUNCATION_MARKER
    assert cut.original_bytes == 20 and "truncated from 20 to 5" in (cut.warning or "")
    assert not text.truncate("short", 100).truncated


def test_normalized_hash_ignores_whitespace_and_case() -> None:
    assert text.normalized_hash("Hello   World\n") == text.normalized_hash(" hello world")
    assert text.normalized_hash("a b") != text.normalized_hash("ab")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("  Architecture/Auth  Model ", "architecture/auth-model"), ("", None), ("   ", None)],
)
def test_topic_keys_are_normalized(raw: str, expected: str | None) -> None:
    assert text.normalize_topic_key(raw) == expected


def test_topic_sync_id_is_deterministic_and_distinct() -> None:
    a = text.topic_sync_id("acme", "project", "architecture/auth")
    assert a == text.topic_sync_id("acme", "project", "architecture/auth")
    assert a.startswith("obs-") and len(a) == 20
    assert a != text.topic_sync_id("acme", "personal", "architecture/auth")


@pytest.mark.parametrize(
    ("type_", "title", "content", "expected"),
    [
        ("bugfix", "Fixed login timeout", "", "bug/fixed-login-timeout"),
        ("architecture", "Architecture of auth", "", "architecture/of-auth"),
        ("manual", "We chose Postgres", "", "decision/we-chose-postgres"),
        (
            "manual",
            "",
            "the quick brown fox jumps over the lazy dog today",
            "topic/the-quick-brown-fox-jumps-over-the-lazy",
        ),
        ("decision", "Decision", "", "decision/general"),
        ("weird type", "Something", "", "weird-type/something"),
    ],
)
def test_topic_key_suggestions(type_: str, title: str, content: str, expected: str) -> None:
    assert text.suggest_topic_key(type_, title, content) == expected


def test_topic_key_suggestion_needs_some_text() -> None:
    with pytest.raises(ValueError):
        text.suggest_topic_key("bug", "", "  ")


def test_key_learnings_extraction_prefers_last_section_and_numbered_items() -> None:
    body = """Intro
## Key Learnings:
1. this one is from an older section of the text
## Work
stuff
### Aprendizajes Clave
1. **bcrypt cost=12** is the right balance for our servers
2) `JWT` refresh tokens need atomic rotation always
3. too short
- a bullet item that should be ignored here
# Next
1. not in the section at all, ignore this one please
"""
    assert text.extract_learnings(body) == [
        "bcrypt cost=12 is the right balance for our servers",
        "JWT refresh tokens need atomic rotation always",
    ]


def test_key_learnings_fall_back_to_bullets_and_empty_when_absent() -> None:
    assert text.extract_learnings("## Learnings\n- always pin the sqlite version in CI\n") == [
        "always pin the sqlite version in CI"
    ]
    assert text.extract_learnings("no section here") == []


def test_similar_names_rank_case_then_substring_then_distance() -> None:
    names = ["engram-memory", "Engram", "engrm", "unrelated"]
    assert text.find_similar("engram", names) == ["Engram", "engram-memory", "engrm"]
    assert text.find_similar("", names) == []


_SPACES = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2000\u2028\u3000"


@settings(max_examples=2000)
@given(
    st.one_of(
        st.text(alphabet=st.sampled_from(list(_SPACES) + list("aB.\x7f\x00é")), max_size=40),
        st.text(max_size=40),
        st.text(alphabet=st.characters(max_codepoint=127), max_size=60),
    )
)
def test_collapsing_whitespace_is_splitting_and_joining(value: str) -> None:
    """The dedupe hash's whitespace rule (issue 18: collapsed in place for plain ASCII text)
    is ``" ".join(text.split())`` for any text: every whitespace character Python knows
    (ASCII control ones, NEL, NBSP, Unicode spaces), runs, both ends, DEL and NUL."""
    import hashlib

    assert text.collapsed(value) == " ".join(value.split())
    reference = hashlib.sha256(" ".join(value.split()).lower().encode("utf-8")).hexdigest()
    assert text.normalized_hash(value) == reference
