"""The MCP tools ``/tools.json`` allows, as one tool provider; and the live check of a
``/tools.json`` the agent writes.

Invariants:
- The model sees exactly the tools ``/tools.json`` lists whose server is connected
  and offers them, named ``mcp__<server>__<tool>``, with the server's own
  description and input schema. A listed tool the server does not offer is
  reported (a warning, ``/tools``, ``memagent tools``), never invented.
- ``/tools.json`` is re-read before every model request (one ``stat``); when its
  version changed, servers whose settings changed are reconnected, removed ones
  stopped, so an approved edit applies to the very next request.
- Only servers with at least one listed tool are started; the others are
  ``disabled``. A server that fails is a one-line warning and the session goes on.
- With ``background`` (an interactive chat) nothing waits for servers to start: a
  request is sent with the tools of the servers connected by then, never with a
  still-starting server's tools (their schemas are not known yet, and inventing
  them is worse than a later request), and ``note`` says so once per set of
  servers left out. When each server has connected or failed, a line is queued for
  ``events`` and ``on_event`` is called (on the hub's thread) so a front end can
  show it at once; ``events`` hands each line out once. Without ``background`` (scripts, pipes) a request waits for
  the servers, so the same input always sees the same tools.
- ``approval: true`` asks the gate before each call; a rejected call never
  reaches the server and the person's feedback goes back to the model.
- A call returns a result, never raises: a server that is gone, a timeout or a
  protocol error is an ``is_error`` result that says what happened.
"""

from __future__ import annotations

import difflib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memagent.agent.mcp.client import McpCallError, McpHub, ServerState, connect_timeout
from memagent.agent.mcp.config import TOOLS_PATH, ToolRule, ToolsConfig, parse_tools_json, tool_name
from memagent.agent.tools.base import ApprovalRequest, Approvals, ToolResult
from memagent.agent.tools.memory import RuledApproval
from memagent.vfs import AgentView, NotFound, VfsError

log = logging.getLogger("memagent.agent.tools")

PROBE_TIMEOUT = 5.0  # a write of /tools.json waits at most this long per probe round
MAX_ARGS_SHOWN = 20_000  # characters of a call's arguments in the approval panel

Warn = Callable[[str], None]


@dataclass
class ServerReport:
    """One server of ``/tools.json`` as ``/tools`` and ``memagent tools`` show it."""

    name: str
    transport: str
    where: str
    status: str  # connected | starting | failed | disabled
    reason: str = ""
    allowed: list[str] = field(default_factory=list)  # listed and offered (or unchecked)
    approval: list[str] = field(default_factory=list)  # of allowed, those behind the gate
    missing: list[str] = field(default_factory=list)  # listed, not offered
    not_allowed: list[str] = field(default_factory=list)  # offered, not listed

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.transport, "where": self.where, "status": self.status,
                "reason": self.reason, "allowed": self.allowed, "approval": self.approval,
                "missing": self.missing, "not_allowed": self.not_allowed}


def build_report(config: ToolsConfig, states: dict[str, ServerState],
                 disabled: dict[str, str] | None = None) -> list[ServerReport]:
    reports: list[ServerReport] = []
    for name, spec in config.servers.items():
        rules = config.rules_for(name)
        listed = [r.name for r in rules]
        state = states.get(name)
        report = ServerReport(name, spec.transport, spec.where, "disabled",
                              (disabled or {}).get(name, "not started"))
        report.approval = [r.name for r in rules if r.approval]
        if state is None:
            report.allowed = listed
        elif state.status != "connected":
            report.status, report.reason, report.allowed = state.status, state.reason, listed
        else:
            offered = state.offered()
            report.status, report.reason = "connected", ""
            report.allowed = [n for n in listed if n in offered]
            report.missing = [n for n in listed if n not in offered]
            report.not_allowed = [n for n in offered if n not in listed]
        report.approval = [n for n in report.approval if n in report.allowed]
        reports.append(report)
    return reports


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "(none)"


def render_report(reports: list[ServerReport], *, error: str = "") -> str:
    """The report as text for people: a block per server."""
    lines: list[str] = []
    if error:
        lines.append(error)
    if not reports:
        lines.append("No MCP servers: /tools.json declares none." if not error else "No MCP servers are used.")
        return "\n".join(lines)
    for r in reports:
        head = f"{r.name}  {r.status}" + (f": {r.reason}" if r.reason else "")
        lines.append(head)
        lines.append(f"  {r.transport}: {r.where}")
        allowed = [f"{n} (approval)" if n in r.approval else n for n in r.allowed]
        label = "allowed" if r.status == "connected" else "allowed (not checked)"
        lines.append(f"  {label}: {_names(allowed)}")
        if r.missing:
            lines.append(f"  listed but not offered by the server: {_names(r.missing)}")
        if r.status == "connected":
            lines.append(f"  offered, not allowed: {_names(r.not_allowed)}")
    return "\n".join(lines)


def closest(name: str, offered: list[str]) -> list[str]:
    """``offered`` ordered by similarity to ``name``, closest first."""
    ranked = difflib.get_close_matches(name, offered, n=len(offered), cutoff=0.0)
    return ranked + [o for o in offered if o not in ranked]


@dataclass(frozen=True)
class WriteCheck:
    """The live check of a ``/tools.json`` about to be written."""

    refusal: str = ""  # non-empty: refuse the write with this message
    note: str = ""  # shown in the approval panel (unreachable servers)


class McpTools:
    """``ToolProvider`` of the MCP tools one agent's ``/tools.json`` allows."""

    def __init__(self, view: AgentView, hub: McpHub, gate: Approvals, *, warn: Warn | None = None,
                 rules: RuledApproval | None = None, background: bool = False) -> None:
        self.rules = rules
        self.view = view
        self.hub = hub
        self.gate = gate
        self.warn: Warn = warn or (lambda text: log.warning("%s", text))
        self.config = ToolsConfig()
        self.version: int | None = -1  # the /tools.json version loaded; None: there is none
        self.disabled: dict[str, str] = {}
        self._rules: dict[str, ToolRule] = {}
        self.background = background  # start servers without waiting for them (see the module doc)
        self.note: Warn | None = None  # hears that a request went without a starting server's tools
        self.on_event: Callable[[], None] | None = None
        self._events: list[tuple[str, bool]] = []
        self._events_lock = threading.Lock()
        self._left_out: frozenset[str] = frozenset()  # the starting servers last said to be left out

    # -- following /tools.json ------------------------------------------------------------

    def _current_version(self) -> int | None:
        try:
            return self.view.stat(TOOLS_PATH).version
        except NotFound:
            return None

    def refresh(self, *, force: bool = False) -> None:
        """Follow ``/tools.json``: reconnect what changed since it was last read."""
        try:
            version = self._current_version()
            if version == self.version and not force:
                return
            content = self.view.read(TOOLS_PATH).content if version is not None else None
        except VfsError as exc:
            self.warn(f"cannot read {TOOLS_PATH}: {exc}; MCP tools stay as they were")
            return
        self.version = version
        config = parse_tools_json(content)
        if config.error:
            self.warn(f"{config.error}; no MCP server is used until it is fixed")
        self.config = config
        wanted = {r.server for r in config.tools}
        self.disabled = {name: "no tool of it is listed in /tools.json"
                         for name in config.servers if name not in wanted}
        self._rules = {r.qualified: r for r in config.tools}
        specs = [s for n, s in config.servers.items() if n in wanted]
        ready = {n for n, st in self.hub.states().items() if st.status == "connected"}
        if self.background:
            for warning in self.hub.start(specs, on_settled=self._settled):
                self.warn(warning)
        else:
            for warning in self.hub.connect(specs):
                self.warn(warning)
        # A server started in the background is checked when it settles (``_settled``).
        states = self.hub.states()
        for report in build_report(config, states, self.disabled):
            if report.status == "connected" and (not self.background or report.name in ready):
                for line in _missing_lines(report, states):
                    self.warn(line)

    def _settled(self, name: str) -> None:
        """A server started in the background connected or failed (on the hub's thread)."""
        states = self.hub.states()
        report = next((r for r in build_report(self.config, states, self.disabled) if r.name == name), None)
        if report is None or report.status == "starting":
            return  # replaced by a newer /tools.json meanwhile
        if report.status == "failed":
            lines = [(f"MCP server '{name}' failed: {report.reason}; going on without it", True)]
        else:
            tools = ", ".join(report.allowed) or "none of the listed tools"
            lines = [(f"MCP server '{name}' is ready: {tools}", False)]
            lines += [(line, True) for line in _missing_lines(report, states)]
        with self._events_lock:
            self._events += lines
        if self.on_event is not None:
            self.on_event()

    def events(self) -> list[tuple[str, bool]]:
        """The lines about servers that settled since the last call: (text, is a failure)."""
        with self._events_lock:
            taken, self._events = self._events, []
        return taken

    def starting(self) -> list[str]:
        """The servers of ``/tools.json`` still starting, in its order."""
        return [r.name for r in self.reports() if r.status == "starting"]

    def reports(self) -> list[ServerReport]:
        return build_report(self.config, self.hub.states(), self.disabled)

    # -- the provider ---------------------------------------------------------------------

    def definitions(self) -> list[dict[str, Any]]:
        self.refresh()
        states = self.hub.states()
        defs: list[dict[str, Any]] = []
        left_out = frozenset(n for n, st in states.items() if st.status == "starting")
        if left_out and not self.background:
            self.hub.wait(sorted(left_out))
            states, left_out = self.hub.states(), frozenset()
        if self.note is None:
            left_out = frozenset()  # nobody to tell yet (the tool box being built)
        elif left_out and left_out != self._left_out:
            names = ", ".join(f"'{n}'" for n in sorted(left_out))
            plural = "s" if len(left_out) > 1 else ""
            self.note(f"MCP server{plural} {names} still starting: sent without {'their' if plural else 'its'} "
                      "tools; they join the first request after start-up (/tools shows the state)")
        self._left_out = left_out
        for rule in self.config.tools:
            state = states.get(rule.server)
            if state is None or state.status != "connected":
                continue
            tool = state.offered().get(rule.name)
            if tool is None:
                continue
            defs.append({"name": rule.qualified, "description": tool.description or f"{rule.name} ({rule.server})",
                         "input_schema": tool.input_schema})
        return defs

    def run(self, name: str, args: dict[str, Any]) -> ToolResult:
        rule = self._rules.get(name)
        if rule is None:
            return ToolResult(f"{name} is not an MCP tool of this agent", True)
        ask = rule.approval
        if self.rules is not None and not getattr(self.gate, "yolo", False):
            # The agent's approval rules first (``vfs/records/rules.py``); no rule: tools.json's flag.
            found = self.rules.match(name, None, default="ask" if rule.approval else "allow")
            if self.rules.heard is not None and found.rule is not None:
                self.rules.heard(f"approval {found.describe()}: {name}")
            if found.action in ("deny", "queue"):
                why = "cannot be queued for review (a tool call runs now or never)" if found.action == "queue" \
                    else "is denied"
                return ToolResult(f"This call of {name} {why} by approval {found.describe()}; it was not run. "
                                  "Do not retry it: tell the user, who can change the rules with "
                                  "`memagent approval`.", True)
            ask = found.action == "ask"
        if ask:
            outcome = self.gate.check(tool_request(rule, args))
            if not outcome.approved:
                msg = f"The user rejected this call of {name}; it was not run."
                if outcome.feedback:
                    msg += f" Their feedback: {outcome.feedback}"
                return ToolResult(msg, True)
        try:
            out = self.hub.call(rule.server, rule.name, args)
        except McpCallError as exc:
            state = self.hub.states().get(rule.server)
            if state is not None and state.status == "failed":
                self.warn(str(exc))  # the server died: say so once, its tools are gone from now on
            return ToolResult(str(exc), True)
        return ToolResult(out.text, out.is_error, tuple(out.blocks) if out.blocks else None)

    # -- the system prompt ------------------------------------------------------------------

    def prompt_lines(self) -> list[str]:
        """One line per connected server with the tools the model may call."""
        self.refresh()  # the prompt is built before the tool list: follow /tools.json first
        lines: list[str] = []
        unavailable: list[str] = []
        starting: list[str] = []
        for r in self.reports():
            if r.status == "connected" and r.allowed:
                tools = ", ".join(tool_name(r.name, t) for t in r.allowed)
                lines.append(f"- {r.name}: {tools}")
            elif r.status == "failed":
                unavailable.append(r.name)
            elif r.status == "starting":
                starting.append(r.name)
        if starting:
            lines.append(f"- (still starting, their tools come later: {', '.join(starting)})")
        if unavailable:
            lines.append(f"- (not available in this session: {', '.join(unavailable)})")
        return lines

    # -- checking a /tools.json the agent writes ----------------------------------------------

    def check_write(self, content: str) -> WriteCheck:
        """Probe the servers a new ``/tools.json`` names: a listed tool that a reachable
        server does not offer refuses the write; an unreachable server adds a note."""
        config = parse_tools_json(content)
        if config.error:
            return WriteCheck()  # the validator already refused it
        wanted = {r.server for r in config.tools}
        live = self.hub.states()
        known: dict[str, ServerState] = {}
        to_probe = []
        for name in sorted(wanted):
            spec = config.servers[name]
            current = self.config.servers.get(name)
            state = live.get(name)
            same = current is not None and self.hub.resolve(current)[0].key() == self.hub.resolve(spec)[0].key()
            if same and state is not None and state.status == "starting":
                # The session's own copy is starting: check against it, not a second one.
                self.hub.wait([name], timeout=min(connect_timeout(), PROBE_TIMEOUT))
                state = self.hub.states().get(name)
            if same and state is not None and state.status in ("connected", "starting"):
                known[name] = state
            else:
                to_probe.append(spec)
        if to_probe:
            known.update(self.hub.probe(to_probe, timeout=min(connect_timeout(), PROBE_TIMEOUT)))
        wrong: list[str] = []
        notes: list[str] = []
        for name in sorted(wanted):
            state = known.get(name)
            if state is None or state.status != "connected":
                why = (state.reason or "still starting") if state is not None else "not checked"
                notes.append(f"MCP server '{name}' could not be reached to check its tools ({why}); "
                             "its tools are not checked")
                continue
            offered = [t.name for t in state.tools]
            for rule in config.rules_for(name):
                if rule.name not in state.offered():
                    wrong.append(f"'{rule.name}' on server '{name}' (it offers: "
                                 f"{_names(closest(rule.name, offered)[:30])})")
        if wrong:
            return WriteCheck(refusal=f"{TOOLS_PATH} lists tools the servers do not offer: "
                                      + "; ".join(wrong) + ". Use the server's own tool names; nothing was written.")
        return WriteCheck(note="\n".join(notes))


def _missing_lines(report: ServerReport, states: dict[str, ServerState]) -> list[str]:
    """A warning per tool ``/tools.json`` lists that the connected server does not offer."""
    if not report.missing or report.name not in states:
        return []
    offered = [t.name for t in states[report.name].tools]
    return [f"MCP server '{report.name}' does not offer '{name}' (listed in {TOOLS_PATH}); "
            f"it offers: {_names(closest(name, offered)[:20])}" for name in report.missing]


def tool_request(rule: ToolRule, args: dict[str, Any]) -> ApprovalRequest:
    """The approval request for one call: server, tool and the arguments as pretty JSON."""
    pretty = json.dumps(args, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    if len(pretty) > MAX_ARGS_SHOWN:
        pretty = pretty[:MAX_ARGS_SHOWN] + f"\n… ({len(pretty) - MAX_ARGS_SHOWN:,} more characters)"
    body = f"server: {rule.server}\ntool: {rule.name}\narguments:\n{pretty}\n"
    return ApprovalRequest("tool", rule.qualified, body, detail=f"{rule.server}/{rule.name}")
