"""Embedders over an OpenAI-compatible ``/embeddings`` endpoint: ``openai/<model>``,
``openai-compatible/<model>``, ``ollama/<model>`` for ``MEMAGENT_EMBEDDER``.

They live in the model layer because they talk to a provider (its SDK, its
variables), and reach the vfs embedder registry (``vfs/embeddings/registry.py``)
through the ``memagent.embedders`` entry points in ``pyproject.toml``; they satisfy
its ``Embedder`` protocol structurally (vfs is not imported here).

Configured like the model providers: ``openai`` needs ``OPENAI_API_KEY``
(``OPENAI_BASE_URL`` optional); ``openai-compatible`` needs ``OPENAI_BASE_URL`` (the
key optional, as local servers take any); ``ollama`` uses ``OLLAMA_HOST`` (default
``http://localhost:11434``) and its ``/v1``. The ``openai`` SDK is imported on the
first ``embed``. Failures are ``ModelError``s, one line each.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memagent.agent.model.base import ModelError

Vectors = npt.NDArray[np.float32]

OPENAI_URL = "https://api.openai.com/v1"
OLLAMA_URL = "http://localhost:11434"
BATCH = 128  # texts per request: servers bound a request's inputs


class OpenAIEmbedder:
    def __init__(self, provider: str, model_name: str, base_url: str, api_key: str) -> None:
        self.model = f"{provider}/{model_name}"
        self.model_name = model_name
        self.base_url = base_url
        self._key = api_key
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._client is not None

    def _load(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    import openai
                except ImportError:
                    raise ModelError("this embedder needs the openai package: pip install openai") from None
                self._client = openai.OpenAI(api_key=self._key, base_url=self.base_url, max_retries=2,
                                             timeout=60.0)
            return self._client

    def embed(self, texts: Sequence[str]) -> Vectors:
        import openai

        client = self._load()
        rows: list[list[float]] = []
        for i in range(0, len(texts), BATCH):
            try:
                answer = client.embeddings.create(model=self.model_name, input=list(texts[i:i + BATCH]),
                                                  encoding_format="float")
            except openai.APIStatusError as exc:
                raise ModelError(f"{self.base_url} refused to embed with {self.model_name!r} "
                                    f"({exc.status_code}); check MEMAGENT_EMBEDDER and the key") from None
            except openai.APIError as exc:
                raise ModelError(f"cannot reach the embeddings endpoint at {self.base_url}: "
                                    f"{type(exc).__name__}; check the server and its URL") from None
            rows += [d.embedding for d in sorted(answer.data, key=lambda d: d.index)]
        if len(rows) != len(texts):
            raise ModelError(f"{self.base_url} answered {len(rows)} vectors for {len(texts)} texts")
        out = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return np.ascontiguousarray(out / norms, dtype=np.float32)


DEFAULT_MODELS = {"openai": "text-embedding-3-small", "ollama": "nomic-embed-text", "openai-compatible": ""}


def build(provider: str, model: str, env: Mapping[str, str]) -> OpenAIEmbedder:
    model = model or DEFAULT_MODELS[provider]
    if not model:
        raise ModelError(f"MEMAGENT_EMBEDDER={provider} names no model; write it as {provider}/<model>")
    if provider == "ollama":
        root = (env.get("OLLAMA_HOST") or OLLAMA_URL).rstrip("/")
        if "://" not in root:
            root = "http://" + root
        return OpenAIEmbedder(provider, model, root + "/v1", env.get("OLLAMA_API_KEY") or "ollama")
    if provider == "openai":
        key = env.get("OPENAI_API_KEY")
        if not key:
            raise ModelError("MEMAGENT_EMBEDDER=openai/... needs OPENAI_API_KEY; set it, "
                                "or use the offline default (unset MEMAGENT_EMBEDDER)")
        return OpenAIEmbedder(provider, model, env.get("OPENAI_BASE_URL") or OPENAI_URL, key)
    url = env.get("OPENAI_BASE_URL")
    if not url:
        raise ModelError("MEMAGENT_EMBEDDER=openai-compatible/... needs OPENAI_BASE_URL "
                            "(the server's /v1 address)")
    return OpenAIEmbedder(provider, model, url, env.get("OPENAI_API_KEY") or "none")


# The entry points (``memagent.embedders``): each takes the model name ("" for the default).
def openai(model: str) -> OpenAIEmbedder:
    return build("openai", model, os.environ)


def openai_compatible(model: str) -> OpenAIEmbedder:
    return build("openai-compatible", model, os.environ)


def ollama(model: str) -> OpenAIEmbedder:
    return build("ollama", model, os.environ)
