"""Token counting for the context window: the local estimate and the API's count.

``Counter`` says how big a request is. It estimates locally: ~3.5 characters per
token for ASCII text and one token per other character, plus a few tokens per
block. After each answer the estimate is rescaled by the usage the API reported for
that very request (``observe``), so it tracks the real tokenizer within a session;
near the limit (``NEAR`` of it) it asks the model's ``count_tokens`` (the Messages
API's counting) instead, when the model has one.

Invariants: counting never mutates what it counts; a message dict is memoised by
identity (the loop never mutates a message it has appended), the memo holding the
object so an id is not reused while it is cached; the scale factor rises at once to
an observed ratio (an underestimate risks the budget) and falls slowly, and stays
within 0.5-3.0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from memagent.agent.model import Model, ModelError, ModelRequest, Usage

NEAR = 0.8             # above this share of the limit, ask the API to count

Counted = Literal["api", "estimate"]


class TokenCounting(Protocol):
    """The optional capability of a model: the exact size of a request, or None."""

    def count_tokens(self, request: ModelRequest) -> int | None: ...


def _text_tokens(text: str) -> float:
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars / 3.5 + (len(text) - ascii_chars)


def estimate(obj: Any) -> int:
    """Uncalibrated local estimate of the tokens ``obj`` (blocks, messages, tools) costs."""
    total = 0.0

    def walk(node: Any) -> None:
        nonlocal total
        if isinstance(node, str):
            total += _text_tokens(node)
        elif isinstance(node, dict):
            total += 3  # block / message framing
            for key, value in node.items():
                if key in ("cache_control", "id", "tool_use_id", "signature"):
                    total += 4
                    continue
                if key == "input":  # tool input goes as JSON text
                    total += _text_tokens(json.dumps(value, ensure_ascii=False))
                    continue
                walk(value)
        elif isinstance(node, list | tuple):
            for item in node:
                walk(item)
        elif node is not None:
            total += 1

    walk(obj)
    return int(total) + 1


class Counter:
    """Request sizes: the calibrated local estimate, or the API's count near the limit."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.factor = 1.0
        self._cache: dict[int, tuple[Any, int]] = {}
        self.last_source: Counted = "estimate"

    def raw(self, obj: Any) -> int:
        """Uncalibrated estimate; messages (never mutated by the loop) are memoised by identity."""
        key = id(obj)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        n = estimate(obj)
        if isinstance(obj, dict):
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[key] = (obj, n)
        return n

    def scaled(self, raw: int) -> int:
        return int(raw * self.factor) + 1

    def messages(self, messages: Sequence[dict[str, Any]]) -> int:
        return self.scaled(sum(self.raw(m) for m in messages))

    def request_raw(self, request: ModelRequest) -> int:
        return (self.raw_list(request.system) + self.raw_list(request.tools)
                + sum(self.raw(m) for m in request.messages))

    def raw_list(self, items: Sequence[dict[str, Any]]) -> int:
        return sum(self.raw(i) for i in items)

    def count(self, request: ModelRequest, limit: int) -> tuple[int, Counted]:
        """The size of ``request``; the API counts it when the estimate is near ``limit``."""
        est = self.scaled(self.request_raw(request))
        self.last_source = "estimate"
        if est < limit * NEAR:
            return est, "estimate"
        exact = self.api_count(request)
        if exact is None:
            return est, "estimate"
        self.last_source = "api"
        return exact, "api"

    def api_count(self, request: ModelRequest) -> int | None:
        counter = getattr(self.model, "count_tokens", None)
        if counter is None:
            return None
        try:
            n = counter(request)
        except ModelError:
            return None
        if isinstance(n, int) and n > 0:
            raw = self.request_raw(request)
            if raw:
                self._learn(n / raw)
            return n
        return None

    def observe(self, request: ModelRequest, usage: Usage) -> None:
        """Rescale the estimate by what the API reported for ``request``."""
        actual = usage.total_input_tokens
        raw = self.request_raw(request)
        if actual > 0 and raw > 0:
            self._learn(actual / raw)

    def _learn(self, ratio: float) -> None:
        ratio = min(max(ratio, 0.5), 3.0)
        # Up at once (an underestimate risks the budget), down slowly.
        self.factor = ratio if ratio > self.factor else 0.8 * self.factor + 0.2 * ratio
