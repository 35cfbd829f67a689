"""The ``ollama`` model provider: ``OpenAIModel`` over Ollama's ``/v1`` with Ollama's defaults.

The server is ``--base-url`` or ``OLLAMA_HOST`` (``host:port`` or a URL, as the
``ollama`` command takes it) or ``http://localhost:11434``; no key. Before a model is
used, Ollama's native ``POST /api/show`` says what it is.

Invariants:
- ``build`` refuses, in one line, a model Ollama does not have (saying how to pull
  it), a model whose ``capabilities`` lack ``tools`` (memagent needs tool calls; the
  line names a model that has them and ``memagent models``), and a server it cannot
  reach ("start it with `ollama serve`"). A server too old to report capabilities is
  trusted.
- The context window is the one the server runs the model with when the model sets
  ``num_ctx`` (its ``parameters``), else the model's trained ``<arch>.context_length``;
  it is the built model's ``context_window`` and ``info(...).context_window``, so the
  context budget fits the model rather than Claude's window. (Chat Completions cannot
  set ``num_ctx``: a server whose default is smaller truncates; the README says to set
  ``OLLAMA_CONTEXT_LENGTH`` or ``num_ctx`` in a Modelfile.)
- Prices: none (local models cost tokens only). ``status`` and ``local_models`` ask
  ``/api/tags`` with a short timeout and never raise.
- No SDK is imported here: the native calls use the standard library.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from memagent.agent.model.base import ModelError, one_line
from memagent.agent.model.providers.openai_compat import OpenAIModel
from memagent.agent.model.registry import DEFAULT_OPTIONS, ModelInfo, ModelOptions, ProviderStatus

__all__ = ["HOST_VAR", "PROVIDER", "OllamaProvider", "root_url"]

HOST_VAR = "OLLAMA_HOST"
DEFAULT_HOST = "http://localhost:11434"
DEFAULT_PORT = 11434

# A model known to call tools well at a size most machines run; named in refusals.
SUGGESTED = "qwen3:8b"

# Seconds for the native calls: /api/show may load model metadata from disk.
_SHOW_TIMEOUT = 30.0
_TAGS_TIMEOUT = 3.0


def root_url(options: ModelOptions = DEFAULT_OPTIONS) -> str:
    """The server's root URL (no ``/v1``): ``--base-url``, ``OLLAMA_HOST`` or the default."""
    raw = (options.base_url or os.environ.get(HOST_VAR, "").strip() or DEFAULT_HOST).rstrip("/")
    if "://" not in raw:
        raw = f"http://{raw}"
    parts = urlsplit(raw)
    host = parts.hostname or "localhost"
    if host == "0.0.0.0":  # how a server is told to listen everywhere; reach it locally
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or DEFAULT_PORT
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{host}:{port}{path}"


class _Unreachable(Exception):
    pass


def _call(url: str, payload: dict[str, Any] | None, timeout: float) -> tuple[int, Any]:
    """(status, parsed JSON body) of a GET (``payload`` None) or POST; ``_Unreachable``."""
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) only
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise _Unreachable(one_line(str(reason))) from None
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, None


def _unreachable(root: str) -> ModelError:
    return ModelError(f"cannot reach Ollama at {root}; start it with `ollama serve` "
                      f"(or set {HOST_VAR} / --base-url to where it runs)")


def context_window(show: Any) -> int | None:
    """The window from an ``/api/show`` answer: ``num_ctx`` if set, else ``<arch>.context_length``."""
    if not isinstance(show, dict):
        return None
    parameters = show.get("parameters")
    if isinstance(parameters, str):
        for line in parameters.splitlines():
            # Ollama pads the value: "num_ctx                        8192".
            key, _, value = line.strip().partition(" ")
            if key == "num_ctx" and value.strip().isdigit() and int(value) > 0:
                return int(value)
    info = show.get("model_info")
    if isinstance(info, dict):
        arch = info.get("general.architecture")
        length: Any = info.get(f"{arch}.context_length") if isinstance(arch, str) else None
        if length is None:
            length = next((v for k, v in info.items() if k.endswith(".context_length")), None)
        if isinstance(length, int) and not isinstance(length, bool) and length > 0:
            return length
    return None


# Not frozen: the registry's Provider protocol declares plain (settable) attributes.
@dataclass
class OllamaProvider:
    name: str = "ollama"
    env_vars: tuple[str, ...] = (HOST_VAR,)

    def _show(self, model: str, options: ModelOptions) -> dict[str, Any]:
        root = root_url(options)
        try:
            status, body = _call(f"{root}/api/show", {"model": model}, _SHOW_TIMEOUT)
        except _Unreachable:
            raise _unreachable(root) from None
        if status == 404:
            raise ModelError(f"Ollama at {root} has no model {model!r}; pull it with `ollama pull {model}` "
                             "(`memagent models` lists the local ones)")
        if status >= 400 or not isinstance(body, dict):
            detail = body.get("error") if isinstance(body, dict) else None
            raise ModelError(f"Ollama at {root} could not describe {model!r} ({status})"
                             + (f": {detail}" if detail else ""), status=status)
        return body

    def status(self, options: ModelOptions = DEFAULT_OPTIONS) -> ProviderStatus:
        root = root_url(options)
        try:
            models = self._tags(root)
        except _Unreachable:
            return ProviderStatus(False, f"cannot reach Ollama at {root}; start it with `ollama serve`")
        count = f"{len(models)} local model{'s' if len(models) != 1 else ''}"
        hint = "" if models else f"; pull one with `ollama pull {SUGGESTED}`"
        return ProviderStatus(True, f"Ollama at {root}: {count}{hint}")

    def check(self, model: str, options: ModelOptions = DEFAULT_OPTIONS) -> dict[str, Any]:
        """``/api/show`` of a usable model, or ``ModelError`` (one line): unreachable, not
        pulled, or without tools. Imports no SDK, so a front end can call it at start."""
        show = self._show(model, options)
        capabilities = show.get("capabilities")
        if isinstance(capabilities, list) and "tools" not in capabilities:
            has = ", ".join(str(c) for c in capabilities) or "none"
            raise ModelError(f"ollama/{model} cannot call tools (its capabilities: {has}), and memagent "
                             f"works through tools; pick a model that has them, e.g. `ollama pull "
                             f"{SUGGESTED}` and --model ollama/{SUGGESTED} (`memagent models` lists the "
                             "local ones)")
        return show

    def build(self, model: str, options: ModelOptions) -> OpenAIModel:
        root = root_url(options)
        show = self.check(model, options)
        return OpenAIModel(
            f"ollama/{model}", model, base_url=f"{root}/v1", api_key="ollama",
            key_hint="the key", stream=options.stream, token_param="max_tokens",
            context_window=context_window(show), server="Ollama",
            reach_hint="; start it with `ollama serve`",
        )

    def info(self, model: str, options: ModelOptions = DEFAULT_OPTIONS) -> ModelInfo:
        try:
            return ModelInfo(context_window=context_window(self._show(model, options)))
        except ModelError:
            return ModelInfo()

    def local_models(self, options: ModelOptions = DEFAULT_OPTIONS) -> list[str]:
        try:
            return self._tags(root_url(options))
        except _Unreachable:
            return []

    @staticmethod
    def _tags(root: str) -> list[str]:
        status, body = _call(f"{root}/api/tags", None, _TAGS_TIMEOUT)
        models = body.get("models") if isinstance(body, dict) and status < 400 else None
        return sorted(str(m.get("name")) for m in models or [] if isinstance(m, dict) and m.get("name"))


PROVIDER = OllamaProvider()
