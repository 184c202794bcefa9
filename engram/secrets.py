"""Secret detection and redaction: a pure function the store calls on every local save.

A memory is shared with a team (git chunks, the cloud), so a secret pasted into one would
travel everywhere. ``redact_secrets`` replaces what looks like a credential with
``[REDACTED:kind]`` where it enters, so sync stays complete and never has to withhold a record.
Text that arrives from another replica is never touched (it was checked where it was written).

Why not a detector library: ``detect-secrets`` 1.5.0 was measured here (see docs/ingest.md) at
~0.6 ms per *line* with its default plugins, reports values rather than spans (a GitHub token
came back as ``"ghp"``, a private key as its header line only, so replacing what it reports would
leave the secret in place) and flags every ordinary word through its entropy plugins. The save
path budget is ~0.5 ms for a whole memory, so the rules below are ours: well-documented token
formats, URL credentials, private-key blocks and ``password = value`` assignments, each run only
when one of its literal marks is in the text (a substring check), so most memories cost a few
microseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REDACTED = "[REDACTED:{kind}]"


@dataclass(frozen=True, slots=True)
class _Rule:
    """One kind of secret: literal marks that must appear for it to be possible (checked with
    ``in``, so most text costs nothing), and the pattern whose ``group`` is what gets replaced.

    The pattern is compiled the first time a text holds one of its marks (``re`` keeps it):
    compiling every rule cost each ``engram`` process ~10 ms of start-up."""

    kind: str
    marks: tuple[str, ...]
    source: str
    group: int | str = 0

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source)


def _rule(kind: str, marks: str, pattern: str, group: int | str = 0) -> _Rule:
    return _Rule(kind, tuple(marks.split()), pattern, group)


# Token formats whose prefix identifies them (as each vendor documents them). Specific kinds
# are found first: an assignment rule never relabels a span already claimed by one of these.
_TOKEN_RULES: tuple[_Rule, ...] = (
    _rule(
        "private_key",
        "PRIVATE",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    _rule("aws_access_key", "AKIA ASIA ABIA ACCA", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    _rule(
        "github_token",
        "ghp_ gho_ ghu_ ghs_ ghr_ github_pat_",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})\b",
    ),
    _rule("gitlab_token", "glpat-", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    _rule(
        "slack_webhook", "hooks.slack.com", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]{20,}"
    ),
    _rule("slack_token", "xox", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    _rule("stripe_key", "_live_ _test_", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule("anthropic_key", "sk-ant-", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    _rule("openai_key", "sk-", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}"),
    _rule("google_api_key", "AIza", r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),
    _rule("npm_token", "npm_", r"\bnpm_[A-Za-z0-9]{36}\b"),
    _rule("pypi_token", "pypi-Ag", r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"),
    _rule("jwt", "eyJ", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    _rule("bearer_token", "Bearer", r"(?<=\bBearer )[A-Za-z0-9_\-.=+/]{20,}"),
    # scheme://user:password@host — only the password is replaced.
    _rule(
        "url_password",
        "://",
        r"(?<=://)[^\s:/@]{0,64}:(?P<pw>[^\s@/]{1,200})(?=@[\w\-.\[\]]+)",
        "pw",
    ),
)
_WHOLE_TEXT_KINDS = frozenset({"private_key", "bearer_token", "url_password"})

# password = "…", API_KEY: …, client_secret='…' (any case; the name may carry a prefix or a
# suffix, as in AWS_SECRET_ACCESS_KEY or PGPASSWORD). Only the value is replaced. A bare
# (unquoted) value must mix letters and digits and be 8+ characters, so prose ("the token:
# expired") and code references stay. The scan starts at each keyword found with str.find,
# which is far cheaper than running a case-insensitive pattern over the whole text.
_KEYWORDS = ("pass", "pwd", "secret", "token", "credential", "key")
_KEY_OWNER = re.compile(r"(?:api|access|private|auth|secret|signing|encryption)[_\-]?$")
_ASSIGNMENT_TAIL = re.compile(
    r"[A-Za-z0-9_\-]*[\"']?[ \t]*(?::=|=>|:|=)[ \t]*"
    r"(?:\"(?P<dq>[^\"\s$<{%][^\"\s]{5,200})\"|'(?P<sq>[^'\s$<{%][^'\s]{5,200})'"
    r"|(?P<bare>(?=[^\s\"'`]*\d)(?=[^\s\"'`]*[A-Za-z])[A-Za-z0-9_\-+/=!#%^&*~.@]{8,200}))"
)
# A value that is plainly code or a placeholder, not a credential.
_NOT_A_VALUE = re.compile(r"^(?:[A-Za-z_][\w.]*\(|\[?REDACTED)|\.\.\.|^x+$|^\*+$|^\$")
#: Tokens are long runs without spaces; shorter words cannot be one.
_MIN_TOKEN = 16


@dataclass(frozen=True, slots=True)
class Redaction:
    """The outcome of :func:`redact_secrets`: the text to store and what kinds were replaced."""

    text: str
    kinds: tuple[str, ...] = ()

    @property
    def redacted(self) -> bool:
        return bool(self.kinds)


def _overlaps(spans: list[tuple[int, int, str]], start: int, end: int) -> bool:
    return any(start < e and s < end for s, e, _ in spans)


#: Every literal mark of every token rule, as one pattern: one scan of the text tells whether any
#: rule can match at all (most memories hold none, and checking each mark in Python cost more
#: than the rest of a save's text handling).
_ANY_MARK = re.compile(
    "|".join(sorted({re.escape(m) for r in _TOKEN_RULES for m in r.marks}, key=len, reverse=True))
)


def _token_spans(text: str) -> list[tuple[int, int, str]]:
    if _ANY_MARK.search(text) is None:
        return []
    long_words = " ".join(w for w in text.split() if len(w) >= _MIN_TOKEN)
    spans: list[tuple[int, int, str]] = []
    for rule in _TOKEN_RULES:
        # Multi-word secrets (key blocks, "Bearer x", short URLs) are gated on the whole text.
        haystack = text if rule.kind in _WHOLE_TEXT_KINDS else long_words
        if not any(mark in haystack for mark in rule.marks):
            continue
        for match in rule.pattern.finditer(text):
            start, end = match.span(rule.group)
            if not _overlaps(spans, start, end):
                spans.append((start, end, rule.kind))
    return spans


def _assignment_spans(text: str, taken: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    # No one-pattern prefilter here: a case-insensitive alternation of the keywords measured
    # 10 µs per note on the peers' corpus, five times this loop's str.find calls.
    lowered = text.lower()
    found: list[tuple[int, int, str]] = []
    for keyword in _KEYWORDS:
        at = lowered.find(keyword)
        while at != -1:
            after = at + len(keyword)
            if keyword != "key" or _KEY_OWNER.search(lowered, max(0, at - 12), at):
                match = _ASSIGNMENT_TAIL.match(text, after)
                if match is not None:
                    group = match.lastgroup or "bare"
                    start, end = match.span(group)
                    value = match.group(group)
                    if not _NOT_A_VALUE.search(value) and not _overlaps(taken + found, start, end):
                        kind = "password" if keyword in ("pass", "pwd") else "secret"
                        found.append((start, end, kind))
            at = lowered.find(keyword, after)
    return found


def redact_secrets(text: str) -> Redaction:
    """Replace every detected secret in ``text`` with ``[REDACTED:kind]``.

    Pure and cheap: a rule runs only when one of its literal marks is in the text, so a
    typical memory costs a few substring searches (~20 µs for 1 KB, see bench/secrets_bench.py).
    """
    if not text:
        return Redaction(text)
    spans = _token_spans(text)
    spans.extend(_assignment_spans(text, spans))
    if not spans:
        return Redaction(text)
    spans.sort()
    pieces: list[str] = []
    cursor = 0
    for start, end, kind in spans:
        pieces.append(text[cursor:start])
        pieces.append(REDACTED.format(kind=kind))
        cursor = end
    pieces.append(text[cursor:])
    return Redaction("".join(pieces), tuple(kind for _, _, kind in spans))


def contains_secrets(text: str) -> bool:
    """Whether :func:`redact_secrets` would change ``text``."""
    return redact_secrets(text).redacted


def redaction_warning(kinds: list[str] | tuple[str, ...], field: str = "content") -> str | None:
    """The warning a save result carries when secrets were replaced (``None`` when none)."""
    if not kinds:
        return None
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    listed = ", ".join(f"{kind} ×{n}" if n > 1 else kind for kind, n in sorted(counts.items()))
    return (
        f"⚠ Secrets redacted from the {field} ({listed}): replaced with [REDACTED:kind] "
        "before saving, so they never sync. Pass allow_secrets (--allow-secrets) to keep them."
    )
