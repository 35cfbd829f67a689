"""The small-window profile (issue 24): the fixed part of a request fits a local model.

The fixed part is what every request of a new ``assistant`` agent carries before the
user says a word: the system prompt (base instructions, the template's AGENTS.md and
skills index) and the tool definitions, as the chat sends them. It must stay within
``BUDGET`` tokens by the context budget's own estimator, so an 8,192-token local
model keeps room for memory, a few turns and its answer. Shortening is only worth
it while every rule survives, so the rules the model must know are checked too.
"""

from __future__ import annotations

from typing import Any

import pytest

from memagent.agent.builder import build_agent
from memagent.agent.cli import templates
from memagent.agent.context import estimate
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.prompt import base_instructions
from memagent.vfs import SqlStore
from memagent.vfs.scopes import AgentView

BUDGET = 3_000


def first_request(store: SqlStore, template: str) -> dict[str, Any]:
    """The first request of a new agent made from ``template``, as the model receives it."""
    store.create_agent(template, templates.files(template))
    model = ScriptedModel()
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
