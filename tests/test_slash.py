"""Slash commands and the session loop, in process: the scripted model, a real store,
and the plain UI reading a script of lines from a StringIO."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memagent.agent.chat import slash
from memagent.agent.chat.session import Session, build_session
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.model import ModelError, ModelRequest, ModelResponse, Usage
from memagent.agent.model.scripted import ScriptedModel
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView

RULES = "# Rules\n- Use bullet points.\n"
SKILL = ("---\nname: meeting-notes\ndescription: Summarise meeting notes into bullets.\n---\n"
         "# Meeting notes\n1. Read the notes.\n")
APPROVE = "Approve? [y]es"


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlStore]:
    s = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    s.create_agent("a", {"/AGENTS.md": RULES})
    yield s
    s.close()


@dataclass
class Run:
    session: Session
    out: str
    err: str
    code: int


def chat(store: SqlStore, model: Any, lines: list[str], *, yolo: bool = False,
         thread_id: str | None = None) -> Run:
    stdin = io.StringIO("".join(line + "\n" for line in lines))
    out, err = io.StringIO(), io.StringIO()
    ui = PlainUI(stdin, out, err)
    view = AgentView(store, "a", user="tester")
    session = build_session(view, model, ui, threads=ThreadStore(store.engine),
                            thread_id=thread_id, yolo=yolo)
    code = session.run()
    return Run(session, out.getvalue(), err.getvalue(), code)


def user_texts(model: ScriptedModel, index: int = -1) -> list[str]:
    found = []
    for message in model.requests[index]["messages"]:
        if message["role"] == "user":
            found += [b["text"] for b in message["content"] if b.get("type") == "text"]
    return found


def read(store: SqlStore, path: str) -> str:
    return AgentView(store, "a").read(path).content


def revisions(store: SqlStore, path: str) -> list[tuple[int, str, str]]:
    return [(r.version, r.author, r.approval) for r in AgentView(store, "a").history(path)]


# -- the table -----------------------------------------------------------------------------


def test_help_lists_every_command_with_its_help(sqlite_store: SqlStore) -> None:
    run = chat(sqlite_store, ScriptedModel(), ["/help"])
    expected = {"/remember", "/compact", "/memory", "/history", "/undo", "/yolo", "/threads",
                "/new", "/tools", "/agents", "/help", "/exit", "/context", "/retry"}
    assert expected <= set(slash.COMMANDS)
    for cmd in slash.COMMANDS.values():
        assert cmd.help and "\n" not in cmd.help
        assert f"{cmd.name} {cmd.args}".strip() in run.out and cmd.help in run.out


def test_unknown_command_suggests_help(sqlite_store: SqlStore) -> None:
    run = chat(sqlite_store, ScriptedModel(), ["/frobnicate now"])
    assert run.err == "memagent: unknown command /frobnicate; type /help to see the commands\n"
    assert run.code == 0


def test_exit_stops_reading(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()  # empty: any model call would fail the test
    run = chat(sqlite_store, model, ["/exit", "hello"])
    assert run.code == 0 and model.requests == []
    assert "hello" not in run.out


def test_chat_defaults_match_the_core() -> None:
    from memagent.agent.cli import chat as cli_chat
    from memagent.agent.loop import DEFAULT_MAX_STEPS
    from memagent.agent.model import DEFAULT_MODEL

    assert cli_chat.MAX_STEPS_DEFAULT == DEFAULT_MAX_STEPS
    assert cli_chat.MODEL_DEFAULT == DEFAULT_MODEL


# -- /memory and /history ----------------------------------------------------------------------


def test_memory_tree_and_one_file(sqlite_store: SqlStore) -> None:
    view = AgentView(sqlite_store, "a")
    view.write("/skills/meeting-notes.md", SKILL)
    view.write("/knowledge/people/ann.md", "Ann likes tea\n")

    run = chat(sqlite_store, ScriptedModel(),
               ["/memory", "/memory /skills/meeting-notes.md", "/memory /knowledge", "/memory /nope"])

    assert "/  (3 files, " in run.out
    assert "├── AGENTS.md  (29 B)" in run.out
    assert "├── knowledge/\n│   └── people/\n│       └── ann.md  (14 B)" in run.out
    assert "└── skills/\n    └── meeting-notes.md" in run.out
    assert f"--- /skills/meeting-notes.md ---\n{SKILL}---" in run.out
    assert "/knowledge/  (1 file, 14 B)\n└── people/\n    └── ann.md  (14 B)" in run.out
    assert "nothing in memory at /nope" in run.err


def test_memory_of_an_empty_file(sqlite_store: SqlStore) -> None:
    AgentView(sqlite_store, "a").write("/AGENTS.md", "")
    run = chat(sqlite_store, ScriptedModel(), ["/memory /AGENTS.md"])
    assert "/AGENTS.md is empty (version 2)." in run.out


def test_memory_tree_of_the_tree_function() -> None:
    tree = slash.memory_tree([("/a.md", 10), ("/d/b.md", 2048), ("/d/e/c.md", 1)])
    assert tree == ("/  (3 files, 2.0 KiB)\n"
                    "├── a.md  (10 B)\n"
                    "└── d/\n"
                    "    ├── b.md  (2.0 KiB)\n"
                    "    └── e/\n"
                    "        └── c.md  (1 B)")


def test_history_of_a_path_and_of_the_session(store: SqlStore) -> None:
    AgentView(store, "a").write("/AGENTS.md", RULES)
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "bullet",
                                         "new_string": "short bullet"})
    model.enqueue_tool_use("write_file", {"file_path": "/skills/meeting-notes.md",
                                          "content": SKILL})
    model.enqueue_text("Done.")

    run = chat(store, model, ["/history", "shorter please", "y", "a", "/history",
                              "/history /AGENTS.md"])

    assert "No memory changes in this session yet." in run.out
    session_log = run.out.split("/history\n")[2]
    lines = session_log.splitlines()
    assert lines[0].split() == ["path", "version", "date", "author", "approval", "size", "origin", "reason"]
    assert lines[1].split()[:2] == ["/skills/meeting-notes.md", "v1"] and lines[1].split()[5:7] == ["agent", "human"]
    assert lines[2].split()[:2] == ["/AGENTS.md", "v2"] and " chat " in lines[2] and "turn 1" in lines[2]
    path_log = run.out.split("/history /AGENTS.md\n")[1].splitlines()
    assert path_log[0] == "/AGENTS.md"
    assert path_log[1].startswith("version") and path_log[2].startswith("v2") and path_log[3].startswith("v1")


# -- /undo ---------------------------------------------------------------------------------------


def test_undo_reverts_an_edit_as_user_human(store: SqlStore) -> None:
    AgentView(store, "a").write("/AGENTS.md", RULES)
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "bullet",
                                         "new_string": "short bullet"})
    model.enqueue_text("Edited.")

    run = chat(store, model, ["be brief", "y", "/undo", "/undo", "/history"])

    assert read(store, "/AGENTS.md") == RULES
    assert revisions(store, "/AGENTS.md") == [(3, "user", "human"), (2, "agent", "human"),
                                               (1, "cli", "cli")]
    assert "Undone: /AGENTS.md is back to version 1 (recorded as version 3)." in run.out
    assert "Nothing to undo" in run.out
    history = run.out.split("/history\n")[1].splitlines()
    assert history[1].split()[:2] == ["/AGENTS.md", "v3"] and history[2].split()[:2] == ["/AGENTS.md", "v2"]


def test_undo_deletes_a_created_file_and_walks_back(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/skills/meeting-notes.md",
                                          "content": SKILL})
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "bullet",
                                         "new_string": "short bullet"})
    model.enqueue_text("Both done.")

    run = chat(sqlite_store, model, ["learn", "a", "/undo", "/undo"])

    view = AgentView(sqlite_store, "a")
    assert "removed /skills/meeting-notes.md, which that edit created" in run.out
    assert not view.exists("/skills/meeting-notes.md")
    assert view.history("/skills/meeting-notes.md")[0].deleted
    assert read(sqlite_store, "/AGENTS.md") == RULES
    assert run.session.log.undoable == []


def test_undo_refuses_when_the_file_changed_since(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "bullet",
                                         "new_string": "short bullet"})

    def meanwhile(request: dict[str, Any]) -> ModelResponse:
        # Someone else writes the file after the agent's edit.
        AgentView(sqlite_store, "a").write("/AGENTS.md", "# Other\n", author="cli",
                                             approval="cli")
        return model.text_response("Done.")

    model.enqueue_callable(meanwhile)
    run = chat(sqlite_store, model, ["edit", "y", "/undo"])

    assert "changed after that edit (it is now version 3)" in run.err
    assert read(sqlite_store, "/AGENTS.md") == "# Other\n"


# -- approvals, /yolo ------------------------------------------------------------------------------


def test_yolo_toggles_the_gate_and_the_prompt(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "bullet",
                                         "new_string": "short bullet"})
    model.enqueue_text("Edited.")
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "short",
                                         "new_string": "very short"})
    model.enqueue_text("Edited again.")

    run = chat(sqlite_store, model, ["/yolo", "one", "/yolo", "two", "y"])

    assert "a (yolo)> one" in run.out
    assert "a> two" in run.out
    assert run.out.count(APPROVE) == 1
    assert [r[2] for r in revisions(sqlite_store, "/AGENTS.md")] == ["human", "yolo", "cli"]


def test_yolo_off_ends_an_earlier_always(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "bullet",
                                         "new_string": "short bullet"})
    model.enqueue_text("ok")
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "short",
                                         "new_string": "tiny"})
    model.enqueue_text("ok")

    run = chat(sqlite_store, model, ["one", "a", "/yolo", "/yolo", "two", "n"])

    assert run.out.count(APPROVE) == 2
    assert "short bullet" in read(sqlite_store, "/AGENTS.md")


def test_unclear_answer_asks_again_and_feedback_reaches_the_model(sqlite_store: SqlStore
                                                                  ) -> None:
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "# New\n"})
    model.enqueue_text("Understood.")

    run = chat(sqlite_store, model, ["rewrite", "perhaps", "yes please", "n: keep my rules"])

    assert run.out.count("Please answer y, n, n: <feedback>, or a.") == 2
    result = model.requests[-1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "keep my rules" in result["content"]
    assert read(sqlite_store, "/AGENTS.md") == RULES


def test_eof_during_approval_ends_without_another_model_call(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "# New\n"})

    run = chat(sqlite_store, model, ["rewrite"])

    assert run.code == 0 and run.session.ui.closed
    assert len(model.requests) == 1
    assert read(sqlite_store, "/AGENTS.md") == RULES
    assert run.session.agent.messages[-1]["content"][0]["is_error"] is True


# -- threads ---------------------------------------------------------------------------------------


def test_new_starts_a_fresh_thread_and_threads_lists_them(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_text("first answer")
    model.enqueue_text("second answer")

    run = chat(sqlite_store, model, ["first question", "/new", "second question", "/threads"])

    assert user_texts(model, -1) == ["second question"]
    listing = run.out.split("/threads\n")[1].splitlines()
    assert listing[0].startswith("* ") and listing[0].endswith("2 messages  second question")
    assert listing[1].startswith("  ") and listing[1].endswith("2 messages  first question")
    assert "UTC" in listing[0]
    ids = [t.id[:8] for t in ThreadStore(sqlite_store.engine).list("a")]
    assert [line[2:].split()[0] for line in listing[:2]] == ids


def test_new_forgets_what_the_model_read(sqlite_store: SqlStore) -> None:
    AgentView(sqlite_store, "a").write("/knowledge/a.md", "alpha\n")
    model = ScriptedModel()
    model.enqueue_tool_use("read_file", {"file_path": "/knowledge/a.md"})
    model.enqueue_text("read it")
    model.enqueue_tool_use("write_file", {"file_path": "/knowledge/a.md", "content": "beta\n"})
    model.enqueue_text("could not")

    chat(sqlite_store, model, ["read a", "/new", "overwrite a"])

    result = model.requests[-1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "have not read it" in result["content"]


def test_resuming_a_thread_by_id(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_text("hello Kim")
    first = chat(sqlite_store, model, ["I am Kim"])
    model.enqueue_text("you are Kim")
    chat(sqlite_store, model, ["who am I?"], thread_id=first.session.agent.thread_id)
    assert user_texts(model) == ["I am Kim", "who am I?"]


# -- /remember and /compact -----------------------------------------------------------------------


def test_remember_sends_the_prompt_and_hint_through_the_gate(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_text("Here is a summary.")
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md",
                                         "old_string": "- Use bullet points.\n",
                                         "new_string": "- Use bullet points.\n- Be brief.\n"})
    model.enqueue_text("Saved: be brief.")

    run = chat(sqlite_store, model, ["summarise this", "/remember the brevity thing", "y"])

    sent = user_texts(model)[-1]
    # What the person typed, then the built-in prompt (people are shown only the first).
    assert sent.startswith("/remember the brevity thing\n\n<built-in-prompt>\n" + slash.prompt_text("remember"))
    assert sent.endswith("The user adds this hint about what to remember: the brevity thing\n</built-in-prompt>")
    assert "AGENTS.md" in sent and "skill" in sent
    assert APPROVE in run.out
    assert read(sqlite_store, "/AGENTS.md").endswith("- Be brief.\n")


def test_compact_sends_its_prompt(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_text("Nothing to compact.")

    chat(sqlite_store, model, ["/compact"])

    sent = user_texts(model)[-1]
    assert sent == f"/compact\n\n<built-in-prompt>\n{slash.prompt_text('compact')}\n</built-in-prompt>"
    for needle in ("duplicate", "general rule", "skill", "Read before you write"):
        assert needle in sent


# -- turns: errors, interruptions, non-streamed text -------------------------------------------------


def test_model_error_is_one_line_and_the_session_goes_on(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()

    def fail(request: dict[str, Any]) -> ModelResponse:
        raise ModelError("the model API is overloaded (529); try again in a minute")

    model.enqueue_callable(fail)
    model.enqueue_text("now it works")

    run = chat(sqlite_store, model, ["first", "second"])

    # Scripted (stdin not a terminal): no "/retry" hint a pipe cannot type, and the session,
    # which went on, exits 1 so the script sees the failed turn (issue 43, item 8).
    assert run.err == "memagent: the model API is overloaded (529); try again in a minute\n"
    assert "now it works" in run.out
    assert run.code == 1
    # The failed message is not glued to the next one (it is kept in the thread, marked failed).
    assert user_texts(model) == ["second"]


def test_a_failed_turn_answered_by_retry_leaves_a_script_green(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()

    def fail(request: dict[str, Any]) -> ModelResponse:
        raise ModelError("the model API is overloaded (529); try again in a minute")

    model.enqueue_callable(fail)
    model.enqueue_text("answered on retry")
    run = chat(sqlite_store, model, ["first", "/retry"])
    assert "answered on retry" in run.out and run.code == 0


def test_ctrl_c_during_a_turn_keeps_the_thread(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_tool_use("read_file", {"file_path": "/AGENTS.md"})

    def interrupt(request: dict[str, Any]) -> ModelResponse:
        raise KeyboardInterrupt

    model.enqueue_callable(interrupt)
    model.enqueue_text("continuing")

    run = chat(sqlite_store, model, ["look", "go on"])

    assert "[interrupted; the conversation is kept, type to go on]" in run.out
    assert "continuing" in run.out
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert user_texts(model) == ["look", "go on"]


class _InterruptOnce(io.StringIO):
    """stdin whose first read is a Ctrl-C, as at the prompt."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.fired = False

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return super().readline()


def test_ctrl_c_at_the_prompt_asks_again(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_text("hi")
    out, err = io.StringIO(), io.StringIO()
    ui = PlainUI(_InterruptOnce("hello\n"), out, err)
    session = build_session(AgentView(sqlite_store, "a"), model, ui,
                            threads=ThreadStore(sqlite_store.engine))
    assert session.run() == 0
    assert user_texts(model) == ["hello"]


class _Unstreamed:
    """A model that never calls on_text, like AnthropicModel(stream=False)."""

    name = "unstreamed"

    def respond(self, request: ModelRequest, **callbacks: Any) -> ModelResponse:
        return ModelResponse([{"type": "text", "text": "whole answer"}], "end_turn",
                             Usage(10, 2), self.name)


def test_unstreamed_answers_are_shown(sqlite_store: SqlStore) -> None:
    run = chat(sqlite_store, _Unstreamed(), ["hello"])
    assert "a> hello\nwhole answer\n[10 tokens in · 2 out · cost unknown]\n" in run.out


def test_step_limit_note_is_shown(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    for _ in range(2):
        model.enqueue_tool_use("ls", {})
    stdin = io.StringIO("go\n")
    out = io.StringIO()
    ui = PlainUI(stdin, out, io.StringIO())
    session = build_session(AgentView(sqlite_store, "a"), model, ui,
                            threads=ThreadStore(sqlite_store.engine), max_steps=2)
    session.run()
    assert "[[stopped after 2 tool steps in one turn; say 'continue'" in out.getvalue()
    assert "* ls()" in out.getvalue() and "-> AGENTS.md  (29 B)" in out.getvalue()


# -- one change log: subagents' edits --------------------------------------------------------


SCRIBE = ("---\nname: scribe\ndescription: Writes notes. Use to file a note.\n"
          "tools: [read_file, write_file]\n---\nYou write notes under /knowledge/.\n")


def test_a_subagents_edit_shows_in_history_and_undo_takes_it_back(sqlite_store: SqlStore) -> None:
    AgentView(sqlite_store, "a").write("/subagents/scribe.md", SCRIBE, author="cli", approval="cli")
    model = ScriptedModel()
    model.enqueue_tool_use("task", {"subagent": "scribe", "description": "File: Bob likes chess."})
    model.enqueue_tool_use("write_file", {"file_path": "/knowledge/bob.md", "content": "Bob likes chess.\n"})
    model.enqueue_text("Filed.")  # the subagent's answer
    model.enqueue_text("Done.")  # the agent's answer

    run = chat(sqlite_store, model, ["remember that Bob likes chess", "y", "/history", "/undo", "/history"])

    history_before_undo = run.out.split("/history", 2)[1]
    assert "/knowledge/bob.md" in history_before_undo and "subagent" in history_before_undo
    assert "Undone: removed /knowledge/bob.md, which that edit created" in run.out
    view = AgentView(sqlite_store, "a")
    assert not view.exists("/knowledge/bob.md")
    assert [(r.author, r.approval) for r in view.history("/knowledge/bob.md")] == [
        ("user", "human"), ("subagent", "human")]
    assert run.session.log.undoable == []
    assert [c.path for c in run.session.log.made] == ["/knowledge/bob.md", "/knowledge/bob.md"]


def test_context_of_a_new_thread_says_it_has_no_messages(sqlite_store: SqlStore) -> None:
    run = chat(sqlite_store, ScriptedModel(), ["/context"])
    assert "The thread has no messages yet" in run.out
    assert "all 0 messages" not in run.out


def test_context_counts_the_threads_messages(sqlite_store: SqlStore) -> None:
    model = ScriptedModel()
    model.enqueue_text("hello")
    run = chat(sqlite_store, model, ["hi", "/context"])
    assert "The thread keeps all 2 messages" in run.out  # the question and the answer
