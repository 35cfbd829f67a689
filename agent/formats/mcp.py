"""``/tools.json`` across harnesses: reading ours, writing ours, and ``${VAR}`` values.

Our shape (``validators/tools_schema.py``): ``{"mcp_servers": {name: entry},
"tools": [{"server", "name", "approval"?}]}`` with ``.mcp.json``-style entries.
Invariants:

- ``write_tools_json`` is the one canonical text of a tools.json an import
  makes: two-space indented JSON, keys in the order given, a final newline.
- Secrets never enter memory: a literal env or header value found in another
  harness's config becomes a ``${VAR}`` reference (``${VAR:-value}`` for a
  harmless setting; a credential-looking value is dropped for ``${VAR}`` with a
  note), because memagent refuses literal values there. The same goes for a
  credential in ``args`` (``--password X``, ``--api-key=X``, a token on its own):
  ``args_to_refs`` puts a ``${VAR}`` in its place, with the same note; which
  arguments count is the tools.json validator's ``secret_args``, so what import
  writes always passes the validator.
- MCP tool names are ``mcp__<server>__<tool>`` everywhere a harness uses them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from memagent.validators import scan_secrets
from memagent.validators.tools_rules import secret_args

from .base import FormatError, Note

REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
STDIO_KEYS = ("command", "args", "env", "cwd")
REMOTE_KEYS = ("url", "headers")
_TOKENISH = re.compile(r"[A-Za-z0-9_+/=.-]{20,}")


@dataclass
class Tool:
    server: str
    name: str
    approval: bool = False


@dataclass
class ToolsConfig:
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    tools: list[Tool] = field(default_factory=list)

    def remote(self, server: str) -> bool:
        return self.servers.get(server, {}).get("type", "stdio") in ("http", "sse")

    def tools_of(self, server: str) -> list[Tool]:
        return [t for t in self.tools if t.server == server]

    def find(self, qualified: str) -> Tool | None:
        for t in self.tools:
            if mcp_name(t.server, t.name) == qualified:
                return t
        return None


def read_tools_json(text: str) -> ToolsConfig:
    """Our tools.json, as stored (it passed the validator when it was written)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"/tools.json is not valid JSON ({exc.msg}, line {exc.lineno}); "
                          "fix it first (`memagent validate`)") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcp_servers", {}), dict):
        raise FormatError("/tools.json does not have the memagent shape; fix it first (`memagent validate`)")
    config = ToolsConfig({str(k): dict(v) for k, v in data.get("mcp_servers", {}).items() if isinstance(v, dict)})
    for item in data.get("tools", []):
        if isinstance(item, dict) and isinstance(item.get("server"), str) and isinstance(item.get("name"), str):
            config.tools.append(Tool(item["server"], item["name"], item.get("approval") is True))
    return config


def write_tools_json(config: ToolsConfig) -> str:
    tools: list[dict[str, Any]] = []
    for t in config.tools:
        entry: dict[str, Any] = {"server": t.server, "name": t.name}
        if t.approval:
            entry["approval"] = True
        tools.append(entry)
    return json.dumps({"mcp_servers": config.servers, "tools": tools}, indent=2, ensure_ascii=False) + "\n"


def mcp_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


def split_mcp_name(name: str, servers: list[str] | None = None) -> tuple[str, str] | None:
    """(server, tool) of ``mcp__server__tool``; with ``servers``, the longest matching server wins."""
    if not name.startswith("mcp__"):
        return None
    rest = name[len("mcp__"):]
    if servers:
        for server in sorted(servers, key=len, reverse=True):
            if rest.startswith(server + "__") and len(rest) > len(server) + 2:
                return server, rest[len(server) + 2:]
    if "__" not in rest:
        return None
    server, tool = rest.split("__", 1)
    return (server, tool) if server and tool else None


def whole_ref(value: str) -> tuple[str, str | None] | None:
    """(VAR, default) when ``value`` is exactly one ``${VAR}`` or ``${VAR:-default}``."""
    m = REF.fullmatch(value)
    return (m.group(1), m.group(2)) if m else None


def env_name(*parts: str) -> str:
    """An environment variable name made of ``parts``: ``docs``, ``X-Api-Key`` -> ``DOCS_X_API_KEY``."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper()
    return name if name and not name[0].isdigit() else f"MCP_{name}"


def looks_secret(value: str) -> bool:
    if scan_secrets(value):
        return True
    for run in _TOKENISH.findall(value):
        if re.search(r"[A-Z]", run) and re.search(r"[a-z]", run) and re.search(r"[0-9]", run):
            return True
    return bool(re.search(r"\b[0-9a-fA-F]{32,}\b", value))


def literal_to_ref(value: str, var: str, where: str, notes: list[Note]) -> str:
    """A value from another harness's config as memagent may store it (always a ``${...}`` reference)."""
    if "${" in value and not REF.sub("", value).count("$"):
        return value  # already references variables
    m = re.fullmatch(r"(Bearer|Basic|Token)\s+(.+)", value)
    if m and not REF.search(value):
        scheme, secret = m.groups()
        notes.append(Note(where, f"the literal credential was not imported: set ${var} in the environment"))
        return f"{scheme} ${{{var}}}"
    if looks_secret(value) or "}" in value or "$" in value:
        notes.append(Note(where, f"the literal value was not imported (memory never holds secrets): "
                                 f"set ${var} in the environment"))
        return f"${{{var}}}"
    return f"${{{var}:-{value}}}"


def args_to_refs(args: list[str], server: str, where: str, notes: list[Note]) -> list[str]:
    """``args`` with each literal credential replaced by a ``${VAR}`` reference (and a note)."""
    out = list(args)
    used: set[str] = set()
    for i, keep, name in secret_args(out):
        var = env_name(server, name)
        var = var if var not in used else f"{var}_{i}"
        used.add(var)
        out[i] = f"{keep}${{{var}}}"
        notes.append(Note(f"{where} args[{i}]", f"the literal value was not imported (memory never holds secrets): "
                                                f"set ${var} in the environment"))
    return out
