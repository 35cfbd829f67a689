"""Running a ``MemoryServer`` on stdio or on streamable HTTP, and the HTTP bearer token.

Invariants:
- stdio: the protocol owns stdout; anything for a person goes to stderr. End of
  stdin ends the server normally.
- HTTP: the MCP endpoint is ``http://HOST:PORT/mcp``. Bound to a loopback address
  it needs no token (the SDK's DNS-rebinding guard then accepts only loopback
  ``Host``/``Origin`` headers); bound anywhere else it refuses to start without a
  token (``check_binding``). With a token, every request must carry
  ``Authorization: Bearer <token>`` (compared in constant time) or gets 401 before
  it reaches MCP.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from memagent.agent.serve.server import MemoryServer
from memagent.vfs.errors import VfsError

TOKEN_ENV = "MEMAGENT_MCP_TOKEN"
MCP_PATH = "/mcp"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class UsageError(VfsError):
    """A way of serving that is refused before anything starts (one line for the person)."""


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``:PORT`` means 127.0.0.1)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--http takes HOST:PORT, e.g. 127.0.0.1:8765 (got {text!r})")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise UsageError(f"serving on {host} (not loopback) needs a bearer token: set ${TOKEN_ENV} or pass --token, "
                         "and give clients the header 'Authorization: Bearer <token>'")


def require_bearer(app: App, token: str) -> App:
    """``app`` behind ``Authorization: Bearer <token>``; anything else gets 401."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
            if not hmac.compare_digest(given, expected):
                body = b"missing or wrong bearer token: send 'Authorization: Bearer <token>'\n"
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"www-authenticate", b'Bearer realm="memagent"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def serve_stdio(server: MemoryServer) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    sdk = server.build()

    async def main() -> None:
        async with stdio_server() as (read, write):
            await sdk.run(read, write, sdk.create_initialization_options())

    anyio.run(main)


def http_app(server: MemoryServer, host: str, token: str | None) -> App:
    """The ASGI app: the SDK's streamable HTTP app, behind the token when there is one."""
    sdk = server.build()
    app: App = sdk.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return require_bearer(app, token) if token else app


def serve_http(server: MemoryServer, host: str, port: int, token: str | None,
               on_ready: Callable[[str], None] = lambda _: None) -> None:
    import uvicorn

    check_binding(host, token)
    config = uvicorn.Config(http_app(server, host, token), host=host, port=port, log_level="warning",
                            lifespan="on")
    web = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    on_ready(f"http://{shown}:{port}{MCP_PATH}")
    web.run()
