"""Cross-field rules of ``/tools.json`` that a JSON Schema cannot say clearly.

Invariants:
- A stdio server (no ``type``, or ``"stdio"``) has ``command`` and no
  ``url``/``headers``; a remote server (``"http"``/``"sse"``) has an http(s)
  ``url`` and no ``command``/``args``/``env``/``cwd``.
- Every tool names a server declared in ``mcp_servers``; tool names are unique
  across the whole file, because the model calls tools by name.
- Secrets never live in memory: each ``env`` and ``headers`` value contains at
  least one ``${VAR}`` or ``${VAR:-default}`` reference and no literal text or
  default that looks like a credential; a ``url`` carries no password and no
  literal token in its query string.
- No literal credential in ``args`` either (a process's arguments are visible to
  every user of the machine, and tools.json is memory): the value of a flag named
  like a secret (``--password X``, ``--api-key=X``, ``--github-token X``) must hold
  a ``${VAR}`` reference, and no argument may look like a credential (a provider
  token, or a long run mixing upper case, lower case and digits). ``secret_args``
  says which, for the validator and for import, which turns them into references.
- Parts whose shape is wrong are skipped here: the schema already reports them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .base import Problem
from .fields import short
from .secrets import scan_secrets
from .tools_schema import REMOTE_KEYS, STDIO_KEYS

KIND = "tools.json"

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# A long run of token characters mixing upper case, lower case and digits, or a
# long hex string: what API keys look like and ordinary settings do not.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+=-]{20,}")
_HEX_RUN = re.compile(r"\b[0-9a-fA-F]{32,}\b")
_SECRET_PARAM = re.compile(
    r"(?i)^(api[_-]?key|key|token|access[_-]?token|secret|client[_-]?secret|password|passwd"
    r"|pwd|auth|signature|sig)$"
)
_NO_SECRETS = (
    'Secrets never live in memory: write a ${VAR} reference (e.g. "${SEARCH_API_KEY}" or '
    '"Bearer ${DOCS_TOKEN}"), set the variable in the environment, and it is expanded at '
    "connect time."
)


def pointer(path: Sequence[str | int]) -> str:
    """RFC 6901 JSON pointer; the whole document is shown as '/'."""
    if not path:
        return "/"
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _looks_like_credential(text: str) -> bool:
    for run in _TOKEN_RUN.findall(text):
        if re.search(r"[A-Z]", run) and re.search(r"[a-z]", run) and re.search(r"[0-9]", run):
            return True
    return _HEX_RUN.search(text) is not None


# A flag whose value is a credential: --password, --api-key, --github-token, --client_secret.
# ("-p" is not one: it is a port for docker, a package for npx.)
_SECRET_FLAG = re.compile(
    r"(?i)--?(?!no-)(?:[a-z0-9]+[-_])*(?:password|passwd|pass|pwd|token|api[-_]?key|apikey|secret"
    r"|access[-_]?key|private[-_]?key|credentials?)"
)


def _is_path(value: str) -> bool:
    # A file holding the secret (--private-key ~/.ssh/id, --token ./token.txt) is no secret itself.
    return value.startswith(("/", "~", "./", "../")) or "\\" in value


def secret_args(args: Sequence[str]) -> list[tuple[int, str, str]]:
    """Each argument holding a literal credential: (index, the part to keep before it, a
    name for its variable). ``--api-key=X`` keeps ``--api-key=``; ``--password X`` marks X."""
    found: list[tuple[int, str, str]] = []
    after_flag: str | None = None  # the secret flag the previous argument was, if any
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if after_flag is not None and not arg.startswith("-"):
            if "${" not in arg and arg and not _is_path(arg):
                found.append((i, "", after_flag))
            after_flag = None
            continue
        after_flag = None
        if _SECRET_FLAG.fullmatch(flag):
            if not eq:
                after_flag = flag.lstrip("-")
            elif value and "${" not in value and not _is_path(value):
                found.append((i, flag + eq, flag.lstrip("-")))
            continue
        if "${" in arg:
            continue
        if scan_secrets(arg) or (not _is_path(arg) and "/" not in arg and _looks_like_credential(arg)):
            # NAME=value (docker -e, env-style settings) keeps its name; a bare token is a token.
            named = eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", flag)
            found.append((i, flag + eq, flag) if named else (i, "", "token"))
    return found


def _value_problem(value: str) -> str | None:
    """Why an env/headers value is refused, or None when it is acceptable."""
    literal = _REF.sub("", value)
    if "$" in literal:
        return (
            "has a malformed variable reference. Write ${NAME} or ${NAME:-default}, "
            "where NAME is letters, digits and '_' (for example ${SEARCH_API_KEY})."
        )
    refs = list(_REF.finditer(value))
    if not refs:
        return f"is a literal value. {_NO_SECRETS} For a harmless fixed setting write ${{NAME:-value}}."
    defaults = " ".join(m.group(2) or "" for m in refs)
    if _looks_like_credential(literal) or _looks_like_credential(defaults):
        return f"looks like it contains a credential written out in full. {_NO_SECRETS}"
    return None


def _url_problems(url: str, where: str) -> list[Problem]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [
            Problem(
                where,
                'must be an http:// or https:// URL: write the server\'s address, e.g. "https://example.com/mcp".',
                KIND,
            )
        ]
    if parts.password:
        return [
            Problem(
                where,
                "carries a password inside the URL. Remove it and send the "
                f'credential in "headers" instead. {_NO_SECRETS}',
                KIND,
            )
        ]
    for name, val in parse_qsl(parts.query):
        if _SECRET_PARAM.match(name) and "${" not in val:
            return [
                Problem(
                    where,
                    "passes a credential in the query parameter "
                    f"'{short(name, 40)}'. Use a ${{VAR}} reference there or send "
                    f'it in "headers". {_NO_SECRETS}',
                    KIND,
                )
            ]
    return []


def _misplaced(server: dict[str, Any], base: list[str | int], keys: tuple[str, ...], belongs: str) -> list[Problem]:
    """One problem per key of ``keys`` present in ``server``, where it does not belong."""
    return [Problem(pointer([*base, key]), f'"{key}" belongs to {belongs}', KIND) for key in keys if key in server]


def _server_problems(name: str, server: dict[str, Any]) -> list[Problem]:
    base: list[str | int] = ["mcp_servers", name]
    kind = server.get("type", "stdio")
    problems: list[Problem] = []
    if kind == "stdio":
        if "command" not in server:
            problems.append(
                Problem(
                    pointer(base),
                    'is a stdio server (it has no "type", or '
                    '"type": "stdio") but no "command". Add "command": '
                    'the program to run, or set "type": "http" and a "url" '
                    "for a remote server.",
                    KIND,
                )
            )
        problems += _misplaced(
            server,
            base,
            REMOTE_KEYS,
            'remote servers, but this is a stdio server. Remove it, or set "type": '
            '"http" (or "sse") and drop "command".',
        )
    elif kind in ("http", "sse"):
        if "url" not in server:
            problems.append(
                Problem(
                    pointer(base),
                    f"is a remote ({kind}) server but has no "
                    '"url". Add "url": "https://...", or remove "type" '
                    'and give a "command" for a local stdio server.',
                    KIND,
                )
            )
        elif isinstance(server["url"], str) and server["url"]:  # "" is a schema error
            problems += _url_problems(server["url"], pointer([*base, "url"]))
        problems += _misplaced(
            server,
            base,
            STDIO_KEYS,
            f"stdio servers, but this is a remote ({kind}) server. Remove it, or "
            'remove "type" and "url" for a stdio server.',
        )
    args = server.get("args")
    if isinstance(args, list) and all(isinstance(a, str) for a in args):
        for i, _, _ in secret_args(args):
            problems.append(
                Problem(
                    pointer([*base, "args", i]),
                    "holds a credential written out in full (it is not repeated here). Secrets never live in "
                    'memory: write a ${VAR} reference in args (e.g. "--api-key=${SEARCH_API_KEY}") or pass it '
                    "in env, and set the variable in the environment.",
                    KIND,
                )
            )
    for section in ("env", "headers"):
        values = server.get(section)
        if isinstance(values, dict):
            for key, value in values.items():
                if isinstance(value, str) and (why := _value_problem(value)):
                    problems.append(Problem(pointer([*base, section, key]), why, KIND))
    return problems


def _tool_problems(tools: list[Any], servers: dict[str, Any] | None) -> list[Problem]:
    """``servers`` is None when mcp_servers is itself malformed (reported by the schema)."""
    problems: list[Problem] = []
    first_at: dict[str, tuple[int, str]] = {}
    declared = ", ".join(f"'{s}'" for s in servers or {}) or "none yet"
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            continue
        server, name = tool.get("server"), tool.get("name")
        if servers is not None and isinstance(server, str) and server and server not in servers:
            problems.append(
                Problem(
                    pointer(["tools", i, "server"]),
                    f"names the server "
                    f"'{short(server, 60)}', which is not declared in "
                    f"mcp_servers (declared: {declared}). Declare it under "
                    "mcp_servers or use a declared server.",
                    KIND,
                )
            )
        if not isinstance(name, str):
            continue
        if name in first_at:
            j, other = first_at[name]
            same = (
                f"on the same server '{other}'"
                if other == server
                else (f"from server '{other}'; the model calls tools by name, so two servers cannot both provide it")
            )
            problems.append(
                Problem(
                    pointer(["tools", i, "name"]),
                    f"repeats the tool name "
                    f"'{short(name, 60)}', already listed at /tools/{j} {same}."
                    " Tool names must be unique: remove one entry.",
                    KIND,
                )
            )
        else:
            first_at[name] = (i, str(server))
    return problems


def cross_field_problems(data: Any) -> list[Problem]:
    if not isinstance(data, dict):
        return []
    raw = data.get("mcp_servers")
    servers = raw if isinstance(raw, dict) else None
    problems: list[Problem] = []
    for name, server in (servers or {}).items():
        if isinstance(server, dict):
            problems += _server_problems(name, server)
    tools = data.get("tools")
    if isinstance(tools, list):
        problems += _tool_problems(tools, servers)
    return problems
