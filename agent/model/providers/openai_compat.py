"""``Model`` over an OpenAI-compatible Chat Completions API, through the official ``openai`` SDK.

Two providers share it: ``openai`` (OpenAI itself: ``OPENAI_API_KEY`` required,
``OPENAI_BASE_URL`` optional) and ``openai-compatible`` (any server that speaks
Chat Completions: OpenRouter, vLLM, LM Studio, llama.cpp's server, Ollama's
``/v1``; a base URL from ``--base-url`` or ``OPENAI_BASE_URL`` required, the key
optional). ``providers/ollama.py`` builds the same ``OpenAIModel`` with its defaults.

Invariants (beyond those of ``model.base``):
- Threads stay Anthropic-shaped: ``model/chat_completions.py`` translates a
  ``ModelRequest`` into Chat Completions messages on copies and the answer back into
  Anthropic blocks (its docstring holds the translation's invariants: turns, tool
  results, tool call arguments that are not JSON, calls written as text). Cache marks
  are never sent (caching is the provider's own business: OpenAI caches byte-identical
  prefixes by itself, and the translation is a pure function of the request, so a
  stable prefix stays byte-stable). Its public names are importable from here too.
- Retries: the SDK's own are off; ``respond`` retries 408/409/429/5xx and connection
  failures itself, ``max_retries`` times, waiting the server's ``retry-after(-ms)``
  when it sends one (up to a minute) or 0.5 s doubling to 8 s, and calls
  ``on_retry`` with the same one-line notes as the Anthropic client before each wait.
  A stream that breaks off is retried only while no text has reached ``on_text``.
- Every failure leaves ``respond`` as a ``ModelError`` (one line, with the HTTP
  status); no SDK exception escapes (``KeyboardInterrupt`` and the caller's own
  callbacks' exceptions excepted).
- Importing this module does not import the SDK: ``build`` does (``memagent models``
  and the registry stay fast).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memagent.agent.model import retrying
from memagent.agent.model.base import ModelError, ModelRequest, ModelResponse, TextCallback, one_line
from memagent.agent.model.chat_completions import (
    UNPARSED_ARGUMENTS,
    Accumulator,
    from_chat_completion,
    offered_tools,
    to_chat_messages,
    to_chat_tools,
)
from memagent.agent.model.registry import (
    DEFAULT_OPTIONS,
    ModelInfo,
    ModelOptions,
    Price,
    Provider,
    ProviderStatus,
)
from memagent.agent.model.toolcall_recovery import StreamGate

if TYPE_CHECKING:
    import openai

__all__ = [
    "OPENAI",
    "OPENAI_COMPATIBLE",
    "PROVIDERS",
    "UNPARSED_ARGUMENTS",
    "OpenAIModel",
    "OpenAICompatProvider",
    "from_chat_completion",
    "to_chat_messages",
    "to_chat_tools",
]

log = logging.getLogger("memagent.agent.model")

OPENAI_URL = "https://api.openai.com/v1"
KEY_VAR = "OPENAI_API_KEY"
URL_VAR = "OPENAI_BASE_URL"

# Retries wait as the Anthropic client's (``retrying``). A retry-after longer than this
# is not waited for in a chat; the backoff is used.
_MAX_SERVER_DELAY = 60.0
DEFAULT_MAX_RETRIES = 4

TokenParam = Literal["max_completion_tokens", "max_tokens"]


# --------------------------------------------------------------------------- retries and errors


def _error_detail(body: Any) -> str:
    """The server's error message from its JSON body, best effort."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return str(inner.get("message") or "")
        if isinstance(inner, str):
            return inner
    return body if isinstance(body, str) else ""


class _Broken(Exception):
    """A stream that opened and did not finish; ``emitted``: text already went out."""

    def __init__(self, why: str, *, emitted: bool, status: int = 0, detail: str = "") -> None:
        super().__init__(why)
        self.why = why
        self.emitted = emitted
        self.status = status
        self.detail = detail


def _sdk() -> Any:
    import openai  # the SDK loads on first build (~0.5 s): not for commands without a model

    return openai


# --------------------------------------------------------------------------- the model


class OpenAIModel:
    """``Model`` over Chat Completions. ``name`` is the full id (``openai/gpt-5.1``);
    ``model`` is what the API is asked for (``gpt-5.1``)."""

    # Seconds a retry waits at first (doubling, capped); tests shrink it.
    _retry_base: float = retrying.INITIAL_RETRY_DELAY

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str,
        api_key: str,
        key_hint: str = KEY_VAR,
        stream: bool = True,
        max_retries: int = DEFAULT_MAX_RETRIES,
        token_param: TokenParam = "max_tokens",
        context_window: int | None = None,
        timeout: float = 600,
        server: str = "the model API",
        reach_hint: str = "",
    ) -> None:
        sdk = _sdk()
        self.name = name
        self.model = model
        self.stream = stream
        self.max_retries = max_retries
        self.token_param: TokenParam = token_param
        self.context_window = context_window
        self.key_hint = key_hint
        self.server = server
        self.reach_hint = reach_hint  # appended to "cannot reach ..." (e.g. how to start the server)
        try:
            self._client: openai.OpenAI = sdk.OpenAI(
                api_key=api_key, base_url=base_url, max_retries=0,
                # A short connect timeout: an unreachable host fails in seconds.
                timeout=sdk.Timeout(timeout, connect=min(10.0, timeout)),
            )
        except sdk.OpenAIError as err:
            raise ModelError(f"cannot set up the model client for {name}: {err}") from None

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions body ``respond`` sends for ``request`` (without ``stream``)."""
        params: dict[str, Any] = {"model": self.model, "messages": to_chat_messages(request)}
        if request.tools:
            params["tools"] = to_chat_tools(request.tools)
        params[self.token_param] = request.max_tokens
        return params

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        sdk = _sdk()
        params = self.params(request)
        retries = 0
        while True:
            try:
                return self._stream_once(params, on_text) if self.stream else self._plain_once(params)
            except sdk.APIStatusError as err:
                headers = err.response.headers
                status = err.status_code
                if retrying.retryable(status, headers) and retries < self.max_retries:
                    delay, exact = retrying.retry_delay(headers, retries, cap=_MAX_SERVER_DELAY)
                    retries = self._wait(retrying.describe_status(status), delay, exact, retries, on_retry)
                    continue
                raise self._status_error(status, _error_detail(err.body), retries + 1) from None
            except sdk.APIConnectionError as err:
                timed_out = isinstance(err, sdk.APITimeoutError)
                if not timed_out and retrying.refused_locally(err, self.base_url):
                    raise ModelError(f"cannot reach {self.server} at {self.base_url}: the connection was refused "
                                     f"(nothing listens there){self.reach_hint}") from None
                if retries < self.max_retries:
                    delay, exact = retrying.retry_delay(None, retries)
                    what = "model API timed out" if timed_out else "cannot reach the model API"
                    retries = self._wait(what, delay, exact, retries, on_retry)
                    continue
                if timed_out:
                    raise ModelError(f"{self.server} at {self.base_url} did not answer in time "
                                     f"({retries + 1} attempts); try again") from None
                raise ModelError(f"cannot reach {self.server} at {self.base_url}: "
                                 f"{_connection_cause(err)}{self.reach_hint}") from None
            except _Broken as broken:
                if not broken.emitted and retries < self.max_retries and (
                        not broken.status or broken.status in (408, 409, 429) or broken.status >= 500):
                    delay, exact = retrying.retry_delay(None, retries)
                    what = (f"{retrying.describe_status(broken.status)} during the stream" if broken.status
                            else "the answer stream broke off")
                    retries = self._wait(what, delay, exact, retries, on_retry)
                    continue
                cut = "the answer was cut off: " if broken.emitted else ""
                if broken.status:
                    raise ModelError(cut + self._status_error(broken.status, broken.detail, retries + 1).args[0],
                                     status=broken.status) from None
                shown = " after part of the answer was shown" if broken.emitted else ""
                raise ModelError(f"the connection to {self.server} broke off{shown}: {broken.why}; "
                                 "try again") from None
            except sdk.APIResponseValidationError as err:
                raise ModelError(f"{self.server} sent a response this client cannot read: {err}") from None
            except sdk.OpenAIError as err:
                raise ModelError(f"model API error: {err}") from None

    def _wait(self, what: str, delay: float, exact: bool, retries: int,
              on_retry: TextCallback | None) -> int:
        """Announce and wait for retry number ``retries + 1``; returns the new count."""
        if not exact:
            delay = retrying.backoff(retries, self._retry_base)
        note = retrying.retry_note(what, delay, exact, retries + 2, self.max_retries + 1)
        log.info("%s", note)
        if on_retry is not None:
            on_retry(note)
        time.sleep(delay)
        return retries + 1

    def _plain_once(self, params: dict[str, Any]) -> ModelResponse:
        completion = self._client.chat.completions.create(**params)
        return from_chat_completion(completion, self.name, offered_tools(params))

    def _stream_once(self, params: dict[str, Any], on_text: TextCallback | None) -> ModelResponse:
        sdk = _sdk()
        offered = offered_tools(params)
        acc = Accumulator(offered, StreamGate() if offered else None)
        # Opening the stream raises the SDK's HTTP errors directly (retried above);
        # failures while reading become _Broken. The iterator is advanced by hand so
        # only the SDK's own failures are translated: what ``on_text`` raises stays
        # the caller's.
        stream = self._client.chat.completions.create(
            **params, stream=True, stream_options={"include_usage": True})
        with stream:
            chunks = iter(stream)
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except sdk.APIError as err:  # an error object inside the stream
                    status = getattr(err, "status_code", None) or _status_of(err.body)
                    raise _Broken(str(err), emitted=acc.emitted, status=status,
                                  detail=_error_detail(err.body)) from None
                except Exception as err:  # noqa: BLE001 - transport errors while reading the body
                    raise _Broken(one_line(f"{type(err).__name__}: {err}"), emitted=acc.emitted) from None
                acc.add(chunk, on_text)
        if acc.finish is None:
            # The body ended without a finish_reason: a fragment, not an answer.
            raise _Broken("the stream ended before the answer finished", emitted=acc.emitted)
        return acc.response(self.name, on_text)

    def _status_error(self, status: int, detail: str, attempts: int) -> ModelError:
        shown = f": {detail}" if detail else ""
        tried = f" and {attempts} attempts failed" if attempts > 1 else ""
        if status == 429:
            text = f"rate limited by {self.server} (429){tried}{shown}; wait a minute and try again"
        elif status == 401:
            text = f"{self.key_hint} was rejected by {self.base_url} (401){shown}; check the key"
        elif status == 403:
            text = f"{self.server} refused access (403){shown}; check the key's permissions"
        elif status == 404:
            text = (f"model {self.model!r} was not found at {self.base_url} (404){shown}; "
                    "check --model / MEMAGENT_MODEL (`memagent models` lists what is configured)")
        elif status == 413:
            text = f"the request is too large for {self.server} (413){shown}"
        elif status in (400, 422):
            text = f"{self.server} rejected the request ({status}){shown}"
        elif status >= 500:
            text = f"{self.server} failed with a server error ({status}){tried}{shown}; try again later"
        else:
            text = f"{self.server} answered {status}{shown}"
        return ModelError(text, status=status)


def _status_of(body: Any) -> int:
    """An HTTP-like status from a streamed error object (its ``code``), or 500."""
    code = body.get("code") if isinstance(body, Mapping) else None
    if isinstance(code, int) and 400 <= code < 600:
        return code
    if isinstance(code, str) and code.isdigit() and 400 <= int(code) < 600:
        return int(code)
    return 500


def _connection_cause(err: BaseException) -> str:
    """The innermost cause's message (e.g. 'Connection refused'), not the SDK's generic text."""
    cause: BaseException | None = err.__cause__
    while cause is not None and cause.__cause__ is not None and str(cause.__cause__):
        cause = cause.__cause__
    text = str(cause) if cause is not None and str(cause) else str(err)
    return one_line(text) or "connection error"


# --------------------------------------------------------------------------- what is known

# OpenAI's published list prices (USD per million tokens; cache_read = cached input)
# and context windows, for the models whose figures are settled. Others: unknown,
# shown as tokens only (never a guess).
_OPENAI_MODELS: dict[str, ModelInfo] = {
    "gpt-5.1": ModelInfo(400_000, Price(1.25, 10.0, cache_read=0.125)),
    "gpt-5": ModelInfo(400_000, Price(1.25, 10.0, cache_read=0.125)),
    "gpt-5-mini": ModelInfo(400_000, Price(0.25, 2.0, cache_read=0.025)),
    "gpt-5-nano": ModelInfo(400_000, Price(0.05, 0.40, cache_read=0.005)),
    "gpt-4.1": ModelInfo(1_047_576, Price(2.0, 8.0, cache_read=0.50)),
    "gpt-4.1-mini": ModelInfo(1_047_576, Price(0.40, 1.60, cache_read=0.10)),
    "gpt-4o": ModelInfo(128_000, Price(2.50, 10.0, cache_read=1.25)),
    "gpt-4o-mini": ModelInfo(128_000, Price(0.15, 0.60, cache_read=0.075)),
}


def _known_openai(model: str) -> ModelInfo:
    """The table's entry for ``model`` or its dated snapshot (``gpt-4o-2024-08-06``)."""
    if model in _OPENAI_MODELS:
        return _OPENAI_MODELS[model]
    parts = model.split("-")
    if len(parts) > 3 and [len(p) for p in parts[-3:]] == [4, 2, 2] and all(p.isdigit() for p in parts[-3:]):
        return _OPENAI_MODELS.get("-".join(parts[:-3]), ModelInfo())
    return ModelInfo()


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


# Not frozen: the registry's Provider protocol declares plain (settable) attributes.
@dataclass
class OpenAICompatProvider:
    """``openai`` (``compatible=False``) or ``openai-compatible`` (``compatible=True``)."""

    name: str
    compatible: bool
    env_vars: tuple[str, ...] = (KEY_VAR, URL_VAR)

    def _base_url(self, options: ModelOptions) -> tuple[str | None, str]:
        """(URL, where it came from) in the order --base-url, OPENAI_BASE_URL, default."""
        if options.base_url:
            return options.base_url.rstrip("/"), "--base-url"
        if _env(URL_VAR):
            return _env(URL_VAR).rstrip("/"), URL_VAR
        return (None, "") if self.compatible else (OPENAI_URL, "default")

    def status(self, options: ModelOptions = DEFAULT_OPTIONS) -> ProviderStatus:
        url, source = self._base_url(options)
        if self.compatible:
            if url is None:
                return ProviderStatus(False, f"no server: pass --base-url URL or export {URL_VAR}=URL "
                                             "(e.g. http://localhost:8000/v1)")
            key = f"; {KEY_VAR} is set" if _env(KEY_VAR) else "; no key (fine for local servers)"
            return ProviderStatus(True, f"{url} (from {source}){key}")
        if not _env(KEY_VAR):
            return ProviderStatus(False, f"no key: export {KEY_VAR}=...")
        where = f", {url} (from {source})" if source != "default" else ""
        return ProviderStatus(True, f"{KEY_VAR} is set{where}")

    def build(self, model: str, options: ModelOptions) -> OpenAIModel:
        url, _ = self._base_url(options)
        key = _env(KEY_VAR)
        if url is None:
            raise ModelError(f"{self.name}/{model} needs the server's URL: pass --base-url URL or export "
                             f"{URL_VAR}=URL (e.g. http://localhost:8000/v1)")
        if not key and not self.compatible:
            raise ModelError(f"no API key for {self.name}/{model}: export {KEY_VAR}=... "
                             f"(or use openai-compatible/{model} with --base-url for a server without one)")
        return OpenAIModel(
            f"{self.name}/{model}", model, base_url=url,
            # Local servers take any key; the SDK insists on one.
            api_key=key or "none", stream=options.stream,
            # OpenAI's current models refuse max_tokens; compatible servers know only it.
            token_param="max_tokens" if self.compatible else "max_completion_tokens",
            context_window=self.info(model, options).context_window,
            server="the model API" if not self.compatible else "the model server",
        )

    def info(self, model: str, options: ModelOptions = DEFAULT_OPTIONS) -> ModelInfo:
        if self.compatible:
            return ModelInfo()  # any server, any model: nothing is known
        url, source = self._base_url(options)
        # A gateway under OPENAI_BASE_URL may serve other models under these names.
        return _known_openai(model) if source == "default" else ModelInfo()

    def local_models(self, options: ModelOptions = DEFAULT_OPTIONS) -> list[str]:
        return []


OPENAI = OpenAICompatProvider("openai", compatible=False)
OPENAI_COMPATIBLE = OpenAICompatProvider("openai-compatible", compatible=True)
# Typed as the registry's protocol so mypy checks both against it.
PROVIDERS: tuple[Provider, ...] = (OPENAI, OPENAI_COMPATIBLE)
