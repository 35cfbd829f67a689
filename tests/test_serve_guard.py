"""The HTTP door of ``memagent mcp serve``: who may start it, who may reach MCP through it.

Issue #23, findings 2 and 6. Before the fix, ``--http 127.0.0.2:PORT`` started without a
token and without any ``Host``/``Origin`` check (the SDK guards only the host strings
127.0.0.1, localhost and ::1), so a web page that rebound its DNS name to 127.0.0.2 could
``initialize`` and ``write_file``; and a client that left mid-request put the SDK's
``ClientDisconnect`` traceback on stderr. These tests start the real command as a
subprocess and speak raw HTTP to it (the attacker is a browser, not an MCP client):

- off the three exact loopback names, the server refuses to start without a token;
- a rebinding request (``Host: evil.example``, ``Origin: http://evil.example``) is refused
  on ``127.0.0.2`` (with a token, sent or not) and on ``localhost``, at ``initialize`` and
  inside a live session, and nothing is stored;
- a foreign ``Origin`` is refused even with the right Host and a valid token; foreign means
  anything but this server's own origin (issue #36): another port of the same address, and
  ``https`` on the same port (the server speaks http), are other sites;
- the right Host (and the server's own Origin) passes, from a raw request and from the SDK's client;
- a client that leaves mid-body is one line on stderr, no traceback, and the server lives on.

Readiness and the disconnect are waited on as states (the port accepts; the log line
appears); a server that hangs is killed by a timer, which ends the wait with a failure.
No case depends on how long anything takes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from memagent.agent.serve.transport import HostRule, _sdk_security
from memagent.vfs import open_store
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import MEMAGENT, err, run

LIMIT = 60.0  # seconds one request may take; a server is killed after three times that
TOKEN = "s3cret-guard-token"
EVIL = {"Host": "evil.example", "Origin": "http://evil.example"}
ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PROTOCOL = "2025-06-18"


def initialize(name: str = "evil-page") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}}


def write(path: str, text: str, rid: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"file_path": path, "content": text}}}


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'memagent.db'}"
    monkeypatch.setenv("MEMAGENT_DB", url)
    store = open_store(url)
    store.create_agent("demo", {"/notes.md": "start\n"})
    store.close()
    return url


@dataclass
class Served:
    """A running ``memagent mcp serve demo --http HOST:PORT`` and its stderr, line by line."""

    host: str
    port: int
    token: str | None
    proc: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    done: bool = False

    @property
    def connect_host(self) -> str:
        return "127.0.0.1" if self.host == "localhost" else self.host  # uvicorn binds localhost as IPv4

    @property
    def url(self) -> str:
        return f"http://{self.connect_host}:{self.port}/mcp"

    def read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self.changed:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.done = True
            self.changed.notify_all()

    def wait_for_line(self, needle: str) -> str:
        """The first stderr line containing ``needle``; a server that never writes it is ended by the killer."""
        with self.changed:
            self.changed.wait_for(lambda: self.done or any(needle in line for line in self.lines))
            found = [line for line in self.lines if needle in line]
            assert found, f"the server ended without a line with {needle!r}: {self.lines}"
            return found[0]

    def wait_until_listening(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection((self.connect_host, self.port), timeout=LIMIT).close()
                return
            with self.changed:
                assert not self.done, f"server exited: {self.lines}"
                # Woken at once by a stderr line or the exit (a hang is ended by the killer);
                # the short wait only paces the polling of the port.
                self.changed.wait(0.05)

    def post(self, payload: dict[str, Any], headers: dict[str, str] | None = None) -> httpx2.Response:
        """One raw POST to /mcp; ``headers`` (Host, Origin, ...) override the defaults; an empty value drops one."""
        sent = {**ACCEPT, **({"Authorization": f"Bearer {self.token}"} if self.token else {}), **(headers or {})}
        return httpx2.post(self.url, headers={k: v for k, v in sent.items() if v}, content=json.dumps(payload),
                           timeout=LIMIT)

    def session(self, headers: dict[str, str] | None = None) -> str:
        """A live MCP session started with ``headers`` (the right Host by default); its id."""
        r = self.post(initialize("good-client"), headers)
        assert r.status_code == 200, r.text
        sid = r.headers["mcp-session-id"]
        r = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, {
            **(headers or {}), **in_session(sid)})
        assert r.status_code == 202, r.text
        return sid


def in_session(sid: str) -> dict[str, str]:
    return {"mcp-session-id": sid, "mcp-protocol-version": PROTOCOL}


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(host: str, token: str | None = None, *args: str) -> Iterator[Served]:
    bind = "127.0.0.1" if host == "localhost" else host
    port = free_port(bind)
    env = {**os.environ, "MEMAGENT_MCP_TOKEN": token or ""}
    proc = subprocess.Popen([MEMAGENT, "mcp", "serve", "demo", "--http", f"{host}:{port}", *args],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = Served(host, port, token, proc)
    reader = threading.Thread(target=server.read_stderr, daemon=True)
    reader.start()
    killer = threading.Timer(LIMIT * 3, proc.kill)  # a hang of the server ends the test, not the run
    killer.start()
    try:
        server.wait_until_listening()
        yield server
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        killer.cancel()
        reader.join()


def stored(url: str) -> tuple[list[str], str, int]:
    """(every file path, /notes.md's content, its number of revisions)."""
    store = open_store(url)
    try:
        view = AgentView(store, "demo")
        return view.glob("**"), view.read("/notes.md").content, len(view.history("/notes.md"))
    finally:
        store.close()


def data(r: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or SSE answer."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        return dict(json.loads(next(line[5:] for line in r.text.splitlines() if line.startswith("data:"))))
    return dict(r.json())


# -- who may start it ------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.2", "127.255.255.254", "0.0.0.0", "[::]", "192.0.2.7"])
def test_without_a_token_only_the_exact_loopback_names_start(db: str, host: str) -> None:
    p = run("mcp", "serve", "demo", "--http", f"{host}:8765", env={"MEMAGENT_MCP_TOKEN": ""})
    lines = err(p).strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, err(p)  # a usage mistake
    assert lines[0].startswith(f"memagent: serving on {host.strip('[]')} (")
    assert "needs a bearer token: set $MEMAGENT_MCP_TOKEN or pass --token" in lines[0]
    if host.startswith("127."):
        assert "(a loopback address other than 127.0.0.1, ::1 and localhost)" in lines[0]
    assert stored(db) == (["/notes.md"], "start\n", 1)


def test_allow_host_needs_a_token_and_a_plain_name(db: str) -> None:
    for args, message in [
        (["--http", "0.0.0.0:8765", "--allow-host", "server.example"], "--allow-host needs a bearer token"),
        (["--http", "127.0.0.1:8765", "--allow-host", "server.example"], "--allow-host needs a bearer token"),
        (["--http", "127.0.0.1:8765", "--token", "t", "--allow-host", "http://server.example:80"],
         "--allow-host takes a host name or address without port or scheme"),
        (["--allow-host", "server.example", "--token", "t"], "--allow-host is for --http HOST:PORT"),
    ]:
        p = run("mcp", "serve", "demo", *args, env={"MEMAGENT_MCP_TOKEN": ""}, stdin="")
        lines = err(p).strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("memagent: " + message), (args, err(p))


# -- DNS rebinding ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "token"), [("127.0.0.2", TOKEN), ("localhost", None)])
def test_a_rebinding_page_is_refused_and_nothing_is_stored(db: str, host: str, token: str | None) -> None:
    with served(host, token) as s:
        port = s.port
        # The page's own request: its DNS name in Host and Origin. With a token the
        # page cannot know, and even with the valid one: the Host check comes first.
        for auth in ({"Authorization": ""}, {}) if token else ({},):
            r = s.post(initialize(), {**EVIL, **auth})
            assert r.status_code == 421, r.text
            assert r.text == "misdirected request: the Host header does not name this server\n"
            assert "mcp-session-id" not in r.headers
        # Every spelling that does not name the bound address and port is refused too.
        wrong_port = f"{s.connect_host}:{port + 1 if port < 65535 else port - 1}"
        foreign = ["evil.example", f"evil.example:{port}", f"{host}.evil.example:{port}", wrong_port,
                   f"{s.connect_host}", f"{s.connect_host}.:{port}", f"{s.connect_host}:{port}:{port}"]
        foreign += [f"localhost:{port}", f"127.0.0.1:{port}"] if host == "127.0.0.2" else [f"127.0.0.2:{port}"]
        for bad in foreign:
            r = s.post(initialize(), {"Host": bad})
            assert r.status_code == 421, (bad, r.status_code, r.text)
        # A live session opened by a good client: the page cannot ride on its id.
        sid = s.session()
        r = s.post(write("/evil.md", "planted by a web page\n"), {**EVIL, **in_session(sid)})
        assert r.status_code == 421
        r = s.post(write("/notes.md", "overwritten by a web page\n"),
                   {"Origin": "http://evil.example", **in_session(sid)})
        assert r.status_code == 403, r.text
    # stderr is whole once the server has stopped (read earlier, a line could still be in the pipe).
    refusals = [line for line in s.lines if line.startswith("memagent: refused POST /mcp from ")]
    assert any("Host 'evil.example' does not name this server" in line for line in refusals), s.lines
    assert any("Origin 'http://evil.example' is not local" in line for line in refusals), s.lines
    assert stored(db) == (["/notes.md"], "start\n", 1)
    assert not any("Traceback" in line for line in s.lines), s.lines


def test_a_foreign_origin_is_refused_even_with_a_valid_token(db: str) -> None:
    with served("127.0.0.2", TOKEN) as s:
        other = s.port + 1 if s.port < 65535 else s.port - 1
        for origin in ("http://evil.example", f"http://evil.example:{s.port}", "null", "https://127.0.0.2.evil.example",
                       f"http://127.0.0.1:{s.port}", "file://", f"http://127.0.0.2:{s.port}/path",
                       f"http://127.0.0.2:{other}", f"https://127.0.0.2:{s.port}", "http://127.0.0.2"):
            r = s.post(initialize(), {"Origin": origin})
            assert r.status_code == 403, (origin, r.text)
            assert r.text == "forbidden: requests from web pages of other sites are refused\n"
        sid = s.session()
        r = s.post(write("/evil.md", "x\n"), {"Origin": "http://evil.example", **in_session(sid)})
        assert r.status_code == 403
        # Without the token the answer is 401, as before: the Origin check adds, never replaces.
        assert s.post(initialize(), {"Authorization": "Bearer wrong"}).status_code == 401
    assert stored(db) == (["/notes.md"], "start\n", 1)


def test_another_port_or_https_on_loopback_is_a_foreign_origin(db: str) -> None:
    """Issue #36: on 127.0.0.1 without a token, a page on another local port, or served over
    https on this very port, got 200 and could write; both are other origins."""
    with served("127.0.0.1") as s:
        other = s.port + 1 if s.port < 65535 else s.port - 1
        for origin in (f"http://127.0.0.1:{other}", f"https://127.0.0.1:{s.port}", f"http://localhost:{other}"):
            r = s.post(initialize(), {"Host": f"127.0.0.1:{s.port}", "Origin": origin})
            assert r.status_code == 403, (origin, r.text)
        sid = s.session()
        r = s.post(write("/evil.md", "x\n"), {"Origin": f"http://127.0.0.1:{other}", **in_session(sid)})
        assert r.status_code == 403, r.text
        r = s.post(write("/own.md", "x\n"), {"Origin": f"http://127.0.0.1:{s.port}", **in_session(sid)})
        assert r.status_code == 200 and data(r)["result"]["isError"] is False, r.text
    assert stored(db)[0] == ["/notes.md", "/own.md"]


@pytest.mark.parametrize(("host", "token"), [("127.0.0.2", TOKEN), ("localhost", None)])
def test_the_right_host_and_a_local_origin_pass(db: str, host: str, token: str | None) -> None:
    with served(host, token) as s:
        names = [f"127.0.0.2:{s.port}"] if host == "127.0.0.2" else \
            [f"localhost:{s.port}", f"127.0.0.1:{s.port}", f"[::1]:{s.port}"]
        for name in names:
            for origin in (f"http://{name}",):  # the server's own origin (browsers send it lower-case)
                r = s.post(initialize("good-client"), {"Host": name, "Origin": origin})
                assert r.status_code == 200, (name, origin, r.text)
                assert data(r)["result"]["serverInfo"]["name"]
        sid = s.session({"Host": names[0]})
        r = s.post(write("/raw.md", "raw and right\n"), {"Host": names[0], **in_session(sid)})
        assert r.status_code == 200 and data(r)["result"]["isError"] is False, r.text

        async def body() -> None:  # the SDK's own client, as a harness would connect
            with anyio.fail_after(LIMIT):
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with httpx2.AsyncClient(headers=headers, timeout=LIMIT) as h, Client(
                        streamable_http_client(s.url, http_client=h),
                        client_info=Implementation(name="good-client", version="1")) as c:
                    await c.call_tool("read_file", {"file_path": "/notes.md"})
                    result = await c.call_tool("write_file", {"file_path": "/notes.md", "content": "via sdk\n"})
                    assert not result.is_error, result
        anyio.run(body)
    assert stored(db) == (["/notes.md", "/raw.md"], "via sdk\n", 2)


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_allow_host_adds_exactly_its_names(db: str, host: str) -> None:
    with served(host, TOKEN, "--allow-host", "Server.Example") as s:
        good = {"Host": f"server.example:{s.port}", "Origin": f"http://server.example:{s.port}"}
        assert s.post(initialize("good-client"), good).status_code == 200
        assert s.post(initialize(), {**good, "Host": f"server.example.evil.example:{s.port}"}).status_code == 421
        assert s.post(initialize(), {**good, "Origin": "http://evil.example"}).status_code == 403
        assert s.post(initialize(), {**good, "Origin": "https://server.example"}).status_code == 403
        assert s.post(initialize(), EVIL).status_code == 421
        sid = s.session(good)
        r = s.post(write("/named.md", "by name\n"), {**good, **in_session(sid)})
        assert r.status_code == 200 and data(r)["result"]["isError"] is False, r.text
    assert stored(db)[0] == ["/named.md", "/notes.md"]


# -- a client that leaves --------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "token"), [("127.0.0.1", None), ("127.0.0.2", TOKEN)])
def test_a_client_that_disconnects_mid_request_is_one_line(db: str, host: str, token: str | None) -> None:
    with served(host, token) as s:
        sid = s.session()
        # Headers promise 1000 bytes; a part of the body arrives, then the client is gone.
        head = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{s.port}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nmcp-session-id: {sid}\r\n"
                f"mcp-protocol-version: {PROTOCOL}\r\nContent-Length: 1000\r\n"
                + (f"Authorization: Bearer {token}\r\n" if token else "") + "\r\n")
        with socket.create_connection((s.connect_host, s.port), timeout=LIMIT) as c:
            c.sendall(head.encode() + json.dumps(write("/half.md", "never whole\n"))[:40].encode())
        line = s.wait_for_line("disconnected")
        assert line.startswith("memagent: client 127.") and line.endswith(
            "disconnected before its request was complete (POST /mcp); ignored"), line
        # The server lives on and answers the next request.
        r = s.post(write("/after.md", "after the disconnect\n", rid=3), in_session(sid))
        assert r.status_code == 200 and data(r)["result"]["isError"] is False, r.text
    text = "\n".join(s.lines)
    assert "Traceback" not in text and "ClientDisconnect" not in text, text
    assert sum("disconnected" in line for line in s.lines) == 1, text
    assert [line for line in s.lines if not line.startswith("memagent: serving agent")] == [
        line, "memagent: MCP server stopped"], text
    assert stored(db) == (["/after.md", "/notes.md"], "start\n", 1)


# -- the rule itself, without a server --------------------------------------------------------------


@pytest.mark.parametrize(("bound", "header", "ok"), [
    ("127.0.0.1", "127.0.0.1:8765", True), ("127.0.0.1", "localhost:8765", True), ("127.0.0.1", "[::1]:8765", True),
    ("localhost", "LOCALHOST:8765", True), ("::1", "[0:0::1]:8765", True), ("::1", "127.0.0.1:8765", True),
    ("127.0.0.1", "127.0.0.1", False), ("127.0.0.1", "127.0.0.1:8766", False), ("127.0.0.1", "127.0.0.2:8765", False),
    ("127.0.0.1", "evil.example:8765", False), ("127.0.0.1", "localhost.:8765", False),
    ("127.0.0.1", "::1:8765", False), ("127.0.0.1", "[::1]x:8765", False), ("127.0.0.1", "127.0.0.1:+8765", False),
    ("127.0.0.2", "127.0.0.2:8765", True), ("127.0.0.2", "localhost:8765", False),
    ("127.0.0.2", "127.0.0.1:8765", False), ("192.0.2.7", "192.0.2.7:8765", True),
    ("192.0.2.7", "evil.example:8765", False), ("0.0.0.0", "192.0.2.9:8765", True),
    ("0.0.0.0", "localhost:8765", True), ("0.0.0.0", "evil.example:8765", False), ("::", "[2001:db8::1]:8765", True),
])
def test_host_rule(bound: str, header: str, ok: bool) -> None:
    assert HostRule(bound, 8765).host_ok(header) is ok


def test_host_rule_with_allowed_names() -> None:
    rule = HostRule("0.0.0.0", 8765, frozenset({"server.example", "2001:db8::7"}))
    assert rule.host_ok("server.example:8765") and rule.host_ok("[2001:db8:0::7]:8765")
    assert not rule.host_ok("server.example:8766") and not rule.host_ok("evil.server.example:8765")
    assert rule.origin_ok("http://server.example:8765") and not rule.origin_ok("http://server.example.evil:8765")
    assert not rule.origin_ok("https://server.example:8765") and not rule.origin_ok("http://server.example")


ORIGINS = [
    ("localhost", "http://localhost:8765", True), ("localhost", "http://127.0.0.1:8765", True),
    ("localhost", "http://[::1]:8765", True), ("127.0.0.2", "http://127.0.0.2:8765", True),
    ("0.0.0.0", "http://192.0.2.9:8765", True),
    # Another port of the same machine is another site; so is https (the server speaks http).
    ("localhost", "http://localhost:5173", False), ("localhost", "http://127.0.0.1:8766", False),
    ("localhost", "https://127.0.0.1:8765", False), ("localhost", "https://127.0.0.1", False),
    ("localhost", "http://[::1]:3000", False), ("127.0.0.2", "http://127.0.0.2:9", False),
    ("localhost", "http://localhost", False),  # no port: http's default, 80
    ("localhost", "http://evil.example:8765", False), ("localhost", "null", False), ("localhost", "file://", False),
    ("localhost", "ws://localhost:8765", False), ("localhost", "http://localhost:8765/x", False),
    ("127.0.0.2", "http://localhost:8765", False), ("0.0.0.0", "http://evil.example:8765", False),
]


@pytest.mark.parametrize(("bound", "origin", "ok"), ORIGINS)
def test_origin_rule(bound: str, origin: str, ok: bool) -> None:
    assert HostRule(bound, 8765).origin_ok(origin) is ok


def test_origin_rule_on_port_80_takes_the_default() -> None:
    rule = HostRule("127.0.0.1", 80)
    assert rule.origin_ok("http://localhost") and rule.origin_ok("http://127.0.0.1:80")
    assert not rule.origin_ok("https://localhost") and not rule.origin_ok("http://localhost:443")


@pytest.mark.parametrize("port", [8765, 80])
def test_the_sdk_second_layer_agrees_with_the_rule(port: int) -> None:
    """The SDK's own check (kept behind ours on the loopback names) accepts no Origin ours refuses."""
    from mcp.server.transport_security import TransportSecurityMiddleware

    sdk = TransportSecurityMiddleware(_sdk_security("127.0.0.1", port, frozenset({"server.example"})))
    rule = HostRule("127.0.0.1", port, frozenset({"server.example"}))
    other = port + 1
    for name in ("localhost", "127.0.0.1", "[::1]", "server.example", "evil.example"):
        for origin in (f"http://{name}:{port}", f"http://{name}", f"https://{name}:{port}", f"https://{name}",
                       f"http://{name}:{other}", f"https://{name}:{other}"):
            assert sdk._validate_origin(origin) is rule.origin_ok(origin), origin
        for host in (f"{name}:{port}", name, f"{name}:{other}"):
            assert sdk._validate_host(host) is rule.host_ok(host), host
