"""The store's write path: prepare (read once, edit, validate once), then commit.

Invariants (ARCHITECTURE.md, "The path of a model's write"): ``prepare_*`` normalise
the path once, read the file once (``_head``), check the expected version, apply
the edit and validate once; ``commit`` stores the change at the version it was read
at (``vfs/files/revisions.py``), or raises ``StaleVersion`` and stores nothing. An
overwrite the backend runs as one statement (``atomic_overwrite``) commits in
autocommit, with the proof ``db.committing`` needs to retry it safely. No memory
writer reaches a ``conversations:`` scope (``memory_scope``).

No look-alike names: every writer that can make a path live that was not
(``prepare_write`` of a new file, ``move``'s destination, ``revert`` of a deleted file,
``bulk_write``, ``create_agent``) passes it through ``guard_lookalikes``, which
refuses a new folder or file name whose ``paths.lookalike_key`` equals a live
sibling's (or, in a batch, another new name's, or in an agent's root a mount's), naming
the existing one. It reads only the folders that gain a name: which of them exist
(``dirs``) and the listing of those (the backend's ``ls_entries``), never the agent.
Names that already look alike in an older database are left as they are. Two writers
creating look-alikes at the same moment can both pass (Postgres: read committed);
the check is about what a person reads, not an invariant the database holds.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping

from sqlalchemy import Connection, Table, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from memagent.vfs import db, paths
from memagent.vfs.db import retried
from memagent.vfs.errors import AgentNotFound, AlreadyExists, InvalidPath, RevisionNotFound, StaleVersion, VfsError
from memagent.vfs.files import bulk
from memagent.vfs.files.core import StoreCore, check_agent_name, memory_scope, no_agent_message
from memagent.vfs.files.edits import apply_edit
from memagent.vfs.files.revisions import CHUNK, append, guard_new_file, now, prefix_range, stale
from memagent.vfs.models import agents, dirs, files
from memagent.vfs.types import Approval, Author, Change, Origin, PendingChange


class Writing(StoreCore):
    """Agents and every mutation of ``SqlStore``."""

    @retried("write")
    def create_agent(self, name: str, files: dict[str, str] | None = None, *,
                     author: Author = "cli", approval: Approval = "cli") -> None:
        """Create an agent and its starting files in one transaction (all or nothing)."""
        check_agent_name(name)
        start = bulk.normalize_batch(files or {})
        for path, content in start.items():
            self.validate(path, content)
        with self._write() as conn:
            _insert_agent(conn, name)
            self.guard_lookalikes(conn, paths.scope_name("agent", name), start)
            bulk.write_batch(conn, paths.scope_name("agent", name), start, author=author, approval=approval,
                             message="init", origin=Origin("init") if author == "cli" else None)

    @retried("read")
    def list_agents(self) -> list[str]:
        with self._read() as conn:
            return list(conn.scalars(select(agents.c.name).order_by(agents.c.name)))

    @retried("read")
    def require_agent(self, name: str) -> None:
        with self._read() as conn:
            found = conn.scalar(select(agents.c.id).where(agents.c.name == name))
            role = conn.engine.url.username if found is None and self.db.backend.rows_filtered(conn) else None
        if found is None:
            raise AgentNotFound(no_agent_message(name, role=role or None))

    def _prepare(self, scope: str, path: str, shown: str | None, expected_version: int | None,
                 *, must_exist: bool) -> tuple[str, str, str | None, int]:
        """Normalise, read the file once, check the expected version: (path, shown, before, version).

        ``version`` is the version ``before`` was read at, 0 when the file is not live.
        A file that must exist and does not raises the error that says what is there.
        """
        path = paths.normalize_file(path)
        shown = shown or path
        memory_scope(scope, shown)
        row = self._head(scope, path)
        live = row is not None and not row.deleted
        if must_exist and not live:
            with self._read() as conn:
                self._require_live(conn, scope, path, shown, row)
        have = row.version if row is not None and live else 0
        if expected_version is not None and expected_version != have:
            raise stale(shown, expected_version, row.version if row else None, live)
        if not live:
            with self._read() as conn:
                guard_new_file(conn, scope, path, shown)
                if not must_exist:
                    self.guard_lookalikes(conn, scope, [path], mount=_mount_of(shown, path), live=())
        return path, shown, row.content if row is not None and live else None, have

    @retried("read")
    def prepare_write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
                      shown: str | None = None) -> PendingChange:
        """Check a write of ``content`` to ``path`` without storing it; ``commit`` stores it."""
        path, shown, before, version = self._prepare(scope, path, shown, expected_version, must_exist=False)
        self.validate(path, content, shown=shown)
        return PendingChange("write", scope, path, shown, before, content, version)

    @retried("read")
    def prepare_edit(self, scope: str, path: str, old_string: str, new_string: str, *,
                     replace_all: bool = False, expected_version: int | None = None,
                     shown: str | None = None) -> PendingChange:
        """Apply an exact-string edit in memory and check it; ``commit`` stores it."""
        path, shown, before, version = self._prepare(scope, path, shown, expected_version, must_exist=True)
        assert before is not None  # must_exist
        after = apply_edit(shown, before, old_string, new_string, replace_all)
        self.validate(path, after, shown=shown)
        return PendingChange("edit", scope, path, shown, before, after, version)

    @retried("read")
    def prepare_delete(self, scope: str, path: str, *, expected_version: int | None = None,
                       shown: str | None = None) -> PendingChange:
        """Check that ``path`` can be deleted; ``commit`` deletes it (history is kept)."""
        path, shown, before, version = self._prepare(scope, path, shown, expected_version, must_exist=True)
        return PendingChange("delete", scope, path, shown, before, None, version)

    _dirs_seen = False  # the dirs table exists (once seen, for good: tables are not dropped under a store)

    def _has_dirs(self, conn: Connection) -> bool:
        if not self._dirs_seen:
            self._dirs_seen = inspect(conn).has_table("dirs")
        return self._dirs_seen

    def guard_lookalikes(self, conn: Connection, scope: str, new: Collection[str], *, mount: str = "",
                         live: Collection[str] | None = None) -> None:
        """Refuse, naming the existing name, a name ``new`` (normalised file paths about to
        be live) brings into a folder that looks like a sibling there (``paths.lookalike_key``).

        ``live`` is which of ``new`` are live files now (None: read them); ``mount``
        prefixes paths as the writer shows them. Reads which of the folders on the paths
        exist, then lists only the folders that gain a name.
        """
        if not self._has_dirs(conn):
            return  # a database before migration 0006 (opened without migrating): no index to read
        # The names each folder gains or keeps: folder -> child name -> a path through it.
        wanted: dict[str, dict[str, str]] = {}
        for path in new:
            folder = "/"
            for name in path[1:].split("/"):
                wanted.setdefault(folder, {}).setdefault(name, path)
                folder = paths.dir_prefix(folder) + name
        folders = sorted(f for f in wanted if f != "/")
        have_dirs = _present(conn, dirs, scope, folders)
        have_files = _present(conn, files, scope, sorted(new), live_only=True) if live is None else set(live)
        for folder in sorted(wanted):
            names = wanted[folder]
            fresh = sorted(n for n in names if (child := paths.dir_prefix(folder) + n) not in have_dirs
                           and child not in have_files)
            if not fresh:
                continue
            # Existing siblings: name -> "folder", "file" or "mount" (an agent root's reserved names).
            siblings: dict[str, str] = {}
            if folder == "/" or folder in have_dirs:
                prefix = paths.dir_prefix(folder)
                lo, hi = prefix_range(prefix)
                args = {"scope": scope, "depth": prefix.count("/"), "lo": lo, "hi": hi}
                siblings = {e.name: "folder" if e.is_dir else "file"
                            for e in self.db.backend.ls_entries(conn, args, len(prefix))}
            if folder == "/" and paths.scope_kind(scope) == "agent":  # an agent's root holds the mounts' names
                siblings.update(dict.fromkeys(paths.MOUNTS, "mount"))
            seen: dict[str, tuple[str, str]] = {}  # key -> (name, kind), existing names first
            for name, kind in siblings.items():
                seen.setdefault(paths.lookalike_key(name), (name, kind))
            for name in sorted(set(names) - set(fresh)):
                seen.setdefault(paths.lookalike_key(name), (name, "batch"))
            for name in fresh:
                other = seen.setdefault(paths.lookalike_key(name), (name, "batch"))
                if other[0] != name:
                    raise _lookalike(folder, name, names[name], *other, mount=mount)

    @retried("write")
    def commit(self, pending: PendingChange, *, author: Author, approval: Approval, message: str = "",
               origin: Origin | None = None) -> Change:
        """Store a prepared change if the file is still at the version it was prepared from.

        Otherwise ``StaleVersion`` and nothing is stored. Content is not validated
        again (``prepare_*`` did); the message is scanned for secrets.
        """
        default = {"write": "write" if pending.before is not None else "create", "edit": "edit", "delete": "delete"}
        store_it = functools.partial(
            append, scope=pending.scope, path=pending.path, content=pending.after,
            expected=pending.expected_version, author=author, approval=approval,
            message=message or default[pending.op], shown=pending.shown, origin=origin)
        if pending.expected_version and self.db.backend.atomic_overwrite:
            # An overwrite is one statement there (revisions.append): atomic on its own,
            # so no BEGIN and COMMIT round trips around it.
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                # The statement commits by itself. If its connection dies, the file still
                # at the version it expected proves it did not commit (it moves the
                # version; versions never go back), so its retry (db.retried) may run it again.
                db.committing(proof=functools.partial(self._unchanged, pending), what=pending.shown)
                version = store_it(conn)
                conn.commit()  # no round trip; tells the engine's listeners (vfs/pending.py)
            return Change(pending.path, version, pending.before, pending.after)
        with self._write() as conn:
            if pending.expected_version == 0:
                # Someone may have made a directory here, or a file above, since.
                guard_new_file(conn, pending.scope, pending.path, pending.shown)
            version = store_it(conn)
        return Change(pending.path, version, pending.before, pending.after)

    def _unchanged(self, pending: PendingChange) -> bool:
        """Whether ``pending``'s file is still live at the version it was prepared from."""
        row = self._head(pending.scope, pending.path)
        return row is not None and not row.deleted and row.version == pending.expected_version

    @retried("write")
    def write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
              author: Author = "cli", approval: Approval = "cli", message: str = "",
              origin: Origin | None = None) -> Change:
        pending = self.prepare_write(scope, path, content, expected_version=expected_version)
        return self.commit(pending, author=author, approval=approval, message=message, origin=origin)

    @retried("write")
    def edit(self, scope: str, path: str, old_string: str, new_string: str, *,
             replace_all: bool = False, expected_version: int | None = None,
             author: Author = "cli", approval: Approval = "cli", message: str = "",
             origin: Origin | None = None) -> Change:
        pending = self.prepare_edit(scope, path, old_string, new_string, replace_all=replace_all,
                                    expected_version=expected_version)
        return self.commit(pending, author=author, approval=approval, message=message, origin=origin)

    @retried("write")
    def delete(self, scope: str, path: str, *, expected_version: int | None = None,
               author: Author = "cli", approval: Approval = "cli", message: str = "",
               origin: Origin | None = None) -> Change:
        pending = self.prepare_delete(scope, path, expected_version=expected_version)
        return self.commit(pending, author=author, approval=approval, message=message, origin=origin)

    @retried("write")
    def move(self, scope: str, src: str, dst: str, *, author: Author = "cli",
             approval: Approval = "cli", message: str = "", mount: str = "",
             origin: Origin | None = None, expected_version: int | None = None) -> Change:
        """Move a file: a delete and a create revision in one transaction. With
        ``expected_version`` (the source version the mover read) a source that changed
        since raises ``StaleVersion`` and nothing is stored. Writers call
        ``vfs.entrance.move``, which asks the policy first."""
        src = paths.normalize_file(src)
        dst = paths.normalize_file(dst)
        shown_src, shown_dst = mount + src, mount + dst
        memory_scope(scope, shown_src)
        if src == dst:
            raise AlreadyExists(f"{shown_src} and {shown_dst} are the same file; give another destination")
        with self._write() as conn:
            row = self._live(conn, scope, src, shown_src)
            if expected_version is not None and row.version != expected_version:
                raise StaleVersion(f"{shown_src} changed since it was read (version {expected_version}, now "
                                   f"version {row.version}); nothing was moved: read it again and retry")
            self.validate(dst, row.content, shown=shown_dst)
            target = self._row(conn, scope, dst)
            if target is not None and not target.deleted:
                raise AlreadyExists(
                    f"{shown_dst} already exists; remove it first or choose another destination"
                )
            guard_new_file(conn, scope, dst, shown_dst)
            self.guard_lookalikes(conn, scope, [dst], mount=mount, live=())
            append(conn, scope, src, None, expected=row.version, author=author, approval=approval,
                   message=message or f"moved to {dst}", shown=shown_src, origin=origin)
            version = append(conn, scope, dst, row.content, expected=0, author=author, approval=approval,
                             message=message or f"moved from {src}", shown=shown_dst, origin=origin)
        return Change(dst, version, None, row.content)

    @retried("write")
    def revert(self, scope: str, path: str, to_version: int, *, author: Author = "cli",
               approval: Approval = "cli", message: str = "", shown: str | None = None,
               origin: Origin | None = None) -> Change:
        path = paths.normalize_file(path)
        shown = shown or path
        memory_scope(scope, shown)
        with self._write() as conn:
            row = self._ever_row(conn, scope, path, shown)
            rev = self._revision(conn, row, to_version, shown)
            if rev.deleted:
                raise RevisionNotFound(
                    f"version {to_version} of {shown} is a deletion; to delete the file use rm, "
                    "or revert to a version that has content"
                )
            self.validate(path, rev.content, shown=shown)
            if row.deleted:
                guard_new_file(conn, scope, path, shown)
                self.guard_lookalikes(conn, scope, [path], mount=_mount_of(shown, path), live=())
            version = append(conn, scope, path, rev.content, expected=0 if row.deleted else row.version,
                             author=author, approval=approval,
                             message=message or f"revert to version {to_version}", shown=shown,
                             origin=origin)
        return Change(path, version, None if row.deleted else row.content, rev.content)

    @retried("write")
    def bulk_write(self, scope: str, files: Mapping[str, str], *, author: Author = "import",
                   approval: Approval = "cli", message: str = "", origin: Origin | None = None,
                   expected_versions: Mapping[str, int] | None = None, create: bool = False) -> list[Change]:
        """Create or overwrite many files in one transaction, one revision each.

        All or nothing: every path and content is checked first (see ``vfs.files.bulk``).
        ``expected_versions`` (path -> the version the caller read, 0 for no file)
        makes the batch versioned: if any file named there changed, appeared or was
        deleted since, ``bulk.ChangedSince`` names it and nothing is stored.
        ``create`` creates the agent of the scope (``agent:<name>``) in the same
        transaction (``AlreadyExists`` if it exists), so an interrupted import leaves
        either no agent or the agent with all its files.
        Returns the changes in path order.
        """
        memory_scope(scope, "/")
        batch = bulk.normalize_batch(files)
        expected = None if expected_versions is None else bulk.normalize_expected(expected_versions, batch)
        name = _agent_of(scope) if create else None
        for path in sorted(batch):
            self.validate(path, batch[path])
        try:
            with self._write() as conn:
                if name is not None:
                    _insert_agent(conn, name)
                self.guard_lookalikes(conn, scope, batch)
                return bulk.write_batch(conn, scope, batch, author=author, approval=approval, message=message,
                                        origin=origin, expected=expected)
        except (StaleVersion, IntegrityError):
            if expected is None:
                raise
            # A writer committed between the batch's check and its write (or ChangedSince
            # itself): name the files that moved, as they are now.
            with self._read() as conn:
                changed = bulk.find_drifts(conn, scope, expected)
            if changed:
                raise bulk.ChangedSince(changed) from None
            raise


def _agent_of(scope: str) -> str:
    """The agent name of an ``agent:<name>`` scope (bulk_write's ``create``)."""
    kind, _, name = scope.partition(":")
    if kind != "agent":
        raise VfsError(f"only an agent can be created with its files; {scope!r} is not an agent's scope")
    return check_agent_name(name)


def _insert_agent(conn: Connection, name: str) -> None:
    """Insert the agent row inside the caller's write transaction (files follow in it)."""
    try:
        conn.execute(insert(agents).values(name=name, created_at=now()))
    except IntegrityError:
        raise AlreadyExists(f"agent {name!r} already exists; pick another name") from None


def _mount_of(shown: str, path: str) -> str:
    """The view's prefix of ``shown`` (``/user`` for ``/user/x.md`` at ``/x.md``), "" if none."""
    return shown[: len(shown) - len(path)] if shown.endswith(path) else ""


def _present(conn: Connection, table: Table, scope: str, wanted: list[str], *, live_only: bool = False) -> set[str]:
    """Which of ``wanted`` have a row in ``table`` (``dirs``, or live ``files``) of ``scope``."""
    found: set[str] = set()
    for i in range(0, len(wanted), CHUNK):
        query = select(table.c.path).where(table.c.scope == scope, table.c.path.in_(wanted[i : i + CHUNK]))
        if live_only:
            query = query.where(table.c.deleted.is_(False))
        found.update(conn.scalars(query))
    return found


def _lookalike(folder: str, name: str, path: str, other: str, kind: str, *, mount: str) -> InvalidPath:
    """The one-line refusal of ``name`` in ``folder`` (on ``path``), which looks like ``other``."""
    prefix = paths.dir_prefix(folder)
    rest = path[len(prefix) + len(name):]  # "" for the file itself, "/..." below a folder
    mine = "folder" if rest else "file"
    spelled = repr(name) + ("" if name.isascii() else f" ({ascii(name)[1:-1]})")
    where = f"{mount}{prefix}{other}"
    if kind == "batch":
        return InvalidPath(f"{mount}{path}: the {mine} name {spelled} looks like {where}{'/' if rest else ''} "
                           "(also in this batch); give each name one spelling")
    shown_other = f"{where}/" if kind in ("folder", "mount") else where
    what = "reserved folder" if kind == "mount" else f"existing {kind}"
    advice = f"did you mean {where}{rest}?" if (kind == "file") == (not rest) else "choose a clearly different name"
    return InvalidPath(f"{mount}{path}: the {mine} name {spelled} looks like the {what} {shown_other} (names that "
                       f"differ only in case, width, accents, spaces or trailing dots read as one); {advice}")
