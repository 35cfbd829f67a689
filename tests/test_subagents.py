"""The task tool: subagents from /subagents/ run as nested loops with their own tools."""

from __future__ import annotations

from memagent.agent.gate import Decision
from memagent.vfs import SqlStore
from tests.agent_helpers import last_tool_result, make_agent

S = "agent:a"
RESEARCHER = """---
name: researcher
description: Looks things up in memory. Use for questions about stored notes.
---
You find facts in memory and answer in one sentence.
"""
SCRIBE = """---
name: scribe
description: Writes notes. Use to file a note.
tools: [read_file, write_file]
---
You write notes under /knowledge/.
"""


def test_task_runs_subagent_with_read_only_tools(store: SqlStore) -> None:
    store.write(S, "/subagents/researcher.md", RESEARCHER)
    store.write(S, "/knowledge/tea.md", "Ann drinks green tea.\n")
    agent, model, _ = make_agent(store)
    model.enqueue_tool_use("task", {"subagent": "researcher", "description": "What does Ann drink?"})
    model.enqueue_tool_use("grep", {"pattern": "Ann", "output_mode": "content"})  # the subagent
    model.enqueue_text("Ann drinks green tea.")  # the subagent's answer
    model.enqueue_text("She drinks green tea.")  # the parent's answer
    result = agent.turn("what does Ann drink?")
    assert result.text == "She drinks green tea."
    parent_first, child_first = model.requests[0], model.requests[1]
    assert "task" in {t["name"] for t in parent_first["tools"]}
    assert "- researcher (/subagents/researcher.md): Looks things up" in parent_first["system"][0]["text"]
    assert {t["name"] for t in child_first["tools"]} == {"ls", "read_file", "glob", "grep"}
    assert child_first["system"][0]["text"].endswith("You find facts in memory and answer in one sentence.")
    assert child_first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What does Ann drink?"}]}]
    assert last_tool_result(model, 2)["content"] == "/knowledge/tea.md:1:Ann drinks green tea."
    res = last_tool_result(model)
    assert res["content"] == "Ann drinks green tea." and not res.get("is_error")


def test_subagent_writes_are_gated_and_attributed(store: SqlStore) -> None:
    store.write(S, "/subagents/scribe.md", SCRIBE)
    agent, model, approver = make_agent(store, answers=[Decision("approve")])
    model.enqueue_tool_use("task", {"subagent": "scribe", "description": "File: Bob likes chess."})
    model.enqueue_tool_uses([("write_file", {"file_path": "/knowledge/bob.md", "content": "Bob likes chess.\n"}),
                             ("delete_file", {"file_path": "/knowledge/bob.md"})])
    model.enqueue_text("Filed.")
    model.enqueue_text("Done.")
    agent.turn("remember that Bob likes chess")
    assert {t["name"] for t in model.requests[1]["tools"]} == {"read_file", "write_file"}
    child_results = model.requests[2]["messages"][-1]["content"]
    assert not child_results[0].get("is_error")
    assert child_results[1]["is_error"] and "unknown tool 'delete_file'" in child_results[1]["content"]
    assert len(approver.asked) == 1 and approver.asked[0].path == "/knowledge/bob.md"
    rev = store.history(S, "/knowledge/bob.md")[0]
    assert (rev.author, rev.approval) == ("subagent", "human")
    assert [c.path for c in agent.memory.log.undoable] == ["/knowledge/bob.md"]  # /undo can see it


def test_unknown_subagent_is_error(store: SqlStore) -> None:
    store.write(S, "/subagents/researcher.md", RESEARCHER)
    agent, model, _ = make_agent(store)
    model.enqueue_tool_use("task", {"subagent": "ghost", "description": "x"})
    model.enqueue_text("ok")
    agent.turn("go")
    res = last_tool_result(model)
    assert res["is_error"] and "no subagent named 'ghost'" in str(res["content"])
    assert "researcher" in str(res["content"])
