"""``fastembed/<model>``: ONNX embedding models (bge-small, ...), downloaded on first use.

An optional extra: without the package, the first use is one line naming the
extra to install.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import EmbedderError, Vectors, normalised

EXTRA = "fastembed"


class FastEmbedEmbedder:
    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.model = f"fastembed/{model_name}"
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from fastembed import TextEmbedding
                except ImportError:
                    raise EmbedderError(
                        f"MEMAGENT_EMBEDDER={self.model} needs the optional fastembed package: "
                        f"pip install 'memagent[{EXTRA}]'") from None
                try:
                    self._model = TextEmbedding(model_name=self.model_name)
                except Exception as exc:  # the library raises many kinds: unknown model, download failed
                    raise EmbedderError(f"cannot load fastembed model {self.model_name!r}: "
                                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
            return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        model = self._load()
        return normalised(list(model.embed(list(texts))))


def build(name: str, model: str, env: Mapping[str, str]) -> FastEmbedEmbedder:
    return FastEmbedEmbedder(model)
