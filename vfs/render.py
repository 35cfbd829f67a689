"""Plain-text renderings shared by the model's tools and the ``fs`` CLI.

They are part of the tool contract (README, ARCHITECTURE.md) (``ls`` lines, ``read_file``'s
numbered lines), so the model and a person see the same text.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memagent.vfs.types import BlameLine, Entry, FileContent, Origin, Revision, SearchHit


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def render_ls(entries: list[Entry]) -> str:
    if not entries:
        return "(empty)"
    lines = []
    for e in entries:
        if e.is_dir:
            lines.append(f"{e.name}/  ({e.size} file{'s' if e.size != 1 else ''})")
        else:
            lines.append(f"{e.name}  ({human_size(e.size)})")
    return "\n".join(lines)


def render_numbered(fc: FileContent) -> str:
    """``{n:>6}\\t{line}`` per line, and a note when lines remain past the window."""
    if fc.total_lines == 0:
        return f"({fc.path} is empty, version {fc.version})"
    body = fc.content[:-1] if fc.content.endswith("\n") else fc.content
    out = [f"{fc.offset + i:>6}\t{line}" for i, line in enumerate(body.split("\n"), 1)]
    if fc.more:
        nxt = fc.offset + fc.lines
        out.append(
            f"(lines {fc.offset + 1}-{nxt} of {fc.total_lines} shown; "
            f"read on with offset={nxt})"
        )
    return "\n".join(out)


def when(dt: datetime) -> str:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def origin_label(origin: Origin | None) -> str:
    return origin.label() if origin is not None else "-"


def _table(header: list[str], rows: list[list[str]], *, right: frozenset[int] = frozenset()) -> str:
    """Columns padded to their widest cell; the last column is left ragged."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for r in [header, *rows]:
        cells = [(c.rjust(w) if i in right else c.ljust(w)) for i, (c, w) in enumerate(zip(r, widths, strict=False))]
        out.append("  ".join([*cells, r[-1]]).rstrip())
    return "\n".join(out)


def render_log(revs: list[Revision], *, with_path: bool = False) -> str:
    """Revisions in labelled columns: version, date, author, approval, size, origin, reason
    (the revision's message); ``with_path`` puts each revision's path first."""
    if not revs:
        return "(no revisions)"
    rows = [[*([r.path] if with_path else []), f"v{r.version}", when(r.created_at), r.author, r.approval,
             "deleted" if r.deleted else human_size(r.size), origin_label(r.origin),
             " ".join(r.message.split())] for r in revs]
    header = [*(["path"] if with_path else []), "version", "date", "author", "approval", "size", "origin",
              "reason"]
    return _table(header, rows, right=frozenset({5 if with_path else 4}))


def render_blame(lines: list[BlameLine]) -> str:
    """One row per line: the revision that last changed it, who, how approved, where from, the text."""
    if not lines:
        return "(empty file)"
    rows = [[str(b.number), f"v{b.version}", b.created_at.astimezone(UTC).strftime("%Y-%m-%d"), b.author,
             b.approval, origin_label(b.origin), "| " + b.text] for b in lines]
    return _table(["line", "version", "date", "author", "approval", "origin", "| text"], rows,
                  right=frozenset({0}))


def render_search(hits: list[SearchHit], query: str) -> str:
    """Ranked hits: rank, path, score, then the snippet indented; a hint to read the file."""
    if not hits:
        return f"No memory file or conversation matches {query!r}; try other words, or grep for exact text."
    out = []
    for i, h in enumerate(hits, 1):
        out.append(f"{i}. {h.path}  (score {h.score:.3g}, version {h.version})")
        if h.snippet:
            out.append(f"   {h.snippet}")
    out.append("Read a hit with read_file (or `memagent fs cat PATH`).")
    return "\n".join(out)
