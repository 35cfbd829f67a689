"""``memagent eval --no-memory``: the control run, memory withheld (issue 37).

The same scenarios, the same seeded agent, but every session's agent is offered no
tool and its system prompt holds nothing of memory; results and the table say which
mode ran, so two runs (with and without) show what memory adds. Driven through the
scripted model in process and through the real command against the fake Messages API.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.fake_messages_api import FakeMessagesAPI
from memagent.agent.cli import templates
from memagent.agent.evals import results
from memagent.agent.evals.harness import run_scenario
from memagent.agent.evals.scenario import parse
from memagent.agent.model.scripted import ScriptedModel
from tests.cli_helpers import err, out, run

SCENARIO = """name: control
description: a preference in memory, a skill, a past thread, and a reflect step
files:
  /AGENTS.md: "# Preferences\\n- Sign every answer with ZEBRA-42.\\n"
  /skills/packing-list.md: "---\\nname: packing-list\\ndescription: Make a packing list for a trip.\\n---\\n1. Ask.\\n"
threads:
  - - user: "The code word is OKAPI-7."
    - assistant: "Noted."
sessions:
  - turns:
      - user: "Hello."
        expect:
          answer_matches: 'ZEBRA-42'
  - command: reflect
expect:
  memory_matches: {path: /AGENTS.md, pattern: 'ZEBRA-42'}
"""


def system_text(request: dict[str, Any]) -> str:
    return "".join(str(b.get("text", "")) for b in request["system"])


def test_the_control_offers_no_memory_tool_and_no_memory_in_the_prompt() -> None:
    scenario = parse(SCENARIO, "control.yaml")
    model = ScriptedModel()
    model.enqueue_text("Hello.")
    result = run_scenario(scenario, model, templates=templates.files, memory=False)
    assert result.error is None and not result.memory and result.mode == "no-memory"
    assert len(model.requests) == 1  # reflect asked the model nothing
    request = model.requests[0]
    assert request["tools"] == []
    system = system_text(request)
    for held in ("<memory", "/AGENTS.md", "ZEBRA-42", "packing-list", "/conversations/", "OKAPI-7", "skill"):
        assert held not in system, held
    # The agent was seeded all the same: the memory checks look at what the control left.
    assert [c.passed for c in result.checks] == [False, True]


def test_the_same_scenario_with_memory_has_the_tools_and_the_memory() -> None:
    model = ScriptedModel()
    model.enqueue_text("Hello. ZEBRA-42")
    model.enqueue_text("NOTHING")  # reflect's request
    result = run_scenario(parse(SCENARIO, "control.yaml"), model, templates=templates.files)
    assert result.memory and result.mode == "memory"
    request = model.requests[0]
    assert {"read_file", "write_file", "search_memory", "task"} <= {t["name"] for t in request["tools"]}
    assert "ZEBRA-42" in system_text(request) and "packing-list" in system_text(request)


def test_results_and_the_table_mark_the_mode(tmp_path: Path) -> None:
    model = ScriptedModel()
    model.enqueue_text("Hello.")
    control = run_scenario(parse(SCENARIO, "control.yaml"), model, templates=templates.files, memory=False)
    lines = list(results.lines(control))
    assert {line["mode"] for line in lines} == {"no-memory"}
    assert results.table([control])[-1].startswith("mode: no-memory")
    with_memory = ScriptedModel()
    with_memory.enqueue_text("ZEBRA-42")
    with_memory.enqueue_text("NOTHING")
    plain = run_scenario(parse(SCENARIO, "control.yaml"), with_memory, templates=templates.files)
    assert {line["mode"] for line in results.lines(plain)} == {"memory"}
    assert not any(line.startswith("mode:") for line in results.table([plain]))
    a, b = tmp_path / "memory.jsonl", tmp_path / "control.jsonl"
    with a.open("w") as f:
        results.write(f, plain)
    with b.open("w") as f:
        results.write(f, control)
    lines_ = results.compare(results.load(a), results.load(b), "memory", "control").lines
    assert lines_[0].split()[:4] == ["scenario", "memory", "control", "(no"]


def test_eval_no_memory_through_the_command(tmp_path: Path, chat_env: None) -> None:
    out_file = tmp_path / "control.jsonl"
    with FakeMessagesAPI() as api:
        for _ in range(20):
            api.enqueue_callable(lambda body: {"content": [{"type": "text", "text": "- Fine."}],
                                               "stop_reason": "end_turn"})
        proc = run("eval", "--no-memory", "-k", "^bullet-points-stick$", "--model", "claude-sonnet-5-5", "--out",
                   str(out_file), env={"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "test-key"},
                   timeout=600)
        sent = list(api.requests)
    assert proc.returncode == 1, err(proc)  # the memory check fails: nothing was learned
    assert sent
    for body in sent:
        assert not body.get("tools")
        system = body.get("system") or []
        text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
        assert "<memory" not in text and "meeting-notes" not in text
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert rows and {r["mode"] for r in rows} == {"no-memory"}
    assert out(proc).splitlines()[0].split() == ["scenario", "checks", "tokens", "cost", "time"]
    assert "mode: no-memory (the control: no memory tools, no memory in the prompt)" in out(proc)


def test_no_memory_is_for_scenarios_not_benchmarks(tmp_path: Path, chat_env: None) -> None:
    data = tmp_path / "locomo10.json"
    data.write_text("[]")
    proc = run("eval", "--no-memory", "--locomo", str(data))
    assert proc.returncode == 2
    assert "--no-memory is the control of scenario runs" in err(proc)


def test_the_control_starts_no_mcp_server(tmp_path: Path) -> None:
    """``/tools.json``'s servers belong to memory: withheld, none of them starts."""
    marker = tmp_path / "started"
    touch = "import pathlib, sys; pathlib.Path(sys.argv[1]).touch()"
    tools = {"mcp_servers": {"probe": {"command": "{python}", "args": ["-c", touch, str(marker)]}},
             "tools": [{"server": "probe", "name": "anything"}]}
    scenario = parse(f"""name: control-mcp
description: a /tools.json server that leaves a file when it starts
files:
  /tools.json: '{json.dumps(tools)}'
sessions:
  - turns:
      - user: "Hello."
        expect:
          answer_matches: 'Hello'
""", "control-mcp.yaml")
    model = ScriptedModel()
    model.enqueue_text("Hello.")
    result = run_scenario(scenario, model, templates=templates.files, memory=False)
    assert result.error is None and model.requests[0]["tools"] == []
    assert not marker.exists()
    # The same scenario with memory starts it (so the file is a real witness).
    model.enqueue_text("Hello.")
    run_scenario(scenario, model, templates=templates.files)
    assert marker.exists()
