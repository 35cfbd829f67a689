"""``memagent run``: one unattended turn from a script, with no terminal (stdin </dev/null),
against the fake Messages API over HTTP, on a real database.

The approval rules decide each edit (allow: applied; queue: waits in the review queue;
deny: the refusal reaches the model and the run still ends); with no rule the
unattended policy queues. 20 runs in parallel on one Postgres agent lose no edit
and none hangs.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import config
from memagent.vfs import open_store
from memagent.vfs.files.store import SqlStore
from memagent.vfs.paths import scope_name
from memagent.vfs.records.queue import ProposalStore
from memagent.vfs.records.rules import RuleBook
from tests.cli_helpers import MEMAGENT, err, out, run

AGENTS = "# Notes agent\n- Be concise.\n"
# Far above what a run needs even on a loaded machine: only a hang reaches it.
SAFETY_TIMEOUT = 300


@pytest.fixture
def home(chat_env: None) -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("notes", {"/AGENTS.md": AGENTS})
    yield s
    s.close()


def env_for(api: FakeMessagesAPI, **extra: str) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url, "MEMAGENT_STREAM": "0", **extra}


def memagent(*args: str, env: dict[str, str], stdin_text: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run memagent as cron would: no terminal; stdin is /dev/null unless text is piped."""
    full = {**os.environ, **env}
    if stdin_text is None:
        return subprocess.run([MEMAGENT, *args], stdin=subprocess.DEVNULL, capture_output=True, env=full,
                              timeout=SAFETY_TIMEOUT)
    return subprocess.run([MEMAGENT, *args], input=stdin_text.encode(), capture_output=True, env=full,
                          timeout=SAFETY_TIMEOUT)


def script_write(api: FakeMessagesAPI, path: str, content: str, answer: str = "Done.") -> None:
    api.enqueue_tool_use("write_file", {"file_path": path, "content": content, "reason": "from the task"})
    api.enqueue_text(answer)


def last_tool_result(api: FakeMessagesAPI) -> str:
    body = api.requests[-1]
    blocks = [b for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "tool_result"]
    content = blocks[-1]["content"]
    return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)


def test_queue_rule_queues_the_edit_and_the_run_exits_0(api: FakeMessagesAPI, home: SqlStore) -> None:
    RuleBook(home, "notes").add("write_file(/knowledge/**)", "queue")
    script_write(api, "/knowledge/standup.md", "# Standup\n- 9:30 daily\n", "Queued the note.")
    p = memagent("run", "notes", "remember the standup time", "--json", env=env_for(api))
    assert p.returncode == 0, err(p)
    data = json.loads(out(p))
    assert data["answer"] == "Queued the note." and data["stopped"] == "end_turn" and data["error"] is None
    assert data["changes"] == []
    [queued] = data["queued"]
    assert queued["op"] == "write" and queued["path"] == "/knowledge/standup.md"
    [call] = data["tool_calls"]
    assert call["name"] == "write_file" and not call["is_error"] and "Queued for review" in call["result"]
    assert data["usage"]["output_tokens"] > 0 and data["thread"]
    assert not home.exists(scope_name("agent", "notes"), "/knowledge/standup.md")
    [proposal] = ProposalStore(home.engine).pending("notes")
    assert proposal.id == queued["proposal"] and proposal.after == "# Standup\n- 9:30 daily\n"
    listed = out(run("review", "notes", "--list"))
    assert "queued by memagent run" in listed and "run " + str(proposal.run_id) not in listed
    assert "1 queued for review" in err(p)


def test_allow_rule_applies_it_and_the_revision_says_rule(api: FakeMessagesAPI, home: SqlStore) -> None:
    RuleBook(home, "notes").add("write_file(/knowledge/**)", "allow")
    script_write(api, "/knowledge/standup.md", "# Standup\n- 9:30\n")
    p = memagent("run", "notes", "note the standup", "--json", env=env_for(api))
    assert p.returncode == 0, err(p)
    data = json.loads(out(p))
    assert data["changes"] == [{"path": "/knowledge/standup.md", "version": 1, "deleted": False}]
    assert data["queued"] == []
    assert data["decided_by"] == ["approval rule 1 (write_file(/knowledge/**) allow): write_file "
                                  "/knowledge/standup.md allowed"]
    assert home.read(scope_name("agent", "notes"), "/knowledge/standup.md").content == "# Standup\n- 9:30\n"
    assert home.history(scope_name("agent", "notes"), "/knowledge/standup.md")[-1].approval == "rule"


def test_deny_rule_sends_the_refusal_to_the_model_and_the_run_ends(api: FakeMessagesAPI, home: SqlStore) -> None:
    book = RuleBook(home, "notes")
    book.add("edit_file(/AGENTS.md)", "deny")
    book.add("edit_file(**)", "allow")  # later: the first match (deny) wins
    api.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "- Be concise.",
                                       "new_string": "- Be verbose."})
    api.enqueue_text("I was not allowed to change AGENTS.md.")
    p = memagent("run", "notes", "be verbose from now on", env=env_for(api))
    assert p.returncode == 0, err(p)
    assert out(p) == "I was not allowed to change AGENTS.md.\n"  # stdout: the answer only
    refusal = last_tool_result(api)
    assert "refused by approval rule 1 (edit_file(/AGENTS.md) deny)" in refusal and "nothing was" in refusal
    assert home.read(scope_name("agent", "notes"), "/AGENTS.md").content == AGENTS
    assert ProposalStore(home.engine).pending("notes") == []


def test_no_rule_unattended_queues_or_denies(api: FakeMessagesAPI, home: SqlStore) -> None:
    script_write(api, "/knowledge/a.md", "a\n")
    p = memagent("run", "notes", "write a", env=env_for(api))
    assert p.returncode == 0, err(p)
    assert [x.shown for x in ProposalStore(home.engine).pending("notes")] == ["/knowledge/a.md"]
    script_write(api, "/knowledge/b.md", "b\n")
    p = memagent("run", "notes", "write b", "--unattended", "deny", env=env_for(api))
    assert p.returncode == 0, err(p)
    assert "refused by approval no rule (default: deny)" in last_tool_result(api)
    assert len(ProposalStore(home.engine).pending("notes")) == 1


def test_yolo_overrides_the_rules_and_says_so(api: FakeMessagesAPI, home: SqlStore) -> None:
    RuleBook(home, "notes").add("write_file(**)", "deny")
    script_write(api, "/knowledge/y.md", "y\n")
    p = memagent("run", "notes", "write y", "--yolo", env=env_for(api))
    assert p.returncode == 0, err(p)
    assert "--yolo: approval rules and review are off" in err(p)
    assert home.history(scope_name("agent", "notes"), "/knowledge/y.md")[-1].approval == "yolo"


def test_task_on_stdin_thread_and_resume(api: FakeMessagesAPI, home: SqlStore) -> None:
    api.enqueue_text("first answer")
    p = memagent("run", "notes", "--json", env=env_for(api), stdin_text="what is in memory?\n")
    assert p.returncode == 0, err(p)
    thread = json.loads(out(p))["thread"]
    assert api.requests[-1]["messages"][-1]["content"][0]["text"].startswith("what is in memory?")
    api.enqueue_text("second answer")
    p = memagent("run", "notes", "and now?", "--resume", "--json", env=env_for(api))
    assert json.loads(out(p))["thread"] == thread
    assert len(api.requests[-1]["messages"]) == 3  # the first turn, its answer, the new task
    api.enqueue_text("third")
    p = memagent("run", "notes", "again", "--thread", thread[:8], "--json", env=env_for(api))
    assert p.returncode == 0 and json.loads(out(p))["thread"] == thread


@pytest.mark.parametrize("args", [("run", "notes"), ("run",), ("run", "notes", "x", "--thread", "a", "--resume")])
def test_usage_mistakes_exit_2_without_reading_the_terminal(api: FakeMessagesAPI, home: SqlStore,
                                                            args: tuple[str, ...]) -> None:
    p = memagent(*args, env=env_for(api, MEMAGENT_AGENT="notes"))
    assert p.returncode == 2, (out(p), err(p))
    assert "Traceback" not in err(p) and api.requests == []


@pytest.mark.parametrize(("args", "extra", "said"), [
    (("run", "notes", "  "), {}, "task is empty"),
    (("run", "nosuch", "hello"), {}, "no agent named 'nosuch'"),
    (("run", "notes", "hello", "--thread", "bogus"), {}, "no thread of agent 'notes'"),
    (("run", "notes", "hello", "--model", "nosuch/model"), {}, "unknown model provider"),
    (("run", "notes", "hello"), {"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": ""}, "no API key"),
])
def test_what_the_command_names_wrong_exits_2_not_1(api: FakeMessagesAPI, home: SqlStore, args: tuple[str, ...],
                                                   extra: dict[str, str], said: str) -> None:
    """1 means "failed, try again later" to a cron script; a wrong agent, thread or model,
    or an empty task, is the command's mistake (2), and nothing reaches the model."""
    p = memagent(*args, env={**env_for(api), **extra})
    assert p.returncode == 2, (out(p), err(p))
    assert said in err(p) and "Traceback" not in err(p) and api.requests == []


def test_model_failure_exits_1(api: FakeMessagesAPI, home: SqlStore) -> None:
    api.enqueue_error(400, "invalid_request_error", "bad request")
    p = memagent("run", "notes", "hello", "--json", env=env_for(api))
    assert p.returncode == 1
    data = json.loads(out(p))
    assert "model request failed" in data["error"] and "Traceback" not in err(p)


def test_a_turn_cut_by_max_steps_exits_1_and_says_how_to_go_on(api: FakeMessagesAPI, home: SqlStore) -> None:
    for _ in range(2):
        api.enqueue_tool_use("read_file", {"file_path": "/AGENTS.md"})
    p = memagent("run", "notes", "read it twice", "--max-steps", "1", "--json", env=env_for(api))
    assert p.returncode == 1, err(p)
    data = json.loads(out(p))
    assert data["stopped"] == "step_limit"
    hint = f"`memagent run notes --thread {data['thread']} continue`"
    assert hint in data["error"] and hint in err(p)
    api.enqueue_text("Went on.")
    p = memagent("run", "notes", "--thread", data["thread"], "continue", env=env_for(api))
    assert p.returncode == 0 and out(p).strip() == "Went on.", err(p)


def respond_per_task(body: dict[str, Any]) -> dict[str, Any] | str:
    """Each run writes the file its task names, then answers; runs interleave freely."""
    last = body["messages"][-1]
    if last["role"] == "user" and any(b.get("type") == "tool_result" for b in last["content"]):
        return "Done."
    task = last["content"][0]["text"]
    n = task.split()[-1]
    return {"content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "write_file",
                         "input": {"file_path": f"/knowledge/job-{n}.md", "content": f"job {n}\n"}}],
            "stop_reason": "tool_use"}


def test_20_runs_in_parallel_on_one_postgres_agent(api: FakeMessagesAPI, fresh_pg_url: str, chat_env: None,
                                                   tmp_path: Path) -> None:
    s = open_store(fresh_pg_url)
    s.create_agent("notes", {"/AGENTS.md": AGENTS})
    RuleBook(s, "notes").add("write_file(/knowledge/job-1*)", "allow")  # jobs 1 and 10-19 apply, the rest queue
    jobs = range(20)
    for _ in jobs:
        api.enqueue_callable(respond_per_task)
        api.enqueue_callable(respond_per_task)
    env = {**os.environ, **env_for(api, MEMAGENT_DB=fresh_pg_url)}
    procs = [subprocess.Popen([MEMAGENT, "run", "notes", f"write job {n}", "--json"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for n in jobs]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=SAFETY_TIMEOUT)  # a hang fails here, not a slow machine
        assert proc.returncode == 0, stderr.decode()
        results.append(json.loads(stdout))
    applied = {c["path"] for r in results for c in r["changes"]}
    queued = {q["path"] for r in results for q in r["queued"]}
    expected_applied = {f"/knowledge/job-{n}.md" for n in jobs if str(n).startswith("1")}
    assert applied == expected_applied
    assert queued == {f"/knowledge/job-{n}.md" for n in jobs} - expected_applied
    pending = ProposalStore(s.engine).pending("notes")
    assert sorted(p.shown for p in pending) == sorted(queued)  # every queued edit is in the queue, once
    for path in expected_applied:
        assert s.read(scope_name("agent", "notes"), path).content == f"job {path.split('-')[1][:-3]}\n"
    s.close()
