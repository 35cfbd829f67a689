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
- With ``expected`` (path -> the version the caller saw, 0 for no live file), every
  path named there is checked inside the transaction, whether the batch writes it
  or not, and each written file is updated ``WHERE version = <seen>``: a file
  changed, created or deleted since the caller looked refuses the whole batch with
  ``ChangedSince``, naming it. A batch path without an entry is refused before
  anything is written (a versioned batch never overwrites blindly).
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

This module imports nothing from ``vfs.files.store`` (the store imports it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, select

from memagent.vfs import paths
from memagent.vfs.errors import InvalidPath, IsADirectory, StaleVersion, VfsError
from memagent.vfs.files.revisions import CHUNK, append, create_many
from memagent.vfs.models import files
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


class Drift(NamedTuple):
    """One file that is not at the version the caller saw."""

    path: str
    seen: int  # 0: there was no live file
    now: int | None  # None: there is no live file now

    def describe(self) -> str:
        seen = f"version {self.seen}" if self.seen else "no file there"
        now = f"version {self.now}" if self.now is not None else "deleted"
        return f"you saw {seen}, it is now {now}"


class ChangedSince(StaleVersion):
    """Files of a versioned batch changed since the caller read them; nothing was stored.

    ``drifts`` lists every such file in path order; callers word the advice (an
    import says "run the import again").
    """

    def __init__(self, drifts: Sequence[Drift]) -> None:
        self.drifts = list(drifts)
        first = self.drifts[0]
        more = f" (and {len(self.drifts) - 1} more file(s))" if len(self.drifts) > 1 else ""
        super().__init__(f"{first.path} changed since it was read ({first.describe()}){more}; "
                         "nothing was stored")


def normalize_expected(expected: Mapping[str, int], batch: Mapping[str, str]) -> dict[str, int]:
    """``expected`` under normalised paths; every path of ``batch`` must have an entry."""
    out: dict[str, int] = {}
    for raw, version in expected.items():
        path = paths.normalize_file(raw)
        if version < 0:
            raise VfsError(f"expected version {version} of {path} is negative; give 0 for a file that was absent")
        out[path] = version
    missing = sorted(p for p in batch if p not in out)
    if missing:
        raise VfsError(f"no expected version given for {missing[0]} ({len(missing)} path(s) without one); "
                       "give the version you read for every file, 0 where there was none")
    return out


def find_drifts(conn: Connection, scope: str, expected: Mapping[str, int]) -> list[Drift]:
    """The files of ``expected`` that are not at the version given, in path order."""
    found = _existing(conn, scope, sorted(expected))
    out: list[Drift] = []
    for path in sorted(expected):
        row = found.get(path)
        now = None if row is None or row.deleted else int(row.version)
        if (now or 0) != expected[path]:
            out.append(Drift(path, expected[path], now))
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
                approval: Approval, message: str, origin: Origin | None = None,
                expected: Mapping[str, int] | None = None) -> list[Change]:
    """Write a normalised, validated batch inside the caller's write transaction.

    ``expected`` (normalised by ``normalize_expected``) makes the batch versioned:
    ``ChangedSince`` unless every file named there is at the version given.
    Returns the changes in path order.
    """
    if expected is not None:
        changed = find_drifts(conn, scope, expected)
        if changed:
            raise ChangedSince(changed)
    ordered = sorted(batch)
    existing = _existing(conn, scope, ordered)
    _check_tree(conn, scope, batch, existing)
    changes: dict[str, Change] = {}
    for path, row in existing.items():
        # The version the caller saw when it gave one: the UPDATE then refuses a
        # change that commits between the check above and this statement.
        seen = expected[path] if expected is not None else 0 if row.deleted else row.version
        version = append(conn, scope, path, batch[path], expected=seen,
                         author=author, approval=approval, message=message or "write", origin=origin)
        changes[path] = Change(path, version, None if row.deleted else row.content, batch[path])
    new = [p for p in ordered if p not in existing]
    create_many(conn, scope, [(p, batch[p]) for p in new], author=author, approval=approval,
                message=message or "create", origin=origin)
    for path in new:
        changes[path] = Change(path, 1, None, batch[path])
    return [changes[p] for p in ordered]
