"""grep: the database narrows the files, Python matches the lines.

Invariants: ``grep`` reads content only for the files its pre-filter (the trigram
index, ``vfs/grep/fts.py``; a regex pre-filter, ``vfs/grep/prefilter.py``) cannot rule out,
and answers exactly what ``_grep_plain`` (every file of the range into Python, no
index) answers; tests/test_fastpaths.py checks it. The server's share of a grep is
bounded by grep's deadline (the backend's ``grep_deadline``); a pattern the server
cannot finish in time ends with a note, never a hang.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, and_, literal_column, select
from sqlalchemy.exc import DBAPIError

from memagent.vfs.db import retried
from memagent.vfs.files.core import StoreCore
from memagent.vfs.files.revisions import prefix_range
from memagent.vfs.grep import engine
from memagent.vfs.grep.engine import DEFAULT_LIMIT, scan, scan_plain
from memagent.vfs.grep.globbing import literal_prefix
from memagent.vfs.models import files
from memagent.vfs.types import GrepResult

if TYPE_CHECKING:
    from memagent.vfs.grep.fts import Features


class Grepping(StoreCore):
    """``grep`` and the reference ``_grep_plain`` of ``SqlStore``."""

    def _features(self, conn: Connection) -> Features:
        if self._search_features is None:
            from memagent.vfs.grep.fts import detect

            self._search_features = detect(conn)
        return self._search_features

    @retried("read")
    def grep(self, scope: str, pattern: str, *, path: str = "/", glob: str | None = None,
             output_mode: str = "files_with_matches", case_insensitive: bool = False,
             fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult:
        req = engine.plan(pattern, path=path, glob=glob, output_mode=output_mode,
                          case_insensitive=case_insensitive, fixed_strings=fixed_strings)
        mode, regex, base, prefix = req.mode, req.regex, req.base, req.prefix
        with self._read(transaction=True) as conn:
            # A server-side regex (the pre-filter below) cannot be stopped from here
            # once it runs: the server stops it at grep's deadline where it can.
            self.db.backend.grep_deadline(conn, max(int(req.seconds_left() * 1000), 1))
            # Imported here: the pre-filters pull in RE2 (~30 ms), which commands that
            # do not grep (fs cat, ls, log; chat start) should not pay for.
            from memagent.vfs.grep import prefilter, regex_info
            from memagent.vfs.grep.fts import candidates

            features = self._features(conn)
            narrow = candidates(features, regex_info.info(regex).required, conn=conn, scope=scope)
            keep = None
            if narrow is None:
                # No literal to look up: a regex pre-filter, in the database or in RE2.
                narrow, keep = prefilter.choose(conn, features, regex)
            # Where the planner needs it (Postgres), the pre-filter's index is made the
            # only way in: no sequential scan (backend) and the b-tree columns hidden
            # ("|| ''", "IS NOT TRUE"), or it may read every file's text instead.
            pg_narrow = narrow is not None and self.db.backend.grep_index_only(conn)
            scope_col: ColumnElement[str] = files.c.scope
            path_col: ColumnElement[str] = files.c.path
            live: ColumnElement[bool] = files.c.deleted.is_(False)
            if pg_narrow:
                # ``scope || ''`` is the trigram index's own first key (migration 0011),
                # written with a literal '' so that every plan, generic ones too, sees it.
                scope_col = files.c.scope.concat(literal_column("''"))
                path_col = files.c.path.concat(literal_column("''"))
                live = files.c.deleted.is_not(True)
            cond = [scope_col == scope, live]
            if base != "/" and self._is_live_file(conn, scope, base):
                cond.append(path_col == base)
            else:
                # An anchored glob's literal directories narrow the range scan.
                lit = literal_prefix(glob) if glob else ""
                lo, hi = prefix_range(prefix + (lit + "/" if lit else ""))
                cond += [path_col >= lo, path_col < hi]
            if narrow is not None:
                cond.append(narrow)
            needle = _names_only(mode, regex, keep) if pg_narrow else None
            if needle is not None:
                # The LIKE above is the exact answer for a case-sensitive literal: ship
                # the names, not every matching file's text (most of the time at 30 %
                # of 10,000 files); scan then sees the literal as each file's text.
                try:
                    names = conn.execute(select(path_col).where(and_(*cond)).order_by(path_col))
                except DBAPIError as exc:
                    if not _timed_out(exc):
                        raise
                    return GrepResult(mode=mode, limit=limit, cut=_DB_CUT)
                found_names = ((row[0], needle) for row in _until_timeout(names) if req.in_glob(row[0]))
                return scan(found_names, regex, mode, limit, None, req.deadline)
            query = select(files.c.path, files.c.content).where(and_(*cond)).order_by(files.c.path)
            if not pg_narrow:
                # Stream, so that a capped answer stops reading early. (Not for Postgres
                # with a pre-filter: a cursor would favour a path-ordered plan.)
                conn = conn.execution_options(yield_per=256)
            try:
                rows = conn.execute(query)
            except DBAPIError as exc:
                if not _timed_out(exc):
                    raise
                return GrepResult(mode=mode, limit=limit, cut=_DB_CUT)
            found = ((p, c) for p, c in _until_timeout(rows) if req.in_glob(p))
            return scan(found, regex, mode, limit, keep, req.deadline)

    def _is_live_file(self, conn: Connection, scope: str, path: str) -> bool:
        return conn.execute(
            select(files.c.id).where(
                files.c.scope == scope, files.c.path == path, files.c.deleted.is_(False)
            )
        ).first() is not None

    @retried("read")
    def _grep_plain(self, scope: str, pattern: str, *, path: str = "/", glob: str | None = None,
                    output_mode: str = "files_with_matches", case_insensitive: bool = False,
                    fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult:
        """The reference grep: every file of the range into Python, ``scan_plain``.

        No index, no shortcut; tests/test_fastpaths.py checks ``grep`` against it.
        """
        req = engine.plan(pattern, path=path, glob=glob, output_mode=output_mode,
                          case_insensitive=case_insensitive, fixed_strings=fixed_strings, plain=True)
        base = req.base
        lo, hi = prefix_range(req.prefix)
        with self._read() as conn:
            single = self._row(conn, scope, base) if base != "/" else None
            cond = [files.c.scope == scope, files.c.deleted.is_(False)]
            if single is not None and not single.deleted:
                cond.append(files.c.path == base)
            else:
                cond += [files.c.path >= lo, files.c.path < hi]
            rows = conn.execute(
                select(files.c.path, files.c.content).where(and_(*cond)).order_by(files.c.path)
            ).all()
        return scan_plain(((p, c) for p, c in rows if req.in_glob(p)), req.regex, req.mode, limit)


def _names_only(mode: str, regex: re.Pattern[str], keep: Any) -> str | None:
    """The literal whose ``LIKE`` pre-filter is already grep's exact answer for file names.

    Only for ``files_with_matches``, a pattern that is a case-sensitive literal without
    a newline (``engine.exact_literal``), and whose every character ``fts.like_pattern``
    keeps as itself (no ``_`` wildcard), so ``LIKE '%lit%'`` holds exactly when a line
    contains it.
    """
    if mode != "files_with_matches" or keep is not None:
        return None
    lit = engine.exact_literal(regex)
    from memagent.vfs.grep.regex_info import MIN_RUN, Needle, info, safe_char

    if lit is None or len(lit) < MIN_RUN or not all(safe_char(ch, False) for ch in lit):
        return None
    # The pre-filter built from the pattern must be that one LIKE (fts.candidates).
    return lit if info(regex).required == Needle(lit, False) else None


# Postgres' SQLSTATE for a statement cancelled by statement_timeout.
_QUERY_CANCELED = "57014"
_DB_CUT = ("grep stopped: the database's search (its regex pre-filter) ran past grep's time limit; "
           "simplify the pattern, or narrow the path or the glob")


def _timed_out(exc: DBAPIError) -> bool:
    return getattr(exc.orig, "sqlstate", None) == _QUERY_CANCELED


def _until_timeout(rows: Iterable[Any]) -> Iterator[tuple[str, str]]:
    """grep's rows; a statement timeout while streaming them ends the scan with a note."""
    try:
        yield from rows
    except DBAPIError as exc:
        if not _timed_out(exc):
            raise
        raise engine.Cut(_DB_CUT) from None
