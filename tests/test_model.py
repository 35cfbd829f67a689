"""The model layer: the real anthropic SDK over real HTTP against FakeMessagesAPI,
the scripted in-process model, and pricing. No mocks of the SDK."""

from __future__ import annotations

import copy
import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI, ScriptMessage
from memagent.agent.model import DEFAULT_MODEL, ModelError, ModelRequest, ModelResponse, Usage
from memagent.agent.model.anthropic_client import AnthropicModel, api_key_configured
from memagent.agent.model.scripted import ScriptedModel, ScriptExhausted
from memagent.agent.pricing import cost_usd, price_for

SYSTEM = [
    {"type": "text", "text": "You are a memory agent."},
    {"type": "text", "text": "# AGENTS.md\n- be brief", "cache_control": {"type": "ephemeral"}},
]
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    },
    {
        "name": "write_file",
        "description": "Write a file.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        },
    },
]
USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(autouse=True)
def no_ambient_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Keep the SDK away from this machine's keys, profiles and settings."""
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_CUSTOM_HEADERS",
        "ANTHROPIC_FEDERATION_RULE_ID",
        "ANTHROPIC_IDENTITY_TOKEN",
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(var, raising=False)
    # The SDK looks for credential profiles under ~/.config/anthropic.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        yield server


def respond(model: AnthropicModel, **kwargs: Any) -> ModelResponse:
    params: dict[str, Any] = {"system": SYSTEM, "messages": USER, "tools": TOOLS}
    params.update(kwargs)
    callbacks = {k: params.pop(k) for k in ("on_text", "on_retry") if k in params}
    return model.respond(ModelRequest(**params), **callbacks)


# --------------------------------------------------------------------------- happy paths


def test_plain_text_response(api: FakeMessagesAPI) -> None:
    api.enqueue_text("Hi! How can I help?")
    response = respond(AnthropicModel(stream=False))

    assert response.content == [{"type": "text", "text": "Hi! How can I help?"}]
    assert response.stop_reason == "end_turn"
    assert response.model == DEFAULT_MODEL
    assert response.text == "Hi! How can I help?"
    assert response.usage.output_tokens > 0
    body = api.requests[0]
    assert not body.get("stream")
    assert body["model"] == DEFAULT_MODEL
    assert body["max_tokens"] == 4096
    assert body["messages"] == USER
    assert FakeMessagesAPI.api_key_of(api.headers[0]) == "test-key"
    assert "anthropic-version" in api.headers[0]


def test_streamed_text_reaches_on_text_in_order(api: FakeMessagesAPI) -> None:
    text = "Sure - here are the notes as bullet points, as you asked."
    api.enqueue_text(text)
    chunks: list[str] = []
    response = respond(AnthropicModel(), on_text=chunks.append)

    assert api.requests[0]["stream"] is True
    assert len(chunks) > 1, "the fake server splits text into several deltas"
    assert "".join(chunks) == text
    assert response.content == [{"type": "text", "text": text}]
    assert response.stop_reason == "end_turn"


def test_streamed_tool_use_reassembles_input_json(api: FakeMessagesAPI) -> None:
    tool_input = {
        "file_path": "/AGENTS.md",
        "content": '# Rules\n- use "bullet points"\n- naïve ünïcode ✓\n',
        "nested": {"list": [1, 2.5, None, True], "empty": {}},
    }
    tool_id = api.enqueue_tool_use("write_file", tool_input, text="I'll save that rule.")
    chunks: list[str] = []
    response = respond(AnthropicModel(), on_text=chunks.append)

    assert response.stop_reason == "tool_use"
    assert response.content == [
        {"type": "text", "text": "I'll save that rule."},
        {"type": "tool_use", "id": tool_id, "name": "write_file", "input": tool_input},
    ]
    assert response.tool_uses == [response.content[1]]
    assert "".join(chunks) == "I'll save that rule."
    json.dumps(response.content)  # plain data, no SDK objects


def test_parallel_tool_uses_and_empty_input(api: FakeMessagesAPI) -> None:
    ids = api.enqueue_tool_uses([("read_file", {"file_path": "/a.md"}), ("ls", {})])
    response = respond(AnthropicModel())
    assert [b["id"] for b in response.tool_uses] == ids
    assert [b["input"] for b in response.tool_uses] == [{"file_path": "/a.md"}, {}]


@pytest.mark.parametrize("stream", [True, False])
def test_usage_is_parsed_including_cache_tokens(api: FakeMessagesAPI, stream: bool) -> None:
    usage = {
        "input_tokens": 21,
        "output_tokens": 7,
        "cache_creation_input_tokens": 1500,
        "cache_read_input_tokens": 3000,
    }
    api.enqueue_text("ok", usage=usage)
    response = respond(AnthropicModel(stream=stream))
    assert response.usage == Usage(**usage)


def test_simulated_prompt_cache_writes_then_reads(api: FakeMessagesAPI) -> None:
    model = AnthropicModel()
    api.enqueue_text("one")
    api.enqueue_text("two")
    first = respond(model)
    second = respond(model)
    assert first.usage.cache_creation_input_tokens > 0
    assert first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0


def test_cache_breakpoint_on_last_tool_and_system_passed_through(api: FakeMessagesAPI) -> None:
    tools_before = copy.deepcopy(TOOLS)
    api.enqueue_text("ok")
    respond(AnthropicModel())

    body = api.requests[0]
    assert body["system"] == SYSTEM
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["tools"][0]
    assert {k: v for k, v in body["tools"][-1].items() if k != "cache_control"} == TOOLS[-1]
    assert tools_before == TOOLS, "the caller's tool list must not be mutated"


def test_no_tools_and_no_system_are_omitted(api: FakeMessagesAPI) -> None:
    api.enqueue_text("ok")
    AnthropicModel().respond(ModelRequest(system=[], messages=USER, tools=[], max_tokens=100))
    body = api.requests[0]
    assert "tools" not in body
    assert "system" not in body
    assert body["max_tokens"] == 100


def test_thinking_blocks_come_back_verbatim(api: FakeMessagesAPI) -> None:
    thinking = {"type": "thinking", "thinking": "The user wants bullets.", "signature": "sig-abc"}
    api.enqueue(ScriptMessage([thinking, {"type": "text", "text": "Done."}]))
    api.enqueue(ScriptMessage([{"type": "redacted_thinking", "data": "opaque=="}]))
    model = AnthropicModel()
    chunks: list[str] = []
    first = respond(model, on_text=chunks.append)
    assert first.content == [thinking, {"type": "text", "text": "Done."}]
    assert "".join(chunks) == "Done.", "thinking is not shown as answer text"
    second = respond(model)
    assert second.content == [{"type": "redacted_thinking", "data": "opaque=="}]


# --------------------------------------------------------------------------- retries and errors


def test_overloaded_once_then_success_is_retried_visibly(api: FakeMessagesAPI) -> None:
    api.enqueue_error(529, "overloaded_error", "Overloaded")
    api.enqueue_text("recovered")
    notes: list[str] = []
    response = respond(AnthropicModel(max_retries=2), on_retry=notes.append)

    assert response.text == "recovered"
    assert len(api.requests) == 2
    assert notes == ["model API overloaded (529), retrying in 10ms (attempt 2 of 3)"]


@pytest.mark.parametrize("stream", [True, False])
def test_overloaded_forever_gives_one_line_model_error(api: FakeMessagesAPI, stream: bool) -> None:
    api.enqueue_error(529, "overloaded_error", "Overloaded", times=3)
    notes: list[str] = []
    with pytest.raises(ModelError) as info:
        respond(AnthropicModel(stream=stream, max_retries=2), on_retry=notes.append)

    message = str(info.value)
    assert (
        message == "the model API is overloaded (529) and 3 attempts failed; try again in a minute"
    )
    assert "\n" not in message
    assert info.value.status == 529
    assert len(api.requests) == 3
    assert [n.split("(attempt ")[1] for n in notes] == ["2 of 3)", "3 of 3)"]
    assert api.pending == 0


def test_rate_limit_then_success(api: FakeMessagesAPI) -> None:
    api.enqueue_error(429, "rate_limit_error", "Number of request tokens has exceeded your limit")
    api.enqueue_text("ok")
    notes: list[str] = []
    assert respond(AnthropicModel(), on_retry=notes.append).text == "ok"
    assert notes and notes[0].startswith("rate limited by the model API (429), retrying")


def test_rejected_key_is_a_model_error_without_retries(
    api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.require_key = "the-right-key"
    notes: list[str] = []
    with pytest.raises(
        ModelError, match=r"^ANTHROPIC_API_KEY was rejected \(401\); check the key$"
    ):
        respond(AnthropicModel(), on_retry=notes.append)
    assert len(api.requests) == 1
    assert notes == []


def test_bad_request_names_the_api_message(api: FakeMessagesAPI) -> None:
    api.enqueue_error(400, "invalid_request_error", "messages.0.content: Field required")
    with pytest.raises(ModelError) as info:
        respond(AnthropicModel())
    assert str(info.value) == (
        "the model API rejected the request (400): messages.0.content: Field required"
    )
    assert len(api.requests) == 1


def test_unknown_model_404(api: FakeMessagesAPI) -> None:
    api.enqueue_error(404, "not_found_error", "model: claude-nope")
    with pytest.raises(ModelError, match="'claude-nope' was not found .*MEMAGENT_MODEL"):
        respond(AnthropicModel("claude-nope"))


def test_empty_script_fails_loudly_without_retries(api: FakeMessagesAPI) -> None:
    with pytest.raises(ModelError, match="no scripted response left for request #1 "):
        respond(AnthropicModel(max_retries=3))
    assert len(api.requests) == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _closed_port()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(ModelError) as info:
        respond(AnthropicModel(max_retries=0))
    message = str(info.value)
    assert message.startswith(f"cannot reach the model API at http://127.0.0.1:{port}")
    assert "\n" not in message


def test_no_credentials_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{_closed_port()}")
    assert not api_key_configured()
    with pytest.raises(ModelError, match="no API key: set ANTHROPIC_API_KEY"):
        respond(AnthropicModel(max_retries=0))


def test_broken_credentials_profile_is_a_model_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # Naming a config dir makes the SDK insist on a profile there.
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(
        ModelError, match=r"^cannot set up the model client \(set ANTHROPIC_API_KEY"
    ):
        AnthropicModel()


def test_api_key_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "  ")
    assert not api_key_configured()
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok")
    assert api_key_configured()
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert api_key_configured()


def test_overloaded_error_event_mid_stream_is_retried_before_any_text(
    api: FakeMessagesAPI,
) -> None:
    api.enqueue_stream_error("overloaded_error", "Overloaded")
    api.enqueue_text("second try")
    model = AnthropicModel(max_retries=2)
    model._stream_retry_base = 0.01
    notes: list[str] = []
    chunks: list[str] = []
    response = respond(model, on_text=chunks.append, on_retry=notes.append)
    assert response.text == "second try"
    assert "".join(chunks) == "second try"
    assert notes == [
        "model API overloaded (529) during the stream, retrying in 10ms (attempt 2 of 3)"
    ]


def test_error_event_after_text_is_not_retried(api: FakeMessagesAPI) -> None:
    api.enqueue_stream_error("overloaded_error", "Overloaded", text_before="Partial ans")
    chunks: list[str] = []
    with pytest.raises(ModelError) as info:
        respond(AnthropicModel(), on_text=chunks.append)
    assert "".join(chunks) == "Partial ans"
    assert str(info.value) == (
        "the answer was cut off: the model API is overloaded (529); try again in a minute"
    )
    assert len(api.requests) == 1


def test_stream_cut_before_any_text_is_retried(api: FakeMessagesAPI) -> None:
    api.enqueue_connection_drop()
    api.enqueue_text("whole answer")
    model = AnthropicModel(max_retries=2)
    model._stream_retry_base = 0.01
    notes: list[str] = []
    assert respond(model, on_retry=notes.append).text == "whole answer"
    assert notes == ["the answer stream broke off, retrying in 10ms (attempt 2 of 3)"]


def test_stream_cut_after_text_is_an_error_not_a_short_answer(api: FakeMessagesAPI) -> None:
    api.enqueue_connection_drop(text_before="The first half")
    chunks: list[str] = []
    with pytest.raises(ModelError) as info:
        respond(AnthropicModel(), on_text=chunks.append)
    assert "".join(chunks) == "The first half"
    assert str(info.value) == (
        "the connection to the model API broke off after part of the answer was shown: "
        "the stream ended before message_stop; try again"
    )


def test_connection_dropped_without_answer_is_retried_by_the_sdk(api: FakeMessagesAPI) -> None:
    api.enqueue_connection_drop()
    api.enqueue_text("ok")
    notes: list[str] = []
    response = respond(AnthropicModel(stream=False, max_retries=1), on_retry=notes.append)
    assert response.text == "ok"
    assert notes == ["cannot reach the model API, retrying in ~0.5s (attempt 2 of 2)"]


def test_callback_exceptions_are_not_disguised(api: FakeMessagesAPI) -> None:
    api.enqueue_text("some text")

    def broken(_: str) -> None:
        raise ValueError("the REPL's own bug")

    with pytest.raises(ValueError, match="the REPL's own bug"):
        respond(AnthropicModel(), on_text=broken)


def test_retry_notes_stay_with_their_thread(api: FakeMessagesAPI) -> None:
    model = AnthropicModel(max_retries=2)
    notes: dict[str, list[str]] = {"a": [], "b": []}
    results: dict[str, str] = {}

    def reply(body: dict[str, Any]) -> Any:
        return f"answer to {body['messages'][0]['content']}"

    api.enqueue_error(529, "overloaded_error", "Overloaded")
    for _ in range(2):
        api.enqueue_callable(reply)

    def run(name: str) -> None:
        msgs = [{"role": "user", "content": name}]
        results[name] = respond(model, messages=msgs, on_retry=notes[name].append).text

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results == {"a": "answer to a", "b": "answer to b"}
    assert len(notes["a"]) + len(notes["b"]) == 1


# ------------------------------------------------------------------ fake server wire format


def _raw_stream(api: FakeMessagesAPI, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    request = urllib.request.Request(
        f"{api.base_url}/v1/messages",
        data=json.dumps(body).encode(),
        headers={"x-api-key": "k", "content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        raw = resp.read().decode()
    events = []
    for chunk in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        events.append((lines["event"], data))
    return events


def test_fake_server_speaks_the_sse_event_sequence(api: FakeMessagesAPI) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/x.md", "content": "abc"}, text="Saving it.")
    events = _raw_stream(api, {"model": "m", "max_tokens": 10, "messages": USER, "stream": True})
    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert "ping" in names
    assert names[-2:] == ["message_delta", "message_stop"]
    assert events[0][1]["message"]["usage"]["input_tokens"] >= 0
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    text_deltas = [
        d["delta"]["text"] for n, d in events if d.get("delta", {}).get("type") == "text_delta"
    ]
    json_deltas = [
        d["delta"]["partial_json"]
        for n, d in events
        if d.get("delta", {}).get("type") == "input_json_delta"
    ]
    assert len(text_deltas) > 1 and "".join(text_deltas) == "Saving it."
    assert len([p for p in json_deltas if p]) > 1
    assert json.loads("".join(json_deltas)) == {"file_path": "/x.md", "content": "abc"}
    message_delta = events[-2][1]
    assert message_delta["delta"]["stop_reason"] == "tool_use"
    assert message_delta["usage"]["output_tokens"] > 0


def test_fake_server_requires_an_api_key(api: FakeMessagesAPI) -> None:
    request = urllib.request.Request(f"{api.base_url}/v1/messages", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 401
    body = json.loads(info.value.read())
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"


# --------------------------------------------------------------------------- ScriptedModel


def test_scripted_model_answers_in_order_and_records_requests() -> None:
    model = ScriptedModel()
    model.enqueue_text("first")
    tool_id = model.enqueue_tool_use("read_file", {"file_path": "/AGENTS.md"}, text="Looking.")
    ids = model.enqueue_tool_uses([("ls", {}), ("glob", {"pattern": "**/*.md"})])
    model.enqueue(ModelResponse([{"type": "text", "text": "raw"}], "max_tokens", Usage(1, 2), "x"))

    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    chunks: list[str] = []
    first = model.respond(ModelRequest(system=SYSTEM, messages=messages, tools=TOOLS), on_text=chunks.append)
    messages.append({"role": "assistant", "content": first.content})  # caller mutates its list
    second = model.respond(ModelRequest(system=SYSTEM, messages=messages, tools=TOOLS))
    third = model.respond(ModelRequest(system=[], messages=messages, tools=[]))
    fourth = model.respond(ModelRequest(system=[], messages=messages, tools=[]))

    assert first.text == "first" and first.stop_reason == "end_turn"
    assert len(chunks) > 1 and "".join(chunks) == "first"
    assert second.stop_reason == "tool_use"
    assert second.content == [
        {"type": "text", "text": "Looking."},
        {
            "type": "tool_use",
            "id": tool_id,
            "name": "read_file",
            "input": {"file_path": "/AGENTS.md"},
        },
    ]
    assert [b["id"] for b in third.tool_uses] == ids
    assert fourth.stop_reason == "max_tokens" and fourth.usage == Usage(1, 2)

    assert len(model.requests) == 4
    assert model.requests[0]["messages"] == [{"role": "user", "content": "hi"}], "deep copy"
    assert model.requests[1]["messages"][-1]["role"] == "assistant"
    assert model.requests[0]["system"] == SYSTEM and model.requests[0]["tools"] == TOOLS
    assert first.usage.output_tokens > 0 and first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert model.pending == 0


def test_scripted_model_callable_sees_the_request() -> None:
    model = ScriptedModel()

    def echo(request: dict[str, Any]) -> ModelResponse:
        return model.text_response(f"you said {request['messages'][-1]['content']}")

    model.enqueue_callable(echo)
    answer = model.respond(ModelRequest(system=[], messages=[{"role": "user", "content": "ping"}], tools=[]))
    assert answer.text == "you said ping"


def test_scripted_model_empty_queue_is_a_clear_error() -> None:
    model = ScriptedModel()
    with pytest.raises(ScriptExhausted, match="no scripted response left for call #1"):
        model.respond(ModelRequest(system=[], messages=[{"role": "user", "content": "hi"}], tools=[]))
    assert isinstance(ScriptExhausted("x"), AssertionError)


def test_scripted_responses_are_copies() -> None:
    model = ScriptedModel()
    response = model.text_response("same")
    model.enqueue(response)
    model.enqueue(response)
    got = model.respond(ModelRequest(system=[], messages=USER, tools=[]))
    got.content[0]["text"] = "changed"
    assert model.respond(ModelRequest(system=[], messages=USER, tools=[])).text == "same"


# --------------------------------------------------------------------------- pricing


def test_pricing_longest_prefix_and_unknown() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_creation_input_tokens=1_000_000,
        cache_read_input_tokens=1_000_000,
    )
    assert cost_usd("claude-sonnet-5-5", usage) == pytest.approx(2 + 10 + 2.5 + 0.1)
    assert cost_usd("claude-sonnet-5", usage) == pytest.approx(2 + 10 + 2.5 + 0.2)
    assert cost_usd("claude-sonnet-4-5-20250929", usage) == pytest.approx(3 + 15 + 3.75 + 0.3)
    assert cost_usd("claude-opus-4-1-20250805", usage) == pytest.approx(15 + 75 + 18.75 + 1.5)
    assert cost_usd("claude-opus-4-5", usage) == pytest.approx(5 + 25 + 6.25 + 0.5)
    assert price_for("claude-haiku-4-5-20251001") is not None
    assert cost_usd("gpt-4o", usage) is None
    assert cost_usd("scripted-model", Usage()) is None


def test_pricing_small_turn_and_long_prompt_band() -> None:
    turn = Usage(input_tokens=1200, output_tokens=300, cache_read_input_tokens=8000)
    assert cost_usd(DEFAULT_MODEL, turn) == pytest.approx((1200 * 2 + 300 * 10 + 8000 * 0.1) / 1e6)
    small = Usage(input_tokens=50_000, output_tokens=1000)
    large = Usage(input_tokens=150_000, output_tokens=1000)
    assert cost_usd("claude-haiku-5-5", small) == pytest.approx((50_000 * 0.1 + 1000 * 0.5) / 1e6)
    assert cost_usd("claude-haiku-5-5", large) == pytest.approx((150_000 * 0.5 + 1000 * 2.5) / 1e6)
