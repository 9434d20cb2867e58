"""The model providers a client speaks to, and where each one's key is read from.

Pure. ``openai`` is any OpenAI-compatible server (``POST
{base_url}/chat/completions``, ``Authorization: Bearer``); ``anthropic`` is
the Anthropic Messages API (``POST {base_url}/v1/messages``, ``x-api-key``).
The conversation, the tools and the reply have one shape whatever the
provider (OpenAI's, which the turn journal records): only the client knows
which wire is in use.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["API_KEY_ENV_VARS", "PROVIDERS", "Provider", "check_provider", "key_env_vars"]

Provider = Literal["openai", "anthropic"]
"""A wire format: ``openai`` (chat completions) or ``anthropic`` (Messages API)."""

PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic")
"""Every provider, in the order error messages list them."""

API_KEY_ENV_VARS = ("CALLBOARD_API_KEY", "OPENAI_API_KEY")
"""Where an OpenAI-compatible client reads its key, in order, when no ``api_key=`` is given."""

_KEY_ENV_VARS: dict[Provider, tuple[str, ...]] = {
    "openai": API_KEY_ENV_VARS,
    "anthropic": ("CALLBOARD_API_KEY", "ANTHROPIC_API_KEY"),
}


def key_env_vars(provider: Provider) -> tuple[str, ...]:
    """Where the key for ``provider`` is read from, in order: ours first, then its own."""
    return _KEY_ENV_VARS[provider]


def check_provider(value: object) -> Provider:
    """``value`` as a provider, or a ``ValueError`` naming the ones there are."""
    if value == "openai" or value == "anthropic":
        return value
    raise ValueError(
        f"the model provider must be one of {', '.join(map(repr, PROVIDERS))}, got {value!r}"
    )
