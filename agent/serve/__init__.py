"""``memagent mcp serve``: one agent's memory served live to other harnesses over MCP.

A front end, like the chat: it may import the core, tools, vfs and validators (and
the ``mcp`` SDK, imported when a server is built); nothing below imports it.

Invariants (details in ``server.py`` and ``http.py``):
- The tools are the chat's tool providers (``MemoryTools``, ``SearchTools``,
  ``HistoryTools``) behind a ``ToolBox``: same names, schemas, validators, error
  texts and the one write path. A refusal is an MCP tool error (``isError``) with
  the provider's text; no argument can stop the server.
- How a write is approved is explicit and recorded: ``client`` (the client's own
  permission prompt; revisions say ``client``), ``queue`` (a pending proposal for
  ``memagent review``; nothing is stored) or ``yolo``. Every revision's origin is
  ``mcp`` with the client's name and version.
- What a client has read is tracked per MCP session, as in chat, so a write based on
  a version another writer has replaced is refused with "read it again".
"""

from memagent.agent.serve.server import APPROVAL_MODES, ApprovalMode, MemoryServer

__all__ = ["APPROVAL_MODES", "ApprovalMode", "MemoryServer"]
