"""The one writer of conversation files (scope ``conversations:<agent>``).

A conversation file is a projection of a thread's rows in ``messages``, rendered
by ``episodes`` (the only place that turns a message into text) and stored in the
``files`` table so that ls, glob, grep, read and search answer it with the store's
own queries and indexes. ``ThreadStore`` decides *when* a file is written (on a
look at ``/conversations/``, on a changed message); this module is *how*: it is
the only code that inserts or updates a ``conversations:`` row, and memory's write
path (``AgentView``) refuses those scopes.

Invariants:
- **Not memory.** A conversation file has no revision rows and is never
  validated: it is derived data, re-renderable from ``messages`` at any time, and a
  revision per message would store the thread's text once per message. History,
  blame and revert have nothing to show for it.
- **What ``version`` means.** ``files.version`` of a conversation file is the seq
  of the last message rendered into it (``upto``), not a revision number: the file
  shows exactly the thread's messages with seq <= version (failed ones marked), no
  more, no less. A re-render after a message changed (``replace_last``, a turn
  marked failed) may change the text and keep the number.
- **Content equals a whole render.** Every write leaves the content equal to
  ``render_whole(header, messages up to version)``: an append adds the rendering of
  the next messages, folded through the same size bound as a whole render, so
  rendering piece by piece and rendering at once give the same bytes.
- **Bounded.** A file holds at most ``MAX_BYTES`` bytes (UTF-8): the message that
  does not fit is cut where the bound falls and followed by ``CUT_NOTE``; later
  messages only move ``version``. A file is cut exactly when its size exceeds
  ``MAX_BYTES - len(CUT_NOTE)``, which the fold reads from ``files.size``.
- **A stale write changes nothing.** Every update names the ``version`` it was
  rendered against (compare-and-set): a writer that read an older state writes no
  row and is told so (``False``); creation races on the ``(scope, path)`` key.
  Callers also hold their thread's row lock (``ThreadStore``), so in practice
  writers queue instead of failing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, bindparam, insert, select, update

from memagent.vfs.models import files
from memagent.vfs.records import episodes

# A conversation file's size bound in bytes: a long thread (40 turns of 40 KB) fits
# well inside; one pasted log of many megabytes does not make every grep slow.
MAX_BYTES = 4 * 1024 * 1024
CUT_NOTE = ("\n\n_(this file stops here: it reached its size limit; the whole thread is kept "
            "and continues in the thread's messages)_\n")


@dataclass(frozen=True)
class Shown:
    """How far a conversation file shows its thread: ``upto`` is ``files.version``."""

    upto: int
    size: int  # bytes of the content


@dataclass(frozen=True)
class Message:
    """One ``messages`` row as the renderer needs it."""

    seq: int
    role: str
    content: Any
    created_at: datetime
    state: str | None


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _limit() -> int:
    return MAX_BYTES - _nbytes(CUT_NOTE)


def fit(size: int, piece: str) -> str:
    """What of ``piece`` goes into a file of ``size`` bytes (the fold of the size bound).

    Whole when it fits under the limit; cut with ``CUT_NOTE`` when it crosses it
    (the result then ends above the limit, so the file counts as cut); nothing
    once the file is cut.
    """
    limit = _limit()
    if size > limit:
        return ""
    piece_bytes = piece.encode("utf-8")
    if size + len(piece_bytes) <= limit:
        return piece
    room = limit - size
    # Cut at a character boundary: at most 3 bytes are lost, fewer than CUT_NOTE adds,
    # so the file ends above the limit and later pieces add nothing.
    head = piece_bytes[:room].decode("utf-8", errors="ignore")
    return head + CUT_NOTE


def render_pieces(size: int, rows: Iterable[Message]) -> str:
    """The text that ``rows`` add to a file of ``size`` bytes."""
    out: list[str] = []
    for m in rows:
        piece = fit(size, episodes.render_message(m.role, m.content, m.created_at, state=m.state))
        if piece:
            out.append(piece)
            size += _nbytes(piece)
    return "".join(out)


def render_whole(head: str, rows: Iterable[Message]) -> str:
    """The whole file: ``head`` and then every message, through the size bound."""
    head = fit(0, head)
    return head + render_pieces(_nbytes(head), rows)


def header(*, title: str, thread_id: str, agent: str, model: str, created_at: datetime) -> str:
    return episodes.header(title=title, thread_id=thread_id, agent=agent, model=model,
                           created_at=created_at)


# -- reads --------------------------------------------------------------------------


def state(conn: Connection, agent: str, path: str) -> Shown | None:
    """How far the file at ``path`` shows its thread (None: no file yet)."""
    row = conn.execute(select(files.c.version, files.c.size)
                       .where(files.c.scope == episodes.scope_of(agent), files.c.path == path)).first()
    return None if row is None else Shown(row.version, row.size)


# -- writes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class New:
    """A file to create: its whole content, showing messages up to ``upto``."""

    path: str
    content: str
    upto: int


@dataclass(frozen=True)
class Grow:
    """Text to append to a file that was read as ``have``; it then shows up to ``upto``."""

    path: str
    piece: str
    have: Shown
    upto: int


def create(conn: Connection, agent: str, items: Sequence[New]) -> None:
    """Insert new files (one statement); a file that exists already raises IntegrityError."""
    if not items:
        return
    at = datetime.now(UTC)
    conn.execute(insert(files), [
        {"scope": episodes.scope_of(agent), "path": n.path, "content": n.content,
         "size": _nbytes(n.content), "sha256": None, "version": n.upto, "deleted": False,
         "created_at": at, "updated_at": at}
        for n in items])


_GROW = (update(files)
         .where(files.c.scope == bindparam("w_scope"), files.c.path == bindparam("w_path"),
                files.c.version == bindparam("w_have"), files.c.size == bindparam("w_size"))
         .values(content=files.c.content + bindparam("w_piece", type_=files.c.content.type),
                 size=files.c.size + bindparam("w_bytes"), version=bindparam("w_upto"),
                 updated_at=bindparam("w_at")))


def append(conn: Connection, agent: str, items: Sequence[Grow]) -> None:
    """Append to several files at once, each only if it is still at the state read.

    For many files in one statement; a caller that must know whether one stale
    append was refused uses ``append_one``.
    """
    if not items:
        return
    at = datetime.now(UTC)
    scope = episodes.scope_of(agent)
    conn.execute(_GROW, [{"w_scope": scope, "w_path": g.path, "w_have": g.have.upto, "w_size": g.have.size,
                          "w_piece": g.piece, "w_bytes": _nbytes(g.piece), "w_upto": g.upto,
                          "w_at": at} for g in items])


def append_one(conn: Connection, agent: str, item: Grow) -> bool:
    """Append to one file if it is still at the state read; False (nothing written) if not."""
    # The size is checked too: a piece was folded against that size (see ``fit``).
    result = conn.execute(
        update(files)
        .where(files.c.scope == episodes.scope_of(agent), files.c.path == item.path,
               files.c.version == item.have.upto, files.c.size == item.have.size)
        .values(content=files.c.content + item.piece, size=files.c.size + _nbytes(item.piece),
                version=item.upto, updated_at=datetime.now(UTC)))
    return result.rowcount == 1


def replace(conn: Connection, agent: str, path: str, content: str, *, have: Shown, upto: int) -> bool:
    """Replace a file's whole content if it is still at the state read; False if not."""
    result = conn.execute(
        update(files)
        .where(and_(files.c.scope == episodes.scope_of(agent), files.c.path == path,
                    files.c.version == have.upto, files.c.size == have.size))
        .values(content=content, size=_nbytes(content), version=upto, updated_at=datetime.now(UTC)))
    return result.rowcount == 1
