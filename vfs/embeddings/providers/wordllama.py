"""``wordllama``: the offline default, the 256-dimension model its wheel ships.

WordLlama's loader looks for the tokenizer under ``tokenizer/`` while the wheel
ships it under ``tokenizers/``; loading with ``cache_dir`` set to the package's own
folder and ``disable_download`` finds both, with no network (tests check it loads
in a network namespace with no interface up). Loading takes ~0.1 s, so it happens
on the first ``embed``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import EmbedderError, Vectors, normalised

# Token ids per text: WordLlama averages token vectors, so a longer text only costs
# time (chunks are already bounded; this bounds a query).
MAX_CHARS = 8000


class WordLlamaEmbedder:
    def __init__(self, config: str) -> None:
        self.config = config
        self.model = f"wordllama/{config}"
        self._wl: Any = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self._wl is not None

    def _load(self) -> Any:
        with self._lock:
            if self._wl is None:
                try:
                    wordllama, WordLlama = _import_quietly()
                except ImportError:
                    raise EmbedderError("the wordllama embedder needs the wordllama package: "
                                        "pip install wordllama (or reinstall memagent)") from None
                folder = os.path.dirname(wordllama.__file__)
                try:
                    self._wl = WordLlama.load(config=self.config, cache_dir=folder, disable_download=True)
                except (FileNotFoundError, ValueError, OSError, AttributeError) as exc:
                    raise EmbedderError(f"cannot load the wordllama model {self.config!r} ({exc}); "
                                        "use MEMAGENT_EMBEDDER=wordllama for the model its package ships") from None
            return self._wl

    def embed(self, texts: Sequence[str]) -> Vectors:
        wl = self._load()
        return normalised(wl.embed([t[:MAX_CHARS] for t in texts], norm=False))


def _import_quietly() -> tuple[Any, Any]:
    """Import wordllama without the process-wide logging it configures.

    Importing it calls ``logging.basicConfig(level=INFO)``: a handler on the root
    logger and INFO for everyone, so every library's INFO lines (httpx's requests,
    ours) would reach the user's stderr. The root logger is put back as it was.
    """
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        import wordllama
        from wordllama import WordLlama
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return wordllama, WordLlama


def build(name: str, model: str, env: Mapping[str, str]) -> WordLlamaEmbedder:
    return WordLlamaEmbedder(model)
