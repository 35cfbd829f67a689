"""Tool calls small models write as text become tool calls; prose with JSON stays prose.

The recorded answers in ``tests/fixtures/local_model/`` are the real local model's
(Qwen2.5-Coder-1.5B-Instruct Q4_K_M under llama.cpp, each file says how it was made)
to memagent's first request; they are replayed, plain and streamed, through the real
``openai`` SDK against ``bench/fake_openai_api``. The rule itself is
``agent/model/toolcall_recovery.py``'s docstring.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fake_openai_api import FakeOpenAIAPI
from memagent.agent.builder import build_agent
from memagent.agent.gate import Decision
from memagent.agent.model import ModelRequest, registry
from memagent.agent.model.providers.openai_compat import OpenAIModel
from memagent.agent.model.registry import ModelOptions
from memagent.agent.model.toolcall_recovery import Recovered, StreamGate, recover
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.agent_helpers import Approver

FIXTURES = Path(__file__).parent / "fixtures" / "local_model"
OFFERED = {"read_file", "write_file", "edit_file", "search_memory", "task", "ls"}
STREAMS = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text("utf-8"))
    return data


def content(name: str) -> str:
    return str(recorded(name)["completion"]["choices"][0]["message"]["content"])


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMAGENT_MODEL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def api() -> Iterator[FakeOpenAIAPI]:
    with FakeOpenAIAPI() as server:
        yield server


def model(api: FakeOpenAIAPI, stream: bool) -> OpenAIModel:
    built = registry.build("openai-compatible/fake", ModelOptions(base_url=api.base_url, stream=stream))
    assert isinstance(built, OpenAIModel)
    return built


def request(text: str, tools: list[str]) -> ModelRequest:
    return ModelRequest([{"type": "text", "text": "You are terse."}], [{"role": "user", "content": text}],
                        tools=[{"name": n, "description": n, "input_schema": {"type": "object"}} for n in tools])


def replay(api: FakeOpenAIAPI, name: str, stream: bool) -> tuple[Any, list[str]]:
    """The recorded answer ``name`` sent back to a request offering what memagent offered."""
    data = recorded(name)
    api.enqueue_text(content(name))
    pieces: list[str] = []
    response = model(api, stream).respond(request(data["prompt"], data["offered"]), on_text=pieces.append)
    return response, pieces


# -- the recorded answers of the real model -------------------------------------------------


@STREAMS
@pytest.mark.parametrize("name,tool,args", [
    ("write_note", "write_file", {"file_path": "/notes/shopping.md", "content": "buy milk and eggs",
                                  "reason": "This is a simple shopping list.", "expected_version": 0}),
    ("search", "read_file", {"file_path": "/AGENTS.md"}),
])
def test_a_recorded_fenced_call_becomes_a_tool_call(api: FakeOpenAIAPI, stream: bool, name: str, tool: str,
                                                     args: dict[str, Any]) -> None:
    assert "```json" in content(name) and not recorded(name)["completion"]["choices"][0]["message"].get(
        "tool_calls")
    response, pieces = replay(api, name, stream)
    assert response.stop_reason == "tool_use"
    [use] = response.tool_uses
    assert use["name"] == tool and use["id"]
    assert {k: use["input"][k] for k in args} == args
    assert response.text == ""  # the call's JSON is not an answer
    assert "".join(pieces) == ""  # and none of it reached the screen while streaming


@STREAMS
@pytest.mark.parametrize("name", ["remember_bullets", "json_example"])
def test_recorded_json_naming_no_offered_tool_stays_text(api: FakeOpenAIAPI, stream: bool, name: str) -> None:
    # remember_bullets "calls" use_bullet_points, which memagent does not offer; json_example
    # is the example object the person asked for.
    response, pieces = replay(api, name, stream)
    assert response.tool_uses == [] and response.stop_reason == "end_turn"
    assert response.text == content(name)
    if stream:
        assert "".join(pieces) == content(name)


@STREAMS
@pytest.mark.parametrize("name", ["plain_question", "remember_french"])
def test_recorded_prose_streams_as_it_comes(api: FakeOpenAIAPI, stream: bool, name: str) -> None:
    response, pieces = replay(api, name, stream)
    assert response.tool_uses == [] and response.text == content(name)
    if stream:
        assert len(pieces) > 1 and "".join(pieces) == content(name)  # not held until the end


def test_the_recovered_call_runs_through_the_tool_box(api: FakeOpenAIAPI, tmp_path: Path) -> None:
    """Validated and run like any call: the recorded write lands in memory; a bad one is a tool error."""
    store: SqlStore = open_store(f"sqlite:///{tmp_path / 'memagent.db'}")
    try:
        store.create_agent("a", {"/AGENTS.md": "# Notes\n"})
        api.enqueue_text(content("write_note").replace(', "expected_version": 0', "")
                         .replace(',\n    "expected_version": 0', ""))
        api.enqueue_text('{"name": "write_file", "arguments": {"file_path": "/x.md"}}')
        api.enqueue_text("Saved.")
        agent = build_agent(AgentView(store, "a", user="t"), model(api, True),
                            approve=Approver([Decision("approve")]),
                            threads=ThreadStore(store.engine))
        result = agent.turn("Create a file /notes/shopping.md with the text: buy milk and eggs.")
        assert result.text == "Saved."
        assert AgentView(store, "a").read("/notes/shopping.md").content == "buy milk and eggs"
        tool = [m for m in api.requests[2]["messages"] if m["role"] == "tool"]
        assert tool[-1]["content"].startswith("Error: bad arguments for write_file: missing required parameter "
                                              "content")
        # Sent back as a real call, so the model sees its call and the result paired.
        assert api.requests[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "write_file"
    finally:
        store.close()


# -- the forms --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    '{"name": "search_memory", "arguments": {"query": "tea"}}',
    '```json\n{"name": "search_memory", "arguments": {"query": "tea"}}\n```',
    '```\n{"name": "search_memory", "parameters": {"query": "tea"}}\n```',
    '<tool_call>\n{"name": "search_memory", "arguments": {"query": "tea"}}\n</tool_call>',
    '<tool_call>{"name": "search_memory", "arguments": {"query": "tea"}}',  # unclosed at the end
    '{"function": "search_memory", "parameters": {"query": "tea"}}',
    '{"type": "function", "function": {"name": "search_memory", "arguments": "{\\"query\\": \\"tea\\"}"}}',
    '[{"name": "search_memory", "arguments": {"query": "tea"}}]',
    '  {\n    "name": "search_memory",\n    "arguments": {"query": "tea"}\n  }\n',
])
def test_each_form_is_a_call(text: str) -> None:
    found = recover(text, OFFERED)
    assert found is not None and found.text == ""
    assert [(n, json.loads(a)) for n, a in found.calls] == [("search_memory", {"query": "tea"})]


def test_several_calls_and_the_prose_around_them() -> None:
    text = ('I will look first.\n\n{"name": "ls", "arguments": {}}\n'
            '{"name": "read_file", "arguments": {"file_path": "/AGENTS.md"}}\n\nThen I answer.')
    assert recover(text, OFFERED) == Recovered("I will look first.\n\nThen I answer.", [
        ("ls", "{}"), ("read_file", '{"file_path": "/AGENTS.md"}')])


def test_arguments_that_are_not_an_object_are_kept_for_the_tool_box_to_refuse() -> None:
    found = recover('{"name": "read_file", "arguments": "the notes"}', OFFERED)
    assert found is not None and found.calls == [("read_file", "the notes")]


@pytest.mark.parametrize("text", [
    # mid-sentence: JSON that begins or ends inside a line of prose
    'You can call {"name": "write_file", "arguments": {"file_path": "/a.md", "content": "x"}} to save.',
    'Send this: {"name": "search_memory", "arguments": {"query": "tea"}}',
    '{"name": "search_memory", "arguments": {"query": "tea"}} is how a call looks.',
    # naming no offered tool, or not shaped like a call
    '```json\n{"name": "Alice", "age": 30}\n```',
    '{"name": "delete_everything", "arguments": {}}',
    '{"name": "search_memory", "query": "tea"}',
    '{"name": "search_memory", "arguments": {}, "parameters": {}}',
    # a block that is not wholly calls is left whole
    '```json\n{"name": "ls", "arguments": {}}\n{"config": true}\n```',
    # another language's code block
    '```python\n{"name": "ls", "arguments": {}}\n```',
    '<b>{"name": "ls", "arguments": {}}</b>',
    'Plain text with [brackets] and {braces}.',
])
def test_prose_that_merely_contains_json_is_left_alone(text: str) -> None:
    assert recover(text, OFFERED) is None


def test_nothing_is_recovered_when_no_tool_was_offered() -> None:
    assert recover('{"name": "ls", "arguments": {}}', set()) is None


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
def test_a_native_call_is_left_as_it_is(api: FakeOpenAIAPI, stream: bool) -> None:
    text = '{"name": "ls", "arguments": {}}'
    api.enqueue_tool_call("read_file", {"file_path": "/AGENTS.md"}, text=text)
    pieces: list[str] = []
    response = model(api, stream).respond(request("hi", sorted(OFFERED)), on_text=pieces.append)
    assert [u["name"] for u in response.tool_uses] == ["read_file"]
    assert response.text == text
    if stream:
        assert "".join(pieces) == text


# -- streaming -------------------------------------------------------------------------------


def fed(text: str) -> tuple[list[str], str]:
    gate = StreamGate()
    return [gate.feed(ch) for ch in text], gate.held


def test_prose_passes_the_gate_character_by_character() -> None:
    text = "Sure: [a link](x), {braces} and <b>bold</b>.\n```python\nx = {'a': 1}\n```\nDone."
    shown, held = fed(text)
    assert held == "" and "".join(shown) == text
    # Each prose character is passed on when it arrives, once its line is known to be prose.
    assert sum(1 for s in shown if s) > len(text) // 2


def test_a_possible_block_is_held_from_its_line_to_the_end() -> None:
    text = 'Saving.\n```json\n{"name": "ls"}\n```\nafter'
    shown, held = fed(text)
    assert "".join(shown) == "Saving.\n" and held == text[len("Saving.\n"):]
