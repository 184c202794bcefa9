"""``summarize`` offline and through the Anthropic provider with a recorded response (an
``httpx.MockTransport``; never a live call): learnings saved once with confidence and sources,
and nothing private or secret in the prompt."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from engram.errors import ValidationError
from engram.ingest.provider import ANTHROPIC_URL, AnthropicProvider, ProviderError
from engram.ingest.summarize import prompt_safe, summarize
from engram.store import Store
from tests.support import run_engram

RECORDED = Path(__file__).parent / "data" / "anthropic_messages_response.json"
SECRET = "ghp_" + "Q" * 36


def seed(store: Store) -> None:
    store.add_observation(
        title="Cookie expiry",
        content="**What**: fixed early expiry\n**Learned**: run the refresh before the expiry "
        "check\n<private>my home address is 1 Main St</private>",
        type="bugfix",
        project="shop",
    )
    store.add_observation(
        title="Deploy notes",
        content=f"## Key Learnings:\n1. Always warm the cache before switching traffic over\n"
        f"the bot token is {SECRET}",
        project="shop",
        allow_secrets=True,  # stored on purpose: it must still never reach a prompt
    )
    store.add_observation(title="Mine", content="**Learned**: personal thing, never shared",
                          project="shop", scope="personal")  # fmt: skip


def recorded_transport(seen: list[httpx.Request], body: bytes | None = None) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=body or RECORDED.read_bytes())

    return httpx.MockTransport(answer)


def test_offline_summary_saves_learnings_once_with_confidence_and_sources(store: Store) -> None:
    seed(store)
    report = summarize(store, "shop", days=7, min_confidence=0.6)
    assert report.provider == "offline" and report.saved == 2
    texts = {item["text"]: item["confidence"] for item in report.learnings}
    assert texts == {
        "run the refresh before the expiry check": 0.8,
        "Always warm the cache before switching traffic over": 0.7,
    }
    [learning] = [o for o in store.recent_observations("shop") if o.title.startswith("run the")]
    assert learning.type == "learning" and "confidence 0.80" in learning.content
    assert '#1 "Cookie expiry"' in learning.content
    assert not any(
        "personal thing" in o.content for o in store.recent_observations("shop", "project")
    )
    again = summarize(store, "shop", days=7, min_confidence=0.6)
    assert again.saved == 0 and again.already_present == 2


def test_min_confidence_filters(store: Store) -> None:
    seed(store)
    report = summarize(store, "shop", min_confidence=0.75)
    assert report.saved == 1 and report.below_confidence == 1


def test_the_provider_gets_a_clean_prompt_and_its_learnings_are_saved(store: Store, repo) -> None:
    seed(store)
    seen: list[httpx.Request] = []
    body = RECORDED.read_bytes().replace(
        b"cSHA", b"c" + repo.git("rev-parse", "HEAD~1").strip()[:12].encode()
    )
    provider = AnthropicProvider("sk-ant-test", transport=recorded_transport(seen, body))
    report = summarize(store, "shop", days=7, min_confidence=0.5, provider=provider, repo=repo.path)
    [request] = seen
    assert str(request.url) == ANTHROPIC_URL
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    sent = orjson.loads(request.content)
    prompt = sent["messages"][0]["content"]
    assert "Cookie expiry" in prompt and "session cookie expired too early" in prompt  # commits too
    assert SECRET not in prompt and "[REDACTED:github_token]" in prompt
    assert "1 Main St" not in prompt and "personal thing" not in prompt
    assert report.provider == "anthropic:claude-sonnet-4-5" and report.saved == 1
    [saved] = [o for o in store.recent_observations("shop") if o.type == "learning"]
    assert saved.title.startswith("Run the session refresh") and "confidence 0.90" in saved.content
    assert '#1 "Cookie expiry"' in saved.content and "commit " in saved.content
    assert report.below_confidence == 1


def test_a_provider_failure_is_clear_and_saves_nothing(store: Store) -> None:
    seed(store)
    before = store.count_observations("shop")
    seen: list[httpx.Request] = []
    garbage = AnthropicProvider(
        "k", transport=recorded_transport(seen, b'{"content": [{"type": "text", "text": "sorry"}]}')
    )
    with pytest.raises(ProviderError, match="no"):
        summarize(store, "shop", provider=garbage)
    refused = AnthropicProvider(
        "k",
        transport=httpx.MockTransport(
            lambda r: httpx.Response(401, json={"error": {"message": "invalid x-api-key"}})
        ),
    )
    with pytest.raises(ProviderError, match="401: invalid x-api-key"):
        summarize(store, "shop", provider=refused)
    assert store.count_observations("shop") == before


@pytest.mark.parametrize("value", [-0.1, 1.5, "high", True])
def test_bad_min_confidence_is_refused(store: Store, value) -> None:
    with pytest.raises(ValidationError, match="min_confidence"):
        summarize(store, "shop", min_confidence=value)


def test_prompt_safe_removes_private_spans_unclosed_tags_and_secrets() -> None:
    text = f"a <private>x</private> b {SECRET} c <private>never closed"
    assert prompt_safe(text) == "a [REDACTED] b [REDACTED:github_token] c [REDACTED]"


def test_cli_summarize_offline_without_a_key(tmp_path: Path) -> None:
    data = tmp_path / "data"
    saved = run_engram("save", "Cache", "**Learned**: warm the cache before the switch",
                       "--project", "shop", data_dir=data)  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    done = run_engram("summarize", "--project", "shop", "--json", data_dir=data, cwd=tmp_path,
                      env={"ANTHROPIC_API_KEY": ""})  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["provider"] == "offline" and report["saved"] == 1
    human = run_engram("summarize", "--project", "shop", "--dry-run", data_dir=data, cwd=tmp_path,
                       env={"ANTHROPIC_API_KEY": ""})  # fmt: skip
    assert "already saved" in human.stdout
