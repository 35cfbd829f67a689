"""The check kinds of a scenario, each a pure function of what a run observed.

Invariants:
- ``KINDS`` is the one list of kinds; ``check_arg`` validates an argument when the
  scenario is loaded (so a bad regex is a load error with its line, never a failed
  check), and ``run_check`` evaluates one against an ``Observed``.
- A check passes or fails with a one-line ``detail`` saying what was seen; nothing
  here raises for a model's misbehaviour (a missing file is a failed check).
- Memory checks look at the agent's own memory (not ``/conversations/``, which is
  not memory), except ``file_exists``/``file_absent``, which see every path the
  agent sees.
- Regexes are Python's, compiled once at load; text is bounded by what memory and
  the model can hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memagent.validators import validate
from memagent.vfs import AgentView, VfsError, compile_glob

KINDS: dict[str, str] = {
    "answer_matches": "a regex the answer must match",
    "answer_not_matches": "a regex the answer must not match",
    "memory_matches": "{path: PATH or GLOB, pattern: REGEX}: some such file matches",
    "memory_not_matches": "{path: PATH or GLOB, pattern: REGEX}: no such file matches",
    "memory_valid": "true (or a PATH/GLOB): every such file passes its validators",
    "tool_called": "NAME or {name: NAME, args: REGEX}: the tool was called (with such arguments)",
    "tool_not_called": "NAME or {name: NAME, args: REGEX}: the tool was never called so",
    "max_prompt_tokens": "N: no model request's prompt was over N tokens",
    "max_revisions": "N or {path: PATH or GLOB, max: N}: at most N revisions made",
    "file_exists": "PATH or GLOB: such a file exists",
    "file_absent": "PATH or GLOB: no such file exists",
}

# Stands for what is checked (one line in results and tables).
DETAIL_CHARS = 300


@dataclass
class Call:
    name: str
    args: dict[str, Any]


@dataclass
class Observed:
    """What a check looks at: the answer and calls in its scope (a turn, or the whole
    scenario at the end), the prompt size of each model request in that scope, the
    agent's memory now, and how many revisions each path had when the run started."""

    answer: str
    calls: list[Call]
    prompts: list[int]
    view: AgentView
    start_revisions: dict[str, int] = field(default_factory=dict)  # path -> version at the start


def _regex(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return "give a regular expression (a non-empty string; quote it with '...')"
    try:
        re.compile(value)
    except re.error as err:
        return f"bad regular expression {value!r}: {err}"
    return None


def _path(value: Any) -> str | None:
    if not isinstance(value, str) or not value.startswith("/"):
        return "give a memory path or glob starting with /, e.g. /AGENTS.md or /skills/*.md"
    return None


def _count(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return "give a whole number (0 or more)"
    return None


def check_arg(kind: str, arg: Any) -> str | None:
    """What is wrong with ``arg`` for ``kind`` (one line), or None."""
    if kind in ("answer_matches", "answer_not_matches"):
        return _regex(arg)
    if kind in ("memory_matches", "memory_not_matches"):
        if not isinstance(arg, Mapping) or set(arg) != {"path", "pattern"}:
            return "give {path: PATH or GLOB, pattern: REGEX}"
        return _path(arg["path"]) or _regex(arg["pattern"])
    if kind == "memory_valid":
        if arg is True:
            return None
        return "give true (every memory file) or a memory path or glob starting with /" if _path(arg) else None
    if kind in ("tool_called", "tool_not_called"):
        if isinstance(arg, str) and arg:
            return None
        if not isinstance(arg, Mapping) or "name" not in arg or not set(arg) <= {"name", "args"}:
            return "give a tool name, or {name: NAME, args: REGEX}"
        if not isinstance(arg["name"], str) or not arg["name"]:
            return "name must be a tool name such as read_file or mcp__server__tool"
        return _regex(arg["args"]) if "args" in arg else None
    if kind == "max_prompt_tokens":
        return _count(arg)
    if kind == "max_revisions":
        if isinstance(arg, Mapping):
            if set(arg) != {"path", "max"}:
                return "give N, or {path: PATH or GLOB, max: N}"
            return _path(arg["path"]) or _count(arg["max"])
        return _count(arg)
    if kind in ("file_exists", "file_absent"):
        return _path(arg)
    return f"unknown check {kind!r}; known: {', '.join(KINDS)}"


def short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 1] + "…"


def _is_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[{")


def memory_paths(view: AgentView) -> list[str]:
    """The agent's own memory files (no /conversations/), sorted."""
    return sorted(f.path for f in view.store.all_files(view.scope))


def _matching(view: AgentView, path: str) -> list[str]:
    if not _is_glob(path):
        return [path] if path in set(memory_paths(view)) else []
    rx = compile_glob(path.lstrip("/"))
    return [p for p in memory_paths(view) if rx.fullmatch(p.lstrip("/"))]


def _read(view: AgentView, path: str) -> str | None:
    try:
        return view.read(path, limit=1_000_000).content
    except VfsError:
        return None


def versions(view: AgentView) -> dict[str, int]:
    """The version of every live memory file (one query: each revision adds one)."""
    return {f.path: f.version for f in view.store.all_files(view.scope)}


def _memory(obs: Observed, arg: Mapping[str, str], want: bool) -> tuple[bool, str]:
    paths = _matching(obs.view, arg["path"])
    rx = re.compile(arg["pattern"])
    hits = [p for p in paths if (text := _read(obs.view, p)) is not None and rx.search(text)]
    if want:
        if not paths:
            return False, f"no memory file {arg['path']}"
        return (True, f"{hits[0]} matches /{arg['pattern']}/") if hits else \
            (False, f"none of {len(paths)} file(s) {arg['path']} matches /{arg['pattern']}/")
    return (False, f"{', '.join(hits[:5])} matches /{arg['pattern']}/") if hits else \
        (True, f"no file {arg['path']} matches /{arg['pattern']}/")


def _valid(obs: Observed, arg: Any) -> tuple[bool, str]:
    paths = memory_paths(obs.view) if arg is True else _matching(obs.view, arg)
    bad: list[str] = []
    for path in paths:
        text = _read(obs.view, path)
        if text is None:
            continue
        problems = validate(path, text)
        if problems:
            bad.append(f"{path}: {problems[0]}")
    return (False, "; ".join(bad[:3])) if bad else (True, f"{len(paths)} file(s) valid")


def _tool(obs: Observed, arg: Any, want: bool) -> tuple[bool, str]:
    name = arg if isinstance(arg, str) else arg["name"]
    rx = re.compile(arg["args"]) if isinstance(arg, Mapping) and "args" in arg else None
    hits = [c for c in obs.calls if c.name == name
            and (rx is None or rx.search(json.dumps(c.args, ensure_ascii=False, sort_keys=True)))]
    called = ", ".join(sorted({c.name for c in obs.calls})) or "none"
    what = name + (f" with arguments /{rx.pattern}/" if rx else "")
    if want:
        return (True, f"{what} called {len(hits)} time(s)") if hits else \
            (False, f"{what} never called (tools called: {called})")
    return (False, f"{what} called {len(hits)} time(s): {short(json.dumps(hits[0].args))}") if hits else \
        (True, f"{what} never called")


def _revisions(obs: Observed, arg: Any) -> tuple[bool, str]:
    path, limit = (arg["path"], arg["max"]) if isinstance(arg, Mapping) else ("/**", arg)
    now = versions(obs.view)
    rx = compile_glob(path.lstrip("/")) if _is_glob(path) else None
    # A file gone since the start was deleted: one revision (more edits before it are not seen).
    every = set(now) | set(obs.start_revisions)
    made = {p: (now[p] - obs.start_revisions.get(p, 0)) if p in now else 1 for p in every
            if (rx.fullmatch(p.lstrip("/")) if rx else p == path)}
    total = sum(made.values())
    busiest = ", ".join(f"{p} {n}" for p, n in sorted(made.items(), key=lambda x: -x[1])[:3] if n)
    detail = f"{total} revision(s) of {path}" + (f" ({busiest})" if busiest else "") + f", at most {limit}"
    return total <= limit, detail


def _exists(obs: Observed, path: str, want: bool) -> tuple[bool, str]:
    if _is_glob(path):
        # The folder before the first wildcard is where to look (/conversations/ is a mount of its own).
        parts = path.strip("/").split("/")
        fixed = next(i for i, part in enumerate(parts) if _is_glob(part))
        base, rest = "/" + "/".join(parts[:fixed]), "/".join(parts[fixed:])
        try:
            found = obs.view.glob(rest, base)
        except VfsError as err:
            return False, str(err)
    else:
        found = [path] if obs.view.exists(path) else []
    if want:
        return (True, f"{found[0]} exists") if found else (False, f"no file {path}")
    return (False, f"{found[0]} exists") if found else (True, f"no file {path}")


def run_check(kind: str, arg: Any, obs: Observed) -> tuple[bool, str]:
    """(passed, one-line detail) of check ``kind`` with ``arg`` over ``obs``."""
    runners: dict[str, Callable[[], tuple[bool, str]]] = {
        "answer_matches": lambda: (bool(re.search(arg, obs.answer)),
                                   f"/{arg}/ {'found' if re.search(arg, obs.answer) else 'not found'} "
                                   f"in the answer: {short(obs.answer)!r}"),
        "answer_not_matches": lambda: (not re.search(arg, obs.answer),
                                       f"/{arg}/ {'found' if re.search(arg, obs.answer) else 'not found'} "
                                       f"in the answer: {short(obs.answer)!r}"),
        "memory_matches": lambda: _memory(obs, arg, True),
        "memory_not_matches": lambda: _memory(obs, arg, False),
        "memory_valid": lambda: _valid(obs, arg),
        "tool_called": lambda: _tool(obs, arg, True),
        "tool_not_called": lambda: _tool(obs, arg, False),
        "max_prompt_tokens": lambda: (max(obs.prompts, default=0) <= arg,
                                      f"largest prompt {max(obs.prompts, default=0):,} tokens "
                                      f"over {len(obs.prompts)} request(s), at most {arg:,}"),
        "max_revisions": lambda: _revisions(obs, arg),
        "file_exists": lambda: _exists(obs, arg, True),
        "file_absent": lambda: _exists(obs, arg, False),
    }
    return runners[kind]()


def describe(kind: str, arg: Any) -> str:
    """A check as one short label: ``memory_matches /AGENTS.md /(?i)bullet/``."""
    if isinstance(arg, Mapping):
        inner = " ".join(str(v) for v in arg.values())
        return short(f"{kind} {inner}")
    return short(f"{kind} {arg}")
