"""A credential in an MCP server's ``args`` never reaches memory.

The tools.json validator refuses a literal credential in ``args`` (a flag named like
a secret followed by its value, ``--flag=value``, or a token on its own) with a
one-line message that does not repeat it; ``${VAR}`` references there are allowed.
Import from each harness turns such an argument into a ``${VAR}`` reference, as it
does for ``env`` and ``headers``, with a note naming the variable.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from memagent.agent.formats import FORMATS
from memagent.validators import validate
from memagent.validators.tools_rules import secret_args

ALNUM = string.ascii_letters + string.digits


def fake(seed: int, n: int = 24) -> str:
    rng = random.Random(seed)
    return "Xk9" + "".join(rng.choice(ALNUM) for _ in range(n))


def tools_json(args: list[str]) -> str:
    return json.dumps({"mcp_servers": {"db": {"command": "db-mcp", "args": args}}, "tools": []})


SECRET_ARGS = {
    "flag then value": (["--password", fake(1)], 1),
    "flag=value": (["--api-key=" + fake(2)], 0),
    "named flag": (["serve", "--github-token", fake(3)], 2),
    "underscore flag": (["--client_secret", fake(4)], 1),
    "positional provider token": (["-y", "@acme/mcp-github", "gh" + "p_" + fake(5, 33)], 2),
    "positional random token": (["--stdio", fake(6, 32)], 1),
    "env-style argument": (["-e", "API_KEY=" + fake(7)], 1),
}


@pytest.mark.parametrize("name", sorted(SECRET_ARGS))
def test_a_literal_credential_in_args_is_refused_without_repeating_it(name: str) -> None:
    args, index = SECRET_ARGS[name]
    problems = [p for p in validate("/tools.json", tools_json(args)) if p.kind == "tools.json"]
    assert [p.location for p in problems] == [f"/mcp_servers/db/args/{index}"], problems
    message = str(problems[0])
    assert "\n" not in message and "${VAR}" in message and "env" in message
    secret = args[index].partition("=")[2] or args[index]
    assert not any(secret[i : i + 4] in message for i in range(len(secret) - 3))


ALLOWED_ARGS = {
    "references": ["--password", "${DB_PASSWORD}", "--api-key=${SEARCH_API_KEY}", "${TOKEN}"],
    "ordinary": ["-y", "@modelcontextprotocol/server-filesystem", "/home/ana/Projects", "--port", "8080"],
    "flags without secrets": ["mcp-server-time", "--local-timezone=Europe/Paris", "-p", "3000", "--verbose"],
    "a secret's file": ["--private-key", "~/.ssh/deploy", "--token-file", "./token.txt", "--password", "/run/pw"],
    "a flag saying no": ["--no-password", "server.js"],
}


@pytest.mark.parametrize("name", sorted(ALLOWED_ARGS))
def test_references_and_ordinary_args_are_allowed(name: str) -> None:
    assert validate("/tools.json", tools_json(ALLOWED_ARGS[name])) == []
    assert secret_args(ALLOWED_ARGS[name]) == []


PASSWORD = fake(10)
TOKEN = "gh" + "p_" + fake(11, 33)
ARGS = ["-y", "@acme/db-mcp", "--password", PASSWORD, "--api-key=" + fake(12), TOKEN, "--port", "5432"]


def _imported_args(fmt: str) -> tuple[list[str], str, list[str]]:
    if fmt == "claude-code":
        tree = {".mcp.json": json.dumps({"mcpServers": {"db": {"command": "npx", "args": ARGS}}}).encode()}
    elif fmt == "codex":
        toml_args = ", ".join(json.dumps(a) for a in ARGS)
        tree = {".codex/config.toml": f'[mcp_servers.db]\ncommand = "npx"\nargs = [{toml_args}]\n'.encode()}
    else:
        doc = {"mcp": {"db": {"type": "local", "command": ["npx", *ARGS]}}}
        tree = {"opencode.json": json.dumps(doc).encode()}
    result = FORMATS[fmt].import_(tree)
    text = result.files["/tools.json"]
    return json.loads(text)["mcp_servers"]["db"]["args"], text, [str(n) for n in result.notes]


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "opencode"])
def test_import_turns_credentials_in_args_into_references(fmt: str) -> None:
    args, text, notes = _imported_args(fmt)
    assert args == [
        "-y",
        "@acme/db-mcp",
        "--password",
        "${DB_PASSWORD}",
        "--api-key=${DB_API_KEY}",
        "${DB_TOKEN}",
        "--port",
        "5432",
    ]
    for secret in (PASSWORD, TOKEN, ARGS[4]):
        assert secret.partition("=")[2 if secret.startswith("-") else 0][3:] not in text
    for var in ("DB_PASSWORD", "DB_API_KEY", "DB_TOKEN"):
        assert any(f"${var}" in n and "not imported" in n for n in notes), (var, notes)
    assert validate("/tools.json", text) == []
