"""``memagent export`` and ``memagent import``: an agent's memory to and from other harnesses.

Invariants:
- Export never writes outside OUTDIR and never half-writes: everything goes into a
  temporary folder (or zip) beside OUTDIR first and is moved into place at the
  end; a non-empty OUTDIR (or an existing zip) is refused unless ``--force``, and
  with ``--force`` only the exported files are replaced, never through a link.
  With ``--force`` every destination is checked before the first move (a link
  anywhere on its path, a folder or special file where a file goes, a file where
  a folder goes), and a refusal names each and changes nothing; a move that still
  fails (a disk error, a link made meanwhile) puts back what was replaced.
- No memory file is written where git, a tool or a harness reads configuration
  (``formats.export_agent`` refuses the export, naming each file).
- Import reads the source through ``formats.archive`` (links, devices, ``..``,
  absolute paths, zip-slip and zip bombs refused by name), validates every file
  before anything is stored, shows a preview (and a diff per changed file of an
  existing agent), asks unless ``--yes``, then stores all of it or nothing in one
  ``bulk_write`` with author ``import`` and a message naming the source.
- The write happens at the versions the preview showed: the preview records, for
  every destination file, the version it read (0: no file), and a file changed,
  created or deleted since (by a chat, another command...) refuses the import by
  name with nothing stored. A new agent is created in that same transaction, so an
  import killed at any point leaves no agent or the agent with all its files.
- Errors are one line ``memagent: ...`` (plus one line per refused entry or
  problem) with exit status 1; nothing is stored or written then.
- A progress bar appears on a terminal only when the work takes over a second;
  the last line is always a summary (files, bytes, time).
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from memagent.agent.cli.common import Ctx, fail, handled
from memagent.agent.formats import (
    FORMATS,
    MANIFEST,
    ExportOptions,
    FormatError,
    Note,
    detect,
    export_agent,
    get_format,
    import_tree,
)
from memagent.agent.formats.archive import read_source
from memagent.agent.formats.base import check_output_path
from memagent.agent.formats.mcp import read_tools_json
from memagent.agent.formats.probe import probe
from memagent.vfs import (
    RESERVED_PREFIXES,
    AlreadyExists,
    ChangedSince,
    InvalidPath,
    Memory,
    NotFound,
    Store,
    ValidationFailed,
    check_agent_name,
    normalize_file,
    scope_name,
    shown,
)

ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024 or unit == "MiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


class Progress:
    """A files-done/total bar on stderr, shown only on a terminal once the work takes over a second."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self.start = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is None and self.total and time.monotonic() - self.start > 1.0 and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                            console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.done)
        elif self._bar is not None:
            self._bar.update(self._task, completed=self.done, total=self.total)

    def step(self, done: int, total: int) -> None:
        """Callback form: ``done`` of ``total`` files so far."""
        self.total = total
        self.advance(done - self.done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def print_notes(notes: list[Note], heading: str) -> None:
    if not notes:
        return
    click.echo(heading)
    seen: set[str] = set()
    for note in notes:
        line = f"  {shown(str(note))}"  # entry names can hold U+202E, U+009B
        if line not in seen:
            seen.add(line)
            click.echo(line)


# -- export ---------------------------------------------------------------------------


@click.command("export")
@click.argument("agent")
@click.argument("outdir", type=click.Path(path_type=Path))
@click.option("--format", "format_name", type=click.Choice(list(FORMATS)), default="folder", show_default=True,
              help="Layout to write.")
@click.option("--zip", "as_zip", is_flag=True, help="Write one .zip archive instead of a folder.")
@click.option("--force", is_flag=True, help="Write into a non-empty OUTDIR (replacing only the exported files).")
@click.option("--probe", "do_probe", is_flag=True,
              help="Ask the MCP servers which tools they offer; claude-code then denies the unlisted ones.")
@click.option("--live", is_flag=True,
              help="claude-code only: copy no memory; .mcp.json runs `memagent mcp serve AGENT` and CLAUDE.md "
                   "tells the model to use it, so Claude Code reads and changes the live memory.")
@click.pass_obj
@handled
def export_cmd(ctx: Ctx, agent: str, outdir: Path, format_name: str, as_zip: bool, force: bool,
               do_probe: bool, live: bool) -> None:
    """Write AGENT's memory to OUTDIR in another harness's layout.

    \b
    Formats: folder (the files as stored), claude-code, deepagents (also LangSmith
    Agent Builder), opencode, codex. What a target cannot hold is listed, and kept
    in .memagent-export.json so `memagent import` gives back the same files.
    """
    started = time.monotonic()
    if live and format_name != "claude-code":
        fail(f"--live works with --format claude-code only (not {format_name}); other formats copy the memory")
    fmt = get_format(format_name)
    target = outdir if not as_zip or outdir.suffix.lower() == ".zip" else outdir.with_name(outdir.name + ".zip")
    _check_target(target, as_zip, force)
    # --live reads no memory, so it must not create a database that is not there.
    (ctx.existing_store if live else ctx.store).require_agent(agent)
    if live:
        _export_live(agent, target, as_zip, started)
        return
    scope = scope_name("agent", agent)
    infos = ctx.store.all_files(scope)
    bar = Progress("exporting", len(infos) * 2)
    memory: dict[str, str] = {}
    try:
        for info in infos:
            memory[info.path] = ctx.store.read(scope, info.path).content
            bar.advance()
        options = ExportOptions(agent=agent, rules=ctx.memory.rules(agent).rules())
        notes: list[Note] = []
        try:
            if do_probe:
                if "/tools.json" not in memory:
                    notes.append(Note("--probe", "the agent has no /tools.json; nothing to probe"))
                else:
                    options.offered, notes = probe(read_tools_json(memory["/tools.json"]).servers)
                    if format_name != "claude-code":
                        notes.append(Note("--probe", f"only claude-code uses what servers offer; {format_name} "
                                                     "enables the listed tools by name"))
            result = export_agent(fmt, memory, options)
        except FormatError as exc:
            fail(str(exc))
        bar.total = len(infos) + len(result.files)
        if as_zip:
            _write_zip(target, result.files, bar.advance)
        else:
            _write_folder(target, result.files, bar.advance)
    finally:
        bar.close()
    kept = [n for n in result.notes if n.path == MANIFEST]
    print_notes(notes + [n for n in result.notes if n.path != MANIFEST], f"what {fmt.title} will not pick up:")
    for note in kept:
        click.echo(str(note))
    size = sum(len(d) for d in result.files.values())
    click.echo(f"exported agent {agent!r} as {format_name} to {target} ({len(result.files)} files, {human(size)}) "
               f"in {time.monotonic() - started:.1f} s")


def _export_live(agent: str, target: Path, as_zip: bool, started: float) -> None:
    """``--live``: the Claude Code files that point at ``memagent mcp serve AGENT`` (no memory copied)."""
    from memagent.agent.formats.claude_code import export_live

    result = export_live(agent)
    if as_zip:
        _write_zip(target, result.files, lambda: None)
    else:
        _write_folder(target, result.files, lambda: None)
    print_notes(result.notes, "note:")
    click.echo(f"exported agent {agent!r} as claude-code --live to {target} ({len(result.files)} files: "
               f"{', '.join(sorted(result.files))}) in {time.monotonic() - started:.1f} s")


def _check_target(target: Path, as_zip: bool, force: bool) -> None:
    if as_zip:
        if target.is_dir():
            fail(f"{target} is a folder; give the path of the .zip file to write")
        if target.exists() and not force:
            fail(f"{target} already exists; choose another name or pass --force to replace it")
        return
    if target.exists() and not target.is_dir():
        fail(f"{target} is a file; give a folder to export into (or use --zip)")
    if target.is_dir() and any(target.iterdir()) and not force:
        fail(f"{target} is not empty; choose an empty or new folder, or pass --force to write into it")


@contextmanager
def _staging(target: Path) -> Iterator[Path]:
    """A temporary folder beside ``target`` (same file system, so moves are renames), removed afterwards."""
    parent = target.parent if str(target.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".memagent-tmp", dir=parent))
    except OSError as exc:
        fail(f"cannot write next to {target}: {exc.strerror or exc}")
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


class _Refused(Exception):
    """A destination the export may not write; the message is one line for a person."""


def _destination_problem(base: Path, rel: str) -> str | None:
    """Why ``base/rel`` may not receive an exported file, or None.

    Checked with ``lstat`` only, so nothing on the path is followed: a link
    anywhere is refused, as is a non-folder where a folder is needed and anything
    but a regular file (or nothing) where the file goes.
    """
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return f"refusing to write {rel!r}: it would leave the output folder"
    path = base
    for i, part in enumerate(parts):
        path = path / part
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            return None  # nothing below a missing name exists either
        if stat.S_ISLNK(mode):
            return f"refusing to write through the link {path}; remove it or export to a new folder"
        if i < len(parts) - 1 and not stat.S_ISDIR(mode):
            return f"{path} is not a folder; the export needs a folder there for {rel}"
        if i == len(parts) - 1 and stat.S_ISDIR(mode):
            return f"{path} is a folder; the export needs a file there"
        if i == len(parts) - 1 and not stat.S_ISREG(mode):
            return f"{path} is not a regular file; the export replaces only files"
    return None


def _inside(base: Path, rel: str) -> Path:
    """``base/rel``, refusing anything that would leave ``base`` or pass through a link."""
    problem = _destination_problem(base, rel)
    if problem:
        fail(problem)
    return base.joinpath(*rel.split("/"))


def _check_destinations(target: Path, files: Mapping[str, bytes]) -> None:
    """Refuse, naming each, every destination ``--force`` could not replace; nothing has moved yet."""
    problems = [p for rel in sorted(files) if (p := _destination_problem(target, rel))]
    if problems:
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:4])}{' ...' if len(problems) > 4 else ''})"
        fail(f"{problems[0]}{more if len(problems) > 1 else ''}; nothing was written")


def _move_into(target: Path, stage: Path, backup: Path, files: Mapping[str, bytes],
               step: Callable[[], None]) -> None:
    """Move the staged files over ``target``, all or none: a failure puts back what was replaced.

    Replaced files are first moved aside into ``backup`` (a second staging folder
    beside ``target``), so undoing is renames too; folders this export created are
    removed again.
    """
    moved: list[tuple[Path, Path | None]] = []  # (destination, its old file aside or None)
    made: list[Path] = []
    try:
        for n, rel in enumerate(sorted(files)):
            problem = _destination_problem(target, rel)  # again: the folder may have changed meanwhile
            if problem:
                raise _Refused(problem)
            dest = target.joinpath(*rel.split("/"))
            missing = [p for p in [dest.parent, *dest.parent.parents] if not p.exists()]
            for folder in reversed(missing):
                folder.mkdir()
                made.append(folder)
            aside: Path | None = None
            if dest.exists():
                aside = backup / str(n)
                os.replace(dest, aside)
            moved.append((dest, aside))
            os.replace(stage.joinpath(*rel.split("/")), dest)
            step()
    except (OSError, _Refused) as exc:
        for dest, aside in reversed(moved):
            with contextlib.suppress(OSError):
                if aside is not None:
                    os.replace(aside, dest)
                else:
                    dest.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        reason = str(exc) if isinstance(exc, _Refused) else (exc.strerror or str(exc))
        fail(f"cannot write {target}: {reason}; nothing was changed")


def _write_folder(target: Path, files: Mapping[str, bytes], step: Callable[[], None]) -> None:
    try:
        with _staging(target) as stage:
            for rel, data in sorted(files.items()):
                path = _inside(stage, rel)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            if not target.exists() or (target.is_dir() and not any(target.iterdir())):
                if target.exists():
                    target.rmdir()
                mask = os.umask(0)
                os.umask(mask)
                stage.chmod(0o777 & ~mask)  # mkdtemp made it private; the export is an ordinary folder
                stage.rename(target)
                for _ in files:
                    step()
                return
            # --force into a folder with other files: check every destination, then move ours over.
            _check_destinations(target, files)
            with _staging(target) as backup:
                _move_into(target, stage, backup, files, step)
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")


def _write_zip(target: Path, files: Mapping[str, bytes], step: Callable[[], None]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for rel, data in sorted(files.items()):
            check_output_path(rel)
            info = zipfile.ZipInfo(rel, ZIP_DATE)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
            step()
    try:
        with _staging(target) as stage:
            temp = stage / "export.zip"
            temp.write_bytes(buffer.getvalue())
            os.replace(temp, target)
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")


# -- import ---------------------------------------------------------------------------


@click.command("import")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--as", "agent", required=True, metavar="AGENT", help="Agent to import into (created if new).")
@click.option("--format", "format_name", type=click.Choice(["auto", *FORMATS]), default="auto", show_default=True,
              help="Layout of SOURCE.")
@click.option("--yes", "-y", is_flag=True, help="Import without asking.")
@click.pass_obj
@handled
def import_cmd(ctx: Ctx, source: Path, agent: str, format_name: str, yes: bool) -> None:
    """Import SOURCE (a folder or a .zip) as AGENT's memory.

    \b
    SOURCE may be our own export, a Claude Code project, a Deep Agents / Agent
    Builder project or download, an OpenCode or a Codex project. Every file is
    validated first; then all of it is stored, or nothing.
    """
    started = time.monotonic()
    check_agent_name(agent)
    reading = Progress("reading", 0)
    try:
        src = read_source(source, reading.step)
        fmt = detect(src.tree) if format_name == "auto" else get_format(format_name)
        result = import_tree(fmt, src.tree)
    except FormatError as exc:
        fail(str(exc))
    finally:
        reading.close()
    notes = src.notes + result.notes
    files = _clean(result.files, notes)
    _check_tree(files)
    store, scope = ctx.store, scope_name("agent", agent)
    exists = agent in store.list_agents()
    before, seen = _snapshot(store, scope, files) if exists else ({}, dict.fromkeys(files, 0))
    bar = Progress("validating", len(files))
    problems: list[str] = []
    try:
        for path, content in sorted(files.items()):
            try:
                store.validate(path, content)
            except ValidationFailed as exc:
                problems.append(str(exc))
            bar.advance()
    finally:
        bar.close()
    if problems:
        click.echo(f"memagent: {len(problems)} of {len(files)} files from {source} are not valid memory; "
                   "nothing was stored", err=True)
        for problem in problems:
            click.echo(shown(problem), err=True)
        sys.exit(1)
    if not files:
        print_notes(notes, "notes (what was changed on the way in, or left out):")
        fail(f"nothing to import: {source} holds no files memagent can keep (see the notes above)")
    changed = {p: c for p, c in files.items() if before.get(p) != c}
    _preview(source, fmt.title, agent, exists, files, changed, before, notes)
    if not changed:
        click.echo(f"nothing to import: agent {agent!r} already has all {len(files)} files as they are")
        return
    if not yes:
        try:
            if not click.confirm(f"Import {len(changed)} file(s) into agent {agent!r}?", default=False):
                fail("import cancelled; nothing was stored")
        except click.Abort:
            click.echo()
            fail("import cancelled; nothing was stored (pass --yes to import without asking)")
    _test_stop_points(ctx.memory)
    try:
        store.bulk_write(scope, changed, author="import", approval="cli",
                         message=f"import from {source.name or source} ({fmt.name})",
                         expected_versions=seen, create=not exists)
    except ChangedSince as exc:
        first = exc.drifts[0]
        more = f" (and {len(exc.drifts) - 1} more file(s))" if len(exc.drifts) > 1 else ""
        fail(f"{first.path} changed since the preview ({first.describe()}){more}; nothing was stored; "
             "run the import again")
    except AlreadyExists:
        fail(f"agent {agent!r} was created since the preview; nothing was stored; run the import again")
    size = sum(len(c.encode("utf-8")) for c in changed.values())
    click.echo(f"imported {len(changed)} files ({human(size)}) into agent {agent!r} from {source} ({fmt.name}) "
               f"in {time.monotonic() - started:.1f} s")


def _snapshot(store: Store, scope: str, files: Mapping[str, str]) -> tuple[dict[str, str], dict[str, int]]:
    """What the preview shows of an existing agent: the content and version of each destination file.

    Content and version come from one read each, so the diff shown is the version
    the write will insist on; a file deleted after the listing counts as absent (0).
    """
    live = {i.path for i in store.all_files(scope)}
    before: dict[str, str] = {}
    seen = dict.fromkeys(files, 0)
    for path in files:
        if path in live:
            try:
                found = store.read(scope, path)
            except NotFound:
                continue
            before[path], seen[path] = found.content, found.version
    return before, seen


STOP_AT = "MEMAGENT_TEST_IMPORT_STOP_AT"


def _test_stop_points(memory: Memory) -> None:
    """Test-only: with ``MEMAGENT_TEST_IMPORT_STOP_AT=N``, stop before the Nth database step of the write.

    The steps are the SQL statements and the commit that this thread runs from here
    on (the background index merge runs on its own thread and is not counted). At
    step N the process prints ``stopped at step N: <statement>`` (one line) to stderr
    and waits for a line on stdin before it goes on, so a test can SIGKILL it, or
    act and then let it go on, at a known point of the transaction
    (tests/test_import_versions.py does both).
    """
    raw = os.environ.get(STOP_AT)
    if not raw:
        return
    if not raw.isdigit():
        fail(f"{STOP_AT} must be a step number, not {raw!r}")
    stop, steps, me = int(raw), 0, threading.get_ident()

    def step(what: str) -> None:
        nonlocal steps
        if threading.get_ident() != me:
            return
        steps += 1
        if steps == stop:
            sys.stderr.write(f"stopped at step {steps}: {' '.join(what.split())}\n")
            sys.stderr.flush()
            sys.stdin.readline()

    memory.on_statement(step)


def _clean(files: Mapping[str, str], notes: list[Note]) -> dict[str, str]:
    """The import's files under their normalised paths; paths memagent cannot hold become notes."""
    out: dict[str, str] = {}
    for path, content in files.items():
        try:
            norm = normalize_file(path)
        except InvalidPath as exc:
            notes.append(Note(path, f"not imported: {exc}"))
            continue
        if norm.startswith(RESERVED_PREFIXES):
            notes.append(Note(path, f"{norm.split('/')[1]}/ is reserved in memagent (shared memory); not imported"))
            continue
        out[norm] = content
    return out


def _check_tree(files: Mapping[str, str]) -> None:
    for path in files:
        parent = path.rsplit("/", 1)[0]
        while parent:
            if parent in files:
                fail(f"{parent} and {path} cannot both be files (one is inside the other); nothing was stored")
            parent = parent.rsplit("/", 1)[0]


def _preview(source: Path, title: str, agent: str, exists: bool, files: Mapping[str, str],
             changed: Mapping[str, str], before: Mapping[str, str], notes: list[Note]) -> None:
    state = "existing agent" if exists else "new agent"
    click.echo(f"import {source} ({title}) as {agent!r} ({state}):")
    color = sys.stdout.isatty()
    for path in sorted(files):
        size = human(len(files[path].encode("utf-8")))
        if path not in before:
            click.echo(f"  create {shown(path)}  ({size})")
        elif path in changed:
            click.echo(f"  change {shown(path)}  ({size})")
            diff = difflib.unified_diff(before[path].splitlines(keepends=True), files[path].splitlines(keepends=True),
                                        f"a{path}", f"b{path}")
            for line in diff:
                text = "    " + shown(line.rstrip("\n"))  # the diff is content: no raw controls
                fg = "green" if line.startswith("+") else "red" if line.startswith("-") else None
                click.echo(click.style(text, fg=fg) if color and fg else text)
        else:
            click.echo(f"  same   {shown(path)}")
    print_notes(notes, "notes (what was changed on the way in, or left out):")
