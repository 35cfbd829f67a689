"""Tool providers and the ``ToolBox`` that merges them.

``base`` holds what every provider shares (``ToolResult``, the ``ToolProvider``
protocol, approval requests); each provider is a module of its own: ``memory``
(the file tools), ``task`` (subagents). A new kind of tool is a new module here
and one more provider handed to ``ToolBox``, never an edit of another provider.
May import: ``vfs`` and ``validators``; never the core (``memagent.agent.loop`` and
friends), chat or CLI layers: the core reaches tools, not the other way round.
"""

from memagent.agent.tools.base import ApprovalRequest, Outcome, ToolProvider, ToolResult, describe_call
from memagent.agent.tools.memory import MUTATING, READ_ONLY, ChangeLog, MemoryTools, RuledApproval
from memagent.agent.tools.task import TaskTool
from memagent.agent.tools.toolbox import ToolBox

__all__ = ["MUTATING", "READ_ONLY", "ApprovalRequest", "ChangeLog", "MemoryTools", "Outcome",
           "RuledApproval", "TaskTool", "ToolBox", "ToolProvider", "ToolResult", "describe_call"]
