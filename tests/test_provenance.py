"""Provenance: every revision says where it came from, `fs log` shows it, `fs blame` finds it per line.

Routes: a chat tool call (thread + turn, with the model's reason), a subagent, the
CLI, an import, a revert, agent creation, a reflection run; `# note` in chat and
`memagent remember` route a note through the agent and the gate.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.chat.session import Session, build_session
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.cli import config, templates
from memagent.agent.gate import Decision
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.reflection import reflect, review
from memagent.vfs import SqlStore, open_store
from memagent.vfs.errors import ValidationFailed
from memagent.vfs.records.queue import ProposalStore
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.render import render_blame, render_log
from memagent.vfs.scopes import AgentView
from memagent.vfs.types import Origin
from tests.cli_helpers import err, out, run

pytestmark = pytest.mark.usefixtures("chat_env")

AGENTS = "# Preferences\n- Be concise.\n"
SCRIBE = ("---\nname: scribe\ndescription: Writes notes. Use to file a note.\n"
          "tools: [read_file, write_file, search_memory]\n---\nYou write notes under /knowledge/.\n")


def chat(store: SqlStore, model: ScriptedModel, lines: list[str]) -> tuple[Session, str]:
    stdin = io.StringIO("".join(line + "\n" for line in lines))
    stdout, stderr = io.StringIO(), io.StringIO()
    view = AgentView(store, "a", user="tester")
    session = build_session(view, model, PlainUI(stdin, stdout, stderr), threads=ThreadStore(store.engine))
    assert session.run() == 0
    return session, stdout.getvalue()


def test_a_chat_tool_edit_records_thread_turn_and_reason(store: SqlStore) -> None:
    store.write("agent:a", "/AGENTS.md", AGENTS)
    model = ScriptedModel()
    model.enqueue_text("Hello.")
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- Be concise.\n",
                                         "new_string": "- Be concise.\n- Use bullets.\n",
                                         "reason": "the user asked\nfor bullets"})
    model.enqueue_text("Done.")

    session, shown = chat(store, model, ["hi", "use bullets from now on", "y"])

    assert "reason: the user asked for bullets" in shown  # the approval panel shows it, on one line
    rev = AgentView(store, "a").history("/AGENTS.md")[0]
    assert rev.message == "the user asked for bullets"
    assert rev.origin == Origin("chat", thread=session.agent.thread_id, turn=2)
    tool = next(d for d in model.requests[0]["tools"] if d["name"] == "edit_file")
    assert "reason" in tool["input_schema"]["properties"] and "reason" not in tool["input_schema"]["required"]
    assert "search_memory" in [d["name"] for d in model.requests[0]["tools"]]


def test_a_subagents_edit_names_the_subagent_and_the_turn(store: SqlStore) -> None:
    store.write("agent:a", "/subagents/scribe.md", SCRIBE)
    model = ScriptedModel()
    model.enqueue_tool_use("task", {"subagent": "scribe", "description": "File: Bob likes chess."})
    model.enqueue_tool_use("search_memory", {"query": "Bob"})
    model.enqueue_tool_use("write_file", {"file_path": "/knowledge/bob.md", "content": "Bob likes chess.\n"})
    model.enqueue_text("Filed.")
    model.enqueue_text("Done.")

    session, _ = chat(store, model, ["remember that Bob likes chess", "y"])

    rev = AgentView(store, "a").history("/knowledge/bob.md")[0]
    assert rev.author == "subagent"
    assert rev.origin == Origin("subagent", thread=session.agent.thread_id, turn=1, detail="scribe")
    assert rev.message == "create"


def test_a_secret_in_a_reason_is_refused_and_nothing_changes(store: SqlStore) -> None:
    store.write("agent:a", "/AGENTS.md", AGENTS)
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/knowledge/x.md", "content": "x\n",
                                          "reason": "token ghp_" + "a1B2" * 9})
    model.enqueue_text("Sorry.")
    _, shown = chat(store, model, ["note it"])  # refused before anyone is asked
    assert "Approve?" not in shown
    assert not AgentView(store, "a").exists("/knowledge/x.md")
    assert "revision message" in model.requests[1]["messages"][-1]["content"][0]["content"]


def test_import_init_revert_and_default_origins(store: SqlStore) -> None:
    store.create_agent("b", {"/AGENTS.md": AGENTS})
    view = AgentView(store, "b")
    assert view.history("/AGENTS.md")[0].origin == Origin("init")
    store.bulk_write("agent:b", {"/AGENTS.md": "imported\n", "/knowledge/k.md": "k\n"}, message="import from x")
    assert view.history("/knowledge/k.md")[0].origin == Origin("import")
    assert view.history("/AGENTS.md")[0].origin == Origin("import")
    change = view.revert("/AGENTS.md", 1)
    rev = view.history("/AGENTS.md")[0]
    assert (rev.version, rev.origin, rev.message) == (change.version, Origin("cli"), "revert to version 1")
    view.write("/x.md", "x\n", author="agent", approval="yolo", origin=Origin("mcp", detail="claude-desktop"))
    assert view.history("/x.md")[0].origin == Origin("mcp", detail="claude-desktop")
    view.move("/x.md", "/y.md", origin=Origin("cli", detail="mv"))
    assert view.history("/y.md")[0].origin == Origin("cli", detail="mv")
    assert view.history("/x.md")[0].origin == Origin("cli", detail="mv")


def test_blame_follows_lines_through_three_routes(store: SqlStore) -> None:
    view = AgentView(store, "a")
    view.write("/AGENTS.md", "# Rules\n- one\n- two\n")  # cli
    tid = ThreadStore(store.engine).create("a", "m")
    ThreadStore(store.engine).append(tid, {"role": "user", "content": [{"type": "text", "text": "be formal"}]})
    view.edit("/AGENTS.md", "- two\n", "- two, formally\n", author="agent", approval="human",
              origin=Origin("chat", thread=tid, turn=1), message="the user asked")
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- one\n",
                                         "new_string": "- one\n- three\n", "reason": "generalise"})
    model.enqueue_text("Done.")
    queue = ProposalStore(store.engine)
    run_id = reflect(view, model, queue).run_id
    review(view, queue, lambda request: Decision("approve"))

    three = view.blame("/AGENTS.md")

    assert [(b.text, b.version, b.author, b.origin.kind if b.origin else None) for b in three] == [
        ("# Rules", 1, "cli", "cli"), ("- one", 1, "cli", "cli"), ("- three", 3, "agent", "reflect"),
        ("- two, formally", 2, "agent", "chat")]
    assert three[3].origin == Origin("chat", thread=tid, turn=1) and three[3].message == "the user asked"
    assert three[2].origin is not None and three[2].origin.run == run_id
    view.delete("/AGENTS.md")
    view.revert("/AGENTS.md", 3)
    view.edit("/AGENTS.md", "# Rules\n", "# House rules\n")

    lines = view.blame("/AGENTS.md")

    assert [(b.text, b.version) for b in lines] == [
        ("# House rules", 6), ("- one", 5), ("- three", 5), ("- two, formally", 5)]
    view.revert("/AGENTS.md", 3)
    again = {b.text: b for b in view.blame("/AGENTS.md")}
    assert again["# Rules"].version == 7
    # Before the delete, each line belonged to its route:
    by_version = {r.version: r for r in view.history("/AGENTS.md")}
    assert by_version[1].origin == Origin("cli")
    assert by_version[2].origin == Origin("chat", thread=tid, turn=1)
    assert by_version[3].origin is not None and by_version[3].origin.kind == "reflect"
    assert by_version[3].origin.run == run_id
    text = render_blame(view.blame("/AGENTS.md"))
    assert text.splitlines()[0].split()[:6] == ["line", "version", "date", "author", "approval", "origin"]


def test_blame_without_edits_and_of_a_missing_file(store: SqlStore) -> None:
    view = AgentView(store, "a")
    view.write("/empty.md", "")
    assert view.blame("/empty.md") == []
    assert render_blame([]) == "(empty file)"
    from memagent.vfs.errors import NotFound

    with pytest.raises(NotFound):
        view.blame("/nope.md")


def test_old_revisions_without_provenance_show_a_dash(store: SqlStore) -> None:
    from sqlalchemy import update

    from memagent.vfs.models import revisions

    store.write("agent:a", "/old.md", "x\n")
    with store.engine.begin() as conn:
        conn.execute(update(revisions).values(origin=None))
    rev = AgentView(store, "a").history("/old.md")[0]
    assert rev.origin is None
    from memagent.vfs.render import render_log

    assert render_log([rev]).splitlines()[1].split()[8:] == ["-", "create"]


def test_reason_validation_on_the_message(store: SqlStore) -> None:
    with pytest.raises(ValidationFailed):
        store.write("agent:a", "/k.md", "k\n", message="token ghp_" + "a" * 36)


# -- through the command --------------------------------------------------------------------------------------


@pytest.fixture
def home() -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    yield s
    s.close()


def cat(store: SqlStore, path: str) -> str:
    """``path`` of agent bot as `memagent fs cat` prints it, read in this process: set-up and
    checks go through the library (a `memagent` process costs most of a second); the
    commands under test (chat, remember, fs write, fs log, fs blame) still run as processes."""
    return AgentView(store, "bot").read(path).content


def env(api: FakeMessagesAPI) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}


def test_fs_log_and_blame_through_the_command(api: FakeMessagesAPI, home: SqlStore) -> None:
    home.create_agent("bot", templates.files(templates.DEFAULT_TEMPLATE))  # what `memagent init bot` makes
    p = run("fs", "write", "/AGENTS.md", "-a", "bot", "-m", "start the rules", stdin="# Rules\n- one\n")
    assert p.returncode == 0, err(p)
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- one\n",
                                       "new_string": "- one\n- two\n", "reason": "add rule two"})
    api.enqueue_text("Added.")
    p = run("chat", "bot", stdin="add rule two\ny\n", env=env(api))
    assert p.returncode == 0, err(p)
    assert "reason: add rule two" in out(p)
    tid = ThreadStore(home.engine).latest("bot")
    assert tid is not None

    header, v3, v2, v1 = out(run("fs", "log", "/AGENTS.md", "-a", "bot")).splitlines()
    assert header.split() == ["version", "date", "author", "approval", "size", "origin", "reason"]
    assert v3.split()[:1] == ["v3"] and f"chat {tid[:8]} turn 1" in v3 and v3.endswith("add rule two")
    assert " agent " in v3 and " human " in v3
    assert v2.split()[0] == "v2" and " cli " in v2 and v2.endswith("start the rules")
    assert " init " in v1

    p = run("fs", "blame", "/AGENTS.md", "-a", "bot")
    assert p.returncode == 0, err(p)
    rows = out(p).splitlines()
    assert rows[1].split()[1] == "v2" and rows[1].endswith("| # Rules")
    assert rows[3].split()[1] == "v3" and f"chat {tid[:8]} turn 1" in rows[3] and rows[3].endswith("| - two")
    p = run("fs", "blame", "/missing.md", "-a", "bot")
    assert p.returncode == 1 and err(p).startswith("memagent: no file at /missing.md")


def test_hash_note_in_chat_and_remember_command(api: FakeMessagesAPI, home: SqlStore) -> None:
    home.create_agent("bot", {"/AGENTS.md": AGENTS})
    api.enqueue_tool_use("write_file", {"file_path": "/knowledge/bob.md", "content": "Bob likes chess.\n",
                                        "reason": "a fact about Bob"})
    api.enqueue_text("Filed under /knowledge/bob.md.")
    p = run("chat", "bot", stdin="# Bob likes chess\ny\n", env=env(api))
    assert p.returncode == 0, err(p)
    sent = api.requests[0]["messages"][0]["content"][0]["text"]
    assert "remember the note below" in sent and "Bob likes chess" in sent
    assert cat(home, "/knowledge/bob.md") == "Bob likes chess.\n"

    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- Be concise.\n",
                                       "new_string": "- Be concise.\n- Reply in French.\n",
                                       "reason": "standing preference"})
    api.enqueue_text("Added to AGENTS.md.")
    p = run("remember", "bot", "Always reply in French", stdin="y\n", env=env(api))
    assert p.returncode == 0, err(p)
    assert "reason: standing preference" in out(p)
    assert "Reply in French" in cat(home, "/AGENTS.md")
    log = render_log(AgentView(home, "bot").history("/AGENTS.md")).splitlines()  # what `fs log` prints
    assert " chat " in log[1] and "standing preference" in log[1]

    api.enqueue_tool_use("write_file", {"file_path": "/knowledge/x.md", "content": "x\n"})
    api.enqueue_text("Asked.")
    p = run("remember", "bot", "x", stdin="n\n", env=env(api))
    assert p.returncode == 0 and "(memory unchanged)" in out(p)
    p = run("remember", "bot", "x")
    assert p.returncode == 1 and "API key" in err(p)


def test_remember_with_the_note_alone_uses_the_default_agent(api: FakeMessagesAPI, home: SqlStore) -> None:
    # `memagent use bot` says commands without -a use it; `remember NOTE` was a usage error.
    home.create_agent("bot", {"/AGENTS.md": AGENTS})
    home.create_agent("other", {"/AGENTS.md": AGENTS})
    config.store_agent("bot")  # what `memagent use bot` does (tests/test_terminal_polish.py runs that command)
    api.enqueue_tool_use("write_file", {"file_path": "/knowledge/tea.md", "content": "Ann drinks tea.\n"})
    api.enqueue_text("Filed.")
    p = run("remember", "Ann drinks tea", stdin="y\n", env=env(api))
    assert p.returncode == 0, err(p)
    assert "Ann drinks tea" in api.requests[0]["messages"][0]["content"][0]["text"]
    assert cat(home, "/knowledge/tea.md") == "Ann drinks tea.\n"
    p = run("remember")
    assert p.returncode == 2 and "give the NOTE to remember" in err(p) and "Traceback" not in err(p)
