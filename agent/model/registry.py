"""The model provider registry: a model id in, a ``Model`` (or what is known of it) out.

A model id is ``provider/model`` (``anthropic/claude-sonnet-5-5``, ``openai/gpt-5.1``,
``ollama/qwen3:8b``, ``openai-compatible/NAME``, ``local/PATH.gguf``); a bare name (no
``/``) means Anthropic, so ids stored before providers existed keep working, except
``local``, the bundled local model (``local/default``). The model part is
everything after the first ``/`` (it may hold more slashes and colons).

Providers are the built-in modules of ``agent/model/providers/`` (each exposes a
module-level ``PROVIDER`` or ``PROVIDERS`` tuple) plus the entry-point group
``memagent.providers`` (each entry point loads a ``Provider`` or a zero-argument
callable returning one), the way llm's plugins register.

Invariants:
- Importing this module imports no provider SDK, and ``providers()`` imports the
  provider modules only (each imports its SDK in ``build``), so commands that never
  make a model (``memagent fs ...``) stay fast.
- Every command that makes a model goes through ``build``; no module outside the
  model layer names a provider class or reads a provider's environment variable
  (``tests/test_layers.py`` checks it).
- Every failure is a ``ModelError`` with one line a person can act on: a bad id,
  an unknown provider (naming the known ones), a provider that cannot be loaded.
- Built-ins win over a plugin of the same name: a plugin cannot take over
  ``anthropic`` (it is skipped). A plugin or built-in that cannot be loaded is
  left out of the table with an info line on the ``memagent`` logger
  (``MEMAGENT_LOG=info``); asking for it by name says it is unavailable.
- Prices are only what a provider knows (``Price``); unknown is ``None``, never a guess.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from memagent.agent.model.base import Model, ModelError, one_line

__all__ = [
    "BUILTIN",
    "DEFAULT_OPTIONS",
    "ENTRY_POINT_GROUP",
    "ModelInfo",
    "ModelOptions",
    "Price",
    "Provider",
    "ProviderName",
    "ProviderStatus",
    "build",
    "get",
    "info",
    "parse",
    "providers",
]

log = logging.getLogger("memagent.agent.model")

ProviderName = str  # "anthropic", "openai", "openai-compatible", "ollama", "local", or a plugin's

ENTRY_POINT_GROUP = "memagent.providers"

# The provider a bare model id (no "provider/" prefix) means.
BARE_PROVIDER = "anthropic"

# Built-in providers: name -> module, imported on first use. A module that is not
# there (or fails to import) makes its provider unavailable, not the registry.
BUILTIN: dict[str, str] = {
    "anthropic": "memagent.agent.model.providers.anthropic",
    "openai": "memagent.agent.model.providers.openai_compat",
    "openai-compatible": "memagent.agent.model.providers.openai_compat",
    "ollama": "memagent.agent.model.providers.ollama",
    "local": "memagent.agent.model.providers.local",
}

# Bare ids that name a provider rather than an Anthropic model: ``local`` is the bundled
# local model (``local/default``).
BARE_PROVIDERS: dict[str, tuple[str, str]] = {"local": ("local", "default")}


@dataclass(frozen=True)
class Price:
    """USD per million tokens; only where the provider knows it, never invented.

    ``cache_write``/``cache_read`` None: those tokens cost the input rate (a
    provider without a caching discount). ``long_prompt`` is the band the whole
    request is billed at when its prompt (input + cache reads + cache writes) is
    above ``long_prompt_threshold`` tokens (Anthropic's Haiku 5.5).
    """

    input: float
    output: float
    cache_write: float | None = None
    cache_read: float | None = None
    long_prompt_threshold: int | None = None
    long_prompt: Price | None = None


@dataclass(frozen=True)
class ModelInfo:
    """What a provider knows of one model."""

    context_window: int | None = None  # tokens; None: unknown (the context budget keeps its default)
    price: Price | None = None  # None: cost shown as tokens only
    # The prompt profile the model's built ``Model`` will declare (``prompt_profile``), known
    # before it is built: the chat builds its client on a thread (``startup.BackgroundModel``)
    # while the agent's prompt is already being chosen. None: the default (full).
    prompt_profile: str | None = None


@dataclass(frozen=True)
class ModelOptions:
    """How to reach a model, beyond its id."""

    base_url: str | None = None  # --base-url; overrides the provider's env/default
    stream: bool = True


# The options of a model built with none given (providers use it as their default).
DEFAULT_OPTIONS = ModelOptions()


@dataclass(frozen=True)
class ProviderStatus:
    """Whether a provider can be used as configured, in one line for a person."""

    configured: bool
    detail: str  # e.g. "OPENAI_API_KEY is set" / "no key: export OPENAI_API_KEY=..."


@runtime_checkable
class Provider(Protocol):
    """One model provider: its name (the id prefix), the variables it reads, how it builds."""

    name: str
    env_vars: tuple[str, ...]  # every environment variable it reads (key, base URL)

    def status(self, options: ModelOptions = ...) -> ProviderStatus: ...

    def build(self, model: str, options: ModelOptions) -> Model:
        """``model`` is the part after ``provider/``; ``ModelError`` (one line) when unusable."""
        ...

    def info(self, model: str, options: ModelOptions = ...) -> ModelInfo: ...

    def local_models(self, options: ModelOptions = ...) -> list[str]: ...


def parse(model_id: str) -> tuple[ProviderName, str]:
    """``"openai/gpt-5.1"`` -> ``("openai", "gpt-5.1")``; a bare name -> ``("anthropic", name)``.

    Raises ``ModelError`` for an empty id, an empty provider or model part, or one
    with whitespace or control characters.
    """
    text = model_id.strip() if isinstance(model_id, str) else ""
    if not text:
        raise ModelError("empty model id: give one like claude-sonnet-5-5, openai/gpt-5.1 or ollama/qwen3:8b")
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise ModelError(f"bad model id {text!r}: no spaces or control characters; "
                         "use provider/model, e.g. ollama/qwen3:8b")
    if text.lower() in BARE_PROVIDERS:
        return BARE_PROVIDERS[text.lower()]
    provider, sep, model = text.partition("/")
    if not sep:
        return BARE_PROVIDER, text
    if not provider or not model:
        raise ModelError(f"bad model id {text!r}: use provider/model, e.g. openai/gpt-5.1")
    return provider.lower(), model


def _from_module(name: str, module_name: str) -> Provider:
    """The provider ``name`` of built-in module ``module_name`` (its PROVIDER or PROVIDERS)."""
    module = importlib.import_module(module_name)
    candidates: list[Any] = []
    if hasattr(module, "PROVIDER"):
        candidates.append(module.PROVIDER)
    candidates.extend(getattr(module, "PROVIDERS", ()))
    for candidate in candidates:
        if getattr(candidate, "name", None) == name:
            return candidate
    raise ModelError(f"model provider module {module_name} has no provider named {name!r}")


def _builtin(name: str) -> Provider | None:
    """Built-in provider ``name``, or None when its module is missing or broken (logged)."""
    module_name = BUILTIN.get(name)
    if module_name is None:
        return None
    try:
        return _from_module(name, module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):
            log.debug("built-in model provider %s: module %s is not there", name, module_name)
        else:
            log.info("model provider %s cannot be loaded: %s", name, one_line(str(err)))
        return None
    except Exception as err:  # noqa: BLE001 - a broken provider must not break the others
        log.info("model provider %s cannot be loaded: %s: %s", name, type(err).__name__,
                    one_line(str(err)))
        return None


def _plugins() -> dict[str, Provider]:
    """Providers registered in the ``memagent.providers`` entry-point group, by name."""
    found: dict[str, Provider] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            provider = obj if isinstance(getattr(obj, "name", None), str) and hasattr(obj, "build") \
                else obj()
        except Exception as err:  # noqa: BLE001 - a broken plugin is one log line, not a crash
            log.info("model provider plugin %s cannot be loaded: %s: %s", ep.name,
                        type(err).__name__, one_line(str(err)))
            continue
        name = getattr(provider, "name", None)
        if not isinstance(name, str) or not name or not hasattr(provider, "build"):
            log.info("model provider plugin %s is not a provider (no name/build)", ep.name)
            continue
        if name in BUILTIN or name in found:
            log.info("model provider plugin %s: the name %r is taken; skipped", ep.name, name)
            continue
        found[name] = provider
    return found


def providers() -> dict[str, Provider]:
    """Every available provider by name, built-ins first, then plugins (sorted by name within each)."""
    table: dict[str, Provider] = {}
    for name in sorted(BUILTIN):
        provider = _builtin(name)
        if provider is not None:
            table[name] = provider
    for name, provider in sorted(_plugins().items()):
        table.setdefault(name, provider)
    return table


def _known() -> str:
    return ", ".join(sorted(set(BUILTIN) | set(_plugins())))


def get(name: str) -> Provider:
    """The provider called ``name``; ``ModelError`` naming the known ones when there is none."""
    if name in BUILTIN:
        provider = _builtin(name)
        if provider is None:
            raise ModelError(f"model provider '{name}' is not available in this install "
                             "(see `memagent models`)")
        return provider
    plugin = _plugins().get(name)
    if plugin is None:
        raise ModelError(f"unknown model provider '{name}'; known: {_known()}")
    return plugin


def build(model_id: str, options: ModelOptions = DEFAULT_OPTIONS) -> Model:
    """The ``Model`` for ``model_id``; ``ModelError`` (one line) when it cannot be made."""
    provider_name, model = parse(model_id)
    provider = get(provider_name)
    try:
        return provider.build(model, options)
    except ModelError:
        raise
    except Exception as err:  # noqa: BLE001 - a plugin's bug is one line, not a traceback
        raise ModelError(f"model provider '{provider_name}' could not build {model}: "
                         f"{type(err).__name__}: {err}") from None


def info(model_id: str, options: ModelOptions = DEFAULT_OPTIONS) -> ModelInfo:
    """What the provider of ``model_id`` knows of it (``ModelInfo()`` when nothing)."""
    provider_name, model = parse(model_id)
    return get(provider_name).info(model, options)
