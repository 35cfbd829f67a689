"""The agent core with the scripted model over real SQLite/Postgres: loop, tools, gate."""

from __future__ import annotations

import pytest

from memagent.agent.gate import Decision
from memagent.vfs import SqlStore
from memagent.vfs.records.threads import ThreadStore
from tests.agent_helpers import last_tool_result, make_agent, system_text

S = "agent:a"
YES, ALWAYS = Decision("approve"), Decision("always")
SKILL = (
    "---\nname: notes\ndescription: Summarise notes into bullets. Use for meeting notes.\n---\n"
    "# Notes\n1. Bullets.\n"
)


def test_plain_text_turn_persists_thread(store: SqlStore) -> None:
    agent, model, _ = make_agent(store)
    model.enqueue_text("Hello there.")
    result = agent.turn("hi")
    assert result.text == "Hello there." and result.steps == 0 and result.stopped == "end_turn"
    threads = ThreadStore(store.engine)
    assert agent.thread_id is not None
    saved = threads.load(agent.thread_id)
    assert [m["role"] for m in saved] == ["user", "assistant"]
    assert threads.get("a", agent.thread_id[:8]).title == "hi"


def test_correction_lands_in_agents_md_and_next_prompt(store: SqlStore) -> None:
    store.write(S, "/AGENTS.md", "# Rules\n")
    agent, model, approver = make_agent(store, answers=[YES])
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "# Rules\n",
                                         "new_string": "# Rules\n- Use bullet points.\n"})
    model.enqueue_text("Noted.")
    agent.turn("use bullet points from now on")
    assert store.read(S, "/AGENTS.md").content == "# Rules\n- Use bullet points.\n"
    assert approver.asked[0].op == "edit" and "+- Use bullet points." in approver.asked[0].diff
    assert "Use bullet points" not in system_text(model, 0)
    assert "- Use bullet points." in system_text(model, 1)  # rebuilt within the same turn
    assert store.history(S, "/AGENTS.md")[0].approval == "human"
    assert store.history(S, "/AGENTS.md")[0].author == "agent"
    assert last_tool_result(model)["content"] == "Edited /AGENTS.md (now version 2)."


def test_reject_with_feedback(store: SqlStore) -> None:
    store.write(S, "/AGENTS.md", "old\n")
    agent, model, _ = make_agent(store, answers=[Decision("reject", "say it shorter")])
    model.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "long rule\n"})
    model.enqueue_text("ok")
    agent.turn("x")
    res = last_tool_result(model)
    assert res["is_error"] is True and "say it shorter" in str(res["content"])
    assert store.read(S, "/AGENTS.md").content == "old\n"
    assert store.read(S, "/AGENTS.md").version == 1


def test_invalid_skill_is_error_and_nothing_stored(store: SqlStore) -> None:
    agent, model, approver = make_agent(store, answers=[YES])
    model.enqueue_tool_use("write_file", {"file_path": "/skills/notes.md", "content": "no frontmatter"})
    model.enqueue_text("oops")
    agent.turn("make a skill")
    res = last_tool_result(model)
    assert res["is_error"] is True and "frontmatter" in str(res["content"])
    assert not store.exists(S, "/skills/notes.md")
    assert approver.asked == []  # invalid writes never reach the person


def test_yolo_skips_gate_and_records_it(store: SqlStore) -> None:
    agent, model, approver = make_agent(store, yolo=True)
    model.enqueue_tool_use("write_file", {"file_path": "/skills/notes.md", "content": SKILL})
    model.enqueue_text("done")
    agent.turn("go")
    assert approver.asked == []
    assert store.history(S, "/skills/notes.md")[0].approval == "yolo"
    assert "- notes (/skills/notes.md): Summarise notes" in system_text(model, 1)


def test_always_approves_rest_of_session(store: SqlStore) -> None:
    agent, model, approver = make_agent(store, answers=[ALWAYS])
    model.enqueue_tool_uses([("write_file", {"file_path": "/k/a.md", "content": "a"}),
                             ("write_file", {"file_path": "/k/b.md", "content": "b"})])
    model.enqueue_text("done")
    agent.turn("go")
    assert len(approver.asked) == 1
    assert store.exists(S, "/k/b.md") and store.history(S, "/k/b.md")[0].approval == "human"


def test_read_tools(store: SqlStore) -> None:
    store.write(S, "/k/a.md", "alpha\nbeta\ngamma\n")
    agent, model, _ = make_agent(store)
    calls = [("ls", {"path": "/"}), ("read_file", {"file_path": "/k/a.md", "offset": 1, "limit": 1}),
             ("glob", {"pattern": "**/*.md"}),
             ("grep", {"pattern": "BETA", "case_insensitive": True, "output_mode": "content"}),
             ("read_file", {"file_path": "/nope.md"}), ("bogus", {}),
             ("read_file", {"path": "/k/a.md"})]
    model.enqueue_tool_uses(calls)
    model.enqueue_text("done")
    agent.turn("look")
    results = [b for b in model.requests[-1]["messages"][-1]["content"]]
    texts = [r["content"] for r in results]
    assert texts[0] == "k/  (1 file)"
    assert texts[1] == "     2\tbeta\n(lines 2-2 of 3 shown; read on with offset=2)\n(version 1)"
    assert texts[2] == "/k/a.md"
    assert texts[3] == "/k/a.md:2:beta"
    assert results[4]["is_error"] and "no file at /nope.md" in texts[4]
    assert results[5]["is_error"] and "unknown tool 'bogus'" in texts[5]
    assert results[6]["is_error"] and "bad arguments for read_file" in texts[6]
    assert not any(r.get("is_error") for r in results[:4])


def test_overwrite_requires_read_and_detects_staleness(store: SqlStore) -> None:
    store.write(S, "/k.md", "v1\n")
    agent, model, _ = make_agent(store, answers=[YES])
    model.enqueue_tool_use("write_file", {"file_path": "/k.md", "content": "mine\n"})
    model.enqueue_tool_use("read_file", {"file_path": "/k.md"})
    model.enqueue_text("read it")
    agent.turn("overwrite k")
    first = model.requests[1]["messages"][-1]["content"][0]
    assert first["is_error"] and "you have not read it" in first["content"]
    store.write(S, "/k.md", "v2 by someone else\n")  # changes after the model read v1
    model.enqueue_tool_use("edit_file", {"file_path": "/k.md", "old_string": "v2", "new_string": "v3"})
    model.enqueue_text("stale")
    agent.turn("edit it")
    res = last_tool_result(model)
    assert res["is_error"] and "changed since you read it" in str(res["content"])
    assert store.read(S, "/k.md").content == "v2 by someone else\n"


def test_edit_and_delete_tools(store: SqlStore) -> None:
    store.write(S, "/k.md", "a a\n")
    agent, model, approver = make_agent(store, answers=[YES, YES])
    model.enqueue_tool_use("edit_file", {"file_path": "/k.md", "old_string": "a", "new_string": "b"})
    model.enqueue_tool_use("edit_file", {"file_path": "/k.md", "old_string": "a", "new_string": "b",
                                         "replace_all": True})
    model.enqueue_tool_use("delete_file", {"file_path": "/k.md"})
    model.enqueue_text("done")
    agent.turn("go")
    assert "appears 2 times" in model.requests[1]["messages"][-1]["content"][0]["content"]
    assert [r.op for r in approver.asked] == ["edit", "delete"]
    assert not store.exists(S, "/k.md")
    assert store.revision_content(S, "/k.md", 2) == "b b\n"
    assert [c.version for c in agent.memory.log.undoable] == [2, 3]


def test_org_is_read_only(store: SqlStore) -> None:
    agent, model, _ = make_agent(store, yolo=True)
    agent.memory.view.org = "acme"
    model.enqueue_tool_use("write_file", {"file_path": "/org/policy.md", "content": "x"})
    model.enqueue_tool_use("write_file", {"file_path": "/user/prefs.md", "content": "tea"})
    model.enqueue_text("done")
    agent.turn("go")
    assert "may only read" in model.requests[1]["messages"][-1]["content"][0]["content"]
    assert store.read("user:tester", "/prefs.md").content == "tea"


def test_step_cap(store: SqlStore) -> None:
    agent, model, _ = make_agent(store, max_steps=2)
    for _ in range(2):
        model.enqueue_tool_use("ls", {})
    result = agent.turn("loop forever")
    assert result.stopped == "step_limit" and "stopped after 2 tool steps" in result.text
    model.enqueue_text("continuing")
    agent.turn("continue")
    msgs = model.requests[-1]["messages"]
    roles = [m["role"] for m in msgs]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))  # still alternating
    assert msgs[-1]["content"][-1] == {"type": "text", "text": "continue"}


def test_interrupt_keeps_thread_consistent(store: SqlStore) -> None:
    agent, model, _ = make_agent(store)

    def interrupt(_request: dict[str, object]) -> object:
        raise KeyboardInterrupt

    model.enqueue_tool_use("ls", {})
    model.enqueue_callable(interrupt)  # type: ignore[arg-type]
    result = agent.turn("start")
    assert result.stopped == "interrupted"
    model.enqueue_text("back")
    assert agent.turn("again").text == "back"
    assert agent.thread_id is not None
    saved = ThreadStore(store.engine).load(agent.thread_id)
    roles = [m["role"] for m in saved]
    assert roles == ["user", "assistant", "user", "assistant"]


def test_resumed_thread_sees_current_memory(store: SqlStore) -> None:
    store.write(S, "/AGENTS.md", "rule one\n")
    agent, model, _ = make_agent(store)
    model.enqueue_text("a")
    agent.turn("first")
    store.write(S, "/AGENTS.md", "rule two\n")
    again, model2, _ = make_agent(store)
    again.thread_id = agent.thread_id
    again.messages = ThreadStore(store.engine).load(agent.thread_id or "")
    model2.enqueue_text("b")
    again.turn("second")
    assert "rule two" in system_text(model2) and "rule one" not in system_text(model2)
    assert [m["role"] for m in model2.requests[0]["messages"]] == ["user", "assistant", "user"]


@pytest.mark.parametrize("answer,kind,feedback", [
    ("y", "approve", ""), ("yes", "approve", ""), ("a", "always", ""), ("n", "reject", ""),
    ("n: say it shorter", "reject", "say it shorter"), ("no:", "reject", "")])
def test_decision_parse(answer: str, kind: str, feedback: str) -> None:
    d = Decision.parse(answer)
    assert d is not None and (d.kind, d.feedback) == (kind, feedback)


def test_decision_parse_unclear() -> None:
    assert Decision.parse("maybe") is None and Decision.parse("y: what") is None
