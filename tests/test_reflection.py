"""Background reflection and the review queue: `memagent reflect` proposes, `memagent review` decides.

In process with the scripted model on SQLite and Postgres, and end to end through
the real `memagent` command talking to the fake Messages API over HTTP.
"""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI, ScriptMessage
from memagent.agent.chat.session import build_session
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.cli import config
from memagent.agent.gate import Decision
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.reflection import Checked, Resolution, Review, rebase, reflect, review
from memagent.agent.tools import ApprovalRequest
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.queue import Busy, ProposalStore
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.render import render_log
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, err, out, run

pytestmark = pytest.mark.usefixtures("chat_env")

AGENTS = "# Preferences\n- Be concise.\n"
RULE = "# Preferences\n- Be concise.\n- Use bullet points for every summary.\n"


def converse(store: SqlStore, agent: str, *texts: str) -> str:
    """A stored conversation: user/assistant pairs."""
    threads = ThreadStore(store.engine)
    tid = threads.create(agent, "m")
    for text in texts:
        threads.append(tid, {"role": "user", "content": [{"type": "text", "text": text}]})
        threads.append(tid, {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]})
    return tid


def proposing(model: ScriptedModel, *calls: tuple[str, dict[str, Any]]) -> None:
    for name, args in calls:
        model.enqueue_tool_use(name, args)
    model.enqueue_text("Proposed a rule.")


@pytest.fixture
def view(store: SqlStore) -> AgentView:
    store.write("agent:a", "/AGENTS.md", AGENTS)
    return AgentView(store, "a")


def queue_of(view: AgentView) -> ProposalStore:
    return ProposalStore(view.store.engine)  # type: ignore[attr-defined]


def edit_rule(reason: str = "the user asked for bullets twice") -> tuple[str, dict[str, Any]]:
    return ("edit_file", {"file_path": "/AGENTS.md", "old_string": "- Be concise.\n",
                          "new_string": "- Be concise.\n- Use bullet points for every summary.\n", "reason": reason})


def answers(*decisions: str) -> Any:
    it = iter(decisions)

    def decide(request: ApprovalRequest) -> Decision:
        parsed = Decision.parse(next(it))
        assert parsed is not None
        return parsed

    return decide


def test_reflect_proposes_and_review_applies_with_provenance(view: AgentView, store: SqlStore) -> None:
    tid = converse(store, "a", "Summarise this in bullets please", "Again: bullets, always")
    model = ScriptedModel()
    proposing(model, ("read_file", {"file_path": "/AGENTS.md"}), edit_rule())
    lines: list[str] = []

    result = reflect(view, model, queue_of(view), on_log=lines.append)

    assert result.status == "done" and result.threads == [tid]
    assert view.read("/AGENTS.md").content == AGENTS  # nothing applied
    [p] = queue_of(view).pending("a")
    assert (p.op, p.shown, p.base_version, p.after) == ("edit", "/AGENTS.md", 1, RULE)
    assert p.reason == "the user asked for bullets twice" and p.threads == [tid]
    assert lines == [f"proposal #{p.id}: edit /AGENTS.md — the user asked for bullets twice "
                     f"[reflect run {result.run_id}]"]
    prompt = model.requests[0]["messages"][0]["content"][0]["text"]
    assert "Summarise this in bullets please" in prompt and "Generalise" in prompt

    summary = review(view, queue_of(view), answers("y"))

    assert [c.version for _, c in summary.applied] == [2]
    assert view.read("/AGENTS.md").content == RULE
    rev = view.history("/AGENTS.md")[0]
    assert (rev.author, rev.approval, rev.message) == ("agent", "human", "the user asked for bullets twice")
    assert rev.origin is not None and rev.origin.kind == "reflect" and rev.origin.run == result.run_id
    assert rev.origin.thread == tid and tid[:8] in rev.origin.label()
    assert queue_of(view).pending("a") == []


def test_reject_changes_nothing_and_the_feedback_reaches_the_next_run(view: AgentView, store: SqlStore) -> None:
    converse(store, "a", "bullets please")
    model = ScriptedModel()
    proposing(model, edit_rule())
    reflect(view, model, queue_of(view))

    summary = review(view, queue_of(view), answers("n: only for meeting summaries"))

    assert len(summary.rejected) == 1 and view.read("/AGENTS.md").content == AGENTS
    assert [r.version for r in view.history("/AGENTS.md")] == [1]
    converse(store, "a", "another chat")
    model2 = ScriptedModel()
    model2.enqueue_text("Nothing to keep.")
    result = reflect(view, model2, queue_of(view))
    assert result.status == "done" and result.proposals == []
    assert "only for meeting summaries" in model2.requests[0]["messages"][0]["content"][0]["text"]


def test_a_stale_proposal_is_rebased_or_dropped_never_applied_blindly(view: AgentView, store: SqlStore) -> None:
    converse(store, "a", "bullets please")
    model = ScriptedModel()
    proposing(model, edit_rule())
    reflect(view, model, queue_of(view))
    # Someone adds a line elsewhere: the proposal re-bases onto the new version.
    view.write("/AGENTS.md", "# Title\n" + AGENTS)
    [p] = queue_of(view).pending("a")
    checked = Review(view, queue_of(view)).check(p)
    assert checked.state == "rebased" and checked.version == 2
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision("approve")

    review(view, queue_of(view), decide)
    assert "re-based onto version 2" in asked[0].note
    assert view.read("/AGENTS.md").content == "# Title\n" + RULE

    # A conflicting change: the proposal no longer applies; it is never applied, never
    # put to ``decide`` as an approval, but shown as a conflict, and the person discards it.
    converse(store, "a", "numbered lists instead")
    model2 = ScriptedModel()
    proposing(model2, ("edit_file", {"file_path": "/AGENTS.md", "old_string": "bullet points",
                                     "new_string": "numbered lists"}))
    reflect(view, model2, queue_of(view))
    view.edit("/AGENTS.md", "- Use bullet points for every summary.\n", "- Use tables.\n")
    shown: list[Checked] = []

    def discard(c: Checked) -> Resolution:
        shown.append(c)
        return "discard"

    summary = review(view, queue_of(view), answers(), resolve=discard)  # approving would fail: no answers
    assert [c.state for c in shown] == ["conflict"] and "+- Use tables." in shown[0].since
    assert len(summary.dropped) == 1 and "changed since this proposal" in summary.dropped[0][1]
    assert "numbered" not in view.read("/AGENTS.md").content
    assert queue_of(view).pending("a") == []


def test_rebase_rules() -> None:
    assert rebase("a\nb\nc\n", "a\nB\nc\n", "z\na\nb\nc\n") == "z\na\nB\nc\n"
    assert rebase("a\nb\n", "a\nb\nc\n", "x\na\nb\n") == "x\na\nb\nc\n"
    assert rebase("a\nb\nc\n", "a\nB\nc\n", "a\nq\nc\n") is None
    assert rebase(None, "new\n", "exists\n") is None


def test_nothing_to_do_then_the_mark_is_kept(view: AgentView, store: SqlStore) -> None:
    assert reflect(view, ScriptedModel(), queue_of(view)).status == "nothing"
    converse(store, "a", "use bullets")
    model = ScriptedModel()
    proposing(model, edit_rule())
    assert reflect(view, model, queue_of(view)).status == "done"
    again = reflect(view, ScriptedModel(), queue_of(view))  # a model call would fail: none scripted
    assert again.status == "nothing" and "no new conversation" in again.message
    # --since reads again what the mark has passed.
    model2 = ScriptedModel()
    model2.enqueue_text("Already in memory.")
    since = datetime.now(UTC) - timedelta(hours=1)
    assert reflect(view, model2, queue_of(view), since=since).status == "done"


def test_dry_run_stores_nothing_and_moves_no_mark(view: AgentView, store: SqlStore) -> None:
    converse(store, "a", "use bullets")
    model = ScriptedModel()
    proposing(model, edit_rule())
    lines: list[str] = []
    result = reflect(view, model, queue_of(view), dry_run=True, on_log=lines.append)
    assert result.status == "dry-run" and len(result.proposals) == 1
    assert lines == ["would propose: edit /AGENTS.md — the user asked for bullets twice"]
    assert queue_of(view).pending("a") == [] and view.read("/AGENTS.md").content == AGENTS
    model2 = ScriptedModel()
    proposing(model2, edit_rule())
    assert reflect(view, model2, queue_of(view)).status == "done"  # the same conversation again


def test_yolo_applies_at_once_recorded_yolo_and_reflect(view: AgentView, store: SqlStore) -> None:
    tid = converse(store, "a", "use bullets")
    model = ScriptedModel()
    proposing(model, edit_rule(), ("write_file", {"file_path": "/knowledge/style.md", "content": "Bullets.\n"}))
    result = reflect(view, model, queue_of(view), yolo=True)
    assert [c.path for c in result.applied] == ["/AGENTS.md", "/knowledge/style.md"]
    assert view.read("/AGENTS.md").content == RULE
    rev = view.history("/knowledge/style.md")[0]
    assert rev.approval == "yolo" and rev.origin is not None and rev.origin.kind == "reflect"
    assert rev.origin.thread == tid
    assert queue_of(view).pending("a") == []


def test_drafts_validate_and_read_back(view: AgentView, store: SqlStore) -> None:
    converse(store, "a", "make a skill")
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/skills/x.md", "content": "no frontmatter"})
    model.enqueue_tool_use("write_file", {"file_path": "/conversations/x.md", "content": "hi"})
    model.enqueue_tool_use("edit_file", edit_rule()[1])
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "every summary",
                                         "new_string": "summaries"})
    model.enqueue_tool_use("read_file", {"file_path": "/AGENTS.md"})
    model.enqueue_text("Done.")
    result = reflect(view, model, queue_of(view))
    results = [m for m in model.requests[-1]["messages"] if m["role"] == "user"][1:]
    texts = [b["content"] for m in results for b in m["content"]]
    assert "skills/x.md" in texts[0] and "read-only" in texts[1]
    assert "summaries" in texts[4] and "proposed text" in texts[4]
    [p] = result.proposals
    assert p.after == "# Preferences\n- Be concise.\n- Use bullet points for summaries.\n"


def test_drafts_take_expected_version_as_the_memory_tools_do(view: AgentView, store: SqlStore) -> None:
    # The draft tools offer the memory tools' definitions, expected_version included: a model
    # that passes the version read_file showed is answered, not told its arguments are bad.
    converse(store, "a", "shorter rule")
    version = view.read("/AGENTS.md").version
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {**edit_rule()[1], "expected_version": version + 1})
    model.enqueue_tool_use("edit_file", {**edit_rule()[1], "expected_version": version})
    model.enqueue_tool_use("write_file", {"file_path": "/knowledge/new.md", "content": "- a fact\n",
                                          "expected_version": 0})
    model.enqueue_text("Done.")
    result = reflect(view, model, queue_of(view))
    results = [b for m in model.requests[-1]["messages"] if m["role"] == "user" for b in m["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert results[0].get("is_error") and f"not version {version + 1}" in results[0]["content"]
    assert not results[1].get("is_error") and not results[2].get("is_error")
    assert sorted(p.path for p in result.proposals) == ["/AGENTS.md", "/knowledge/new.md"]


def test_the_lock_lets_one_run_at_a_time(view: AgentView) -> None:
    queue = queue_of(view)
    first = queue.start_run("a")
    with pytest.raises(Busy) as busy:
        queue.start_run("a", wait=0.3)
    assert f"reflect run {first.id}" in str(busy.value)
    other = queue.start_run("b")  # another agent is not blocked
    queue.finish_run(first.id, "empty")
    queue.finish_run(other.id, "empty")
    assert queue.start_run("a").id > first.id


def test_a_dead_holders_lock_is_taken_over(view: AgentView) -> None:
    queue = queue_of(view)
    from sqlalchemy import update

    from memagent.vfs.models import reflection_runs

    stuck = queue.start_run("a")
    with view.store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(update(reflection_runs).where(reflection_runs.c.id == stuck.id)
                     .values(holder=stuck.holder.rsplit(":", 1)[0] + ":999999999"))
    assert queue.start_run("a").id != stuck.id
    assert queue.runs("a")[1].status == "abandoned"


def test_review_in_chat_and_the_header_note(store: SqlStore) -> None:
    store.write("agent:a", "/AGENTS.md", AGENTS)
    view = AgentView(store, "a", user="tester")
    converse(store, "a", "bullets please")
    model = ScriptedModel()
    proposing(model, edit_rule())
    reflect(view, model, queue_of(view))
    stdin = io.StringIO("/review\ny\n/history\n")
    stdout, stderr = io.StringIO(), io.StringIO()
    session = build_session(view, ScriptedModel(), PlainUI(stdin, stdout, stderr),
                            threads=ThreadStore(store.engine))
    assert session.run() == 0
    shown = stdout.getvalue()
    assert "reason: the user asked for bullets twice" in shown and "+- Use bullet points" in shown
    assert "Review done: 1 applied" in shown and "reflect run" in shown
    assert view.read("/AGENTS.md").content == RULE


# -- end to end through the command ------------------------------------------------------------------------


@pytest.fixture
def home_store() -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("bot", {"/AGENTS.md": AGENTS})
    yield s
    s.close()


def agents_md(store: SqlStore) -> str:
    """/AGENTS.md as `memagent fs cat` prints it, read in this process: the commands under test
    below are reflect and review, and every `memagent` process costs most of a second."""
    return AgentView(store, "bot").read("/AGENTS.md").content


def log_lines(store: SqlStore) -> list[str]:
    """The lines `memagent fs log /AGENTS.md` prints (the same render_log), read in this process."""
    return render_log(AgentView(store, "bot").history("/AGENTS.md")).splitlines()


def model_env(api: FakeMessagesAPI) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url}


def script_rule(api: FakeMessagesAPI) -> None:
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- Be concise.\n",
                                       "new_string": "- Be concise.\n- Use bullet points for every summary.\n",
                                       "reason": "asked for bullets twice"})
    api.enqueue_text("Proposed one rule.")


def test_reflect_and_review_through_the_command(api: FakeMessagesAPI, home_store: SqlStore) -> None:
    p = run("reflect", "bot", env=model_env(api))
    assert p.returncode == 3, err(p)
    assert "nothing to reflect on" in out(p)

    tid = converse(home_store, "bot", "bullets please", "bullets, always")
    script_rule(api)
    p = run("reflect", "bot", env=model_env(api), stdin="")
    assert p.returncode == 0, err(p)
    lines = out(p).splitlines()
    assert lines[0].startswith("proposal #") and "edit /AGENTS.md — asked for bullets twice [reflect run" in lines[0]
    assert "1 proposal(s) waiting for review" in lines[-1]
    assert agents_md(home_store) == AGENTS

    p = run("chat", "bot", stdin="", env=model_env(api))
    assert p.returncode == 0 and "1 memory edit waiting for review: type /review" in out(p)
    p = run("review", "bot", "--list")
    assert p.returncode == 0 and "edit   /AGENTS.md" in out(p) and tid[:8] in out(p)
    p = run("review", "bot", stdin="maybe\ny\n")
    assert p.returncode == 0, err(p)
    assert "reason: asked for bullets twice" in out(p) and "+- Use bullet points for every summary." in out(p)
    assert "Please answer y, n, n: <feedback>, or a." in out(p) and "[a]lways" in out(p)
    assert "1 applied, 0 rejected, 0 dropped as stale, 0 pending" in out(p)
    assert agents_md(home_store) == RULE
    log = log_lines(home_store)
    assert log[1].split()[:1] == ["v2"] and " agent " in log[1] and " human " in log[1]
    assert "reflect run" in log[1] and tid[:8] in log[1] and "asked for bullets twice" in log[1]

    p = run("reflect", "bot", env=model_env(api))
    assert p.returncode == 3 and "no new conversation" in out(p)
    p = run("review", "bot")
    assert p.returncode == 0 and "No proposals waiting" in out(p)


def test_reject_and_end_of_input_through_the_command(api: FakeMessagesAPI, home_store: SqlStore) -> None:
    converse(home_store, "bot", "bullets please")
    script_rule(api)
    assert run("reflect", "bot", env=model_env(api)).returncode == 0
    p = run("review", "bot", stdin="")  # cron-like: no answers
    assert p.returncode == 0 and "1 proposal(s) left pending" in out(p)
    p = run("review", "bot", stdin="n: not for every summary\n")
    assert p.returncode == 0 and "1 rejected" in out(p)
    assert agents_md(home_store) == AGENTS


def test_dry_run_yolo_and_bad_options_through_the_command(api: FakeMessagesAPI, home_store: SqlStore) -> None:
    converse(home_store, "bot", "bullets please")
    script_rule(api)
    p = run("reflect", "bot", "--dry-run", env=model_env(api))
    assert p.returncode == 0 and "would propose: edit /AGENTS.md" in out(p) and "nothing stored" in out(p)
    script_rule(api)
    p = run("reflect", "bot", "--yolo", "--since", "1h", env=model_env(api))
    assert p.returncode == 0, err(p)
    assert "applied edit /AGENTS.md (now version 2)" in out(p)
    assert agents_md(home_store) == RULE
    log = log_lines(home_store)
    assert " yolo " in log[1] and "reflect run" in log[1]
    p = run("reflect", "bot", "--since", "yesterday", env=model_env(api))
    assert p.returncode == 2 and "duration" in err(p)
    p = run("reflect", "bot")
    assert p.returncode == 1 and "API key" in err(p) and "Traceback" not in err(p)
    p = run("reflect", "ghost", env=model_env(api))
    assert p.returncode == 1 and "no agent named 'ghost'" in err(p)


def test_two_concurrent_runs_one_waits_or_exits_cleanly(api: FakeMessagesAPI, home_store: SqlStore) -> None:
    converse(home_store, "bot", "bullets please")
    env = {**os.environ, **model_env(api)}
    second: list[tuple[int, str, str]] = []

    def while_holding_the_lock(body: dict[str, Any]) -> ScriptMessage:
        # The first run asks the model only after it took the lock: a second run started
        # now meets it held, whenever it gets there (no timing), and must exit at once.
        p = subprocess.run([MEMAGENT, "reflect", "bot", "--wait", "0"], stdin=subprocess.DEVNULL,
                           capture_output=True, env=env, timeout=60)
        second.append((p.returncode, p.stdout.decode(), p.stderr.decode()))
        return ScriptMessage([{"type": "text", "text": "Nothing worth keeping."}])

    api.enqueue_callable(while_holding_the_lock)
    first = subprocess.run([MEMAGENT, "reflect", "bot"], stdin=subprocess.DEVNULL, capture_output=True,
                           env=env, timeout=120)
    results = [(first.returncode, first.stdout.decode(), first.stderr.decode()), *second]
    codes = [code for code, _, _ in results]
    assert codes == [0, 3], results  # one ran; the other exited at once (busy)
    assert "nothing done" in results[1][2] and "reflect run" in results[1][2], results
    assert all("Traceback" not in e for _, _, e in results)
    # The waiting kind: a third run waits for nothing and finds nothing new.
    p = run("reflect", "bot", "--wait", "5", env=model_env(api))
    assert p.returncode == 3
