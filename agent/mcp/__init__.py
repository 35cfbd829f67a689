"""MCP client plumbing: reading ``/tools.json`` into server specs, and connecting to servers.

``config`` is pure (no I/O): it turns the text of ``/tools.json`` into ``ServerSpec``
and ``ToolRule`` values and expands ``${VAR}`` / ``${VAR:-default}`` references.
``client`` owns the connections: a background event-loop thread, servers started
in parallel under a timeout, sync wrappers for listing and calling tools, and a
shutdown that leaves no server process behind. ``results`` turns an MCP tool
result into Messages API content blocks, bounded in size.

Layer: may import ``vfs`` and ``validators`` only; the tool provider that shows
MCP tools to the model lives in ``memagent.agent.tools.mcp``. The server side
(``memagent mcp serve``) will live beside these modules, never inside them.
"""

from memagent.agent.mcp.client import CONNECT_TIMEOUT_ENV, McpHub, ServerState, connect_timeout
from memagent.agent.mcp.config import ServerSpec, ToolRule, ToolsConfig, expand, parse_tools_json
from memagent.agent.mcp.results import convert_result

__all__ = ["CONNECT_TIMEOUT_ENV", "McpHub", "ServerSpec", "ServerState", "ToolRule", "ToolsConfig",
           "connect_timeout", "convert_result", "expand", "parse_tools_json"]
