"""The cost of one response, from the price the model registry knows (``ModelInfo.price``).

Invariants:
- The only prices are the providers' (``agent/model/providers/``, through
  ``registry.info``); a model whose provider knows no price, an unknown provider or
  a bad id gives ``None`` (cost unknown: the cost line shows tokens only), never a guess.
- ``usage.input_tokens`` excludes cached tokens (how the APIs report it), so the four
  counts are priced independently and summed; a price without a cache rate bills
  those tokens at the input rate (a provider without a caching discount).
- A price is looked up once per model id per process: a provider's ``info`` may ask
  a server (Ollama), which a per-response cost must not repeat.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from memagent.agent.model import ModelError
from memagent.agent.model.registry import Price, info

if TYPE_CHECKING:
    from memagent.agent.model import Usage

__all__ = ["ModelPrice", "cost_of", "cost_usd", "price_for"]

log = logging.getLogger("memagent.agent")

# The registry's price type, under its older name.
ModelPrice = Price


@functools.lru_cache(maxsize=64)
def price_for(model: str) -> Price | None:
    """The registry's price for model id ``model`` (``provider/name`` or a bare Claude name), or None."""
    try:
        return info(model).price
    except ModelError as err:
        log.debug("no price for %s: %s", model, err)
        return None


def cost_of(price: Price, usage: Usage) -> float:
    """USD for ``usage`` at ``price`` (one response: a band can depend on its prompt size)."""
    if price.long_prompt is not None and price.long_prompt_threshold is not None:
        prompt = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        if prompt > price.long_prompt_threshold:
            price = price.long_prompt
    write = price.input if price.cache_write is None else price.cache_write
    read = price.input if price.cache_read is None else price.cache_read
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * write
        + usage.cache_read_input_tokens * read
    )
    return total / 1_000_000


def cost_usd(model: str, usage: Usage) -> float | None:
    """Estimated cost in USD of ``usage`` on model id ``model``; None when no price is known.

    Call it once per response and add the costs: a price band can depend on the
    size of one request's prompt, which summed usage no longer shows.
    """
    price = price_for(model)
    return None if price is None else cost_of(price, usage)
