"""An in-process scripted ``Model`` for unit tests and benchmarks.

Invariants:
- Answers come from a FIFO queue, one per ``respond`` call, in the order they
  were enqueued; an empty queue raises ``ScriptExhausted`` (an
  ``AssertionError``) naming the call, so a test that scripted too few turns
  fails loudly instead of hanging.
- ``requests`` holds a deep copy of every ``ModelRequest``'s ``system``,
  ``messages``, ``tools`` and ``max_tokens`` (as a dict), taken before the answer is produced: later
  mutation by the caller does not rewrite history, and a test can check
  exactly what the model would have seen (e.g. that a memory edit reached the
  next system prompt).
- Responses are handed out as deep copies, so a caller mutating one cannot
  change a queued or recorded answer.
- Text reaches ``on_text`` in a few chunks, in order, as a stream would.
- No network, no SDK: importing this module never needs an API key.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import deque
from collections.abc import Callable
from typing import Any

from memagent.agent.model.base import ModelRequest, ModelResponse, TextCallback, Usage

__all__ = ["ScriptExhausted", "ScriptedModel"]

Responder = Callable[[dict[str, Any]], ModelResponse]


class ScriptExhausted(AssertionError):
    """``respond`` was called with nothing left in the script."""


def _estimate_tokens(obj: Any) -> int:
    """~4 characters per token, like the real tokenizer on English and JSON."""
    return max(1, len(json.dumps(obj, sort_keys=True, default=str)) // 4)


def _chunks(text: str, pieces: int = 3) -> list[str]:
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedModel:
    """``Model`` whose answers are scripted in advance (or computed per request)."""

    def __init__(self, name: str = "scripted-model") -> None:
        self.name = name
        self.requests: list[dict[str, Any]] = []
        self._queue: deque[ModelResponse | Responder] = deque()
        self._ids = itertools.count(1)
        self._seen_prefixes: set[str] = set()
        self.counted = 0  # count_tokens calls

    # -- scripting -----------------------------------------------------------

    @property
    def pending(self) -> int:
        """Answers not yet used."""
        return len(self._queue)

    def enqueue(self, response: ModelResponse) -> None:
        self._queue.append(response)

    def enqueue_callable(self, fn: Responder) -> None:
        """``fn(request)`` builds the answer; ``request`` is what ``requests`` records."""
        self._queue.append(fn)

    def enqueue_text(self, text: str, *, stop_reason: str = "end_turn") -> None:
        self.enqueue(self.text_response(text, stop_reason=stop_reason))

    def enqueue_tool_use(self, name: str, input: dict[str, Any], id: str | None = None,
                         text: str | None = None) -> str:
        """Script a response with optional text and one tool call; returns the tool_use id."""
        response = self.tool_use_response([(name, input)], text=text, ids=[id] if id else None)
        self.enqueue(response)
        return str(response.content[-1]["id"])

    def enqueue_tool_uses(
        self, calls: list[tuple[str, dict[str, Any]]], text: str | None = None
    ) -> list[str]:
        """Script one response with several (parallel) tool calls; returns their ids."""
        response = self.tool_use_response(calls, text=text)
        self.enqueue(response)
        return [str(b["id"]) for b in response.content if b["type"] == "tool_use"]

    # -- building responses (also handy inside enqueue_callable functions) ---

    def text_response(self, text: str, *, stop_reason: str = "end_turn") -> ModelResponse:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        return ModelResponse(content, stop_reason, Usage(), self.name)

    def tool_use_response(
        self,
        calls: list[tuple[str, dict[str, Any]]],
        *,
        text: str | None = None,
        ids: list[str] | None = None,
    ) -> ModelResponse:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for n, (name, tool_input) in enumerate(calls):
            tool_id = ids[n] if ids and n < len(ids) else f"toolu_scripted_{next(self._ids):04d}"
            content.append(
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": name,
                    "input": copy.deepcopy(tool_input),
                }
            )
        return ModelResponse(content, "tool_use", Usage(), self.name)

    # -- Model ---------------------------------------------------------------

    def count_tokens(self, call: ModelRequest) -> int | None:
        """The request's size by this model's own estimate (what its usage reports)."""
        self.counted += 1
        return _estimate_tokens([call.tools, call.system]) + _estimate_tokens(call.messages)

    def respond(self, call: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        request = copy.deepcopy({"system": call.system, "messages": call.messages,
                                 "tools": call.tools, "max_tokens": call.max_tokens})
        self.requests.append(request)
        if not self._queue:
            last = json.dumps(call.messages[-1] if call.messages else None, default=str)[:200]
            raise ScriptExhausted(
                f"ScriptedModel: no scripted response left for call #{len(self.requests)} "
                f"(last message: {last})"
            )
        item = self._queue.popleft()
        if isinstance(item, ModelResponse):
            response = copy.deepcopy(item)
        else:
            # The callable gets its own copy so it cannot alter the record.
            response = item(copy.deepcopy(request))
            if not isinstance(response, ModelResponse):
                raise TypeError(
                    f"ScriptedModel: enqueue_callable function returned {type(response).__name__}, "
                    "expected ModelResponse"
                )
            response = copy.deepcopy(response)
        if response.usage == Usage():
            response.usage = self._plausible_usage(request, response)
        if on_text is not None:
            for block in response.content:
                if block.get("type") == "text":
                    for chunk in _chunks(block.get("text", "")):
                        on_text(chunk)
        return response

    def _plausible_usage(self, request: dict[str, Any], response: ModelResponse) -> Usage:
        """Usage shaped like a cached agent turn: tools + system are written to the
        prompt cache the first time they are seen and read from it after."""
        prefix = json.dumps([request["tools"], request["system"]], sort_keys=True, default=str)
        cached = _estimate_tokens(prefix)
        first_time = prefix not in self._seen_prefixes
        self._seen_prefixes.add(prefix)
        return Usage(
            input_tokens=_estimate_tokens(request["messages"]),
            output_tokens=_estimate_tokens(response.content),
            cache_creation_input_tokens=cached if first_time else 0,
            cache_read_input_tokens=0 if first_time else cached,
        )
