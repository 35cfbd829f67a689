"""``memagent chat`` in a real pseudo-terminal (pexpect), as a new user starts it.

Checks what the screen shows: the prompt, the spinner, the answer streaming in, a
coloured diff panel, the approval keys, the yolo prompt, Ctrl-C and Ctrl-D. The
output is read raw and compared with escape sequences stripped (and, where colour
is the point, raw).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.vfs import SqlStore, open_store
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT
from tests.pty_helpers import Screen
from tests.pty_helpers import terminal_env as pty_terminal_env

pexpect = pytest.importorskip("pexpect")
if sys.platform == "win32":  # pragma: no cover
    pytest.skip("needs a POSIX pseudo-terminal", allow_module_level=True)

RULE = "- Use bullet points when you summarise."
APPROVE = "Approve? [y]es / [n]o / n: feedback / [a]lways"


@pytest.fixture(autouse=True)
def terminal_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pty_terminal_env(monkeypatch, tmp_path)


@pytest.fixture
def store() -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": ""})
    yield s
    s.close()


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    # A pause between stream events so streaming can be seen happening.
    with FakeMessagesAPI(event_delay=0.15) as server:
        yield server


def start(api: FakeMessagesAPI, *args: str) -> Screen:
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}
    child = pexpect.spawn(MEMAGENT, ["chat", "bot", *args], env=env, dimensions=(40, 120),
                          encoding="utf-8", timeout=30)
    return Screen(child)


def test_a_new_user_session(api: FakeMessagesAPI, store: SqlStore) -> None:
    answer = ("Here is the summary: the launch moved to May, Ann owns the budget and "
              "the team meets weekly.")
    api.enqueue_text(answer)
    api.enqueue_tool_use("write_file",
                         {"file_path": "/AGENTS.md", "content": f"# Preferences\n{RULE}\n"},
                         text="Understood, I'll keep that as a rule.")
    api.enqueue_text("Saved. From now on:\n\n- bullet points\n- in every summary")
    screen = start(api)

    pos = screen.wait_for("memagent · agent bot · model claude-sonnet-5-5 · new thread")
    pos = screen.wait_for("bot>", after=pos)
    screen.type("Summarise: launch moved to May, Ann owns budget, weekly meetings")
    pos = screen.wait_for("thinking…", after=pos)
    # Streaming: the first words are on screen before the last ones have arrived.
    pos = screen.wait_for("Here is", after=pos)
    assert "meets weekly." not in screen.text[pos:]
    pos = screen.wait_for("meets weekly.", after=pos)
    pos = screen.wait_for("tokens in · ", after=pos)
    pos = screen.wait_for("bot>", after=pos)

    screen.type("use bullet points when you summarise")
    pos = screen.wait_for("⏺ write_file(/AGENTS.md)", after=pos)
    pos = screen.wait_for("╭─ overwrite /AGENTS.md", after=pos)
    panel_start = len(screen.raw)
    pos = screen.wait_for("│ +" + RULE, after=pos)
    pos = screen.wait_for(APPROVE, after=pos)
    # The added line is green in the panel.
    assert "\x1b[32m+" + RULE in screen.raw[panel_start - 2000:]

    screen.type("perhaps")
    pos = screen.wait_for("Please answer y, n, n: <feedback>, or a.", after=pos)
    pos = screen.wait_for(APPROVE, after=pos)
    screen.type("y")
    pos = screen.wait_for("✓ approved", after=pos)
    pos = screen.wait_for("⎿  Wrote /AGENTS.md (now version 2).", after=pos)
    pos = screen.wait_for("• bullet points", after=pos)  # Markdown list rendered
    pos = screen.wait_for("bot>", after=pos)

    screen.type("/yolo")
    pos = screen.wait_for("yolo on", after=pos)
    pos = screen.wait_for("bot (yolo)>", after=pos)
    screen.child.sendeof()
    assert screen.finish() == 0
    assert AgentView(store, "bot").read("/AGENTS.md").content == f"# Preferences\n{RULE}\n"


def test_reject_with_feedback_keys(api: FakeMessagesAPI, store: SqlStore) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": f"{RULE}\n"})
    api.enqueue_text("Fine.")
    screen = start(api)

    pos = screen.wait_for("bot>")
    screen.type("use bullet points")
    pos = screen.wait_for(APPROVE, after=pos)
    screen.type("n: say it shorter")
    pos = screen.wait_for("✗ rejected: say it shorter", after=pos)
    pos = screen.wait_for("The user rejected this change to /AGENTS.md", after=pos)
    pos = screen.wait_for("bot>", after=pos)
    screen.child.sendeof()
    assert screen.finish() == 0

    result = api.requests[-1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "say it shorter" in result["content"]
    assert AgentView(store, "bot").read("/AGENTS.md").content == ""


class _HeldEvents(list[Any]):
    """A stream's events that stop after the first piece of text until ``release`` is set."""

    def __init__(self, events: list[Any], release: threading.Event) -> None:
        super().__init__(events)
        self.release = release

    def __iter__(self) -> Iterator[Any]:
        for name, data in list.__iter__(self):
            yield name, data
            if data.get("delta", {}).get("type") == "text_delta" and not self.release.is_set():
                self.release.wait(60)  # a bound so a broken test ends; it is set long before


class HeldAPI(FakeMessagesAPI):
    """The first answer holds its stream after its first text until the test says so:
    the turn is certainly still running when Ctrl-C comes, however busy the machine."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self._held = False

    def _events(self, body: dict[str, Any], item: Any) -> list[Any]:
        events = super()._events(body, item)
        if self._held:
            return events
        self._held = True
        return _HeldEvents(events, self.release)


def test_ctrl_c_stops_a_turn_and_clears_a_line(store: SqlStore) -> None:
    with HeldAPI() as api:
        api.enqueue_text("one two three four five six seven eight nine ten eleven twelve")
        api.enqueue_text("Going on.")
        screen = start(api)

        pos = screen.wait_for("bot>")
        screen.type("count slowly")
        pos = screen.wait_for("one two", after=pos)  # the stream holds here
        screen.child.sendintr()
        pos = screen.wait_for("interrupted; the conversation is kept", after=pos)
        api.release.set()  # the held stream may end now (its client is gone)
        pos = screen.wait_for("bot>", after=pos)

        screen.child.send("half a thought")
        pos = screen.wait_for("half a thought", after=pos)
        screen.child.sendintr()  # at the prompt: drops the line, asks again
        pos = screen.wait_for("half a thought", after=pos)  # the line's last redraw
        pos = screen.wait_for("bot>", after=pos)
        screen.type("go on")
        pos = screen.wait_for("Going on.", after=pos)
        screen.child.sendeof()
        assert screen.finish() == 0

    # The interrupted answer is kept, marked; the dropped line was never sent.
    last = api.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user"]
    assert last[1]["content"][0]["text"].endswith("[interrupted by the user]")
    assert last[1]["content"][0]["text"].startswith("one two")
    assert [b["text"] for b in last[2]["content"]] == ["go on"]


def test_slash_completion_and_memory_tree(api: FakeMessagesAPI, store: SqlStore) -> None:
    screen = start(api)
    pos = screen.wait_for("bot>")
    screen.child.send("/me")
    pos = screen.wait_for("show the memory tree with sizes", after=pos)  # completion menu
    screen.child.send("\t")
    screen.child.send("\r")
    pos = screen.wait_for("└── AGENTS.md  (0 B)", after=pos)
    screen.type("/bogus")
    pos = screen.wait_for("unknown command /bogus; type /help", after=pos)
    screen.child.sendeof()
    assert screen.finish() == 0
    assert api.requests == []
    history = (config.data_dir() / "chat_history").read_text()
    assert "/memory" in history and "/bogus" in history


def test_ctrl_d_sent_as_a_command_ends_still_quits(api: FakeMessagesAPI, store: SqlStore) -> None:
    """Ctrl-D that arrives between a command's end and the next prompt (the terminal in
    cooked mode) still quits: it used to become an end-of-file mark that the prompt
    read as a NUL byte, and the session stayed."""
    import termios

    caught, tries = 0, 0
    while caught < 2 and tries < 12:  # the window is short: try until it is hit twice
        tries += 1
        screen = start(api)
        screen.wait_for("bot>")
        screen.child.send("/bogus\r")
        # The pty's master reports the terminal's modes: send Ctrl-D the moment the
        # chat is in cooked mode between the command and the next prompt.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if termios.tcgetattr(screen.child.child_fd)[3] & termios.ICANON:
                caught += 1
                break
        screen.child.sendeof()
        assert screen.finish() == 0
    assert caught  # the window was hit (else the test proves nothing)
    assert api.requests == []


def test_retry_note_is_visible(api: FakeMessagesAPI, store: SqlStore) -> None:
    api.enqueue_error(529, "overloaded_error", "Overloaded")
    api.enqueue_text("Made it.")
    screen = start(api)
    pos = screen.wait_for("bot>")
    screen.type("hello")
    pos = screen.wait_for("↻ model API overloaded (529), retrying in", after=pos)
    pos = screen.wait_for("Made it.", after=pos)
    screen.child.sendeof()
    assert screen.finish() == 0
