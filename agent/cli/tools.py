"""``memagent tools AGENT [--json]``: the MCP servers of an agent's ``/tools.json``, live.

Connects to every server the file declares (in parallel, under the connect
timeout), lists what each offers against what the file allows, and stops them
again, so a person can write ``/tools.json`` by looking.

Invariants:
- Every server process started here is stopped before the command exits, also
  on Ctrl-C and on an error.
- A server that fails is a status (``failed`` and why), not an error of the
  command: the exit status is 0 whenever the report was made; 1 when the agent
  does not exist or ``/tools.json`` is not valid (the report then says why).
- ``--json`` prints one JSON object: ``{"agent", "tools_json", "error", "warnings", "servers":
  [{"name", "type", "where", "status", "reason", "allowed", "approval",
  "missing", "not_allowed"}]}``.
"""

from __future__ import annotations

import inspect
import json
import sys

import click

from memagent.agent.cli.common import Ctx, handled
from memagent.agent.mcp.client import CONNECT_TIMEOUT_ENV, McpHub, connect_timeout
from memagent.agent.mcp.config import TOOLS_PATH, parse_tools_json
from memagent.agent.tools.mcp import build_report, render_report
from memagent.vfs import NotFound

EXAMPLE = """{
  "mcp_servers": {
    "time": {"command": "uvx", "args": ["mcp-server-time"]}
  },
  "tools": [{"server": "time", "name": "get_current_time"}]
}"""


@click.command("tools")
@click.argument("agent", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, metavar="SECONDS",
              help=f"Seconds each server gets to start (default: ${CONNECT_TIMEOUT_ENV} or 10).")
@click.pass_obj
@handled
def tools_cmd(ctx: Ctx, agent: str | None, as_json: bool, timeout: float | None) -> None:
    """Show AGENT's MCP servers (from /tools.json): status, allowed tools, and the tools
    each server offers that the agent may not use.

    Every declared server is started, asked for its tools, and stopped again.
    A minimal /tools.json (write it with `memagent fs write /tools.json -a AGENT`):
    """
    view = ctx.view(agent)
    try:
        content: str | None = view.read(TOOLS_PATH).content
    except NotFound:
        content = None
    config = parse_tools_json(content)
    reports = []
    warnings: list[str] = []
    if config.servers:
        hub = McpHub()
        try:
            warnings = hub.connect(list(config.servers.values()),
                                   timeout=timeout if timeout is not None else connect_timeout())
            reports = build_report(config, hub.states())
        finally:
            hub.close()
        if not as_json:
            for warning in warnings:
                if "is not set" in warning:  # failures show in the report itself
                    click.echo(f"memagent: {warning}", err=True)
    if as_json:
        click.echo(json.dumps({"agent": view.agent, "tools_json": content is not None, "error": config.error,
                               "warnings": [w for w in warnings if "is not set" in w],
                               "servers": [r.to_json() for r in reports]}, indent=2))
    elif content is None:
        click.echo(f"Agent {view.agent} has no {TOOLS_PATH}, so it uses no MCP servers. A minimal one:\n"
                   f"{EXAMPLE}")
    else:
        click.echo(render_report(reports, error=config.error))
    if config.error:
        sys.exit(1)


# The docstring is dedented before the example is appended: cleandoc of the whole would
# find the example's column 0 and leave the docstring's own indentation in the help.
tools_cmd.help = inspect.cleandoc(tools_cmd.help or "") + "\n\n\b\n" + EXAMPLE
