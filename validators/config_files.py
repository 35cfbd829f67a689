"""Where memory may not put a file: names another program runs or trusts as configuration.

An exported agent lands in a person's repository (``memagent export AGENT REPO``).
A memory file at ``/.git/config``, ``/knowledge/.git/config``, ``/.envrc`` or
``/.vscode/tasks.json`` would then be read by git, direnv or an editor as
configuration, and a hook, ``core.fsmonitor`` or a folder-open task runs a command
on the person's machine (a shell prompt runs ``git status`` on every ``cd``). So
memory holds none: this module is the one list of those names, and ``validate``
(``registry.py``) refuses a write there, for every writer; ``memagent validate``
reports old ones, export refuses them by name and import leaves them behind, all
through ``config_location``.

Invariants:
- Each name is refused either in EVERY segment of a path (``anywhere``) or only as
  the first one (``root``). ``anywhere``: what a tool finds from whatever folder it
  is run, opened or ``cd``-ed in, or walking up from there — repositories (``.git``
  as a file or folder, ``.hg``, ``.svn``, ``.bzr``, ``_darcs``, ``.jj``...), git's
  per-folder files (``.gitattributes`` runs filters, ``.gitignore``), environment
  loaders (``.envrc``, ``.env*``, mise), package-manager and editor settings, and a
  harness's settings folders (``.claude``, ``.codex``...), since a project root is
  wherever the person starts the harness. ``root``: what is read only at the top of
  a repository or by a service (``.github``, CI files, hook managers, ``.lfsconfig``),
  from a home folder (``.netrc``, ``.pypirc``), or instructions a harness reads
  (``CLAUDE.md``, ``GEMINI.md``, ``.cursorrules``...): deeper down those say nothing
  memory's own ``/AGENTS.md`` (which every export writes) could not, while at the
  top they would stand in for it.
- A file named ``HEAD`` (last segment, any folder) is refused too: beside
  ``objects/`` and ``refs/`` it makes its folder a bare repository that git finds
  and whose ``config`` it trusts. Folders named ``head``, ``objects`` or ``refs``
  stay ordinary.
- Hidden files that are none of these (``/knowledge/.notes.md``) are ordinary memory.
- The match is case-insensitive (``casefold``), and ignores what Windows drops
  or adds when it opens a name (trailing dots and spaces, an ``:stream`` suffix)
  and git's own short-name alias ``git~1``, because the exported folder may sit
  on a case-insensitive or Windows file system where those name the same file.
- ``.env`` matches every name that starts with it (``.env.local``, ``.envrc``),
  in any segment: dotenv loaders read them all.
- Messages name the offending segment and who reads it; they quote no content and
  not the rest of the path. ``safe_path`` is a path that passes, for the fix a
  message suggests.
"""

from __future__ import annotations

import re
from typing import Literal

from .base import Problem

Where = Literal["anywhere", "root"]

# Name (casefolded) -> (who reads it, in which segments). Grouped by kind of reader; each
# entry is a place a tool, VCS or agent harness loads from a project folder on an
# ordinary action (status, cd, opening the folder, starting a session, a push).
_READERS: dict[str, tuple[str, Where]] = {}


def _add(reader: str, where: Where, *names: str) -> None:
    for name in names:
        _READERS[name.casefold()] = (reader, where)


_VCS = "version control (git runs its hooks and trusts its config)"
# Found from any folder inside (a nested repository), or read per folder (attributes run filters).
_add(_VCS, "anywhere",
     ".git", ".gitmodules", ".gitattributes", ".gitignore", ".hg", ".svn", ".bzr", "_darcs", ".jj", ".pijul",
     ".fslckout", "_fossil_")
# Read at the top of a working copy only (nested ones need a repository above, refused).
_add(_VCS, "root", ".lfsconfig", ".githooks", ".hgsub", ".hgsubstate", ".hgignore", ".fossil-settings")
_add("environment loaders (direnv, dotenv, mise run or load it on cd)", "anywhere",
     ".envrc", ".direnv", ".mise", ".mise.toml", "mise.toml", ".tool-versions")
_add("package managers (npm, yarn, pnpm, cargo, bundler, maven read it as settings or run it)", "anywhere",
     ".npmrc", ".yarnrc", ".yarnrc.yml", ".yarn", ".pnpmfile.cjs", ".cargo", ".bundle", ".mvn")
_add("package managers (pip upload and netrc read it as credentials)", "root", ".pypirc", ".netrc")
_add("editors and dev containers (folder-open tasks, interpreters, local settings)", "anywhere",
     ".vscode", ".idea", ".fleet", ".zed", ".theia", ".devcontainer", ".devcontainer.json",
     ".nvim.lua", ".nvimrc", ".exrc", ".vimrc", ".dir-locals.el", ".dir-locals-2.el", ".editorconfig")
_add("git hooks managers and CI (run on commit or push)", "root",
     ".pre-commit-config.yaml", ".pre-commit-hooks.yaml", ".husky", "lefthook.yml", ".lefthook.yml",
     ".lefthook", ".github", ".gitlab-ci.yml", ".gitlab", ".circleci", ".travis.yml", ".buildkite",
     ".drone.yml", "azure-pipelines.yml", "bitbucket-pipelines.yml", ".woodpecker", ".woodpecker.yml")
_HARNESS = "agent harnesses (settings, hooks, MCP servers, instructions)"
_add(_HARNESS, "anywhere",
     ".claude", ".mcp.json", "mcp.json", ".codex", ".agents", ".opencode", "opencode.json", "opencode.jsonc",
     ".cursor", ".windsurf", ".cline", ".roo", ".roomodes", ".continue", ".gemini", ".aider.conf.yml",
     ".junie", ".amazonq", ".kiro", ".deepagents", "deepagents.toml")
_add(_HARNESS, "root",
     "claude.md", "claude.local.md", "agents.override.md", "gemini.md", ".cursorrules", ".cursorignore",
     ".windsurfrules", ".clinerules", ".goosehints")
_add("memagent's own export manifest (import trusts it)", "anywhere", ".memagent-export.json")

# The dotenv family: every name starting with this is read by some loader.
_PREFIX = ".env"
_ENV_READER = "environment loaders (dotenv files hold secrets and settings tools load)"
# A bare repository's marker file (the last segment only: git opens it as a file).
_HEAD = "head"
_HEAD_READER = "version control (a HEAD file beside objects/ and refs/ makes a bare repository git trusts)"
# What Windows ignores at the end of a name, and an NTFS stream suffix.
_WINDOWS_TAIL = re.compile(r"[. ]+$")
# git's own check treats the 8.3 short name as .git itself (core.protectNTFS).
_SHORT_GIT = re.compile(r"git~\d+")

CONFIG_NAMES: frozenset[str] = frozenset(_READERS)
# The names refused in every segment, not only the first.
ANYWHERE_NAMES: frozenset[str] = frozenset(n for n, (_, where) in _READERS.items() if where == "anywhere")


def _key(segment: str) -> str:
    """The name a case-insensitive, Windows file system would open for ``segment``."""
    name = segment.split(":", 1)[0]
    name = _WINDOWS_TAIL.sub("", name)
    return name.casefold()


def _reader(segment: str, *, first: bool, last: bool) -> str | None:
    """Who reads ``segment`` as configuration at that place in a path, or None."""
    key = _key(segment)
    if not key:
        return None
    if key in _READERS:
        reader, where = _READERS[key]
        return reader if first or where == "anywhere" else None
    if key.startswith(_PREFIX):
        return _ENV_READER
    if _SHORT_GIT.fullmatch(key):
        return _READERS[".git"][0]
    if last and key == _HEAD:
        return _HEAD_READER
    return None


def config_segment(path: str) -> tuple[str, str] | None:
    """The first segment of ``path`` some program reads as configuration, and who; None when none is."""
    parts = path.strip("/").split("/")
    for i, segment in enumerate(parts):
        reader = _reader(segment, first=i == 0, last=i == len(parts) - 1)
        if reader is not None:
            return segment, reader
    return None


def config_location(path: str) -> str | None:
    """Who reads a segment of ``path`` as configuration, or None when nobody does.

    ``path`` is a memory path (``/knowledge/.git/config``) or a relative output path
    (``knowledge/.git/config``): both are judged alike, so export and import agree.
    """
    found = config_segment(path)
    return found[1] if found else None


def _renamed(segment: str) -> str:
    plain = segment.split(":", 1)[0].rstrip(". ").lstrip("._")
    return plain if plain and _reader(plain, first=True, last=True) is None else f"notes-{plain or 'config'}"


def safe_path(path: str) -> str:
    """A path like ``path`` that no program reads as configuration (for the fix a message suggests).

    A name refused only at the top moves under ``/knowledge/``; a name refused
    anywhere loses its leading dot (``/knowledge/.git/config`` -> ``/knowledge/git/config``).
    """
    parts = path.strip("/").split("/")
    if parts and _reader(parts[0], first=True, last=len(parts) == 1) is not None \
            and _reader(parts[0], first=False, last=len(parts) == 1) is None:
        parts.insert(0, "knowledge")
    fixed = [_renamed(p) if _reader(p, first=i == 0, last=i == len(parts) - 1) is not None else p
             for i, p in enumerate(parts)]
    return "/" + "/".join(fixed)


def check_config_location(path: str) -> list[Problem]:
    """One Problem when a segment of ``path`` is a configuration location, else none."""
    parts = path.strip("/").split("/")
    found = config_segment(path)
    if found is None:
        return []
    segment, reader = found
    if _reader(segment, first=False, last=segment == parts[-1]) is None:
        # Refused only at the top: the same name in a folder is ordinary memory.
        where, fix = "at the top level", f"Keep such notes under another folder, e.g. /knowledge/{segment}"
    else:
        where, fix = "in any folder", f"Rename it, e.g. to {_renamed(segment)}"
    return [Problem(
        "path",
        f"memory may not hold a file or folder named {segment} {where}: it is read as configuration by "
        f"{reader}, so an exported copy could run commands on your machine. {fix}",
        "config",
    )]
