"""Models behind one interface (``base.Model``): the Anthropic client and a scripted one.

Importing this package does not import a provider SDK: ``anthropic_client`` is
imported by whoever builds an ``AnthropicModel`` (the chat command), so commands
that need no model start fast. May import: ``vfs`` types only (nothing here needs
memory); never the core, tools, chat or CLI layers.
"""

from memagent.agent.model.base import (
    DEFAULT_MODEL,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    Usage,
)

__all__ = ["DEFAULT_MODEL", "Model", "ModelError", "ModelRequest", "ModelResponse", "Usage"]
