"""The chat screens of issue #29 telling the truth: a subagent's answer once and as its
own, ``/help`` naming ``# note`` and ``@path``, ``/threads`` marking a new thread,
``/edit`` showing its diff (through a pseudo-terminal, the real ``memagent chat`` and
the fake Messages API); what the person typed in the recap and the conversation
file for ``# note``, ``/remember`` and ``/compact``, and a thread folded under a small
budget unfolded when resumed under a large one (the REPL in process, the scripted model).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.chat.session import Session, build_session
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.cli import config
from memagent.agent.context import SUMMARY_OPEN
from memagent.agent.model import ModelResponse
from memagent.agent.model.scripted import ScriptedModel
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT
from tests.pty_helpers import Screen
from tests.pty_helpers import terminal_env as pty_terminal_env

pexpect = pytest.importorskip("pexpect")
if sys.platform == "win32":  # pragma: no cover
    pytest.skip("needs a POSIX pseudo-terminal", allow_module_level=True)

CHECKER = """---
name: checker
description: Checks a claim against memory. Use to verify a statement.
---
You check claims and answer in two lines.
"""


@pytest.fixture(autouse=True)
def terminal_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pty_terminal_env(monkeypatch, tmp_path)


@pytest.fixture
def store() -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": "# Rules\n- Be brief.\n"})
    yield s
    s.close()


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


def start(api: FakeMessagesAPI, *, columns: int = 80, env: dict[str, str] | None = None) -> Screen:
    full = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url, **(env or {})}
    child = pexpect.spawn(MEMAGENT, ["chat", "bot"], env=full, dimensions=(50, columns),
                          encoding="utf-8", timeout=30)
    return Screen(child)


# -- through a pseudo-terminal ---------------------------------------------------------------


def test_a_subagents_answer_is_shown_once_as_its_own(api: FakeMessagesAPI, store: SqlStore) -> None:
    store.write("agent:bot", "/subagents/checker.md", CHECKER)
    api.enqueue_tool_use("task", {"subagent": "checker", "description": "Is the sky green?"})
    api.enqueue_text("VERDICT-1: the claim is false.\nVERDICT-2: nothing in memory says so.")
    api.enqueue_text("MAIN-ANSWER: the checker says no.")
    screen = start(api)
    pos = screen.wait_for("bot>")
    screen.type("check: the sky is green")
    pos = screen.wait_for("⏺ task(checker", after=pos)
    pos = screen.wait_for("⎿  subagent checker answered:", after=pos)
    pos = screen.wait_for("MAIN-ANSWER: the checker says no.", after=pos)
    pos = screen.wait_for("bot>", after=pos)
    text = screen.text
    # Once, indented under its label; never streamed as the main agent's words.
    assert text.count("VERDICT-1: the claim is false.") == 1
    assert text.count("VERDICT-2: nothing in memory says so.") == 1
    label = text.index("subagent checker answered:")
    assert label < text.index("     VERDICT-1: the claim is false.") < text.index("MAIN-ANSWER")
    screen.child.sendeof()
    assert screen.finish() == 0


def test_help_threads_and_edit_tell_the_truth(api: FakeMessagesAPI, store: SqlStore, tmp_path: Path) -> None:
    api.enqueue_text("Hello.")
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf -- "- Added by hand.\\n" >> "$1"\n')
    editor.chmod(0o755)
    screen = start(api, env={"EDITOR": str(editor)})
    pos = screen.wait_for("bot>")

    screen.type("/help")
    pos = screen.wait_for("# NOTE", after=pos)
    pos = screen.wait_for("a line starting with # is a note for memory", after=pos)
    pos = screen.wait_for("@PATH", after=pos)
    pos = screen.wait_for("attaches that memory file", after=pos)
    pos = screen.wait_for("bot>", after=pos)

    # A new thread has no id yet; the list still says which line is this thread.
    screen.type("/threads")
    pos = screen.wait_for("No threads yet.", after=pos)
    pos = screen.wait_for("bot>", after=pos)
    screen.type("hi")
    pos = screen.wait_for("Hello.", after=pos)
    pos = screen.wait_for("bot>", after=pos)
    screen.type("/threads")
    pos = screen.wait_for("Switch with /resume ID", after=pos)
    listing = screen.text[screen.text.rindex("/threads"):pos]
    assert [ln for ln in listing.splitlines() if ln.startswith("* ")], listing
    pos = screen.wait_for("bot>", after=pos)

    screen.type("/edit /AGENTS.md")
    pos = screen.wait_for("+- Added by hand.", after=pos)
    pos = screen.wait_for("Saved /AGENTS.md (now version 2)", after=pos)
    screen.wait_for("bot>", after=pos)
    screen.child.sendeof()
    assert screen.finish() == 0


def test_threads_marks_a_new_thread_among_older_ones(store: SqlStore) -> None:
    first = chat(store, _model_with("ok"), ["hello"])
    run = chat(store, _model_with(), ["/threads"])
    lines = run.out.splitlines()
    assert any(ln.startswith("* (new)") for ln in lines), run.out
    old = first.session.agent.thread_id or ""
    assert any(ln.startswith(f"  {old[:8]}") for ln in lines), run.out


# -- the REPL in process ------------------------------------------------------------------------


class Run:
    def __init__(self, session: Session, out: str, err: str) -> None:
        self.session, self.out, self.err = session, out, err


def _model_with(*answers: str) -> ScriptedModel:
    model = ScriptedModel()
    for answer in answers:
        model.enqueue_text(answer)
    return model


def chat(store: SqlStore, model: ScriptedModel, lines: list[str], *, thread_id: str | None = None,
         budget: int | None = None, resume: bool = False) -> Run:
    stdout, stderr = io.StringIO(), io.StringIO()
    ui = PlainUI(io.StringIO("".join(line + "\n" for line in lines)), stdout, stderr)
    session = build_session(AgentView(store, "bot", user="tester"), model, ui,
                            threads=ThreadStore(store.engine), thread_id=thread_id, context_budget=budget)
    if resume:
        session.show_recap()
    session.run()
    return Run(session, stdout.getvalue(), stderr.getvalue())


def test_recap_and_conversation_file_show_what_was_typed(store: SqlStore) -> None:
    model = _model_with("Noted the quokka.", "Remembered.", "Compacted.")
    first = chat(store, model, ["# the quokka lives on Rottnest", "/remember the quokka bit", "/compact"])
    # The model still got the built-in prompts, after what the person typed.
    sent = [m["content"][0]["text"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert sent[0].startswith("# the quokka lives on Rottnest\n\n<built-in-prompt>\n")
    assert sent[1].startswith("/remember the quokka bit\n\n<built-in-prompt>\n")
    assert sent[2].startswith("/compact\n\n<built-in-prompt>\n")

    tid = first.session.agent.thread_id or ""
    again = chat(store, _model_with(), [], thread_id=tid, resume=True)
    for typed in ("you: # the quokka lives on Rottnest", "you: /remember the quokka bit", "you: /compact"):
        assert typed in again.out, again.out
    assert "built-in-prompt" not in again.out and "Look back over this conversation" not in again.out

    path = ThreadStore(store.engine).conversation_file(tid)
    assert path is not None
    conversation = AgentView(store, "bot", user="tester").read("/conversations" + path).content
    for typed in ("# the quokka lives on Rottnest", "/remember the quokka bit", "/compact"):
        assert typed in conversation
    assert "built-in-prompt" not in conversation and "Look back over this conversation" not in conversation


SUMMARISER = "You keep the running summary"


def _answers(model: ScriptedModel, n: int) -> None:
    def respond(request: dict[str, Any]) -> ModelResponse:
        if any(SUMMARISER in b.get("text", "") for b in request["system"]):
            return model.text_response("- the talk was about points")
        return model.text_response("ok")

    for _ in range(n):
        model.enqueue_callable(respond)


def test_a_thread_folded_under_a_small_budget_unfolds_when_resumed_under_a_large_one(store: SqlStore) -> None:
    small = ScriptedModel()
    _answers(small, 60)
    turns = ["Point zero: the first thing said."] + [f"Point {i}. " + "detail " * 120 for i in range(1, 12)]
    first = chat(store, small, turns, budget=4_000)
    assert first.session.agent.context.folding.folded > 0, "the small budget folded the thread"
    tid = first.session.agent.thread_id or ""

    # Resumed under 100k tokens: /context shows the whole thread, and the next request
    # sends it whole, the first turn included, without a summary.
    large = ScriptedModel()
    _answers(large, 4)
    looked = chat(store, large, ["/context"], thread_id=tid, budget=100_000)
    assert "0 earlier messages folded" in looked.out, looked.out
    going = chat(store, large, ["and now?"], thread_id=tid, budget=100_000)
    assert "back in full" in going.out + going.err
    head = large.requests[-1]["messages"][0]["content"][0]["text"]
    assert not head.startswith(SUMMARY_OPEN) and head == "Point zero: the first thing said."


def test_the_unfolding_line_is_shown_even_when_context_was_looked_at_first(store: SqlStore) -> None:
    # /context undid the folding silently, so the next request in the same session
    # never said the earlier messages were back in full.
    small = ScriptedModel()
    _answers(small, 60)
    turns = ["Point zero: the first thing said."] + [f"Point {i}. " + "detail " * 120 for i in range(1, 12)]
    first = chat(store, small, turns, budget=4_000)
    assert first.session.agent.context.folding.folded > 0
    large = ScriptedModel()
    _answers(large, 4)
    both = chat(store, large, ["/context", "and now?"], thread_id=first.session.agent.thread_id or "",
                budget=100_000)
    shown_text = both.out + both.err
    assert "0 earlier messages folded" in shown_text
    assert shown_text.count("back in full") == 1
    assert shown_text.index("back in full") > shown_text.index("0 earlier messages folded")


def test_a_long_tool_result_line_wraps_under_its_marker_at_80_columns(api: FakeMessagesAPI,
                                                                      store: SqlStore) -> None:
    # An MCP result (one line of JSON, up to 100 characters) wrapped flush left at 80 columns.
    store.write("agent:bot", "/notes/wide.md", "WIDE-START " + "alpha beta gamma delta " * 6 + "WIDE-END\n")
    api.enqueue_tool_use("grep", {"pattern": "WIDE-START", "output_mode": "content"})
    api.enqueue_text("DONE-ANSWER")
    screen = start(api)
    pos = screen.wait_for("bot>")
    screen.type("find the wide line")
    pos = screen.wait_for("⎿  /notes/wide.md:1:WIDE-START", after=pos)
    screen.wait_for("DONE-ANSWER", after=pos)
    rows = [row.rstrip() for row in screen.text[pos:].replace("\r", "").split("\n")]
    continuation = rows[1]
    assert "⎿" not in continuation and continuation.startswith("     ") and continuation.strip(), rows[:3]
