"""The ``claude-code`` format: a Claude Code project folder.

Checked against Claude Code's documentation (code.claude.com/docs, found with the
search tool): memory ("CLAUDE.md ... can import additional files using
@path/to/import syntax"; ``.claude/CLAUDE.md`` is also read), skills
(``.claude/skills/<name>/SKILL.md``; ``.claude/commands/<name>.md`` works the
same way), subagents (``.claude/agents/<name>.md`` with frontmatter ``name``,
``description``, ``tools`` as a comma-separated list — omitted means every tool —
and ``model``; the body is the system prompt), MCP (``.mcp.json`` at the project
root: ``mcpServers`` with stdio ``command``/``args``/``env`` or ``type``
``http``/``sse`` with ``url``/``headers``; ``${VAR}`` and ``${VAR:-default}``
are expanded) and settings (``.claude/settings.json`` ``permissions.allow``,
``ask``, ``deny`` with rules such as ``mcp__server__tool``; deny beats ask beats
allow, and an untrusted folder's ``allow`` is ignored while ``deny`` holds).

Invariants: ``AGENTS.md`` is written as is and ``CLAUDE.md`` only imports it, so
the instructions exist once; every listed MCP tool is in exactly one list, in
tools.json order: ``ask`` for approval tools, ``allow`` for the rest (a Claude Code
user reads ``allow`` as "runs without asking", so an approval tool there would read
as a contradiction even though ``ask`` wins); ``deny`` lists only tools a
``--probe`` saw offered and tools.json does not list. A subagent's ``tools`` name
only tools Claude Code has (``TO_CLAUDE``); what has none is left out with a note,
never silently, and the project's ``ask``/``deny`` rules bind subagents too.

``export_live`` (``memagent export --live``) copies no memory at all: ``.mcp.json``
runs ``memagent mcp serve AGENT`` (stdio) with ``MEMAGENT_DB`` passed through from
Claude Code's environment as ``${MEMAGENT_DB:-}`` (an unset variable with no default
would make Claude Code refuse the file; empty means memagent's default database), and
``CLAUDE.md`` tells the model to read and change memory only through that server's
tools (``mcp__memagent__<tool>``), so every harness sees the same, current memory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from memagent.validators import check_name

from .base import (
    ExportOptions,
    ExportResult,
    ImportResult,
    Note,
    decode,
    import_plain,
    mapping,
    suggest,
    text_or,
)
from .frontmatter import emit, first_paragraph, import_skill, read_agent, subagent_file, tool_list
from .mcp import (
    Tool,
    ToolsConfig,
    mcp_name,
    split_mcp_name,
    write_tools_json,
)
from .shared import (
    READ_ONLY,
    dump_json,
    export_layout,
    import_skills,
    load_json,
    map_tools_in,
    server_from_mcp_json,
    warn_unlisted,
)

# memagent tool -> Claude Code tool, for subagents' tool lists: only the tools Claude Code
# 2.1.331 has (what it sends to the model; tests/interop checks it). It has no LS, Glob or
# Grep any more (it lists and searches through Bash) and calls Task "Agent".
TO_CLAUDE = {"read_file": "Read", "write_file": "Write", "edit_file": "Edit", "task": "Agent"}
# Older Claude Code names still read on import.
FROM_CLAUDE = {v: k for k, v in TO_CLAUDE.items()} | {"LS": "ls", "Glob": "glob", "Grep": "grep", "Task": "task",
                                                      "MultiEdit": "edit_file"}
_SHELL_ONLY = ("Claude Code has no {} tool (it lists and searches files through Bash, which runs any "
               "command, so Bash is not granted in its place)")
NO_EQUIVALENT = {"delete_file": "Claude Code has no tool that only deletes a file",
                 "search_memory": "Claude Code has no memory search tool",
                 "ls": _SHELL_ONLY.format("LS"), "glob": _SHELL_ONLY.format("Glob"),
                 "grep": _SHELL_ONLY.format("Grep")}
AGENT_KEYS = ("name", "description", "tools", "model")
RESERVED = ("CLAUDE.md", "CLAUDE.local.md", ".mcp.json", ".claude/")
_IMPORT = re.compile(r"(?<![\w`@])@((?:\.{0,2}/)?[A-Za-z0-9_][A-Za-z0-9_./-]*)")
MAX_IMPORT_DEPTH = 5


class ClaudeCodeFormat:
    name = "claude-code"
    title = "Claude Code"
    skills_dir = ".claude/skills"

    # -- export ------------------------------------------------------------------

    def export(self, memory: Mapping[str, str], options: ExportOptions) -> ExportResult:
        result = ExportResult({})
        if "/AGENTS.md" in memory:
            result.add("CLAUDE.md", "@AGENTS.md\n", "/AGENTS.md")
        export_layout(memory, result, skills_dir=self.skills_dir, reserved=RESERVED,
                      subagent=lambda path, content: self._export_subagent(path, content, result),
                      tools=lambda config: self._export_tools(config, options, result))
        return result

    def _export_subagent(self, path: str, content: str, result: ExportResult) -> None:
        name = PurePosixPath(path).stem
        meta, body = read_agent(content)
        listed = tool_list(meta.get("tools"))
        tools: list[str] = []
        for tool in READ_ONLY if listed is None else listed:
            if tool in TO_CLAUDE:
                tools.append(TO_CLAUDE[tool])
            elif tool.startswith("mcp__"):
                tools.append(tool)
            elif tool in NO_EQUIVALENT:
                result.notes.append(Note(path, f"tool {tool} left out: {NO_EQUIVALENT[tool]}"))
            else:
                tools.append(tool)
                result.notes.append(Note(path, f"tool {tool!r} is not a memagent tool; passed on unchanged"))
        pairs: list[tuple[str, Any]] = [("name", name), ("description", str(meta.get("description", "")))]
        pairs.append(("tools", ", ".join(tools) if tools else []))
        if isinstance(meta.get("model"), str):
            pairs.append(("model", meta["model"]))
        result.add(f".claude/agents/{name}.md", emit(pairs, body), path)

    def _export_tools(self, config: ToolsConfig, options: ExportOptions, result: ExportResult) -> None:
        if config.servers:
            result.add(".mcp.json", dump_json({"mcpServers": config.servers}), "/tools.json")
        allow = [mcp_name(t.server, t.name) for t in config.tools if not t.approval]
        ask = [mcp_name(t.server, t.name) for t in config.tools if t.approval]
        deny: list[str] = []
        for server, offered in options.offered.items():
            listed = {t.name for t in config.tools_of(server)}
            deny += [mcp_name(server, t) for t in offered if t not in listed]
        permissions = {k: v for k, v in (("allow", allow), ("ask", ask), ("deny", deny)) if v}
        if permissions:
            result.add(".claude/settings.json", dump_json({"permissions": permissions}), "/tools.json")

    # -- import ------------------------------------------------------------------

    def import_(self, tree: Mapping[str, bytes]) -> ImportResult:
        result = ImportResult({})
        claimed: set[str] = set()
        self._import_memory(tree, result, claimed)
        import_skills(tree, self.skills_dir, result, claimed)
        self._import_commands(tree, result, claimed)
        for src in sorted(tree):
            if src.startswith(".claude/agents/") and src.endswith(".md"):
                claimed.add(src)
                self._import_subagent(src, tree[src], result)
        self._import_tools(tree, result, claimed)
        for src in ("CLAUDE.local.md", ".claude/settings.local.json"):
            if src in tree:
                claimed.add(src)
                result.notes.append(Note(src, "personal local settings; not imported"))
        import_plain(tree, claimed, result)
        return result

    def _import_memory(self, tree: Mapping[str, bytes], result: ImportResult, claimed: set[str]) -> None:
        main = next((p for p in ("CLAUDE.md", ".claude/CLAUDE.md") if p in tree), None)
        if main is None:
            if "AGENTS.md" in tree and (text := decode(tree["AGENTS.md"])) is not None:
                result.add("/AGENTS.md", text, "AGENTS.md")
                claimed.add("AGENTS.md")
            return
        text = decode(tree[main])
        if text is None:
            result.notes.append(Note(main, "not UTF-8 text; not imported"))
            return
        used: set[str] = {main}
        resolved = resolve_imports(text, main, tree, used, result.notes, 0)
        if "AGENTS.md" in tree and "AGENTS.md" not in used and (agents := decode(tree["AGENTS.md"])) is not None:
            resolved = resolved + ("" if resolved.endswith("\n") or not resolved else "\n") + "\n" + agents
            result.notes.append(Note("AGENTS.md", f"{main} does not import it; appended to /AGENTS.md"))
            used.add("AGENTS.md")
        claimed.add(main)
        if "AGENTS.md" in used:
            claimed.add("AGENTS.md")
        result.add("/AGENTS.md", resolved, *sorted(used))

    def _import_commands(self, tree: Mapping[str, bytes], result: ImportResult, claimed: set[str]) -> None:
        for src in sorted(tree):
            if not (src.startswith(".claude/commands/") and src.endswith(".md")):
                continue
            claimed.add(src)
            text = decode(tree[src])
            stem = src[len(".claude/commands/"):-3].replace("/", "-")
            name = stem if check_name(stem) is None else suggest(stem)
            if text is None:
                result.notes.append(Note(src, "not UTF-8 text; not imported"))
                continue
            if f"/skills/{name}/SKILL.md" in result.files or f"/skills/{name}.md" in result.files:
                result.notes.append(Note(src, f"a skill named {name} already exists; command not imported"))
                continue
            content, notes = import_skill(name, text, src)
            result.notes += notes
            result.notes.append(Note(src, f"Claude Code command imported as the skill /skills/{name}.md"))
            result.add(f"/skills/{name}.md", content, src)

    def _import_subagent(self, src: str, data: bytes, result: ImportResult) -> None:
        text = decode(data)
        if text is None:
            result.notes.append(Note(src, "not UTF-8 text; not imported"))
            return
        meta, body = read_agent(text)
        stem = PurePosixPath(src).stem
        given = text_or(meta.get("name"), stem)
        name = given if check_name(given) is None else suggest(given)
        if name != given:
            result.notes.append(Note(src, f"name {given!r} is not a memagent name; imported as {name}"))
        extra = [k for k in meta if k not in AGENT_KEYS]
        if extra:
            result.notes.append(Note(src, f"{', '.join(extra)} not carried over (memagent subagents have name, "
                                          "description, tools and model)"))
        tools = map_tools_in(tool_list(meta.get("tools")), FROM_CLAUDE, src, result.notes,
                             "Claude Code gives it every tool")
        description = text_or(meta.get("description"), "")
        if not description.strip():
            description = first_paragraph(body) or f"The {name} subagent."
            result.notes.append(Note(src, "had no description; one was taken from its prompt"))
        model = meta.get("model") if isinstance(meta.get("model"), str) and meta.get("model") != "inherit" else None
        result.add(f"/subagents/{name}.md", subagent_file(name, description, tools, model, body), src)

    def _import_tools(self, tree: Mapping[str, bytes], result: ImportResult, claimed: set[str]) -> None:
        config = ToolsConfig()
        sources: list[str] = []
        if ".mcp.json" in tree:
            claimed.add(".mcp.json")
            sources.append(".mcp.json")
            data = load_json(tree[".mcp.json"], ".mcp.json", result.notes)
            servers = data.get("mcpServers") if isinstance(data, dict) else None
            for name, entry in (servers or {}).items():
                server = server_from_mcp_json(str(name), entry, f".mcp.json {name}", result.notes)
                if server is not None:
                    config.servers[str(name)] = server
        settings = ".claude/settings.json"
        if settings in tree:
            claimed.add(settings)
            sources.append(settings)
            data = load_json(tree[settings], settings, result.notes)
            permissions = mapping(mapping(data).get("permissions"))
            allow = permissions.get("allow", []) if isinstance(permissions, dict) else []
            ask = permissions.get("ask", []) if isinstance(permissions, dict) else []
            for rule in [*allow, *[r for r in ask if r not in allow]]:
                if not isinstance(rule, str):
                    continue
                parts = split_mcp_name(rule, list(config.servers))
                if parts is None or parts[0] not in config.servers or "*" in rule:
                    result.notes.append(Note(settings, f"permission rule {rule!r} has no memagent equivalent "
                                                       "(only single mcp__server__tool rules carry over)"))
                    continue
                if config.find(rule) is None:
                    config.tools.append(Tool(parts[0], parts[1], rule in ask))
        warn_unlisted(config, result.notes)
        if config.servers or config.tools:
            result.add("/tools.json", write_tools_json(config), *sources)

    def detect(self, tree: Mapping[str, bytes]) -> int:
        if any(p.startswith(".claude/") for p in tree) or "CLAUDE.md" in tree:
            return 90
        return 50 if ".mcp.json" in tree else 0


# -- shared by the formats -------------------------------------------------------------


LIVE_SERVER = "memagent"
LIVE_CLAUDE_MD = """# Memory: the memagent agent {agent!r}, live

Your long-term memory is not in this folder. It is the memagent agent `{agent}`, served by the
`{server}` MCP server (`.mcp.json` runs `memagent mcp serve {agent}`), and shared with every other
harness that uses the same agent. Use it through that server's tools, never a copy:

- At the start of a task, read the standing instructions with `mcp__{server}__read_file`
  (`file_path: /AGENTS.md`; also the resource `memagent://{agent}/AGENTS.md`) and follow them.
  List the skills with `mcp__{server}__glob` (`pattern: /skills/**`) and read a skill before a
  task it describes.
- Find things with `mcp__{server}__search_memory` (ranked) or `mcp__{server}__grep` (exact text).
- Change memory only with `mcp__{server}__edit_file`, `mcp__{server}__write_file` and
  `mcp__{server}__delete_file`, with a one-line `reason`. Every change is validated and versioned
  (`mcp__{server}__history` shows who changed what). Read a file before you change it; if a change
  is refused because the file changed since you read it, read it again and re-apply your change.
- Standing preferences and corrections belong in /AGENTS.md; a procedure for a kind of task in a
  skill (/skills/<name>.md with frontmatter `name` and `description`). Never store secrets.
- The prompts `remember` and `compact` of the `{server}` server (slash commands) review this
  conversation into memory and tidy memory up.
"""


def export_live(agent: str) -> ExportResult:
    """Claude Code files that use ``agent``'s memory live through ``memagent mcp serve`` (no copy)."""
    result = ExportResult({})
    entry = {"type": "stdio", "command": "memagent", "args": ["mcp", "serve", agent],
             "env": {"MEMAGENT_DB": "${MEMAGENT_DB:-}"}}
    result.add(".mcp.json", dump_json({"mcpServers": {LIVE_SERVER: entry}}))
    result.add("CLAUDE.md", LIVE_CLAUDE_MD.format(agent=agent, server=LIVE_SERVER))
    result.notes.append(Note(".mcp.json", "runs `memagent` from PATH with $MEMAGENT_DB from Claude Code's "
                                          "environment (unset: memagent's default database); start Claude Code "
                                          "where both name this database"))
    return result


def resolve_imports(text: str, where: str, tree: Mapping[str, bytes], used: set[str], notes: list[Note],
                    depth: int) -> str:
    """``text`` with each ``@path`` import (outside code) replaced by that file's content.

    A line that is only an import becomes the imported file itself (so a
    ``CLAUDE.md`` of just ``@AGENTS.md`` gives back AGENTS.md byte for byte);
    paths are relative to the importing file and must stay inside the source.
    """
    base = PurePosixPath(where).parent
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    fenced = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            out.append(line)
            continue
        if fenced or "@" not in line:
            out.append(line)
            continue
        whole = _IMPORT.fullmatch(stripped)
        found = _import_target(whole.group(1), base, tree) if whole else None
        if found is not None and found[1] == "":
            content = _resolved(found[0], tree, used, notes, depth)
            if line.endswith("\n") and not content.endswith("\n") and i < len(lines) - 1:
                content += "\n"
            out.append(content)
            continue
        # Imports inside a sentence stay as written; the files they name follow the line.
        code_free = "".join(p for p in re.split(r"(`[^`]*`)", line) if not p.startswith("`"))
        extra = []
        for m in _IMPORT.finditer(code_free):
            target = _import_target(m.group(1), base, tree)
            if target is None:
                if m.group(1).startswith("~"):
                    notes.append(Note(where, f"imports {m.group(0)} from your home folder; not carried over"))
                continue
            extra.append(_resolved(target[0], tree, used, notes, depth))
        out.append(line)
        for text_ in extra:
            if not out[-1].endswith("\n"):
                out.append("\n")
            out.append("\n" + text_)
    return "".join(out)


def _import_target(ref: str, base: PurePosixPath, tree: Mapping[str, bytes]) -> tuple[str, str] | None:
    """(source path, trailing punctuation not part of it) for an ``@ref``, or None when it is no file here."""
    if ref.startswith(("~", "/")):
        return None
    for cut in range(0, 4):
        head, tail = (ref[: len(ref) - cut], ref[len(ref) - cut:]) if cut else (ref, "")
        if cut and (not head or tail.strip(".,;:") != ""):
            break
        parts: list[str] = []
        for part in (base / head).parts:
            if part == "..":
                if not parts:
                    return None
                parts.pop()
            elif part not in (".", ""):
                parts.append(part)
        target = "/".join(parts)
        if target in tree:
            return target, tail
    return None


def _resolved(target: str, tree: Mapping[str, bytes], used: set[str], notes: list[Note], depth: int) -> str:
    text = decode(tree[target])
    if text is None:
        notes.append(Note(target, "imported from CLAUDE.md but not UTF-8 text; left as a reference"))
        return "@" + target
    if depth >= MAX_IMPORT_DEPTH or target in used:
        used.add(target)
        return text
    used.add(target)
    return resolve_imports(text, target, tree, used, notes, depth + 1)


