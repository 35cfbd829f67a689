"""A file's past: its revisions, blame, one version's text and the diff of two.

Invariant: history reads never change anything and answer for deleted files too
(``_ever_row``); blame reads at most ``blame.MAX_REVISIONS`` revisions.
"""

from __future__ import annotations

from sqlalchemy import select

from memagent.vfs import paths
from memagent.vfs.db import retried
from memagent.vfs.files import blame as blaming
from memagent.vfs.files.core import StoreCore, origin_of
from memagent.vfs.files.edits import unified_diff
from memagent.vfs.models import revisions
from memagent.vfs.types import BlameLine, Revision


class History(StoreCore):
    """``history``, ``blame``, ``revision_content`` and ``diff`` of ``SqlStore``."""

    @retried("read")
    def history(self, scope: str, path: str, *, shown: str | None = None) -> list[Revision]:
        path = paths.normalize_file(path)
        with self._read() as conn:
            row = self._ever_row(conn, scope, path, shown or path)
            revs = conn.execute(
                select(revisions).where(revisions.c.file_id == row.id).order_by(revisions.c.version.desc())
            ).all()
        return [
            Revision(path, r.version, r.author, r.approval, r.message, r.deleted, r.size, r.created_at,
                     origin_of(r))
            for r in revs
        ]

    @retried("read")
    def blame(self, scope: str, path: str, *, shown: str | None = None) -> list[BlameLine]:
        """Each line of the file's current text with the revision that last changed it."""
        path = paths.normalize_file(path)
        shown = shown or path
        with self._read() as conn:
            row = self._live(conn, scope, path, shown)
            revs = conn.execute(
                select(revisions).where(revisions.c.file_id == row.id)
                .order_by(revisions.c.version.desc()).limit(blaming.MAX_REVISIONS)
            ).all()
        return blaming.blame([
            blaming.RevisionText(r.version, None if r.deleted else r.content, r.author, r.approval,
                                 r.created_at, origin_of(r), r.message)
            for r in reversed(revs)
        ])

    @retried("read")
    def revision_content(self, scope: str, path: str, version: int, *, shown: str | None = None) -> str | None:
        path = paths.normalize_file(path)
        shown = shown or path
        with self._read() as conn:
            row = self._ever_row(conn, scope, path, shown)
            rev = self._revision(conn, row, version, shown)
        return None if rev.deleted else rev.content

    @retried("read")
    def diff(self, scope: str, path: str, from_version: int, to_version: int | None = None, *,
             shown: str | None = None) -> str:
        path = paths.normalize_file(path)
        shown = shown or path
        with self._read() as conn:
            row = self._ever_row(conn, scope, path, shown)
            to_version = row.version if to_version is None else to_version
            a = self._revision(conn, row, from_version, shown)
            b = self._revision(conn, row, to_version, shown)
        return unified_diff(
            a.content if not a.deleted else None,
            b.content if not b.deleted else None,
            f"{shown}@{from_version}",
            f"{shown}@{to_version}",
        )
