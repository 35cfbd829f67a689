"""``memagent fs``: a person's file commands on an agent's memory.

Writes here take the agent's write path (``prepare_*`` then ``vfs.entrance.submit`` with
the ``approved("cli")`` policy, then ``commit``: validated and versioned exactly like
the agent's, author ``cli``, approval ``cli``) but never prompt: the person typing is
the approval. A write (or revert) that would leave the file as it is stores nothing
and says so. ``fs revert`` is a write of the old content through the same entrance;
``fs mv`` is ``vfs.entrance.move`` (the destination checked as a write, the same policy,
then two revisions in one transaction at the source version read), approval ``cli``.
``fs edit PATH`` without strings opens ``$EDITOR``; invalid text is shown and may be
edited again, never stored.
``fs grep`` and ``fs glob`` exit 1 with nothing on stdout when nothing matches;
``fs write`` refuses an empty standard input unless ``--allow-empty``.
Every listing, match, diff, blame and log is printed through ``terminal_text.shown``
(control, C1 and bidi characters made visible, ``\x1b``), wherever it goes; ``fs cat``
escapes only when its output is a terminal, and into a pipe or file writes the stored
bytes exactly.
"""

from __future__ import annotations

import sys

import click

from memagent.agent.cli.common import Ctx, cli_words, fail, memory_command
from memagent.vfs import (
    DEFAULT_SEARCH_MODE,
    SEARCH_MODES,
    AgentView,
    Change,
    EmbedderError,
    NotFound,
    PendingChange,
    SearchMode,
    ValidationFailed,
    VfsError,
    render_blame,
    render_grep,
    render_log,
    render_ls,
    render_search,
    shown,
)


def _stdin_text() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VfsError(
            f"standard input is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); memory files must be UTF-8 - convert it, e.g. with iconv"
        ) from None


MESSAGE = click.option("--message", "-m", default="", help="Note kept with the revision.")


def _submit(view: AgentView, pending: PendingChange, message: str) -> Change | None:
    """``pending`` through the one entrance, approved by the person typing the command; None
    when it would change nothing (nothing stored)."""
    # Imported here: the entrance brings the review queue, which reading commands never need.
    from memagent.vfs import approved_policy, require_change, submit_change

    result = submit_change(view.store, pending, policy=approved_policy("cli"), author="cli", reason=message)
    if result.status == "unchanged":
        return None
    return require_change(result)


@click.group()
def fs() -> None:
    """Read and change an agent's memory files (validated and versioned)."""


@memory_command(fs, "ls",
    click.argument("path", default="/"))
def ls_cmd(ctx: Ctx, path: str, agent: str | None) -> None:
    """List a folder: files with sizes, folders ending in /."""
    click.echo(shown(render_ls(ctx.view(agent).ls(path))))


@memory_command(fs, "cat",
    click.argument("path"),
    click.option("--version", "-v", "version", type=int, default=None, help="Print this old version."))
def cat_cmd(ctx: Ctx, path: str, agent: str | None, version: int | None) -> None:
    """Print a file's content exactly as stored."""
    view = ctx.view(agent)
    if version is None:
        content = view.read(path).content
    else:
        old = view.revision_content(path, version)
        if old is None:
            raise VfsError(f"version {version} of {path} is a deletion; it has no content")
        content = old
    if sys.stdout.isatty():
        # A person reads it: a stored ESC or U+202E must not drive their terminal.
        content = shown(content)
    sys.stdout.buffer.write(content.encode("utf-8"))
    sys.stdout.flush()


@memory_command(fs, "write",
    click.argument("path"),
    click.option("--expect-version", type=int, default=None,
                 help="Refuse unless the file is at this version (0 = must not exist)."),
    click.option("--allow-empty", is_flag=True, help="Write an empty file when standard input is empty."),
    click.option("--append", is_flag=True, help="Add the text to the end of PATH instead of replacing it."),
    MESSAGE)
def write_cmd(ctx: Ctx, path: str, agent: str | None, expect_version: int | None, allow_empty: bool,
              append: bool, message: str) -> None:
    """Create or overwrite PATH with the text read from standard input (--append: add to its end)."""
    view = ctx.view(agent)
    if sys.stdin.isatty():
        # Nothing piped in: say what the silence is waiting for.
        click.echo(f"reading the new content of {path} from standard input; end it with Ctrl-D "
                   f"(or pipe it: `memagent fs write {path} < FILE`)", err=True)
    content = _stdin_text()
    if not content and not allow_empty:
        raise VfsError(f"standard input was empty, so nothing was written to {path}; pipe the content "
                       "in, or pass --allow-empty to write an empty file")
    if append:
        # The text read and the version it was read at go to the write together: a change
        # made meanwhile is refused as stale, never overwritten.
        try:
            current = view.read(path)
            old, read_at = current.content, current.version
        except NotFound:
            old, read_at = "", 0
        if expect_version is not None and expect_version != read_at:
            raise VfsError(f"{path} is at version {read_at}, not {expect_version}; nothing was written")
        content = old + ("\n" if old and not old.endswith("\n") else "") + content
        expect_version = read_at
    # The same write path as the agent's tools; the person typing is the approval.
    pending = view.prepare_write(path, content, expected_version=expect_version)
    change = _submit(view, pending, message)
    if change is None:
        click.echo(f"no change; {pending.shown} already has that content (version {pending.expected_version})")
        return
    size = f"version {change.version}, {len(content.encode())} bytes"
    if change.before is None:
        click.echo(f"created {change.path} ({size})")
    elif append:
        click.echo(f"appended to {change.path} ({size})")
    else:
        # An overwrite replaces everything: say how much, and how to have it back.
        was, now = len(change.before.splitlines()), len(content.splitlines())
        click.echo(f"wrote {change.path} ({size}; replaced {was} line{'s' if was != 1 else ''} with {now}; "
                   f"`memagent fs revert {change.path} {change.version - 1}` undoes it)")


@memory_command(fs, "edit",
    click.argument("path"),
    click.argument("old_string", required=False),
    click.argument("new_string", required=False),
    click.option("--all", "replace_all", is_flag=True, help="Replace every occurrence."),
    click.option("--expect-version", type=int, default=None, help="Refuse unless at this version."),
    MESSAGE,
    dash_arguments=True)
def edit_cmd(ctx: Ctx, path: str, old_string: str | None, new_string: str | None, agent: str | None,
             replace_all: bool, expect_version: int | None, message: str) -> None:
    """Replace OLD_STRING with NEW_STRING in PATH (exact match, once unless --all).

    Without the strings, open PATH in $EDITOR; the saved text is validated and stored.
    """
    if (old_string is None) != (new_string is None):
        raise click.UsageError("give both OLD_STRING and NEW_STRING, or neither to open $EDITOR")
    view = ctx.view(agent)
    if old_string is None or new_string is None:
        _edit_in_editor(view, path, expect_version, message)
        return
    pending = view.prepare_edit(path, old_string, new_string, replace_all=replace_all,
                                expected_version=expect_version)
    change = _submit(view, pending, message)
    if change is None:
        click.echo(f"no change; {pending.shown} already has that content (version {pending.expected_version})")
        return
    click.echo(f"edited {change.path} (version {change.version})")


def _edit_in_editor(view: AgentView, path: str, expect_version: int | None, message: str) -> None:
    from memagent.agent.chat.editor import edit_text, keep

    if view.exists(path):
        fc = view.read(path)
        shown, original, version = fc.path, fc.content, fc.version
    else:
        shown, original, version = path, "", 0
        click.echo(f"{path} does not exist yet; saving creates it", err=True)
    if expect_version is not None and expect_version != version:
        raise VfsError(f"{shown} is at version {version}, not {expect_version}; nothing was changed")
    text = original
    while True:
        text = edit_text(text, shown)
        if text == original:
            click.echo(f"no change; {shown} is as it was")
            return
        try:
            pending = view.prepare_write(shown, text, expected_version=version)
        except ValidationFailed as exc:
            click.echo(f"memagent: {cli_words(str(exc))}", err=True)
            if sys.stdin.isatty() and click.confirm("Edit it again?", default=True, err=True):
                continue
            fail(f"{shown} is unchanged; your text is in {keep(text, shown)}")
        except VfsError as exc:
            fail(f"{cli_words(str(exc))} (your text is in {keep(text, shown)})")
        change = _submit(view, pending, message or "edited by hand")
        if change is None:
            click.echo(f"no change; {pending.shown} is as it was (version {pending.expected_version})")
            return
        click.echo(f"edited {change.path} (version {change.version})")
        return


@memory_command(fs, "rm",
    click.argument("path"),
    MESSAGE)
def rm_cmd(ctx: Ctx, path: str, agent: str | None, message: str) -> None:
    """Delete a file (its history stays; `fs revert` brings it back)."""
    view = ctx.view(agent)
    change = _submit(view, view.prepare_delete(path), message)
    assert change is not None  # a delete always changes something (a missing file raises)
    click.echo(
        f"deleted {change.path} (version {change.version}); undo with "
        f"`memagent fs revert {change.path} {change.version - 1}`"
    )


@memory_command(fs, "mv",
    click.argument("src"),
    click.argument("dst"))
def mv_cmd(ctx: Ctx, src: str, dst: str, agent: str | None) -> None:
    """Move SRC to DST (refused if DST exists)."""
    # Through the write entrance (move_file): the person's own command, approved as "cli"
    # like every other fs write; two revisions in one transaction at the version read.
    from memagent.vfs import approved_policy

    change = ctx.view(agent).move(src, dst, author="cli", policy=approved_policy("cli"))
    click.echo(f"moved {src} to {change.path} (version {change.version})")


@memory_command(fs, "glob",
    click.argument("pattern"),
    click.argument("path", default="/"))
def glob_cmd(ctx: Ctx, pattern: str, path: str, agent: str | None) -> None:
    """List files matching PATTERN (** crosses folders, {a,b} braces)."""
    found = ctx.view(agent).glob(pattern, path)
    if not found:
        sys.exit(1)  # like grep and find scripts expect: nothing matched, nothing printed
    click.echo(shown("\n".join(found)))


@memory_command(fs, "grep",
    click.argument("pattern"),
    click.argument("path", default="/"),
    click.option("--glob", "glob_", default=None, help="Only files matching this glob."),
    click.option("--mode", "mode", type=click.Choice(["files_with_matches", "content", "count"]),
                 default=None, help="What to print (default: content lines)."),
    click.option("-l", "files_only", is_flag=True, help="Only the names of matching files."),
    click.option("-c", "count", is_flag=True, help="Matching line counts per file."),
    click.option("-i", "case_insensitive", is_flag=True, help="Ignore case."),
    click.option("-F", "fixed_strings", is_flag=True, help="PATTERN is a literal string."),
    # grep's -n and -r, typed by habit (`fs grep -rn TODO`): content lines always carry
    # their number and the search always descends into PATH, so both are accepted as is.
    click.option("-n", "--line-number", "line_number", is_flag=True,
                 help="Accepted as in grep: content lines always show their line number."),
    click.option("-r", "-R", "recursive", is_flag=True,
                 help="Accepted as in grep: the search always includes PATH's subfolders."),
    click.option("--limit", type=int, default=200, show_default=True, help="Most results to print."),
    dash_arguments=True)
def grep_cmd(ctx: Ctx, pattern: str, path: str, agent: str | None, glob_: str | None,
             mode: str | None, files_only: bool, count: bool, case_insensitive: bool,
             fixed_strings: bool, line_number: bool, recursive: bool, limit: int) -> None:
    """Search file contents with a Python regular expression (each content line as PATH:LINE:TEXT)."""
    chosen = mode or ("files_with_matches" if files_only else "count" if count else "content")
    result = ctx.view(agent).grep(pattern, path=path, glob=glob_, output_mode=chosen,
                                  case_insensitive=case_insensitive,
                                  fixed_strings=fixed_strings, limit=limit)
    if not (result.files or result.lines or result.counts):
        if result.cut:
            click.echo(f"memagent: no match in the part searched (incomplete: {result.cut})", err=True)
        sys.exit(1)  # like grep: no match is exit 1 with nothing on stdout
    click.echo(shown(render_grep(result)))


@memory_command(fs, "search",
    click.argument("query"),
    click.option("-k", "--limit", "k", type=click.IntRange(1, 100), default=10, show_default=True,
                 help="Most results to print."),
    click.option("--path", "path", default="/", help="Only below this folder (e.g. /conversations)."),
    click.option("--mode", "mode", type=click.Choice(SEARCH_MODES), default=DEFAULT_SEARCH_MODE,
                 show_default=True,
                 help="lexical: words (stemmed); semantic: meaning (MEMAGENT_EMBEDDER); hybrid: both fused."))
def search_cmd(ctx: Ctx, query: str, agent: str | None, k: int, path: str, mode: SearchMode) -> None:
    """Rank memory files and past conversations by relevance to QUERY (words, meaning, or both).

    Exits 1 with nothing on stdout when nothing matches, like `fs grep`; 2 when the
    query is empty or the embedder cannot be used (so a script can tell them apart).
    In hybrid mode an embedder that cannot be used falls back to words, with a warning."""
    if not query.strip():
        raise click.UsageError("the query is empty; give the words (or the meaning) to look for")
    view = ctx.view(agent)
    try:
        hits = view.search(query, k=k, path=path, mode=mode)
    except EmbedderError as exc:
        if mode != "hybrid":
            # Not "nothing matched" (exit 1): the search could not run at all.
            click.echo(f"memagent: {shown(str(exc))}", err=True)
            sys.exit(2)
        # hybrid (the default) degrades to words rather than finding nothing.
        click.echo(f"memagent: {shown(str(exc))}; searching by words only (--mode lexical)", err=True)
        hits = view.search(query, k=k, path=path, mode="lexical")
    if not hits:
        click.echo(f"memagent: {shown(render_search(hits, query[:200]))}", err=True)
        sys.exit(1)
    click.echo(shown(render_search(hits, query[:200])))


@memory_command(fs, "log",
    click.argument("path"))
def log_cmd(ctx: Ctx, path: str, agent: str | None) -> None:
    """List a file's revisions, newest first: author, approval, origin and reason."""
    click.echo(shown(render_log(ctx.view(agent).history(path))))


@memory_command(fs, "blame",
    click.argument("path"))
def blame_cmd(ctx: Ctx, path: str, agent: str | None) -> None:
    """Show each line of PATH with the revision (and conversation) that last changed it."""
    click.echo(shown(render_blame(ctx.view(agent).blame(path))))


@memory_command(fs, "diff",
    click.argument("path"),
    click.argument("versions", nargs=-1, type=int),
    click.option("--from", "from_", type=int, default=None, help="Older version (or give it after PATH)."),
    click.option("--to", "to", type=int, default=None, help="Newer version (default: current)."))
def diff_cmd(ctx: Ctx, path: str, versions: tuple[int, ...], agent: str | None, from_: int | None,
             to: int | None) -> None:
    """Print a unified diff between two versions of PATH, as git does.

    \b
    fs diff PATH          the last change (the version before it -> current)
    fs diff PATH 2        version 2 -> current
    fs diff PATH 2 5      version 2 -> version 5 (same as --from 2 --to 5)
    """
    if len(versions) > 2:
        raise click.UsageError("give at most two versions: fs diff PATH [FROM [TO]]")
    if versions and (from_ is not None or to is not None):
        raise click.UsageError("give the versions after PATH or as --from/--to, not both")
    if versions:
        from_, to = versions[0], versions[1] if len(versions) == 2 else None
    view = ctx.view(agent)
    if from_ is None:
        newest = max((r.version for r in view.history(path)), default=0)  # an unknown path raises: one line
        if newest <= 1:
            click.echo(f"{path} has one version: nothing to compare yet (fs cat {path} shows it)")
            return
        from_, to = newest - 1, newest
    out = view.diff(path, from_, to)
    click.echo(shown(out) if out else "(no difference)", nl=not out)


@memory_command(fs, "revert",
    click.argument("path"),
    click.argument("version", type=int, required=False),
    click.option("--to", "to", type=int, default=None, help="Version whose content becomes current "
                 "(or give it after PATH)."))
def revert_cmd(ctx: Ctx, path: str, version: int | None, agent: str | None, to: int | None) -> None:
    """Make VERSION's content current again, as a new revision (undeletes too): fs revert PATH N."""
    if version is not None and to is not None and version != to:
        raise click.UsageError("give the version after PATH or as --to, not both")
    to = version if version is not None else to
    if to is None:
        raise click.UsageError(f"say which version: fs revert {path} N (or --to N; fs log {path} lists them)")
    view = ctx.view(agent)
    content = view.revision_content(path, to)  # an unknown version raises: one line
    if content is None:
        raise VfsError(f"version {to} of {path} is a deletion; to delete the file use rm, "
                       "or revert to a version that has content")
    # A revert is a write of the old content, taken through the same entrance as every write.
    pending = view.prepare_write(path, content)
    change = _submit(view, pending, f"revert to version {to}")
    if change is None:
        click.echo(f"no change; {pending.shown} already has version {to}'s content "
                   f"(version {pending.expected_version})")
        return
    click.echo(f"reverted {change.path} to version {to} (now version {change.version})")
