"""The provider-neutral model interface: one request in, one plain-dict response out.

Everything the loop knows about a model is here; the providers' models
(``providers/``, built through ``registry.build``) and the scripted test model
(``scripted``) implement it. Nothing in this module imports a provider SDK, so the
core and the CLI can name models and read usage without paying for one.

Invariants:
- ``ModelRequest`` is built once and sent as is (build-then-send): a model never
  mutates its ``system``, ``messages`` or ``tools``.
- ``ModelResponse.content`` holds API-shaped plain dicts (``text``, ``tool_use``,
  thinking blocks verbatim), never SDK objects, so it can be stored in the thread
  table and sent back unchanged.
- Every failure leaves a model as a ``ModelError`` whose message is one line a
  person can act on.
- Requests are Anthropic-shaped whatever the provider (content blocks ``text``,
  ``tool_use``, ``tool_result``; thinking blocks verbatim): stored threads never
  change shape; a provider with another wire format translates both ways.
- Prompt caching is the provider's concern. The core marks the end of the stable
  prefix with ``CACHE_MARK`` (``"cache_control": {"type": "ephemeral"}`` on a
  block); the Anthropic provider sends the mark as is, every other provider strips
  it before sending (and may use its own mechanism). The core builds the prefix
  (system, tools, earlier messages) byte-identical from turn to turn, so a
  provider's prefix cache hits with or without the mark.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

# The current Sonnet (platform.claude.com model overview). It runs adaptive
# thinking by default: responses can carry ``thinking`` blocks, which the loop
# must keep in the assistant message it sends back.
DEFAULT_MODEL = "claude-sonnet-5-5"

_ONE_LINE_LIMIT = 300

# The key and value the core puts on a block to mark the end of the stable prefix
# (see the module docstring): only the Anthropic provider sends it.
CACHE_KEY = "cache_control"
CACHE_MARK: dict[str, str] = {"type": "ephemeral"}

TextCallback = Callable[[str], None]


def one_line(text: str) -> str:
    """``text`` folded to one line of at most ``_ONE_LINE_LIMIT`` characters."""
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= _ONE_LINE_LIMIT else line[: _ONE_LINE_LIMIT - 1] + "…"


@dataclass(frozen=True)
class ModelRequest:
    """One call: the system blocks, the conversation, the tools and the output limit.

    Blocks may carry ``CACHE_KEY`` (the stable-prefix mark): a provider other than
    Anthropic removes it from its copy (``without_cache_marks``), never from these lists.
    """

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096


def without_cache_marks(value: Any) -> Any:
    """A copy of ``value`` (blocks, messages, tools, nested) with every ``CACHE_KEY`` removed.

    For providers that do not take Anthropic's mark; the input is never changed.
    """
    if isinstance(value, Mapping):
        return {k: without_cache_marks(v) for k, v in value.items() if k != CACHE_KEY}
    if isinstance(value, list):
        return [without_cache_marks(v) for v in value]
    return value


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
        super().__init__(one_line(message))
        self.status = status


class TokenCounter(Protocol):
    """An optional capability of a model: ``count_tokens`` gives a request's input
    tokens as the provider counts them, or None when it cannot (the core then
    estimates). The core looks for it with ``getattr``; a model need not have it."""

    def count_tokens(self, request: ModelRequest) -> int | None: ...


class Model(Protocol):
    """A language model: ``respond`` answers one request.

    ``on_text`` receives the answer's text as it is produced (a model that does not
    stream may call it never); ``on_retry`` receives a one-line note before each
    retry the model makes on its own.
    """

    name: str

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse: ...

