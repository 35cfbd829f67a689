"""The tool set of each kind of session is wired in one place (``agent/tools/toolset.py``).

Every ``ToolBox`` in the product is built there: a new kind of tool is one entry in
``KINDS``, not an edit of each front end. Through the real front ends, each kind offers
what ``KINDS`` says and nothing else: a subagent has no ``task``, ``mcp serve`` has
``history``, reflection drafts instead of writing.
"""

from __future__ import annotations

import ast
from pathlib import Path

from memagent.agent.builder import build_agent
from memagent.agent.gate import Gate
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.reflection import DraftTools
from memagent.agent.serve.server import Session
from memagent.agent.tools import MemoryTools, TaskTool, ToolResult
from memagent.agent.tools.toolset import KINDS, tool_box
from memagent.vfs import AgentView, SqlStore

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("agent", "integrations", "vfs", "validators")


def test_no_tool_box_is_built_outside_the_toolset_module() -> None:
    built = []
    for top in PRODUCT:
        for path in (ROOT / top).rglob("*.py"):
            if path.name == "toolset.py" or "__pycache__" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "ToolBox":
                    built.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not built, f"ToolBox built outside agent/tools/toolset.py: {built}"


def names(box: object) -> set[str]:
    return {d["name"] for d in box.definitions()}  # type: ignore[attr-defined]


def test_each_kind_offers_what_the_table_says(store: SqlStore) -> None:
    view = AgentView(store, "a")
    memory = MemoryTools(view, Gate(yolo=True))
    task = TaskTool(lambda name, description: ToolResult("done"))
    file_tools = names(tool_box("reflection", view, memory=memory)) - {"search_memory"}
    agent = names(build_agent(view, ScriptedModel(), yolo=True).tools)
    assert {"task", "search_memory"} <= agent and file_tools <= agent and "history" not in agent
    assert names(tool_box("agent", view, memory=memory, task=task)) == agent
    subagent = names(tool_box("subagent", view, memory=memory, task=task))
    assert "task" not in subagent and subagent == agent - {"task"}
    serve = names(Session(view, "yolo", "a test", None).box)
    assert serve == file_tools | {"search_memory", "history"}
    drafts = names(tool_box("reflection", view, memory=DraftTools(view, memory)))
    assert "search_memory" in drafts and "history" not in drafts and "task" not in drafts
    assert set(KINDS) == {"agent", "subagent", "serve", "reflection", "control"}
    assert names(tool_box("control", view, memory=memory)) == set()
    # A subagent's ``tools:`` line narrows its set.
    assert names(tool_box("subagent", view, memory=memory, allowed={"read_file"})) == {"read_file"}
