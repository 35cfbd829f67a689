"""A real local HTTP server that speaks the Anthropic Messages API, for tests and benchmarks.

Not a test module: tests and ``bench/context.py`` import ``FakeMessagesAPI`` and
point the real SDK at it (``ANTHROPIC_BASE_URL=server.base_url``, any ``ANTHROPIC_API_KEY``).

Invariants:
- Every POST to ``/v1/messages`` is recorded (parsed JSON body in
  ``.requests``, headers in ``.headers``) before it is answered, including
  requests that get an error, so a test can assert on what the client sent.
- Answers come from a FIFO script, one item per request. ``"stream": true``
  gets ``text/event-stream`` with the API's event sequence (``message_start``
  with usage, ``ping``, ``content_block_start`` / ``content_block_delta``
  (``text_delta`` split into several chunks, ``input_json_delta`` with the
  tool input JSON split mid-token) / ``content_block_stop``,
  ``message_delta`` with ``stop_reason`` and usage, ``message_stop``);
  otherwise the same message as plain JSON.
- Errors use the API's JSON error shape (``{"type": "error", "error":
  {"type", "message"}}``) and status, with ``retry-after-ms`` (10 ms by
  default) so the SDK's retries are fast in tests.
- Nothing is ever invented: an empty script answers 500 with a message naming
  the problem and ``x-should-retry: false``, so a test that enqueued too few
  responses fails at once and loudly instead of hanging or retrying.
- A request without a credential (``x-api-key``, or ``Authorization: Bearer``
  as recent SDKs send the API key) gets 401 ``authentication_error``, like the
  real API; ``require_key`` makes a wrong key a 401 too.
- Usage numbers are plausible: input tokens ~ request size / 4, and prompt
  caching is simulated: the longest prefix, ending at a ``cache_control``
  breakpoint or up to 20 blocks before one, that an earlier request marked is
  a cache read (by content: where the marks sit does not matter), the rest up
  to the last breakpoint a cache write.
- ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}`` with the
  same N the usage of that request would total, without using a script item;
  those bodies go to ``.count_requests``, not ``.requests`` (set
  ``count_tokens=False`` for a server without the endpoint: 404).

Run standalone for manual testing (e.g. in tmux)::

    python bench/fake_messages_api.py script.json [--port 8765] [--delay 0.03]

where ``script.json`` is a list of items: ``{"text": "..."}``,
``{"tool_use": {"name": ..., "input": {...}, "text": "optional"}}``,
``{"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}``
or ``{"content": [...blocks...], "stop_reason": "..."}``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

if not __package__:  # run by hand as a script (python bench/...): make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.fake_server import ScriptedServer  # noqa: E402

__all__ = ["ConnectionDrop", "FakeMessagesAPI", "ScriptError", "ScriptMessage", "StreamError"]

DEFAULT_RETRY_AFTER_MS = 10


@dataclass
class ScriptMessage:
    """A successful answer: content blocks as the API returns them."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    usage: dict[str, int] | None = None  # overrides the simulated numbers


@dataclass
class ScriptError:
    """An HTTP error answer."""

    status: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamError:
    """A stream that opens (200) and then sends an ``error`` event.

    ``before`` blocks (usually one text block) are streamed first, then the
    error; for a non-streaming request this is answered as ``status`` instead.
    """

    type: str
    message: str
    status: int = 529
    before: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ConnectionDrop:
    """The server hangs up: a stream stops after ``before`` blocks with no
    ``message_delta`` / ``message_stop``; a plain request gets no answer at all."""

    before: list[dict[str, Any]] = field(default_factory=list)


ScriptItem = (
    ScriptMessage | ScriptError | StreamError | ConnectionDrop | Callable[[dict[str, Any]], Any]
)
Answer = ScriptMessage | ScriptError | StreamError | ConnectionDrop


def _tokens(obj: Any) -> int:
    """A rough token count: ~4 characters per token."""
    return max(1, len(json.dumps(obj, sort_keys=True)) // 4)


def _chunks(text: str, pieces: int = 4) -> list[str]:
    """``text`` split into up to ``pieces`` consecutive non-empty chunks."""
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeMessagesAPI(ScriptedServer[ScriptItem]):
    """A scripted Messages API on 127.0.0.1; use as a context manager."""

    thread_name = "fake-messages-api"

    def __init__(
        self,
        *,
        require_key: str | None = None,
        retry_after_ms: int | None = DEFAULT_RETRY_AFTER_MS,
        event_delay: float = 0.0,
        port: int = 0,
        count_tokens: bool = True,
    ) -> None:
        self.require_key = require_key
        self.count_tokens = count_tokens
        self.count_requests: list[dict[str, Any]] = []
        self.retry_after_ms = retry_after_ms
        self.event_delay = event_delay  # seconds between SSE events (for demos)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._ids = itertools.count(1)
        self._cached_prefixes: set[str] = set()
        super().__init__(self._handler_class(), port=port)

    # -- lifecycle -----------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- scripting -----------------------------------------------------------

    def enqueue_text(
        self, text: str, *, stop_reason: str = "end_turn", usage: dict[str, int] | None = None
    ) -> None:
        self.enqueue(ScriptMessage([{"type": "text", "text": text}], stop_reason, usage))

    def enqueue_tool_use(
        self,
        name: str,
        input: dict[str, Any],
        text: str | None = None,
        *,
        id: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> str:
        """Script a tool call (optionally preceded by text); returns the tool_use id."""
        tool_id = id or f"toolu_fake_{next(self._ids):04d}"
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "text", "text": text})
        content.append({"type": "tool_use", "id": tool_id, "name": name, "input": input})
        self.enqueue(ScriptMessage(content, "tool_use", usage))
        return tool_id

    def enqueue_tool_uses(
        self, calls: list[tuple[str, dict[str, Any]]], text: str | None = None
    ) -> list[str]:
        """Script one response with several parallel tool calls; returns their ids."""
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        ids = []
        for name, tool_input in calls:
            tool_id = f"toolu_fake_{next(self._ids):04d}"
            ids.append(tool_id)
            content.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        self.enqueue(ScriptMessage(content, "tool_use"))
        return ids

    def enqueue_error(self, status: int, type: str, message: str, *, times: int = 1) -> None:
        """Script ``times`` consecutive HTTP errors.

        E.g. ``(529, "overloaded_error", "Overloaded")``."""
        for _ in range(times):
            self.enqueue(ScriptError(status, type, message))

    def enqueue_stream_error(
        self, type: str, message: str, *, status: int = 529, text_before: str | None = None
    ) -> None:
        """Script a stream that opens and then fails with an ``error`` event."""
        before = [{"type": "text", "text": text_before}] if text_before else []
        self.enqueue(StreamError(type, message, status, before))

    def enqueue_connection_drop(self, *, text_before: str | None = None) -> None:
        """Script a hang-up (see ``ConnectionDrop``)."""
        self.enqueue(ConnectionDrop([{"type": "text", "text": text_before}] if text_before else []))

    def enqueue_callable(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        """``fn(body)`` decides the answer: a message dict (at least ``content``), a
        string (a text answer), or ``("error", status, type, message)``."""
        self.enqueue(fn)

    @staticmethod
    def api_key_of(headers: dict[str, str]) -> str | None:
        """The credential a request carried: ``x-api-key``, or an ``Authorization:
        Bearer`` token (recent SDKs send ``ANTHROPIC_API_KEY`` that way)."""
        if headers.get("x-api-key"):
            return headers["x-api-key"]
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and auth[7:].strip():
            return auth[7:].strip()
        return None

    # -- answering -----------------------------------------------------------

    def _next_item(self, body: dict[str, Any]) -> Answer:
        with self._lock:
            item = self._script.popleft() if self._script else None
            number = len(self.requests)
        if item is None:
            return ScriptError(
                500,
                "api_error",
                f"FakeMessagesAPI: no scripted response left for request #{number} "
                "(the test enqueued too few responses)",
                {"x-should-retry": "false"},
            )
        if isinstance(item, Answer):
            return item
        result = item(body)
        if isinstance(result, str):
            return ScriptMessage([{"type": "text", "text": result}])
        if isinstance(result, tuple) and result and result[0] == "error":
            _, status, err_type, message = result
            return ScriptError(int(status), str(err_type), str(message))
        if isinstance(result, Answer):
            return result
        if isinstance(result, dict) and isinstance(result.get("content"), list):
            return ScriptMessage(
                result["content"], str(result.get("stop_reason", "end_turn")), result.get("usage")
            )
        return ScriptError(
            500,
            "api_error",
            f"FakeMessagesAPI: the scripted callable returned {result!r}, "
            "expected a message dict, a string or ('error', status, type, message)",
            {"x-should-retry": "false"},
        )

    @staticmethod
    def _segments(body: dict[str, Any]) -> list[Any]:
        segments: list[Any] = list(body.get("tools") or [])
        system = body.get("system")
        if isinstance(system, list):
            segments.extend(system)
        elif isinstance(system, str):
            segments.append({"type": "text", "text": system})
        for message in body.get("messages") or []:
            content = message.get("content")
            segments.extend(content if isinstance(content, list) else [content])
        return segments

    def input_tokens(self, body: dict[str, Any]) -> int:
        """What the usage of ``body`` totals as input (cached + uncached)."""
        # At most this many tokens: usage splits the same segments into up to three
        # parts, each rounded down.
        segments = self._segments(body)
        return _tokens(segments) if segments else 0

    def _usage(self, body: dict[str, Any], item: ScriptMessage) -> dict[str, int]:
        """Plausible usage with simulated prompt caching (see module docstring)."""
        segments = self._segments(body)
        marks = [i for i, seg in enumerate(segments) if isinstance(seg, dict) and "cache_control" in seg]

        # The cache key is the content: where the breakpoints sit is not part of it.
        plain = [
            {k: v for k, v in seg.items() if k != "cache_control"} if isinstance(seg, dict) else seg
            for seg in segments
        ]

        def digest(end: int) -> str:
            return hashlib.sha256(
                json.dumps([body.get("model"), plain[: end + 1]], sort_keys=True).encode()
            ).hexdigest()

        # Like the API: at each breakpoint, and up to 20 blocks before it, the
        # longest prefix cached by an earlier request is read; what lies between
        # it and the last breakpoint is written.
        read_end = -1
        with self._lock:
            for mark in reversed(marks):
                hit = next((end for end in range(mark, max(mark - 21, -1), -1)
                            if digest(end) in self._cached_prefixes), -1)
                if hit >= 0:
                    read_end = hit
                    break
            for end in marks:
                self._cached_prefixes.add(digest(end))
        last = marks[-1] if marks else -1
        read = segments[: read_end + 1]
        written = segments[read_end + 1 : last + 1]
        rest = segments[last + 1 :]
        usage = {
            "input_tokens": _tokens(rest) if rest else 0,
            "output_tokens": _tokens(item.content),
            "cache_creation_input_tokens": _tokens(written) if written else 0,
            "cache_read_input_tokens": _tokens(read) if read else 0,
        }
        usage.update(item.usage or {})
        return usage

    def _message(self, body: dict[str, Any], item: ScriptMessage) -> dict[str, Any]:
        return {
            "id": f"msg_fake_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": item.content,
            "stop_reason": item.stop_reason,
            "stop_sequence": None,
            "usage": self._usage(body, item),
        }

    def _error_body(self, err: ScriptError | StreamError) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": err.type, "message": err.message},
            "request_id": f"req_fake_{next(self._ids):04d}",
        }

    def _events(
        self, body: dict[str, Any], item: ScriptMessage | StreamError | ConnectionDrop
    ) -> list[Any]:
        """The SSE events for ``item`` as (event name, data) pairs."""
        blocks = item.content if isinstance(item, ScriptMessage) else item.before
        full = item if isinstance(item, ScriptMessage) else ScriptMessage(blocks)
        message = self._message(body, full)
        usage = message["usage"]
        start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
        events: list[Any] = [("message_start", {"type": "message_start", "message": start})]
        events.append(("ping", {"type": "ping"}))
        for index, block in enumerate(blocks):
            events.extend(self._block_events(index, block))
        if isinstance(item, StreamError):
            events.append(("error", self._error_body(item)))
            return events
        if isinstance(item, ConnectionDrop):
            return events
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": item.stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    @staticmethod
    def _block_events(index: int, block: dict[str, Any]) -> list[Any]:
        kind = block.get("type")
        events: list[Any] = []

        def delta(d: dict[str, Any]) -> None:
            events.append(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            )

        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            events.append(("content_block_start", _start(index, start)))
            for chunk in _chunks(block.get("text", "")):
                delta({"type": "text_delta", "text": chunk})
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            events.append(("content_block_start", _start(index, start)))
            # Like the API: an empty first fragment, then the JSON cut anywhere.
            delta({"type": "input_json_delta", "partial_json": ""})
            for chunk in _chunks(json.dumps(block.get("input", {})), pieces=5):
                delta({"type": "input_json_delta", "partial_json": chunk})
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            events.append(("content_block_start", _start(index, start)))
            for chunk in _chunks(block.get("thinking", "")):
                delta({"type": "thinking_delta", "thinking": chunk})
            delta({"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            events.append(("content_block_start", _start(index, block)))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        return events

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "FakeMessagesAPI/1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError as err:
                    body = {"_unparsable": raw.decode("utf-8", "replace")}
                    with api._lock:
                        api.requests.append(body)
                        api.headers.append({k.lower(): v for k, v in self.headers.items()})
                    api._send_error(self, ScriptError(400, "invalid_request_error", str(err)))
                    return
                path = self.path.split("?", 1)[0]
                if path == "/v1/messages/count_tokens" and api.count_tokens:
                    with api._lock:
                        api.count_requests.append(body)
                    if not api.api_key_of({k.lower(): v for k, v in self.headers.items()}):
                        api._send_error(
                            self,
                            ScriptError(401, "authentication_error", "x-api-key header is required"),
                        )
                        return
                    api._send_json(self, 200, {"input_tokens": api.input_tokens(body)})
                    return
                with api._lock:
                    api.requests.append(body)
                    api.headers.append({k.lower(): v for k, v in self.headers.items()})
                if path != "/v1/messages":
                    api._send_error(
                        self, ScriptError(404, "not_found_error", f"no route for {path}")
                    )
                    return
                key = api.api_key_of({k.lower(): v for k, v in self.headers.items()})
                if not key:
                    api._send_error(
                        self,
                        ScriptError(401, "authentication_error", "x-api-key header is required"),
                    )
                    return
                if api.require_key is not None and key != api.require_key:
                    api._send_error(
                        self, ScriptError(401, "authentication_error", "invalid x-api-key")
                    )
                    return
                api._answer(self, body)

        return Handler

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        item = self._next_item(body)
        if isinstance(item, ScriptError):
            self._send_error(handler, item)
            return
        if not body.get("stream"):
            if isinstance(item, ConnectionDrop):
                handler.close_connection = True
                return  # no status line at all: the client sees the socket close
            if isinstance(item, StreamError):
                self._send_error(handler, ScriptError(item.status, item.type, item.message))
                return
            self._send_json(handler, 200, self._message(body, item))
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("request-id", f"req_fake_{next(self._ids):04d}")
        handler.send_header("connection", "close")
        handler.end_headers()
        try:
            for name, data in self._events(body, item):
                payload = f"event: {name}\ndata: {json.dumps(data)}\n\n"
                handler.wfile.write(payload.encode())
                handler.wfile.flush()
                if self.event_delay:
                    time.sleep(self.event_delay)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. Ctrl-C); nothing to tell it

    def _send_json(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("request-id", f"req_fake_{next(self._ids):04d}")
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _send_error(self, handler: BaseHTTPRequestHandler, err: ScriptError) -> None:
        headers = {}
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        headers.update(err.headers)
        self._send_json(handler, err.status, self._error_body(err), headers)


def _start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


# --------------------------------------------------------------------------- standalone


def _load_script(api: FakeMessagesAPI, items: list[dict[str, Any]]) -> None:
    for n, item in enumerate(items):
        if "text" in item:
            api.enqueue_text(str(item["text"]))
        elif "tool_use" in item:
            call = item["tool_use"]
            api.enqueue_tool_use(call["name"], call.get("input", {}), call.get("text"))
        elif "error" in item:
            err = item["error"]
            api.enqueue_error(int(err["status"]), err["type"], err.get("message", err["type"]))
        elif "content" in item:
            api.enqueue(ScriptMessage(item["content"], item.get("stop_reason", "end_turn")))
        else:
            raise SystemExit(f"script item {n} is not text/tool_use/error/content: {item!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a scripted Anthropic Messages API.")
    parser.add_argument("script", help="JSON file: a list of text/tool_use/error/content items")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any)")
    parser.add_argument(
        "--delay", type=float, default=0.03, help="seconds between stream events (default 0.03)"
    )
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as fh:
        items = json.load(fh)
    if not isinstance(items, list):
        raise SystemExit("the script must be a JSON list")
    api = FakeMessagesAPI(port=args.port, event_delay=args.delay)
    _load_script(api, items)
    with api:
        print(f"export ANTHROPIC_BASE_URL={api.base_url} ANTHROPIC_API_KEY=fake-key", flush=True)
        print(f"{api.pending} scripted responses; Ctrl-C to stop", file=sys.stderr, flush=True)
        seen = 0
        try:
            while True:
                time.sleep(0.2)
                while seen < len(api.requests):
                    body = api.requests[seen]
                    seen += 1
                    last = (body.get("messages") or [{}])[-1]
                    print(
                        f"request #{seen}: model={body.get('model')} stream={body.get('stream')} "
                        f"messages={len(body.get('messages') or [])} "
                        f"last={json.dumps(last.get('content'))[:120]} "
                        f"({api.pending} left)",
                        file=sys.stderr,
                        flush=True,
                    )
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
