"""The small-window profile (issue 24): the fixed part of a request fits a local model;
and the compact profile (issue 37): what a small local model is sent fits 1,500 tokens.

The fixed part is what every request of a new ``assistant`` agent carries before the
user says a word: the system prompt (base instructions, the template's AGENTS.md and
skills index) and the tool definitions, as the chat sends them. It must stay within
``BUDGET`` tokens by the context budget's own estimator, so an 8,192-token local
model keeps room for memory, a few turns and its answer. Shortening is only worth
it while every rule survives, so the rules the model must know are checked too.

The compact profile (``prompt.COMPACT_INSTRUCTIONS`` and the tools' compact
definitions), which only models declaring ``prompt_profile = "compact"`` get (the
``local`` provider's), must stay within ``COMPACT_BUDGET`` by the same estimator,
keep its rules, and render byte-identical from one turn to the next as the local
server receives it, so llama.cpp reuses its cached prefix.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memagent.agent.builder import build_agent, profile_of
from memagent.agent.chat.session import ShownText
from memagent.agent.cli import templates
from memagent.agent.context import estimate
from memagent.agent.evals.harness import Counting
from memagent.agent.model import ModelError, ModelRequest, registry
from memagent.agent.model.providers.local import LocalModel
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.prompt import APPLY_PREFERENCES, base_instructions
from memagent.vfs import SqlStore
from memagent.vfs.scopes import AgentView

BUDGET = 3_000
COMPACT_BUDGET = 1_500


class SmallModel(ScriptedModel):
    """The scripted model declaring itself small, as the local provider's models do."""

    prompt_profile = "compact"


def first_request(store: SqlStore, template: str, model: ScriptedModel | None = None) -> dict[str, Any]:
    """The first request of a new agent made from ``template``, as the model receives it."""
    store.create_agent(template, templates.files(template))
    model = model if model is not None else ScriptedModel()
    model.enqueue_text("Hello.")
    build_agent(AgentView(store, template), model, yolo=True).turn("Hello")
    return model.requests[0]


def test_the_assistant_templates_prompt_and_tools_fit_the_small_window_budget(store: SqlStore) -> None:
    request = first_request(store, "assistant")
    names = {t["name"] for t in request["tools"]}
    # Every tool the chat gives a new agent is counted, not a subset.
    assert {"ls", "read_file", "write_file", "edit_file", "delete_file", "glob", "grep", "search_memory",
            "task"} <= names
    system = "".join(b["text"] for b in request["system"])
    assert "<memory path=\"/AGENTS.md\"" in system and "meeting-notes" in system  # the template is in it
    size = estimate(request["system"]) + estimate(request["tools"])
    assert size <= BUDGET, f"system prompt + tools of 'assistant' are {size} tokens, over {BUDGET}"


@pytest.mark.parametrize("rule", [
    "/AGENTS.md", "shown in\n  full below every time", "/skills/<name>/SKILL.md", "read the file before",
    "equal to the file name", "/subagents/<name>.md", "task tool", "/user/", "/org/", "read-only",
    "grep and glob of / skip it", 'grep(pattern, path="/conversations/")', "never whole conversations",
    "<conversation-summary>", "read_file with an offset", "goes into /AGENTS.md", "skill instead",
    "general rule", "one-off requests", "Never store secrets", "as a diff and may reject it",
    "do not retry the same change", "Read a file before overwriting", "prefer edit_file",
    "is not part of these system instructions", "never override",
])
def test_the_short_base_instructions_keep_every_rule(rule: str) -> None:
    assert rule in base_instructions("assistant")


def test_the_short_tool_descriptions_keep_their_contracts(store: SqlStore) -> None:
    tools = {t["name"]: t for t in first_request(store, "assistant")["tools"]}
    read = tools["read_file"]["description"]
    assert "(version N)" in read and "expected_version" in read and "offset/limit" in read
    expected = tools["edit_file"]["input_schema"]["properties"]["expected_version"]["description"]
    assert "0: it must not exist yet" in expected and "refused" in expected
    grep = tools["grep"]["description"]
    assert "(incomplete: ...)" in grep and "5 s" in grep and "lookarounds" in grep
    assert "/conversations/" in tools["search_memory"]["description"]
    for name in ("write_file", "edit_file", "delete_file"):
        assert "approves" in tools[name]["description"]


def test_the_bench_table_reports_the_same_figure(store: SqlStore) -> None:
    from bench import prompt_sizes

    request = first_request(store, "assistant")
    figure = estimate(request["system"]) + estimate(request["tools"])
    assert prompt_sizes.estimated(prompt_sizes.first_request("assistant")).total == figure
    text = prompt_sizes.table(["assistant"])
    assert f"`assistant`: {figure:,} tokens against the small-window budget of 3,000" in text
    # The compact column and verdict: the same figure as the compact budget test measures.
    small = prompt_sizes.estimated(prompt_sizes.first_request("assistant", profile="compact"), profile="compact")
    assert f"| {figure:,} | {small.total:,} |" in text
    assert f"{small.total:,} tokens against its budget of {COMPACT_BUDGET:,} (met)" in text
    assert prompt_sizes.COMPACT_BUDGET == COMPACT_BUDGET


# -- the compact profile (issue 37) ------------------------------------------------------------------


def test_the_compact_profile_fits_1500_tokens_for_the_assistant_template(store: SqlStore) -> None:
    request = first_request(store, "assistant", SmallModel())
    names = {t["name"] for t in request["tools"]}
    # The same tools in fewer words, but ``task`` only once /subagents/ holds one (the template has none).
    assert {"ls", "read_file", "write_file", "edit_file", "delete_file", "glob", "grep", "search_memory"} <= names
    assert "task" not in names
    system = "".join(b["text"] for b in request["system"])
    assert system.startswith(base_instructions("assistant", "compact", subagents=False))
    assert "task tool" not in system
    assert "<memory path=\"/AGENTS.md\"" in system and "meeting-notes" in system
    size = estimate(request["system"]) + estimate(request["tools"])
    assert size <= COMPACT_BUDGET, f"compact system prompt + tools of 'assistant' are {size} tokens"


def test_the_compact_task_tool_comes_with_the_first_subagent(store: SqlStore) -> None:
    store.create_agent("helped", {"/AGENTS.md": "- Be brief.\n"})
    view = AgentView(store, "helped")
    model = SmallModel()
    model.enqueue_text("Hi.")
    model.enqueue_text("Hi again.")
    agent = build_agent(view, model, yolo=True)
    agent.turn("Hello")
    view.write("/subagents/summariser.md", "---\nname: summariser\ndescription: Summarises a text.\n---\n"
               "Summarise the text you are given in three lines.\n")
    agent.turn("Hello again")
    before, after = model.requests
    assert "task" not in {t["name"] for t in before["tools"]}
    assert "task tool" not in before["system"][0]["text"]
    assert "task" in {t["name"] for t in after["tools"]}
    assert "run one with the task tool" in after["system"][0]["text"] and "summariser" in after["system"][0]["text"]
    # A model that gets the full prompt is offered the tool whatever /subagents/ holds.
    full = ScriptedModel()
    full.enqueue_text("Hi.")
    store.create_agent("plain", {"/AGENTS.md": "- Be brief.\n"})
    build_agent(AgentView(store, "plain"), full, yolo=True).turn("Hello")
    assert "task" in {t["name"] for t in full.requests[0]["tools"]}


def test_a_small_models_subagent_gets_the_compact_tools(store: SqlStore) -> None:
    store.create_agent("helped", {"/AGENTS.md": "- Be brief.\n", "/subagents/finder.md":
                                  "---\nname: finder\ndescription: Finds notes.\n---\nFind the note asked for.\n"})
    model = SmallModel()
    model.enqueue_tool_use("task", {"subagent": "finder", "description": "Find the note on Ann."})
    model.enqueue_text("Nothing on Ann.")  # the subagent's answer
    model.enqueue_text("There is no note on Ann.")
    build_agent(AgentView(store, "helped"), model, yolo=True).turn("What do my notes say about Ann?")
    parent, child, _ = model.requests
    compact = {t["name"]: t["description"] for t in parent["tools"]}
    assert child["system"][0]["text"].startswith("You are the subagent 'finder'.")
    assert child["tools"] and all(compact[t["name"]] == t["description"] for t in child["tools"])


def test_the_profile_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMAGENT_PROMPT_PROFILE", "full")
    assert profile_of(SmallModel()) == "full"
    monkeypatch.setenv("MEMAGENT_PROMPT_PROFILE", "compact")
    assert profile_of(ScriptedModel()) == "compact"
    monkeypatch.setenv("MEMAGENT_PROMPT_PROFILE", "tiny")
    with pytest.raises(ModelError, match="MEMAGENT_PROMPT_PROFILE='tiny' is not a prompt profile; set one of "
                                         "full, compact"):
        profile_of(ScriptedModel())


def test_only_a_model_that_declares_it_gets_the_compact_profile() -> None:
    assert LocalModel.prompt_profile == "compact"
    assert profile_of(ScriptedModel()) == "full"  # the scripted suites keep the full prompt
    # Through the wrappers the chat and the eval put around a model.
    assert profile_of(ShownText(Counting(SmallModel()))) == "compact"
    assert profile_of(ShownText(Counting(ScriptedModel()))) == "full"


def test_the_full_profile_is_the_system_file_unchanged(store: SqlStore) -> None:
    request = first_request(store, "assistant")
    system = "".join(b["text"] for b in request["system"])
    assert system.startswith(base_instructions("assistant") + "\n\n<memory path=\"/AGENTS.md\"")
    assert APPLY_PREFERENCES not in system


@pytest.mark.parametrize("rule", [
    "/AGENTS.md", "Follow them in every answer", "/skills/<name>.md", "read the file before",
    "`name: <name>`", "equal to the file", "`description: <what it does and when to use it>`", "`---`",
    "/subagents/<name>.md", "task tool", "/user/", "/org/: read-only",
    'grep(pattern, path="/conversations/")', "<conversation-summary>", "goes into /AGENTS.md",
    "skill instead", "general rule", "no duplicates", "one-off requests", "Never store secrets",
    "may reject it", "do not retry the same change", "Read a file before overwriting", "prefer edit_file",
    "Never say you saved or changed memory unless the tool call succeeded",
    "is not part of these system instructions", "never overrides",
])
def test_the_compact_instructions_keep_the_rules(rule: str) -> None:
    assert rule in " ".join(base_instructions("assistant", "compact").split()).replace("\n", " ")


def test_the_compact_prompt_says_to_follow_agents_md(store: SqlStore) -> None:
    store.create_agent("prefs", {"/AGENTS.md": "- End every answer with the word BANANA.\n"})
    model = SmallModel()
    model.enqueue_text("Hi. BANANA")
    build_agent(AgentView(store, "prefs"), model, yolo=True).turn("Hello")
    system = model.requests[0]["system"][0]["text"]
    assert "- End every answer with the word BANANA.\n</memory>\n" + APPLY_PREFERENCES + "\n\n# Skills" in system


def test_the_compact_tools_keep_what_a_call_needs(store: SqlStore) -> None:
    tools = {t["name"]: t for t in first_request(store, "assistant", SmallModel())["tools"]}
    assert tools["write_file"]["input_schema"]["required"] == ["file_path", "content"]
    assert tools["edit_file"]["input_schema"]["required"] == ["file_path", "old_string", "new_string"]
    assert "(version N)" in tools["read_file"]["description"]
    assert "/conversations/" in tools["search_memory"]["description"]
    for name in ("write_file", "edit_file", "delete_file"):
        assert "approves" in tools[name]["description"]


def rendered(request: dict[str, Any]) -> dict[str, Any]:
    """The Chat Completions body the local model server receives for a recorded request."""
    model = LocalModel("local", "model.gguf", base_url="http://127.0.0.1:9/v1", api_key="k")
    return model.params(ModelRequest(request["system"], request["messages"], request["tools"],
                                     request["max_tokens"]))


def test_the_compact_prefix_is_byte_identical_between_turns(store: SqlStore) -> None:
    store.create_agent("assistant", templates.files("assistant"))
    model = SmallModel()
    model.enqueue_text("Hello.")
    model.enqueue_text("Fine.")
    agent = build_agent(AgentView(store, "assistant"), model, yolo=True)
    agent.turn("Hello")
    agent.turn("How are you?")
    first, second = (rendered(r) for r in model.requests)
    assert json.dumps(first["tools"]) == json.dumps(second["tools"])
    # The whole first request (system, then the conversation) is the start of the second.
    sent = [json.dumps(m, ensure_ascii=False) for m in first["messages"]]
    assert [json.dumps(m, ensure_ascii=False) for m in second["messages"][:len(sent)]] == sent
    assert second["messages"][0]["role"] == "system"
    assert second["max_tokens"] <= 1024  # the local provider's cap on one answer


def test_the_chat_model_carries_its_profile_before_it_is_built() -> None:
    """The chat builds its client on a thread (``models.background``) while the agent's prompt
    is chosen: the local model must get the compact prompt there too (it got the full one,
    2,563 tokens by llama.cpp's count for a first "hi", before the profile was known early)."""
    from memagent.agent.cli import models

    opts = registry.DEFAULT_OPTIONS
    local = models.background("local", opts)
    assert registry.info("local").prompt_profile == LocalModel.prompt_profile == "compact"
    assert profile_of(ShownText(local)) == "compact"
    assert profile_of(ShownText(models.background("claude-sonnet-5-5", opts))) == "full"
    # Choosing the profile built nothing: no server started, no SDK client made.
    assert local._started is False and local._model is None
