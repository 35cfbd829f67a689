"""The ``openai`` / ``openai-compatible`` providers through the real ``openai`` SDK over HTTP,
against ``bench/fake_openai_api.FakeOpenAIAPI``: text (streamed and plain), tool calls
split across chunks, translation both ways, malformed calls as tool errors, retries,
errors, usage, and ``memagent chat`` end to end."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fake_openai_api import FakeOpenAIAPI
from memagent.agent.builder import build_agent
from memagent.agent.cli import config
from memagent.agent.model import ModelError, ModelRequest, Usage, registry
from memagent.agent.model.providers import openai_compat
from memagent.agent.model.providers.openai_compat import OpenAIModel
from memagent.agent.model.registry import ModelOptions
from memagent.agent.tools import toolbox
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.agent_helpers import Approver
from tests.cli_helpers import err, out, run

PROVIDER_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OLLAMA_HOST", "MEMAGENT_MODEL")


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's OpenAI/Ollama settings stay out of the tests (and their subprocesses)."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def api() -> Iterator[FakeOpenAIAPI]:
    with FakeOpenAIAPI() as server:
        yield server


def model(api: FakeOpenAIAPI, *, stream: bool = True) -> OpenAIModel:
    built = registry.build("openai-compatible/fake", ModelOptions(base_url=api.base_url, stream=stream))
    assert isinstance(built, OpenAIModel)
    built._retry_base = 0.001  # backoff without a server's retry-after: fast in tests
    return built


def ask(text: str = "hi") -> ModelRequest:
    return ModelRequest([{"type": "text", "text": "You are terse."}], [{"role": "user", "content": text}])


STREAMS = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


# -- text -------------------------------------------------------------------------------


@STREAMS
def test_text_answer(api: FakeOpenAIAPI, stream: bool) -> None:
    api.enqueue_text("Hello there, how can I help?")
    pieces: list[str] = []
    response = model(api, stream=stream).respond(ask(), on_text=pieces.append)

    assert response.content == [{"type": "text", "text": "Hello there, how can I help?"}]
    assert response.stop_reason == "end_turn"
    assert response.model == "openai-compatible/fake"
    if stream:
        assert len(pieces) > 1 and "".join(pieces) == "Hello there, how can I help?"
    body = api.requests[0]
    assert bool(body.get("stream")) is stream
    assert body["model"] == "fake" and body["max_tokens"] == 4096
    assert body["messages"] == [{"role": "system", "content": "You are terse."},
                                {"role": "user", "content": "hi"}]
    if stream:
        assert body["stream_options"] == {"include_usage": True}


# -- tool calls -------------------------------------------------------------------------


@STREAMS
def test_two_tool_calls_with_arguments_split_across_chunks(api: FakeOpenAIAPI, stream: bool) -> None:
    first = {"file_path": "/notes/été.md", "content": "line one\nline \"two\"\n", "reason": "keep it"}
    ids = api.enqueue_tool_calls([("write_file", first), ("ls", {"path": "/"})], text="Saving.")
    response = model(api, stream=stream).respond(ask())

    assert response.stop_reason == "tool_use"
    assert response.content == [
        {"type": "text", "text": "Saving."},
        {"type": "tool_use", "id": ids[0], "name": "write_file", "input": first},
        {"type": "tool_use", "id": ids[1], "name": "ls", "input": {"path": "/"}},
    ]


@STREAMS
def test_arguments_that_are_not_a_json_object_are_kept_raw(api: FakeOpenAIAPI, stream: bool) -> None:
    api.enqueue_tool_calls([("read_file", '{"file_path": "/a.md"'), ("ls", "[1, 2]"), ("grep", "")])
    uses = model(api, stream=stream).respond(ask()).tool_uses
    key = openai_compat.UNPARSED_ARGUMENTS
    assert [u["input"] for u in uses] == [{key: '{"file_path": "/a.md"'}, {key: "[1, 2]"}, {}]


def test_the_unparsed_key_is_the_one_the_toolbox_answers() -> None:
    # The model layer cannot import the tools layer: the string is spelled twice.
    assert openai_compat.UNPARSED_ARGUMENTS == toolbox.UNPARSED_ARGUMENTS


# -- translation of a thread -----------------------------------------------------------


def test_an_anthropic_shaped_thread_is_translated_and_left_unchanged(api: FakeOpenAIAPI) -> None:
    mark = {"type": "ephemeral"}
    request = ModelRequest(
        system=[{"type": "text", "text": "Base prompt."},
                {"type": "text", "text": "Memory index.", "cache_control": mark}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "remember my name: Ann"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "they want a note", "signature": "sig"},
                {"type": "text", "text": "Saving it."},
                {"type": "tool_use", "id": "toolu_1", "name": "write_file",
                 "input": {"file_path": "/user/name.md", "content": "Ann\n"}},
                {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Wrote /user/name.md"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
                 "content": [{"type": "text", "text": "no such folder"}]},
                {"type": "text", "text": "thanks", "cache_control": mark}]},
        ],
        tools=[{"name": "ls", "description": "List.", "input_schema": {"type": "object", "properties": {}}},
               {"name": "write_file", "description": "Write.", "cache_control": mark,
                "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}},
                                 "required": ["file_path"]}}],
        max_tokens=300,
    )
    before = copy.deepcopy(request)
    api.enqueue_text("ok")
    model(api).respond(request)

    assert request == before  # build-then-send: the request's lists are never changed
    body = api.requests[0]
    assert "cache_control" not in json.dumps(body)
    assert body["messages"] == [
        {"role": "system", "content": "Base prompt.\n\nMemory index."},
        {"role": "user", "content": "remember my name: Ann"},
        {"role": "assistant", "content": "Saving it.", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {
                "name": "write_file", "arguments": '{"file_path": "/user/name.md", "content": "Ann\\n"}'}},
            {"id": "toolu_2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Wrote /user/name.md"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no such folder"},
        {"role": "user", "content": "thanks"},
    ]
    assert body["tools"] == [
        {"type": "function", "function": {"name": "ls", "description": "List.",
                                          "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "write_file", "description": "Write.", "parameters": {
            "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}},
    ]
    assert body["max_tokens"] == 300


# -- usage ------------------------------------------------------------------------------


@STREAMS
def test_usage_maps_prompt_completion_and_cached_tokens(api: FakeOpenAIAPI, stream: bool) -> None:
    api.enqueue_text("x", usage={"prompt_tokens": 1200, "completion_tokens": 30,
                                 "prompt_tokens_details": {"cached_tokens": 1000}})
    api.enqueue_text("y", usage={"prompt_tokens": 50, "completion_tokens": 5,
                                 "prompt_tokens_details": None})
    m = model(api, stream=stream)
    assert m.respond(ask()).usage == Usage(input_tokens=200, output_tokens=30, cache_read_input_tokens=1000)
    assert m.respond(ask()).usage == Usage(input_tokens=50, output_tokens=5)


# -- retries and errors -----------------------------------------------------------------


@STREAMS
def test_429_then_success_with_the_retry_note(api: FakeOpenAIAPI, stream: bool) -> None:
    api.enqueue_error(429, "Rate limit reached", type="rate_limit_exceeded")
    api.enqueue_text("after the wait")
    notes: list[str] = []
    response = model(api, stream=stream).respond(ask(), on_retry=notes.append)

    assert response.text == "after the wait"
    assert notes == ["rate limited by the model API (429), retrying in 10ms (attempt 2 of 5)"]
    assert len(api.requests) == 2


@STREAMS
def test_500_forever_is_one_line_after_the_retries(api: FakeOpenAIAPI, stream: bool) -> None:
    api.fail_forever(500, "The server had an error\nwhile processing your request")
    notes: list[str] = []
    with pytest.raises(ModelError) as caught:
        model(api, stream=stream).respond(ask(), on_retry=notes.append)

    assert caught.value.status == 500
    assert str(caught.value) == ("the model server failed with a server error (500) and 5 attempts failed: "
                                 "The server had an error while processing your request; try again later")
    assert len(notes) == 4 and notes[-1].endswith("(attempt 5 of 5)")
    assert len(api.requests) == 5


def test_a_rejected_key_is_one_line_without_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIAPI(require_key="right") as api:
        monkeypatch.setenv("OPENAI_API_KEY", "wrong")
        m = registry.build("openai/gpt-5.1", ModelOptions(base_url=api.base_url))
        with pytest.raises(ModelError) as caught:
            m.respond(ask())
        assert caught.value.status == 401 and "OPENAI_API_KEY was rejected" in str(caught.value)
        assert len(api.requests) == 1
        # OpenAI's own models take max_completion_tokens; the key goes as a bearer token.
        assert api.requests[0]["max_completion_tokens"] == 4096 and "max_tokens" not in api.requests[0]
        assert api.headers[0]["authorization"] == "Bearer wrong"


def test_a_stream_cut_before_any_text_is_retried(api: FakeOpenAIAPI) -> None:
    api.enqueue_drop()
    api.enqueue_text("whole answer")
    notes: list[str] = []
    assert model(api).respond(ask(), on_retry=notes.append).text == "whole answer"
    assert len(notes) == 1 and notes[0].startswith("the answer stream broke off, retrying")


def test_a_stream_cut_after_text_is_an_error_not_an_answer(api: FakeOpenAIAPI) -> None:
    api.enqueue_drop(text_before="Half of the ans")
    shown: list[str] = []
    with pytest.raises(ModelError) as caught:
        model(api).respond(ask(), on_text=shown.append)
    assert "broke off after part of the answer was shown" in str(caught.value)
    assert "".join(shown) == "Half of the ans" and len(api.requests) == 1


def test_an_unreachable_server_is_one_line() -> None:
    with FakeOpenAIAPI() as closed:
        url = closed.base_url
    m = registry.build("openai-compatible/fake", ModelOptions(base_url=url))
    assert isinstance(m, OpenAIModel)
    m.max_retries = 0
    with pytest.raises(ModelError) as caught:
        m.respond(ask())
    assert str(caught.value).startswith(f"cannot reach the model server at {url}: ")


# -- the providers' set-up --------------------------------------------------------------


def test_setup_problems_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    openai, compatible = registry.get("openai"), registry.get("openai-compatible")
    assert not openai.status().configured and "export OPENAI_API_KEY" in openai.status().detail
    assert not compatible.status().configured and "--base-url" in compatible.status().detail
    with pytest.raises(ModelError, match=r"^no API key for openai/gpt-5.1: export OPENAI_API_KEY="):
        registry.build("openai/gpt-5.1")
    with pytest.raises(ModelError, match=r"^openai-compatible/m needs the server's URL: pass --base-url"):
        registry.build("openai-compatible/m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    status = compatible.status()
    assert status.configured and "OPENAI_BASE_URL" in status.detail
    assert set(openai.env_vars) == {"OPENAI_API_KEY", "OPENAI_BASE_URL"}


def test_prices_only_where_known(monkeypatch: pytest.MonkeyPatch) -> None:
    assert registry.info("openai/gpt-4o-2024-08-06") == registry.info("openai/gpt-4o")
    assert registry.info("openai/gpt-4o").price is not None
    assert registry.info("openai/some-future-model").price is None
    assert registry.info("openai-compatible/gpt-4o").price is None  # any server: unknown
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gateway.example/v1")
    assert registry.info("openai/gpt-4o").price is None  # a gateway may bill otherwise


# -- through the agent loop -------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SqlStore]:
    s = open_store(f"sqlite:///{tmp_path / 'memagent.db'}")
    s.create_agent("a", {"/AGENTS.md": "# Notes\n"})
    yield s
    s.close()


def test_calls_a_model_got_wrong_go_back_as_tool_errors(api: FakeOpenAIAPI, db: SqlStore) -> None:
    ids = api.enqueue_tool_calls([("read_file", '{"file_path": "/AGENTS.md"'),  # cut short
                                  ("read_flie", {"file_path": "/AGENTS.md"}),   # no such tool
                                  ("write_file", {"file_path": "/x.md"})])      # content missing
    api.enqueue_text("Sorry, fixed.")
    agent = build_agent(AgentView(db, "a", user="t"), model(api), approve=Approver(),
                        threads=ThreadStore(db.engine))
    result = agent.turn("read my notes")

    assert result.text == "Sorry, fixed."
    messages = api.requests[1]["messages"]
    calls = messages[-4]["tool_calls"]
    assert calls[0]["function"]["arguments"] == "{}"  # never resent as invalid JSON
    tool = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert tool[ids[0]].startswith("Error: bad arguments for read_file: the arguments were not a valid JSON "
                                   "object ('{\"file_path\": \"/AGENTS.md\"'); call the tool again with one "
                                   "JSON object")
    assert tool[ids[1]].startswith("Error: unknown tool 'read_flie'; the tools are: ")
    assert tool[ids[2]] == ("Error: bad arguments for write_file: missing required parameter content (a string); "
                            "call the tool again with it")
    assert [m["role"] for m in messages[-4:]] == ["assistant", "tool", "tool", "tool"]
    assert AgentView(db, "a").read("/AGENTS.md").content == "# Notes\n"


def test_the_request_prefix_is_byte_stable_turn_to_turn(api: FakeOpenAIAPI, db: SqlStore) -> None:
    api.enqueue_tool_call("read_file", {"file_path": "/AGENTS.md"}, text="Looking.")
    api.enqueue_text("It says Notes.")
    api.enqueue_text("Still Notes.")
    agent = build_agent(AgentView(db, "a", user="t"), model(api), approve=Approver(),
                        threads=ThreadStore(db.engine))
    agent.turn("what is in my notes?")
    agent.turn("and now?")

    def dumped(body: dict[str, Any], n: int) -> str:
        return json.dumps({"tools": body["tools"], "messages": body["messages"][:n]})

    for before, after in zip(api.requests, api.requests[1:], strict=False):
        assert dumped(after, len(before["messages"])) == dumped(before, len(before["messages"]))


# -- memagent chat end to end -----------------------------------------------------------

RULE = "- Answer in one sentence.\n"


@pytest.fixture
def chat_store(chat_env: None) -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": ""})
    yield s
    s.close()


def chat(api: FakeOpenAIAPI, *args: str, stdin: str, stream: bool = True) -> subprocess.CompletedProcess[bytes]:
    return run("chat", "bot", "--model", "openai-compatible/fake", "--base-url", api.base_url, *args,
               stdin=stdin, env={"MEMAGENT_STREAM": "1" if stream else "0"})


@STREAMS
def test_chat_with_approval_and_a_memory_write(api: FakeOpenAIAPI, chat_store: SqlStore,
                                               stream: bool) -> None:
    api.enqueue_tool_call("write_file", {"file_path": "/AGENTS.md", "content": "# Rules\n" + RULE},
                          text="I'll keep that.")
    api.enqueue_text("Noted: one sentence from now on.")
    api.enqueue_tool_call("write_file", {"file_path": "/AGENTS.md", "content": "nothing\n"})
    api.enqueue_text("Left it as it was.")

    p = chat(api, stdin="answer in one sentence\ny\nnow forget it\nn\n", stream=stream)

    assert p.returncode == 0, err(p)
    screen = out(p)
    assert "* write_file(/AGENTS.md)" in screen and "Approve?" in screen
    assert "Wrote /AGENTS.md (now version 2)" in screen
    assert "Noted: one sentence from now on." in screen and "Left it as it was." in screen
    assert all(bool(r.get("stream")) is stream for r in api.requests)
    view = AgentView(chat_store, "bot")
    assert view.read("/AGENTS.md").content == "# Rules\n" + RULE
    assert [(r.version, r.author, r.approval) for r in view.history("/AGENTS.md")][0] == (2, "agent", "human")
    # The write is in the very next request's system prompt; the refusal reached the model.
    assert RULE.strip() in api.requests[1]["messages"][0]["content"]
    refused = [m for m in api.requests[3]["messages"] if m["role"] == "tool"][-1]
    assert refused["content"].startswith("Error: ")


def test_chat_retry_note_and_one_line_error(api: FakeOpenAIAPI, chat_store: SqlStore) -> None:
    api.enqueue_error(429, "slow down")
    api.enqueue_text("There you are.")
    api.enqueue_error(400, "messages: bad role", type="invalid_request_error")
    api.enqueue_text("Second try worked.")

    p = chat(api, stdin="hello\nagain\nonce more\n")

    # The 429 was retried and answered; the 400 left "again" unanswered: piped, exit 1.
    assert p.returncode == 1, err(p)
    assert "rate limited by the model API (429), retrying in 10ms (attempt 2 of 5)" in err(p)
    assert "There you are." in out(p) and "Second try worked." in out(p)
    problem = [ln for ln in err(p).splitlines() if "rejected the request" in ln]
    assert problem == [problem[0]] and "(400): messages: bad role" in problem[0]
