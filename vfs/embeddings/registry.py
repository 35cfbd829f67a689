"""Embedders by name: ``MEMAGENT_EMBEDDER`` -> an ``Embedder`` (the model registry's twin).

An embedder id is ``provider[/model]``:

- ``wordllama`` (the default; ``wordllama/l2_supercat``): the 256-dimension
  model its wheel ships, on the CPU, never downloading;
- ``fastembed/<model>`` (e.g. ``fastembed/BAAI/bge-small-en-v1.5``): ONNX models,
  downloaded on first use; the optional extra ``memagent[fastembed]``;
- ``openai/<model>``, ``openai-compatible/<model>``, ``ollama/<model>``: an
  OpenAI-compatible ``/embeddings`` endpoint, set up like the model providers.
  They talk to a provider, so they live in the model layer
  (``agent/model/embedders.py``) and arrive here as entry points;
- any package's ``memagent.embedders`` entry point (a callable taking the model
  name, "" for its default), the way those three are registered.

Invariants: building never loads a model or opens a connection (see ``base``); an
unknown id is an ``EmbedderError`` listing the known ones. Only the modules in
``providers/`` import a local embedding library; nothing in vfs imports a model
provider's SDK or reads its variables.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points

from .base import Embedder, EmbedderError, first_line

ENV_VAR = "MEMAGENT_EMBEDDER"
DEFAULT = "wordllama"
ENTRY_POINTS = "memagent.embedders"

# provider name -> (module in providers/, its default model or "" when one must be named)
BUILTIN: dict[str, tuple[str, str]] = {
    "wordllama": ("wordllama", "l2_supercat"),
    "fastembed": ("fastembed", "BAAI/bge-small-en-v1.5"),
}


def parse(embedder_id: str) -> tuple[str, str]:
    """``provider/model`` split at the first slash; the provider's default model when none."""
    name, _, model = embedder_id.strip().partition("/")
    if not name:
        raise EmbedderError(f"{ENV_VAR}={embedder_id!r} names no embedder; use e.g. {DEFAULT} or openai/<model>")
    return name, model


def _plugins() -> Mapping[str, Callable[[str], Embedder]]:
    return {ep.name: ep.load() for ep in entry_points(group=ENTRY_POINTS)}


def build(embedder_id: str | None = None, *, env: Mapping[str, str] | None = None) -> Embedder:
    """The embedder ``embedder_id`` names (default: ``MEMAGENT_EMBEDDER``, else ``wordllama``)."""
    env = os.environ if env is None else env
    spec = embedder_id or env.get(ENV_VAR) or DEFAULT
    name, model = parse(spec)
    if name in BUILTIN:
        module_name, default_model = BUILTIN[name]
        model = model or default_model
        if not model:
            raise EmbedderError(f"{ENV_VAR}={spec!r} names no model; write it as {name}/<model>")
        module = importlib.import_module(f"memagent.vfs.embeddings.providers.{module_name}")
        factory: Callable[..., Embedder] = module.build
        return factory(name, model, env)
    plugins = _plugins()
    if name in plugins:
        try:
            return plugins[name](model)
        except EmbedderError:
            raise
        except Exception as exc:  # a plugin's own error type (e.g. ModelError): one line
            raise EmbedderError(first_line(exc)) from None
    known = ", ".join([*BUILTIN, *plugins])
    raise EmbedderError(f"{ENV_VAR}={spec!r}: unknown embedder {name!r}; use one of {known}")
