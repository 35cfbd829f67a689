"""What several harness formats share: the skills layout, JSON and JSONC, ``.mcp.json``-style
server entries, and tool lists mapped in.

Claude Code, Codex, deepagents and OpenCode all keep ``AGENTS.md`` at the root and skills as
``<dir>/<name>/SKILL.md`` folders, and three read MCP servers in ``.mcp.json``'s shape; the
code for that lives here once, each format module keeping only what is its own.
Invariants: a skill's files round-trip (frontmatter restored on export, normalised on
import); a configuration file inside a skill (``config_location``) is never imported; a
harness tool with no memagent equivalent is left out with a note, never silently; a
subagent that lists no tools gets the read-only file tools (``READ_ONLY``, the subagent
file format's default).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from memagent.validators import check_name, config_location
from memagent.validators.subagent import DEFAULT_TOOLS

from .base import ExportResult, ImportResult, Note, decode, export_plain, skill_layout, subagent_paths, suggest
from .frontmatter import export_skill, import_skill
from .mcp import REMOTE_KEYS, STDIO_KEYS, ToolsConfig, args_to_refs, env_name, literal_to_ref, read_tools_json

# A memagent subagent's tools when its file lists none.
READ_ONLY = list(DEFAULT_TOOLS)


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def export_layout(memory: Mapping[str, str], result: ExportResult, *, skills_dir: str,
                  reserved: tuple[str, ...], subagent: Callable[[str, str], None],
                  tools: Callable[[ToolsConfig], None], config: ToolsConfig | None = None) -> None:
    """What every harness layout shares: ``AGENTS.md`` at the root, skills under
    ``skills_dir``, each subagent and ``/tools.json`` through the format's own hooks
    (``config``, when given, is the already read ``/tools.json``), and every other
    file as a plain file outside the format's ``reserved`` paths."""
    claimed: set[str] = set()
    if "/AGENTS.md" in memory:
        result.add("AGENTS.md", memory["/AGENTS.md"], "/AGENTS.md")
        claimed.add("/AGENTS.md")
    export_skills(memory, skills_dir, result, claimed)
    for path in subagent_paths(memory):
        subagent(path, memory[path])
        claimed.add(path)
    if "/tools.json" in memory:
        tools(config if config is not None else read_tools_json(memory["/tools.json"]))
        claimed.add("/tools.json")
    export_plain(memory, claimed, result, reserved)


def export_skills(memory: Mapping[str, str], skills_dir: str, result: ExportResult, claimed: set[str]) -> None:
    """Every skill as ``<skills_dir>/<name>/SKILL.md`` plus its files, frontmatter restored."""
    for name, files in skill_layout(memory).items():
        for path, inner in files:
            content = memory[path]
            if inner == "SKILL.md":
                content = export_skill(content)
            result.add(f"{skills_dir}/{name}/{inner}", content, path)
            claimed.add(path)


def import_skills(tree: Mapping[str, bytes], skills_dir: str, result: ImportResult, claimed: set[str]) -> None:
    """``<skills_dir>/<name>/...`` back into ``/skills/<name>/...``, skill frontmatter normalised."""
    prefix = skills_dir + "/"
    for src in sorted(tree):
        if not src.startswith(prefix):
            continue
        claimed.add(src)
        rest = src[len(prefix):]
        if (reader := config_location(f"/skills/{rest}")) is not None:
            # A skill's .gitattributes or .envrc: memory holds none (the write rule, at any depth).
            result.notes.append(Note(src, f"not imported: it is configuration read by {reader}, and memory "
                                          "holds none"))
            continue
        text = decode(tree[src])
        if text is None:
            result.notes.append(Note(src, "binary file not imported (memory holds UTF-8 text only)"))
            continue
        if "/" not in rest:
            if rest.endswith(".md"):
                stem = rest[:-3]
                name = stem if check_name(stem) is None else suggest(stem)
                content, notes = import_skill(name, text, src)
                result.notes += notes
                result.add(f"/skills/{name}.md", content, src)
            else:
                result.add(f"/skills/{rest}", text, src)
            continue
        folder, inner = rest.split("/", 1)
        name = folder if check_name(folder) is None else suggest(folder)
        if inner == "SKILL.md":
            if name != folder:
                result.notes.append(Note(src, f"folder name {folder!r} is not a skill name; imported as {name}"))
            content, notes = import_skill(name, text, src)
            result.notes += notes
            result.add(f"/skills/{name}/SKILL.md", content, src)
        else:
            result.add(f"/skills/{name}/{inner}", text, src)


def map_tools_in(listed: list[str] | None, mapping: Mapping[str, str], src: str, notes: list[Note],
                 default_means: str) -> list[str] | None:
    """A harness's tool list as memagent tool names; None (the read-only default) when none are listed."""
    if listed is None:
        notes.append(Note(src, f"lists no tools: {default_means}; memagent gives it the read-only file tools"))
        return None
    tools: list[str] = []
    for tool in listed:
        mapped = mapping.get(tool, tool if tool.startswith("mcp__") else None)
        if mapped is None:
            notes.append(Note(src, f"tool {tool!r} has no memagent equivalent; left out"))
        elif mapped not in tools:
            tools.append(mapped)
    return None if sorted(tools) == sorted(READ_ONLY) else tools


def load_json(data: bytes, src: str, notes: list[Note]) -> Any:
    text = decode(data)
    try:
        return json.loads(strip_jsonc(text or ""))
    except json.JSONDecodeError as exc:
        notes.append(Note(src, f"not valid JSON ({exc.msg}, line {exc.lineno}); not imported"))
        return {}


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (JSONC, as opencode.jsonc allows) as plain JSON."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end == -1 else end + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def server_from_mcp_json(name: str, entry: Any, where: str, notes: list[Note]) -> dict[str, Any] | None:
    """A ``.mcp.json``-style server entry as memagent stores it (unknown keys noted and left out)."""
    if not isinstance(entry, dict):
        notes.append(Note(where, "is not an object; not imported"))
        return None
    kind = entry.get("type")
    remote = kind in ("http", "sse", "streamable-http") or ("url" in entry and "command" not in entry)
    if kind not in (None, "stdio", "http", "sse", "streamable-http"):
        notes.append(Note(where, f"transport {kind!r} is not one memagent knows (stdio, http, sse); not imported"))
        return None
    keys = REMOTE_KEYS if remote else STDIO_KEYS
    server: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "type":
            server["type"] = "http" if value == "streamable-http" else value
        elif key not in keys:
            notes.append(Note(where, f"setting {key!r} not carried over (memagent servers have "
                                     f"{', '.join(('type', *keys))})"))
        elif key in ("env", "headers") and isinstance(value, dict):
            server[key] = {str(k): literal_to_ref(str(v), str(k) if key == "env" else env_name(name, str(k)),
                                                  f"{where} {key}.{k}", notes) for k, v in value.items()}
        elif key == "args" and isinstance(value, list):
            server[key] = args_to_refs([str(a) for a in value], name, where, notes)
        elif isinstance(value, str):
            server[key] = value
    if remote and "type" not in server:
        server = {"type": "http", **server}
    return server


def warn_unlisted(config: ToolsConfig, notes: list[Note]) -> None:
    for server in config.servers:
        if not config.tools_of(server):
            notes.append(Note("/tools.json", f"server {server}: the harness offers all its tools, memagent lists "
                                             "them one by one; add the ones to use to /tools.json"))
