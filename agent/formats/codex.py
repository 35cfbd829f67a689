"""The ``codex`` format: an OpenAI Codex project folder.

Checked against Codex's documentation and source (developers.openai.com/codex,
github.com/openai/codex, found with the search tool): ``AGENTS.md`` at the
project root; skills in ``.agents/skills/<name>/SKILL.md`` (Agent Skills);
custom agents in ``.codex/agents/<name>.toml`` (``name``, ``description``,
``developer_instructions``, optional ``model``); project configuration in
``.codex/config.toml`` (read for trusted projects) with ``[mcp_servers.<name>]``:
stdio ``command``/``args``/``env`` (literal values)/``env_vars`` (names passed
through from the environment)/``cwd``, or streamable HTTP ``url`` with
``bearer_token_env_var``/``http_headers``/``env_http_headers`` (header -> variable
name); ``enabled_tools`` (an allow-list), ``disabled_tools`` and
``[mcp_servers.<name>.tools.<tool>] approval_mode = "prompt"``.

Invariants: ``${VAR}`` values become ``env_vars``/``env_http_headers``/
``bearer_token_env_var`` (Codex has no ``${...}`` expansion), so no secret is
ever written; what Codex cannot say — a default (``:-``), a variable renamed on
the way in, text around a reference, an SSE server, a subagent's tool list or
Claude model — is noted. The TOML is written by hand (stdlib has no writer) and
parses with ``tomllib``.
"""

from __future__ import annotations

import json
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
from .frontmatter import first_paragraph, read_agent, subagent_file
from .mcp import REF, Tool, ToolsConfig, args_to_refs, literal_to_ref, whole_ref, write_tools_json
from .shared import export_layout, import_skills, warn_unlisted

RESERVED = (".codex/", ".agents/")
_BARE = re.compile(r"[A-Za-z0-9_-]+")


# -- TOML writing ------------------------------------------------------------------


def toml_str(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped too)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_multiline(text: str) -> str:
    """A TOML multi-line basic string holding exactly ``text``."""
    out = []
    for ch in text.replace("\\", "\\\\"):
        if ch in "\n\t":
            out.append(ch)
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    body = "".join(out).replace('"""', '""\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    return '"""\n' + body + '"""'


def toml_key(key: str) -> str:
    return key if _BARE.fullmatch(key) else toml_str(key)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return toml_str(str(value))


def toml_table(header: list[str], values: list[tuple[str, Any]]) -> str:
    lines = ["[" + ".".join(toml_key(h) for h in header) + "]"]
    lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in values]
    return "\n".join(lines) + "\n"


class CodexFormat:
    name = "codex"
    title = "Codex"

    # -- export ------------------------------------------------------------------

    def export(self, memory: Mapping[str, str], options: ExportOptions) -> ExportResult:
        result = ExportResult({})
        export_layout(memory, result, skills_dir=".agents/skills", reserved=RESERVED,
                      subagent=lambda path, content: self._export_subagent(path, content, result),
                      tools=lambda config: result.add(".codex/config.toml", self._config(config, result.notes),
                                                      "/tools.json"))
        return result

    def _export_subagent(self, path: str, content: str, result: ExportResult) -> None:
        name = PurePosixPath(path).stem
        meta, body = read_agent(content)
        text = (f"name = {toml_str(name)}\n"
                f"description = {toml_str(str(meta.get('description', '')))}\n"
                f"developer_instructions = {toml_multiline(body)}\n")
        if "tools" in meta:
            result.notes.append(Note(path, "Codex custom agents have no tool list; the tools are not carried"))
        if "model" in meta:
            result.notes.append(Note(path, f"model {meta['model']!r} not written (Codex runs OpenAI models)"))
        result.add(f".codex/agents/{name}.toml", text, path)

    def _config(self, config: ToolsConfig, notes: list[Note]) -> str:
        tables: list[str] = []
        for name, server in config.servers.items():
            where = f"/tools.json mcp_servers.{name}"
            values: list[tuple[str, Any]] = []
            subtables: list[str] = []
            if config.remote(name):
                values.append(("url", server["url"]))
                if server.get("type") == "sse":
                    notes.append(Note(where, "Codex speaks streamable HTTP only; this SSE server may not connect"))
                env_headers: list[tuple[str, Any]] = []
                for header, value in server.get("headers", {}).items():
                    bearer = re.fullmatch(r"Bearer \$\{([A-Za-z_][A-Za-z0-9_]*)\}", value)
                    ref = whole_ref(value)
                    if header.lower() == "authorization" and bearer:
                        values.append(("bearer_token_env_var", bearer.group(1)))
                    elif ref is not None:
                        env_headers.append((header, ref[0]))
                        if ref[1] is not None:
                            notes.append(Note(where, f"header {header}: default dropped (Codex reads it from "
                                                     f"${ref[0]} only)"))
                    else:
                        notes.append(Note(where, f"header {header} is not a single ${{VAR}}; Codex cannot build it "
                                                 "from text and variables, so it is left out"))
                if env_headers:
                    subtables.append(toml_table(["mcp_servers", name, "env_http_headers"], env_headers))
            else:
                values.append(("command", server["command"]))
                if server.get("args"):
                    values.append(("args", server["args"]))
                if server.get("cwd"):
                    values.append(("cwd", server["cwd"]))
                passed: list[str] = []
                for key, value in server.get("env", {}).items():
                    ref = whole_ref(value)
                    if ref is None:
                        notes.append(Note(where, f"env {key} is not a single ${{VAR}}; left out"))
                        continue
                    passed.append(key)
                    if ref[0] != key:
                        notes.append(Note(where, f"env {key} comes from ${ref[0]} in memagent; Codex passes {key} "
                                                 f"through as is, so set {key} in the environment"))
                    if ref[1] is not None:
                        notes.append(Note(where, f"env {key}: default dropped (Codex passes {key} through only)"))
                if passed:
                    values.append(("env_vars", passed))
            values.append(("enabled_tools", [t.name for t in config.tools_of(name)]))
            for tool in config.tools_of(name):
                if tool.approval:
                    subtables.append(toml_table(["mcp_servers", name, "tools", tool.name],
                                                [("approval_mode", "prompt")]))
            tables.append(toml_table(["mcp_servers", name], values) + "".join("\n" + t for t in subtables))
        return "\n".join(tables)

    # -- import ------------------------------------------------------------------

    def import_(self, tree: Mapping[str, bytes]) -> ImportResult:
        result = ImportResult({})
        claimed: set[str] = set()
        if "AGENTS.md" in tree and (text := decode(tree["AGENTS.md"])) is not None:
            result.add("/AGENTS.md", text, "AGENTS.md")
            claimed.add("AGENTS.md")
        for skills_dir in (".agents/skills", ".codex/skills"):
            import_skills(tree, skills_dir, result, claimed)
        for src in sorted(tree):
            if re.fullmatch(r"\.codex/agents/[^/]+\.toml", src):
                claimed.add(src)
                self._import_agent(src, tree[src], result)
        if ".codex/config.toml" in tree:
            claimed.add(".codex/config.toml")
            self._import_config(".codex/config.toml", tree[".codex/config.toml"], result)
        import_plain(tree, claimed, result)
        return result

    def _load(self, src: str, data: bytes, notes: list[Note]) -> dict[str, Any]:
        try:
            return tomllib.loads(decode(data) or "")
        except tomllib.TOMLDecodeError as exc:
            notes.append(Note(src, f"not valid TOML ({exc}); not imported"))
            return {}

    def _import_agent(self, src: str, data: bytes, result: ImportResult) -> None:
        spec = self._load(src, data, result.notes)
        if not spec:
            return
        given = text_or(spec.get("name"), PurePosixPath(src).stem)
        name = given if check_name(given) is None else suggest(given)
        if name != given:
            result.notes.append(Note(src, f"name {given!r} is not a memagent name; imported as {name}"))
        body = spec.get("developer_instructions")
        body = body if isinstance(body, str) else ""
        meta, inner = read_agent(body)
        if meta:
            body = inner
        extra = [k for k in spec if k not in ("name", "description", "developer_instructions")]
        if extra:
            result.notes.append(Note(src, f"{', '.join(extra)} not carried over (memagent subagents have a "
                                          "description, tools and a model)"))
        description = text_or(spec.get("description"), "")
        if not description.strip():
            description = first_paragraph(body) or f"The {name} subagent."
        result.add(f"/subagents/{name}.md", subagent_file(name, description, None, None, body), src)

    def _import_config(self, src: str, data: bytes, result: ImportResult) -> None:
        document = self._load(src, data, result.notes)
        other = [k for k in document if k != "mcp_servers"]
        if other:
            result.notes.append(Note(src, f"Codex settings {', '.join(other)} not carried over"))
        config = ToolsConfig()
        servers = mapping(document.get("mcp_servers"))
        for name, entry in servers.items():
            if isinstance(entry, dict):
                self._server(str(name), entry, f"{src} mcp_servers.{name}", config, result.notes)
        warn_unlisted(config, [])
        if config.servers or config.tools:
            result.add("/tools.json", write_tools_json(config), src)

    def _server(self, name: str, entry: dict[str, Any], where: str, config: ToolsConfig, notes: list[Note]) -> None:
        server: dict[str, Any] = {}
        known = {"command", "args", "cwd", "env", "env_vars", "url", "bearer_token_env_var", "http_headers",
                 "env_http_headers", "enabled_tools", "disabled_tools", "tools", "default_tools_approval_mode",
                 "enabled"}
        extra = [k for k in entry if k not in known]
        if extra:
            notes.append(Note(where, f"{', '.join(extra)} not carried over"))
        if entry.get("enabled") is False:
            notes.append(Note(where, "is disabled in Codex; imported anyway"))
        if isinstance(entry.get("url"), str):
            server = {"type": "http", "url": entry["url"]}
            headers: dict[str, str] = {}
            if isinstance(entry.get("bearer_token_env_var"), str):
                headers["Authorization"] = f"Bearer ${{{entry['bearer_token_env_var']}}}"
            for header, var in (entry.get("env_http_headers") or {}).items():
                headers[str(header)] = f"${{{var}}}"
            for header, value in (entry.get("http_headers") or {}).items():
                headers[str(header)] = literal_to_ref(str(value), f"{name}_{header}".upper().replace("-", "_"),
                                                      f"{where} http_headers.{header}", notes)
            if headers:
                server["headers"] = headers
        elif isinstance(entry.get("command"), str):
            server = {"command": entry["command"]}
            if isinstance(entry.get("args"), list):
                server["args"] = args_to_refs([str(a) for a in entry["args"]], name, where, notes)
            env: dict[str, str] = {}
            for key, value in (entry.get("env") or {}).items():
                env[str(key)] = literal_to_ref(str(value), str(key), f"{where} env.{key}", notes)
            for key in entry.get("env_vars") or []:
                if isinstance(key, str) and REF.fullmatch(f"${{{key}}}"):
                    env.setdefault(key, f"${{{key}}}")
            if env:
                server["env"] = env
            if isinstance(entry.get("cwd"), str):
                server["cwd"] = entry["cwd"]
        else:
            notes.append(Note(where, "has neither command nor url; not imported"))
            return
        config.servers[name] = server
        per_tool = mapping(entry.get("tools"))
        default_ask = entry.get("default_tools_approval_mode") == "prompt"
        enabled = entry.get("enabled_tools")
        if not isinstance(enabled, list):
            notes.append(Note(where, "Codex offers all its tools (no enabled_tools); memagent lists the ones it may "
                                     "use: add them to /tools.json"))
            return
        if entry.get("disabled_tools"):
            notes.append(Note(where, "disabled_tools dropped: memagent lists only the tools it may use"))
        for tool in enabled:
            mode = (per_tool.get(tool) or {}).get("approval_mode") if isinstance(per_tool.get(tool), dict) else None
            config.tools.append(Tool(name, str(tool), mode == "prompt" or (default_ask and mode is None)))

    def detect(self, tree: Mapping[str, bytes]) -> int:
        if any(p.startswith((".codex/", ".agents/skills/")) for p in tree):
            return 90
        return 0
