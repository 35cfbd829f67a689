"""One review queue for everything deferred (reflect, ``memagent run``, ``mcp serve
--approval queue``), worked through with one presentation and wording by
``memagent review`` and ``/review``; conflicts are never applied; queued writes are
labelled by who queued them (they have no run); a dry reflect run takes no run number;
``memagent agents`` and the chat header count what waits.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pexpect
import pytest

from memagent.agent.chat.session import build_session
from memagent.agent.chat.ui.base import APPROVAL_QUESTION
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.cli import config
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.reflection import reflect
from memagent.agent.serve.server import Session
from memagent.vfs import SqlStore, open_store
from memagent.vfs.entrance import queue as queueing
from memagent.vfs.entrance import submit
from memagent.vfs.records.queue import ProposalStore
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, out, run
from tests.pty_helpers import Screen

S = "agent:a"
AGENTS = "# Rules\n- Be concise.\n"


@pytest.fixture
def home(chat_env: None) -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("a", {"/AGENTS.md": AGENTS})
    yield s
    s.close()


def queue_edit(store: SqlStore, by: str, old: str, new: str) -> int:
    """An edit of /AGENTS.md queued as ``memagent run`` (or a client) queues it."""
    pending = AgentView(store, "a").prepare_edit("/AGENTS.md", old, new)
    result = submit(store, pending, policy=queueing(ProposalStore(store.engine), "a", by=by), author="agent")
    assert result.status == "queued" and result.proposal
    return result.proposal


def test_memagent_review_and_chat_review_show_one_panel_and_one_wording(home: SqlStore) -> None:
    queue_edit(home, "memagent run", "- Be concise.\n", "- Be concise.\n- Use bullets.\n")
    p = run("review", "a", stdin="what\na\n")
    cli = out(p)
    assert p.returncode == 0, cli
    assert APPROVAL_QUESTION in cli and "[a]ll" not in cli
    assert "note: proposal #1, a write queued by memagent run" in cli and "+- Use bullets." in cli
    assert "Please answer y, n, n: <feedback>, or a." in cli
    assert "Review done: 1 applied, 0 rejected, 0 dropped as stale, 0 pending." in cli

    queue_edit(home, "memagent run", "- Use bullets.\n", "- Use numbers.\n")
    stdout = io.StringIO()
    session = build_session(AgentView(home, "a"), ScriptedModel(), PlainUI(io.StringIO("/review\na\n"), stdout,
                                                                            io.StringIO()),
                            threads=ThreadStore(home.engine))
    assert session.run() == 0
    chat = stdout.getvalue()
    # The same lines, word for word, as the command's.
    for line in (APPROVAL_QUESTION, "note: proposal #2, a write queued by memagent run",
                 "Review done: 1 applied, 0 rejected, 0 dropped as stale, 0 pending."):
        assert line in chat
    assert home.read(S, "/AGENTS.md").content == "# Rules\n- Be concise.\n- Use numbers.\n"


def test_end_of_input_in_review_leaves_the_proposal_pending_and_says_so(home: SqlStore) -> None:
    queue_edit(home, "memagent run", "- Be concise.\n", "- Be concise.\n- Use bullets.\n")
    p = run("review", "a", stdin="")
    text = out(p)
    assert "rejected and" not in text  # nothing was rejected: the proposal waits
    assert "the change is not applied" in text and "1 proposal(s) left pending" in text
    assert len(ProposalStore(home.engine).pending("a")) == 1
    assert home.read(S, "/AGENTS.md").content == AGENTS


def test_a_queued_edit_whose_lines_changed_is_a_conflict_never_applied(home: SqlStore) -> None:
    pid = queue_edit(home, "memagent run", "- Be concise.\n", "- Be brief.\n")
    AgentView(home, "a").write("/AGENTS.md", "# Rules\n- Be very concise.\n")  # a person changed that line
    listed = out(run("review", "a", "--list"))
    assert f"#{pid}" in listed and "[CONFLICT: file changed; discard it]" in listed  # no run can redo it
    p = run("review", "a", stdin="y\ns\n")  # "y" is no answer to a conflict; skip leaves it
    text = out(p)
    assert f"--- CONFLICT in proposal #{pid}: edit /AGENTS.md (not applied) ---" in text
    assert "[d]iscard or [s]kip?" in text and "Please answer d or s." in text  # no run can redo a queued write
    assert len(ProposalStore(home.engine).pending("a")) == 1
    p = run("review", "a", stdin="d\n")
    assert "1 dropped as stale, 0 pending" in out(p)
    assert home.read(S, "/AGENTS.md").content == "# Rules\n- Be very concise.\n"


def test_a_queued_write_is_labelled_by_who_queued_it_not_a_run(home: SqlStore) -> None:
    session = Session(AgentView(home, "a"), "queue", "claude-code 2.0", ProposalStore(home.engine))
    session.run("read_file", {"file_path": "/AGENTS.md"})
    assert "Queued" in session.run("edit_file", {"file_path": "/AGENTS.md", "old_string": "concise",
                                                 "new_string": "brief"}).content
    queue_edit(home, "memagent run", "# Rules\n", "# House rules\n")
    [mcp, by_run] = ProposalStore(home.engine).pending("a")
    listed = out(run("review", "a", "--list"))
    assert "queued by MCP client claude-code 2.0" in listed and "queued by memagent run" in listed
    assert f"run {mcp.run_id}" not in listed and f"run {by_run.run_id}" not in listed


def test_dry_run_takes_no_run_number(store: SqlStore) -> None:
    store.write(S, "/AGENTS.md", AGENTS)
    view = AgentView(store, "a")
    threads = ThreadStore(store.engine)
    tid = threads.create("a", "m")
    threads.append(tid, {"role": "user", "content": [{"type": "text", "text": "bullets please"}]})
    queue = ProposalStore(store.engine)
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- Be concise.\n",
                                         "new_string": "- Use bullets.\n"})
    model.enqueue_text("Proposed.")
    dry = reflect(view, model, queue, dry_run=True)
    assert dry.status == "dry-run" and dry.run_id is None and len(dry.proposals) == 1
    assert queue.runs("a") == []  # no row, so no number used up
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- Be concise.\n",
                                         "new_string": "- Use bullets.\n"})
    model.enqueue_text("Proposed.")
    real = reflect(view, model, queue)
    assert [r.id for r in queue.runs("a")] == [real.run_id]
    assert f"reflect run {real.run_id}:" in real.message


def test_agents_and_the_chat_header_count_the_waiting_edits(home: SqlStore) -> None:
    assert out(run("agents")).strip() == "a  (1 file)"
    queue_edit(home, "memagent run", "# Rules\n", "# House rules\n")
    queue_edit(home, "memagent run", "- Be concise.\n", "- Be brief.\n")
    assert out(run("agents")).strip() == "a  (1 file, 2 edits waiting for review)"
    p = run("chat", "a", stdin="", env={"ANTHROPIC_API_KEY": "test-key"})
    assert "2 memory edits waiting for review: type /review" in out(p)


def test_memagent_review_in_a_terminal_shows_the_chat_panel(home: SqlStore) -> None:
    queue_edit(home, "memagent run", "- Be concise.\n", "- Be concise.\n- Use bullets.\n")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    child = pexpect.spawn(MEMAGENT, ["review", "a"], env=env, dimensions=(40, 100), encoding="utf-8", timeout=30)
    screen = Screen(child)
    screen.wait_for("[a]lways")
    assert "╭" in screen.text and "edit /AGENTS.md" in screen.text  # the chat's boxed panel
    assert "\x1b[" in screen.raw  # coloured, as in chat
    screen.type("y")
    screen.wait_for("Review done: 1 applied")
    assert screen.finish() == 0
    assert home.read(S, "/AGENTS.md").content == "# Rules\n- Be concise.\n- Use bullets.\n"
