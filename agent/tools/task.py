"""The ``task`` tool: hands a self-contained job to a subagent from ``/subagents/``.

The provider only describes and dispatches; running the subagent is the runner's
job (``memagent.agent.subagents``), which the session builder passes in. Subagents
get no ``task`` provider, so nesting stops at one level. In the compact profile (small
local models) the tool is offered only while ``/subagents/`` holds a file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memagent.agent.tools.base import ToolResult, schema

TaskRunner = Callable[[str, str], ToolResult]

TASK_DEFINITION: dict[str, Any] = {
    "name": "task",
    "description": "Run a subagent from /subagents/ on a self-contained task; it works with its own "
                   "tools and instructions and returns its final answer.",
    "input_schema": schema({"subagent": {"type": "string", "description": "The subagent's name."},
                            "description": {"type": "string",
                                            "description": "The whole task, with every detail it needs."}},
                           ["subagent", "description"]),
}

# For a small model's prompt (the compact profile).
COMPACT_TASK_DEFINITION: dict[str, Any] = {
    "name": "task",
    "description": "Run a subagent from /subagents/ on a self-contained task; returns its answer.",
    "input_schema": schema({"subagent": {"type": "string"}, "description": {"type": "string"}},
                           ["subagent", "description"]),
}


class TaskTool:
    """``ToolProvider`` of the one ``task`` tool."""

    def __init__(self, runner: TaskRunner, *, compact: bool = False,
                 has_subagents: Callable[[], bool] | None = None) -> None:
        self.runner = runner
        self.compact = compact
        self.has_subagents = has_subagents

    def definitions(self) -> list[dict[str, Any]]:
        if self.compact:
            # A small model offered ``task`` with no subagent to run invents one (measured on the
            # bundled local model); the tool appears once /subagents/ holds a file.
            return [COMPACT_TASK_DEFINITION] if self.has_subagents is None or self.has_subagents() else []
        return [TASK_DEFINITION]

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        return self._task(**args)

    def _task(self, subagent: str, description: str) -> ToolResult:
        return self.runner(subagent, description)
