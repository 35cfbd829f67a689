"""Connections to MCP servers, run on a background event loop behind sync methods.

``McpHub`` keeps one connection per server of the session. The rest of memagent
is synchronous, so the hub owns an asyncio loop in a daemon thread and every
public method submits a coroutine there and waits for it, bounded in time.

Invariants:
- Nothing waits without a bound: a server gets ``connect_timeout()`` seconds
  (``$MEMAGENT_MCP_TIMEOUT``, default 10) to start, answer the handshake and list
  its tools; a call gets ``call_timeout()`` seconds (``$MEMAGENT_MCP_CALL_TIMEOUT``,
  default 120); closing waits at most a few seconds per server.
- Servers start in parallel; one that fails (command missing, crash, timeout,
  refused) is a ``ServerState`` with status ``failed`` and a one-line ``reason``,
  never an exception out of the hub. One that dies mid-session is marked failed
  at its first failing call.
- ``start`` returns at once: a server is ``starting`` until it has listed its tools
  or failed, and ``on_settled`` hears its name once, on the hub's thread, when it
  gets there. ``connect`` is ``start`` plus ``wait`` for those servers. Only a call
  of a starting server's tool (``call``) and an explicit ``wait`` wait for it, and
  only for that server, never past its start-up deadline.
- Every server process the hub starts is stopped by ``close`` (also run at
  interpreter exit): stdin closed, then the SDK's SIGTERM/SIGKILL of the process
  group. Servers run in their own session, so a Ctrl-C at the terminal reaches
  memagent only, and memagent decides when they stop.
- A server's stderr goes to a temporary file, never to the terminal; its last
  line explains a failure.
- Secrets from expanded ``${VAR}`` references stay in ``ResolvedSpec`` and are
  never logged or shown.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import math
import os
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO, TypeVar

from memagent.agent.mcp.config import ResolvedSpec, ServerSpec
from memagent.agent.mcp.results import ToolOutput, convert_result

log = logging.getLogger("memagent.agent.mcp")

CONNECT_TIMEOUT_ENV = "MEMAGENT_MCP_TIMEOUT"
CALL_TIMEOUT_ENV = "MEMAGENT_MCP_CALL_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_CALL_TIMEOUT = 120.0
CLOSE_TIMEOUT = 8.0  # the SDK's own stdio shutdown takes at most ~6.5 s
MAX_TOOL_PAGES = 20
MAX_TOOLS = 1000
MAX_DESCRIPTION_CHARS = 4000

Settled = Callable[[str], None]
Status = Literal["connected", "starting", "failed", "disabled"]
T = TypeVar("T")


def _seconds(var: str, default: float) -> float:
    raw = os.environ.get(var, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        log.warning("%s=%r is not a number of seconds; using %s", var, raw, default)
        return default
    return value if value > 0 and math.isfinite(value) else default


def connect_timeout() -> float:
    """Seconds a server gets to start and list its tools (``$MEMAGENT_MCP_TIMEOUT``)."""
    return _seconds(CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT)


def call_timeout() -> float:
    """Seconds one tool call may take (``$MEMAGENT_MCP_CALL_TIMEOUT``)."""
    return _seconds(CALL_TIMEOUT_ENV, DEFAULT_CALL_TIMEOUT)


@dataclass(frozen=True)
class OfferedTool:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class ServerState:
    """What the session knows about one server."""

    name: str
    spec: ServerSpec
    status: Status
    reason: str = ""
    tools: list[OfferedTool] = field(default_factory=list)

    def offered(self) -> dict[str, OfferedTool]:
        return {t.name: t for t in self.tools}


class McpCallError(Exception):
    """A call that did not produce a result (server gone, timeout, protocol error)."""


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException, resolved: ResolvedSpec, http_error: int | None = None) -> str:
    """Why a connection failed, in one line a person can act on."""
    exc = _leaf(exc)
    name = type(exc).__name__
    if http_error is not None and name == "MCPError":
        return f"the server answered HTTP {http_error} at {resolved.spec.url}" + (
            "; check the credentials in its headers" if http_error in (401, 403) else "")
    if isinstance(exc, FileNotFoundError) and resolved.spec.transport == "stdio":
        if resolved.cwd and not os.path.isdir(resolved.cwd):
            return f'the working directory {resolved.cwd!r} does not exist; fix "cwd" in /tools.json'
        return f"command {resolved.command!r} not found; install it or fix \"command\" in /tools.json"
    if isinstance(exc, PermissionError) and resolved.spec.transport == "stdio":
        return f"command {resolved.command!r} cannot be run (permission denied)"
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if isinstance(status, int):
        return f"the server answered HTTP {status} at {resolved.spec.url}" + (
            "; check the credentials in its headers" if status in (401, 403) else "")
    if name in ("ConnectError", "ConnectTimeout"):
        return f"cannot reach {resolved.spec.url}: {_one_line(str(exc), 150) or name}"
    if name == "MCPError" and "closed" in str(exc).lower():
        return "the server closed the connection during start-up (it exited)"
    text = _one_line(str(exc), 200)
    return f"{name}: {text}" if text else name


def _tail(errlog: TextIO | None, limit: int = 200) -> str:
    """The last non-empty line the server wrote to stderr."""
    if errlog is None:
        return ""
    try:
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, 4096, max(0, size - 4096)).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""
    lines = [ln.strip() for ln in data.splitlines() if ln.strip()]
    return _one_line(lines[-1], limit) if lines else ""


def _teller(on_settled: Settled, name: str) -> Callable[[asyncio.Future[None]], None]:
    """A done-callback of a server's ``ready`` that tells ``on_settled`` its name."""
    def tell(_: asyncio.Future[None]) -> None:
        try:
            on_settled(name)
        except Exception:  # a listener's bug must not break the hub's loop
            log.exception("announcing MCP server %s", name)
    return tell


class _Conn:
    """One server's connection; lives on the hub's loop."""

    def __init__(self, resolved: ResolvedSpec) -> None:
        self.resolved = resolved
        self.client: Any = None
        self.tools: list[OfferedTool] = []
        self.failure = ""
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.scope: Any = None
        self.http_error: int | None = None  # the last HTTP error status a remote server answered
        self.errlog: TextIO | None = None
        if resolved.spec.transport == "stdio":
            # Closed when the connection ends (``_lifecycle``), not in a with-block.
            self.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115

    def state(self) -> ServerState:
        spec = self.resolved.spec
        if self.failure:
            return ServerState(spec.name, spec, "failed", self.failure)
        if not self.ready.done():
            return ServerState(spec.name, spec, "starting")
        return ServerState(spec.name, spec, "connected", tools=list(self.tools))

    def fail(self, reason: str, *, stderr: bool = True) -> None:
        tail = _tail(self.errlog) if stderr else ""
        if tail and tail not in reason:
            reason = f"{reason} (its last words: {tail})"
        self.failure = reason
        self.client = None


async def _list_tools(client: Any) -> list[OfferedTool]:
    tools: list[OfferedTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            if len(tools) >= MAX_TOOLS:
                return tools
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            schema = {**schema, "type": "object"}
            desc = (tool.description or "")[:MAX_DESCRIPTION_CHARS]
            tools.append(OfferedTool(str(tool.name), desc, schema))
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


@contextlib.asynccontextmanager
async def _open_client(conn: _Conn, timeout: float) -> Any:
    # The SDK is imported here, on first use: it costs ~0.5 s, which commands
    # that never connect should not pay.
    from mcp import Client
    from mcp_types import Implementation

    info = Implementation(name="memagent", version="0.1")
    r, errlog = conn.resolved, conn.errlog

    async def on_response(response: Any) -> None:
        # The SDK turns an HTTP error into a generic MCP error; keep the status to explain it.
        if response.status_code >= 400:
            conn.http_error = response.status_code

    async with contextlib.AsyncExitStack() as stack:
        if r.spec.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=r.command, args=list(r.args), env=dict(r.env) or None,
                                           cwd=r.cwd)
            transport: Any = stdio_client(params, errlog=errlog) if errlog else stdio_client(params)
        elif r.spec.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=dict(r.headers), timeout=httpx2.Timeout(max(timeout, 30.0), read=300.0),
                event_hooks={"response": [on_response]}))
            transport = streamable_http_client(r.url, http_client=http)
        else:
            from mcp.client.sse import sse_client

            transport = sse_client(r.url, headers=dict(r.headers), timeout=max(timeout, 5.0))
        client = await stack.enter_async_context(Client(transport, client_info=info))
        yield client


async def _lifecycle(conn: _Conn, timeout: float, go: asyncio.Event) -> None:
    await go.wait()  # a held hub (``McpHub.hold``) starts nothing until released
    import anyio

    try:
        if conn.stop.is_set():
            conn.fail("stopped before it started")
            return
        with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
            conn.scope = scope
            async with _open_client(conn, timeout) as client:
                conn.tools = await _list_tools(client)
                scope.deadline = math.inf  # connected: from now on only close() ends it
                conn.client = client
                if not conn.ready.done():
                    conn.ready.set_result(None)
                await conn.stop.wait()
        if not conn.ready.done():
            conn.fail(f"did not start and list its tools within {timeout:g} s "
                      f"(${CONNECT_TIMEOUT_ENV} sets the limit)")
    except Exception as exc:  # any failure of one server is that server's state
        if not conn.failure:
            conn.fail(_reason(exc, conn.resolved, conn.http_error))
        log.debug("server %s ended: %r", conn.resolved.name, exc)
    finally:
        conn.client = None
        if not conn.ready.done():
            conn.ready.set_result(None)
        if conn.errlog is not None:
            with contextlib.suppress(OSError):
                conn.errlog.close()


class McpHub:
    """The MCP servers of one session (or one ``memagent tools`` run)."""

    def __init__(self, *, env: Mapping[str, str] | None = None) -> None:
        self.env = env if env is not None else os.environ
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: dict[str, _Conn] = {}
        self._live: set[_Conn] = set()  # every connection whose lifecycle has not ended
        self._lock = threading.Lock()
        self._closed = False
        self._watchers: set[asyncio.Task[None]] = set()  # start-up deadlines being enforced
        self._go = asyncio.Event()  # set: servers may start (cleared by ``hold``)
        self._go.set()

    # -- the loop ------------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="memagent-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                atexit.register(self.close)
            return self._loop

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())

    def _wait(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = self._submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()  # Ctrl-C or a timeout: the coroutine stops on the loop
            raise

    # -- connecting ------------------------------------------------------------------------

    def hold(self) -> None:
        """Start no server until ``release``: starting one imports the SDK, which holds
        the interpreter for most of a second that the first prompt should have."""
        self._go.clear()

    def release(self) -> None:
        """Let held servers start (their start-up deadline counts from now)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._go.set()
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._go.set)

    def resolve(self, spec: ServerSpec) -> tuple[ResolvedSpec, list[str]]:
        """The spec expanded from the environment, and a warning per missing variable."""
        resolved = spec.resolve(self.env)
        warnings = [f"MCP server '{spec.name}': ${{{var}}} is not set; it is used as an empty value "
                    f"(export {var}=... before starting memagent)" for var in resolved.missing]
        return resolved, warnings

    async def _launch(self, resolved: list[ResolvedSpec], timeout: float,
                      on_settled: Settled | None = None) -> list[_Conn]:
        """Start ``resolved`` and return at once; a watcher enforces the deadline."""
        conns = [_Conn(r) for r in resolved]
        for conn in conns:
            self._live.add(conn)
            conn.task = asyncio.get_running_loop().create_task(_lifecycle(conn, timeout, self._go))
            conn.task.add_done_callback(lambda _, c=conn: self._live.discard(c))  # type: ignore[misc]
            if on_settled is not None:
                conn.ready.add_done_callback(_teller(on_settled, conn.resolved.name))
        if conns:
            watcher = asyncio.get_running_loop().create_task(self._deadline(conns, timeout))
            self._watchers.add(watcher)
            watcher.add_done_callback(self._watchers.discard)
        return conns

    async def _deadline(self, conns: list[_Conn], timeout: float) -> None:
        await self._go.wait()  # the deadline counts from the real start
        if conns:
            # Each lifecycle enforces its own deadline, but its clean-up (stopping a
            # server that hung) may take seconds more: that goes on in the background,
            # and ``close`` waits for it.
            await asyncio.wait([c.ready for c in conns], timeout=timeout + 0.5)
        for conn in conns:
            if not conn.ready.done():
                conn.fail(f"did not start and list its tools within {timeout:g} s "
                          f"(${CONNECT_TIMEOUT_ENV} sets the limit)")
                self._cancel(conn)
                conn.ready.set_result(None)  # settled: failed; its clean-up goes on

    async def _start_all(self, resolved: list[ResolvedSpec], timeout: float) -> list[_Conn]:
        conns = await self._launch(resolved, timeout)
        if conns:
            await asyncio.wait([c.ready for c in conns])
        return conns

    def _cancel(self, conn: _Conn) -> None:
        conn.stop.set()
        if conn.scope is not None:
            conn.scope.cancel()

    async def _stop_all(self, conns: list[_Conn]) -> None:
        tasks = [c.task for c in conns if c.task is not None and not c.task.done()]
        for conn in conns:
            conn.stop.set()
            if not conn.ready.done():
                self._cancel(conn)  # still starting: no reason to wait for it
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
        for conn in conns:
            if conn.task in pending:
                self._cancel(conn)
        if pending:
            await asyncio.wait(pending, timeout=CLOSE_TIMEOUT)

    def connect(self, specs: list[ServerSpec], *, timeout: float | None = None) -> list[str]:
        """Make the hub's servers exactly ``specs``: start new or changed ones (in
        parallel), stop the others, keep unchanged connected ones; wait until the new
        ones are connected or failed. Returns warnings."""
        warnings, started = self._start(specs, timeout, None)
        self.wait([c.resolved.name for c in started])
        for conn in started:
            if conn.failure:
                warnings.append(f"MCP server '{conn.resolved.name}' failed: {conn.failure}; going on without it")
        return warnings

    def start(self, specs: list[ServerSpec], *, timeout: float | None = None,
              on_settled: Settled | None = None) -> list[str]:
        """Like ``connect`` but returns at once: new servers are ``starting`` and
        ``on_settled(name)`` is called (on the hub's thread) when each has connected
        or failed. Returns the warnings known now (unset variables)."""
        return self._start(specs, timeout, on_settled)[0]

    def wait(self, names: list[str], *, timeout: float | None = None) -> None:
        """Wait until the servers ``names`` are no longer starting (each is bounded by
        its own start-up deadline; ``timeout`` caps the wait further)."""
        pending = [c.ready for n in names if (c := self._conns.get(n)) is not None and not c.ready.done()]
        if not pending:
            return
        limit = connect_timeout() + 2 * CLOSE_TIMEOUT + 1

        async def settled() -> None:
            await asyncio.wait(pending)

        with contextlib.suppress(TimeoutError, FutureTimeout):
            self._wait(settled(), min(timeout, limit) if timeout is not None else limit)

    def _start(self, specs: list[ServerSpec], timeout: float | None,
               on_settled: Settled | None) -> tuple[list[str], list[_Conn]]:
        if self._closed:
            return [], []
        timeout = timeout if timeout is not None else connect_timeout()
        warnings: list[str] = []
        wanted: dict[str, ResolvedSpec] = {}
        for spec in specs:
            resolved, missing = self.resolve(spec)
            warnings += missing
            wanted[spec.name] = resolved
        old = self._conns
        keep = {n: c for n, c in old.items()
                if n in wanted and c.resolved.key() == wanted[n].key() and not c.failure}
        stop = [c for n, c in old.items() if n not in keep]
        start = [r for n, r in wanted.items() if n not in keep]
        # Launching returns at once, once the hub's loop gets to it; on a busy machine (the SDK's
        # import runs on that loop) that can take as long as a start-up, so the start-up limit
        # (MEMAGENT_MCP_TIMEOUT) bounds this wait too, never less than a clean stop.
        grace = max(2 * CLOSE_TIMEOUT + 1, timeout)
        if stop:
            self._wait(self._stop_all(stop), grace)
        started = self._wait(self._launch(start, timeout, on_settled), grace) if start else []
        self._conns = {**keep, **{c.resolved.name: c for c in started}}
        return warnings, started

    def states(self) -> dict[str, ServerState]:
        return {name: conn.state() for name, conn in self._conns.items()}

    def probe(self, specs: list[ServerSpec], *, timeout: float) -> dict[str, ServerState]:
        """Connect to ``specs`` on the side, list their tools and disconnect."""
        resolved = [self.resolve(s)[0] for s in specs]
        if not resolved:
            return {}

        async def run() -> dict[str, ServerState]:
            conns = await self._start_all(resolved, timeout)
            states = {c.resolved.name: c.state() for c in conns}
            await self._stop_all(conns)
            return states

        return self._wait(run(), timeout + 3 * CLOSE_TIMEOUT + 1)

    # -- calling -----------------------------------------------------------------------------

    def call(self, server: str, tool: str, args: dict[str, Any], *, timeout: float | None = None) -> ToolOutput:
        """Call ``tool`` on ``server``; raises ``McpCallError`` when no result comes back."""
        conn = self._conns.get(server)
        if conn is not None and not conn.ready.done():
            self.wait([server])  # a call needs its server: wait for it (within its deadline)
        if conn is None or conn.client is None:
            why = conn.failure if conn is not None and conn.failure else "it is not connected"
            raise McpCallError(f"MCP server '{server}' is not available: {why}")
        timeout = timeout if timeout is not None else call_timeout()

        async def run() -> Any:
            return await conn.client.call_tool(tool, args, read_timeout_seconds=timeout)

        try:
            result = self._wait(run(), timeout + 5)
        except (TimeoutError, FutureTimeout) as exc:
            raise McpCallError(f"{tool} on MCP server '{server}' did not answer within {timeout:g} s "
                               f"(${CALL_TIMEOUT_ENV} sets the limit)") from exc
        except Exception as exc:
            leaf = _leaf(exc)
            text = _one_line(str(leaf), 200) or type(leaf).__name__
            if "closed" in text.lower() or isinstance(leaf, (OSError, EOFError)):
                conn.fail("it closed the connection mid-session (it exited or crashed)", stderr=False)
                raise McpCallError(f"MCP server '{server}' closed the connection during the call to {tool} "
                                   "(it exited or crashed); its tools are unavailable for the rest of this "
                                   "session") from exc
            if "timed out" in text.lower() or type(leaf).__name__ in ("TimeoutError", "ReadTimeout"):
                raise McpCallError(f"{tool} on MCP server '{server}' did not answer within {timeout:g} s "
                                   f"(${CALL_TIMEOUT_ENV} sets the limit)") from exc
            raise McpCallError(f"{tool} on MCP server '{server}' failed: {text}") from exc
        return convert_result(result)

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every server and the loop. Idempotent; bounded in time."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self.release()  # held servers wake up, see that they are stopped, and end
        known = list(self._conns.values())
        self._conns = {}

        async def stop_everything() -> None:
            # Also connections whose start was interrupted (Ctrl-C, SIGTERM) before
            # ``connect`` could record them; ``_live`` is only touched on the loop.
            for watcher in list(self._watchers):
                watcher.cancel()
            await self._stop_all(known + [c for c in self._live if c not in known])

        try:
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(stop_everything(), loop).result(2 * CLOSE_TIMEOUT + 2)
        except BaseException as exc:  # never let a shutdown problem hide the real exit
            log.debug("closing MCP servers: %r", exc)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=2)
            with contextlib.suppress(RuntimeError):
                if not loop.is_running():
                    loop.close()
            with contextlib.suppress(Exception):
                atexit.unregister(self.close)
