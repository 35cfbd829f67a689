"""``/tools.json`` as values: server specs, the allowed tools, and ``${VAR}`` expansion.

Pure: nothing here reads files, the environment or the network; the environment
is passed in. Invariants:
- ``parse_tools_json`` never raises for any text: a file that fails its validator
  gives a config with no servers and the first problem in ``error``.
- ``expand`` follows the shell: ``${VAR}`` is the variable's value, ``${VAR:-d}``
  is ``d`` when the variable is unset or empty. A variable that is unset and has
  no default expands to "" and is reported by name, so the caller can warn.
- A spec's ``key()`` is the same exactly when the expanded connection settings
  are the same, so a session reconnects a server only when its settings changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memagent.validators import validate

TOOLS_PATH = "/tools.json"
Transport = Literal["stdio", "http", "sse"]
_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def tool_name(server: str, tool: str) -> str:
    """The name the model calls: Claude Code's ``mcp__<server>__<tool>``."""
    return f"mcp__{server}__{tool}"


def expand(value: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """``value`` with its ``${VAR}`` references expanded from ``env``, and the names of
    variables that were unset and had no default."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        got = env.get(name)
        if default is not None:
            return got if got else default
        if got is None:
            missing.append(name)
            return ""
        return got

    return _REF.sub(sub, value), missing


@dataclass(frozen=True)
class ServerSpec:
    """One server as ``/tools.json`` declares it (references not yet expanded)."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        """A short description for people: the command line or the URL (the transport is shown beside it)."""
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return self.url

    def resolve(self, env: Mapping[str, str]) -> ResolvedSpec:
        """The spec with every reference expanded; the missing variables are listed."""
        missing: list[str] = []

        def x(value: str) -> str:
            out, miss = expand(value, env)
            missing.extend(m for m in miss if m not in missing)
            return out

        return ResolvedSpec(
            self, command=x(self.command), args=tuple(x(a) for a in self.args),
            env=tuple((k, x(v)) for k, v in self.env), cwd=x(self.cwd) if self.cwd else None,
            url=x(self.url), headers=tuple((k, x(v)) for k, v in self.headers), missing=tuple(missing))


@dataclass(frozen=True)
class ResolvedSpec:
    """A spec ready to connect: references expanded (secrets inside; never log it)."""

    spec: ServerSpec
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name

    def key(self) -> tuple[Any, ...]:
        return (self.spec.transport, self.command, self.args, self.env, self.cwd, self.url, self.headers)


@dataclass(frozen=True)
class ToolRule:
    """One entry of ``tools``: a tool of a server the agent may use."""

    server: str
    name: str
    approval: bool = False

    @property
    def qualified(self) -> str:
        return tool_name(self.server, self.name)


@dataclass(frozen=True)
class ToolsConfig:
    servers: dict[str, ServerSpec] = field(default_factory=dict)
    tools: tuple[ToolRule, ...] = ()
    error: str = ""  # why the file could not be used (it is then treated as empty)

    def rules_for(self, server: str) -> list[ToolRule]:
        return [t for t in self.tools if t.server == server]


def _pairs(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict):
        return ()
    return tuple((str(k), str(v)) for k, v in raw.items())


def _server(name: str, raw: dict[str, Any]) -> ServerSpec:
    kind = raw.get("type", "stdio")
    transport: Transport = kind if kind in ("http", "sse") else "stdio"
    args = raw.get("args")
    return ServerSpec(
        name=name, transport=transport, command=str(raw.get("command", "")),
        args=tuple(str(a) for a in args) if isinstance(args, list) else (),
        env=_pairs(raw.get("env")), cwd=str(raw["cwd"]) if raw.get("cwd") else None,
        url=str(raw.get("url", "")), headers=_pairs(raw.get("headers")))


def parse_tools_json(content: str | None) -> ToolsConfig:
    """The config a ``/tools.json`` text declares; ``None`` (no file) is an empty config."""
    if content is None:
        return ToolsConfig()
    problems = validate(TOOLS_PATH, content)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return ToolsConfig(error=f"{TOOLS_PATH} is not valid: {first.location}: {first.message}{more}")
    data = json.loads(content)
    servers = {name: _server(name, raw) for name, raw in data["mcp_servers"].items()}
    tools = tuple(ToolRule(t["server"], t["name"], bool(t.get("approval", False))) for t in data["tools"])
    return ToolsConfig(servers, tools)
