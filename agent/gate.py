"""The approval gate: the single place where a person says yes or no to a memory edit.

The core never prompts. A tool provider builds an ``ApprovalRequest`` (operation,
path, unified diff) and asks the gate; the gate asks the ``Approver`` callback the
front end passed in. Invariants:
- in yolo mode, or after "always" in this session, the callback is not called and
  the revision records ``yolo`` (resp. ``human`` for a session-wide yes);
- without a callback every request is refused, so a misconfigured caller can
  never write silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memagent.agent.tools.base import ApprovalRequest, Outcome


@dataclass(frozen=True)
class Decision:
    kind: Literal["approve", "reject", "always"]
    feedback: str = ""

    @staticmethod
    def parse(answer: str) -> Decision | None:
        """``y``/``yes``, ``n``/``no``, ``n: feedback``, ``a``/``always``; None if unclear."""
        text = answer.strip()
        head, sep, rest = text.partition(":")
        word = head.strip().lower()
        if word in ("y", "yes") and not sep:
            return Decision("approve")
        if word in ("a", "always") and not sep:
            return Decision("always")
        if word in ("n", "no"):
            return Decision("reject", rest.strip())
        return None


Approver = Callable[[ApprovalRequest], Decision]


class Gate:
    """``tools.base.Approvals`` over a person's ``Approver`` callback."""

    def __init__(self, approve: Approver | None = None, *, yolo: bool = False) -> None:
        self.approve = approve
        self.yolo = yolo
        self.always = False

    def check(self, request: ApprovalRequest) -> Outcome:
        if self.yolo:
            return Outcome(True, "yolo")
        if self.always:
            return Outcome(True, "human")
        if self.approve is None:
            return Outcome(False, "human", "no one is available to approve memory edits")
        decision = self.approve(request)
        if decision.kind == "always":
            self.always = True
            return Outcome(True, "human")
        if decision.kind == "approve":
            return Outcome(True, "human")
        return Outcome(False, "human", decision.feedback)
