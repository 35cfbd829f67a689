"""An agent's view of the store: one tree assembled from several scopes.

``/`` is the agent's own scope ``agent:<name>``; ``/user/`` is ``user:<id>`` (shared by
that user's agents); ``/org/`` is ``org:<id>``, read-only unless the view allows
writes; ``/conversations/`` is episodic memory: this agent's past threads, one
Markdown file each (scope ``conversations:<agent>``, kept by ``ThreadStore``), never
writable, and searched only when a path names it, so a grep or glob over ``/``
(memory) costs the same however many threads there are.
Invariant: a view path maps to exactly one (scope, inner path), and results and
errors are reported back in view paths (the store is passed ``shown``/``mount``), so
callers never see scope names or inner paths: ``/user/missing.md``, not ``/missing.md``.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import paths
from .backends.postgres_roles import PermissionDenied
from .embeddings.base import SearchMode
from .embeddings.hybrid import DEFAULT_MODE
from .errors import InvalidPath, NotFound, ReadOnly
from .files.store import Store
from .grep.engine import DEFAULT_LIMIT
from .records import episodes
from .types import (
    Approval,
    Author,
    BlameLine,
    Change,
    Entry,
    FileContent,
    FileInfo,
    GrepResult,
    Origin,
    PendingChange,
    Revision,
    SearchHit,
)

if TYPE_CHECKING:
    from . import entrance

# The reserved mounts are defined once, in paths; re-exported for existing callers.
MOUNTS = paths.MOUNTS


@dataclass(frozen=True)
class Target:
    scope: str
    path: str  # inside the scope
    mount: str  # "" for the agent's own tree, else "/user" etc.

    def outer(self, inner: str) -> str:
        return self.mount + inner if self.mount else inner

    @property
    def shown(self) -> str:
        """This target's path in view terms (what errors and diffs name)."""
        return self.outer(self.path)


class AgentView:
    """File operations in view paths, for the tools and the ``fs`` CLI."""

    def __init__(self, store: Store, agent: str, *, user: str | None = None,
                 org: str | None = None, org_writable: bool = False) -> None:
        self.store = store
        self.agent = agent
        self.user = user
        self.org = org
        self.org_writable = org_writable

    @property
    def scope(self) -> str:
        return paths.scope_name("agent", self.agent)

    def _mounts(self) -> list[Target]:
        out = [Target(self.scope, "/", "")]
        if self.user:
            out.append(Target(paths.scope_name("user", self.user), "/", "/user"))
        if self.org:
            out.append(Target(paths.scope_name("org", self.org), "/", "/org"))
        return out

    def resolve(self, path: str, *, write: bool = False) -> Target:
        norm = paths.normalize(path)
        head = norm.split("/")[1] if norm != "/" else ""
        if head not in MOUNTS:
            return Target(self.scope, norm, "")
        inner = norm[len(head) + 1 :] or "/"
        if head == "conversations":
            if write:
                raise ReadOnly(f"{norm} is read-only: /conversations/ holds past threads, kept by "
                               "memagent; write notes elsewhere, e.g. /knowledge/")
            self._refresh_conversations()
            return Target(episodes.scope_of(self.agent), inner, "/conversations")
        if head == "user":
            if not self.user:
                raise NotFound("no user is set, so /user/ is empty; set MEMAGENT_USER")
            return Target(paths.scope_name("user", self.user), inner, "/user")
        if not self.org:
            raise NotFound("no organisation is set, so /org/ is empty; set MEMAGENT_ORG")
        if write and not self.org_writable:
            raise ReadOnly(f"{norm} is organisation memory, which this agent may only read")
        return Target(paths.scope_name("org", self.org), inner, "/org")

    def _refresh_conversations(self) -> None:
        """Render what this agent's threads added since /conversations/ was last read.

        One indexed query when nothing changed; otherwise only the new messages of
        the changed threads are rendered (``ThreadStore.sync_stale``).
        """
        database = getattr(self.store, "db", None)
        if database is not None:
            # A read-only role (Postgres, migration 0013) may not lock threads to render
            # them: it reads the files as a writer last rendered them.
            with suppress(PermissionDenied):
                from .records.threads import ThreadStore  # the record subsystem, only when needed

                ThreadStore(database).sync_stale(self.agent)

    def _file(self, path: str, *, write: bool = False) -> Target:
        t = self.resolve(paths.normalize_file(path), write=write)
        if t.path == "/":
            raise InvalidPath(f"{t.mount} names a directory; give a file path such as {t.mount}/notes.md")
        return t

    # -- reads ----------------------------------------------------------------

    def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> FileContent:
        t = self._file(path)
        fc = self.store.read(t.scope, t.path, offset=offset, limit=limit, shown=t.shown)
        return FileContent(t.shown, fc.content, fc.version, fc.total_lines, fc.offset, fc.lines)

    def stat(self, path: str) -> FileInfo:
        t = self._file(path)
        fi = self.store.stat(t.scope, t.path, shown=t.shown)
        return FileInfo(t.shown, fi.size, fi.version, fi.updated_at)

    def exists(self, path: str) -> bool:
        try:
            t = self._file(path)
        except NotFound:
            return False
        return self.store.exists(t.scope, t.path)

    def ls(self, path: str = "/") -> list[Entry]:
        t = self.resolve(path)
        if t.mount == "" and t.path == "/":
            try:
                entries = self.store.ls(t.scope, "/")
            except NotFound:
                entries = []
            for m in self._mounts()[1:]:
                n = len(self.store.all_files(m.scope))
                if n:
                    entries.append(Entry(m.mount.strip("/"), True, n))
            return sorted(entries, key=lambda e: e.name)
        return self.store.ls(t.scope, t.path, mount=t.mount)

    def _search_targets(self, path: str) -> list[Target]:
        t = self.resolve(path)
        if t.mount == "" and t.path == "/":
            # Shared scopes that never held a file are skipped: a search there costs a
            # transaction of its own (several round trips on Postgres) for nothing.
            own, *shared = self._mounts()
            return [own] + [m for m in shared if self.store.generation(m.scope)]
        return [t]

    def glob(self, pattern: str, path: str = "/") -> list[str]:
        # An absolute pattern is rooted at the view's /, so one that names a mount
        # literally (/conversations/*.md, /user/**) is matched inside that mount.
        head, _, rest = pattern.removeprefix("/").partition("/")
        if pattern.startswith("/") and head in MOUNTS and rest:
            path, pattern = "/" + head, rest
        out: list[str] = []
        for t in self._search_targets(path):
            out += [t.outer(p) for p in self.store.glob(t.scope, pattern, t.path)]
        return out

    def grep(self, pattern: str, *, path: str = "/", glob: str | None = None,
             output_mode: str = "files_with_matches", case_insensitive: bool = False,
             fixed_strings: bool = False, limit: int = DEFAULT_LIMIT) -> GrepResult:
        merged: GrepResult | None = None
        for t in self._search_targets(path):
            r = self.store.grep(t.scope, pattern, path=t.path, glob=glob, output_mode=output_mode,
                                case_insensitive=case_insensitive, fixed_strings=fixed_strings,
                                limit=limit)
            r.files = [t.outer(p) for p in r.files]
            r.lines = [(t.outer(p), n, s) for p, n, s in r.lines]
            r.counts = [(t.outer(p), n) for p, n in r.counts]
            if merged is None:
                merged = r
                continue
            merged.files += r.files
            merged.lines += r.lines
            merged.counts += r.counts
            merged.truncated = merged.truncated or r.truncated
            merged.cut = merged.cut or r.cut
        assert merged is not None
        for name in ("files", "lines", "counts"):
            items = getattr(merged, name)
            if len(items) > limit:
                setattr(merged, name, items[:limit])
                merged.truncated = True
        return merged

    def history(self, path: str) -> list[Revision]:
        t = self._file(path)
        return [
            Revision(t.shown, r.version, r.author, r.approval, r.message, r.deleted, r.size, r.created_at,
                     r.origin)
            for r in self.store.history(t.scope, t.path, shown=t.shown)
        ]

    def blame(self, path: str) -> list[BlameLine]:
        t = self._file(path)
        return self.store.blame(t.scope, t.path, shown=t.shown)

    def search(self, query: str, *, k: int = 10, path: str = "/",
               mode: SearchMode = DEFAULT_MODE) -> list[SearchHit]:
        """Files ranked by relevance to ``query``: memory and past conversations, in view paths.
        ``mode``: lexical, semantic or hybrid (``vfs/embeddings/hybrid.py``).

        ``path`` "/" searches every mount (the agent's files, /user/, /org/ and
        /conversations/); a mount or folder narrows it to what lies below.
        """
        t = self.resolve(path)
        targets = [t]
        if t.mount == "" and t.path == "/":
            # Everything: the agent's files, /user/, /org/ and past threads (as they are now).
            targets = [*self._mounts(), self.resolve("/conversations")]
        by_scope = {m.scope: m for m in targets}
        prefix = paths.dir_prefix(t.path) if t.path != "/" else "/"
        out: list[SearchHit] = []
        for hit in self.store.search(list(by_scope), query, k=k if prefix == "/" else max(k, 100), mode=mode):
            m = by_scope[hit.scope]
            if prefix != "/" and not hit.path.startswith(prefix):
                continue
            out.append(SearchHit(m.outer(hit.path), hit.score, hit.snippet, hit.version))
        return out[:k]

    def revision_content(self, path: str, version: int) -> str | None:
        t = self._file(path)
        return self.store.revision_content(t.scope, t.path, version, shown=t.shown)

    def diff(self, path: str, from_version: int, to_version: int | None = None) -> str:
        t = self._file(path)
        return self.store.diff(t.scope, t.path, from_version, to_version, shown=t.shown)

    # -- writes ---------------------------------------------------------------
    # One path for every change: prepare_* (in view terms) -> the caller's gate ->
    # commit. write/edit/delete are that path without a gate.

    def check(self, path: str, content: str) -> None:
        """Validate ``content`` for ``path`` without writing (errors name the view path)."""
        t = self._file(path, write=True)
        self.store.validate(t.path, content, shown=t.shown)

    def prepare_write(self, path: str, content: str, *, expected_version: int | None = None) -> PendingChange:
        t = self._file(path, write=True)
        return self.store.prepare_write(t.scope, t.path, content, expected_version=expected_version, shown=t.shown)

    def prepare_edit(self, path: str, old_string: str, new_string: str, *, replace_all: bool = False,
                     expected_version: int | None = None) -> PendingChange:
        t = self._file(path, write=True)
        return self.store.prepare_edit(t.scope, t.path, old_string, new_string, replace_all=replace_all,
                                       expected_version=expected_version, shown=t.shown)

    def prepare_delete(self, path: str, *, expected_version: int | None = None) -> PendingChange:
        t = self._file(path, write=True)
        return self.store.prepare_delete(t.scope, t.path, expected_version=expected_version, shown=t.shown)

    def commit(self, pending: PendingChange, *, author: Author, approval: Approval, message: str = "",
               origin: Origin | None = None) -> Change:
        """Store a change prepared by this view; the result names the view path."""
        c = self.store.commit(pending, author=author, approval=approval, message=message, origin=origin)
        return Change(pending.shown, c.version, c.before, c.after)

    def write(self, path: str, content: str, *, expected_version: int | None = None,
              author: Author = "cli", approval: Approval = "cli", message: str = "",
              origin: Origin | None = None) -> Change:
        return self.commit(self.prepare_write(path, content, expected_version=expected_version),
                           author=author, approval=approval, message=message, origin=origin)

    def edit(self, path: str, old_string: str, new_string: str, *, replace_all: bool = False,
             expected_version: int | None = None, author: Author = "cli", approval: Approval = "cli",
             message: str = "", origin: Origin | None = None) -> Change:
        pending = self.prepare_edit(path, old_string, new_string, replace_all=replace_all,
                                    expected_version=expected_version)
        return self.commit(pending, author=author, approval=approval, message=message, origin=origin)

    def delete(self, path: str, *, expected_version: int | None = None, author: Author = "cli",
               approval: Approval = "cli", message: str = "", origin: Origin | None = None) -> Change:
        return self.commit(self.prepare_delete(path, expected_version=expected_version),
                           author=author, approval=approval, message=message, origin=origin)

    def move(self, src: str, dst: str, *, author: Author = "cli", approval: Approval = "cli",
             message: str = "", origin: Origin | None = None, policy: entrance.Policy | None = None) -> Change:
        """Move through the write entrance (``entrance.move``): ``policy`` decides, or, as for
        this view's other convenience writers, a person's own command approved as ``approval``."""
        a = self._file(src, write=True)
        b = self._file(dst, write=True)
        if a.scope != b.scope:
            raise ReadOnly(f"cannot move {a.shown} to {b.shown} across memory scopes; copy and delete instead")
        from . import entrance  # brings the review queue: only a move needs it here

        result = entrance.move(self.store, a.scope, a.path, b.path, mount=a.mount, author=author, origin=origin,
                             reason=message, policy=policy if policy is not None else entrance.approved(approval))
        return entrance.require(result)

    def revert(self, path: str, to_version: int, *, author: Author = "cli", approval: Approval = "cli",
               message: str = "", origin: Origin | None = None) -> Change:
        t = self._file(path, write=True)
        c = self.store.revert(t.scope, t.path, to_version, author=author, approval=approval, message=message,
                              shown=t.shown, origin=origin)
        return Change(t.shown, c.version, c.before, c.after)
