"""Appending revisions: the one place that changes ``files`` and writes ``revisions``.

Every mutation of the store (write, edit, delete, move, revert, agent creation,
bulk import) ends here, inside a write transaction its caller opened. Invariants:

- ``append`` is the optimistic check: it changes the file only if it is still at
  ``expected`` (``UPDATE ... WHERE version = expected``, 0 = not live: no row, or a
  deleted row); otherwise ``StaleVersion`` and nothing is written. Creating a file
  races on the (scope, path) unique key, and the loser gets ``StaleVersion`` too.
- Each call bumps the file's version by one and inserts exactly one revision with
  that version, so ``files.version`` is always the newest revision's number.
- Contents are not validated here (the caller did that once, before); the revision
  message is scanned for secrets here, because every caller's message passes by.
- Messages name the file by ``shown``: the path as the caller's namespace shows it.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from memagent.vfs import paths
from memagent.vfs.backends import backend_for, postgres_roles
from memagent.vfs.backends.base import INSERT_REVISION, STATE_COLUMNS
from memagent.vfs.errors import InvalidPath, IsADirectory, StaleVersion, ValidationFailed
from memagent.vfs.models import files, revisions
from memagent.vfs.types import Approval, Author, Origin

log = logging.getLogger("memagent.vfs")


def now() -> datetime:
    return datetime.now(UTC)


def sha256(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def check_message(shown: str, message: str) -> None:
    """Refuse a revision message that carries a credential (it is stored for good)."""
    from memagent.validators import scan_message

    problems = scan_message(message)
    if problems:
        raise ValidationFailed(shown, problems)


_STATE_COLUMNS = STATE_COLUMNS


def _state(content: str | None, at: datetime) -> dict[str, Any]:
    """The ``files`` columns that describe ``content`` (None = a tombstone)."""
    return {
        "content": content,
        "size": len(content.encode("utf-8")) if content is not None else 0,
        "sha256": sha256(content) if content is not None else None,
        "deleted": content is None,
        "updated_at": at,
    }


def origin_columns(origin: Origin | None, author: Author) -> dict[str, Any]:
    """The provenance columns of a revision (an unnamed origin is read from the author)."""
    o = origin or Origin.default_for(author)
    return {"origin": o.kind, "origin_thread": o.thread, "origin_turn": o.turn, "origin_run": o.run,
            "origin_detail": o.detail[:500] or None}


# The statements shared by every database (the dialect-specific ones are the backend's).
_INSERT_REVISION = INSERT_REVISION


def stale(shown: str, expected: int, current: int | None, live: bool) -> StaleVersion:
    """The refusal for a writer who read version ``expected`` (0: read it as absent)."""
    if expected == 0:
        return StaleVersion(
            f"{shown} already exists (version {current}); read it first and write "
            "over the version you read"
        )
    now_is = f"version {current}" if live and current is not None else "deleted"
    return StaleVersion(
        f"{shown} changed since you read it (you read version {expected}, it is now "
        f"{now_is}); read it again and re-apply your change"
    )


def has_children(conn: Connection, scope: str, path: str) -> bool:
    """Whether any live file lies below ``path`` (then ``path`` is a directory)."""
    lo, hi = prefix_range(paths.dir_prefix(path))
    return conn.execute(
        select(files.c.id).where(
            files.c.scope == scope, files.c.path >= lo, files.c.path < hi, files.c.deleted.is_(False)
        ).limit(1)
    ).first() is not None


def guard_new_file(conn: Connection, scope: str, path: str, shown: str) -> None:
    """A file may not be created at a directory, nor below a live file."""
    if has_children(conn, scope, path):
        raise IsADirectory(f"{shown} is a directory; write to a file path inside it")
    ancestors = []
    parent = paths.parent(path)
    while parent != "/":
        ancestors.append(parent)
        parent = paths.parent(parent)
    if not ancestors:
        return
    clash = conn.scalar(
        select(files.c.path).where(
            files.c.scope == scope, files.c.path.in_(ancestors), files.c.deleted.is_(False)
        ).limit(1)
    )
    if clash:
        # Name the clash in the caller's namespace: same mount prefix as ``shown``.
        mount = shown[: len(shown) - len(path)] if shown.endswith(path) else ""
        raise InvalidPath(
            f"{mount}{clash} is a file, so {shown} cannot be created below it; choose another path"
        )


def append(conn: Connection, scope: str, path: str, content: str | None, *, expected: int,
           author: Author, approval: Approval, message: str, shown: str | None = None,
           origin: Origin | None = None) -> int:
    """Move the file from version ``expected`` (0: not live) to ``content``; return the new version.

    ``content`` None writes a tombstone. Raises ``StaleVersion`` when the file is not
    at ``expected`` any more; the caller's transaction then stores nothing.
    """
    shown = shown or path
    check_message(shown, message)
    at = now()
    state = _state(content, at)
    provenance = origin_columns(origin, author)
    if expected:
        # Update the live row at ``expected`` and append its revision (one statement
        # where the backend can: see its ``overwrite``).
        revision = {"author": author, "approval": approval, "message": message, "content": content,
                    "deleted": content is None, "size": state["size"], "created_at": at, **provenance}
        version = backend_for(conn).overwrite(
            conn, {"w_scope": scope, "w_path": path, "w_expected": expected}, state, revision)
        if version is None:
            raise _stale_now(conn, scope, path, shown, expected)
        log.debug("%s %s: version %d by %s (%s)", scope, path, version, author, approval)
        return version
    # Not live: bring a deleted row back (its history continues), else insert.
    row = conn.execute(
        update(files)
        .where(files.c.scope == scope, files.c.path == path, files.c.deleted.is_(True))
        .values(version=files.c.version + 1, **state)
        .returning(files.c.id, files.c.version)
    ).first()
    if row is None:
        try:
            row = conn.execute(
                insert(files)
                .values(scope=scope, path=path, version=1, created_at=at, **state)
                .returning(files.c.id, files.c.version)
            ).one()
        except IntegrityError:
            raise StaleVersion(
                f"{shown} was created by someone else while you were writing it; "
                "read it and re-apply your change"
            ) from None
    conn.execute(_INSERT_REVISION, {
        "file_id": row.id, "version": row.version, "author": author, "approval": approval, "message": message,
        "content": content, "deleted": content is None, "size": state["size"], "created_at": at,
        **provenance,
    })
    log.debug("%s %s: version %d by %s (%s)", scope, path, row.version, author, approval)
    return int(row.version)


def _stale_now(conn: Connection, scope: str, path: str, shown: str, expected: int) -> StaleVersion:
    """The refusal of a write over ``expected``, naming the version the file is at now."""
    current = conn.execute(
        select(files.c.version, files.c.deleted).where(files.c.scope == scope, files.c.path == path)
    ).first()
    if current is not None and current.version == expected:
        # Seen at the version read, yet the update matched no row: row-level security
        # lets this database role read the file but not change it (migration 0010).
        raise postgres_roles.PermissionDenied(
            f"{shown} is read-only to this database role; the database owner grants write access "
            "with `memagent db grant`")
    return stale(shown, expected, current.version if current else None,
                 current is not None and not current.deleted)


def create_many(conn: Connection, scope: str, new: Sequence[tuple[str, str]], *, author: Author,
                approval: Approval, message: str, origin: Origin | None = None) -> None:
    """Insert files that have no row yet, version 1 each, in two executemany statements.

    The caller has checked that none of the paths has a row and that the tree rules
    hold; a concurrent creator makes the whole transaction fail on the unique key.
    """
    if not new:
        return
    check_message(new[0][0], message)
    at = now()
    rows = [{"scope": scope, "path": p, "version": 1, "created_at": at, **_state(c, at)} for p, c in new]
    # Plain executemany, then the ids by path: SQLite would run an INSERT ... RETURNING
    # once per row. The index upkeep that triggers do row by row is done once for the
    # whole batch when the schema allows it (see _batch_upkeep).
    with _batch_upkeep(conn, scope, [p for p, _ in new]):
        conn.execute(insert(files), rows)
    ids: dict[str, int] = {}
    wanted = [p for p, _ in new]
    for i in range(0, len(wanted), CHUNK):
        for path, file_id in conn.execute(
            select(files.c.path, files.c.id).where(files.c.scope == scope, files.c.path.in_(wanted[i : i + CHUNK]))
        ):
            ids[path] = file_id
    provenance = origin_columns(origin, author)
    conn.execute(insert(revisions), [
        {**provenance, "file_id": ids[r["path"]], "version": 1, "author": author, "approval": approval,
         "message": message, "content": r["content"], "deleted": False, "size": r["size"], "created_at": at}
        for r in rows
    ])
    log.debug("%s: created %d files in one batch by %s", scope, len(rows), author)


CHUNK = 500  # bound parameters per IN (...) query, well under every driver's limit

# Below this many new files a batch lets the triggers index row by row (cheaper than
# the extra statements of the batched upkeep).
BATCH_UPKEEP_MIN = 20

_DIRS_UPSERT = text(
    "INSERT INTO dirs(scope, path, depth, files) VALUES (:scope, :path, :depth, :files) "
    "ON CONFLICT (scope, path) DO UPDATE SET files = dirs.files + excluded.files"
)


# A Postgres batch at least this large, and at least half the size of the table,
# drops the GIN indexes of ``files`` and builds them again after the insert.
GIN_REBUILD_MIN = 2000


def _dir_ancestors(path: str) -> list[str]:
    """The directories above a file (``/a/b/c.md`` -> ``/a``, ``/a/b``), as rows of ``dirs``."""
    return [path[:i] for i in range(1, len(path)) if path[i] == "/"]


@contextmanager
def _batch_upkeep(conn: Connection, scope: str, new_paths: Sequence[str]) -> Iterator[None]:
    """Around inserting ``new_paths`` (live, new rows): index them once, not row by row.

    Migration 0006 lets a transaction pause the per-row triggers (the backend's
    ``bulk_upkeep``: how, and what it indexes itself after the batch); the directory
    index is then brought up by one upsert here. Before 0006 (a store opened without
    migrating) the triggers do the work.
    """
    if len(new_paths) < BATCH_UPKEEP_MIN:
        yield
        return
    with backend_for(conn).bulk_upkeep(conn, len(new_paths), rebuild_min=GIN_REBUILD_MIN) as paused:
        yield
    if not paused:
        return
    counts: Counter[str] = Counter(a for p in new_paths for a in _dir_ancestors(p))
    if not counts:
        return  # every new file is at the top level
    # Sorted, so concurrent batches lock directory rows in the same order.
    conn.execute(_DIRS_UPSERT, [{"scope": scope, "path": a, "depth": a.count("/"), "files": n}
                                for a, n in sorted(counts.items())])


def prefix_range(prefix: str) -> tuple[str, str]:
    """[lo, hi) bounds so that ``lo <= p < hi`` iff ``p`` starts with ``prefix`` (bytewise)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)
