"""One database's memory as one object: ``open_memory(url)`` returns a ``Memory``.

A ``Memory`` owns what memagent keeps in one database, each part built once, on
first use, over the store's one ``Database`` (engine and backend):

- ``files``: the file store (``SqlStore``: every agent's, user's and org's files,
  their revisions, the full-text and vector indexes);
- ``threads``: the chat threads (``ThreadStore``), which also keep the conversation
  files below ``/conversations/`` (``vfs/records/conversation_files.py``, rendered by
  ``vfs/records/episodes.py``);
- ``queue``: reflection runs and the review queue of proposed edits (``ProposalStore``);
- ``rules(agent)``: an agent's approval rules (``RuleBook``, one per agent);
- ``vectors``: the embeddings index (``files.vectors``, ``vfs/embeddings/index.py``);
- ``view(agent, ...)``: an ``AgentView`` over ``files``.

Code above ``vfs`` asks a ``Memory`` for these instead of building a ``ThreadStore``
or a ``ProposalStore`` itself or reaching for a store's ``.db`` or ``.engine``
(tests/test_memory_object.py fails on any such line in ``agent/`` or ``integrations/``).

Invariants:

- One ``Memory`` per store: ``Memory.of(store)`` returns the same object every time
  (the one ``open_memory`` made, or one made on the first call), so the thread
  store's caches and the rule books are shared by everything holding that store. The
  store keeps its ``Memory`` in an attribute (a reference cycle the collector frees
  with the store), not in a global table that would keep every closed store alive.
- One lifetime: ``close()`` closes ``files`` (its pending index work merged, every
  pooled connection closed); threads, queue and rules have no connections of their
  own (they borrow the store's engine), so nothing else is left open. Closing the
  ``Memory`` or its store is the same thing; the owner (whoever opened it) closes it.
- A store without a database (a double in tests or an integration) has no records:
  ``memory_of`` answers ``None`` for it, and its callers say what they do without
  (approval rules with no review queue: a ``queue`` rule refuses).
- Parts are built under a lock: two threads of one process (``mcp serve``'s
  sessions) asking at once get the same ``ThreadStore`` and ``ProposalStore``.
- Importing this module loads nothing beyond the store: threads, proposals, rules and
  views are imported when first asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sqlalchemy import event

from memagent.vfs import open_store
from memagent.vfs.files.store import SqlStore, Store, Validator

if TYPE_CHECKING:
    from memagent.vfs.embeddings.index import VectorIndex
    from memagent.vfs.records.queue import ProposalStore
    from memagent.vfs.records.rules import RuleBook
    from memagent.vfs.records.threads import ThreadStore
    from memagent.vfs.scopes import AgentView

# The attribute under which a store keeps the one Memory over it (see the module docstring).
_KEPT = "_memagent_memory"
# Guards making the one Memory of a store (two threads calling ``Memory.of`` at once).
_MAKING = threading.Lock()


class Memory:
    """The memory in one database: files, threads, review queue, approval rules, vectors.

    Made by ``open_memory(url)`` (which owns the store it opens) or ``Memory.of(store)``
    (over a store someone else opened). Parts are built on first use; ``close()`` (or
    leaving a ``with`` block) closes the database connections.
    """

    def __init__(self, files: SqlStore) -> None:
        """Prefer ``open_memory`` or ``Memory.of``: this makes a second ``Memory`` when
        ``files`` already has one (``Memory.of`` would return that one)."""
        self.files = files
        self._lock = threading.Lock()
        self._threads: ThreadStore | None = None
        self._queue: ProposalStore | None = None
        self._rules: dict[str, RuleBook] = {}
        self._closed = False
        files.__dict__.setdefault(_KEPT, self)

    @classmethod
    def of(cls, store: SqlStore) -> Memory:
        """The ``Memory`` over ``store`` (the same object on every call)."""
        kept = store.__dict__.get(_KEPT)
        if isinstance(kept, Memory):
            return kept
        with _MAKING:
            kept = store.__dict__.get(_KEPT)
            return kept if isinstance(kept, Memory) else cls(store)

    # -- the parts ------------------------------------------------------------------

    @property
    def threads(self) -> ThreadStore:
        """Every agent's chat threads, and their conversation files."""
        if self._threads is None:
            from memagent.vfs.records.threads import ThreadStore

            with self._lock:
                if self._threads is None:
                    self._threads = ThreadStore(self.files.db)
        return self._threads

    @property
    def queue(self) -> ProposalStore:
        """Reflection runs and the review queue of proposed memory edits (every agent's)."""
        if self._queue is None:
            from memagent.vfs.records.queue import ProposalStore

            with self._lock:
                if self._queue is None:
                    self._queue = ProposalStore(self.files.db)
        return self._queue

    def rules(self, agent: str) -> RuleBook:
        """``agent``'s approval rules (read from its settings scope at each decision)."""
        book = self._rules.get(agent)
        if book is None:
            from memagent.vfs.records.rules import RuleBook

            with self._lock:
                book = self._rules.setdefault(agent, RuleBook(self.files, agent))
        return book

    @property
    def vectors(self) -> VectorIndex:
        """The embeddings index of the files (kept in step by searches, ``vfs/embeddings/``)."""
        return self.files.vectors

    def view(self, agent: str, *, user: str | None = None, org: str | None = None,
             org_writable: bool = False) -> AgentView:
        """``agent``'s tree over ``files`` (``/user/`` and ``/org/`` mounted when given)."""
        from memagent.vfs.scopes import AgentView

        return AgentView(self.files, agent, user=user, org=org, org_writable=org_writable)

    # -- hooks ----------------------------------------------------------------------

    def on_statement(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with the text of every SQL statement this memory's connections
        run, and with ``"COMMIT"`` at every commit, from whichever thread runs it (the
        listener filters). For tests that stop a command at a known step of a write
        (``memagent import``'s ``MEMAGENT_TEST_IMPORT_STOP_AT``); it stays for the
        memory's lifetime."""
        engine = self.files.engine

        def statement(_conn: Any, _cursor: Any, text: str, *_rest: Any) -> None:
            listener(text)

        def commit(_conn: Any) -> None:
            listener("COMMIT")

        event.listen(engine, "before_cursor_execute", statement)
        event.listen(engine, "commit", commit)

    # -- lifetime -------------------------------------------------------------------

    def close(self) -> None:
        """Close the database connections (the store's pending index work is merged
        first). Idempotent; the memory and its parts may not be used after."""
        if self._closed:
            return
        self._closed = True
        self.files.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory({self.files.db!r})"


def open_memory(url: str, *, validator: Validator | None = None, migrate: bool = True,
                create: bool = True) -> Memory:
    """The memory in the database at ``url``, migrated first (``migrate=False``: as it is).

    ``create=False`` refuses a SQLite file that does not exist (``DatabaseUnavailable``)
    instead of creating it and its folder: for commands that only read. ``validator``
    replaces the file validators (tests). Close it with ``close()`` or a ``with`` block.
    """
    return Memory.of(open_store(url, validator=validator, migrate=migrate, create=create))


def memory_of(holder: Store | AgentView) -> Memory | None:
    """The ``Memory`` of the database a store (or an ``AgentView``'s store) is over.

    ``None`` when the store is not a ``SqlStore`` (a double in tests, another program's
    store behind an integration): it has no threads, no review queue and no database to
    hook, and the caller does without them, saying so where it matters.
    """
    from memagent.vfs.scopes import AgentView

    store = holder.store if isinstance(holder, AgentView) else holder
    return Memory.of(store) if isinstance(store, SqlStore) else None


__all__ = ["Memory", "memory_of", "open_memory"]
