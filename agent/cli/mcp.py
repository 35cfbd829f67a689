"""``memagent mcp serve AGENT``: the agent's memory as an MCP server (``agent/serve``).

Invariants:
- stdio by default: stdout carries only the protocol; the one start line and any
  error go to stderr. ``--http HOST:PORT`` serves streamable HTTP at ``/mcp``;
  a HOST other than the exact loopback names ``127.0.0.1``, ``::1`` and
  ``localhost`` (so also ``127.0.0.2``, ``0.0.0.0``) needs a token (``--token`` or
  ``$MEMAGENT_MCP_TOKEN``) and the command refuses to start without one (one line,
  exit 1, like every refusal of this command). On every address, requests whose
  ``Host`` does not name HOST:PORT or whose ``Origin`` is not local are refused
  (``agent/serve/transport.py``); ``--allow-host NAME`` adds a name, only with a token.
- The agent must exist before the server starts (one line and exit 1 otherwise),
  so a client's misconfiguration shows at once, not at its first tool call.
- ctrl-C and the end of stdin stop the server with exit 0 and no traceback.
"""

from __future__ import annotations

import socket
import sys

import click

from memagent.agent.cli import config
from memagent.agent.cli.common import Ctx, fail, handled


@click.group("mcp")
def mcp_group() -> None:
    """Serve an agent's memory to other harnesses over MCP (Claude Code, Codex, ...)."""


@mcp_group.command("serve")
@click.argument("agent")
@click.option("--approval", type=click.Choice(["client", "queue", "yolo"]), default="client", show_default=True,
              help="client: the MCP client's own permission prompt approves each write (recorded as 'client'); "
                   "queue: writes become proposals for `memagent review`; yolo: no approval.")
@click.option("--http", "http", default=None, metavar="HOST:PORT",
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--token", default=None, envvar="MEMAGENT_MCP_TOKEN", metavar="TOKEN",
              help="Bearer token HTTP clients must send (default $MEMAGENT_MCP_TOKEN); required unless HOST is "
                   "127.0.0.1, ::1 or localhost.")
@click.option("--allow-host", "allow_host", multiple=True, metavar="NAME",
              help="Another name clients reach the HTTP server by (e.g. the DNS name of a server bound to "
                   "0.0.0.0); repeatable; needs --token.")
@click.pass_obj
@handled
def serve_cmd(ctx: Ctx, agent: str, approval: str, http: str | None, token: str | None,
              allow_host: tuple[str, ...]) -> None:
    """Serve AGENT's memory over MCP: file tools, AGENTS.md and skills as resources,
    /remember and /compact as prompts.

    \b
    Every write is validated and versioned like a chat edit; a write over a file
    that changed since the client read it is refused ("read it again"). Each
    revision records the client's name and version (see `memagent fs log`).

    \b
    Over HTTP, requests must name HOST:PORT in their Host header, and an Origin
    header, if sent, must be local: web pages of other sites are refused.
    """
    from memagent.agent.serve import MemoryServer
    from memagent.agent.serve.server import ApprovalMode
    from memagent.agent.serve.transport import (
        UsageError,
        check_binding,
        parse_address,
        parse_allowed_hosts,
        serve_http,
        serve_stdio,
    )
    from memagent.vfs import AgentView

    try:
        address = parse_address(http) if http else None
        allowed = parse_allowed_hosts(allow_host)
        if allowed and address is None:
            raise UsageError("--allow-host is for --http HOST:PORT (stdio has no Host header)")
        if address is not None:
            check_binding(address[0], token, allowed)
    except UsageError as exc:
        fail(str(exc), status=2)  # the options are wrong together: a usage mistake, nothing started
    if address is not None:
        _check_port_free(*address)
    view = ctx.view(agent)
    store = view.store
    mode: ApprovalMode = "queue" if approval == "queue" else "yolo" if approval == "yolo" else "client"
    server = MemoryServer(
        view, approval=mode,
        queue=ctx.memory.queue if mode == "queue" else None,
        view_factory=lambda: AgentView(store, view.agent, user=config.user_id(), org=config.org_id()))

    def ready(where: str) -> None:
        click.echo(f"memagent: serving agent {view.agent!r} over MCP at {where} (approval: {mode}"
                   + (", bearer token required" if token else "") + "); ctrl-C stops", err=True)

    try:
        if address is None:
            ready("stdio")
            serve_stdio(server)
        else:
            serve_http(server, address[0], address[1], token, on_ready=ready, allowed=allowed)
    except KeyboardInterrupt:
        pass
    click.echo("memagent: MCP server stopped", err=True)
    sys.exit(0)


def _check_port_free(host: str, port: int) -> None:
    """Refuse a taken port in one line (the web server would log a bind error and exit)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another port with --http HOST:PORT")
