"""``--probe``: ask each MCP server of ``/tools.json`` which tools it offers.

The only module of this package that touches the outside world: it starts stdio
servers and calls HTTP ones, speaking just enough MCP (``initialize``,
``notifications/initialized``, ``tools/list`` with its cursor) to list tool
names. Reference: the MCP specification's lifecycle and tools pages
(modelcontextprotocol.io/specification) and its stdio (newline-delimited JSON-RPC)
and streamable HTTP (POST, JSON or ``text/event-stream`` answers,
``Mcp-Session-Id``) transports. Invariants:

- Bounded: every server gets ``timeout`` seconds in all; a stdio process is killed
  afterwards whatever happened; nothing but tool names is kept.
- Never fatal: a server that cannot be reached gives a ``Note`` and no entry, so
  the export simply carries no ``deny`` rules for it.
- ``${VAR}`` and ``${VAR:-default}`` are expanded from the environment; a server
  whose variables are unset (with no default) is not started.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
import urllib.error
import urllib.request
from typing import IO, Any

from .base import Note
from .mcp import REF

PROTOCOL = "2025-06-18"
MAX_PAGES = 50


class ProbeFailed(Exception):
    pass


def _expand(value: str) -> str:
    def sub(m: Any) -> str:
        found = os.environ.get(m.group(1))
        if found is None:
            if m.group(2) is None:
                raise ProbeFailed(f"${m.group(1)} is not set")
            return str(m.group(2))
        return found

    return REF.sub(sub, value)


def _request(method: str, ident: int | None, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if ident is not None:
        message["id"] = ident
    if params is not None:
        message["params"] = params
    return message


INIT = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "memagent", "version": "1"}}


def _result(message: dict[str, Any]) -> dict[str, Any]:
    if "error" in message:
        raise ProbeFailed(f"the server answered with an error: {message['error']}")
    result = message.get("result")
    if not isinstance(result, dict):
        raise ProbeFailed("the server's answer has no result")
    return result


def _names(call: Any) -> list[str]:
    names: list[str] = []
    cursor = None
    for ident in range(2, 2 + MAX_PAGES):
        result = call(_request("tools/list", ident, {"cursor": cursor} if cursor else {}))
        names += [t["name"] for t in result.get("tools", []) if isinstance(t, dict) and isinstance(t.get("name"), str)]
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return names


def _stdio(server: dict[str, Any], timeout: float) -> list[str]:
    env = dict(os.environ) | {k: _expand(v) for k, v in server.get("env", {}).items()}
    try:
        proc = subprocess.Popen([server["command"], *server.get("args", [])], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                cwd=server.get("cwd") or None)
    except OSError as exc:
        raise ProbeFailed(f"could not start {server['command']!r}: {exc.strerror or exc}") from None
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None and proc.stdin is not None
    stdout: IO[bytes] = proc.stdout
    stdin: IO[bytes] = proc.stdin

    def pump() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(b"")

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout

    def send(message: dict[str, Any]) -> None:
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()

    def call(message: dict[str, Any]) -> dict[str, Any]:
        send(message)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProbeFailed(f"no answer within {timeout:g} s")
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                raise ProbeFailed(f"no answer within {timeout:g} s") from None
            if not line:
                raise ProbeFailed("the server exited before answering")
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # a log line on stdout
            if isinstance(reply, dict) and reply.get("id") == message["id"]:
                return _result(reply)

    try:
        call(_request("initialize", 1, INIT))
        send(_request("notifications/initialized", None))
        return _names(call)
    except (BrokenPipeError, OSError) as exc:
        raise ProbeFailed(f"the server closed its input ({exc})") from None
    finally:
        proc.kill()
        proc.wait(timeout=5)


def _http(server: dict[str, Any], timeout: float) -> list[str]:
    headers = {k: _expand(v) for k, v in server.get("headers", {}).items()}
    session: dict[str, str] = {}
    deadline = time.monotonic() + timeout

    def post(message: dict[str, Any]) -> dict[str, Any] | None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ProbeFailed(f"no answer within {timeout:g} s")
        request = urllib.request.Request(
            server["url"], data=json.dumps(message).encode(), method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                     "MCP-Protocol-Version": PROTOCOL, **headers, **session})
        try:
            with urllib.request.urlopen(request, timeout=left) as response:  # noqa: S310 - the user's own server
                if sid := response.headers.get("Mcp-Session-Id"):
                    session["Mcp-Session-Id"] = sid
                if "id" not in message:
                    return None
                body = response.read(8 * 1024 * 1024).decode("utf-8", "replace")
                if "text/event-stream" in response.headers.get("Content-Type", ""):
                    for line in body.splitlines():
                        if line.startswith("data:"):
                            reply = json.loads(line[5:])
                            if isinstance(reply, dict) and reply.get("id") == message["id"]:
                                return _result(reply)
                    raise ProbeFailed("the event stream ended without an answer")
                return _result(json.loads(body))
        except urllib.error.HTTPError as exc:
            raise ProbeFailed(f"HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise ProbeFailed(f"could not reach {server['url']}: {getattr(exc, 'reason', exc)}") from None
        except ValueError:
            raise ProbeFailed("the server's answer is not JSON") from None

    def call(message: dict[str, Any]) -> dict[str, Any]:
        result = post(message)
        assert result is not None
        return result

    call(_request("initialize", 1, INIT))
    post(_request("notifications/initialized", None))
    return _names(call)


def probe(servers: dict[str, dict[str, Any]], timeout: float = 15.0) -> tuple[dict[str, list[str]], list[Note]]:
    """(server -> offered tool names, notes for the servers that could not be asked)."""
    offered: dict[str, list[str]] = {}
    notes: list[Note] = []
    for name, server in servers.items():
        kind = server.get("type", "stdio")
        try:
            if kind == "sse":
                raise ProbeFailed("SSE servers are not probed")
            offered[name] = _http(server, timeout) if kind == "http" else _stdio(server, timeout)
        except ProbeFailed as exc:
            notes.append(Note(f"/tools.json mcp_servers.{name}", f"not probed ({exc}); no deny rules for it"))
    return offered, notes
