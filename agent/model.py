"""The model client: one Messages API call in, one plain-dict response out.

Invariants:
- ``respond`` returns API-shaped plain dicts (``{"type": "text", ...}``,
  ``{"type": "tool_use", ...}``, thinking blocks verbatim), never SDK objects,
  so responses can be stored in the thread table and sent back unchanged.
  Thinking blocks must go back exactly as received (the API checks their
  signatures), so blocks other than text and tool_use are passed through
  whole.
- The caller's ``system``, ``messages`` and ``tools`` are never mutated; the
  cache breakpoint this module adds to the last tool goes on a copy.
- Every failure leaves as a ``ModelError`` whose message is one line a person
  can act on; no SDK exception or traceback escapes ``respond``
  (``KeyboardInterrupt`` and exceptions raised by the caller's own callbacks
  excepted: those are the caller's).
- Retries are the SDK's (``max_retries``; 408/409/429/5xx/529 and connection
  errors). They are made visible through the SDK's public middleware hook,
  which runs once per HTTP attempt inside the SDK's retry loop and sees each
  error response before the SDK sleeps; ``on_retry`` is called there, before
  the wait. A failure inside an already-open stream (the API's
  ``overloaded_error`` event mid-stream, or a body that ends before
  ``message_stop``) is outside the SDK's retry loop; it is retried here, with
  the same budget, but only while no text has been passed to ``on_text`` (a
  retry after visible output would repeat it). A cut-off stream is never
  returned as if it were a complete answer.
- API key and base URL come from the SDK's own environment variables
  (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``).
"""

from __future__ import annotations

import contextvars
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import anthropic

__all__ = [
    "DEFAULT_MODEL",
    "AnthropicModel",
    "Model",
    "ModelError",
    "ModelResponse",
    "Usage",
    "api_key_configured",
]

# The current Sonnet (platform.claude.com model overview). Note it runs adaptive
# thinking by default: responses can carry ``thinking`` blocks, which the loop
# must keep in the assistant message it sends back.
DEFAULT_MODEL = "claude-sonnet-5-5"

# The SDK's documented backoff when the server sends no retry-after header:
# 0.5 s doubling per retry, capped at 8 s (minus up to 25 % jitter). Used only
# to word the "retrying in ~Xs" note and for our own mid-stream retries.
_INITIAL_RETRY_DELAY = 0.5
_MAX_RETRY_DELAY = 8.0

# Error types the API sends in a stream's ``error`` event that are worth another
# try, mapped to the HTTP status they would have had outside a stream.
_RETRYABLE_STREAM_ERRORS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
}

_ONE_LINE_LIMIT = 300


@dataclass
class Usage:
    """Token counts as the API reports them; ``input_tokens`` excludes cached tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens

    @property
    def total_input_tokens(self) -> int:
        """Prompt size: uncached + cache-written + cache-read input tokens."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_api(cls, usage: Any) -> Usage:
        """From an SDK ``Usage`` object or its dict form; missing/None counts are 0."""

        def get(name: str) -> int:
            value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
            return int(value) if isinstance(value, int) else 0

        return cls(
            input_tokens=get("input_tokens"),
            output_tokens=get("output_tokens"),
            cache_creation_input_tokens=get("cache_creation_input_tokens"),
            cache_read_input_tokens=get("cache_read_input_tokens"),
        )


@dataclass
class ModelResponse:
    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str

    @property
    def text(self) -> str:
        """All text blocks joined (without separators)."""
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


class ModelError(Exception):
    """A model call failed; ``str(err)`` is one line for a person, no traceback.

    ``status`` is the HTTP status when there was one (0 for connection
    failures and configuration problems).
    """

    def __init__(self, message: str, *, status: int = 0) -> None:
        super().__init__(_one_line(message))
        self.status = status


class Model(Protocol):
    name: str

    def respond(
        self,
        *,
        system: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int = 4096,
        on_text: Callable[[str], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> ModelResponse: ...


def api_key_configured() -> bool:
    """True when the SDK will find a static credential in the environment."""
    return any(
        os.environ.get(var, "").strip() for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    )


# --------------------------------------------------------------------------- retries


@dataclass
class _CallState:
    """Per-``respond`` bookkeeping shared with the middleware (same thread)."""

    on_retry: Callable[[str], None] | None
    max_retries: int
    attempts: int = 0  # HTTP attempts made (the middleware counts them)


# The sync SDK runs the middleware chain in the calling thread, so a context
# variable ties each attempt to the ``respond`` call that made it, even when
# several threads share one AnthropicModel.
_CURRENT_CALL: contextvars.ContextVar[_CallState | None] = contextvars.ContextVar(
    "memagent_model_call", default=None
)


def _sdk_will_retry_status(status: int, headers: Mapping[str, str]) -> bool:
    """The SDK's documented retry policy for an error response."""
    should = headers.get("x-should-retry")
    if should == "true":
        return True
    if should == "false":
        return False
    return status in (408, 409, 429) or status >= 500


def _retry_delay(headers: Mapping[str, str] | None, retries_taken: int) -> tuple[float, bool]:
    """(seconds, exact) the SDK will wait: the server's retry-after if given, else its backoff."""
    if headers is not None:
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            raw = headers.get(name)
            if raw is None:
                continue
            try:
                value = float(raw) * scale
            except ValueError:
                continue
            if value > 0:
                return value, True
    return min(_INITIAL_RETRY_DELAY * 2.0**retries_taken, _MAX_RETRY_DELAY), False


def _describe_status(status: int) -> str:
    if status == 529:
        return "model API overloaded (529)"
    if status == 429:
        return "rate limited by the model API (429)"
    if status == 408:
        return "model API request timed out (408)"
    if status == 409:
        return "model API conflict (409)"
    return f"model API error ({status})"


def _retry_note(what: str, delay: float, exact: bool, attempt: int, total: int) -> str:
    amount = f"{delay * 1000:.0f}ms" if delay < 0.1 else f"{delay:.1f}s"
    when = amount if exact else f"~{amount}"
    return f"{what}, retrying in {when} (attempt {attempt} of {total})"


class _RetryNotifier(anthropic.Middleware):
    """Counts attempts and announces each retry the SDK is about to make."""

    def __init__(self, default_max_retries: int) -> None:
        self._default_max_retries = default_max_retries

    def handle(self, request: Any, call_next: Any) -> Any:
        state = _CURRENT_CALL.get()
        if state is not None:
            state.attempts += 1
        max_retries = (
            request.max_retries
            if isinstance(request.max_retries, int)
            else self._default_max_retries
        )
        retries_left = request.retries_taken < max_retries
        try:
            response = call_next(request)
        except anthropic.APIConnectionError as err:
            # The SDK retries every connection failure and timeout.
            if state is not None and state.on_retry is not None and retries_left:
                delay, exact = _retry_delay(None, request.retries_taken)
                what = (
                    "model API timed out"
                    if isinstance(err, anthropic.APITimeoutError)
                    else "cannot reach the model API"
                )
                state.on_retry(
                    _retry_note(what, delay, exact, request.retries_taken + 2, max_retries + 1)
                )
            raise
        status = response.status_code
        if (
            status >= 400
            and state is not None
            and state.on_retry is not None
            and retries_left
            and _sdk_will_retry_status(status, response.headers)
        ):
            delay, exact = _retry_delay(response.headers, request.retries_taken)
            state.on_retry(
                _retry_note(
                    _describe_status(status),
                    delay,
                    exact,
                    request.retries_taken + 2,
                    max_retries + 1,
                )
            )
        return response


# --------------------------------------------------------------------------- errors


def _one_line(text: str) -> str:
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= _ONE_LINE_LIMIT else line[: _ONE_LINE_LIMIT - 1] + "…"


def _api_error_detail(err: anthropic.APIStatusError) -> tuple[str, str]:
    """(error type, message) from the API's JSON error body, best effort."""
    body = err.body
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            return str(inner.get("type") or ""), str(inner.get("message") or "")
    return "", str(body) if isinstance(body, str) else ""


def _credential_var() -> str:
    if os.environ.get("ANTHROPIC_API_KEY", "").strip():
        return "ANTHROPIC_API_KEY"
    if os.environ.get("ANTHROPIC_AUTH_TOKEN", "").strip():
        return "ANTHROPIC_AUTH_TOKEN"
    return "the API credential"


def _status_error_message(
    status: int, err_type: str, message: str, *, model: str, attempts: int
) -> str:
    detail = f": {message}" if message else ""
    # "and 5 attempts failed" only when the SDK actually retried.
    tried = f" and {attempts} attempts failed" if attempts > 1 else ""
    if status == 529 or err_type == "overloaded_error":
        return f"the model API is overloaded (529){tried}; try again in a minute"
    if status == 429 or err_type == "rate_limit_error":
        return f"rate limited by the model API (429){tried}{detail}; wait a minute and try again"
    if status == 401 or err_type == "authentication_error":
        return f"{_credential_var()} was rejected (401); check the key"
    if status == 403 or err_type == "permission_error":
        return f"the model API refused access (403){detail}; check the key's permissions"
    if status == 404 or err_type == "not_found_error":
        return f"model {model!r} was not found (404){detail}; check --model / MEMAGENT_MODEL"
    if status == 413 or err_type == "request_too_large":
        return f"the request is too large for the model API (413){detail}"
    if status == 400 or err_type == "invalid_request_error":
        return f"the model API rejected the request (400){detail}"
    if status >= 500 or err_type in ("api_error", "timeout_error"):
        shown = status if status >= 500 else 500
        return f"the model API failed with a server error ({shown}){tried}{detail}; try again later"
    return f"the model API answered {status}{detail}"


# --------------------------------------------------------------------------- conversion


def _block_to_dict(block: Any) -> dict[str, Any]:
    """One SDK content block as the plain dict the API would accept back."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        raw_input = block.input
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": dict(raw_input) if isinstance(raw_input, Mapping) else {},
        }
    # thinking / redacted_thinking / server tool blocks: verbatim, minus SDK-only
    # None fields, so they can be sent back as received.
    dumped: dict[str, Any] = block.to_dict(mode="json", exclude_none=True)
    dumped.pop("parsed_output", None)
    return dumped


def _to_response(message: Any, fallback_model: str) -> ModelResponse:
    return ModelResponse(
        content=[_block_to_dict(b) for b in message.content],
        stop_reason=str(message.stop_reason or "end_turn"),
        usage=Usage.from_api(message.usage),
        model=str(getattr(message, "model", None) or fallback_model),
    )


def _with_tool_cache_breakpoint(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of ``tools`` whose last definition carries an ephemeral cache breakpoint."""
    marked = list(tools)
    last = dict(marked[-1])
    # A breakpoint the caller chose (e.g. a 1h TTL) wins over ours.
    last.setdefault("cache_control", {"type": "ephemeral"})
    marked[-1] = last
    return marked


class _MidStreamError(Exception):
    """The stream opened but did not finish: an ``error`` event (``error``) or a
    broken connection / missing ``message_stop`` (``broken``). ``emitted`` says
    whether text already went to ``on_text``."""

    def __init__(
        self,
        *,
        emitted: bool,
        error: anthropic.APIStatusError | None = None,
        broken: str = "",
    ) -> None:
        super().__init__(str(error) if error is not None else broken)
        self.error = error
        self.broken = broken
        self.emitted = emitted


# --------------------------------------------------------------------------- the client


class AnthropicModel:
    """``Model`` over the Anthropic Messages API through the official SDK."""

    # Seconds before a mid-stream retry (doubling, capped); tests shrink it.
    _stream_retry_base: float = _INITIAL_RETRY_DELAY

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        *,
        stream: bool = True,
        max_retries: int = 4,
        client: anthropic.Anthropic | None = None,
        timeout: float = 600,
    ) -> None:
        self.name = name
        self.stream = stream
        self.max_retries = max_retries
        try:
            base = client if client is not None else anthropic.Anthropic()
        except anthropic.AnthropicError as err:
            # e.g. the SDK's credential chain found a broken or missing profile.
            raise ModelError(
                "cannot set up the model client (set ANTHROPIC_API_KEY, or fix the "
                f"SDK's credentials profile): {err}"
            ) from None
        # ``copy`` keeps the caller's credentials/base URL and applies our retry
        # budget and timeout; the notifier goes last so it sees raw attempts.
        self._client = base.copy(
            max_retries=max_retries,
            # A short connect timeout so an unreachable host fails in seconds,
            # not after the full read timeout.
            timeout=anthropic.Timeout(timeout, connect=min(10.0, timeout)),
            middleware=[*base.middleware, _RetryNotifier(max_retries)],
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def respond(
        self,
        *,
        system: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int = 4096,
        on_text: Callable[[str], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> ModelResponse:
        params: dict[str, Any] = {
            "model": self.name,
            "max_tokens": max_tokens,
            "messages": messages,
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = _with_tool_cache_breakpoint(tools)

        state = _CallState(on_retry=on_retry, max_retries=self.max_retries)
        with self._call_state(state):
            stream_retries = 0
            while True:
                try:
                    if self.stream:
                        message = self._stream_once(params, on_text)
                    else:
                        message = self._client.messages.create(**params)
                    return _to_response(message, self.name)
                except _MidStreamError as mid:
                    what = self._mid_stream_retry_reason(mid)
                    if what and not mid.emitted and stream_retries < self.max_retries:
                        delay = min(self._stream_retry_base * 2.0**stream_retries, _MAX_RETRY_DELAY)
                        stream_retries += 1
                        if on_retry is not None:
                            on_retry(
                                _retry_note(
                                    what, delay, True, stream_retries + 1, self.max_retries + 1
                                )
                            )
                        time.sleep(delay)
                        continue
                    if mid.error is not None:
                        raise self._error_from_status(
                            mid.error, attempts=stream_retries + 1, partial=mid.emitted
                        ) from None
                    shown = " after part of the answer was shown" if mid.emitted else ""
                    raise ModelError(
                        f"the connection to the model API broke off{shown}: {mid.broken}; try again"
                    ) from None
                except anthropic.APIStatusError as err:
                    raise self._error_from_status(err, attempts=state.attempts) from None
                except anthropic.APITimeoutError:
                    raise ModelError(
                        f"the model API at {self.base_url} did not answer in time "
                        f"({state.attempts} attempts); try again"
                    ) from None
                except anthropic.APIConnectionError as err:
                    raise ModelError(
                        f"cannot reach the model API at {self.base_url}: {_connection_cause(err)}"
                    ) from None
                except anthropic.APIResponseValidationError as err:
                    raise ModelError(
                        f"the model API sent a response this client cannot read: {err}"
                    ) from None
                except anthropic.AnthropicError as err:
                    raise ModelError(f"model API error: {err}") from None
                except TypeError as err:
                    # The SDK raises TypeError when no credential is configured at all.
                    if "authentication method" in str(err):
                        raise ModelError(
                            "no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
                        ) from None
                    raise

    # -- helpers --------------------------------------------------------------

    @staticmethod
    @contextmanager
    def _call_state(state: _CallState) -> Iterator[None]:
        token = _CURRENT_CALL.set(state)
        try:
            yield
        finally:
            _CURRENT_CALL.reset(token)

    def _stream_once(self, params: dict[str, Any], on_text: Callable[[str], None] | None) -> Any:
        emitted = False
        finished = False
        # Opening the stream (the HTTP request and its retries) raises SDK errors
        # directly; failures while reading events become _MidStreamError. The
        # iterator is advanced by hand so that only the SDK's own failures are
        # translated: whatever ``on_text`` raises stays the caller's.
        with self._client.messages.stream(**params) as stream:
            events = iter(stream)
            while True:
                try:
                    event = next(events)
                except StopIteration:
                    break
                except anthropic.APIStatusError as err:  # an ``error`` event
                    raise _MidStreamError(emitted=emitted, error=err) from None
                except ValueError as err:
                    # The SDK could not parse the tool input JSON it accumulated.
                    raise ModelError(f"the model API sent unreadable tool input: {err}") from None
                except Exception as err:  # transport errors while reading the body
                    raise _MidStreamError(
                        emitted=emitted, broken=_one_line(f"{type(err).__name__}: {err}")
                    ) from None
                if event.type == "message_stop":
                    finished = True
                elif (
                    event.type == "content_block_delta"
                    and event.delta.type == "text_delta"
                    and event.delta.text
                ):
                    emitted = True
                    if on_text is not None:
                        on_text(event.delta.text)
            if not finished:
                # The body ended early (connection closed): what arrived is a
                # fragment, not an answer, whatever the partial snapshot says.
                raise _MidStreamError(
                    emitted=emitted, broken="the stream ended before message_stop"
                )
            return stream.get_final_message()

    @staticmethod
    def _mid_stream_retry_reason(mid: _MidStreamError) -> str | None:
        """How to announce a retry of this mid-stream failure; None if not retryable."""
        if mid.error is None:
            return "the answer stream broke off"
        err_type, _ = _api_error_detail(mid.error)
        status = _RETRYABLE_STREAM_ERRORS.get(err_type)
        return f"{_describe_status(status)} during the stream" if status is not None else None

    def _error_from_status(
        self, err: anthropic.APIStatusError, *, attempts: int, partial: bool = False
    ) -> ModelError:
        err_type, message = _api_error_detail(err)
        status = err.status_code
        if status < 400:  # an error event inside a 200 stream
            status = _RETRYABLE_STREAM_ERRORS.get(err_type, 0)
        text = _status_error_message(status, err_type, message, model=self.name, attempts=attempts)
        if partial:
            text = f"the answer was cut off: {text}"
        return ModelError(text, status=status)


def _connection_cause(err: anthropic.APIConnectionError) -> str:
    """The innermost cause's message (e.g. 'Connection refused'), not the SDK's generic text."""
    cause: BaseException | None = err.__cause__
    while cause is not None and cause.__cause__ is not None and str(cause.__cause__):
        cause = cause.__cause__
    text = str(cause) if cause is not None and str(cause) else str(err)
    return text or "connection error"
