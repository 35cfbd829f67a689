"""``Model`` over the Anthropic Messages API, through the official ``anthropic`` SDK.

Invariants (beyond those of ``model.base``):
- Blocks other than text and tool_use (thinking, redacted thinking) are passed
  through whole: the API checks their signatures when they come back.
- The request's ``system``, ``messages`` and ``tools`` are never mutated; the
  cache breakpoints this module adds (the last tool, the last message's last block,
  at most four in all with the caller's) go on copies.
- ``count_tokens`` asks the API's token counting for the same body ``respond``
  would send; it returns None rather than raising, and stops asking a server that
  has no such endpoint.
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
  (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``); a
  ``base_url`` argument (``--base-url``) overrides the latter. Commands build this
  class only through ``registry.build`` (``providers/anthropic.py``).
"""

from __future__ import annotations

import contextvars
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anthropic

from memagent.agent.model import retrying
from memagent.agent.model.base import (
    DEFAULT_MODEL,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextCallback,
    Usage,
    one_line,
)
from memagent.agent.model.startup import api_key_configured  # re-exported: checked before the SDK loads

__all__ = ["DEFAULT_MODEL", "AnthropicModel", "api_key_configured"]

log = logging.getLogger("memagent.agent.model")

# The SDK's documented backoff when the server sends no retry-after header is
# ``retrying.backoff`` (minus up to 25 % jitter): used only to word the "retrying in
# ~Xs" note and for our own mid-stream retries.

# Error types the API sends in a stream's ``error`` event that are worth another
# try, mapped to the HTTP status they would have had outside a stream.
_RETRYABLE_STREAM_ERRORS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
}

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





def _logged(on_retry: TextCallback | None) -> TextCallback:
    """``on_retry`` that also logs the note (so MEMAGENT_LOG=info shows retries)."""

    def note(text: str) -> None:
        log.info("%s", text)
        if on_retry is not None:
            on_retry(text)

    return note


class _RefusedLocally(Exception):
    """A refused connection to a loopback address: raised by the middleware as a type the
    SDK does not retry (nothing listens there; a retry cannot start it)."""


class _RetryNotifier(anthropic.Middleware):
    """Counts attempts and announces each retry the SDK is about to make."""

    def __init__(self, default_max_retries: int, base_url: str) -> None:
        self._default_max_retries = default_max_retries
        self._base_url = base_url

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
            if not isinstance(err, anthropic.APITimeoutError) and retrying.refused_locally(err, self._base_url):
                raise _RefusedLocally(_connection_cause(err)) from None
            # The SDK retries every connection failure and timeout.
            if state is not None and state.on_retry is not None and retries_left:
                delay, exact = retrying.retry_delay(None, request.retries_taken)
                what = (
                    "model API timed out"
                    if isinstance(err, anthropic.APITimeoutError)
                    else "cannot reach the model API"
                )
                state.on_retry(
                    retrying.retry_note(what, delay, exact, request.retries_taken + 2, max_retries + 1)
                )
            raise
        status = response.status_code
        if (
            status >= 400
            and state is not None
            and state.on_retry is not None
            and retries_left
            and retrying.retryable(status, response.headers)
        ):
            delay, exact = retrying.retry_delay(response.headers, request.retries_taken)
            state.on_retry(
                retrying.retry_note(
                    retrying.describe_status(status),
                    delay,
                    exact,
                    request.retries_taken + 2,
                    max_retries + 1,
                )
            )
        return response


# --------------------------------------------------------------------------- errors


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


# (status, API error type, message) for the client errors a person can act on;
# {tried}, {detail}, {credential} and {model} are filled in.
_STATUS_MESSAGES: tuple[tuple[int, str, str], ...] = (
    (529, "overloaded_error", "the model API is overloaded (529){tried}; try again in a minute"),
    (429, "rate_limit_error", "rate limited by the model API (429){tried}{detail}; wait a minute and try again"),
    (401, "authentication_error", "{credential} was rejected (401); check the key"),
    (403, "permission_error", "the model API refused access (403){detail}; check the key's permissions"),
    (404, "not_found_error", "model {model!r} was not found (404){detail}; check --model / MEMAGENT_MODEL"),
    (413, "request_too_large", "the request is too large for the model API (413){detail}"),
    (400, "invalid_request_error", "the model API rejected the request (400){detail}"),
)


def _status_error_message(
    status: int, err_type: str, message: str, *, model: str, attempts: int
) -> str:
    detail = f": {message}" if message else ""
    # "and 5 attempts failed" only when the SDK actually retried.
    tried = f" and {attempts} attempts failed" if attempts > 1 else ""
    # The HTTP status decides; the error type only when the status says less (an
    # HTTP 500 whose body says "overloaded_error" is still reported as a 500).
    for code, kind, text in _STATUS_MESSAGES:
        if status == code or (err_type == kind and status < 500):
            return text.format(tried=tried, detail=detail, credential=_credential_var(), model=model)
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


# The API accepts at most this many cache_control breakpoints per request.
_MAX_BREAKPOINTS = 4


def _breakpoints(items: Any) -> int:
    """How many ``cache_control`` marks ``items`` (blocks, messages, tools) carry."""
    if isinstance(items, dict):
        return ("cache_control" in items) + sum(_breakpoints(v) for k, v in items.items() if k == "content")
    if isinstance(items, list):
        return sum(_breakpoints(i) for i in items)
    return 0


def _with_message_cache_breakpoint(messages: list[dict[str, Any]], used: int) -> list[dict[str, Any]]:
    """A copy of ``messages`` whose last block carries a breakpoint, if one is left.

    The conversation so far is then read from the cache by the next request, which
    repeats it and adds to it; tools, system prompt and running summary keep their
    own breakpoints, so a new summary does not invalidate the memory part.
    """
    if used >= _MAX_BREAKPOINTS or not messages:
        return messages
    last = messages[-1]
    content = last.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[-1], dict):
        return messages
    if content[-1].get("type") in ("thinking", "redacted_thinking"):
        return messages
    block = dict(content[-1])
    block.setdefault("cache_control", {"type": "ephemeral"})
    return [*messages[:-1], {**last, "content": [*content[:-1], block]}]


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
    _stream_retry_base: float = retrying.INITIAL_RETRY_DELAY

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        *,
        stream: bool = True,
        max_retries: int = 4,
        client: anthropic.Anthropic | None = None,
        timeout: float = 600,
        base_url: str | None = None,
    ) -> None:
        self.name = name
        self.stream = stream
        self.max_retries = max_retries
        self._can_count = True
        try:
            # base_url None: the SDK reads ANTHROPIC_BASE_URL (or its default).
            base = client if client is not None else anthropic.Anthropic(base_url=base_url)
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
            middleware=[*base.middleware, _RetryNotifier(max_retries, str(base.base_url))],
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        params = self._params(request)
        params["max_tokens"] = request.max_tokens

        state = _CallState(on_retry=_logged(on_retry), max_retries=self.max_retries)
        on_retry = state.on_retry
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
                        delay = retrying.backoff(stream_retries, self._stream_retry_base)
                        stream_retries += 1
                        if on_retry is not None:
                            on_retry(
                                retrying.retry_note(
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
                except _RefusedLocally:
                    raise ModelError(
                        f"cannot reach the model API at {self.base_url}: the connection was refused "
                        "(nothing listens there; start the server or fix ANTHROPIC_BASE_URL)"
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

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        """model, system, tools and messages as sent, with the cache breakpoints."""
        params: dict[str, Any] = {"model": self.name}
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = _with_tool_cache_breakpoint(request.tools)
        used = _breakpoints(params.get("system", [])) + _breakpoints(params.get("tools", [])) \
            + _breakpoints(request.messages)
        params["messages"] = _with_message_cache_breakpoint(request.messages, used)
        return params

    def count_tokens(self, request: ModelRequest) -> int | None:
        """The request's input tokens by the API's own counting; None when it cannot say.

        One short call (10 s, one retry); an endpoint the server does not have (a
        proxy, an old gateway) is not asked again.
        """
        if not self._can_count:
            return None
        params = self._params(request)
        try:
            counted = self._client.with_options(timeout=10.0, max_retries=1).messages.count_tokens(**params)
        except anthropic.NotFoundError:
            self._can_count = False
            return None
        except (anthropic.AnthropicError, TypeError) as err:
            log.info("count_tokens failed: %s", one_line(str(err)))
            return None
        n = getattr(counted, "input_tokens", None)
        return n if isinstance(n, int) else None

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
                        emitted=emitted, broken=one_line(f"{type(err).__name__}: {err}")
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
        return f"{retrying.describe_status(status)} during the stream" if status is not None else None

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


