"""Wiring one agent: gate, memory tools, the task tool, the loop.

Front ends (chat, tests, benchmarks, later the MCP server) build agents here, so
the core classes stay free of each other: ``Agent`` does not know about
subagents, ``TaskTool`` does not know about the loop; only this module ties the
task tool's runner to ``run_subagent`` for this agent. With an ``McpHub`` the
agent also gets the MCP tools its ``/tools.json`` allows (``tools.mcp.McpTools``),
their section of the system prompt, and the live check of ``/tools.json`` writes.

The prompt profile is decided in one place (``profiles.profile_of``, used here): a model that
declares ``prompt_profile = "compact"`` (the ``local`` provider's models: small, on a
CPU) gets the compact base instructions and tool definitions; every other model
(Anthropic, OpenAI, Ollama, the scripted test model) the full ones, unchanged.
``withhold_memory`` turns a built agent into the control of ``memagent eval
--no-memory``: no tools, nothing of memory in its prompt.
"""

from __future__ import annotations

from collections.abc import Callable

from memagent.agent.gate import Approver, Gate
from memagent.agent.loop import DEFAULT_MAX_STEPS, Agent, Hooks
from memagent.agent.mcp.client import McpHub
from memagent.agent.model import Model
from memagent.agent.profiles import profile_of
from memagent.agent.prompt import NoMemoryPrompt, Profile, PromptBuilder
from memagent.agent.subagents import run_subagent
from memagent.agent.tools import ChangeLog, MemoryTools, RuledApproval, TaskTool, ToolResult
from memagent.agent.tools.mcp import McpTools, Warn
from memagent.agent.tools.memory import agent_rules
from memagent.agent.tools.toolset import tool_box
from memagent.vfs import AgentView, ThreadStore, memory_of


def withhold_memory(agent: Agent) -> None:
    """The control of ``memagent eval --no-memory``: ``agent`` keeps its loop, gate and thread
    but is offered no tool (no file tools, no search, no subagents, no MCP tools of
    ``/tools.json``) and its system prompt holds nothing of memory (``NoMemoryPrompt``)."""
    agent.tools = tool_box("control", agent.memory.view, memory=agent.memory)
    agent.prompt = NoMemoryPrompt(agent.memory.view.agent)


def build_agent(view: AgentView, model: Model, *, gate: Gate | None = None,
                approve: Approver | None = None, yolo: bool = False,
                threads: ThreadStore | None = None, thread_id: str | None = None,
                hooks: Hooks | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                model_factory: Callable[[str], Model] | None = None,
                log: ChangeLog | None = None, mcp_hub: McpHub | None = None,
                warn: Warn | None = None, rules: RuledApproval | None = None,
                mcp_background: bool = False, profile: Profile | None = None) -> Agent:
    """An agent over ``view`` with the file tools and ``task``; edits ask ``gate``
    (default: a new ``Gate(approve, yolo=yolo)``). With ``mcp_hub``, also the MCP
    tools of ``/tools.json`` (connected now, or with ``mcp_background`` started behind
    the caller's back; ``warn`` hears about servers that fail).
    ``rules``: the agent's approval rules, applied before the gate by the file tools,
    the MCP tools and every subagent's file tools (default: the agent's own, read from
    its settings scope at each decision). ``profile``: the prompt profile (default: what
    ``model`` declares, ``profile_of``)."""
    profile = profile if profile is not None else profile_of(model)
    compact = profile == "compact"
    gate = gate if gate is not None else Gate(approve, yolo=yolo)
    if rules is None:
        # Every agent honours its approval rules; a front end passes its own to say how
        # ``ask`` and ``queue`` go (run: unattended) and to hear which rule decided. A store
        # with no database (a double) has no review queue: its ``queue`` rules refuse.
        records = memory_of(view)
        rules = agent_rules(view, records.queue if records is not None else None, by="memagent session")
    mcp = (McpTools(view, mcp_hub, gate, warn=warn, rules=rules, background=mcp_background)
           if mcp_hub is not None else None)
    memory = MemoryTools(view, gate, log=log, check_tools_json=mcp.check_write if mcp else None, rules=rules,
                         compact=compact)
    agent: Agent | None = None

    def run_task(name: str, description: str) -> ToolResult:
        assert agent is not None  # the model cannot call a tool before the agent exists
        return run_subagent(agent, name, description)

    def has_subagents() -> bool:
        return bool(view.glob("subagents/*.md", "/"))

    tools = tool_box("agent", view, memory=memory, compact=compact, mcp=[mcp] if mcp is not None else [],
                     task=TaskTool(run_task, compact=compact, has_subagents=has_subagents))
    prompt = PromptBuilder(view, mcp_lines=mcp.prompt_lines if mcp is not None else None, profile=profile)
    agent = Agent(tools, model, memory=memory, threads=threads,
                  thread_id=thread_id, hooks=hooks, max_steps=max_steps, model_factory=model_factory,
                  prompt=prompt)
    return agent
