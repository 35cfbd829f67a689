"""The JSON Schema of ``/tools.json`` (draft 2020-12), as a Python dict.

Invariants:
- The schema checks shapes and types only and uses no combinators (oneOf,
  anyOf...): each jsonschema error then points at one concrete place and can be
  turned into one actionable sentence. Rules that relate fields to each other
  (stdio vs remote, declared servers, unique tool names, ``${VAR}`` values)
  live in ``tools_json.py``.
- Server entries have the shape of ``.mcp.json`` entries, so files round-trip
  with Claude Code and similar harnesses.
"""

from __future__ import annotations

from typing import Any

# Server names end up inside tool names such as mcp__<server>__<tool>, which the
# model API restricts to letters, digits, "_" and "-".
SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
# MCP's guidance for tool names: 1-128 characters of letters, digits, "_", "-", ".".
TOOL_NAME = r"^[A-Za-z0-9_.-]{1,128}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"

STDIO_KEYS = ("command", "args", "env", "cwd")
REMOTE_KEYS = ("url", "headers")

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["mcp_servers", "tools"],
    "additionalProperties": False,
    "properties": {
        "mcp_servers": {
            "type": "object",
            "propertyNames": {"pattern": SERVER_NAME},
            "additionalProperties": {"$ref": "#/$defs/server"},
        },
        "tools": {"type": "array", "items": {"$ref": "#/$defs/tool"}},
    },
    "$defs": {
        "server": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "type": {"enum": ["stdio", "http", "sse"]},
                "command": {"type": "string", "minLength": 1},
                "args": {"type": "array", "items": {"type": "string"}},
                "env": {
                    "type": "object",
                    "propertyNames": {"pattern": ENV_NAME},
                    "additionalProperties": {"type": "string"},
                },
                "cwd": {"type": "string", "minLength": 1},
                "url": {"type": "string", "minLength": 1},
                "headers": {
                    "type": "object",
                    "propertyNames": {"pattern": HEADER_NAME},
                    "additionalProperties": {"type": "string"},
                },
            },
        },
        "tool": {
            "type": "object",
            "additionalProperties": False,
            "required": ["server", "name"],
            "properties": {
                "server": {"type": "string", "minLength": 1},
                "name": {"type": "string", "pattern": TOOL_NAME},
                "approval": {"type": "boolean"},
            },
        },
    },
}

# What each place in the document is, for messages ("a server", "a tool entry").
ALLOWED_KEYS: dict[str, tuple[str, ...]] = {
    "top": ("mcp_servers", "tools"),
    "server": ("type", *STDIO_KEYS, *REMOTE_KEYS),
    "tool": ("server", "name", "approval"),
}

# Advice when a required key is missing, keyed by the key.
REQUIRED_HINTS: dict[str, str] = {
    "mcp_servers": 'Add "mcp_servers": {} — an object mapping each server name to its '
    'settings, e.g. "search": {"command": "uvx", "args": ["some-mcp-server"]}.',
    "tools": 'Add "tools": [] listing the tools the agent may use, e.g. {"server": "search", "name": "web_search"}.',
    "server": 'Add "server": the name of a server declared under mcp_servers.',
    "name": 'Add "name": the tool name exactly as the server declares it.',
}
