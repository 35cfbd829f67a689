"""Plain-text renderings shared by the model's tools and the ``fs`` CLI.

They are part of the tool contract (README, ARCHITECTURE.md) (``ls`` lines, ``read_file``'s
numbered lines), so the model and a person see the same text.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memagent.vfs.types import Entry, FileContent, Revision


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


def render_log(revs: list[Revision]) -> str:
    lines = []
    for r in revs:
        what = "deleted" if r.deleted else human_size(r.size)
        msg = f"  {r.message}" if r.message else ""
        lines.append(f"v{r.version:<4} {when(r.created_at)}  {r.author:<8} {r.approval:<6} {what:>9}{msg}")
    return "\n".join(lines)
