"""Building an in-process agent over a real store with the scripted model."""

from __future__ import annotations

from dataclasses import dataclass, field

from memagent.agent.builder import build_agent
from memagent.agent.gate import Decision
from memagent.agent.loop import Agent
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.tools import ApprovalRequest
from memagent.vfs import SqlStore
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView


@dataclass
class Approver:
    """Answers approval requests from a script and records what it was asked."""

    answers: list[Decision] = field(default_factory=list)
    asked: list[ApprovalRequest] = field(default_factory=list)

    def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.answers.pop(0)


def make_agent(store: SqlStore, *, answers: list[Decision] | None = None, yolo: bool = False,
               max_steps: int = 25) -> tuple[Agent, ScriptedModel, Approver]:
    approver = Approver(list(answers or []))
    view = AgentView(store, "a", user="tester")
    model = ScriptedModel()
    agent = build_agent(view, model, approve=approver, yolo=yolo, threads=ThreadStore(store.engine),
                        max_steps=max_steps)
    return agent, model, approver


def last_tool_result(model: ScriptedModel, index: int = -1) -> dict[str, object]:
    """The tool_result block the model received in request ``index``."""
    message = model.requests[index]["messages"][-1]
    assert message["role"] == "user"
    blocks = [b for b in message["content"] if b.get("type") == "tool_result"]
    assert blocks, message
    return blocks[-1]


def system_text(model: ScriptedModel, index: int = -1) -> str:
    return "".join(b["text"] for b in model.requests[index]["system"])
