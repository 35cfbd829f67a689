"""``memagent chat`` end to end: the installed command in a subprocess, fed through stdin,
talking through the real anthropic SDK to ``FakeMessagesAPI`` over HTTP.

stdin is a pipe here, so the session uses the plain UI: turns and approval answers
are read line by line.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.render import render_log
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import err, out, run

RULE = "- Use bullet points when you summarise.\n"
AGENTS_WITH_RULE = "# Preferences\n" + RULE
APPROVE = "Approve? [y]es / [n]o / n: feedback / [a]lways"


pytestmark = pytest.mark.usefixtures("chat_env")


@pytest.fixture
def store() -> Iterator[SqlStore]:
    """The database the subprocesses use, opened in the test process for set-up and
    checks (a subprocess per check would cost seconds)."""
    s = open_store(config.db_url())
    yield s
    s.close()


@pytest.fixture
def bot(store: SqlStore) -> str:
    store.create_agent("bot", {"/AGENTS.md": ""})
    return "bot"


def chat(api: FakeMessagesAPI, *args: str, stdin: str = "", stream: bool = True,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url,
            "MEMAGENT_STREAM": "1" if stream else "0", **(env or {})}
    return run("chat", *args, stdin=stdin, env=full)


def content(store: SqlStore, path: str) -> str:
    """What `memagent fs cat PATH -a bot` prints, read in this process (tests/test_cli_fs.py
    runs that command; here it would only add a `memagent` process per check)."""
    return AgentView(store, "bot").read(path).content


def revisions(store: SqlStore, path: str) -> list[tuple[int, str, str]]:
    """(version, author, approval), newest first."""
    return [(r.version, r.author, r.approval) for r in AgentView(store, "bot").history(path)]


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or []
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def texts(body: dict[str, Any]) -> list[str]:
    """Every text the request's messages carry, in order (user and assistant)."""
    found = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        found += [b["text"] for b in blocks if b.get("type") == "text"]
    return found


# -- (1) a correction becomes a rule, and a new thread carries it -------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain-json"])
def test_correction_is_remembered_in_a_new_thread(api: FakeMessagesAPI, store: SqlStore,
                                                  bot: str, stream: bool) -> None:
    api.enqueue_text("Summary: the launch moved to May and Ann owns the budget.")
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": AGENTS_WITH_RULE},
                         text="Understood. I'll keep that as a standing rule.")
    api.enqueue_text("Done: from now on my summaries use bullet points.")

    p = chat(api, "bot", stream=stream,
             stdin="Summarise: launch moved to May, Ann owns budget\n"
                   "use bullet points when you summarise\ny\n")

    assert p.returncode == 0, err(p)
    screen = out(p)
    assert "Summary: the launch moved to May" in screen
    assert "* write_file(/AGENTS.md)" in screen
    assert "+" + RULE.strip() in screen  # the diff was shown
    assert APPROVE in screen
    assert "Wrote /AGENTS.md (now version 2)" in screen
    assert "Done: from now on my summaries use bullet points." in screen
    assert all(bool(r.get("stream")) is stream for r in api.requests)
    # The edit is in effect for the very next request of the same turn.
    assert RULE.strip() in system_text(api.requests[2])
    assert content(store, "/AGENTS.md") == AGENTS_WITH_RULE
    assert revisions(store, "/AGENTS.md")[0] == (2, "agent", "human")

    # A second session: a new thread whose first request carries the rule.
    api.enqueue_text("- launch in May\n- Ann: budget")
    p = chat(api, "bot", stream=stream, stdin="Summarise the launch notes again\n")
    assert p.returncode == 0, err(p)
    first = api.requests[-1]
    assert texts(first) == ["Summarise the launch notes again"]
    assert RULE.strip() in system_text(first)
    assert "- Ann: budget" in out(p)


# -- (2) rejection with feedback ----------------------------------------------------------


def test_rejection_with_feedback_reaches_the_model(api: FakeMessagesAPI, store: SqlStore,
                                                  bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": AGENTS_WITH_RULE})
    api.enqueue_text("Fine, I left memory alone.")

    p = chat(api, "bot", stdin="use bullet points\nn: say it shorter\n")

    assert p.returncode == 0, err(p)
    [result] = tool_results(api.requests[-1])
    assert result["is_error"] is True
    assert "say it shorter" in result["content"] and "rejected" in result["content"]
    assert "-> error: The user rejected this change" in out(p)
    assert content(store, "/AGENTS.md") == ""
    assert len(revisions(store, "/AGENTS.md")) == 1


# -- (3) an invalid skill never reaches the gate or the store ----------------------------


def test_invalid_skill_is_an_error_result_and_nothing_is_stored(api: FakeMessagesAPI,
                                                               store: SqlStore,
                                                               bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/skills/meeting-notes.md",
                                        "content": "# Meeting notes\nUse bullets.\n"})
    api.enqueue_text("The skill needs frontmatter; I'll fix that next time.")

    p = chat(api, "bot", stdin="save a meeting-notes skill\n")

    assert p.returncode == 0, err(p)
    assert APPROVE not in out(p)  # validation comes before the gate
    [result] = tool_results(api.requests[-1])
    assert result["is_error"] is True
    assert "frontmatter" in result["content"]
    assert "/skills/meeting-notes.md" in result["content"]
    assert AgentView(store, "bot").glob("*") == ["/AGENTS.md"]


# -- (4) yolo ---------------------------------------------------------------------------


def test_yolo_applies_without_asking_and_records_yolo(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": AGENTS_WITH_RULE})
    api.enqueue_text("Saved.")

    p = chat(api, "bot", "--yolo", stdin="use bullet points\n")

    assert p.returncode == 0, err(p)
    assert APPROVE not in out(p)
    assert "bot (yolo)> use bullet points" in out(p)
    assert content(store, "/AGENTS.md") == AGENTS_WITH_RULE
    log = render_log(AgentView(store, "bot").history("/AGENTS.md")).splitlines()  # what `fs log` prints
    assert log[1].split()[4:6] == ["agent", "yolo"]


# -- (5) /undo --------------------------------------------------------------------------


def test_undo_reverts_the_last_edit(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": AGENTS_WITH_RULE})
    api.enqueue_text("Saved.")

    p = chat(api, "bot", stdin="use bullet points\ny\n/undo\n")

    assert p.returncode == 0, err(p)
    assert "Undone: /AGENTS.md is back to version 1" in out(p)
    assert content(store, "/AGENTS.md") == ""
    assert revisions(store, "/AGENTS.md") == [(3, "user", "human"), (2, "agent", "human"),
                                               (1, "cli", "cli")]


# -- (6) --resume and --thread ----------------------------------------------------------


def test_resume_continues_the_last_thread(api: FakeMessagesAPI, bot: str) -> None:
    api.enqueue_text("Nice to meet you, Kim.")
    assert chat(api, "bot", stdin="my name is Kim\n").returncode == 0

    api.enqueue_text("You are Kim.")
    p = chat(api, "bot", "--resume", stdin="what is my name?\n")

    assert p.returncode == 0, err(p)
    assert "resumed (2 messages: my name is Kim)" in out(p)
    assert texts(api.requests[-1]) == ["my name is Kim", "Nice to meet you, Kim.",
                                       "what is my name?"]


def test_thread_option_picks_a_thread_by_id_prefix(api: FakeMessagesAPI, store: SqlStore,
                                                   bot: str) -> None:
    api.enqueue_text("first answer")
    api.enqueue_text("second answer")
    assert chat(api, "bot", stdin="first\n").returncode == 0
    assert chat(api, "bot", stdin="second\n").returncode == 0
    first = ThreadStore(store.engine).list("bot")[-1]
    assert first.title == "first"

    api.enqueue_text("back in the first thread")
    p = chat(api, "bot", "--thread", first.id[:8], stdin="again\n")

    assert p.returncode == 0, err(p)
    assert texts(api.requests[-1]) == ["first", "first answer", "again"]


def test_thread_and_resume_together_is_a_usage_error(api: FakeMessagesAPI, bot: str) -> None:
    p = chat(api, "bot", "--thread", "abc", "--resume")
    assert p.returncode == 2
    assert "--thread and --resume cannot be used together" in err(p)


def test_unknown_thread_is_one_line(api: FakeMessagesAPI, bot: str) -> None:
    p = chat(api, "bot", "--thread", "nope")
    assert p.returncode == 1
    assert len(err(p).splitlines()) == 1 and "no thread" in err(p)


# -- (7) no API key, no agent -----------------------------------------------------------


def test_no_api_key_says_how_to_set_one(bot: str) -> None:
    p = run("chat", "bot", stdin="hello\n")
    assert p.returncode == 1
    assert len(err(p).splitlines()) == 1
    assert "export ANTHROPIC_API_KEY=" in err(p)
    assert "Traceback" not in err(p)


def test_unknown_agent_suggests_init(api: FakeMessagesAPI) -> None:
    p = chat(api, "ghost", stdin="hello\n")
    assert p.returncode == 1
    assert len(err(p).splitlines()) == 1 and "memagent init ghost" in err(p)


def test_agent_defaults_to_the_configured_name(api: FakeMessagesAPI, store: SqlStore) -> None:
    store.create_agent("envbot", {"/AGENTS.md": ""})
    api.enqueue_text("hi")
    p = chat(api, stdin="hello\n", env={"MEMAGENT_AGENT": "envbot"})
    assert p.returncode == 0, err(p)
    assert "agent envbot" in out(p)


# -- (8) end of input ---------------------------------------------------------------------


def test_eof_at_the_prompt_exits_zero(api: FakeMessagesAPI, bot: str) -> None:
    p = chat(api, "bot", stdin="")
    assert p.returncode == 0, err(p)
    assert "bot> " in out(p)
    assert api.requests == []


def test_eof_during_approval_rejects_and_ends(api: FakeMessagesAPI, store: SqlStore,
                                             bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": AGENTS_WITH_RULE})

    p = chat(api, "bot", stdin="use bullet points\n")

    assert p.returncode == 0, err(p)
    assert "the change is not applied and the session ends" in out(p)
    assert len(api.requests) == 1  # no model call after the person has gone
    assert content(store, "/AGENTS.md") == ""
    # The thread stays valid: the tool call got its (error) result.
    api.enqueue_text("ok")
    assert chat(api, "bot", "--resume", stdin="hello\n").returncode == 0
    resumed = api.requests[-1]["messages"]
    assert [m["role"] for m in resumed] == ["user", "assistant", "user"]
    assert resumed[-1]["content"][0]["is_error"] is True


# -- (9) retries and model errors ---------------------------------------------------------


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain-json"])
def test_overloaded_is_retried_with_a_visible_note(api: FakeMessagesAPI, bot: str,
                                                   stream: bool) -> None:
    api.enqueue_error(529, "overloaded_error", "Overloaded")
    api.enqueue_text("Here I am after all.")

    p = chat(api, "bot", stdin="hello\n", stream=stream)

    assert p.returncode == 0, err(p)
    assert "overloaded (529), retrying" in err(p)
    assert "Here I am after all." in out(p)
    assert len(api.requests) == 2


def test_model_error_is_one_line_and_the_session_goes_on(api: FakeMessagesAPI,
                                                        bot: str) -> None:
    api.enqueue_error(400, "invalid_request_error", "messages: something is off")
    api.enqueue_text("Second try worked.")

    p = chat(api, "bot", stdin="first\nsecond\n")

    # The session went on; piped, it exits 1 because a turn went unanswered (issue 43, item 8).
    assert p.returncode == 1, err(p)
    assert err(p).count("\n") == 1 and "rejected the request (400)" in err(p)
    assert "Second try worked." in out(p)
    # The failed turn's message is not glued to the next one: sent once, kept out after.
    assert [m["role"] for m in api.requests[-1]["messages"]] == ["user"]
    assert texts(api.requests[-1]) == ["second"]


def test_usage_line_after_each_turn(api: FakeMessagesAPI, bot: str) -> None:
    api.enqueue_text("one")
    api.enqueue_text("two")
    p = chat(api, "bot", stdin="a\nb\n")
    lines = [ln for ln in out(p).splitlines() if "tokens in" in ln]
    assert len(lines) == 2
    assert lines[1].startswith("[") and "cached" in lines[1] and "$" in lines[1]


def test_plain_output_has_no_escape_codes(api: FakeMessagesAPI, bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": AGENTS_WITH_RULE})
    api.enqueue_text("**Saved.**")
    p = chat(api, "bot", stdin="x\ny\n/memory\n/help\n", env={"NO_COLOR": "", "TERM": "xterm"})
    assert p.returncode == 0, err(p)
    assert "\x1b" not in out(p) + err(p)


def test_slash_commands_through_the_subprocess(api: FakeMessagesAPI, bot: str) -> None:
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "",
                                       "new_string": "x"})
    api.enqueue_text("I could not edit an empty file.")
    remember = "reflect on this conversation"
    p = chat(api, "bot", stdin="/remember keep it short\n/yolo\n/threads\n/nonsense\n/exit\nhi\n")

    assert p.returncode == 0, err(p)
    sent = texts(api.requests[0])[0]
    assert remember in sent.lower() or "look back over this conversation" in sent.lower()
    assert sent.startswith("/remember keep it short\n\n<built-in-prompt>\n")  # what the person typed first
    assert sent.endswith("keep it short\n</built-in-prompt>")
    assert "yolo on" in out(p)
    # Plurals right: "2 messages", never "1 messages" (issue 15 spells the word out).
    assert "1 messages" not in out(p) and " messages  " in out(p)
    assert "unknown command /nonsense; type /help" in err(p)
    assert len(api.requests) == 2  # nothing after /exit
    assert json.dumps(api.requests[0]["tools"]).count("edit_file") == 1


def test_model_option_and_environment(api: FakeMessagesAPI, bot: str) -> None:
    api.enqueue_text("a")
    api.enqueue_text("b")
    p = chat(api, "bot", "--model", "claude-option", stdin="x\n",
             env={"MEMAGENT_MODEL": "claude-env"})
    assert p.returncode == 0, err(p)
    assert "model claude-option" in out(p) and api.requests[-1]["model"] == "claude-option"
    p = chat(api, "bot", stdin="x\n", env={"MEMAGENT_MODEL": "claude-env"})
    assert api.requests[-1]["model"] == "claude-env"
    assert "cost unknown" in out(p)  # an unpriced model is never guessed at
