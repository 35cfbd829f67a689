"""A small MCP server for the tests, written with the SDK's ``MCPServer`` API.

Tools: ``echo`` (text), ``image`` (a PNG), ``fail`` (an ``isError`` result),
``slow`` (sleeps), ``big`` (a long text), ``resource`` (an embedded resource and
a resource link), ``crash`` (the process dies mid-call) and ``secret`` (offered,
but the tests' tools.json never lists it). Every call is appended as one JSON
line to the file named by ``DEMO_LOG`` (when set), so a test can tell which calls
reached the server.

Usage: ``python tests/mcp_servers/demo_server.py [--hang] [--http PORT | --sse PORT] [--tag T]``.
``--hang`` never answers (a server that hangs at start); ``--http`` serves
streamable HTTP on 127.0.0.1 and refuses requests whose ``X-Demo-Token`` header
is not ``$DEMO_TOKEN``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import EmbeddedResource, ResourceLink, TextContent, TextResourceContents

# A 1x1 transparent PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
                       "60e6kgAAAABJRU5ErkJggg==")

server = MCPServer("demo")


def _log(tool: str, args: dict[str, Any]) -> None:
    path = os.environ.get("DEMO_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"tool": tool, "args": args, "pid": os.getpid()}) + "\n")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    _log("echo", {"text": text})
    return f"echo: {text}"


@server.tool()
def image() -> Image:
    """Return a tiny PNG image."""
    _log("image", {})
    return Image(data=PNG, format="png")


@server.tool()
def fail(message: str = "it went wrong") -> str:
    """Always fails with the message."""
    _log("fail", {"message": message})
    raise ToolError(message)


@server.tool()
def slow(seconds: float = 1.0) -> str:
    """Sleep, then answer."""
    _log("slow", {"seconds": seconds})
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def big(n: int = 100_000) -> str:
    """A long text of n characters."""
    _log("big", {"n": n})
    return "x" * n


@server.tool()
def resource() -> list[Any]:
    """An embedded text resource and a resource link."""
    _log("resource", {})
    return [TextContent(text="see below"),
            EmbeddedResource(resource=TextResourceContents(uri="memo://one", mime_type="text/plain",
                                                           text="resource body")),
            ResourceLink(uri="memo://two", name="two", mime_type="text/plain")]


@server.tool()
def crash() -> str:
    """The server process dies mid-call."""
    _log("crash", {})
    os._exit(3)


@server.tool()
def secret() -> str:
    """A tool the tests' tools.json does not list."""
    _log("secret", {})
    return "the secret"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)
    parser.add_argument("--tag", default="", help="ignored: lets a test find its processes")
    opts = parser.parse_args()
    _log("start", {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": os.environ.get("DEMO_ENV", "")})
    if opts.hang:
        while True:
            time.sleep(60)
    if opts.http or opts.sse:
        import uvicorn
        from starlette.types import ASGIApp, Receive, Scope, Send

        app: ASGIApp = (server.streamable_http_app() if opts.http else server.sse_app())

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
                token = headers.get("x-demo-token")
                _log("request", {"token": token})
                if token != os.environ.get("DEMO_TOKEN"):
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"bad token"})
                    return
            await app(scope, receive, send)

        uvicorn.run(guarded, host="127.0.0.1", port=opts.http or opts.sse, log_level="warning")
        return
    server.run()


if __name__ == "__main__":
    main()
