"""Nothing from a file, a name or the model reaches the terminal raw (issue 23, part 4).

A model reply, a memory file and an archive entry name carrying ``ESC ]0;… BEL ESC
[2J`` (set the window title, clear the screen), U+009B (C1 CSI) or U+202E (right-to-
left override) come out escaped (``\\x1b``, ``\\u202e``): in a pty (the streamed
answer, the approval panel, ``fs cat``, the import's notes), through every ``fs``
listing, and in the rendered ``/conversations/`` files. Memory refuses such
characters at write, naming the character and the line; a file stored before that
rule (written here through a store without validators) is reported by ``memagent
validate``, and ``fs cat`` into a pipe gives its bytes back exactly.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.cli import config
from memagent.agent.tools import ApprovalRequest
from memagent.validators import validate
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import ValidationFailed
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from memagent.vfs.terminal_text import shown
from tests.cli_helpers import MEMAGENT, err, out, run
from tests.pty_helpers import Screen
from tests.pty_helpers import terminal_env as pty_terminal_env

pexpect = pytest.importorskip("pexpect")
if sys.platform == "win32":  # pragma: no cover
    pytest.skip("needs a POSIX pseudo-terminal", allow_module_level=True)

# Set the window title, then clear the screen.
HOSTILE = "\x1b]0;PWNED\x07\x1b[2J"
VISIBLE = "\\x1b]0;PWNED\\x07\\x1b[2J"
# What no output may contain: the start of either sequence, or a raw C1 CSI / RLO.
RAW = ("\x1b]0;PWNED", "\x1b[2J", "\x9b", "\u202e")


def assert_escaped(text: str) -> None:
    for raw in RAW:
        assert raw not in text, f"{raw!r} reached the output raw:\n{text[-1500:]!r}"


# -- the one escaping -----------------------------------------------------------------------


def test_shown_makes_every_active_character_visible() -> None:
    assert shown(HOSTILE) == VISIBLE
    assert shown("a\x9b2Jb\u202ec\u2066d\u200fe\u061cf\x7fg\x00") == \
        "a\\x9b2Jb\\u202ec\\u2066d\\u200fe\\u061cf\\x7fg\\x00"
    # Tab, newline and a CRLF line end draw nothing over anything; a lone CR would.
    assert shown("a\tb\r\nc\rd\n") == "a\tb\r\nc\\rd\n"
    assert shown("title\nwith\ttab", one_line=True) == "title\\nwith\\ttab"
    plain = "café ☕ [bold]not markup[/] עברית"
    assert shown(plain) is plain


# -- the validator ------------------------------------------------------------------------------


@pytest.mark.parametrize(("char", "name"), [("\x1b", "U+001B ESC"), ("\x07", "U+0007 BEL"),
                                            ("\x7f", "U+007F DEL"), ("\x9b", "U+009B CSI"),
                                            ("\x85", "U+0085 NEL"), ("\x0c", "U+000C FF")])
def test_memory_refuses_control_characters_naming_char_and_line(store: SqlStore, char: str,
                                                                   name: str) -> None:
    store.create_agent("v", {"/AGENTS.md": ""})
    view = AgentView(store, "v")
    with pytest.raises(ValidationFailed) as caught:
        view.write("/notes.md", f"first line\nsecond {char} line\n")
    message = str(caught.value)
    assert f"line 2: contains the control character {name}" in message
    assert char not in message
    assert not view.exists("/notes.md")  # a refused write stores nothing
    view.write("/ok.md", "tab\there\r\nCRLF and newline are text\n")
    assert view.read("/ok.md").version == 1


@pytest.mark.parametrize("path", ["/AGENTS.md", "/notes.md", "/skills/s/SKILL.md", "/skills/s.md",
                                  "/subagents/r.md", "/tools.json"])
def test_every_kind_of_file_refuses_them(path: str) -> None:
    problems = [str(p) for p in validate(path, f"x\n{HOSTILE}\n\x9b\n")]
    assert any(p.startswith("line 2: contains the control character U+001B ESC (4 control characters in all)")
               for p in problems), problems


def legacy_store() -> SqlStore:
    """The commands' store, opened without validators: memory written before the rule."""
    store = open_store(config.db_url())
    store.validator = lambda path, content: []
    return store


@pytest.fixture
def legacy() -> Iterator[SqlStore]:
    store = legacy_store()
    store.create_agent("bot", {"/AGENTS.md": ""})
    yield store
    store.close()


def test_fs_write_refuses_them_in_one_line(legacy: SqlStore) -> None:
    p = run("fs", "write", "/n.md", "--agent", "bot", stdin=f"ok\n{HOSTILE}\n")
    assert p.returncode == 1
    assert "line 2: contains the control character U+001B ESC" in err(p)
    assert "Traceback" not in err(p)
    assert_escaped(err(p))
    assert not AgentView(legacy, "bot").exists("/n.md")


def test_validate_reports_existing_memory_with_control_characters(legacy: SqlStore) -> None:
    AgentView(legacy, "bot").write("/old.md", f"fine\nstill fine\n{HOSTILE}\n")
    p = run("validate", "bot", env={"COLUMNS": "300"})
    assert p.returncode == 1
    assert "/old.md" in out(p) and "line 3" in out(p) and "U+001B ESC" in out(p)
    assert_escaped(out(p) + err(p))


# -- fs: escaped everywhere, cat byte for byte into a pipe -----------------------------------------


def test_fs_outputs_escape_and_cat_into_a_pipe_is_exact(legacy: SqlStore) -> None:
    view = AgentView(legacy, "bot")
    before = f"quokka notes {HOSTILE}\n"
    after = f"quokka notes {HOSTILE}\nmore \u202e and \x9b2J\n"
    view.write("/q.md", before)
    view.write("/q.md", after)

    cat = run("fs", "cat", "/q.md", "--agent", "bot")
    assert cat.returncode == 0 and cat.stdout == after.encode("utf-8")  # a pipe: the stored bytes

    for args in (("grep", "PWNED|2J"), ("search", "quokka"), ("diff", "/q.md", "--from", "1"),
                 ("blame", "/q.md"), ("log", "/q.md"), ("ls", "/")):
        p = run("fs", *args, "--agent", "bot")
        assert p.returncode == 0, (args, err(p))
        assert_escaped(out(p) + err(p))
        if args[0] in ("grep", "search", "diff", "blame"):
            assert VISIBLE in out(p) or "\\x9b2J" in out(p), (args, out(p))
    assert "+more \\u202e and \\x9b2J" in out(run("fs", "diff", "/q.md", "--from", "1", "--agent", "bot"))


# -- pty sessions -------------------------------------------------------------------------------------




@pytest.fixture
def terminal_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pty_terminal_env(monkeypatch, tmp_path)


def spawn(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Screen:
    child = pexpect.spawn(MEMAGENT, list(args), env={**os.environ, **(env or {})}, dimensions=(40, 160),
                          encoding="utf-8", timeout=30, cwd=str(cwd) if cwd else None)
    return Screen(child)


@pytest.mark.usefixtures("terminal_env")
def test_chat_streamed_answer_and_approval_panel_are_escaped(legacy: SqlStore) -> None:
    view = AgentView(legacy, "bot")
    view.write("/notes.md", f"title line {HOSTILE}\nsecond\n")
    with FakeMessagesAPI(event_delay=0.05) as api:
        api.enqueue_text(f"Here it comes: {HOSTILE} and \u202eevil\x9b2J, done.")
        # Memory refuses an edit that keeps the control characters, so the edit that can
        # reach the panel is the one taking them out: the old line shows in the diff.
        api.enqueue_tool_use("edit_file", {"file_path": "/notes.md", "old_string": f" {HOSTILE}",
                                           "new_string": ""})
        api.enqueue_text("Edited.")
        screen = spawn("chat", "bot", env={"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url})
        pos = screen.wait_for("bot>")
        screen.child.send("show me\r")
        pos = screen.wait_for("done.", after=pos)
        assert VISIBLE in screen.text and "\\u202eevil\\x9b2J" in screen.text
        pos = screen.wait_for("bot>", after=pos)

        screen.child.send("edit it\r")
        start = screen.wait_for("╭─ edit /notes.md", after=pos)
        pos = screen.wait_for("Approve?", after=start)
        # The removed line, inside the panel the person is approving.
        assert f"│ -title line {VISIBLE}" in screen.text[start:pos], screen.text[start:pos]
        screen.child.send("y\r")
        pos = screen.wait_for("Edited.", after=pos)
        screen.child.sendeof()
        assert screen.finish() == 0
    assert_escaped(screen.raw)
    assert view.read("/notes.md").content == "title line\nsecond\n"

    # The conversation file of that chat holds the reply escaped, as a person saw it.
    [entry] = view.ls("/conversations/")
    rendered = view.read(f"/conversations/{entry.name}").content
    assert VISIBLE in rendered and "\\u202eevil\\x9b2J" in rendered
    assert_escaped(rendered)


@pytest.mark.usefixtures("terminal_env")
def test_fs_cat_on_a_terminal_is_escaped(legacy: SqlStore) -> None:
    AgentView(legacy, "bot").write("/q.md", f"before {HOSTILE} after \u202e\x9b2J\n")
    screen = spawn("fs", "cat", "/q.md", "--agent", "bot")
    screen.wait_for("after")
    assert screen.finish() == 0
    assert f"before {VISIBLE} after \\u202e\\x9b2J" in screen.raw
    assert_escaped(screen.raw)


@pytest.mark.usefixtures("terminal_env")
def test_import_notes_and_preview_diff_escape_entry_names_and_content(legacy: SqlStore,
                                                                      tmp_path: Path) -> None:
    AgentView(legacy, "bot").write("/old.md", f"kept {HOSTILE}\n")
    src = tmp_path / "src"
    (src / "notes").mkdir(parents=True)
    (src / "AGENTS.md").write_text("")
    (src / "old.md").write_text("replaced\n")
    (src / "notes" / "\u202edm.txt.md").write_text("x\n")
    (src / "notes" / "a\x9b2J.md").write_text("y\n")
    screen = spawn("import", str(src), "--as", "bot", "--yes")
    screen.wait_for("imported")
    assert screen.finish() == 0
    assert "/notes/\\u202edm.txt.md: not imported" in screen.raw
    assert "/notes/a\\x9b2J.md: not imported" in screen.raw
    assert f"-kept {VISIBLE}" in screen.raw  # the preview's diff of the changed file
    assert_escaped(screen.raw)


# -- conversation files and the plain UI, in process --------------------------------------------


def test_conversation_files_render_titles_and_messages_escaped(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    tid = threads.create("a", "claude-test")
    threads.append(tid, {"role": "user", "content": [{"type": "text", "text": f"Look {HOSTILE} here"}]},
                   title=f"Look {HOSTILE}\nhere")
    threads.append(tid, {"role": "assistant", "content": [
        {"type": "text", "text": f"Seen \u202e{HOSTILE}"},
        {"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": HOSTILE}}]})
    view = AgentView(store, "a")
    [entry] = view.ls("/conversations/")
    assert entry.name.isascii() and entry.name.isprintable()
    text = view.read(f"/conversations/{entry.name}").content
    assert text.startswith(f"# Look {VISIBLE}\\nhere\n")
    assert f"Look {VISIBLE} here" in text and f"Seen \\u202e{VISIBLE}" in text
    assert 'grep(pattern="\\u001b]0;PWNED\\u0007\\u001b[2J")' in text  # JSON's own escape
    assert_escaped(text)
    assert "\x1b" not in text


def test_plain_ui_escapes_answers_and_the_approval_diff() -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    ui = PlainUI(io.StringIO("y\n"), stdout, stderr)
    ui.on_text(f"answer {HOSTILE}")
    ui.on_model_end()
    request = ApprovalRequest("edit", "/n.md", f"--- /n.md\n+++ /n.md\n@@ -1 +1 @@\n-old {HOSTILE}\n+new\n",
                              reason="because \u202e")
    assert ui.confirm(request).kind == "approve"
    ui.error("bad \x9b2J")
    shown_out = stdout.getvalue() + stderr.getvalue()
    assert f"answer {VISIBLE}" in shown_out and f"-old {VISIBLE}" in shown_out
    assert "reason: because \\u202e" in shown_out and "bad \\x9b2J" in shown_out
    assert_escaped(shown_out)
