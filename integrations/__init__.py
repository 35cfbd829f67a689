"""Optional adapters that let other programs use an agent's memagent memory.

- ``memagent.integrations.anthropic``: a handler for the Anthropic API's client-side
  memory tool (``pip install 'memagent[anthropic-memory]'``; the SDK is a core dependency).
- ``memagent.integrations.deepagents``: a deepagents backend
  (``pip install 'memagent[deepagents]'``).

Invariants: every change an adapter makes takes the store's one write path
(``prepare_*`` -> ``vfs.entrance.submit``: the approval policy, then ``commit``), so it
is validated, versioned and revertible, and recorded with origin kind
``integration`` naming the adapter. Without an explicit ``approve`` (a callback,
``"yolo"`` or ``"queue"``) an adapter stores nothing. This
package imports ``vfs`` and ``validators`` only; nothing in the core imports it, and
importing it loads neither the Anthropic SDK nor deepagents (each submodule imports
its own third-party package).
"""
