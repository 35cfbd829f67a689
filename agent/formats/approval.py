"""Carrying an agent's approval rules (``vfs/records/rules.py``) into an export.

Each target gets what it has an equivalent for, and a ``Note`` for every rule (or part
of one) it cannot hold, so nothing is dropped silently:

- **Claude Code** (``.claude/settings.json`` ``permissions``): an MCP tool rule goes
  to ``allow``/``ask``/``deny`` under the same name (and leaves the list tools.json put
  it in, so each tool stays in one list); ``write_file``/``edit_file`` rules become
  ``Edit(<pattern>)`` (Claude Code's ``Edit`` rules cover every file-editing tool;
  the pattern is anchored at the project root, where memory's files are exported);
  ``queue`` becomes ``ask`` (Claude Code has no review queue: a person decides); a
  ``delete_file`` rule has no equivalent (Claude Code deletes through Bash). Claude
  Code applies deny, then ask, then allow rather than the first match: a note says
  so when an earlier rule is looser than a later one.
- **OpenCode** (``opencode.json`` ``permission``): MCP tool rules by OpenCode's tool
  name (``server_tool``, ``server_*``); file rules only when they cover every path
  (``**``), as the global ``edit`` permission.
- **Codex** (``.codex/config.toml``): an MCP tool ``ask`` rule becomes the tool's
  ``approval_mode = "prompt"``; Codex approves per session, not per path or per
  allow/deny rule, so the rest are notes.

A MCP ``queue`` rule refuses the call in memagent (a call cannot wait for review), so
it is carried as ``deny``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memagent.vfs import MCP_PREFIX, RULES_PATH, Rule

from .base import ExportResult, Note

WHERE = f"approval rules ({RULES_PATH.lstrip('/')}, `memagent approval list`)"
_STRENGTH = {"allow": 0, "ask": 1, "queue": 1, "deny": 2}


def _note(result: ExportResult, n: int, rule: Rule, message: str) -> None:
    result.notes.append(Note(WHERE, f"rule {n} ({rule}): {message}"))


def _json_of(result: ExportResult, path: str, start: dict[str, Any]) -> dict[str, Any]:
    data = result.files.get(path)
    return json.loads(data) if data is not None else start


def _put_json(result: ExportResult, path: str, document: dict[str, Any]) -> None:
    result.files[path] = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    result.origins.setdefault(path, set()).add(RULES_PATH)


def carry(format_name: str, rules: Sequence[Rule], result: ExportResult) -> None:
    """Add ``rules`` to the export ``result`` of ``format_name`` (notes for the rest)."""
    if not rules:
        return
    if format_name == "claude-code":
        _claude(rules, result)
    elif format_name == "opencode":
        _opencode(rules, result)
    elif format_name == "codex":
        _codex(rules, result)
    else:
        result.notes.append(Note(WHERE, f"{len(rules)} rule(s) not carried: this format has no approval settings"))


def _claude(rules: Sequence[Rule], result: ExportResult) -> None:
    path = ".claude/settings.json"
    document = _json_of(result, path, {})
    permissions: dict[str, list[str]] = document.setdefault("permissions", {})
    lists = {k: list(permissions.get(k, [])) for k in ("allow", "ask", "deny")}
    for n, rule in enumerate(rules, 1):
        if rule.tool.startswith(MCP_PREFIX):
            target, name = ("deny" if rule.action == "queue" else rule.action), rule.tool
            if rule.action == "queue":
                _note(result, n, rule, "carried as deny (memagent refuses an MCP call a queue rule matches)")
        elif rule.tool == "delete_file":
            _note(result, n, rule, "not carried: Claude Code has no delete tool (it deletes through Bash)")
            continue
        else:
            # No pattern is every path: Claude Code's bare "Edit" (not "Edit(None)").
            edit = "Edit" if rule.pattern is None else f"Edit({rule.pattern})"
            target, name = ("ask" if rule.action == "queue" else rule.action), edit
            if rule.action == "queue":
                _note(result, n, rule, "carried as ask: Claude Code has no review queue, so a person decides")
        for key, names in lists.items():
            if key != target and name in names and rule.tool.startswith(MCP_PREFIX):
                names.remove(name)  # the rule decides this tool: one list only
        if name not in lists[target]:
            lists[target].append(name)
    for i, early in enumerate(rules):
        # Only rules that can decide the same call in Claude Code (the file tools all become
        # Edit; delete_file is not carried) can be reordered by its deny > ask > allow.
        later = next((j for j in range(i + 1, len(rules)) if _STRENGTH[rules[j].action] > _STRENGTH[early.action]
                      and _claude_family(early) is not None
                      and _claude_family(rules[j]) == _claude_family(early)), None)
        if later is not None:
            result.notes.append(Note(WHERE, f"order: Claude Code applies deny, then ask, then allow, not the first "
                                            f"match; where rule {i + 1} ({early}) and the stricter rule {later + 1} "
                                            f"({rules[later]}) both match, Claude Code follows rule {later + 1}"))
            break
    document["permissions"] = {k: v for k, v in lists.items() if v} | {
        k: v for k, v in permissions.items() if k not in lists}
    _put_json(result, path, document)


def _claude_family(rule: Rule) -> str | None:
    """Which Claude Code permission a rule becomes: Edit, an MCP tool, or none (not carried)."""
    if rule.tool.startswith(MCP_PREFIX):
        return "mcp"
    return None if rule.tool == "delete_file" else "Edit"


def _oc_name(name: str) -> str:
    # OpenCode's tool names: server_tool with characters other than [A-Za-z0-9_-] as "_".
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def _opencode(rules: Sequence[Rule], result: ExportResult) -> None:
    path = "opencode.json"
    document = _json_of(result, path, {"$schema": "https://opencode.ai/config.json"})
    permission: dict[str, Any] = document.setdefault("permission", {})
    decided: set[str] = set()  # keys a rule set: a later rule does not change them (first match wins)
    for n, rule in enumerate(rules, 1):
        action = "deny" if rule.action == "queue" and rule.tool.startswith(MCP_PREFIX) else rule.action
        if rule.tool.startswith(MCP_PREFIX):
            parts = rule.tool[len(MCP_PREFIX):].split("__", 1)
            if len(parts) != 2 and "*" in rule.tool:
                _note(result, n, rule, "not carried: it names no tool (mcp__SERVER__TOOL)")
                continue
            tool = "*" if len(parts) == 1 or parts[1] == "*" else _oc_name(parts[1])  # mcp__SERVER: all its tools
            key = f"{_oc_name(parts[0])}_{tool}"
            key_or_edit = key
        elif rule.tool in ("write_file", "edit_file") and rule.pattern in (None, "/**") and rule.action != "queue":
            key_or_edit = "edit"
        else:
            why = ("OpenCode has no review queue" if rule.action == "queue"
                   else "OpenCode has no delete tool" if rule.tool == "delete_file"
                   else "OpenCode's edit permission covers every path, not a pattern")
            _note(result, n, rule, f"not carried: {why}")
            continue
        if key_or_edit not in decided:  # a rule overrides what tools.json put there
            permission[key_or_edit] = action
            decided.add(key_or_edit)
    if not permission:
        del document["permission"]
    _put_json(result, path, document)
    from .opencode import bind_agents

    bind_agents(result)  # a subagent's permission never loosens the project's (issue 28)


def _codex(rules: Sequence[Rule], result: ExportResult) -> None:
    from .codex import toml_table

    path = ".codex/config.toml"
    text = result.files[path].decode("utf-8") if path in result.files else ""
    for n, rule in enumerate(rules, 1):
        parts = rule.tool[len(MCP_PREFIX):].split("__", 1) if rule.tool.startswith(MCP_PREFIX) else []
        if len(parts) == 2 and "*" not in rule.tool and rule.action == "ask":
            table = toml_table(["mcp_servers", parts[0], "tools", parts[1]], [("approval_mode", "prompt")])
            header = table.splitlines()[0]
            server = toml_table(["mcp_servers", parts[0]], []).splitlines()[0]
            if server in text:
                if header not in text:
                    text = text.rstrip("\n") + "\n\n" + table
                continue
        _note(result, n, rule, "not carried: Codex approves per session (approval_policy), not per path or "
                               "with allow/deny per tool")
    if text:
        result.files[path] = text.encode("utf-8")
        result.origins.setdefault(path, set()).add(RULES_PATH)
