"""Models behind one interface (``base.Model``), made by the provider registry.

``registry`` turns a model id (``provider/model``; a bare name is Anthropic) into a
``Model`` through the provider modules of ``providers/`` and the ``memagent.providers``
entry points; ``scripted`` is the in-process test model.

Importing this package does not import a provider SDK: a provider imports its SDK
when it builds a model, so commands that need no model start fast. Only this layer
imports provider SDKs, names provider classes or reads provider variables (keys,
base URLs); ``tests/test_layers.py`` enforces it. May import: nothing of memagent
outside this package; never the core, tools, chat or CLI layers.
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
