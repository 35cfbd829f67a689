"""``python -m bench prompts``: what every template's first request costs before the user says a word.

For each starter template (``skills_templates/templates/``) a fresh agent is made
from it in a temporary SQLite store, built the way the chat builds one
(``build_agent``: file tools, ``search_memory``, ``task``; no MCP servers), and
sent one turn through the scripted model. The table gives, in tokens, the base
instructions (``prompts/system.md``), the template's memory as the prompt shows
it (AGENTS.md and the skills/subagents indexes), the tool definitions, and the
total of system prompt plus tools: the fixed part of every request; then the same
total under the compact profile, what a small local model is sent (issue 37). With
``--out`` (by default ``bench/RESULTS.md``) it replaces the "prompt_sizes"
section of that file and nothing else.

Invariants:
- The figures are of the request the model is actually sent (the scripted
  model's record of it), not of the files; the budget of the small-window
  profile (``BUDGET``, issue 24: ≤ 3,000 tokens for ``assistant``) is judged on
  the project's own estimator, ``agent.context.estimate``, which
  ``tests/test_prompt_budget.py`` holds it to, as it holds the compact profile to
  ``COMPACT_BUDGET`` (≤ 1,500 tokens for ``assistant``).
- A real tokenizer's column is added when one is installed that works offline
  (``bpe-openai``: OpenAI's o200k_base, with its tables inside the wheel;
  ``tiktoken`` downloads its tables at first use, so it is not used). Claude's
  current tokenizer is not published; local models' differ again, so the column
  is an independent check of the estimator, not the model's own count.
- Deterministic: inputs are the repository's own files.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import sections
from memagent.agent.builder import build_agent
from memagent.agent.cli import templates
from memagent.agent.context import estimate
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.prompt import Profile, base_instructions
from memagent.vfs import open_store
from memagent.vfs.scopes import AgentView

AGENT = "assistant"
BUDGET = 3_000  # tokens: base prompt + tools of the assistant template (issue 24)
COMPACT_BUDGET = 1_500  # tokens: the same under the compact profile, for small local models (issue 37)
WINDOW = 8_192  # the local model's window the budget is for
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

Counter = Callable[[str], int]


@dataclass(frozen=True)
class Request:
    """The fixed part of a first request: system blocks and tool definitions, as sent."""

    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]

    @property
    def system_text(self) -> str:
        return "\n".join(str(b.get("text", "")) for b in self.system)

    @property
    def tools_json(self) -> str:
        return json.dumps(self.tools, ensure_ascii=False)


@dataclass(frozen=True)
class Size:
    """Tokens by one counter: base instructions, the template's memory, tools, and their total."""

    base: int
    memory: int
    tools: int

    @property
    def total(self) -> int:
        return self.base + self.memory + self.tools


def first_request(template: str, agent: str = AGENT, profile: Profile = "full") -> Request:
    """The system prompt and tools of the first request of a new agent made from ``template``
    (``profile``: the prompt profile, as ``builder.profile_of`` would pick it for a small model)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/prompt.db")
        try:
            store.create_agent(agent, templates.files(template))
            model = ScriptedModel()
            model.enqueue_text("Hello.")
            build_agent(AgentView(store, agent), model, yolo=True, profile=profile).turn("Hello")
        finally:
            store.close()
    sent = model.requests[0]
    return Request(sent["system"], sent["tools"])


def estimated(request: Request, agent: str = AGENT, profile: Profile = "full") -> Size:
    """By the project's estimator (what the context budget counts with): the system blocks and
    the tool list as structures, the base instructions' share as text."""
    system = estimate(request.system)
    base = min(estimate(base_instructions(agent, profile)), system)
    return Size(base, system - base, estimate(request.tools))


def counted(request: Request, count: Counter, agent: str = AGENT, profile: Profile = "full") -> Size:
    """By a tokenizer over the text the model reads: the system text and the tools as JSON."""
    system = count(request.system_text)
    base = min(count(base_instructions(agent, profile)), system)
    return Size(base, system - base, count(request.tools_json))


def tokenizer() -> tuple[str, Counter] | None:
    """An offline real tokenizer (o200k_base from ``bpe-openai``) and its name, or None."""
    try:
        import bpe_openai  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    enc = bpe_openai.get_encoding("o200k_base")
    return "o200k_base (bpe-openai)", lambda text: len(enc.encode(text))


def table(names: list[str] | None = None) -> str:
    names = names if names is not None else templates.names()
    real = tokenizer()
    head = "| template | base instructions | template memory | tools | system + tools | compact: system + tools |"
    rule = "|---|---|---|---|---|---|"
    if real is not None:
        head += f" system + tools, {real[0]} | compact, {real[0]} |"
        rule += "---|---|"
    rows = []
    for name in names:
        request = first_request(name)
        size = estimated(request)
        small_request = first_request(name, profile="compact")
        compact = estimated(small_request, profile="compact")
        row = f"| {name} | {size.base:,} | {size.memory:,} | {size.tools:,} | {size.total:,} | {compact.total:,} |"
        if real is not None:
            row += (f" {counted(request, real[1]).total:,} |"
                    f" {counted(small_request, real[1], profile='compact').total:,} |")
        rows.append(row)
    assistant = estimated(first_request("assistant")).total if "assistant" in names else None
    small = (estimated(first_request("assistant", profile="compact"), profile="compact")
             if "assistant" in names else None)
    verdict = "" if assistant is None or small is None else (
        f"\n\n`assistant`: {assistant:,} tokens against the small-window budget of {BUDGET:,} "
        f"({'met' if assistant <= BUDGET else 'missed'}), leaving {WINDOW - assistant:,} of an "
        f"{WINDOW:,}-token window for memory, the conversation and the answer. "
        f"Under the compact profile (what local models get: base instructions {small.base:,}, "
        f"template memory {small.memory:,}, tools {small.tools:,}): {small.total:,} tokens against its budget "
        f"of {COMPACT_BUDGET:,} ({'met' if small.total <= COMPACT_BUDGET else 'missed'}).")
    real_note = ("" if real is not None else
                 " No offline tokenizer is installed (`pip install bpe-openai` adds an o200k_base column).")
    return ("## Prompt sizes (tokens)\n\n"
            "Generated by `python -m bench prompts`: the first request of a new agent made from each template "
            "(`build_agent`: file tools, `search_memory`, `task`; no MCP servers), counted by the context "
            "budget's estimator (`agent.context.estimate`), which `tests/test_prompt_budget.py` holds "
            f"`assistant` to.{real_note}\n\n"
            + head + "\n" + rule + "\n" + "\n".join(rows) + verdict + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench prompts", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(RESULTS), help="file whose prompt_sizes section to replace; - prints only")
    ap.add_argument("--templates", default="", help="comma-separated template names (default: all)")
    args = ap.parse_args(argv)
    names = [n for n in args.templates.split(",") if n] or None
    body = table(names)
    print(body)
    if args.out != "-":
        sections.write(args.out, "prompt_sizes", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
