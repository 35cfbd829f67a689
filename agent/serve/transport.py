"""Running a ``MemoryServer`` on stdio or on streamable HTTP, and what guards the HTTP door.

Invariants:
- stdio: the protocol owns stdout; anything for a person goes to stderr. End of
  stdin, SIGINT and SIGTERM end the server normally (``stdio.py``).
- HTTP: the MCP endpoint is ``http://HOST:PORT/mcp``. Without a token the server
  binds only the exact loopback names ``127.0.0.1``, ``::1`` and ``localhost``;
  any other address (``127.0.0.2``, ``0.0.0.0``, a LAN address) refuses to start
  without one (``check_binding``).
- Every HTTP request, with or without a token and on every address, passes
  ``guard_requests`` first (our own check, not the SDK's host-string heuristic):
  a ``Host`` that does not name the bound address and port gets 421, an ``Origin``
  that is present and not this server's own origin (``http``, one of those names,
  the bound port) gets 403 (``HostRule``). A web page
  that rebinds its DNS name to this machine therefore never reaches MCP.
- With a token, every request must also carry ``Authorization: Bearer <token>``
  (compared in constant time) or gets 401 before it reaches MCP.
- A client that disconnects before its request body is complete is one line on
  stderr and never reaches MCP; a disconnect the SDK still sees is logged in one
  line, not as a traceback (``OneLineDisconnects``).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
import socket
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from memagent.agent.serve.server import MemoryServer
from memagent.agent.serve.stdio import serve_stdio as serve_stdio  # the CLI serves stdio from here
from memagent.vfs import VfsError

TOKEN_ENV = "MEMAGENT_MCP_TOKEN"
MCP_PATH = "/mcp"
# The exact names served without a token. 127.0.0.2 and friends are loopback too,
# but nothing about them is guarded by browsers or the SDK, so they need a token.
TOKENLESS_HOSTS = ("127.0.0.1", "::1", "localhost")
# Bodies are read whole before MCP sees them (so a client leaving mid-body is ours to
# report); past this size we stop buffering and the SDK's own limit answers 413.
BODY_BUFFER_LIMIT = 4 * 1024 * 1024

log = logging.getLogger("memagent.agent.serve.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
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


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Any loopback address (all of 127/8 and ::1) or ``localhost``."""
    if host.lower() == "localhost":
        return True
    ip = _ip(host)
    return ip is not None and ip.is_loopback


def is_tokenless(host: str) -> bool:
    """One of the exact names served without a token (``127.0.0.1``, ``::1``, ``localhost``)."""
    ip = _ip(host)
    return host.lower() == "localhost" or (ip is not None and str(ip) in TOKENLESS_HOSTS)


_DNS_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")


def parse_allowed_hosts(values: tuple[str, ...] | list[str]) -> frozenset[str]:
    """``--allow-host`` values: DNS names or IP addresses (no port, no scheme), lower-cased."""
    names = set()
    for value in values:
        name = value.strip().lower()
        ip = _ip(name.strip("[]"))
        if ip is None and not (len(name) <= 253 and _DNS_NAME.fullmatch(name)):
            raise UsageError(f"--allow-host takes a host name or address without port or scheme, "
                             f"e.g. server.example (got {value!r})")
        names.add(str(ip) if ip is not None else name)
    return frozenset(names)


def check_binding(host: str, token: str | None, allowed: frozenset[str] = frozenset()) -> None:
    if allowed and not token:
        raise UsageError("--allow-host needs a bearer token (other names than the bound address are "
                         f"reachable from elsewhere): set ${TOKEN_ENV} or pass --token")
    if token or is_tokenless(host):
        return
    why = ("a loopback address other than 127.0.0.1, ::1 and localhost" if is_loopback(host)
           else "not loopback")
    raise UsageError(f"serving on {host} ({why}) needs a bearer token: set ${TOKEN_ENV} or pass --token, "
                     "and give clients the header 'Authorization: Bearer <token>'")


def _split_host(text: str) -> tuple[str, int | None] | None:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port`` → (lower-case name without brackets, port or None)."""
    if text.startswith("["):
        inner, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        name, port = inner, rest[1:] if rest else None
        ip = _ip(name)
        if ip is None or ip.version != 6:
            return None
    else:
        name, sep, after = text.partition(":")
        port = after if sep else None
        if ":" in (port or "") or not name:
            return None  # an unbracketed IPv6 address is not a valid Host
    if port is not None and not (port.isdigit() and len(port) <= 5):
        return None
    return name.lower(), int(port) if port is not None else None


@dataclass(frozen=True)
class HostRule:
    """Which ``Host`` and ``Origin`` headers name this server, bound at ``host:port``.

    - Bound to ``127.0.0.1``, ``::1`` or ``localhost``: the three loopback names
      (``localhost``, ``127.0.0.1``, ``[::1]``); only this machine reaches them and no
      page can rebind them.
    - Bound to another IP address: that address (compared as an address, so
      ``[::0:1]`` is ``[::1]``).
    - Bound to ``0.0.0.0`` or ``::`` (every interface): any IP address literal,
      ``localhost`` and this machine's host names. A rebinding page's requests carry
      the page's own DNS name; an address literal is what a client typed.
    - Bound to a name: that name.
    - And the names given with ``--allow-host`` (only with a token): the names
      clients use for a server bound to ``0.0.0.0`` or behind a proxy.

    ``Host`` must also carry the bound port (no port means 80). ``Origin``, when
    present, must be this server's own origin: scheme ``http`` (the server speaks
    nothing else, so an ``https`` page is another origin), one of those names, and
    the bound port (no port means the scheme's default, 80). A page served from
    another port of the same machine is another site (another program, another
    user's server), so it is refused like ``null`` and anything else.
    """

    host: str
    port: int
    also: frozenset[str] = frozenset()

    def names(self, name: str) -> bool:
        bound, ip = self.host.lower(), _ip(name)
        if (str(ip) if ip is not None else name) in self.also:
            return True
        if is_tokenless(bound):
            return name == "localhost" or (ip is not None and str(ip) in ("127.0.0.1", "::1"))
        bound_ip = _ip(bound)
        if bound_ip is not None and bound_ip.is_unspecified:
            return ip is not None or name == "localhost" or name in _machine_names()
        if bound_ip is not None:
            return ip == bound_ip
        return name == bound

    def host_ok(self, header: str | None) -> bool:
        parts = _split_host(header) if header else None
        return parts is not None and (parts[1] or 80) == self.port and self.names(parts[0])

    def origin_ok(self, header: str) -> bool:
        scheme, sep, rest = header.partition("://")
        if not sep or scheme.lower() != "http" or "/" in rest:
            return False
        parts = _split_host(rest)
        return parts is not None and (parts[1] or 80) == self.port and self.names(parts[0])


def _machine_names() -> set[str]:
    return {n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n}


def _shown(value: str | None) -> str:
    """A header value as it may appear in one log line: escaped, bounded."""
    return "none" if value is None else ascii(value[:100])


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    found = [v for k, v in scope.get("headers", []) if k.lower() == name]
    # Two Host or Origin headers are a request nobody honest sends; "" fails every check.
    return found[0].decode("latin-1") if len(found) == 1 else ("" if found else None)


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "unknown"


def _where(scope: Scope) -> str:
    return f"{scope.get('method', '?')} {ascii(scope.get('path', ''))[1:-1][:100]}"


def guard_requests(app: App, rule: HostRule) -> App:
    """``app`` behind the ``Host``/``Origin`` check (see ``HostRule``): 421 or 403 and one log line."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        where = _where(scope)
        host = _header(scope, b"host")
        if not rule.host_ok(host):
            log.warning("refused %s from %s: Host %s does not name this server", where, _client(scope), _shown(host))
            await _plain(send, 421, "misdirected request: the Host header does not name this server")
            return
        origin = _header(scope, b"origin")
        if origin is not None and not rule.origin_ok(origin):
            log.warning("refused %s from %s: Origin %s is not local", where, _client(scope), _shown(origin))
            await _plain(send, 403, "forbidden: requests from web pages of other sites are refused")
            return
        await app(scope, receive, send)

    return guarded


def read_whole_body(app: App) -> App:
    """``app`` called only once the request body is complete (or past ``BODY_BUFFER_LIMIT``).

    A client that leaves mid-body is reported here in one line instead of surfacing
    as the SDK's ``ClientDisconnect`` traceback, and MCP never sees the request.
    """

    async def whole(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        buffered: deque[Message] = deque()
        size = 0
        while size <= BODY_BUFFER_LIMIT:  # past it, the SDK's own limit answers 413 from what we replay
            message = await receive()
            if message["type"] == "http.disconnect":
                log.warning("client %s disconnected before its request was complete (%s); ignored",
                            _client(scope), _where(scope))
                return
            buffered.append(message)
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return buffered.popleft() if buffered else await receive()

        await app(scope, replay, send)

    return whole


def require_bearer(app: App, token: str) -> App:
    """``app`` behind ``Authorization: Bearer <token>``; anything else gets 401."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
            if not hmac.compare_digest(given, expected):
                await _plain(send, 401, "missing or wrong bearer token: send 'Authorization: Bearer <token>'",
                             [(b"www-authenticate", b'Bearer realm="memagent"')])
                return
        await app(scope, receive, send)

    return guarded


class OneLineDisconnects(logging.Filter):
    """Turns an SDK log record whose exception is a client disconnect into one line (no traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _is_disconnect(exc):
            record.msg, record.args = "a client disconnected mid-request (%s); ignored", (record.getMessage(),)
            record.exc_info, record.exc_text, record.levelno, record.levelname = None, None, logging.WARNING, "WARNING"
        return True


def _is_disconnect(exc: BaseException) -> bool:
    from starlette.requests import ClientDisconnect

    if isinstance(exc, BaseExceptionGroup):
        return all(_is_disconnect(e) for e in exc.exceptions)
    return isinstance(exc, ClientDisconnect | ConnectionResetError | BrokenPipeError)


def _set_up_logging() -> None:
    """Our HTTP log lines reach stderr as ``memagent: …`` (unless MEMAGENT_LOG set up handlers
    already); the SDK's disconnect records become one line. Logger filters see only records
    logged on that very logger, hence the SDK's modules by name."""
    for name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager", "mcp.server.sse"):
        logging.getLogger(name).addFilter(OneLineDisconnects())
    if logging.getLogger("memagent").handlers or log.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("memagent: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING)
    log.propagate = False


def _sdk_security(host: str, port: int, also: frozenset[str]) -> Any:
    """The SDK's own Host/Origin check, kept as a second layer where the SDK has one (the three
    loopback names), spelled to accept what ``HostRule`` accepts: the names (and the ``--allow-host``
    names) at the bound port, and as Origin only ``http://`` at that port. ``guard_requests`` has
    already applied the rule; the SDK compares exact strings, so the port is written out."""
    if not is_tokenless(host):
        return None  # the SDK's default elsewhere: off
    from mcp.server.transport_security import TransportSecuritySettings

    names = ["127.0.0.1", "localhost", "[::1]", *(f"[{n}]" if ":" in n else n for n in sorted(also))]
    # Without a port, Host and Origin mean port 80 (http's default): the bare forms only then.
    hosts = [*(names if port == 80 else []), *(f"{n}:{port}" for n in names)]
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts])


def http_app(server: MemoryServer, host: str, port: int, token: str | None,
             allowed: frozenset[str] = frozenset()) -> App:
    """The ASGI app: the SDK's streamable HTTP app behind the Host/Origin guard, and the token when there is one."""
    sdk = server.build()
    app: App = sdk.streamable_http_app(streamable_http_path=MCP_PATH, host=host,
                                       transport_security=_sdk_security(host, port, allowed))
    # Outermost first: Host/Origin, then the token, and only then is a body read.
    app = read_whole_body(app)
    return guard_requests(require_bearer(app, token) if token else app, HostRule(host, port, allowed))


def serve_http(server: MemoryServer, host: str, port: int, token: str | None,
               on_ready: Callable[[str], None] = lambda _: None, allowed: frozenset[str] = frozenset()) -> None:
    import uvicorn

    check_binding(host, token, allowed)
    _set_up_logging()
    config = uvicorn.Config(http_app(server, host, port, token, allowed), host=host, port=port,
                            log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    on_ready(f"http://{shown}:{port}{MCP_PATH}")
    web.run()
