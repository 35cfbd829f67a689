"""Where memory may not put a file: names another program runs or trusts as configuration.

An exported agent lands in a person's repository (``memagent export AGENT REPO``).
A memory file at ``/.git/config``, ``/.envrc`` or ``/.vscode/tasks.json`` would then
be read by git, direnv or an editor as the repository's own configuration, and a
hook, ``core.fsmonitor`` or a folder-open task runs a command on the person's
machine. So memory holds none: this module is the one list of those locations,
and ``validate`` (``registry.py``) refuses a write there, for every writer.

Invariants:
- Only the first segment of a path counts (``/.git/...``, ``/.envrc``); hidden
  files deeper down (``/knowledge/.notes.md``) are ordinary memory.
- The match is case-insensitive (``casefold``), and ignores what Windows drops
  or adds when it opens a name (trailing dots and spaces, an ``:stream`` suffix)
  and git's own short-name alias ``git~1``, because the exported folder may sit
  on a case-insensitive or Windows file system where those name the same file.
- ``.env`` matches every name that starts with it (``.env.local``, ``.envrc``):
  dotenv loaders read them all.
- Messages name the location and who reads it; they quote no content.
"""

from __future__ import annotations

import re

from .base import Problem

# First segment (lowercase) -> who reads it there. Grouped by kind of reader; each
# entry is a place a tool, VCS or agent harness loads from a project folder on an
# ordinary action (status, cd, opening the folder, starting a session, a push).
_READERS: dict[str, str] = {}


def _add(reader: str, *names: str) -> None:
    for name in names:
        _READERS[name.casefold()] = reader


_add("version control (git runs its hooks and trusts its config)",
     ".git", ".gitmodules", ".gitattributes", ".gitignore", ".lfsconfig", ".githooks",
     ".hg", ".hgsub", ".hgsubstate", ".hgignore", ".svn", ".bzr", "_darcs", ".jj", ".pijul",
     ".fslckout", "_fossil_", ".fossil-settings")
_add("environment loaders (direnv, dotenv, mise run or load it on cd)",
     ".envrc", ".direnv", ".mise", ".mise.toml", "mise.toml", ".tool-versions")
_add("package managers (npm, yarn, pnpm, cargo, bundler, maven, pip upload read it as settings or run it)",
     ".npmrc", ".yarnrc", ".yarnrc.yml", ".yarn", ".pnpmfile.cjs", ".cargo", ".bundle", ".mvn",
     ".pypirc", ".netrc")
_add("editors and dev containers (folder-open tasks, interpreters, local settings)",
     ".vscode", ".idea", ".fleet", ".zed", ".theia", ".devcontainer", ".devcontainer.json",
     ".nvim.lua", ".nvimrc", ".exrc", ".vimrc", ".dir-locals.el", ".dir-locals-2.el", ".editorconfig")
_add("git hooks managers and CI (run on commit or push)",
     ".pre-commit-config.yaml", ".pre-commit-hooks.yaml", ".husky", "lefthook.yml", ".lefthook.yml",
     ".lefthook", ".github", ".gitlab-ci.yml", ".gitlab", ".circleci", ".travis.yml", ".buildkite",
     ".drone.yml", "azure-pipelines.yml", "bitbucket-pipelines.yml", ".woodpecker", ".woodpecker.yml")
_add("agent harnesses (settings, hooks, MCP servers, instructions)",
     ".claude", "claude.md", "claude.local.md", ".mcp.json", "mcp.json", ".codex", ".agents",
     "agents.override.md", ".opencode", "opencode.json", "opencode.jsonc", ".cursor", ".cursorrules",
     ".cursorignore", ".windsurf", ".windsurfrules", ".clinerules", ".cline", ".roo", ".roomodes",
     ".continue", ".gemini", "gemini.md", ".aider.conf.yml", ".junie", ".amazonq", ".kiro",
     ".goosehints", ".deepagents", "deepagents.toml")
_add("memagent's own export manifest (import trusts it)", ".memagent-export.json")

# The dotenv family: every name starting with this is read by some loader.
_PREFIX = ".env"
_ENV_READER = "environment loaders (dotenv files hold secrets and settings tools load)"
# What Windows ignores at the end of a name, and an NTFS stream suffix.
_WINDOWS_TAIL = re.compile(r"[. ]+$")
# git's own check treats the 8.3 short name as .git itself (core.protectNTFS).
_SHORT_GIT = re.compile(r"git~\d+")

CONFIG_NAMES: frozenset[str] = frozenset(_READERS)


def _key(segment: str) -> str:
    """The name a case-insensitive, Windows file system would open for ``segment``."""
    name = segment.split(":", 1)[0]
    name = _WINDOWS_TAIL.sub("", name)
    return name.casefold()


def config_location(path: str) -> str | None:
    """Who reads the first segment of ``path`` as configuration, or None when nobody does.

    ``path`` is a memory path (``/.git/config``) or a relative output path (``.git/config``).
    """
    first = path.lstrip("/").split("/", 1)[0]
    key = _key(first)
    if not key:
        return None
    if key in _READERS:
        return _READERS[key]
    if key.startswith(_PREFIX):
        return _ENV_READER
    if _SHORT_GIT.fullmatch(key):
        return _READERS[".git"]
    return None


def first_segment(path: str) -> str:
    return path.lstrip("/").split("/", 1)[0]


def check_config_location(path: str) -> list[Problem]:
    """One Problem when ``path`` lies in a configuration location, else none."""
    reader = config_location(path)
    if reader is None:
        return []
    first = first_segment(path)
    return [Problem(
        "path",
        f"memory may not hold {first} at the top level: it is read as configuration by {reader}, so an "
        f"exported copy could run commands on your machine. Keep such notes under another folder, "
        f"e.g. /knowledge/{first.lstrip('.') or 'config'}/...",
        "config",
    )]
