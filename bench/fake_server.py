"""The part every local fake model server shares: a threaded HTTP server on 127.0.0.1
and a FIFO script of answers, one per request.

``bench/fake_messages_api.py`` (Anthropic's Messages API) and
``bench/fake_openai_api.py`` (Chat Completions, Ollama) subclass it with their own
request handler and script items. Invariants: the server runs in a daemon thread with
a short poll interval, so ``close()`` returns quickly; the script is only touched under
``_lock``.
"""

from __future__ import annotations

import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Generic, Self, TypeVar

Item = TypeVar("Item")


class ScriptedServer(Generic[Item]):
    """A scripted server on 127.0.0.1; use as a context manager."""

    thread_name = "fake-model-api"

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, port: int = 0) -> None:
        self._script: deque[Item] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> Self:
        if self._thread is None:
            # A short poll interval so close() (shutdown) returns quickly.
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                            name=self.thread_name, daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- scripting -----------------------------------------------------------

    @property
    def pending(self) -> int:
        """Scripted answers not yet used."""
        with self._lock:
            return len(self._script)

    def enqueue(self, item: Item) -> None:
        with self._lock:
            self._script.append(item)
