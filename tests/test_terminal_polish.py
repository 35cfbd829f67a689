"""Issue 15, "the terminal a person lives in", through the real ``memagent`` command:
undo that stacks, nothing applied out of sight, editing by hand, ``@path``, choosing
an agent, resuming a thread, read-only commands that create nothing, and the CLI's
exit statuses. Chats run over stdin (plain UI) against ``FakeMessagesAPI``; one case
runs in a pseudo-terminal (pexpect)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, err, out, run

APPROVE = "Approve? [y]es / [n]o / n: feedback / [a]lways"


pytestmark = pytest.mark.usefixtures("chat_env")


@pytest.fixture
def store() -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    yield s
    s.engine.dispose()


@pytest.fixture
def bot(store: SqlStore) -> str:
    store.create_agent("bot", {"/AGENTS.md": ""})
    return "bot"


def chat(api: FakeMessagesAPI, *args: str, stdin: str = "",
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url, **(env or {})}
    return run("chat", *args, stdin=stdin, env=full)


def content(store: SqlStore, path: str, agent: str = "bot") -> str:
    return AgentView(store, agent).read(path).content


def revisions(store: SqlStore, path: str) -> list[tuple[int, str, str]]:
    return [(r.version, r.author, r.approval) for r in AgentView(store, "bot").history(path)]


def tool_result_text(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    blocks = messages[-1]["content"]
    return "".join(str(b.get("content", "")) for b in blocks if b.get("type") == "tool_result")


def three_edits(api: FakeMessagesAPI) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "- one\n"})
    api.enqueue_text("noted one")
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- one\n",
                                       "new_string": "- one\n- two\n"})
    api.enqueue_text("noted two")
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- two\n",
                                       "new_string": "- two\n- three\n"})
    api.enqueue_text("noted three")


# -- undo that stacks --------------------------------------------------------------------


def test_undo_three_times_in_a_row_then_redo_and_diff(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    three_edits(api)
    p = chat(api, "bot", stdin="one\ny\ntwo\ny\nthree\ny\n/diff\n/undo\n/undo\n/undo\n/undo\n"
                               "/redo\n/diff /AGENTS.md\n")
    assert p.returncode == 0, err(p)
    screen = out(p)
    # /diff: the session's net change, before the first edit -> after the last.
    diff_at = screen.index("bot> /diff\n")
    assert "+- one\n+- two\n+- three\n" in screen[diff_at:]
    assert screen.count("Undone:") == 3
    assert "Nothing to undo; /redo re-applies what was undone." in screen
    assert "Redone:" in screen
    assert "cannot undo" not in err(p)
    assert content(store, "/AGENTS.md") == "- one\n"
    revs = revisions(store, "/AGENTS.md")
    # 1 init, 2-4 the agent's edits, 5-7 three undos, 8 the redo: all kept, newest first.
    assert [v for v, _, _ in revs] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert all(r[1:] == ("user", "human") for r in revs[:4])
    assert AgentView(store, "bot").revision_content("/AGENTS.md", 7) == ""


def test_undo_n_and_redo_n(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    three_edits(api)
    p = chat(api, "bot", stdin="one\na\ntwo\nthree\n/undo 2\n/redo 5\n/undo x\n")
    assert p.returncode == 0, err(p)
    screen = out(p)
    assert screen.count("Undone:") == 2 and screen.count("Redone:") == 2
    assert "Nothing more to redo." in screen
    assert "/undo takes a number of edits" in err(p)
    assert content(store, "/AGENTS.md") == "- one\n- two\n- three\n"


def test_undo_refuses_when_someone_else_changed_the_file(api: FakeMessagesAPI, store: SqlStore,
                                                         bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "- mine\n"})

    def meanwhile(body: dict[str, object]) -> str:
        AgentView(store, "bot").write("/AGENTS.md", "- theirs\n", author="cli", approval="cli")
        return "done"

    api.enqueue_callable(meanwhile)
    p = chat(api, "bot", stdin="remember\ny\n/undo\n")
    assert p.returncode == 0, err(p)
    assert "cannot undo: /AGENTS.md changed after that edit (it is now version 3" in err(p)
    assert content(store, "/AGENTS.md") == "- theirs\n"


# -- nothing applied out of sight ------------------------------------------------------------


def test_after_always_each_edit_prints_a_compact_diff(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    long_text = "".join(f"- line {i}\n" for i in range(30))
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "- first\n"})
    api.enqueue_text("ok")
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- first\n",
                                       "new_string": "- first\n- first\n"})
    api.enqueue_text("ok")
    api.enqueue_tool_use("write_file", {"file_path": "/notes/long.md", "content": long_text})
    api.enqueue_text("ok")
    p = chat(api, "bot", stdin="one\na\ntwo\nthree\n")
    assert p.returncode == 0, err(p)
    screen = out(p)
    assert screen.count(APPROVE) == 1  # asked once, then "always"
    assert "bot (auto)> two" in screen
    # The duplicate line does not go in unseen.
    assert "~ changed /AGENTS.md (version 3, +1 -0), applied without asking\n    +- first\n" in screen
    # A long change is folded past 12 lines, with a count of the rest.
    assert "~ created /notes/long.md (version 1, +30 -0), applied without asking" in screen
    assert "+- line 11\n" in screen and "+- line 12\n" not in screen
    assert "… 18 more changed lines (/diff /notes/long.md shows them all)" in screen


def test_yolo_edits_print_a_compact_diff(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "- yolo rule\n"})
    api.enqueue_text("ok")
    p = chat(api, "bot", "--yolo", stdin="go\n")
    assert p.returncode == 0, err(p)
    assert "bot (yolo)> go" in out(p)
    assert "~ changed /AGENTS.md (version 2, +1 -0), applied without asking\n    +- yolo rule\n" in out(p)


def test_a_write_that_changes_nothing_is_neither_asked_nor_stored(api: FakeMessagesAPI, store: SqlStore,
                                                                  bot: str) -> None:
    store.write("agent:bot", "/notes/a.md", "same\n")
    api.enqueue_tool_use("read_file", {"file_path": "/notes/a.md"})
    api.enqueue_tool_use("write_file", {"file_path": "/notes/a.md", "content": "same\n"})
    api.enqueue_tool_use("edit_file", {"file_path": "/notes/a.md", "old_string": "same", "new_string": "same"})
    api.enqueue_text("nothing to do")
    p = chat(api, "bot", stdin="rewrite it\n")
    assert p.returncode == 0, err(p)
    assert APPROVE not in out(p)
    assert [v for v, _, _ in revisions(store, "/notes/a.md")] == [1]
    assert "No change: /notes/a.md already has exactly that content" in tool_result_text(api.requests[2])
    assert "No change" in tool_result_text(api.requests[3])


# -- hand edits --------------------------------------------------------------------------------


def editor_script(tmp_path: Path, *texts: str) -> str:
    """An $EDITOR that writes ``texts[i]`` on its i-th run (then the last one again)."""
    counter = tmp_path / "editor-runs"
    script = tmp_path / "editor.py"
    script.write_text(
        "import sys, pathlib\n"
        f"texts = {list(texts)!r}\n"
        f"counter = pathlib.Path({str(counter)!r})\n"
        "n = int(counter.read_text()) if counter.exists() else 0\n"
        "counter.write_text(str(n + 1))\n"
        "pathlib.Path(sys.argv[1]).write_text(texts[min(n, len(texts) - 1)])\n")
    wrapper = tmp_path / "editor"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


VALID_SKILL = "---\nname: notes\ndescription: Take notes in bullets. Use for meetings.\n---\n# Notes\n"
INVALID_SKILL = "---\nname: Not Valid\n---\nbody\n"


def test_slash_edit_stores_valid_text_and_refuses_invalid(api: FakeMessagesAPI, store: SqlStore, bot: str,
                                                          tmp_path: Path) -> None:
    editor = editor_script(tmp_path, "- edited by hand\n", INVALID_SKILL, INVALID_SKILL, VALID_SKILL)
    p = chat(api, "bot", stdin="/edit /AGENTS.md\n/edit /skills/notes.md\ne\ne\n/history /AGENTS.md\n",
             env={"EDITOR": editor})
    assert p.returncode == 0, err(p)
    assert "Saved /AGENTS.md (now version 2); /undo takes it back." in out(p)
    assert content(store, "/AGENTS.md") == "- edited by hand\n"
    assert revisions(store, "/AGENTS.md")[0] == (2, "user", "human")
    # The invalid text was shown with its problem, re-opened twice, then the valid one stored.
    assert err(p).count("/skills/notes.md was not saved") == 2
    assert "[e]dit again or [d]iscard?" in out(p)
    assert content(store, "/skills/notes.md") == VALID_SKILL


def test_slash_edit_invalid_then_discard_changes_nothing(api: FakeMessagesAPI, store: SqlStore, bot: str,
                                                         tmp_path: Path) -> None:
    store.write("agent:bot", "/skills/notes.md", VALID_SKILL)
    editor = editor_script(tmp_path, INVALID_SKILL)
    p = chat(api, "bot", stdin="/edit skills/notes.md\nd\n", env={"EDITOR": editor})
    assert p.returncode == 0, err(p)
    assert "Discarded; /skills/notes.md is unchanged" in out(p)
    assert content(store, "/skills/notes.md") == VALID_SKILL
    assert len(revisions(store, "/skills/notes.md")) == 1


def test_fs_edit_without_strings_opens_the_editor(store: SqlStore, bot: str, tmp_path: Path) -> None:
    p = run("fs", "edit", "/AGENTS.md", "-a", "bot", env={"EDITOR": editor_script(tmp_path, "- by hand\n")})
    assert p.returncode == 0, err(p)
    assert out(p) == "edited /AGENTS.md (version 2)\n"
    assert content(store, "/AGENTS.md") == "- by hand\n"
    other = tmp_path / "second"
    other.mkdir()
    bad = run("fs", "edit", "/skills/x.md", "-a", "bot", env={"EDITOR": editor_script(other, INVALID_SKILL)})
    assert bad.returncode == 1 and "was not saved" in err(bad) and "your text is in" in err(bad)
    assert not AgentView(store, "bot").exists("/skills/x.md")
    half = run("fs", "edit", "/AGENTS.md", "only-old", "-a", "bot")
    assert half.returncode == 2


def test_edit_without_editor_or_terminal_starts_nothing(api: FakeMessagesAPI, store: SqlStore,
                                                        bot: str) -> None:
    # vi on a pipe drew its screen into the output and read the rest of the input.
    p = chat(api, "bot", stdin="/edit /AGENTS.md\n/memory\n")
    assert p.returncode == 0 and "\x1b" not in out(p) + err(p)
    assert "memagent: EDITOR is not set and this is no terminal for vi" in err(p)
    assert "AGENTS.md" in out(p).split("/edit /AGENTS.md", 1)[1]  # the next line was still read
    fs = run("fs", "edit", "/AGENTS.md", "-a", "bot", stdin="")
    assert fs.returncode == 1 and err(fs).count("\n") == 1 and "set it (e.g. `export EDITOR=nano`)" in err(fs)
    assert len(revisions(store, "/AGENTS.md")) == 1


def test_at_path_attaches_the_file(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    store.write("agent:bot", "/notes/plan.md", "- ship in May\n")
    api.enqueue_text("The plan is to ship in May.")
    p = chat(api, "bot", stdin="what does @notes/plan.md say? and @/missing.md, mail ann@example.com\n")
    assert p.returncode == 0, err(p)
    assert "attached /notes/plan.md (version 1, 14 B)" in out(p)
    assert "@/missing.md: no such memory file" in out(p)
    sent = api.requests[0]["messages"][0]["content"][0]["text"]
    assert sent.startswith("what does @notes/plan.md say?")
    assert '<memory path="/notes/plan.md"' in sent and "- ship in May" in sent
    assert sent.count("<memory ") == 1


# -- choosing an agent, threads ----------------------------------------------------------------


def test_use_sets_the_current_agent_and_options_still_win(store: SqlStore) -> None:
    store.create_agent("alpha", {"/AGENTS.md": "alpha\n"})
    assert run("fs", "cat", "/AGENTS.md").stdout == b"alpha\n"  # the only agent
    store.create_agent("beta", {"/AGENTS.md": "beta\n"})
    p = run("fs", "cat", "/AGENTS.md")
    assert p.returncode == 1 and "memagent use AGENT" in err(p)
    p = run("use", "beta")
    assert p.returncode == 0 and "beta" in out(p), err(p)
    assert (Path(os.environ["MEMAGENT_HOME"]) / "current_agent").read_text().strip() == "beta"
    assert run("fs", "cat", "/AGENTS.md").stdout == b"beta\n"
    assert run("-a", "alpha", "fs", "cat", "/AGENTS.md").stdout == b"alpha\n"
    assert run("fs", "cat", "/AGENTS.md", "-a", "alpha").stdout == b"alpha\n"
    assert run("fs", "cat", "/AGENTS.md", env={"MEMAGENT_AGENT": "alpha"}).stdout == b"alpha\n"
    assert out(run("use")).startswith("beta")
    assert run("use", "nobody").returncode == 1


def test_resume_id_switches_threads_and_shows_the_last_turns(api: FakeMessagesAPI, store: SqlStore,
                                                             bot: str) -> None:
    threads = ThreadStore(store.engine)
    old = threads.create("bot", "m")
    threads.append(old, {"role": "user", "content": [{"type": "text", "text": "plan the launch"}]})
    threads.append(old, {"role": "assistant", "content": [{"type": "text", "text": "Launch in May."}]})
    api.enqueue_text("Still May.")
    p = chat(api, "bot", stdin=f"/threads\n/resume {old[:6]}\nand the date?\n")
    assert p.returncode == 0, err(p)
    screen = out(p)
    assert "/resume ID, or later `memagent chat bot --thread ID`" in screen
    assert "2 messages" in screen
    assert f"Resumed thread {old[:8]}" in screen
    assert "you: plan the launch\nbot: Launch in May." in screen
    texts = [b["text"] for m in api.requests[0]["messages"] for b in m["content"] if b.get("type") == "text"]
    assert texts == ["plan the launch", "Launch in May.", "and the date?"]
    # --resume shows the last turns too.
    p = chat(api, "bot", "--resume", stdin="")
    assert "you: and the date?\nbot: Still May." in out(p)


# -- the CLI -------------------------------------------------------------------------------------


def test_read_only_commands_on_a_missing_database_create_nothing(tmp_path: Path) -> None:
    where = tmp_path / "not" / "here"
    url = f"sqlite:///{where / 'x.db'}"
    for args in (("agents",), ("fs", "cat", "/AGENTS.md"), ("fs", "ls"), ("fs", "grep", "x"),
                 ("use",), ("validate", "bot")):
        p = run("--db", url, *args)
        assert p.returncode == 1, (args, err(p))
        assert ("no database at" in err(p) or "no agent named 'bot'" in err(p)) and "memagent init" in err(p), \
            (args, err(p))
        assert not (tmp_path / "not").exists(), args
    p = run("agents")  # the default database in MEMAGENT_HOME
    assert p.returncode == 1 and not (Path(os.environ["MEMAGENT_HOME"]) / "memagent.db").exists()


def test_grep_and_glob_exit_1_with_nothing_on_stdout(store: SqlStore, bot: str) -> None:
    p = run("fs", "grep", "zebra", "-a", "bot")
    assert (p.returncode, out(p)) == (1, "")
    p = run("fs", "glob", "*.nothing", "-a", "bot")
    assert (p.returncode, out(p)) == (1, "")
    p = run("fs", "grep", "(", "-a", "bot")
    assert p.returncode == 2 and "-F" in err(p) and "fixed_strings" not in err(p)  # an error, not "no match"


def test_fs_write_refuses_empty_stdin_unless_allowed(store: SqlStore, bot: str) -> None:
    p = run("fs", "write", "/n.md", "-a", "bot", stdin="")
    assert p.returncode == 1 and "--allow-empty" in err(p)
    assert not AgentView(store, "bot").exists("/n.md")
    p = run("fs", "write", "/n.md", "-a", "bot", "--allow-empty", stdin="")
    assert p.returncode == 0, err(p)


def test_chat_names_a_missing_agent_before_a_missing_key(store: SqlStore, bot: str) -> None:
    p = run("chat", "nobody")
    assert p.returncode == 1 and "no agent named 'nobody'" in err(p)
    p = run("chat", "bot")
    assert p.returncode == 1 and "no API key" in err(p)


def test_help_quick_start_and_init_hint() -> None:
    assert "memagent chat myagent" in out(run("--help"))
    p = run("init", "fresh")
    hint = out(p).splitlines()[1]
    program = hint.split()[1]
    assert hint.startswith("next: ") and program.endswith("memagent")
    assert subprocess.run([program, "fs", "ls", "-a", "fresh"], capture_output=True).returncode == 0


# -- a real terminal ----------------------------------------------------------------------------


def test_terminal_prompt_shows_auto_and_newline_keys(api: FakeMessagesAPI, store: SqlStore, bot: str) -> None:
    pexpect = pytest.importorskip("pexpect")
    from tests.test_tty import Screen

    api.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "- a\n"})
    api.enqueue_text("ok")
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- a\n",
                                       "new_string": "- a\n- a\n"})
    api.enqueue_text("done")
    api.enqueue_text("two lines received")
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url,
           "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1"}
    child = pexpect.spawn(MEMAGENT, ["chat", "bot"], env=env, dimensions=(40, 120), encoding="utf-8",
                          timeout=30)
    screen = Screen(child)
    pos = screen.wait_for("Alt-Enter")
    pos = screen.wait_for("bot>", after=pos)
    screen.type("first")
    pos = screen.wait_for("Approve?", after=pos)
    screen.type("a")
    pos = screen.wait_for("(auto)", after=pos)
    screen.type("second")
    pos = screen.wait_for("applied without asking", after=pos)
    pos = screen.wait_for("+- a", after=pos)
    pos = screen.wait_for("(auto)", after=pos)
    child.send("line one")
    child.send("\x1b\r")  # Alt-Enter: a new line, not a send
    child.send("line two\r")
    screen.wait_for("two lines received", after=pos)
    child.sendeof()
    assert screen.finish() == 0
    last = api.requests[-1]["messages"][-1]["content"][0]["text"]
    assert last == "line one\nline two"
