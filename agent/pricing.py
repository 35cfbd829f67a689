"""Per-model token prices and the cost of one response.

Invariants:
- Prices are USD per million tokens, copied from Anthropic's public pricing
  page (platform.claude.com/docs/en/about-claude/pricing). They change; this
  table is a best-effort estimate for the "cost" column, never a bill.
- A model id is matched by its *longest* known prefix, so dated ids
  (``claude-sonnet-4-5-20250929``) and suffixed ids (``claude-sonnet-5-5[1m]``)
  find their family, and ``claude-sonnet-5-5`` is not priced as
  ``claude-sonnet-5``. An unknown model gives ``None`` (cost unknown), never
  a guess.
- Cache writes are priced at the 5-minute TTL rate: memagent only asks for
  ``{"type": "ephemeral"}`` cache breakpoints, which default to 5 minutes.
- This module imports nothing from the rest of memagent except for typing, so
  the thread store and benchmarks can use it without the SDK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memagent.agent.model import Usage

__all__ = ["ModelPrice", "PRICES", "cost_usd", "price_for"]


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float  # 5-minute cache write
    cache_read: float  # cache hits and refreshes
    # Some models (Haiku 5.5) bill the whole request at a higher band when the
    # prompt (input + cache reads + cache writes) exceeds a threshold.
    long_prompt_threshold: int | None = None
    long_prompt: ModelPrice | None = None


def _p(inp: float, out: float, write: float, read: float) -> ModelPrice:
    return ModelPrice(input=inp, output=out, cache_write=write, cache_read=read)


# Keyed by model-id prefix. Keep families together, newest first.
PRICES: dict[str, ModelPrice] = {
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
    "claude-haiku-5-5": ModelPrice(
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


def price_for(model: str) -> ModelPrice | None:
    """The price entry whose key is the longest prefix of ``model``, or None."""
    best: str | None = None
    for prefix in PRICES:
        if model.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return PRICES[best] if best is not None else None


def cost_usd(model: str, usage: Usage) -> float | None:
    """Estimated cost in USD of ``usage`` on ``model``; None for an unknown model.

    ``usage.input_tokens`` excludes cached tokens (that is how the API reports
    it), so the four counts are priced independently and summed. Call it once
    per response and add the costs: a price band can depend on the size of one
    request's prompt, which summed usage no longer shows.
    """
    price = price_for(model)
    if price is None:
        return None
    if price.long_prompt is not None and price.long_prompt_threshold is not None:
        prompt = (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
        if prompt > price.long_prompt_threshold:
            price = price.long_prompt
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    )
    return total / 1_000_000
