"""Editing a memory file by hand in the person's ``$EDITOR`` (``/edit``, ``memagent fs edit PATH``).

Invariants:
- The editor is ``$EDITOR``, else ``$VISUAL``, else ``vi``; it is a command line
  split like a shell's (``EDITOR="code --wait"`` works) and gets one temporary file
  whose name ends like the memory file's (``AGENTS.md``), so it highlights the format.
- Without ``$EDITOR`` or ``$VISUAL`` and without a terminal (a pipe, a script),
  nothing is started: ``vi`` there would draw on a pipe and read the rest of the
  input; the one-line error says to set EDITOR.
- The temporary file is removed afterwards unless the text must be kept (the
  caller's store refused it): then ``keep`` writes it to a file of its own and the
  message names it, so typed work is never lost.
- Failures (no such editor, a non-zero exit, text that is not UTF-8) raise
  ``EditorFailed``, a ``VfsError`` whose one-line message says what to do; the
  memory file is untouched.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from memagent.vfs import VfsError


class EditorFailed(VfsError):
    """The editor could not run or did not exit cleanly; nothing was stored."""


def editor_command() -> list[str]:
    raw = os.environ.get("EDITOR", "").strip() or os.environ.get("VISUAL", "").strip() or "vi"
    try:
        words = shlex.split(raw)
    except ValueError:
        words = [raw]
    return words or ["vi"]


def edit_text(text: str, path: str) -> str:
    """Open ``text`` in the editor as a file named like ``path``; the saved text."""
    name = path.rstrip("/").rsplit("/", 1)[-1] or "memory.txt"
    chosen = os.environ.get("EDITOR", "").strip() or os.environ.get("VISUAL", "").strip()
    if not chosen and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise EditorFailed(f"EDITOR is not set and this is no terminal for vi; set it "
                           f"(e.g. `export EDITOR=nano`) or edit in a terminal; {path} is unchanged")
    command = editor_command()
    with tempfile.TemporaryDirectory(prefix="memagent-edit-") as folder:
        file = Path(folder) / name
        file.write_text(text, "utf-8")
        try:
            code = subprocess.call([*command, str(file)])
        except OSError as exc:
            raise EditorFailed(
                f"cannot start the editor {shlex.join(command)!r} ({exc.strerror or exc}); "
                f"set EDITOR, e.g. `export EDITOR=nano`; {path} is unchanged") from None
        if code != 0:
            raise EditorFailed(f"the editor {shlex.join(command)!r} exited with status {code}; "
                               f"{path} is unchanged")
        try:
            return file.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise EditorFailed(f"the editor removed the file instead of saving it; {path} is unchanged") from None
        except UnicodeDecodeError:
            raise EditorFailed(f"the saved text is not UTF-8; memory files must be UTF-8, {path} is unchanged"
                               ) from None


def keep(text: str, path: str) -> str:
    """Save ``text`` (an edit the store refused) to a file of its own; its path."""
    name = path.rstrip("/").rsplit("/", 1)[-1] or "memory.txt"
    fd, kept = tempfile.mkstemp(prefix="memagent-", suffix="-" + name)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return kept
