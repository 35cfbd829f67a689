"""Which tools each kind of session offers, wired here and only here.

A session is one of ``Kind``: ``agent`` (chat, ``run``, ``eval``, the integrations' loop),
``subagent`` (a ``task`` call), ``serve`` (``memagent mcp serve``), ``reflection``
(``memagent reflect``'s drafting agent) or ``control`` (``eval --no-memory``: no tools).
``KINDS`` says which providers each gets, in the order the model sees them; ``tool_box``
builds that ``ToolBox`` from the providers the caller made (the file tools, with their
gate and rules, are the caller's: each kind approves differently) and the ones made here
(search, history).

Invariants:
- A new kind of tool is one more name in ``KINDS``' rows that should offer it and one
  branch of ``_made``; no front end lists providers itself (``tests/test_toolset.py``
  holds every ``ToolBox`` in the product to this module).
- A subagent never gets ``task`` (it runs no subagent of its own) and reflection never
  gets the real file tools (its drafts become proposals); ``serve`` offers history, the
  others read it through ``fs log``.
- The approval rules every kind applies come from one place too: ``memory.agent_rules``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from memagent.agent.tools.base import ToolProvider
from memagent.agent.tools.history import HistoryTools
from memagent.agent.tools.search import SearchTools
from memagent.agent.tools.toolbox import ToolBox
from memagent.vfs import AgentView

__all__ = ["KINDS", "Kind", "Part", "tool_box"]

Kind = Literal["agent", "subagent", "serve", "reflection", "control"]
Part = Literal["memory", "search", "history", "task", "mcp"]

KINDS: dict[Kind, tuple[Part, ...]] = {
    "agent": ("memory", "search", "task", "mcp"),
    "subagent": ("memory", "search", "mcp"),
    "serve": ("memory", "search", "history"),
    "reflection": ("memory", "search"),  # "memory" is reflection's drafting tools
    "control": (),  # ``memagent eval --no-memory``: the agent is offered no tool at all
}


def tool_box(kind: Kind, view: AgentView, *, memory: ToolProvider, compact: bool = False,
             task: ToolProvider | None = None, mcp: Sequence[ToolProvider] = (),
             allowed: Iterable[str] | None = None) -> ToolBox:
    """The tools of a ``kind`` session over ``view``: ``memory`` is the caller's file tools
    (or reflection's drafts), ``task`` the agent's subagent tool, ``mcp`` the MCP tools of
    ``/tools.json`` (none, or the parent's for a subagent); ``compact`` asks for the small
    model's definitions; ``allowed`` narrows the set (a subagent's ``tools:`` line)."""
    providers: list[ToolProvider] = []
    for part in KINDS[kind]:
        providers.extend(_made(part, view, memory=memory, compact=compact, task=task, mcp=mcp))
    return ToolBox(providers, allowed=allowed)


def _made(part: Part, view: AgentView, *, memory: ToolProvider, compact: bool, task: ToolProvider | None,
          mcp: Sequence[ToolProvider]) -> list[ToolProvider]:
    if part == "memory":
        return [memory]
    if part == "search":
        return [SearchTools(view, compact=compact)]
    if part == "history":
        return [HistoryTools(view)]
    if part == "task":
        return [task] if task is not None else []
    return list(mcp)

