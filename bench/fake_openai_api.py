"""A real local HTTP server that speaks OpenAI's Chat Completions API (and Ollama's own
routes), for tests and benchmarks: the counterpart of ``fake_messages_api``.

Not a test module: tests and benchmarks point the real ``openai`` SDK at it
(``--base-url server.base_url`` / ``OPENAI_BASE_URL``, any key), or the ``ollama``
provider (``OLLAMA_HOST=server.root_url``).

Invariants:
- ``POST /v1/embeddings`` answers a deterministic bag-of-words vector per input
  (``fake_embeddings``).
- Every POST to ``/v1/chat/completions`` is recorded (parsed JSON body in
  ``.requests``, headers in ``.headers``) before it is answered, including those
  that get an error, so a test can assert on what the client sent.
- Answers come from a FIFO script, one item per request. ``"stream": true`` gets
  ``text/event-stream`` chunks as OpenAI sends them: a first chunk with the role,
  the text split into several ``content`` deltas, each tool call opened by a chunk
  with its ``index``, ``id`` and name and then its ``arguments`` cut anywhere
  (mid-token) over several chunks, a last chunk with ``finish_reason``, a usage
  chunk with no choices when ``stream_options.include_usage`` asks for it, then
  ``data: [DONE]``. Otherwise the same answer as one ``chat.completion`` object.
- Errors use OpenAI's shape (``{"error": {"message", "type", "code"}}``) with
  ``retry-after-ms`` (10 ms by default) so retries are fast in tests;
  ``fail_forever`` answers every later request with one status.
- Nothing is ever invented: an empty script answers 500 with a message naming the
  problem and ``x-should-retry: false``, so a test that enqueued too few answers
  fails at once instead of hanging or retrying.
- ``require_key`` makes a request without ``Authorization: Bearer <that key>`` a
  401; by default any key (or none) is accepted, as local servers do.
- Ollama's native routes answer from ``ollama_models``: ``POST /api/show`` (the
  model's ``capabilities``, ``model_info`` with ``<arch>.context_length``, and
  ``parameters`` with ``num_ctx`` when set; 404 for a model it does not have) and
  ``GET /api/tags`` (the local models). Those calls go to ``.native_requests``.

Run standalone for manual testing::

    python bench/fake_openai_api.py script.json [--port 8766] [--delay 0.03]

where ``script.json`` is a list of ``{"text": "..."}``, ``{"tool_calls": [{"name": ...,
"arguments": {...} or "raw text"}], "text": "optional"}`` or ``{"error": {"status": 429,
"message": "..."}}`` items.
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

__all__ = ["ChatDrop", "ChatError", "ChatReply", "FakeOpenAIAPI", "OllamaModel", "ToolCall"]

DEFAULT_RETRY_AFTER_MS = 10


@dataclass
class ToolCall:
    """One tool call of an answer; ``arguments`` is the raw text sent (valid JSON or not)."""

    name: str
    arguments: str
    id: str = ""


@dataclass
class ChatReply:
    """A successful answer: text and/or tool calls."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    usage: dict[str, Any] | None = None  # overrides the simulated numbers


@dataclass
class ChatError:
    """An HTTP error answer."""

    status: int
    message: str
    type: str = "server_error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ChatDrop:
    """The server hangs up: a stream stops after ``text_before`` without a finish_reason
    or ``[DONE]``; a plain request gets no answer at all."""

    text_before: str = ""


@dataclass
class OllamaModel:
    """A model the Ollama-shaped routes report."""

    name: str
    capabilities: tuple[str, ...] = ("completion", "tools")
    context_length: int | None = 40960
    num_ctx: int | None = None
    arch: str = "qwen3"


ScriptItem = ChatReply | ChatError | ChatDrop | Callable[[dict[str, Any]], Any]
Answer = ChatReply | ChatError | ChatDrop


def _tokens(obj: Any) -> int:
    """A rough token count: ~4 characters per token."""
    return max(1, len(json.dumps(obj, sort_keys=True)) // 4)


def _chunks(text: str, pieces: int) -> list[str]:
    """``text`` split into up to ``pieces`` consecutive non-empty chunks."""
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


class FakeOpenAIAPI(ScriptedServer[ScriptItem]):
    """A scripted Chat Completions (and Ollama) server on 127.0.0.1; use as a context manager."""

    thread_name = "fake-openai-api"

    def __init__(
        self,
        *,
        require_key: str | None = None,
        retry_after_ms: int | None = DEFAULT_RETRY_AFTER_MS,
        event_delay: float = 0.0,
        port: int = 0,
        ollama_models: list[OllamaModel] | None = None,
    ) -> None:
        self.require_key = require_key
        self.retry_after_ms = retry_after_ms
        self.event_delay = event_delay  # seconds between SSE chunks (for demos)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.native_requests: list[tuple[str, dict[str, Any]]] = []
        self.ollama_models = {m.name: m for m in ollama_models or []}
        self._forever: ChatError | None = None
        self._ids = itertools.count(1)
        super().__init__(self._handler_class(), port=port)

    # -- lifecycle -----------------------------------------------------------

    @property
    def root_url(self) -> str:
        """Where Ollama's native routes are (``OLLAMA_HOST``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``--base-url`` / ``OPENAI_BASE_URL``)."""
        return f"{self.root_url}/v1"

    # -- scripting -----------------------------------------------------------

    def enqueue_text(self, text: str, *, finish_reason: str = "stop",
                     usage: dict[str, Any] | None = None) -> None:
        self.enqueue(ChatReply(text, finish_reason=finish_reason, usage=usage))

    def enqueue_tool_calls(
        self, calls: list[tuple[str, dict[str, Any] | str]], text: str = "",
        *, usage: dict[str, Any] | None = None,
    ) -> list[str]:
        """Script one answer with these tool calls (a dict is sent as JSON, a string as
        is, malformed or not); returns their ids."""
        made = [ToolCall(name, args if isinstance(args, str) else json.dumps(args),
                         f"call_fake_{next(self._ids):04d}") for name, args in calls]
        self.enqueue(ChatReply(text, made, usage=usage))
        return [c.id for c in made]

    def enqueue_tool_call(self, name: str, args: dict[str, Any] | str, text: str = "") -> str:
        return self.enqueue_tool_calls([(name, args)], text)[0]

    def enqueue_error(self, status: int, message: str, *, type: str = "server_error",
                      times: int = 1, headers: dict[str, str] | None = None) -> None:
        for _ in range(times):
            self.enqueue(ChatError(status, message, type, dict(headers or {})))

    def enqueue_drop(self, *, text_before: str = "") -> None:
        self.enqueue(ChatDrop(text_before))

    def enqueue_callable(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        """``fn(body)`` decides the answer: a ``ChatReply``/``ChatError``/``ChatDrop`` or a string."""
        self.enqueue(fn)

    def fail_forever(self, status: int = 500, message: str = "internal error") -> None:
        """Every request from now on (script or not) answers ``status``."""
        with self._lock:
            self._forever = ChatError(status, message)

    # -- answering -----------------------------------------------------------

    def _next_item(self, body: dict[str, Any]) -> Answer:
        with self._lock:
            if self._forever is not None:
                return self._forever
            item = self._script.popleft() if self._script else None
            number = len(self.requests)
        if item is None:
            return ChatError(500, f"FakeOpenAIAPI: no scripted response left for request #{number} "
                                  "(the test enqueued too few responses)",
                             headers={"x-should-retry": "false"})
        if isinstance(item, Answer):
            return item
        result = item(body)
        if isinstance(result, str):
            return ChatReply(result)
        if isinstance(result, Answer):
            return result
        return ChatError(500, f"FakeOpenAIAPI: the scripted callable returned {result!r}",
                         headers={"x-should-retry": "false"})

    def _usage(self, body: dict[str, Any], reply: ChatReply) -> dict[str, Any]:
        prompt = _tokens([body.get("messages"), body.get("tools")])
        completion = _tokens([reply.text, [(c.name, c.arguments) for c in reply.tool_calls]])
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                 "total_tokens": prompt + completion,
                                 "prompt_tokens_details": {"cached_tokens": 0}}
        usage.update(reply.usage or {})
        return usage

    @staticmethod
    def _finish(reply: ChatReply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _completion(self, body: dict[str, Any], reply: ChatReply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.tool_calls
            ]
        return {
            "id": f"chatcmpl-fake{next(self._ids):04d}", "object": "chat.completion",
            "created": 1_700_000_000, "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
            "usage": self._usage(body, reply),
        }

    def _stream_chunks(self, body: dict[str, Any], item: ChatReply | ChatDrop) -> list[dict[str, Any]]:
        ident = f"chatcmpl-fake{next(self._ids):04d}"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": ident, "object": "chat.completion.chunk", "created": 1_700_000_000,
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        text = item.text if isinstance(item, ChatReply) else item.text_before
        out = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"content": piece}) for piece in _chunks(text, 4)]
        if isinstance(item, ChatDrop):
            return out
        for index, call in enumerate(item.tool_calls):
            out.append(chunk({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                              "function": {"name": call.name, "arguments": ""}}]}))
            for piece in _chunks(call.arguments, 5):
                out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        out.append(chunk({}, self._finish(item)))
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append({"id": ident, "object": "chat.completion.chunk", "created": 1_700_000_000,
                        "model": body.get("model", "fake"), "choices": [],
                        "usage": self._usage(body, item)})
        return out

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "FakeOpenAIAPI/1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                with api._lock:
                    api.native_requests.append((path, {}))
                if path == "/api/tags":
                    models = [{"name": m.name, "model": m.name, "size": 1,
                               "details": {"family": m.arch}} for m in api.ollama_models.values()]
                    api._send_json(self, 200, {"models": models})
                elif path == "/v1/models":
                    data = [{"id": n, "object": "model", "owned_by": "fake"} for n in api.ollama_models]
                    api._send_json(self, 200, {"object": "list", "data": data})
                else:
                    api._send_json(self, 404, {"error": f"no route for {path}"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                path = self.path.split("?", 1)[0]
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError as err:
                    with api._lock:
                        api.requests.append({"_unparsable": raw.decode("utf-8", "replace")})
                        api.headers.append(headers)
                    api._send_error(self, ChatError(400, str(err), "invalid_request_error"))
                    return
                if path == "/api/show":
                    with api._lock:
                        api.native_requests.append((path, body))
                    api._show(self, body)
                    return
                with api._lock:
                    api.requests.append(body)
                    api.headers.append(headers)
                if path == "/v1/embeddings":
                    api._send_json(self, 200, fake_embeddings(body))
                    return
                if path != "/v1/chat/completions":
                    api._send_error(self, ChatError(404, f"no route for {path}", "not_found"))
                    return
                auth = headers.get("authorization", "")
                if api.require_key is not None and auth != f"Bearer {api.require_key}":
                    api._send_error(self, ChatError(401, "Incorrect API key provided", "invalid_api_key"))
                    return
                api._answer(self, body)

        return Handler


    def _show(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        model = self.ollama_models.get(str(body.get("model") or body.get("name") or ""))
        if model is None:
            self._send_json(handler, 404, {"error": f"model '{body.get('model')}' not found"})
            return
        info: dict[str, Any] = {"general.architecture": model.arch}
        if model.context_length is not None:
            info[f"{model.arch}.context_length"] = model.context_length
        parameters = "stop \"<|im_end|>\""
        if model.num_ctx is not None:
            parameters = f"num_ctx {model.num_ctx}\n{parameters}"
        self._send_json(handler, 200, {
            "modelfile": "", "parameters": parameters, "template": "",
            "details": {"family": model.arch, "format": "gguf"},
            "model_info": info, "capabilities": list(model.capabilities),
        })

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        item = self._next_item(body)
        if isinstance(item, ChatError):
            self._send_error(handler, item)
            return
        if not body.get("stream"):
            if isinstance(item, ChatDrop):
                handler.close_connection = True
                return  # no status line at all: the client sees the socket close
            self._send_json(handler, 200, self._completion(body, item))
            return
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("connection", "close")
        handler.end_headers()
        try:
            for data in self._stream_chunks(body, item):
                handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
                handler.wfile.flush()
                if self.event_delay:
                    time.sleep(self.event_delay)
            if isinstance(item, ChatReply):
                handler.wfile.write(b"data: [DONE]\n\n")
                handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away; nothing to tell it
        handler.close_connection = True

    @staticmethod
    def _send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any],
                   headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _send_error(self, handler: BaseHTTPRequestHandler, err: ChatError) -> None:
        headers = {}
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        headers.update(err.headers)
        self._send_json(handler, err.status,
                        {"error": {"message": err.message, "type": err.type, "param": None,
                                   "code": None}}, headers)


# --------------------------------------------------------------------------- standalone


def _load_script(api: FakeOpenAIAPI, items: list[dict[str, Any]]) -> None:
    for n, item in enumerate(items):
        if "tool_calls" in item:
            calls = [(c["name"], c.get("arguments", {})) for c in item["tool_calls"]]
            api.enqueue_tool_calls(calls, str(item.get("text", "")))
        elif "text" in item:
            api.enqueue_text(str(item["text"]))
        elif "error" in item:
            err = item["error"]
            api.enqueue_error(int(err["status"]), str(err.get("message", "error")))
        else:
            raise SystemExit(f"script item {n} is not text/tool_calls/error: {item!r}")


EMBEDDING_DIM = 32


def fake_embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """``/v1/embeddings``: each input's words hashed into ``EMBEDDING_DIM`` buckets (a
    deterministic bag of words: texts sharing words are close), in OpenAI's shape. The
    request is recorded in ``.requests`` like any other."""
    raw = body.get("input", [])
    inputs = [raw] if isinstance(raw, str) else list(raw)
    data = []
    for index, item in enumerate(inputs):
        vec = [0.0] * EMBEDDING_DIM
        for word in str(item).lower().split():
            word = "".join(ch for ch in word if ch.isalnum())
            if word:
                vec[int(hashlib.sha256(word.encode()).hexdigest(), 16) % EMBEDDING_DIM] += 1.0
        data.append({"object": "embedding", "index": index, "embedding": vec})
    return {"object": "list", "data": data, "model": body.get("model", "fake"),
            "usage": {"prompt_tokens": 0, "total_tokens": 0}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a scripted OpenAI Chat Completions API.")
    parser.add_argument("script", help="JSON file: a list of text/tool_calls/error items")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any)")
    parser.add_argument("--delay", type=float, default=0.03, help="seconds between stream chunks")
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as fh:
        items = json.load(fh)
    if not isinstance(items, list):
        raise SystemExit("the script must be a JSON list")
    api = FakeOpenAIAPI(port=args.port, event_delay=args.delay)
    _load_script(api, items)
    with api:
        print(f"memagent chat --model openai-compatible/fake --base-url {api.base_url}", flush=True)
        print(f"{api.pending} scripted responses; Ctrl-C to stop", file=sys.stderr, flush=True)
        try:
            while True:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
