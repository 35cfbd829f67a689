"""The ``anthropic`` provider: Claude through the Messages API (``anthropic_client.AnthropicModel``).

Ids: ``anthropic/claude-sonnet-5-5`` or the bare ``claude-sonnet-5-5``; a built model's
``name`` is the bare model name either way, so threads stored before the registry
existed (and the API's own ``model`` field) read the same.

Invariants:
- Importing this module does not import the ``anthropic`` SDK; ``build`` does.
- Key and base URL are the SDK's own variables (``ANTHROPIC_API_KEY`` or
  ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``); ``--base-url`` overrides the latter.
- This provider is the one that sends the core's ``cache_control`` marks (and adds
  its own breakpoints on the last tool and message), see ``anthropic_client``.
- Prices are USD per million tokens, copied from Anthropic's public pricing page
  (platform.claude.com/docs/en/about-claude/pricing): a best-effort estimate for the
  cost line, never a bill. A model id is matched by its *longest* known prefix, so
  dated ids (``claude-sonnet-4-5-20250929``) and suffixed ids (``claude-sonnet-5-5[1m]``)
  find their family and ``claude-sonnet-5-5`` is not priced as ``claude-sonnet-5``.
  An unknown model has no price and no window (never a guess).
- Cache writes are priced at the 5-minute TTL rate: memagent only asks for
  ``{"type": "ephemeral"}`` breakpoints, which default to 5 minutes.
"""

from __future__ import annotations

import os

from memagent.agent.model.base import Model
from memagent.agent.model.registry import DEFAULT_OPTIONS, ModelInfo, ModelOptions, Price, ProviderStatus
from memagent.agent.model.startup import CREDENTIAL_VARS

__all__ = ["CONTEXT_WINDOW", "PRICES", "PROVIDER", "AnthropicProvider", "price_for"]

BASE_URL_VAR = "ANTHROPIC_BASE_URL"

# The window of every Claude model in the price table (the standard one; a larger
# window some models offer on request is not assumed).
CONTEXT_WINDOW = 200_000


def _p(inp: float, out: float, write: float, read: float) -> Price:
    return Price(input=inp, output=out, cache_write=write, cache_read=read)


# Keyed by model-id prefix. Keep families together, newest first.
PRICES: dict[str, Price] = {
    # Fable / Mythos (Mythos is limited availability; same price list).
    "claude-fable-5-1": _p(10.0, 50.0, 12.50, 0.25),
    "claude-mythos-5-1": _p(10.0, 50.0, 12.50, 0.25),
    "claude-fable-5": _p(10.0, 50.0, 12.50, 1.00),
    "claude-mythos-5": _p(10.0, 50.0, 12.50, 1.00),
    # Opus: 4.5 and later are on the $5/$25 tier, 4.0/4.1 on the old $15/$75.
    "claude-opus-5-5": _p(4.0, 20.0, 5.00, 0.20),
    "claude-opus-5": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-8": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-7": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-6": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-5": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4": _p(15.0, 75.0, 18.75, 1.50),  # claude-opus-4-0, -4-1, -4-2025...
    # Sonnet. Sonnet 5.5 cache reads were cut to 0.05x input on 2026-10-07.
    "claude-sonnet-5-5": _p(2.0, 10.0, 2.50, 0.10),
    "claude-sonnet-5": _p(2.0, 10.0, 2.50, 0.20),
    "claude-sonnet-4": _p(3.0, 15.0, 3.75, 0.30),  # 4.0, 4.5, 4.6
    "claude-3-7-sonnet": _p(3.0, 15.0, 3.75, 0.30),
    # Haiku. Haiku 5.5 has a long-prompt band above 100k prompt tokens.
    "claude-haiku-5-5": Price(
        input=0.10,
        output=0.50,
        cache_write=0.125,
        cache_read=0.01,
        long_prompt_threshold=100_000,
        long_prompt=_p(0.50, 2.50, 0.625, 0.05),
    ),
    "claude-haiku-4-5": _p(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": _p(0.80, 4.0, 1.00, 0.08),
}


def price_for(model: str) -> Price | None:
    """The price entry whose key is the longest prefix of ``model``, or None."""
    best: str | None = None
    for prefix in PRICES:
        if model.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return PRICES[best] if best is not None else None


class AnthropicProvider:
    """Claude models over the Messages API."""

    name = "anthropic"
    env_vars: tuple[str, ...] = (*CREDENTIAL_VARS, BASE_URL_VAR)

    def status(self, options: ModelOptions = DEFAULT_OPTIONS) -> ProviderStatus:
        found = next((var for var in CREDENTIAL_VARS if os.environ.get(var, "").strip()), None)
        base = options.base_url or os.environ.get(BASE_URL_VAR, "").strip()
        where = f" (base URL {base})" if base else ""
        if found is None:
            return ProviderStatus(False, "no API key: set one with `export ANTHROPIC_API_KEY=...`")
        return ProviderStatus(True, f"{found} is set{where}")

    def build(self, model: str, options: ModelOptions) -> Model:
        # The SDK is imported here, not at the top: listing providers must not pay for it.
        from memagent.agent.model.anthropic_client import AnthropicModel

        return AnthropicModel(model, stream=options.stream, base_url=options.base_url)

    def info(self, model: str, options: ModelOptions = DEFAULT_OPTIONS) -> ModelInfo:
        price = price_for(model)
        if price is None:
            return ModelInfo()
        return ModelInfo(context_window=CONTEXT_WINDOW, price=price)

    def local_models(self, options: ModelOptions = DEFAULT_OPTIONS) -> list[str]:
        return []


PROVIDER = AnthropicProvider()
