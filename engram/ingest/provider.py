"""LLM providers for ``engram summarize``: one small interface, Anthropic's Messages API
through ``httpx`` behind it.

Tests give :class:`AnthropicProvider` an ``httpx.MockTransport`` that answers with a recorded
response body, so no test ever calls the network. What a provider receives has already been
through :func:`engram.ingest.summarize.prompt_safe` (private spans and secrets removed): the
provider itself never sees raw memories.
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from engram import settings
from engram.errors import EngramError

ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MODEL = "claude-sonnet-4-5"
MODEL_ENV = "ENGRAM_SUMMARIZE_MODEL"
KEY_ENV = "ANTHROPIC_API_KEY"


class ProviderError(EngramError):
    """The provider could not answer (network, refusal, a reply that is not what was asked)."""

    status_code = 502


class LLMProvider(Protocol):
    """Anything that turns a system text and a prompt into a reply."""

    name: str

    def complete(self, system: str, prompt: str) -> str: ...


class AnthropicProvider:
    """Claude through the Messages API (``POST /v1/messages``)."""

    def __init__(
        self,
        api_key: str,
        *,
        model: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 60.0,
        max_tokens: int = 2048,
    ) -> None:
        if not api_key.strip():
            raise ProviderError(f"{KEY_ENV} is empty")
        self.model = model or settings.raw(MODEL_ENV) or DEFAULT_MODEL
        self.name = f"anthropic:{self.model}"
        self.max_tokens = max_tokens
        self._client = httpx.Client(
            transport=transport,
            timeout=timeout,
            headers={
                "x-api-key": api_key.strip(),
                "anthropic-version": ANTHROPIC_VERSION,
                "content-type": "application/json",
            },
        )

    def complete(self, system: str, prompt: str) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": prompt}],
        }
        try:
            response = self._client.post(ANTHROPIC_URL, json=body)
        except httpx.HTTPError as exc:
            raise ProviderError(f"could not reach the Anthropic API: {exc}") from None
        if response.status_code != 200:
            raise ProviderError(
                f"the Anthropic API answered {response.status_code}: {_error_text(response)}"
            )
        try:
            data = response.json()
            texts = [b["text"] for b in data["content"] if b.get("type") == "text"]
        except (ValueError, KeyError, TypeError):
            raise ProviderError("the Anthropic API answered with an unexpected body") from None
        if not texts:
            raise ProviderError("the Anthropic API answered without text")
        return "".join(texts)

    def close(self) -> None:
        self._client.close()


def _error_text(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def provider_from_env(transport: httpx.BaseTransport | None = None) -> LLMProvider | None:
    """Anthropic when ``ANTHROPIC_API_KEY`` is set, else ``None`` (the offline fallback)."""
    key = settings.raw(KEY_ENV)
    return AnthropicProvider(key, transport=transport) if key else None
