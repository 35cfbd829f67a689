"""ls, glob and the list of files: answered from the listing indexes, never from content.

Invariants: ``ls`` reads the directory index (``dirs``, kept by the database's
triggers inside every write, migration 0006) and the ranges of live files between
a folder's subdirectories; how in as few round trips as possible is the backend's
``ls_entries``. ``glob`` reads one range of paths (its pattern's literal prefix).
"""

from __future__ import annotations

from sqlalchemy import func, select

from memagent.vfs import paths
from memagent.vfs.db import retried
from memagent.vfs.errors import NotFound
from memagent.vfs.files.core import StoreCore
from memagent.vfs.files.revisions import prefix_range
from memagent.vfs.grep.globbing import glob_matcher, literal_prefix
from memagent.vfs.models import files
from memagent.vfs.types import Entry, FileInfo


class Listing(StoreCore):
    """``ls``, ``glob``, ``all_files`` and ``generation`` of ``SqlStore``."""

    @retried("read")
    def generation(self, *scopes: str) -> int:
        """A number that grows with every mutation in any of ``scopes`` (their sum of versions).

        Every mutation raises one file's version by one (or creates a file at version 1),
        so callers can cache what they derive from memory and rebuild only after a change.
        """
        with self._read() as conn:
            total = conn.scalar(select(func.sum(files.c.version)).where(files.c.scope.in_(scopes)))
        return int(total or 0)

    @retried("read")
    def all_files(self, scope: str) -> list[FileInfo]:
        with self._read() as conn:
            rows = conn.execute(
                select(files.c.path, files.c.size, files.c.version, files.c.updated_at)
                .where(files.c.scope == scope, files.c.deleted.is_(False))
                .order_by(files.c.path)
            ).all()
        return [FileInfo(r.path, r.size, r.version, r.updated_at) for r in rows]

    @retried("read")
    def ls(self, scope: str, path: str = "/", *, mount: str = "") -> list[Entry]:
        path = paths.normalize(path)
        prefix = paths.dir_prefix(path)
        lo, hi = prefix_range(prefix)
        cut = len(prefix)
        with self._read() as conn:
            args = {"scope": scope, "depth": prefix.count("/"), "lo": lo, "hi": hi}
            out = self.db.backend.ls_entries(conn, args, cut)
            if not out and path != "/":
                row = conn.execute(
                    select(files.c.size).where(
                        files.c.scope == scope, files.c.path == path, files.c.deleted.is_(False)
                    )
                ).first()
                if row is not None:
                    return [Entry(paths.basename(path), False, row.size)]
                raise NotFound(f"no directory or file at {mount}{path}; use ls / to see the top level")
        out.sort(key=lambda e: e.name)
        return out

    @retried("read")
    def glob(self, scope: str, pattern: str, path: str = "/") -> list[str]:
        base = paths.normalize(path)
        if pattern.startswith("/"):
            base, pattern = "/", pattern[1:]
        matcher = glob_matcher(pattern)
        prefix = paths.dir_prefix(base)
        lit = literal_prefix(pattern)
        scan_prefix = prefix + (lit + "/" if lit else "")
        lo, hi = prefix_range(scan_prefix)
        with self._read() as conn:
            rows = conn.scalars(
                select(files.c.path)
                .where(
                    files.c.scope == scope,
                    files.c.path >= lo,
                    files.c.path < hi,
                    files.c.deleted.is_(False),
                )
                .order_by(files.c.path)
            ).all()
        cut = len(prefix)
        return [p for p in rows if matcher.match(p[cut:])]
