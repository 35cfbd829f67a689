"""What every tool provider shares: results, the provider interface, approval requests.

A tool provider is any object with ``definitions()`` (the tools it offers, in the
Messages API's ``name`` / ``description`` / ``input_schema`` shape) and
``run(name, args)``; ``ToolBox`` merges providers. Invariants:
- Errors are values: a provider returns ``ToolResult(is_error=True)`` with a text
  that says how to fix the call; it raises only for programming errors.
- A provider that changes anything asks an ``Approvals`` object first (the gate,
  ``memagent.agent.gate.Gate``); whether and how a person is asked is the front
  end's business, never the provider's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from memagent.vfs import Approval, PendingChange

Op = Literal["write", "edit", "delete", "move", "tool"]


@dataclass(frozen=True)
class ToolResult:
    """``content`` is the result as text (what the terminal shows and the thread's
    event log keeps); ``blocks``, when set, is what the model receives instead: a
    list of Messages API content blocks (text and image), e.g. from an MCP tool.
    ``data``, when set, is a small JSON object for programs rather than the model
    (the file tools' ``{"path", "version"}``; the MCP server sends it as ``_meta``);
    the model never sees it, so ``content`` must say the same."""

    content: str
    is_error: bool = False
    blocks: tuple[dict[str, Any], ...] | None = None
    data: Mapping[str, Any] | None = None

    def model_content(self) -> str | list[dict[str, Any]]:
        """The ``content`` of the ``tool_result`` block sent to the model."""
        return [dict(b) for b in self.blocks] if self.blocks else self.content


class ToolProvider(Protocol):
    """A source of tools for the model."""

    def definitions(self) -> list[dict[str, Any]]:
        """The tools offered, as the Messages API takes them."""
        ...

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run ``name`` (one of ``definitions()``) with the model's arguments."""
        ...


@dataclass(frozen=True)
class ApprovalRequest:
    """What a person is asked to approve: an operation on a path, with its diff."""

    op: Op
    path: str
    diff: str
    new_file: bool = False
    detail: str = ""  # e.g. the destination of a move, or a tool's server/name
    note: str = ""  # something the person should know before answering (e.g. an unreachable server)
    reason: str = ""  # the model's one-line reason for the change, kept as the revision's message

    @classmethod
    def for_change(cls, pending: PendingChange) -> ApprovalRequest:
        return cls(pending.op, pending.shown, pending.diff, new_file=pending.new_file)

    @property
    def title(self) -> str:
        verb = {"write": "create" if self.new_file else "overwrite", "edit": "edit",
                "delete": "delete", "move": "move", "tool": "call"}[self.op]
        return f"{verb} {self.path}" + (f" -> {self.detail}" if self.op == "move" else "")


@dataclass(frozen=True)
class Outcome:
    """The gate's answer: whether to go ahead, how it was approved, and why not."""

    approved: bool
    approval: Approval
    feedback: str = ""


class Approvals(Protocol):
    """The approval gate as tools see it."""

    def check(self, request: ApprovalRequest) -> Outcome: ...


def schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A closed JSON Schema object for a tool's input."""
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def describe_call(name: str, args: dict[str, Any]) -> str:
    """A compact one-line rendering of a tool call for the terminal."""
    if name == "task":
        what = " ".join(str(args.get("description", "")).split())
        what = what if len(what) <= 80 else what[:79] + "…"
        return f"task({args.get('subagent', '')})" + (f" {what}" if what else "")
    if name.startswith("mcp__"):
        shown = json.dumps(args, ensure_ascii=False)
        return f"{name}({shown[:120] + '…' if len(shown) > 120 else shown})"
    main = args.get("file_path") or args.get("pattern") or args.get("query") or args.get("path") or ""
    if name == "search_memory" and main:
        main = json.dumps(str(main)[:80], ensure_ascii=False)  # a query reads as a quoted phrase
    extra = {k: v for k, v in args.items() if k not in ("file_path", "content", "old_string",
                                                         "new_string", "pattern", "query") and v}
    tail = " " + json.dumps(extra, ensure_ascii=False) if extra else ""
    return f"{name}({main}){tail}"
