"""An agent's view of the store: one tree assembled from several scopes.

``/`` is the agent's own scope ``agent:<name>``; ``/user/`` is ``user:<id>`` (shared by
that user's agents); ``/org/`` is ``org:<id>``, read-only unless the view allows
writes; ``/conversations/`` is reserved for episodic memory and never writable.
Invariant: a view path maps to exactly one (scope, inner path), and results are
reported back in view paths, so callers never see scope names.
"""

from __future__ import annotations

from dataclasses import dataclass

from memagent.vfs import paths
from memagent.vfs.errors import NotFound, ReadOnly, ValidationFailed
from memagent.vfs.search import DEFAULT_LIMIT
from memagent.vfs.store import Store
from memagent.vfs.types import Change, Entry, FileContent, FileInfo, GrepResult, Revision

MOUNTS = ("user", "org", "conversations")


@dataclass(frozen=True)
class Target:
    scope: str
    path: str  # inside the scope
    mount: str  # "" for the agent's own tree, else "/user" etc.

    def outer(self, inner: str) -> str:
        return self.mount + inner if self.mount else inner


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
        return f"agent:{self.agent}"

    def _mounts(self) -> list[Target]:
        out = [Target(self.scope, "/", "")]
        if self.user:
            out.append(Target(f"user:{self.user}", "/", "/user"))
        if self.org:
            out.append(Target(f"org:{self.org}", "/", "/org"))
        return out

    def resolve(self, path: str, *, write: bool = False) -> Target:
        norm = paths.normalize(path)
        head = norm.split("/")[1] if norm != "/" else ""
        if head not in MOUNTS:
            return Target(self.scope, norm, "")
        inner = norm[len(head) + 1 :] or "/"
        if head == "conversations":
            if write:
                raise ReadOnly("/conversations/ is read-only episodic memory; write elsewhere")
            raise NotFound("/conversations/ holds no files yet")
        if head == "user":
            if not self.user:
                raise NotFound("no user is set, so /user/ is empty; set MEMAGENT_USER")
            return Target(f"user:{self.user}", inner, "/user")
        if not self.org:
            raise NotFound("no organisation is set, so /org/ is empty; set MEMAGENT_ORG")
        if write and not self.org_writable:
            raise ReadOnly(f"{norm} is organisation memory, which this agent may only read")
        return Target(f"org:{self.org}", inner, "/org")

    def _file(self, path: str, *, write: bool = False) -> Target:
        t = self.resolve(paths.normalize_file(path), write=write)
        return t

    # -- reads ----------------------------------------------------------------

    def read(self, path: str, *, offset: int = 0, limit: int | None = None) -> FileContent:
        t = self._file(path)
        fc = self.store.read(t.scope, t.path, offset=offset, limit=limit)
        return FileContent(t.outer(fc.path), fc.content, fc.version, fc.total_lines, fc.offset, fc.lines)

    def stat(self, path: str) -> FileInfo:
        t = self._file(path)
        fi = self.store.stat(t.scope, t.path)
        return FileInfo(t.outer(fi.path), fi.size, fi.version, fi.updated_at)

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
        return self.store.ls(t.scope, t.path)

    def _search_targets(self, path: str) -> list[Target]:
        t = self.resolve(path)
        if t.mount == "" and t.path == "/":
            # Shared scopes that never held a file are skipped: a search there costs a
            # transaction of its own (several round trips on Postgres) for nothing.
            own, *shared = self._mounts()
            return [own] + [m for m in shared if self.store.generation(m.scope)]
        return [t]

    def glob(self, pattern: str, path: str = "/") -> list[str]:
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
            Revision(t.outer(r.path), r.version, r.author, r.approval, r.message, r.deleted, r.size, r.created_at)
            for r in self.store.history(t.scope, t.path)
        ]

    def revision_content(self, path: str, version: int) -> str | None:
        t = self._file(path)
        return self.store.revision_content(t.scope, t.path, version)

    def diff(self, path: str, from_version: int, to_version: int | None = None) -> str:
        t = self._file(path)
        return self.store.diff(t.scope, t.path, from_version, to_version)

    # -- writes ---------------------------------------------------------------

    def check(self, path: str, content: str) -> None:
        """Validate ``content`` for ``path`` without writing (errors name the view path)."""
        t = self._file(path, write=True)
        try:
            self.store.validate(t.path, content)
        except ValidationFailed as exc:
            raise ValidationFailed(t.outer(t.path), exc.problems) from None

    def _outer(self, t: Target, c: Change) -> Change:
        return Change(t.outer(c.path), c.version, c.before, c.after)

    def write(self, path: str, content: str, **kw: object) -> Change:
        t = self._file(path, write=True)
        return self._outer(t, self.store.write(t.scope, t.path, content, **kw))  # type: ignore[arg-type]

    def edit(self, path: str, old_string: str, new_string: str, **kw: object) -> Change:
        t = self._file(path, write=True)
        return self._outer(t, self.store.edit(t.scope, t.path, old_string, new_string, **kw))  # type: ignore[arg-type]

    def delete(self, path: str, **kw: object) -> Change:
        t = self._file(path, write=True)
        return self._outer(t, self.store.delete(t.scope, t.path, **kw))  # type: ignore[arg-type]

    def move(self, src: str, dst: str, **kw: object) -> Change:
        a = self._file(src, write=True)
        b = self._file(dst, write=True)
        if a.scope != b.scope:
            raise ReadOnly(f"cannot move {src} to {dst} across memory scopes; copy and delete instead")
        return self._outer(b, self.store.move(a.scope, a.path, b.path, **kw))  # type: ignore[arg-type]

    def revert(self, path: str, to_version: int, **kw: object) -> Change:
        t = self._file(path, write=True)
        return self._outer(t, self.store.revert(t.scope, t.path, to_version, **kw))  # type: ignore[arg-type]
