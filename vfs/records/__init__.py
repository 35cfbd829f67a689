"""Agent records: threads, the review queue, approval rules and conversation files.

threads.py (``ThreadStore``: a conversation's messages, tool calls, approvals, usage and
running summary), queue.py (``ProposalStore``: reflection runs and the review queue of
proposed memory edits), rules.py (``RuleBook``: per-agent allow/ask/queue/deny rules),
episodes.py (how a thread is rendered as one Markdown file) and conversation_files.py
(the one writer of those files, scope ``conversations:<agent>``). Invariants:

- Nothing is deleted: a failed turn is kept and marked; summaries are only added.
- A conversation file is derived data (no revisions, no validation), re-renderable from
  ``messages``; episodes.py is the only place that turns a message into text.
- The rules are kept outside memory (a ``settings:`` scope no view mounts) and written
  only by ``RuleBook``, through the write entrance (``vfs/entrance.py``).
- One reflection run per agent at a time; a proposal keeps the version its file was at.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memagent.vfs.lazy import face

if TYPE_CHECKING:
    from memagent.vfs.records.episodes import built_in_message, render_message, typed_part
    from memagent.vfs.records.queue import (
        INTEGRATION_PREFIX,
        QUEUED_BY,
        Busy,
        NewProposal,
        Proposal,
        ProposalOp,
        ProposalStore,
        ThreadMessage,
    )
    from memagent.vfs.records.rules import (
        MCP_PREFIX,
        RULES_PATH,
        TOOL_OF_OP,
        Action,
        FileTool,
        Match,
        Rule,
        RuleBook,
        RuleError,
        parse_rule,
    )
    from memagent.vfs.records.threads import ThreadStore

# Public name -> its module in this package, imported on first use (PEP 562, as
# vfs/__init__.py does), so importing one module of the package loads no other.
_LAZY: dict[str, str] = {
    "built_in_message": "episodes",
    "render_message": "episodes",
    "typed_part": "episodes",
    "Busy": "queue",
    "INTEGRATION_PREFIX": "queue",
    "NewProposal": "queue",
    "Proposal": "queue",
    "ProposalOp": "queue",
    "ProposalStore": "queue",
    "QUEUED_BY": "queue",
    "ThreadMessage": "queue",
    "Action": "rules",
    "FileTool": "rules",
    "MCP_PREFIX": "rules",
    "Match": "rules",
    "RULES_PATH": "rules",
    "Rule": "rules",
    "RuleBook": "rules",
    "RuleError": "rules",
    "TOOL_OF_OP": "rules",
    "parse_rule": "rules",
    "ThreadStore": "threads",
}

if not TYPE_CHECKING:
    __getattr__ = face(__name__, _LAZY, globals())


__all__ = ["Action", "Busy", "FileTool", "INTEGRATION_PREFIX", "MCP_PREFIX", "Match", "NewProposal", "Proposal",
           "ProposalOp", "ProposalStore", "QUEUED_BY", "RULES_PATH", "Rule", "RuleBook", "RuleError", "TOOL_OF_OP",
           "ThreadMessage", "ThreadStore", "built_in_message", "parse_rule", "render_message", "typed_part"]
