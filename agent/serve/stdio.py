"""The stdio transport's two ends that the SDK leaves to us: reading stdin, and stopping.

Invariants:
- SIGINT and SIGTERM stop the server promptly whether stdin is a pipe (how every
  MCP client starts a server) or a terminal, and whether or not the process
  inherited SIGINT ignored (a client started from a script): the server's task
  group is cancelled, a tool call already running finishes first (its write is
  committed whole or not at all), and the command then exits 0 as at the end of
  stdin.
- Stopping never waits on a read of stdin. The SDK reads stdin in a worker thread
  that cancellation must wait for, so a read blocked on a silent client held a
  stopped server open until the client wrote again. Here a daemon thread reads
  a duplicate of fd 0 with ``os.read`` (no buffered reader whose lock a blocked
  thread would hold at interpreter exit) and hands whole lines to the event loop.
- Lines are the wire's frames: UTF-8 with bad bytes replaced, each passed on with
  its newline; the last partial line at end of input is passed on too.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from memagent.agent.serve.server import MemoryServer

READ_CHUNK = 64 * 1024
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StdinLines:
    """An async iterator over stdin's lines, fed by a daemon thread (see the module docstring)."""

    def __init__(self, fd: int = 0) -> None:
        self._fd = os.dup(fd)
        send, receive = anyio.create_memory_object_stream[str](max_buffer_size=16)
        self._send: MemoryObjectSendStream[str] = send
        self._receive: MemoryObjectReceiveStream[str] = receive

    def start(self) -> None:
        """Start reading; call inside the event loop."""
        token = anyio.lowlevel.current_token()
        threading.Thread(target=self._pump, args=(token,), name="memagent-stdin", daemon=True).start()

    def _pump(self, token: Any) -> None:
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(self._fd, READ_CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    anyio.from_thread.run(self._send.send, line.decode("utf-8", "replace") + "\n", token=token)
            if pending:
                anyio.from_thread.run(self._send.send, pending.decode("utf-8", "replace"), token=token)
            anyio.from_thread.run_sync(self._send.close, token=token)
        except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the server stopped first: nobody reads any more
        finally:
            os.close(self._fd)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._receive.__aiter__()


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for _ in signals:
            scope.cancel()
            return


def serve_stdio(server: MemoryServer) -> None:
    """Serve ``server`` on stdin/stdout until the end of stdin, SIGINT or SIGTERM."""
    from mcp.server.stdio import stdio_server

    sdk = server.build()

    async def main() -> None:
        lines = StdinLines()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signals, tg.cancel_scope)
            lines.start()
            # The SDK takes any async iterable of lines as stdin (it only iterates it).
            async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
                await sdk.run(read, write, sdk.create_initialization_options())
            tg.cancel_scope.cancel()

    anyio.run(main)


__all__ = ["STOP_SIGNALS", "StdinLines", "serve_stdio"]
