"""Approval rules per agent: which tool calls are allowed, asked, queued or denied.

A rule is a tool and, for the file tools, a path pattern, with an action:
``write_file(/knowledge/**) allow``, ``edit_file(/AGENTS.md) ask``,
``delete_file(**) deny``, ``mcp__time__now allow``. Invariants:

- **Kept outside memory.** The rules of agent A are one file, ``/approval.rules``,
  of the scope ``scope_name("settings", A)``. No ``AgentView`` mounts a settings
  scope, so no memory tool (chat, run, ``mcp serve``, subagents, integrations,
  import) can read or change them; only ``RuleBook`` writes them, through the one
  write entrance (``vfs/entrance.py`` ``submit``, approval ``cli``) at the version it
  read, so every change is a revision (history, blame) and two people adding rules
  at once never lose one (``StaleVersion``, nothing stored).
- **First match wins.** Rules are tried in order; a call no rule matches gets
  ``DEFAULT`` (``ask`` for the file tools, which is what each front end did before
  rules existed; an MCP tool keeps its ``tools.json`` ``approval`` flag).
- **The action is one of four**, and what ``ask`` means belongs to the context:
  chat asks the person; an unattended context (``memagent run``) applies its
  unattended policy (by default ``queue``); ``mcp serve`` does what its
  ``--approval`` mode says. ``--yolo`` is decided before the rules and overrides
  them (the front end says so).
- **Patterns** are absolute view paths: ``*`` and ``?`` stay inside one folder,
  ``**`` crosses folders (``/knowledge/**`` matches every file below
  ``/knowledge``; ``**`` alone matches every path). A pattern without a leading
  ``/`` is taken from the root. An MCP tool rule takes no path; ``*`` in its name
  matches any run of characters (``mcp__time__*``), and a server alone
  (``mcp__time``, Claude Code's shape) matches every tool of that server.
- **A pattern is kept in the form it is matched in**: the path normaliser's
  (``paths.normalize``: ``//`` and ``.`` dropped, ``..`` applied, NFC), the form every
  path a rule is matched against has, so ``/knowledge//**`` is stored, listed and
  matched as ``/knowledge/**``. What could never mean what it says is refused in one
  line: a trailing slash (no file path ends in one), ``..`` after a wildcard, a
  pattern that is the root or climbs above it. A rules file written before this
  (``parse_rules``) is read the same way, a trailing slash as the ``/**`` it meant.

This module imports ``vfs`` only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Protocol, get_args

from memagent.vfs import entrance, paths
from memagent.vfs.errors import NotFound, VfsError
from memagent.vfs.types import Approval, Author, FileContent, Origin, PendingChange

Action = Literal["allow", "ask", "queue", "deny"]
ACTIONS: tuple[Action, ...] = get_args(Action)
# The file tools a rule may name (the mutating ones: reads are never asked about).
FileTool = Literal["write_file", "edit_file", "delete_file"]
FILE_TOOLS: tuple[FileTool, ...] = get_args(FileTool)
# Which file tool a prepared change came from.
TOOL_OF_OP: dict[str, FileTool] = {"write": "write_file", "edit": "edit_file", "delete": "delete_file"}
MCP_PREFIX = "mcp__"
DEFAULT: Action = "ask"

RULES_PATH = "/approval.rules"
MAX_RULES = 200
MAX_RULE_CHARS = 300

_RULE = re.compile(r"^(?P<tool>[A-Za-z0-9_*.-]+)(?:\((?P<pattern>[^()]*)\))?$")


class RuleError(VfsError):
    """A rule that cannot be parsed, or a rule number that does not exist."""


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass(frozen=True)
class Rule:
    """One rule: ``tool`` (a file tool or ``mcp__server__tool``), its path ``pattern``
    (file tools only; None: every path) and the ``action``."""

    tool: str
    pattern: str | None
    action: Action

    @property
    def spec(self) -> str:
        """The rule as stored (its pattern normalised), without its action: ``write_file(/knowledge/**)``."""
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def __str__(self) -> str:
        return f"{self.spec} {self.action}"

    @cached_property
    def _path_re(self) -> re.Pattern[str] | None:
        return None if self.pattern is None else _pattern_regex(self.pattern)

    @cached_property
    def _tool_re(self) -> re.Pattern[str]:
        name = ".*".join(re.escape(part) for part in self.tool.split("*"))
        if self.tool.startswith(MCP_PREFIX) and "__" not in self.tool[len(MCP_PREFIX):] and "*" not in self.tool:
            name += "(?:__.*)?"  # mcp__SERVER: every tool of the server, as in Claude Code
        return re.compile(name + r"\Z")

    def matches(self, tool: str, path: str | None) -> bool:
        if not self._tool_re.match(tool):
            return False
        if self._path_re is None:
            return True
        return path is not None and self._path_re.match(path) is not None


def _wild(segment: str) -> bool:
    return "*" in segment or "?" in segment


def _normal_pattern(pattern: str, text: str, *, strict: bool) -> str:
    """``pattern`` in the form paths are matched in (``paths.normalize``'s), or ``RuleError``.

    ``strict`` (a rule being added) refuses what the normaliser would silently change
    the meaning of; otherwise (a rules file already stored) a trailing slash reads as
    the ``/**`` it meant and a pattern no path can match is kept as it was."""
    if not pattern.startswith("/"):
        pattern = "/" + pattern
    if pattern != "/" and pattern.endswith("/"):
        base = pattern.rstrip("/") or "/"
        meant = base if base.endswith("**") else paths.dir_prefix(base) + "**"
        if strict:
            raise RuleError(f"path pattern {pattern!r} in {text!r} ends with a slash, and no file path does; "
                            f"write {meant!r} for every file below that folder")
        pattern = meant
    kept: list[str] = []
    for segment in pattern.split("/"):
        if segment == ".." and kept and _wild(kept[-1]) and strict:
            raise RuleError(f"'..' after the wildcard {kept[-1]!r} in {text!r} names no one folder; "
                            "write the folder it should name, e.g. '/knowledge/**'")
        if segment == "..":
            kept = kept[:-1]
        elif segment not in ("", "."):
            kept.append(segment)
    try:
        # The same character rules as a path ('*' and '?' are ordinary characters there).
        normal = paths.normalize(pattern)
    except VfsError as exc:
        if strict:
            raise RuleError(f"bad path pattern in {text!r}: {exc}") from None
        return pattern  # stored before the normaliser refused it: it matches no path now
    if normal == "/" and strict:
        raise RuleError(f"path pattern {pattern!r} in {text!r} names the root folder, which is not a file; "
                        "use ** for every path")
    return normal


def parse_rule(spec: str, action: str, *, strict: bool = True) -> Rule:
    """``write_file(/knowledge/**)`` and ``allow`` as a ``Rule``; ``RuleError`` (one line
    saying what is wrong and what is accepted) otherwise. The pattern is normalised
    (``_normal_pattern``; ``strict=False`` for a rules file already stored)."""
    text = spec.strip()
    if action not in ACTIONS:
        raise RuleError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    if not text or len(text) > MAX_RULE_CHARS:
        raise RuleError(f"a rule is a tool and an optional (path pattern) of at most {MAX_RULE_CHARS} characters, "
                        "e.g. 'write_file(/knowledge/**)' or 'mcp__time__now'")
    found = _RULE.match(text)
    if found is None:
        raise RuleError(f"cannot read rule {text!r}: write it as TOOL or TOOL(PATTERN), e.g. "
                        "'write_file(/knowledge/**)', 'delete_file(**)' or 'mcp__server__tool'")
    tool, pattern = found.group("tool"), found.group("pattern")
    if tool.startswith(MCP_PREFIX):
        if not tool[len(MCP_PREFIX):].strip("_"):
            raise RuleError(f"{tool!r} names no MCP server; write 'mcp__SERVER' (every tool of it) "
                            "or 'mcp__SERVER__TOOL'")
        if pattern is not None:
            raise RuleError(f"{tool} is an MCP tool: its rule takes no path pattern; write just {tool!r}")
    elif tool not in FILE_TOOLS:
        raise RuleError(f"unknown tool {tool!r} in rule {text!r}; rules name {', '.join(FILE_TOOLS)} "
                        f"(with a path pattern) or an MCP tool {MCP_PREFIX}SERVER__TOOL")
    if pattern is not None:
        pattern = pattern.strip()
        if not pattern:
            raise RuleError(f"empty path pattern in {text!r}; use ** for every path, e.g. '{tool}(**)'")
        pattern = _normal_pattern(pattern, text, strict=strict)
    return Rule(tool, pattern, action)


def parse_rules(text: str) -> list[Rule]:
    """The rules file: one ``SPEC ACTION`` a line; blank lines and ``#`` comments skipped."""
    rules: list[Rule] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        spec, _, action = line.rpartition(" ")
        try:
            rules.append(parse_rule(spec, action.strip(), strict=False))
        except RuleError as exc:
            raise RuleError(f"{RULES_PATH} line {n}: {exc}") from None
    return rules


def render_rules(rules: Sequence[Rule]) -> str:
    return "".join(f"{r}\n" for r in rules)


@dataclass(frozen=True)
class Match:
    """What decided a call: the rule and its number (1 = first), or none (the default)."""

    action: Action
    rule: Rule | None = None
    number: int | None = None

    def describe(self) -> str:
        """``rule 2 (write_file(/knowledge/**) allow)``, or ``no rule (default: ask)``."""
        if self.rule is None:
            return f"no rule (default: {self.action})"
        return f"rule {self.number} ({self.rule})"


def decide(rules: Sequence[Rule], tool: str, path: str | None, *, default: Action = DEFAULT) -> Match:
    """The first rule matching ``tool`` on ``path`` (None for a tool without a path)."""
    for n, rule in enumerate(rules, 1):
        if rule.matches(tool, path):
            return Match(rule.action, rule, n)
    return Match(default)


# -- where the rules live ----------------------------------------------------------------


class RuleStore(entrance.Committer, Protocol):
    """What ``RuleBook`` needs of the store (``SqlStore`` has it)."""

    def read(self, scope: str, path: str, *, offset: int = 0, limit: int | None = None,
             shown: str | None = None) -> FileContent: ...

    def prepare_write(self, scope: str, path: str, content: str, *, expected_version: int | None = None,
                      shown: str | None = None) -> PendingChange: ...


class RuleBook:
    """The approval rules of one agent, read from and written to its settings scope."""

    def __init__(self, store: RuleStore, agent: str) -> None:
        self.store = store
        self.agent = agent
        self.scope = paths.scope_name("settings", agent)

    def _read(self) -> tuple[list[Rule], int]:
        try:
            fc = self.store.read(self.scope, RULES_PATH)
        except NotFound:
            return [], 0
        return parse_rules(fc.content), fc.version

    def rules(self) -> list[Rule]:
        """The rules in order (read now: a rule added from another terminal counts at once)."""
        return self._read()[0]

    def decide(self, tool: str, path: str | None, *, default: Action = DEFAULT) -> Match:
        return decide(self.rules(), tool, path, default=default)

    def _save(self, rules: Sequence[Rule], version: int, why: str) -> None:
        pending = self.store.prepare_write(self.scope, RULES_PATH, render_rules(rules), expected_version=version,
                                           shown=f"approval rules of {self.agent}")
        author: Author = "cli"
        approval: Approval = "cli"  # a person's own command
        entrance.require(entrance.submit(self.store, pending, policy=entrance.approved(approval), author=author,
                                     origin=Origin("cli", detail="memagent approval"), reason=why))

    def add(self, spec: str, action: str) -> tuple[int, Rule]:
        """Append a rule; returns its number and the rule as stored."""
        rule = parse_rule(spec, action)
        rules, version = self._read()
        if len(rules) >= MAX_RULES:
            raise RuleError(f"agent {self.agent!r} has {MAX_RULES} rules already; remove some with "
                            f"`memagent approval rm {self.agent} N`")
        self._save([*rules, rule], version, f"approval add {rule}")
        return len(rules) + 1, rule

    def remove(self, number: int) -> Rule:
        """Remove rule ``number`` (1 = first)."""
        rules, version = self._read()
        if not 1 <= number <= len(rules):
            have = f"rules 1 to {len(rules)}" if rules else "no rules"
            raise RuleError(f"agent {self.agent!r} has {have}; `memagent approval list {self.agent}` numbers them")
        gone = rules[number - 1]
        self._save(rules[: number - 1] + rules[number:], version, f"approval rm {number} ({gone})")
        return gone


__all__ = ["ACTIONS", "DEFAULT", "FILE_TOOLS", "MCP_PREFIX", "RULES_PATH", "TOOL_OF_OP", "Action", "Match",
           "Rule", "RuleBook", "RuleError", "decide", "parse_rule", "parse_rules", "render_rules"]
