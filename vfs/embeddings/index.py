"""The vectors of the files: kept in step off the write path, scored in process.

Invariants:
- A write only notes its file in ``embedding_pending`` (triggers, migration 0009).
  ``sync`` embeds the noted files, in batches: read the rows, embed with no lock
  held, then in one transaction replace the files' vectors and remove each note
  only if it is still the note read. A change made meanwhile
  keeps its note (a new ``seq``, migration 0009), so no change is missed, and a
  crash loses nothing.
- Vectors record the embedder's model and dimension; only the current model's are
  read. The first sync under a model with no ``embedding_state`` row (a new
  database, a switched ``MEMAGENT_EMBEDDER``, a reindex) removes every other
  model's vectors and notes every live file: switching re-embeds, never mixes.
- ``rank`` answers only live files at the version their vectors were made from: a
  vector of an older version, a moved or deleted file never surfaces, whatever the
  in-memory copy holds.
- The in-memory copy (one float32 matrix per store) is current with the database's
  generation for the model, read once per query (one indexed row); when it moved,
  only rows of newer generations are read and replace their files' rows. It holds
  the vectors of the scopes searched only (at most ``MAX_LOADED_SCOPES``, each read
  as one range of ``ix_embeddings_scope``, migration 0011), and a search scores the
  rows of its own scopes only: with many agents in one database, one agent's search
  costs what it costs alone (``bench/scale.py``).
- A file's score is its best chunk's cosine similarity, and the order is a function
  of the vectors only: every row is scored by the same sum (``np.einsum``; a BLAS
  product rounds a row by its position in the matrix, so two identical vectors
  scored a few ulps apart depending on the order rows were loaded), and equal
  scores go by file id.
- numpy is imported by the first sync or search, not with this module: every store
  builds a ``VectorIndex``, and a command that does not search loads no numpy
  (issue 44, ``tests/test_startup_imports.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from memagent.vfs.backends import backend_for
from memagent.vfs.db import WRITE
from memagent.vfs.pending import OWN_CONNECTION

from . import chunks
from .base import Embedder, EmbedderError, Vectors, first_line

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger("memagent.vfs")

BATCH_FILES = 256
# Execution option marking the index's own connections: the background merge's
# commit listener ignores them (vfs/pending.py), so a sync never schedules another.
OWN = OWN_CONNECTION


@dataclass(frozen=True)
class SemanticHit:
    file_id: int
    scope: str
    path: str
    version: int
    score: float
    chunk: int


@dataclass(frozen=True)
class SyncReport:
    files: int
    chunks: int
    seconds: float
    model: str


def _empty(dtype: str, dims: int = 1) -> Any:
    """An empty array of ``dtype`` (numpy loads here, with the first search)."""
    import numpy as np

    return np.zeros((0,) * dims, dtype)


@dataclass
class _Cache:
    model: str
    dim: int
    gen: int
    file_ids: npt.NDArray[np.int64] = field(default_factory=lambda: _empty("int64"))
    chunk_nos: npt.NDArray[np.int32] = field(default_factory=lambda: _empty("int32"))
    versions: npt.NDArray[np.int64] = field(default_factory=lambda: _empty("int64"))
    scope_codes: npt.NDArray[np.int32] = field(default_factory=lambda: _empty("int32"))
    matrix: Vectors = field(default_factory=lambda: _empty("float32", 2))
    scopes: dict[str, int] = field(default_factory=dict)
    # The scopes whose vectors were read (all of their rows, up to ``gen``): only those
    # a search asked for, so a database of many agents is not held in every process.
    loaded: frozenset[str] = frozenset()

    def add(self, rows: Sequence[Any]) -> None:
        """Rows (file_id, chunk, version, scope, vector) replace every row of their files."""
        import numpy as np

        rows = [r for r in rows if len(r.vector) == 4 * self.dim]
        if not rows:
            return
        new_ids = np.array([r.file_id for r in rows], np.int64)
        keep = ~np.isin(self.file_ids, new_ids)
        codes = [self.scopes.setdefault(r.scope, len(self.scopes)) for r in rows]
        vecs = np.frombuffer(b"".join(r.vector for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
        base = self.matrix[keep] if len(self.matrix) else np.zeros((0, self.dim), np.float32)
        self.matrix = np.ascontiguousarray(np.vstack([base, vecs]))
        self.file_ids = np.concatenate([self.file_ids[keep], new_ids])
        self.chunk_nos = np.concatenate([self.chunk_nos[keep], np.array([r.chunk for r in rows], np.int32)])
        self.versions = np.concatenate([self.versions[keep], np.array([r.version for r in rows], np.int64)])
        self.scope_codes = np.concatenate([self.scope_codes[keep], np.array(codes, np.int32)])


_ROWS = "SELECT file_id, chunk, version, scope, vector FROM embeddings WHERE model = :m AND dim = :d"
# A process keeps the vectors of at most this many scopes; past it, the next search
# starts over with the scopes it asks for (an MCP server serving many agents in turn).
MAX_LOADED_SCOPES = 64


def _rows_of(conn: Connection, model: str, dim: int, scopes: Sequence[str], after: int | None = None) -> list[Any]:
    """The vector rows of ``scopes`` (newer than generation ``after`` if given): one range
    of ``ix_embeddings_scope`` (migration 0011) per scope."""
    if not scopes:
        return []
    names = {f"s{i}": s for i, s in enumerate(scopes)}
    sql = _ROWS + f" AND scope IN ({', '.join(':' + n for n in names)})" + ("" if after is None else " AND gen > :g")
    return list(conn.execute(text(sql), {"m": model, "d": dim, "g": after, **names}).all())


def _note_every_file(conn: Connection) -> None:
    """Note every live file for embedding, each with a fresh seq (as the triggers do)."""
    backend_for(conn).note_every_file(conn)


def _embed(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``embedder.embed``; whatever a third-party embedder raises becomes one ``EmbedderError`` line."""
    try:
        return embedder.embed(texts)
    except EmbedderError:
        raise
    except Exception as exc:  # an embedder's own error type (ModelError, a library's): one line
        raise EmbedderError(f"embedding with {embedder.model} failed: {first_line(exc)}") from None


class VectorIndex:
    """The vectors of one store's database (see the module docstring)."""

    def __init__(self, engine: Engine, embedder: Embedder | None = None,
                 make: Callable[[], Embedder] | None = None) -> None:
        self._engine = engine
        self._embedder = embedder
        self._make = make
        self._sync_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._cache: _Cache | None = None
        self.embedded_files = 0  # files embedded by this process (tests, bench)

    # -- the embedder ---------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            if self._make is None:
                from . import registry

                self._embedder = registry.build()
            else:
                self._embedder = self._make()
        return self._embedder

    def use(self, embedder: Embedder) -> None:
        """Embed with ``embedder`` from now on (its first sync re-embeds if its model is new)."""
        with self._sync_lock, self._cache_lock:
            self._embedder = embedder
            self._cache = None

    # -- keeping vectors in step ------------------------------------------------

    def _conn(self, *, write: bool = False) -> Any:
        options: dict[str, Any] = {OWN: True}
        if write:
            options[WRITE] = True
        return self._engine.connect().execution_options(**options)

    def sync(self, *, load: bool = True) -> SyncReport:
        """Embed every noted file. ``load=False``: only if the model is loaded already
        (the background merge never pays the load)."""
        start = time.perf_counter()
        if not load and (self._embedder is None or not self._embedder.ready):
            return SyncReport(0, 0, 0.0, "")
        embedder = self.embedder
        files = pieces = 0
        with self._sync_lock:
            self._ensure_state(embedder.model)
            seen: set[int] = set()
            while True:
                with self._conn() as conn:
                    batch = conn.execute(text(
                        "SELECT p.file_id, p.seq, f.scope, f.path, f.content, f.version FROM embedding_pending AS p "
                        "LEFT JOIN files AS f ON f.id = p.file_id ORDER BY p.file_id LIMIT :n"),
                        {"n": BATCH_FILES}).all()
                if not batch or all(r.file_id in seen for r in batch):
                    break  # nothing left, or only files changing faster than we embed (next sync)
                seen.update(r.file_id for r in batch)
                pieces += self._store(embedder, batch)
                files += len(batch)
        self.embedded_files += files
        return SyncReport(files, pieces, time.perf_counter() - start, embedder.model)

    def _ensure_state(self, model: str) -> None:
        with self._conn() as conn:
            if conn.execute(text("SELECT 1 FROM embedding_state WHERE model = :m"), {"m": model}).first():
                return
        try:
            with self._conn(write=True) as conn, conn.begin():
                if conn.execute(text("SELECT 1 FROM embedding_state WHERE model = :m"), {"m": model}).first():
                    return
                old = conn.execute(text("SELECT coalesce(max(gen), 0) FROM embedding_state")).scalar() or 0
                conn.execute(text("DELETE FROM embeddings WHERE model <> :m"), {"m": model})
                conn.execute(text("DELETE FROM embedding_state"))
                conn.execute(text("INSERT INTO embedding_state(model, gen) VALUES (:m, :g)"),
                             {"m": model, "g": int(old) + 1})
                _note_every_file(conn)
        except IntegrityError:  # another process created the row first: it noted the files
            pass

    def _store(self, embedder: Embedder, batch: Sequence[Any]) -> int:
        import numpy as np

        texts: list[str] = []
        owners: list[tuple[Any, int]] = []
        for row in batch:
            if row.content is None:
                continue
            for i, piece in enumerate(chunks.texts(row.path, row.content)):
                texts.append(piece)
                owners.append((row, i))
        vectors = _embed(embedder, texts) if texts else np.zeros((0, 0), np.float32)
        if len(vectors) != len(texts):
            raise EmbedderError(f"the embedder answered {len(vectors)} vectors for {len(texts)} texts")
        dim = int(vectors.shape[1]) if texts else 0
        ids = [int(r.file_id) for r in batch]
        with self._conn(write=True) as conn, conn.begin():
            conn.execute(text("UPDATE embedding_state SET gen = gen + 1 WHERE model = :m"), {"m": embedder.model})
            gen = conn.execute(text("SELECT gen FROM embedding_state WHERE model = :m"),
                               {"m": embedder.model}).scalar()
            if gen is None:  # a reindex removed the state meanwhile: store nothing, the next sync redoes it
                return 0
            conn.execute(text(f"DELETE FROM embeddings WHERE file_id IN ({', '.join(map(str, ids))})"))
            if texts:
                conn.execute(text(
                    "INSERT INTO embeddings(file_id, scope, chunk, model, dim, version, gen, vector) "
                    "VALUES (:f, :s, :c, :m, :d, :v, :g, :x)"),
                    [{"f": r.file_id, "s": r.scope, "c": i, "m": embedder.model, "d": dim, "v": r.version,
                      "g": gen, "x": vectors[n].tobytes()} for n, (r, i) in enumerate(owners)])
            # A note goes only if it is the one read: a change made meanwhile (even one to
            # the same text, or a conversation re-rendered at the same version) gave it a
            # new seq and keeps it for the next sync (migration 0009).
            conn.execute(text("DELETE FROM embedding_pending WHERE file_id = :f AND seq = :s"),
                         [{"f": r.file_id, "s": r.seq} for r in batch])
        return len(texts)

    def reindex(self) -> SyncReport:
        """Drop every vector and embed every live file again with the current embedder."""
        model = self.embedder.model
        with self._sync_lock, self._cache_lock:
            with self._conn(write=True) as conn, conn.begin():
                conn.execute(text("DELETE FROM embeddings"))
                conn.execute(text("DELETE FROM embedding_state WHERE model <> :m"), {"m": model})
                conn.execute(text("UPDATE embedding_state SET gen = gen + 1 WHERE model = :m"), {"m": model})
                _note_every_file(conn)
            self._cache = None
        return self.sync()

    # -- scoring ------------------------------------------------------------------

    def _current(self, conn: Connection, model: str, dim: int, scopes: Sequence[str]) -> _Cache | None:
        gen = conn.execute(text("SELECT gen FROM embedding_state WHERE model = :m"), {"m": model}).scalar()
        if gen is None:
            return None
        with self._cache_lock:
            cache = self._cache
            new = [s for s in dict.fromkeys(scopes) if cache is None or s not in cache.loaded]
            if (cache is None or cache.model != model or cache.dim != dim or gen < cache.gen
                    or len(cache.loaded) + len(new) > MAX_LOADED_SCOPES):
                cache = _Cache(model, dim, 0, loaded=frozenset(scopes))
                cache.add(_rows_of(conn, model, dim, list(cache.loaded)))
            elif gen > cache.gen or new:
                # A new object: a search in another thread may still be reading the old one
                # (``add`` replaces arrays, never changes one in place).
                cache = dataclasses.replace(cache, scopes=dict(cache.scopes), loaded=cache.loaded | set(new))
                if gen > cache.gen:
                    cache.add(_rows_of(conn, model, dim, [s for s in cache.loaded if s not in new], cache.gen))
                cache.add(_rows_of(conn, model, dim, new))
            cache.gen = int(gen)
            self._cache = cache
            return cache

    def rank(self, conn: Connection, scopes: Sequence[str], query: str, k: int,
             min_score: float = -1.0) -> list[SemanticHit]:
        """The live files of ``scopes`` closest in meaning to ``query`` with a best chunk
        scoring at least ``min_score``; best first, at most ``k``."""
        import numpy as np

        embedder = self.embedder
        q = _embed(embedder, [query])[0]
        cache = self._current(conn, embedder.model, int(q.shape[0]), scopes)
        if cache is None or not len(cache.matrix):
            return []
        wanted = [cache.scopes[s] for s in scopes if s in cache.scopes]
        if not wanted:
            return []
        # Only the rows of the scopes asked are scored: with many agents in one database
        # the matrix holds every agent's chunks, and a product over all of them grew
        # with the number of agents (bench/scale.py). Finding the rows is one compare
        # of the int32 codes (~0.1 ms per 300,000 chunks); the product is on the copy.
        rows: npt.NDArray[np.intp] | None = None
        if len(wanted) < len(cache.scopes):
            hit = cache.scope_codes == wanted[0] if len(wanted) == 1 else np.isin(cache.scope_codes, wanted)
            rows = np.flatnonzero(hit)
        # einsum, not ``@``: BLAS blocks the rows, and a row's rounding depended on its
        # place in the matrix (which the load history decides); einsum sums every row alike.
        scores = np.einsum("ij,j->i", cache.matrix if rows is None else cache.matrix[rows], q)
        file_ids = cache.file_ids if rows is None else cache.file_ids[rows]
        out: list[SemanticHit] = []
        taken: set[int] = set()
        want = 2 * k + 10
        pos = 0
        for ranked in _best_chunks(scores, file_ids, min_score, 8 * want):
            # Indexes into the whole cache (``ranked`` indexes the rows scored).
            part = [int(i) for i in ranked[pos:]] if rows is None else [int(rows[i]) for i in ranked[pos:]]
            local = dict(zip(part, (int(i) for i in ranked[pos:]), strict=True))
            ids = [int(cache.file_ids[i]) for i in part]
            live = {r.id: r for r in conn.execute(text(
                f"SELECT id, scope, path, version FROM files WHERE id IN ({', '.join(map(str, ids))}) "
                f"AND deleted = {backend_for(conn).sql_false}"))} if ids else {}
            for i in part:
                pos += 1
                fid = int(cache.file_ids[i])
                r = live.get(fid)
                if fid in taken or r is None or r.version != int(cache.versions[i]):
                    continue  # deleted, moved or changed since its vectors were made
                taken.add(fid)
                out.append(SemanticHit(fid, r.scope, r.path, r.version, float(scores[local[i]]),
                                       int(cache.chunk_nos[i])))
                if len(out) >= k:
                    return out
        return out


def contents(conn: Connection, file_ids: Sequence[int]) -> dict[int, str]:
    """The current text of these files (read only for the hits an answer shows)."""
    if not file_ids:
        return {}
    rows = conn.execute(text(f"SELECT id, content FROM files WHERE id IN ({', '.join(map(str, map(int, file_ids)))})"))
    return {r.id: r.content or "" for r in rows}


def _best_chunks(scores: npt.NDArray[np.float32], file_ids: npt.NDArray[np.int64], min_score: float,
                 first: int) -> Iterator[npt.NDArray[np.intp]]:
    """Rows of the best chunk of each file scoring at least ``min_score``, best first (equal
    scores by file id): the files among the ``first`` best chunks (and any tied with the
    last of them), then (if the caller wants more) all of them.

    Each answer starts with the previous one (a caller resumes where it stopped).
    """
    import numpy as np

    n = len(scores)
    m = min(first, n)
    while True:
        if m < n:
            # Every chunk tied with the m-th best too: which of them argpartition keeps is
            # the matrix's row order, not the data.
            cut = scores[np.argpartition(-scores, m - 1)[m - 1]]
            top = np.flatnonzero(scores >= cut)
        else:
            top = np.arange(n)
        top = top[scores[top] >= min_score]
        order = top[np.lexsort((file_ids[top], -scores[top]))]
        _, firsts = np.unique(file_ids[order], return_index=True)
        yield order[np.sort(firsts)]
        if m >= n or len(top) < m:
            return  # every chunk that could qualify has been seen
        m = n
