"""``python -m bench providers``: the OpenAI-compatible provider's cost per turn against the Anthropic one.

One scripted turn, the same for both: the ``assistant`` template's system prompt and
tools (``bench.prompt_sizes.first_request``), a conversation with a tool call and its
result, and an answer of text plus one ``edit_file`` call. It is sent ``--turns`` times
through each provider, built by the registry as the chat builds it:

- ``anthropic/...`` (``AnthropicModel``, the official SDK) against the local Messages
  API (``bench/fake_messages_api.py``): the baseline;
- ``openai-compatible/...`` (``OpenAIModel``, the official ``openai`` SDK) against the
  local Chat Completions server (``bench/fake_openai_api.py``),

streamed and not, interleaved round by round so both see the same machine load. The
table gives the median and 90th percentile per turn and the ratio to the baseline
measured in the same run. A second table times the translation alone, in process:
the request shaped for each API (Anthropic: cache breakpoints; OpenAI: messages and
tools translated) and a Chat Completions answer translated back. With ``--out``
(by default ``bench/RESULTS.md``) it replaces the "provider_overhead" section.

Invariants:
- Same input, same answer: both servers are scripted with the same content, and every
  answer is checked to come back as the same Anthropic-shaped blocks (text, then the
  tool call with the same input) before any figure is written.
- Nothing leaves the machine: both servers listen on 127.0.0.1; the key the Anthropic
  SDK needs is a dummy set for the run and restored after.
- The figures include each fake server's own work (its event format differs: the
  Messages API sends more events per answer than Chat Completions sends chunks); the
  in-process table isolates memagent's translation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import sections
from bench.fake_messages_api import FakeMessagesAPI
from bench.fake_openai_api import FakeOpenAIAPI
from bench.prompt_sizes import first_request
from memagent.agent.model import registry
from memagent.agent.model.anthropic_client import AnthropicModel
from memagent.agent.model.base import Model, ModelRequest, ModelResponse, Usage
from memagent.agent.model.providers import openai_compat
from memagent.agent.model.providers.openai_compat import OpenAIModel
from memagent.agent.model.registry import ModelOptions

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
ANTHROPIC_ID = "anthropic/claude-bench"
OPENAI_ID = "openai-compatible/bench-model"
ANSWER_TEXT = "Noted: I will record that you want bullet points from now on."
EDIT = {"file_path": "/AGENTS.md", "old_string": "- Answer directly first, then give detail if it helps.",
        "new_string": "- Answer directly first, then give detail if it helps.\n- Use bullet points."}
# Variables the Anthropic SDK reads; set to a dummy for the run, then restored.
_SDK_VARS = {"ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": None}


def request() -> ModelRequest:
    """The fake turn: the assistant template's prompt and tools, a tool step already taken."""
    first = first_request("assistant")
    numbered = "".join(f"{n:>6}\t- preference {n}: keep answers short and concrete\n" for n in range(1, 41))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "What do you remember about how I like answers?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me check my notes."},
            {"type": "tool_use", "id": "toolu_bench_0001", "name": "read_file",
             "input": {"file_path": "/AGENTS.md"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_bench_0001",
                                      "content": numbered + "(version 3)"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "You like short, concrete answers."}]},
        {"role": "user", "content": [{"type": "text", "text": "Also, use bullet points from now on."}]},
    ]
    return ModelRequest(system=first.system, messages=messages, tools=first.tools)


def expected_content(response: ModelResponse) -> bool:
    """The answer came back as the scripted text and edit_file call, whatever the provider."""
    kinds = [(b.get("type"), b.get("text") or b.get("name")) for b in response.content]
    calls = [b for b in response.content if b.get("type") == "tool_use"]
    return kinds == [("text", ANSWER_TEXT), ("tool_use", "edit_file")] and calls[0]["input"] == EDIT


@contextmanager
def sdk_environment() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in _SDK_VARS}
    for k, v in _SDK_VARS.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, old in saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old


@dataclass
class Route:
    """One provider against its fake server, answering the same scripted turn."""

    label: str
    model: Model | _Raw
    script: Callable[[], object]  # enqueues the scripted answer on its server
    times: list[float]

    def turn(self, call: ModelRequest) -> None:
        self.script()
        started = time.perf_counter()
        response = self.model.respond(call)
        self.times.append(time.perf_counter() - started)
        if not expected_content(response):
            raise SystemExit(f"{self.label}: the answer did not come back as scripted: {response.content}")


def _ms(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered) * 1000, ordered[int(0.9 * (len(ordered) - 1))] * 1000


def timed(fn: Callable[[], object], reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


class RawPost:
    """The same body the provider sends, posted with plain httpx (no SDK, no parsing): the
    floor of a route, its fake server and the HTTP round trip."""

    def __init__(self, url: str, body: dict[str, Any], script: Callable[[], object]) -> None:
        import httpx  # both SDKs' transport

        self.client = httpx.Client(headers={"x-api-key": "bench-key", "authorization": "Bearer bench-key",
                                            "anthropic-version": "2023-06-01"})
        self.url, self.body, self.script = url, json.dumps(body).encode(), script

    def __call__(self) -> ModelResponse:
        self.script()
        answer = self.client.post(self.url, content=self.body, headers={"content-type": "application/json"})
        answer.raise_for_status()
        return ModelResponse([{"type": "text", "text": ANSWER_TEXT},
                              {"type": "tool_use", "id": "raw", "name": "edit_file", "input": EDIT}],
                             "tool_use", Usage(), "raw")


def http_rows(call: ModelRequest, turns: int) -> list[tuple[str, list[float]]]:
    """Per-turn times of each route, interleaved round by round after one warm-up; the
    routes of one mode come in threes: Anthropic (the baseline), OpenAI-compatible, and the
    raw floors of both."""
    with FakeMessagesAPI() as messages_api, FakeOpenAIAPI() as chat_api, sdk_environment():
        def script_a() -> object:
            return messages_api.enqueue_tool_use("edit_file", EDIT, ANSWER_TEXT)

        def script_o() -> object:
            return chat_api.enqueue_tool_call("edit_file", EDIT, ANSWER_TEXT)

        routes: list[list[Route]] = []
        for stream in (True, False):
            mode = "streamed" if stream else "not streamed"
            anthropic_model = registry.build(ANTHROPIC_ID, ModelOptions(base_url=messages_api.base_url,
                                                                        stream=stream))
            openai_model = registry.build(OPENAI_ID, ModelOptions(base_url=chat_api.base_url, stream=stream))
            assert isinstance(anthropic_model, AnthropicModel) and isinstance(openai_model, OpenAIModel)
            body_a = {**anthropic_model._params(call), "max_tokens": call.max_tokens,
                      **({"stream": True} if stream else {})}
            body_o = {**openai_model.params(call),
                      **({"stream": True, "stream_options": {"include_usage": True}} if stream else {})}
            routes.append([
                Route(f"Anthropic provider -> fake Messages API, {mode}", anthropic_model, script_a, []),
                Route(f"OpenAI-compatible provider -> fake Chat Completions, {mode}", openai_model, script_o, []),
                Route(f"(floor) same body posted raw to the fake Messages API, {mode}",
                      _Raw(RawPost(f"{messages_api.base_url.rstrip('/')}/v1/messages", body_a, script_a)),
                      lambda: None, []),
                Route(f"(floor) same body posted raw to the fake Chat Completions, {mode}",
                      _Raw(RawPost(f"{chat_api.base_url}/chat/completions", body_o, script_o)),
                      lambda: None, []),
            ])
        for group in routes:
            for route in group:
                route.turn(call)  # warm-up: connections, SDK lazy imports
                route.times.clear()
        for n in range(turns):
            for group in routes:
                order = group if n % 2 == 0 else group[::-1]
                for route in order:
                    route.turn(call)
    return [(r.label, r.times) for group in routes for r in group]


class _Raw:
    """A ``RawPost`` in the shape of a ``Model`` (only ``respond`` is used)."""

    name = "raw"

    def __init__(self, post: RawPost) -> None:
        self.post = post

    def respond(self, request: ModelRequest, **_: Any) -> ModelResponse:
        return self.post()


def translation_rows(call: ModelRequest, reps: int) -> list[tuple[str, list[float]]]:
    """In-process: shaping the request for each API, and an answer translated back."""
    with sdk_environment():
        anthropic_model = registry.build(ANTHROPIC_ID, ModelOptions(base_url="http://127.0.0.1:9"))
        openai_model = registry.build(OPENAI_ID, ModelOptions(base_url="http://127.0.0.1:9/v1"))
    assert isinstance(anthropic_model, AnthropicModel) and isinstance(openai_model, OpenAIModel)
    # The Anthropic client's own request shaping (cache breakpoints on tools and messages).
    shape_anthropic = anthropic_model._params
    shape_openai = openai_model.params
    completion = {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench-model",
                  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                      "role": "assistant", "content": ANSWER_TEXT, "tool_calls": [
                          {"id": "call_1", "type": "function",
                           "function": {"name": "edit_file", "arguments": json.dumps(EDIT)}}]}}],
                  "usage": {"prompt_tokens": 2500, "completion_tokens": 60, "total_tokens": 2560}}
    back = openai_compat.from_chat_completion(completion, OPENAI_ID)
    if not expected_content(back):
        raise SystemExit(f"translation back changed the answer: {back.content}")
    steps: list[tuple[str, Callable[[], object]]] = [
        ("memagent, Anthropic: request shaped (cache breakpoints)", lambda: shape_anthropic(call)),
        ("memagent, OpenAI: request translated (messages + tools)", lambda: shape_openai(call)),
        ("memagent, OpenAI: answer translated back (from_chat_completion)",
         lambda: openai_compat.from_chat_completion(completion, OPENAI_ID))]
    sdk_step = _openai_sdk_transform(shape_openai(call))
    if sdk_step is not None:
        steps.append(sdk_step)
    rows = []
    for label, fn in steps:
        fn()
        rows.append((label, timed(fn, reps)))
    return rows


def _openai_sdk_transform(params: dict[str, Any]) -> tuple[str, Callable[[], object]] | None:
    """What ``chat.completions.create`` does to every body before sending it: a type-driven
    copy of the whole request (``maybe_transform``, the SDK's private helper), or None when
    this SDK version has no such helper."""
    try:
        from openai._utils import maybe_transform
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
    except ImportError:
        return None
    body = {**params, "stream": True, "stream_options": {"include_usage": True}}
    return ("openai SDK: the same body through its maybe_transform (inside create())",
            lambda: maybe_transform(body, CompletionCreateParamsStreaming))


def table(turns: int, reps: int) -> str:
    call = request()
    http = http_rows(call, turns)
    local = translation_rows(call, reps)
    out = ["## Provider overhead: OpenAI-compatible against Anthropic\n",
           f"Generated by `python -m bench providers --turns {turns} --reps {reps}`: the same scripted turn "
           "(the `assistant` template's prompt and tools, five messages with a tool step, an answer of text "
           "and one `edit_file` call) through each provider, built by the registry, against its local fake "
           f"server over HTTP; {turns} interleaved rounds after one warm-up; CPython "
           f"{platform.python_version()}, {os.cpu_count()} logical cores. Every answer came back as the same "
           "Anthropic-shaped blocks. Times include each fake server's own work.\n",
           "| route | median ms | p90 ms | ÷ Anthropic, same mode | above its raw floor ms |",
           "|---|---|---|---|---|"]
    for i, (label, times) in enumerate(http):
        med, p90 = _ms(times)
        start = i - i % 4
        base = _ms(http[start][1])[0]
        cell = f"{med - _ms(http[i + 2][1])[0]:.2f}" if i - start < 2 else ""
        out.append(f"| {label} | {med:.2f} | {p90:.2f} | {med / base:.2f}× | {cell} |")
    out += ["", f"Translation alone, in process ({reps} runs each, microseconds):\n",
            "| step | median µs | p90 µs | share of the OpenAI streamed turn |", "|---|---|---|---|"]
    streamed_openai = _ms(http[1][1])[0] * 1000
    for label, times in local:
        med, p90 = (v * 1000 for v in _ms(times))
        out.append(f"| {label} | {med:.1f} | {p90:.1f} | {100 * med / streamed_openai:.2f} % |")
    above = [_ms(http[i][1])[0] - _ms(http[i + 2][1])[0] for i in (0, 1)]  # streamed, both providers
    gap = above[1] - above[0]
    out.append("\n\"Above its raw floor\" is what a provider and its SDK add to posting the same body with "
               "plain httpx and reading the whole answer: the SDK's request handling, reading the stream, "
               f"building the response. Streamed, the OpenAI-compatible provider adds {gap:.2f} ms more than "
               "the Anthropic one; memagent's translation both ways is "
               f"{(_ms(local[1][1])[0] + _ms(local[2][1])[0]) * 1000:.0f} µs of it.")
    sdk = next((times for label, times in local if label.startswith("openai SDK")), None)
    if sdk is not None:
        out[-1] += (f" The openai SDK's own copy of the body before sending (`maybe_transform`, typed by "
                    f"its request classes) takes {_ms(sdk)[0]:.2f} ms.")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench providers", description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=100, help="interleaved rounds per route (default 100)")
    ap.add_argument("--reps", type=int, default=2000, help="runs of each in-process step (default 2000)")
    ap.add_argument("--out", default=str(RESULTS),
                    help="file whose provider_overhead section to replace; - prints only")
    args = ap.parse_args(argv)
    body = table(args.turns, args.reps)
    print(body)
    if args.out != "-":
        sections.write(args.out, "provider_overhead", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
