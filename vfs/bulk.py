"""Writing many files in one transaction (imports, agent creation, benchmarks' bulk load).

Invariants (the same as for single writes, applied to the whole batch):
- The caller normalises every path (``normalize_batch``) and validates every
  content before the transaction starts; one refusal refuses the batch and nothing
  is stored (all or nothing). ``SqlStore.bulk_write`` does both, then calls
  ``write_batch`` inside its write transaction.
- Each file gets exactly one new revision; an existing file (live or deleted)
  continues its version numbers through ``revisions.append``, the same commit as a
  single write.
- Directory rules hold for the state after the batch: no file is created at a path
  that is a directory, or below a path that is a live file, counting the batch's
  own files too.
- New files are inserted with executemany (``revisions.create_many``: one round trip
  per few hundred rows on Postgres, one prepared statement on SQLite), and their
  index upkeep is done once for the batch (``revisions._batch_upkeep``, 20 files or
  more): the per-row triggers are paused for the insert (migration 0006), then
  SQLite's two FTS5 indexes get one ``INSERT ... SELECT`` each (FTS5 flushes its
  buffer at each statement, so row by row costs about twice as much) and the
  directory counts one upsert per folder; on Postgres a batch that is at least half
  the table drops its GIN indexes and builds them again after the insert. What
  remains is the database's own work on the text: FTS5's trigram and word indexes
  on SQLite, the generated ``tsvector`` and the GIN builds on Postgres.

This module imports nothing from ``vfs.store`` (the store imports it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, select

from memagent.vfs import paths
from memagent.vfs.errors import InvalidPath, IsADirectory, VfsError
from memagent.vfs.models import files
from memagent.vfs.revisions import CHUNK, append, create_many
from memagent.vfs.types import Approval, Author, Change, Origin


def _ancestors(path: str) -> Iterable[str]:
    parent = paths.parent(path)
    while parent != "/":
        yield parent
        parent = paths.parent(parent)


def normalize_batch(batch: Mapping[str, str]) -> dict[str, str]:
    """The batch with normalised file paths; a path given twice is refused."""
    out: dict[str, str] = {}
    for raw, content in batch.items():
        path = paths.normalize_file(raw)
        if path in out:
            raise VfsError(f"{path} appears twice in the batch (as {raw!r}); give each file once")
        out[path] = content
    return out


def _existing(conn: Connection, scope: str, wanted: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for i in range(0, len(wanted), CHUNK):
        chunk = wanted[i : i + CHUNK]
        for row in conn.execute(
            select(files.c.path, files.c.version, files.c.deleted, files.c.content)
            .where(files.c.scope == scope, files.c.path.in_(chunk))
        ):
            found[row.path] = row
    return found


def _check_tree(conn: Connection, scope: str, batch: dict[str, str],
                existing: dict[str, Any]) -> None:
    live_now = set(
        conn.scalars(
            select(files.c.path).where(files.c.scope == scope, files.c.deleted.is_(False))
        )
    )
    live_after = live_now | set(batch)
    dirs_after = {a for p in live_after for a in _ancestors(p)}
    for path in sorted(batch):
        row = existing.get(path)
        if row is not None and not row.deleted:
            continue  # overwriting a live file changes no directory
        if path in dirs_after:
            raise IsADirectory(f"{path} is a directory; write to a file path inside it")
        for parent in _ancestors(path):
            if parent in live_after:
                raise InvalidPath(
                    f"{parent} is a file, so {path} cannot be created below it; "
                    "choose another path"
                )


def write_batch(conn: Connection, scope: str, batch: dict[str, str], *, author: Author,
                approval: Approval, message: str, origin: Origin | None = None) -> list[Change]:
    """Write a normalised, validated batch inside the caller's write transaction.

    Returns the changes in path order.
    """
    ordered = sorted(batch)
    existing = _existing(conn, scope, ordered)
    _check_tree(conn, scope, batch, existing)
    changes: dict[str, Change] = {}
    for path, row in existing.items():
        version = append(conn, scope, path, batch[path], expected=0 if row.deleted else row.version,
                         author=author, approval=approval, message=message or "write", origin=origin)
        changes[path] = Change(path, version, None if row.deleted else row.content, batch[path])
    new = [p for p in ordered if p not in existing]
    create_many(conn, scope, [(p, batch[p]) for p in new], author=author, approval=approval,
                message=message or "create", origin=origin)
    for path in new:
        changes[path] = Change(path, 1, None, batch[path])
    return [changes[p] for p in ordered]
