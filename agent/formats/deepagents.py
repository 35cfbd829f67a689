"""The ``deepagents`` format: a Deep Agents / LangSmith Agent Builder project.

Checked against LangChain's documentation (found with the search tool):
docs.langchain.com/langsmith/managed-deep-agents-cli ("Project file reference":
``agent.json``, ``AGENTS.md``, ``tools.json``, ``skills/<name>/SKILL.md``,
``subagents/<name>/agent.json`` with ``description`` and ``model``,
``subagents/<name>/AGENTS.md``, ``subagents/<name>/tools.json``; tools.json is
``{"tools": [{"name", "mcp_server_url", "mcp_server_name"?, "display_name"?}],
"interrupt_config": {"<mcp_server_url>::<tool_name>": true}}``, and credentials
belong to the workspace's registered MCP server, not the file) and
docs.langchain.com/oss/deepagents/deploy (``deepagents deploy``: ``mcp.json``
with HTTP/SSE servers only, "stdio transports are rejected at bundle time";
``subagents/<name>/deepagents.toml`` with ``[agent]`` name/description/model).
Agent Builder's download is a zip of the same tree.

Invariants: remote servers' tools go to ``tools.json`` with approval tools in
``interrupt_config``; stdio servers, which that shape cannot name, go to a
``.mcp.json`` beside it with a note; request headers (credentials) are noted,
never written; models are ``provider:model`` there (``anthropic:`` added and
removed). ``deepagents deploy`` (the ``deepagents-cli`` package) bundles only
``agent.json``, ``AGENTS.md``, ``tools.json``, ``skills/<name>/`` folders with a
``SKILL.md`` and ``subagents/<name>/`` (its ``agent.json``, ``AGENTS.md``,
``tools.json``, ``skills/``): every other exported file (``knowledge/*.md``, plain
notes) gets a note saying deploy will not pick it up (``not_deployed``); it stays in
the folder for ``memagent import``. tests/interop/test_deepagents_deploy.py checks
both against the real ``deploy --dry-run``.
"""

from __future__ import annotations

import re
import tomllib
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
from .frontmatter import first_paragraph, read_agent, subagent_file, tool_list
from .mcp import Tool, ToolsConfig, mcp_name, read_tools_json, split_mcp_name, write_tools_json
from .shared import (
    READ_ONLY,
    dump_json,
    export_layout,
    import_skills,
    load_json,
    server_from_mcp_json,
    warn_unlisted,
)

SUBAGENT_FILES = ("agent.json", "AGENTS.md", "tools.json")  # what deploy reads in subagents/<name>/
RESERVED = ("agent.json", "deepagents.toml", "tools.json", "mcp.json", ".mcp.json")
FILE_TOOLS = ("ls", "read_file", "write_file", "edit_file", "glob", "grep")  # deepagents' built-in tools
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def to_model(model: str) -> str:
    return model if ":" in model else f"anthropic:{model}"


def from_model(model: str) -> str:
    return model.removeprefix("anthropic:")


def not_deployed(files: Mapping[str, bytes]) -> list[str]:
    """The exported paths ``deepagents deploy`` leaves out of its bundle, in path order (dot
    files, ``.mcp.json`` and the manifest, are the export's own and have their own notes).

    As deploy reads a project: the three top files; every file of a ``skills/<name>/`` folder
    that has a ``SKILL.md``; a subagent folder's three files and every file below its own
    ``skills/``; never a name starting with a dot."""
    def deployed(path: str) -> bool:
        parts = path.split("/")
        if any(part.startswith(".") for part in parts):
            return False
        if len(parts) == 1:
            return path in ("agent.json", "AGENTS.md", "tools.json")
        if parts[0] == "skills" and len(parts) >= 3:
            return f"skills/{parts[1]}/SKILL.md" in files
        if parts[0] == "subagents" and len(parts) >= 3 and f"subagents/{parts[1]}/AGENTS.md" in files:
            return parts[2] in SUBAGENT_FILES if len(parts) == 3 else parts[2] == "skills"
        return False

    return sorted(p for p in files if not p.startswith(".") and not deployed(p))


class DeepAgentsFormat:
    name = "deepagents"
    title = "Deep Agents / Agent Builder"

    # -- export ------------------------------------------------------------------

    def export(self, memory: Mapping[str, str], options: ExportOptions) -> ExportResult:
        result = ExportResult({})
        result.add("agent.json", dump_json({"name": options.agent}))
        # Subagents need the servers too, so /tools.json is read before them.
        config = read_tools_json(memory["/tools.json"]) if "/tools.json" in memory else ToolsConfig()
        export_layout(memory, result, skills_dir="skills", reserved=RESERVED, config=config,
                      subagent=lambda path, content: self._export_subagent(path, content, config, result),
                      tools=lambda config: self._export_tools(config, result))
        for out in not_deployed(result.files):
            sources = sorted(result.origins.get(out, set())) or [out]
            result.notes.append(Note(sources[0], f"exported as {out}, which `deepagents deploy` does not pick up (it "
                                                 "bundles agent.json, AGENTS.md, tools.json, skills/ and subagents/ "
                                                 "only); the file stays in the folder for `memagent import`"))
        return result

    def _export_subagent(self, path: str, content: str, config: ToolsConfig, result: ExportResult) -> None:
        name = PurePosixPath(path).stem
        meta, body = read_agent(content)
        spec: dict[str, Any] = {"description": str(meta.get("description", ""))}
        if isinstance(meta.get("model"), str):
            spec["model"] = to_model(meta["model"])
        result.add(f"subagents/{name}/agent.json", dump_json(spec), path)
        result.add(f"subagents/{name}/AGENTS.md", body, path)
        listed = tool_list(meta.get("tools"))
        file_tools = [t for t in (READ_ONLY if listed is None else listed) if not t.startswith("mcp__")]
        if listed is not None and sorted(file_tools) != sorted(FILE_TOOLS):
            result.notes.append(Note(path, "deepagents gives every subagent its built-in file tools; the "
                                           f"limit to {', '.join(file_tools) or 'no file tools'} is not carried"))
        wanted = ToolsConfig(config.servers)
        for tool in listed or []:
            parts = split_mcp_name(tool, list(config.servers))
            if parts is None:
                continue
            found = config.find(tool)
            wanted.tools.append(Tool(parts[0], parts[1], found.approval if found else False))
        result.add(f"subagents/{name}/tools.json", self._tools_file(wanted, path, result.notes), path)

    def _tools_file(self, config: ToolsConfig, path: str, notes: list[Note]) -> str:
        tools: list[dict[str, Any]] = []
        interrupts: dict[str, bool] = {}
        for tool in config.tools:
            server = config.servers.get(tool.server, {})
            if not config.remote(tool.server):
                notes.append(Note(path, f"tool {mcp_name(tool.server, tool.name)} is on a stdio server, which "
                                        "deepagents cannot run; left out of tools.json"))
                continue
            url = server["url"]
            tools.append({"name": tool.name, "mcp_server_url": url, "mcp_server_name": tool.server,
                          "display_name": tool.name})
            if tool.approval:
                interrupts[f"{url}::{tool.name}"] = True
        return dump_json({"tools": tools, "interrupt_config": interrupts})

    def _export_tools(self, config: ToolsConfig, result: ExportResult) -> None:
        result.add("tools.json", self._tools_file(config, "/tools.json", result.notes), "/tools.json")
        stdio = {name: entry for name, entry in config.servers.items() if not config.remote(name)}
        for name, entry in config.servers.items():
            if config.remote(name) and entry.get("headers"):
                result.notes.append(Note("/tools.json", f"server {name}: headers are not written (deepagents keeps "
                                                        "credentials with the registered server: `deepagents "
                                                        "mcp-servers add --url ... --header ...`)"))
            if config.remote(name) and not config.tools_of(name):
                result.notes.append(Note("/tools.json", f"server {name} lists no tools; tools.json can only name "
                                                        "tools, so it is not mentioned there"))
        if stdio:
            result.add(".mcp.json", dump_json({"mcpServers": stdio}), "/tools.json")
            result.notes.append(Note("/tools.json", f"stdio server(s) {', '.join(stdio)} written to .mcp.json: the "
                                                    "deepagents tools.json names remote (HTTP) servers only, and "
                                                    "deploys reject stdio; run them behind HTTP to deploy"))

    # -- import ------------------------------------------------------------------

    def import_(self, tree: Mapping[str, bytes]) -> ImportResult:
        result = ImportResult({})
        claimed: set[str] = set()
        if "AGENTS.md" in tree and (text := decode(tree["AGENTS.md"])) is not None:
            result.add("/AGENTS.md", text, "AGENTS.md")
            claimed.add("AGENTS.md")
        for src in ("agent.json", "deepagents.toml"):
            if src in tree:
                claimed.add(src)
                self._note_agent_settings(src, tree[src], result.notes)
        import_skills(tree, "skills", result, claimed)
        config = self._import_tools(tree, result, claimed)
        for name in sorted({p.split("/")[1] for p in tree if p.startswith("subagents/") and p.count("/") >= 2}):
            self._import_subagent(name, tree, config, result, claimed)
        if config.servers or config.tools:
            result.add("/tools.json", write_tools_json(config), *sorted(claimed & {"tools.json", ".mcp.json",
                                                                               "mcp.json"}))
        import_plain(tree, claimed, result)
        return result

    def _note_agent_settings(self, src: str, data: bytes, notes: list[Note]) -> None:
        settings: Any = {}
        if src.endswith(".json"):
            settings = load_json(data, src, notes)
        else:
            try:
                settings = tomllib.loads(decode(data) or "").get("agent", {})
            except tomllib.TOMLDecodeError:
                notes.append(Note(src, "not valid TOML; not imported"))
        extra = [k for k in mapping(settings) if k not in ("name", "description")]
        if extra:
            notes.append(Note(src, f"{', '.join(extra)} not carried over (memagent sets the model with "
                                   "`memagent chat --model`; it has no backend or sandbox settings)"))

    def _import_tools(self, tree: Mapping[str, bytes], result: ImportResult, claimed: set[str]) -> ToolsConfig:
        config = ToolsConfig()
        for src in (".mcp.json", "mcp.json"):
            if src in tree:
                claimed.add(src)
                data = load_json(tree[src], src, result.notes)
                for name, entry in mapping(mapping(data).get("mcpServers")).items():
                    server = server_from_mcp_json(str(name), entry, f"{src} {name}", result.notes)
                    if server is not None and str(name) not in config.servers:
                        config.servers[str(name)] = server
        if "tools.json" in tree:
            data = load_json(tree["tools.json"], "tools.json", result.notes)
            if isinstance(data, dict) and "mcp_servers" in data:
                return config  # our own shape: a plain file, imported as it is
            claimed.add("tools.json")
            self._read_tools(data, "tools.json", config, result.notes)
        warn_unlisted(config, result.notes)
        return config

    def _read_tools(self, data: Any, src: str, config: ToolsConfig, notes: list[Note]) -> list[str]:
        """Add a deepagents tools.json to ``config``; returns the tools' memagent names."""
        names: list[str] = []
        if not isinstance(data, dict):
            return names
        interrupts = mapping(data.get("interrupt_config"))
        for item in data.get("tools") or []:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                    or not isinstance(item.get("mcp_server_url"), str):
                notes.append(Note(src, f"tool entry {item!r} lacks name or mcp_server_url; not imported"))
                continue
            url, tool = item["mcp_server_url"], item["name"]
            server = self._server_for(url, item.get("mcp_server_name"), config)
            approval = any(v is True and (k == f"{url}::{tool}" or k.startswith(f"{url}::{tool}::"))
                           for k, v in interrupts.items())
            qualified = mcp_name(server, tool)
            if config.find(qualified) is None:
                config.tools.append(Tool(server, tool, approval))
            names.append(qualified)
        return names

    def _server_for(self, url: str, given: Any, config: ToolsConfig) -> str:
        for name, entry in config.servers.items():
            if entry.get("url") == url:
                return name
        base = given if isinstance(given, str) and SERVER_NAME.fullmatch(given) else \
            re.sub(r"[^A-Za-z0-9_-]+", "-", re.sub(r"^https?://", "", url)).strip("-")[:60] or "server"
        name, n = base, 2
        while name in config.servers:
            name, n = f"{base}-{n}", n + 1
        config.servers[name] = {"type": "http", "url": url}
        return name

    def _import_subagent(self, folder: str, tree: Mapping[str, bytes], config: ToolsConfig, result: ImportResult,
                         claimed: set[str]) -> None:
        prefix = f"subagents/{folder}/"
        name = folder if check_name(folder) is None else suggest(folder)
        if name != folder:
            result.notes.append(Note(prefix, f"folder name {folder!r} is not a subagent name; imported as {name}"))
        prompt_src = prefix + "AGENTS.md"
        if prompt_src not in tree or (prompt := decode(tree[prompt_src])) is None:
            return  # not a subagent: its files are plain files
        used = [prompt_src]
        meta, body = read_agent(prompt)
        spec: dict[str, Any] = dict(meta)
        if prefix + "agent.json" in tree:
            used.append(prefix + "agent.json")
            data = load_json(tree[prefix + "agent.json"], prefix + "agent.json", result.notes)
            spec.update(mapping(data))
        if prefix + "deepagents.toml" in tree:
            used.append(prefix + "deepagents.toml")
            try:
                spec.update(tomllib.loads(decode(tree[prefix + "deepagents.toml"]) or "").get("agent", {}))
            except tomllib.TOMLDecodeError:
                result.notes.append(Note(prefix + "deepagents.toml", "not valid TOML; not imported"))
        tools: list[str] | None = None
        for src in (prefix + "tools.json", prefix + "mcp.json"):
            if src not in tree:
                continue
            used.append(src)
            data = load_json(tree[src], src, result.notes)
            if src.endswith("tools.json"):
                listed = self._read_tools_for_subagent(data, src, config, result.notes)
            else:
                listed = []
                for sname, entry in mapping(mapping(data).get("mcpServers")).items():
                    server = server_from_mcp_json(str(sname), entry, f"{src} {sname}", result.notes)
                    if server is not None:
                        config.servers.setdefault(str(sname), server)
                result.notes.append(Note(src, "servers added to /tools.json; list their tools in the subagent"))
            if listed:
                tools = [*READ_ONLY, *listed]
        if tools is not None:
            result.notes.append(Note(prefix, "deepagents subagents have built-in file tools; imported with the "
                                             "read-only ones"))
        claimed.update(used)
        description = text_or(spec.get("description"), "")
        if not description.strip():
            description = first_paragraph(body) or f"The {name} subagent."
            result.notes.append(Note(prefix, "had no description; one was taken from its prompt"))
        model = spec.get("model") or spec.get("model_id")
        model = from_model(model) if isinstance(model, str) else None
        result.add(f"/subagents/{name}.md", subagent_file(name, description, tools, model, body), *used)
        for src in sorted(tree):
            if src.startswith(prefix + "skills/"):
                result.notes.append(Note(src, "memagent subagents have no skills of their own; kept as a file"))

    def _read_tools_for_subagent(self, data: Any, src: str, config: ToolsConfig, notes: list[Note]) -> list[str]:
        before = list(config.tools)
        names = self._read_tools(data, src, config, notes)
        config.tools = before  # the main agent's list stays as its own tools.json says
        return names

    def detect(self, tree: Mapping[str, bytes]) -> int:
        score = 0
        if "agent.json" in tree or "deepagents.toml" in tree:
            score += 60
        tools = tree.get("tools.json", b"")
        if b"interrupt_config" in tools or b"mcp_server_url" in tools:
            score += 40
        if any(re.fullmatch(r"subagents/[^/]+/AGENTS\.md", p) for p in tree):
            score += 40
        if "AGENTS.md" in tree and any(re.fullmatch(r"skills/[^/]+/SKILL\.md", p) for p in tree):
            score += 15
        return min(score, 95)

