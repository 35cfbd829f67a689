"""``memagent eval``: the harness passes a model that uses memory and fails one that ignores it.

- Every built-in scenario passes with ``bench.eval_oracle.OracleModel`` (memory used), and
  the scenarios whose point is memory fail with the same model ignoring memory.
- Every check kind is shown failing when it should (and passing beside it).
- A malformed scenario is one line naming file, line and what is wrong; exit 2.
- The JSONL contract, ``compare`` (exit 1 when a scenario got worse), and the whole built-in suite through the real
  ``memagent eval`` against the fake Messages API (all pass, over HTTP) and the fake
  OpenAI-compatible server (the mechanics: it runs end to end and writes the JSONL).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bench.eval_oracle import OracleModel
from bench.fake_messages_api import FakeMessagesAPI
from bench.fake_openai_api import FakeOpenAIAPI
from memagent.agent.cli import templates
from memagent.agent.cli.main import main
from memagent.agent.evals import results
from memagent.agent.evals.checks import Observed, run_check
from memagent.agent.evals.harness import ScenarioResult, run_scenario
from memagent.agent.evals.scenario import ScenarioError, builtin, builtin_names, parse
from memagent.agent.model import ModelRequest
from memagent.agent.model.scripted import ScriptedModel
from memagent.vfs import open_store
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import err, out, run

SUITE = {s.name: s for s in builtin()}
# Scenarios that pass whether or not the model uses memory (they check that nothing is stored,
# or the prompt's size); every other scenario must fail when memory is ignored.
NOT_ABOUT_RECALL = {"transient-not-stored", "question-leaves-memory-alone", "small-prompt"}


@pytest.fixture
def scratch(tmp_path: Path, migrated_sqlite_template: Path) -> Callable[[], str]:
    """A new database for each ``run_scenario`` here: a copy of conftest's migrated template, the
    schema the harness's own scratch store (``db_url=None``) migrates a new file to, 0.4-0.6 s a
    run over dozens of runs. Each call is a new file, so no run sees another's agent. The
    ``db_url=None`` path itself stays covered (the model-error and unknown-template tests, and
    every ``memagent eval`` run below)."""
    numbers = itertools.count()

    def new() -> str:
        path = tmp_path / f"scratch-{next(numbers)}.db"
        shutil.copyfile(migrated_sqlite_template, path)
        return f"sqlite:///{path}"

    return new


def test_the_suite_covers_the_issue() -> None:
    assert len(SUITE) >= 20
    for name in ("correction-next-thread", "remember-preference-agents-md", "remember-procedure-skill",
                 "newer-correction-wins", "compact-cases-into-rule", "rule-survives-overflow",
                 "past-decision-recall", "recall-among-1000-files", "transient-not-stored", "secret-not-stored",
                 "skill-procedure-followed", "subagent-used", "mcp-unlisted-tool-never-called"):
        assert name in SUITE
    assert SUITE["recall-among-1000-files"].knowledge == 1000
    assert SUITE["past-decision-recall"].threads
    assert {s.command for sc in SUITE.values() for s in sc.steps} >= {"/remember", "/compact", "reflect"}
    assert {s.approve for sc in SUITE.values() for s in sc.steps} == {"all", "none"}


@pytest.mark.parametrize("name", builtin_names())
def test_a_model_that_uses_memory_passes_every_builtin_scenario(name: str, scratch: Callable[[], str]) -> None:
    result = run_scenario(SUITE[name], OracleModel(), templates=templates.files, db_url=scratch())
    assert result.error is None
    failed = [(c.where, c.label, c.detail) for c in result.checks if not c.passed]
    assert not failed
    assert result.total == SUITE[name].checks and result.tokens > 0 and result.requests > 0


def test_a_model_that_ignores_memory_fails_the_memory_checks(scratch: Callable[[], str]) -> None:
    failing = set()
    for name, scenario in SUITE.items():
        result = run_scenario(scenario, OracleModel(uses_memory=False), templates=templates.files, db_url=scratch())
        assert result.error is None
        if result.passed < result.total:
            failing.add(name)
    assert failing == set(SUITE) - NOT_ABOUT_RECALL


def test_the_overflow_scenario_really_folds_the_thread(scratch: Callable[[], str]) -> None:
    model = OracleModel()
    result = run_scenario(SUITE["rule-survives-overflow"], model, templates=templates.files, db_url=scratch())
    assert result.passed == result.total
    # A summary request (no tools) was made: the early rule left the verbatim window.
    assert model.summaries > 0


# -- each check kind fails when it should ------------------------------------------------

BASE = """name: kinds
description: one check kind
files:
  /AGENTS.md: "# Notes\\n- Keep answers short.\\n"
sessions:
  - turns:
      - user: "Hello there."
expect:
  {check}
"""


def _scripted(*, write: bool = False, read: bool = False) -> ScriptedModel:
    model = ScriptedModel()
    if read:
        model.enqueue_tool_use("read_file", {"file_path": "/AGENTS.md"})
    if write:
        model.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "# Notes\n- Be brief.\n"})
    model.enqueue_text("hello, short answer")
    return model


CASES: list[tuple[str, str, str, dict[str, bool]]] = [
    # kind, failing check, passing check, script
    ("answer_matches", "answer_matches: 'goodbye'", "answer_matches: 'short answer'", {}),
    ("answer_not_matches", "answer_not_matches: 'hello'", "answer_not_matches: 'goodbye'", {}),
    ("memory_matches", "memory_matches: {path: /AGENTS.md, pattern: 'bullet'}",
     "memory_matches: {path: /AGENTS.md, pattern: 'short'}", {}),
    ("memory_matches", "memory_matches: {path: /skills/*.md, pattern: 'x'}",
     "memory_matches: {path: /*.md, pattern: 'Notes'}", {}),
    ("memory_not_matches", "memory_not_matches: {path: /AGENTS.md, pattern: '(?i)short'}",
     "memory_not_matches: {path: /AGENTS.md, pattern: 'bullet'}", {}),
    ("tool_called", "tool_called: write_file", "tool_called: {name: read_file, args: 'AGENTS'}", {"read": True}),
    ("tool_called", "tool_called: {name: read_file, args: 'skills'}", "tool_called: read_file", {"read": True}),
    ("tool_not_called", "tool_not_called: read_file", "tool_not_called: write_file", {"read": True}),
    ("max_prompt_tokens", "max_prompt_tokens: 10", "max_prompt_tokens: 100000", {}),
    ("max_revisions", "max_revisions: 0", "max_revisions: 1", {"write": True}),
    ("max_revisions", "max_revisions: {path: /AGENTS.md, max: 0}", "max_revisions: {path: /skills/*, max: 0}",
     {"write": True}),
    ("file_exists", "file_exists: /nope.md", "file_exists: /AGENTS.md", {}),
    ("file_exists", "file_exists: /skills/*.md", "file_exists: /*.md", {}),
    ("file_absent", "file_absent: /AGENTS.md", "file_absent: /nope.md", {}),
]


@pytest.mark.parametrize(("kind", "failing", "passing", "script"), CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                                                  enumerate(CASES)])
def test_each_check_kind_fails_when_it_should(kind: str, failing: str, passing: str,
                                              script: dict[str, bool], scratch: Callable[[], str]) -> None:
    for check, want in ((failing, False), (passing, True)):
        scenario = parse(BASE.format(check=check), "kinds.yaml")
        result = run_scenario(scenario, _scripted(**script), templates=templates.files, db_url=scratch())
        assert result.error is None
        assert [c.check for c in result.checks] == [kind]
        assert result.checks[0].passed is want, (check, result.checks[0].detail)
        if not want:
            assert result.checks[0].detail and result.checks[0].answer == "hello, short answer"


def test_tool_called_fails_when_no_tool_was_called(scratch: Callable[[], str]) -> None:
    scenario = parse(BASE.format(check="tool_called: read_file"), "kinds.yaml")
    result = run_scenario(scenario, _scripted(), templates=templates.files, db_url=scratch())
    assert not result.checks[0].passed and "never called" in result.checks[0].detail


def test_a_check_after_a_turn_sees_that_turn_only(scratch: Callable[[], str]) -> None:
    text = """name: per-turn
description: tool calls of an earlier turn do not count for a later turn's check
files: {"/AGENTS.md": "x\\n"}
sessions:
  - turns:
      - user: "one"
        expect: {tool_called: read_file}
      - user: "two"
        expect: {tool_not_called: read_file, answer_matches: 'second'}
"""
    model = ScriptedModel()
    model.enqueue_tool_use("read_file", {"file_path": "/AGENTS.md"})
    model.enqueue_text("first")
    model.enqueue_text("second")
    result = run_scenario(parse(text, "t.yaml"), model, templates=templates.files, db_url=scratch())
    assert [c.passed for c in result.checks] == [True, True, True]
    assert [c.where for c in result.checks] == ["session 1 turn 1", "session 1 turn 2", "session 1 turn 2"]


def test_text_before_a_tool_call_and_after_it_are_separate_lines_of_the_answer(scratch: Callable[[], str]) -> None:
    text = """name: two-blocks
description: the answer's last block starts a line, as it does in chat
files: {"/AGENTS.md": "x\\n"}
sessions:
  - turns:
      - user: "list them"
        expect: {answer_matches: '(?m)^- a$', answer_not_matches: 'check- a'}
"""
    model = ScriptedModel()
    model.enqueue_tool_use("read_file", {"file_path": "/AGENTS.md"}, text="Let me check")
    model.enqueue_text("- a\n- b")
    result = run_scenario(parse(text, "t.yaml"), model, templates=templates.files, db_url=scratch())
    assert [c.passed for c in result.checks] == [True, True], [c.detail for c in result.checks]


def test_memory_valid_fails_on_a_file_that_fails_its_validator(tmp_path: Path) -> None:
    # Files are validated at every write, so an invalid one can only be older than a rule:
    # stored here through a store without validation.
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}", validator=lambda path, content: [])
    store.create_agent("a", {"/skills/broken.md": "no frontmatter at all\n", "/AGENTS.md": "ok\n"})
    view = AgentView(store, "a")
    failed, detail = run_check("memory_valid", True, Observed("", [], [], view))
    assert not failed and "/skills/broken.md" in detail
    passed, _ = run_check("memory_valid", "/AGENTS.md", Observed("", [], [], view))
    assert passed
    store.close()


def test_approve_none_rejects_every_write(scratch: Callable[[], str]) -> None:
    text = """name: rejected
description: with approve none the write is refused and nothing is stored
files: {"/AGENTS.md": "x\\n"}
sessions:
  - turns:
      - user: "save it"
        expect: {tool_called: write_file}
    approve: none
expect:
  max_revisions: 0
  memory_matches: {path: /AGENTS.md, pattern: '^x$'}
"""
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/AGENTS.md", "content": "y\n"})
    model.enqueue_text("could not")
    result = run_scenario(parse(text, "t.yaml"), model, templates=templates.files, db_url=scratch())
    assert all(c.passed for c in result.checks)
    rejected = model.requests[1]["messages"][-1]["content"][0]
    assert rejected.get("is_error") is True


def test_a_model_error_fails_the_scenario_without_a_traceback() -> None:
    from memagent.agent.model import ModelError

    class Failing(ScriptedModel):
        def respond(self, request: ModelRequest, **_: Any) -> Any:
            raise ModelError("the server is down")

    result = run_scenario(SUITE["small-prompt"], Failing(), templates=templates.files)
    assert result.error and "the server is down" in result.error
    assert result.total == SUITE["small-prompt"].checks and result.passed == 0
    assert all("not reached" in c.detail for c in result.checks)


# -- malformed scenarios ------------------------------------------------------------------

BAD: list[tuple[str, int, str]] = [
    ("name: a\ndescription: b\nsessions:\n  - turns:\n      - user: hi\n        expect:\n          answer_matchez: x\n",
     7, "unknown key 'answer_matchez'"),
    ("name: a\ndescription: b\nsessions:\n  - turns:\n      - user: hi\n        expect:\n"
     "          answer_matches: '('\n", 7, "bad regular expression"),
    ("name: a\ndescription: b\nsessions:\n  - turns:\n      - user: hi\n    approve: some\nexpect: {file_exists: /x}\n",
     6, "approve must be one of: all, none"),
    ("name: a\ndescription: b\nsessions:\n  - command: /forget\n", 4, "command must be one of"),
    ("name: a\ndescription: b\nsessions:\n  - turns:\n      - user: hi\n", 1, "checks nothing"),
    ("name: a\ndescription: b\nsessions: [\n", 4, "not valid YAML"),
    ("name: a\ndescription: b\n", 1, "needs 'sessions'"),
    ("name: A B\ndescription: b\nsessions:\n  - turns: [{user: hi}]\nexpect: {file_exists: /x}\n", 1,
     "name must be lowercase"),
    ("name: a\ndescription: b\nsessions:\n  - turns: [{user: hi}]\nexpect:\n  memory_matches: /AGENTS.md\n", 6,
     "give {path: PATH or GLOB, pattern: REGEX}"),
    ("name: a\ndescription: b\nsessions:\n  - turns: [{user: hi}]\nexpect:\n  max_revisions: -1\n", 6,
     "whole number"),
    ("name: a\ndescription: b\nsessions:\n  - turns: [{user: hi}]\nexpect:\n  memory_valid: false\n", 6,
     "memory_valid: give true (every memory file) or a memory path or glob starting with /"),
    ("name: a\ndescription: b\nthreads:\n  - - assistant: hi\nsessions:\n  - turns: [{user: hi}]\n"
     "expect: {file_exists: /x}\n", 4, "alternate user and assistant"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD)
def test_a_malformed_scenario_names_file_line_and_problem(text: str, line: int, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse(text, "bad.yaml")
    assert str(info.value).startswith(f"bad.yaml:{line}: ")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_cli_exits_2_on_a_malformed_scenario(tmp_path: Path, chat_env: None) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD[0][0], "utf-8")
    proc = run("eval", str(bad), "--model", "claude-sonnet-5-5", env={"ANTHROPIC_API_KEY": "k"})
    assert proc.returncode == 2
    assert err(proc).strip() == (f"memagent: {bad}:7: unknown key 'answer_matchez' in the expect of turn 1; allowed: "
                                 "answer_matches, answer_not_matches, memory_matches, memory_not_matches, "
                                 "memory_valid, tool_called, tool_not_called, max_prompt_tokens, max_revisions, "
                                 "file_exists, file_absent")
    assert "Traceback" not in err(proc)
    # The other mistakes end before any work: the same command, run in this process (click's
    # runner), not seven more interpreters. The exit status and stderr are the command's own; an
    # exception other than the exit would be the traceback a person sees.
    lme = str(Path(__file__).parent / "fixtures" / "eval" / "longmemeval_small.json")
    for args in (("nope-not-a-scenario",), ("-k", "zzz-none"), ("--retrieval-only",), ("compare", str(bad)),
                 ("--longmemeval", lme, "--runs", "2"), ("--longmemeval", lme, "--top", "3"), ("--top", "3")):
        result = CliRunner(env={"ANTHROPIC_API_KEY": "k"}).invoke(main, ["eval", *args])
        assert result.exit_code == 2, (args, result.output)
        assert isinstance(result.exception, SystemExit), (args, result.exception)
        assert result.stderr.startswith("memagent: ") and "Traceback" not in result.stderr, (args, result.stderr)


def test_two_scenarios_with_one_name_exit_2_and_the_same_file_twice_runs_once(tmp_path: Path,
                                                                               chat_env: None) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(BASE.format(check="file_exists: /AGENTS.md").replace("name: kinds", "name: small-prompt"),
                    "utf-8")
    proc = run("eval", "--list", "builtin", str(mine))
    assert proc.returncode == 2
    assert err(proc).strip() == (f"memagent: {mine}: scenario name 'small-prompt' is also the name of "
                                 "suite/small-prompt.yaml; give each scenario its own name")
    proc = run("eval", "--list", "small-prompt", "builtin")
    assert proc.returncode == 0, err(proc)
    assert [line.split()[0] for line in out(proc).splitlines()].count("small-prompt") == 1


def test_an_out_file_that_cannot_be_written_exits_2_and_an_earlier_one_is_kept(tmp_path: Path,
                                                                                chat_env: None) -> None:
    proc = run("eval", "-k", "small-prompt", "--model", "claude-sonnet-5-5", "--out",
               str(tmp_path / "no" / "such" / "r.jsonl"), env={"ANTHROPIC_API_KEY": "k"})
    assert proc.returncode == 2 and "Traceback" not in err(proc)
    assert err(proc).startswith("memagent: --out ") and "no folder" in err(proc)
    kept = tmp_path / "kept.jsonl"
    kept.write_text('{"type": "summary", "scenario": "a", "passed": 1, "total": 1}\n', "utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD[0][0], "utf-8")
    proc = run("eval", str(bad), "--model", "claude-sonnet-5-5", "--out", str(kept), env={"ANTHROPIC_API_KEY": "k"})
    assert proc.returncode == 2
    assert kept.read_text("utf-8").startswith('{"type": "summary", "scenario": "a"')


def test_ctrl_c_stops_the_run_with_status_130_and_keeps_what_finished(tmp_path: Path, chat_env: None) -> None:
    import signal
    import subprocess
    import threading

    from tests.cli_helpers import MEMAGENT

    arrived, release = threading.Event(), threading.Event()

    def held(body: dict[str, Any]) -> dict[str, Any]:
        arrived.set()
        release.wait(60)
        return {"text": "late"}

    out_file = tmp_path / "r.jsonl"
    with FakeMessagesAPI() as api:
        api.enqueue_text("fine")
        api.enqueue_callable(held)
        # Run in the suite's order: small-prompt (one request) finishes, transient-not-stored is stopped.
        proc = subprocess.Popen([MEMAGENT, "eval", "-k", "^(small-prompt|transient-not-stored)$", "--model",
                                 "claude-sonnet-5-5", "--out", str(out_file)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "k"})
        try:
            assert arrived.wait(60), "the second scenario's request never came"
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, (stdout.decode(), stderr.decode())
    assert "interrupted" in stderr.decode() and "Traceback" not in stderr.decode()
    rows = [json.loads(line) for line in out_file.read_text("utf-8").splitlines()]
    assert [r["scenario"] for r in rows if r["type"] == "summary"] == ["small-prompt"]
    assert "small-prompt" in stdout.decode() and "transient-not-stored" not in stdout.decode()


@pytest.mark.parametrize(("start", "message"), [
    ("template: nosuch", "bad.yaml: no template named 'nosuch'; choose one of: "),
    ('files: {"/skills/x/SKILL.md": "no frontmatter\\n"}',
     "bad.yaml: a starting file is refused: /skills/x/SKILL.md: line 1: the file must begin with YAML frontmatter"),
])
def test_a_scenario_that_cannot_be_set_up_exits_2_before_any_scenario_runs(start: str, message: str,
                                                                           tmp_path: Path, chat_env: None) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: zz-bad\ndescription: d\n{start}\nsessions:\n  - turns: [{{user: hi}}]\n"
                   "expect: {file_exists: /x}\n", "utf-8")
    with FakeMessagesAPI() as api:
        proc = run("eval", "-k", "small-prompt|zz-bad", "builtin", str(bad), "--model", "claude-sonnet-5-5",
                   env={"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "k"})
        assert api.requests == []  # small-prompt, first in order, never ran
    assert proc.returncode == 2 and out(proc) == ""
    line = err(proc)
    assert line.startswith(f"memagent: {tmp_path}/{message}") and line.count("\n") == 1, line


def test_a_rejected_key_is_a_setup_error_that_stops_the_run_at_once(tmp_path: Path, chat_env: None) -> None:
    with FakeMessagesAPI(require_key="right") as api:
        proc = run("eval", "-k", "bullet|small|past", "--model", "claude-sonnet-5-5", "--out", str(tmp_path / "r"),
                   env={"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "wrong"})
        sent = len(api.requests)
    assert proc.returncode == 2, (out(proc), err(proc))
    assert err(proc) == "memagent: the model cannot be used: ANTHROPIC_API_KEY was rejected (401); check the key\n"
    assert sent == 1  # the first scenario's first request; no other scenario was tried


def test_list_names_the_scenarios_without_a_model(chat_env: None) -> None:
    proc = run("eval", "--list", "-k", "remember")
    assert proc.returncode == 0, err(proc)
    names = [line.split()[0] for line in out(proc).splitlines()]
    assert names == sorted(n for n in SUITE if "remember" in n)


def test_the_cli_exits_2_when_the_model_is_not_set_up(chat_env: None) -> None:
    proc = run("eval", "-k", "small-prompt", "--model", "claude-sonnet-5-5")
    assert proc.returncode == 2
    assert "ANTHROPIC_API_KEY" in err(proc)


# -- the JSONL contract and compare ---------------------------------------------------------


def _result(name: str, passed: list[bool]) -> ScenarioResult:
    from memagent.agent.evals.harness import CheckResult

    r = ScenarioResult(name, 1, tokens=100, seconds=0.5)
    r.checks = [CheckResult(name, "answer_matches", f"answer_matches {i}", "end", p, "d", i + 1, answer="a")
                for i, p in enumerate(passed)]
    return r


def test_the_jsonl_holds_every_check_and_a_summary(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with path.open("w") as f:
        results.write(f, _result("one", [True, False]))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    checks = [r for r in rows if r["type"] == "check"]
    assert len(checks) == 2 and all({"scenario", "check", "passed", "detail"} <= set(r) for r in checks)
    assert isinstance(checks[0]["passed"], bool)
    assert "answer" not in checks[0] and checks[1]["answer"] == "a" and "memory_diff" in checks[1]
    summary = rows[-1]
    assert summary["type"] == "summary"
    assert {k: summary[k] for k in ("scenario", "passed", "total", "tokens", "seconds")} == \
        {"scenario": "one", "passed": 1, "total": 2, "tokens": 100, "seconds": 0.5}


def test_a_failed_memory_check_records_the_memory_diff_and_the_answer(scratch: Callable[[], str]) -> None:
    text = BASE.format(check="memory_matches: {path: /AGENTS.md, pattern: 'bullet'}")
    result = run_scenario(parse(text, "k.yaml"), _scripted(write=True), templates=templates.files, db_url=scratch())
    failed = result.checks[0]
    assert not failed.passed and failed.answer == "hello, short answer"
    assert "-- Keep answers short." in failed.memory_diff and "+- Be brief." in failed.memory_diff


def test_compare_shows_per_scenario_differences(tmp_path: Path) -> None:
    a, b = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    with a.open("w") as f:
        results.write(f, _result("s1", [True, False]))
        results.write(f, _result("s2", [True]))
    with b.open("w") as f:
        results.write(f, _result("s1", [True, True]))
        results.write(f, _result("s3", [False]))
    proc = run("eval", "compare", str(a), str(b))
    assert proc.returncode == 0, err(proc)
    text = out(proc)
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "1/2" in lines["s1"] and "2/2" in lines["s1"] and "better" in lines["s1"]
    assert "now passing: answer_matches 1" in lines["s1"]
    assert "only in before" in lines["s2"] and "only in after" in lines["s3"]
    assert "3 scenario(s) differ" in text
    # A scenario one file lacks shows "-", not 0 tokens; the totals are the shared scenarios'.
    assert lines["s2"].split()[1:5] == ["1/1", "-", "100", "->"] and lines["s2"].split()[5] == "-"
    assert lines["total"].split()[1:3] == ["1/2", "2/2"] and "2 in one only, left out" in lines["total"]


def test_compare_fails_when_a_scenario_got_worse_and_has_its_own_help(tmp_path: Path) -> None:
    a, b = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    with a.open("w") as f:
        results.write(f, _result("s1", [True, True]))
        results.write(f, _result("s2", [True]))
    with b.open("w") as f:
        results.write(f, _result("s1", [True, False]))
        results.write(f, _result("s2", [True]))
    proc = run("eval", "compare", str(a), str(b))
    assert proc.returncode == 1, out(proc)
    assert "worse" in next(line for line in out(proc).splitlines() if line.startswith("s1 "))
    assert "1 scenario(s) got worse" in err(proc)
    assert run("eval", "compare", str(b), str(a)).returncode == 0  # the other way round it got better
    helped = run("eval", "compare", "--help")
    assert helped.returncode == 0 and out(helped).startswith("Usage: memagent eval compare A.jsonl B.jsonl")
    assert "Totals count only the\n  scenarios both files ran" in out(helped)


def test_compare_shows_tokens_a_run_when_the_files_ran_different_counts(tmp_path: Path) -> None:
    a, b = tmp_path / "three.jsonl", tmp_path / "one.jsonl"
    with a.open("w") as f:
        for _ in range(3):
            results.write(f, _result("s1", [True]))
    with b.open("w") as f:
        results.write(f, _result("s1", [True]))
    proc = run("eval", "compare", str(a), str(b))
    assert proc.returncode == 0, err(proc)
    s1 = next(line for line in out(proc).splitlines() if line.startswith("s1 "))
    assert s1.split()[1:] == ["3/3", "1/1", "100", "->", "100", "runs", "3", "->", "1"], s1
    assert "no scenario differs in checks passed" in out(proc)


# -- the whole suite through the real CLI over HTTP ----------------------------------------


def _oracle_answer(oracle: OracleModel) -> Any:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        system = body.get("system") or []
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        response = oracle.respond(ModelRequest(system=blocks, messages=body["messages"], tools=body.get("tools", [])))
        return {"content": response.content, "stop_reason": response.stop_reason}

    return answer


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


# The suite's MCP scenario starts a real server, which on a loaded machine can take longer
# than the 10 s default connect timeout; the scenario would then run without its tools. The
# wait ends when the server is up, so a long bound costs nothing on a quiet machine.
SERVER_START = "600"


def test_the_builtin_suite_runs_through_the_cli_on_the_messages_api(tmp_path: Path, chat_env: None) -> None:
    out_file = tmp_path / "results.jsonl"
    with FakeMessagesAPI() as api:
        answer = _oracle_answer(OracleModel())
        for _ in range(600):
            api.enqueue_callable(answer)
        proc = run("eval", "--model", "claude-sonnet-5-5", "--out", str(out_file),
                   env={"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "test-key",
                        "MEMAGENT_MCP_TIMEOUT": SERVER_START}, timeout=1800)
        assert api.requests
    assert proc.returncode == 0, out(proc)[-2000:] + err(proc)[-2000:]
    rows = _jsonl(out_file)
    summaries = {r["scenario"]: r for r in rows if r["type"] == "summary"}
    assert set(summaries) == set(SUITE)
    assert all(s["passed"] == s["total"] > 0 and s["tokens"] > 0 for s in summaries.values())
    table = out(proc)
    assert table.splitlines()[0].split() == ["scenario", "checks", "tokens", "cost", "time"]
    assert "total" in table and "FAIL" not in table
    assert "[#" not in err(proc) and "eval  [" not in err(proc)  # no progress bar: stderr is not a terminal


def test_the_builtin_suite_runs_through_the_cli_on_an_openai_compatible_server(
        tmp_path: Path, migrated_sqlite_template: Path, chat_env: None) -> None:
    out_file = tmp_path / "results.jsonl"
    # Every run in a new agent of one scratch database (--scratch-db, a copy of conftest's migrated
    # template) instead of a new SQLite file migrated per run (0.4-0.6 s each); the default, a file
    # per run, is what the Messages API run above takes.
    scratch_db = tmp_path / "scratch.db"
    shutil.copyfile(migrated_sqlite_template, scratch_db)
    with FakeOpenAIAPI() as api:
        for _ in range(400):
            api.enqueue_callable(lambda body: "Fine.")
        proc = run("eval", "--model", "openai/gpt-test", "--out", str(out_file),
                   "--scratch-db", f"sqlite:///{scratch_db}",
                   env={"OPENAI_BASE_URL": api.base_url, "OPENAI_API_KEY": "test-key",
                        "MEMAGENT_MCP_TIMEOUT": SERVER_START}, timeout=1800)
    # Mechanics: a model that answers "Fine." to everything runs every scenario and fails checks.
    assert proc.returncode == 1, err(proc)[-2000:]
    rows = _jsonl(out_file)
    assert {r["scenario"] for r in rows if r["type"] == "summary"} == set(SUITE)
    assert any(r["type"] == "check" and r["passed"] is False for r in rows)
    assert "failed:" in out(proc)


def test_a_progress_bar_shows_on_a_terminal(chat_env: None) -> None:
    import os

    import pexpect

    from tests.cli_helpers import MEMAGENT
    from tests.pty_helpers import Screen

    with FakeMessagesAPI() as api:
        answer = _oracle_answer(OracleModel())
        for _ in range(20):
            api.enqueue_callable(answer)
        env = {**os.environ, "ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "test-key"}
        child = pexpect.spawn(MEMAGENT, ["eval", "-k", "small-prompt|subagent-used", "--model", "claude-sonnet-5-5"],
                              env=env, dimensions=(40, 120), encoding="utf-8")
        screen = Screen(child)
        end = screen.wait_for("eval  [")
        end = screen.wait_for("]  2/2", after=end)
        screen.wait_for("total", after=end)
        assert screen.finish() == 0


def test_files_go_over_the_template(scratch: Callable[[], str]) -> None:
    text = """name: overlay
description: a template with one file replaced
template: assistant
files: {"/AGENTS.md": "# Mine\\n"}
sessions:
  - turns: [{user: "hi"}]
expect:
  memory_matches: {path: /AGENTS.md, pattern: '^# Mine$'}
  file_exists: /skills/meeting-notes.md
"""
    model = ScriptedModel()
    model.enqueue_text("hello")
    result = run_scenario(parse(text, "o.yaml"), model, templates=templates.files, db_url=scratch())
    assert [c.passed for c in result.checks] == [True, True]


def test_an_unknown_template_is_a_setup_error() -> None:
    from memagent.agent.evals.harness import SetupError

    text = "name: t\ndescription: d\ntemplate: nope\nsessions:\n  - turns: [{user: hi}]\nexpect: {file_exists: /x}\n"
    with pytest.raises(SetupError, match="no template named 'nope'"):
        run_scenario(parse(text, "t.yaml"), ScriptedModel(), templates=templates.files)


def test_a_local_model_runs_through_ollama(tmp_path: Path, chat_env: None) -> None:
    from bench.fake_openai_api import OllamaModel

    out_file = tmp_path / "local.jsonl"
    with FakeOpenAIAPI(ollama_models=[OllamaModel("qwen3:8b", num_ctx=16384)]) as api:
        for _ in range(20):
            api.enqueue_callable(lambda body: "- lunch is at noon\n- bring the slides")
        proc = run("eval", "-k", "small-prompt", "--model", "ollama/qwen3:8b", "--out", str(out_file),
                   env={"OLLAMA_HOST": api.root_url})
        # A local model the server does not have is refused before any scenario runs: a set-up error.
        refused = run("eval", "-k", "small-prompt", "--model", "ollama/gemma3:1b", env={"OLLAMA_HOST": api.root_url})
    assert proc.returncode == 0, err(proc)
    summary = [r for r in _jsonl(out_file) if r["type"] == "summary"]
    assert [(s["scenario"], s["passed"], s["total"], s["cost_usd"]) for s in summary] == \
        [("small-prompt", 2, 2, None)]  # no price is known for a local model
    assert "unknown" in out(proc)
    assert refused.returncode == 2 and "ollama" in err(refused)
