"""The embedder seam: what turns texts into vectors, and its one-line errors.

Invariants:
- ``Embedder.model`` names the model exactly (``wordllama/l2_supercat``,
  ``openai/text-embedding-3-small``); every stored vector records it and its
  dimension, so vectors of two models are never compared.
- ``embed`` returns one float32 row per text, L2-normalised (``normalised``), so a
  dot product is the cosine similarity.
- Building an embedder costs nothing: the model (or SDK client) is loaded on the
  first ``embed``; ``ready`` says whether that happened (the background merge only
  embeds with a loaded model and never pays the load itself).
- Failures are ``EmbedderError`` (a ``VfsError``): one line naming what to install
  or set.
- Importing this module does not import numpy (``normalised`` does, on first use):
  the CLI reads ``SEARCH_MODES`` and ``EmbedderError`` from here, and a command that
  does not search loads no numpy (issue 44, ``tests/test_startup_imports.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from memagent.vfs.errors import VfsError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# A string at run time (annotations only; every user has ``from __future__ import annotations``).
Vectors: TypeAlias = "npt.NDArray[np.float32]"
SearchMode = Literal["lexical", "semantic", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("lexical", "semantic", "hybrid")


class EmbedderError(VfsError):
    """The embedder cannot be built or cannot answer (missing package, bad setting, server error)."""


class Embedder(Protocol):
    """Texts in, L2-normalised float32 vectors out (one row per text)."""

    @property
    def model(self) -> str: ...

    @property
    def ready(self) -> bool: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def normalised(rows: npt.ArrayLike) -> Vectors:
    """``rows`` as float32 with every row of length 1 (a zero row stays zero)."""
    import numpy as np

    out = np.asarray(rows, dtype=np.float32)
    if out.ndim != 2:
        raise EmbedderError(f"the embedder answered {out.ndim}-dimensional data; expected one vector per text")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)


def first_line(exc: BaseException) -> str:
    """An exception as one line for a person."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def check_mode(mode: str) -> SearchMode:
    if mode not in SEARCH_MODES:
        raise EmbedderError(f"search mode {mode!r} is unknown; use one of {', '.join(SEARCH_MODES)}")
    return mode
