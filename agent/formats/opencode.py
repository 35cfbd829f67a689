"""The ``opencode`` format: an OpenCode project folder.

Checked against OpenCode's documentation (opencode.ai/docs, found with the search
tool): rules (``AGENTS.md`` at the project root), skills
(``.opencode/skills/<name>/SKILL.md``), agents (``.opencode/agents/<name>.md``,
frontmatter ``description``, ``mode: primary|subagent|all``, ``model`` as
``provider/model``, ``tools`` mapping tool names or globs to true/false; the
file name is the agent's name), MCP servers (``opencode.json`` ``mcp``:
``{"type": "local", "command": [program, ...args], "environment": {...}}`` or
``{"type": "remote", "url", "headers"}``, each with ``enabled``), tools
(MCP tools are ``<server>_<tool>``; the top-level ``tools`` map turns them off
and on with globs such as ``"<server>_*": false``), ``permission`` (``"ask"``,
``"allow"``, ``"deny"`` per tool) and variables (``{env:NAME}`` in config values).

Invariants: only the tools tools.json lists are enabled (``<server>_*`` off, each
listed tool on); approval tools are ``"ask"``, for the project and for every agent
(an agent's ``permission`` comes after the project's and OpenCode applies the last
matching rule, so an agent-level allow would override the project's ask: agents get
``permission``, never a ``tools`` switch, and their MCP tools carry the project's
action); an agent's ``read`` restates OpenCode's own rules for reading
(``READ_RULES``: a ``.env`` file is asked about), because a bare ``read: allow`` would
come last and let a subagent read ``.env`` without asking while the main agent is
asked (issue #36); ``${VAR}`` becomes ``{env:VAR}``
and back; what OpenCode cannot say (``${VAR:-default}`` defaults, ``cwd``) is
noted.
"""

from __future__ import annotations

import fnmatch
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
from .frontmatter import emit, first_paragraph, read_agent, scalar, subagent_file
from .mcp import (
    REF,
    Tool,
    ToolsConfig,
    args_to_refs,
    literal_to_ref,
    read_tools_json,
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
    warn_unlisted,
)

# memagent tool -> OpenCode tool: only tools OpenCode 1.18.33 has (``opencode debug agent``
# lists them; tests/interop checks it). It has no ``list`` tool: ``glob`` lists a folder.
TO_OPENCODE = {"ls": "glob", "read_file": "read", "write_file": "write", "edit_file": "edit", "glob": "glob",
               "grep": "grep", "task": "task"}
FROM_OPENCODE = {"read": "read_file", "write": "write_file", "edit": "edit_file", "glob": "glob", "grep": "grep",
                 "task": "task", "list": "ls", "patch": "edit_file"}
RESERVED = ("opencode.json", "opencode.jsonc", ".opencode/")
_ENV = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def oc_name(part: str) -> str:
    """OpenCode's form of a server or tool name inside ``<server>_<tool>``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", part)


def to_env(value: str, where: str, notes: list[Note]) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(2) is not None:
            notes.append(Note(where, f"default of ${{{m.group(1)}:-...}} dropped: OpenCode's {{env:...}} has no "
                                     "default"))
        return "{env:" + m.group(1) + "}"

    return REF.sub(sub, value)


def from_env(value: str) -> str:
    return _ENV.sub(lambda m: "${" + m.group(1) + "}", value)


def to_model(model: str) -> str:
    return model if "/" in model else f"anthropic/{model}"


_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}

# OpenCode's own rules for its read tool, in its order (what ``opencode debug agent
# build`` shows for a project that sets none): environment files are asked about. An
# agent's rules come after these and OpenCode applies the last match, so an agent that
# may read gets these patterns, not ``read: allow``, and is asked where the main agent is.
READ_RULES: dict[str, str] = {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"}

Rules = dict[str, "str | dict[str, str]"]


def _emit_agent(pairs: list[tuple[str, Any]], rules: Rules, body: str) -> str:
    """``emit`` with the ``permission`` map last, whose values may be a map of patterns."""
    lines = ["permission:"]
    for key, action in rules.items():
        if isinstance(action, dict):
            lines.append(f"  {scalar(key)}:")
            lines += [f"    {scalar(pattern)}: {scalar(a)}" for pattern, a in action.items()]
        else:
            lines.append(f"  {scalar(key)}: {scalar(action)}")
    head, _, rest = emit(pairs, body).partition("\n---\n")
    return head + "\n" + "\n".join(lines) + "\n---\n" + rest


def bind_agents(result: ExportResult) -> None:
    """Tighten every exported agent's ``permission`` to the project's (``opencode.json``):
    an agent's rules come after the project's and OpenCode applies the last match, so an
    agent rule looser than the project's action for the same tool would loosen it. Call
    after anything that adds project rules (the approval rules do)."""
    config = result.files.get("opencode.json")
    if config is None:
        return
    project = mapping(load_json(config, "opencode.json", []).get("permission"))
    flat = [(k, v) for k, v in project.items() if isinstance(v, str) and v in _STRICTNESS]
    if not flat:
        return
    for path in sorted(result.files):
        if not re.fullmatch(r"\.opencode/agents/[^/]+\.md", path):
            continue
        meta, body = read_agent(result.files[path].decode("utf-8"))
        rules = meta.get("permission")
        if not isinstance(rules, dict):
            continue
        changed = False
        for key, action in list(rules.items()):
            matching = [a for pattern, a in flat if fnmatch.fnmatchcase(key, pattern)]
            if key == "*" or not matching:
                continue
            if isinstance(action, dict):  # a map of path patterns (read): each no looser
                tightened = {p: matching[-1] if a in _STRICTNESS and _STRICTNESS[matching[-1]] > _STRICTNESS[a]
                             else a for p, a in action.items()}
                changed = changed or tightened != action
                rules[key] = tightened
            elif action in _STRICTNESS and _STRICTNESS[matching[-1]] > _STRICTNESS[action]:
                rules[key] = matching[-1]
                changed = True
        if changed:
            pairs = [(k, str(v)) for k, v in meta.items() if k != "permission"]
            result.files[path] = _emit_agent(pairs, rules, body).encode("utf-8")


class OpenCodeFormat:
    name = "opencode"
    title = "OpenCode"

    # -- export ------------------------------------------------------------------

    def export(self, memory: Mapping[str, str], options: ExportOptions) -> ExportResult:
        result = ExportResult({})
        config = read_tools_json(memory["/tools.json"]) if "/tools.json" in memory else ToolsConfig()
        export_layout(memory, result, skills_dir=".opencode/skills", reserved=RESERVED,
                      subagent=lambda path, content: self._export_subagent(path, content, config, result),
                      tools=lambda config: self._export_tools(config, result), config=config)
        return result

    def _export_subagent(self, path: str, content: str, config: ToolsConfig, result: ExportResult) -> None:
        """An agent file whose ``permission`` never loosens the project's: OpenCode applies the
        last matching rule and an agent's rules come after the project's, so an MCP tool the
        project asks for is ``ask`` here too, and one it does not enable is left out."""
        name = PurePosixPath(path).stem
        meta, body = read_agent(content)
        listed = meta.get("tools") if isinstance(meta.get("tools"), list) else None
        rules: Rules = {"*": "deny"}
        for tool in READ_ONLY if listed is None else [str(t) for t in listed]:
            if tool in TO_OPENCODE:
                oc_tool = TO_OPENCODE[tool]
                rules[oc_tool] = dict(READ_RULES) if oc_tool == "read" else "allow"
            elif (parts := split_mcp_name(tool, list(config.servers))) is not None:
                found = config.find(tool)
                if found is None:
                    result.notes.append(Note(path, f"tool {tool} left out: /tools.json does not list it, so the "
                                                   "main agent may not use it either"))
                    continue
                rules[f"{oc_name(parts[0])}_{oc_name(parts[1])}"] = "ask" if found.approval else "allow"
            else:
                result.notes.append(Note(path, f"tool {tool} has no OpenCode equivalent; left out"))
        pairs: list[tuple[str, Any]] = [("description", str(meta.get("description", ""))), ("mode", "subagent")]
        if isinstance(meta.get("model"), str):
            pairs.append(("model", to_model(meta["model"])))
        result.add(f".opencode/agents/{name}.md", _emit_agent(pairs, rules, body), path)

    def _export_tools(self, config: ToolsConfig, result: ExportResult) -> None:
        mcp: dict[str, Any] = {}
        for name, server in config.servers.items():
            where = f"/tools.json mcp_servers.{name}"
            if config.remote(name):
                entry: dict[str, Any] = {"type": "remote", "url": server["url"]}
                if server.get("headers"):
                    entry["headers"] = {k: to_env(v, where, result.notes) for k, v in server["headers"].items()}
            else:
                entry = {"type": "local", "command": [server["command"], *server.get("args", [])]}
                if server.get("env"):
                    entry["environment"] = {k: to_env(v, where, result.notes) for k, v in server["env"].items()}
                if server.get("cwd"):
                    result.notes.append(Note(where, "cwd dropped: OpenCode starts local servers in the project "
                                                    "folder"))
            entry["enabled"] = True
            mcp[name] = entry
        tools: dict[str, bool] = {}
        permission: dict[str, str] = {}
        for name in config.servers:
            tools[f"{oc_name(name)}_*"] = False
        for tool in config.tools:
            key = f"{oc_name(tool.server)}_{oc_name(tool.name)}"
            tools[key] = True
            if tool.approval:
                permission[key] = "ask"
        document: dict[str, Any] = {"$schema": "https://opencode.ai/config.json", "mcp": mcp, "tools": tools}
        if permission:
            document["permission"] = permission
        result.add("opencode.json", dump_json(document), "/tools.json")

    # -- import ------------------------------------------------------------------

    def import_(self, tree: Mapping[str, bytes]) -> ImportResult:
        result = ImportResult({})
        claimed: set[str] = set()
        main = next((p for p in ("AGENTS.md", "CLAUDE.md") if p in tree), None)
        if main is not None and (text := decode(tree[main])) is not None:
            result.add("/AGENTS.md", text, main)
            claimed.add(main)
        for skills_dir in (".opencode/skills", ".opencode/skill"):
            import_skills(tree, skills_dir, result, claimed)
        for src in sorted(tree):
            if re.fullmatch(r"\.opencode/agents?/[^/]+\.md", src):
                claimed.add(src)
                self._import_agent(src, tree[src], result)
        config_src = next((p for p in ("opencode.json", "opencode.jsonc", ".opencode/opencode.json",
                                       ".opencode/opencode.jsonc") if p in tree), None)
        if config_src is not None:
            claimed.add(config_src)
            self._import_config(config_src, tree[config_src], result)
        import_plain(tree, claimed, result)
        return result

    def _import_agent(self, src: str, data: bytes, result: ImportResult) -> None:
        text = decode(data)
        if text is None:
            result.notes.append(Note(src, "not UTF-8 text; not imported"))
            return
        meta, body = read_agent(text)
        self._add_subagent(PurePosixPath(src).stem, meta, body, src, result)

    def _add_subagent(self, stem: str, meta: dict[str, Any], body: str, src: str, result: ImportResult) -> None:
        name = stem if check_name(stem) is None else suggest(stem)
        if name != stem:
            result.notes.append(Note(src, f"name {stem!r} is not a memagent name; imported as {name}"))
        if meta.get("mode") not in ("subagent", None):
            result.notes.append(Note(src, f"a {meta.get('mode')} agent in OpenCode; imported as a subagent"))
        extra = [k for k in meta if k not in ("description", "mode", "model", "tools", "name", "prompt")]
        if extra:
            result.notes.append(Note(src, f"{', '.join(extra)} not carried over (memagent subagents have a "
                                          "description, tools and a model)"))
        switches = meta.get("tools")
        rules = meta.get("permission")
        listed: list[str] | None = None
        if isinstance(rules, dict):
            # A map of path patterns (``read: {"*": allow, "*.env": ask}``) gives the tool.
            listed = [k for k, v in rules.items() if k != "*" and (
                v in ("allow", "ask") or (isinstance(v, dict) and v.get("*") in ("allow", "ask")))]
            if rules.get("*") != "deny":
                result.notes.append(Note(src, "OpenCode leaves its other tools on; memagent gives only those "
                                              "listed"))
        elif isinstance(switches, dict):
            listed = [k for k, v in switches.items() if v is True and k != "*"]
            if switches.get("*") is not False:
                result.notes.append(Note(src, "OpenCode leaves its other tools on; memagent gives only those "
                                              "listed"))
        mapping = dict(FROM_OPENCODE)
        for key in listed or []:
            if key not in mapping and "_" in key:
                server, tool = key.split("_", 1)
                mapping[key] = f"mcp__{server}__{tool}"
        tools = map_tools_in(listed, mapping, src, result.notes, "OpenCode gives it every tool")
        description = text_or(meta.get("description"), "")
        if not description.strip():
            description = first_paragraph(body) or f"The {name} subagent."
            result.notes.append(Note(src, "had no description; one was taken from its prompt"))
        model = meta.get("model")
        model = model.removeprefix("anthropic/") if isinstance(model, str) else None
        result.add(f"/subagents/{name}.md", subagent_file(name, description, tools, model, body), src)

    def _import_config(self, src: str, data: bytes, result: ImportResult) -> None:
        document = load_json(data, src, result.notes)
        if not isinstance(document, dict):
            return
        config = ToolsConfig()
        for name, entry in (document.get("mcp") or {}).items():
            server = self._server(str(name), entry, f"{src} mcp.{name}", result.notes)
            if server is not None:
                config.servers[str(name)] = server
        switches = mapping(document.get("tools"))
        permission = mapping(document.get("permission"))
        by_oc = {oc_name(s): s for s in config.servers}
        for key, on in switches.items():
            if on is not True or "*" in key:
                continue
            for prefix in sorted(by_oc, key=len, reverse=True):
                if key.startswith(prefix + "_") and len(key) > len(prefix) + 1:
                    config.tools.append(Tool(by_oc[prefix], key[len(prefix) + 1:], permission.get(key) == "ask"))
                    break
        for prefix, server_name in by_oc.items():
            if switches.get(f"{prefix}_*") is not False and server_name in config.servers:
                result.notes.append(Note(src, f"server {server_name}: OpenCode leaves all its tools on; memagent lists "
                                              "the ones it may use"))
        warn_unlisted(config, [])
        agents = mapping(document.get("agent"))
        for name, spec in agents.items():
            if isinstance(spec, dict) and isinstance(spec.get("prompt"), str):
                self._add_subagent(str(name), spec, spec["prompt"], f"{src} agent.{name}", result)
        if config.servers or config.tools:
            result.add("/tools.json", write_tools_json(config), src)

    def _server(self, name: str, entry: Any, where: str, notes: list[Note]) -> dict[str, Any] | None:
        if not isinstance(entry, dict):
            notes.append(Note(where, "is not an object; not imported"))
            return None
        if entry.get("enabled") is False:
            notes.append(Note(where, "is disabled in OpenCode; imported anyway"))
        extra = [k for k in entry if k not in ("type", "command", "environment", "url", "headers", "enabled")]
        if extra:
            notes.append(Note(where, f"{', '.join(extra)} not carried over"))
        if entry.get("type") == "remote" and isinstance(entry.get("url"), str):
            server: dict[str, Any] = {"type": "http", "url": entry["url"]}
            if isinstance(entry.get("headers"), dict):
                server["headers"] = {str(k): literal_to_ref(from_env(str(v)), f"{name}_{k}".upper().replace("-", "_"),
                                                            f"{where} headers.{k}", notes)
                                     for k, v in entry["headers"].items()}
            return server
        command = entry.get("command")
        if isinstance(command, str):
            command = [command]
        if entry.get("type") in ("local", None) and isinstance(command, list) and command:
            server = {"command": str(command[0])}
            if len(command) > 1:
                server["args"] = args_to_refs([str(a) for a in command[1:]], name, where, notes)
            if isinstance(entry.get("environment"), dict):
                server["env"] = {str(k): literal_to_ref(from_env(str(v)), str(k), f"{where} environment.{k}", notes)
                                 for k, v in entry["environment"].items()}
            return server
        notes.append(Note(where, "has no usable command or url; not imported"))
        return None

    def detect(self, tree: Mapping[str, bytes]) -> int:
        if any(p in tree for p in ("opencode.json", "opencode.jsonc")) or any(p.startswith(".opencode/")
                                                                            for p in tree):
            return 90
        return 0
