"""The ``local`` model provider: a GGUF model run by llama.cpp on this machine, no key, no service.

``--model local`` is the bundled default model (``local_weights.DEFAULT``, fetched by
``memagent models pull local``); ``--model local/PATH.gguf`` is any GGUF file. The
model is served by ``local_server`` (llama.cpp's OpenAI-compatible server through the
optional ``xllamacpp`` runtime, ``pip install 'memagent[local]'``) and talked to
through ``OpenAIModel``, so the tool-call recovery of small models' JSON applies.

Invariants:
- ``status`` is ready when the runtime is installed; ``check`` (and so ``build``)
  refuses in one line: the runtime not installed (the pip command), the default
  model not pulled (``memagent models pull local``), a path that is not a file.
  ``build`` starts (or reuses) the server; the server lives while this process does.
- Threads: ``MEMAGENT_LOCAL_THREADS`` if set (a positive integer, else one line),
  else ``default_threads()``: half the machine's cores, at least 1 (measured on 2
  cores under load: 2 threads generated 0.6–0.8 tokens/s against 5–14 for one,
  because llama.cpp's threads spin against the machine's other work).
- The context window is ``CONTEXT`` tokens (the model's KV cache: ~0.45 GB for the
  1.5 B default); the context budget, half the window, follows from ``info``.
- Requests are sent at temperature 0 with a fixed seed (repeatable runs, as evals need),
  and ask for at most ``MAX_OUTPUT`` tokens: at 5-10 tokens/s on a small CPU the loop's
  8,192 would let one runaway answer take twenty minutes; a memory edit or an answer
  fits in far less.
- A call repeated verbatim ends the turn: when the model answers a successful call with
  the very same call again (name and arguments, nothing else), the repeat is dropped and
  the answer is ``REPEAT_ANSWER``. Measured on the 1.5 B default: after "Wrote
  /AGENTS.md (now version 2)." it wrote the same content again and again ("No change")
  until the step limit, under every wording of the prompt tried; nothing is lost, since
  the call it repeats has just run.
- Its models declare ``prompt_profile = "compact"``: the agent builder (``profiles.profile_of``,
  the one place that decides) gives them the compact system prompt and tool definitions,
  short enough for a small model's prompt pass.
- Prices: none. No SDK is imported here; ``OpenAIModel`` imports ``openai`` when built.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memagent.agent.model import local_weights
from memagent.agent.model.base import ModelError, ModelRequest, ModelResponse, TextCallback
from memagent.agent.model.local_server import ensure
from memagent.agent.model.providers.openai_compat import OpenAIModel
from memagent.agent.model.registry import DEFAULT_OPTIONS, ModelInfo, ModelOptions, ProviderStatus

__all__ = ["CONTEXT", "DEFAULT_NAME", "INSTALL_HINT", "PROVIDER", "LocalProvider", "default_threads"]

THREADS_VAR = "MEMAGENT_LOCAL_THREADS"
# The model part of a bare ``local`` (``registry.parse``) and how the default is named.
DEFAULT_NAME = "default"
CONTEXT = 16_384
INSTALL_HINT = "pip install 'memagent[local]'"
PULL_HINT = "memagent models pull local"
SEED = 1
# Seconds a request may take without an answer (the OpenAI client's read timeout).
LOCAL_TIMEOUT = 3600.0
# The most tokens one answer may generate (see the module docstring).
MAX_OUTPUT = 1024
# The answer that replaces a call repeated verbatim after it succeeded (see the module docstring).
REPEAT_ANSWER = "Done."


def default_threads() -> int:
    """Threads when ``MEMAGENT_LOCAL_THREADS`` is not set: half the cores, at least one."""
    return max(1, (os.cpu_count() or 1) // 2)


def threads() -> int:
    raw = os.environ.get(THREADS_VAR, "").strip()
    if not raw:
        return default_threads()
    if not raw.isdigit() or int(raw) < 1:
        raise ModelError(f"{THREADS_VAR}={raw!r} is not a number of threads; set a positive integer or unset it")
    return int(raw)


def _runtime() -> bool:
    return importlib.util.find_spec("xllamacpp") is not None


def model_path(model: str) -> Path:
    """The GGUF file ``local/<model>`` names (the default model for ``default``)."""
    return local_weights.DEFAULT.path() if model == DEFAULT_NAME else Path(model).expanduser()


class LocalModel(OpenAIModel):
    """``OpenAIModel`` against this machine's llama.cpp server: repeatable sampling, answers of
    at most ``MAX_OUTPUT`` tokens, the compact prompt profile."""

    prompt_profile = "compact"

    def params(self, request: ModelRequest) -> dict[str, Any]:
        params = super().params(request)
        params["temperature"] = 0
        params["seed"] = SEED
        params[self.token_param] = min(request.max_tokens, MAX_OUTPUT)
        return params

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        response = super().respond(request, on_text=on_text, on_retry=on_retry)
        if not repeats_last_call(request, response):
            return response
        if on_text is not None:
            on_text(REPEAT_ANSWER)
        return ModelResponse([{"type": "text", "text": REPEAT_ANSWER}], "end_turn", response.usage, response.model)


def _calls(content: Any) -> list[tuple[Any, Any]]:
    return [(b.get("name"), b.get("input")) for b in content or []
            if isinstance(b, dict) and b.get("type") == "tool_use"]


def repeats_last_call(request: ModelRequest, response: ModelResponse) -> bool:
    """Whether ``response`` is only the calls of the request's last assistant turn again, after
    every one of them succeeded (its results, the request's last message, hold no error)."""
    if response.text.strip() or not response.tool_uses or len(request.messages) < 2:
        return False
    previous, results = request.messages[-2], request.messages[-1]
    if previous.get("role") != "assistant" or results.get("role") != "user":
        return False
    blocks = results.get("content")
    if not isinstance(blocks, list) or not blocks:
        return False
    if any(not isinstance(b, dict) or b.get("type") != "tool_result" or b.get("is_error") for b in blocks):
        return False
    return _calls(previous.get("content")) == _calls(response.content)


# Not frozen: the registry's Provider protocol declares plain (settable) attributes.
@dataclass
class LocalProvider:
    name: str = "local"
    env_vars: tuple[str, ...] = (THREADS_VAR,)

    def status(self, options: ModelOptions = DEFAULT_OPTIONS) -> ProviderStatus:
        """Usable when the runtime is installed (any GGUF runs); says whether the default is pulled."""
        spec = local_weights.DEFAULT
        if not _runtime():
            return ProviderStatus(False, f"the llama.cpp runtime is not installed: {INSTALL_HINT}")
        runtime = f"runtime xllamacpp {local_weights.runtime_version()}"
        if not local_weights.pulled():
            return ProviderStatus(True, f"{runtime}; {spec.name} is not pulled: run `{PULL_HINT}` "
                                        f"({spec.size / 1e9:.2f} GB, {spec.licence}), or use local/PATH.gguf")
        return ProviderStatus(True, f"{runtime}; --model local runs {spec.name}")

    def check(self, model: str, options: ModelOptions = DEFAULT_OPTIONS) -> None:
        """``ModelError`` (one line) when ``local/<model>`` cannot run; starts nothing."""
        path = model_path(model)
        if model == DEFAULT_NAME and not local_weights.pulled():
            raise ModelError(f"the local model is not pulled yet: run `{PULL_HINT}` "
                             f"({local_weights.DEFAULT.size / 1e9:.2f} GB, once) and try again")
        if not path.is_file():
            raise ModelError(f"no GGUF file at {path}: give local/PATH.gguf of a file that exists, "
                             f"or `--model local` for the default model")
        if not _runtime():
            raise ModelError(f"--model local needs the llama.cpp runtime: {INSTALL_HINT}")

    def details(self) -> dict[str, Any]:
        """What ``memagent models`` shows of the local model (pulled, size, path, runtime)."""
        spec = local_weights.DEFAULT
        return {"model": spec.name, "pulled": local_weights.pulled(), "path": str(spec.path()),
                "size": spec.size, "sha256": spec.sha256, "licence": spec.licence,
                "runtime": local_weights.runtime_version(), "threads": default_threads()}

    def build(self, model: str, options: ModelOptions) -> OpenAIModel:
        self.check(model, options)
        path = model_path(model)
        server = ensure(path, threads=threads(), context=CONTEXT, models=local_weights.models_dir())
        shown = "local" if model == DEFAULT_NAME else f"local/{model}"
        return LocalModel(
            shown, path.name, base_url=f"{server.url}/v1", api_key=server.key, key_hint="the key",
            stream=options.stream, token_param="max_tokens", context_window=server.context,
            server="the local model server", reach_hint="; run the command again to restart it",
            # A first request on a busy small CPU reads its whole prompt before the first token:
            # minutes, not seconds (streamed answers get the server's pings meanwhile).
            timeout=LOCAL_TIMEOUT,
        )

    def info(self, model: str, options: ModelOptions = DEFAULT_OPTIONS) -> ModelInfo:
        return ModelInfo(context_window=CONTEXT, prompt_profile=LocalModel.prompt_profile)

    def local_models(self, options: ModelOptions = DEFAULT_OPTIONS) -> list[str]:
        return [DEFAULT_NAME] if local_weights.pulled() else []


PROVIDER = LocalProvider()
