"""The Chat Completions wire format: an Anthropic-shaped request out, an Anthropic-shaped answer back.

``providers/openai_compat.py`` (and through its ``OpenAIModel`` the ``ollama`` and
``local`` providers) sends what ``to_chat_messages``/``to_chat_tools`` build and reads
the answer with ``from_chat_completion`` (a whole completion) or ``Accumulator`` (a
stream, chunk by chunk). Pure functions of their input: no SDK, no network, no
provider variables.

Invariants:
- Translation out works on copies (the request is never changed) and is a pure,
  deterministic function of the request (tool arguments are JSON with fixed
  separators), so a stable prefix stays byte-stable for the server's own prompt
  caching. Thinking blocks are dropped; cache marks are never sent.
- An assistant turn with text and tool calls is one assistant message with
  ``content`` and ``tool_calls``; a user turn's ``tool_result`` blocks become
  ``role: tool`` messages, in order, before the user text of the same turn.
- Answers come back as Anthropic blocks (``text``, ``tool_use`` with ``id``/``name``/
  ``input`` dict). Tool call arguments that are not a JSON object never raise: the
  ``tool_use`` input is ``{UNPARSED_ARGUMENTS: raw text}`` (and sent back as ``{}``).
  A call without an id gets one (the loop pairs results by id).
- Calls a small model wrote as text to an offered tool become ``tool_use`` blocks
  when the answer carried no native call (``toolcall_recovery``); while streaming,
  such text is held back by a ``StreamGate`` and never reaches ``on_text``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memagent.agent.model.base import ModelError, ModelRequest, ModelResponse, TextCallback, Usage
from memagent.agent.model.toolcall_recovery import StreamGate, recover

# The key of a tool_use input that holds arguments which were not a JSON object (the
# raw text); the tools layer's ToolBox spells the same string (agent/tools/toolbox.py).
UNPARSED_ARGUMENTS = "__memagent_unparsed_arguments__"

# What Chat Completions' finish_reason means as an Anthropic stop_reason.
_STOP_REASONS = {"tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


# --------------------------------------------------------------------------- translation out


def _text_of(blocks: Any) -> str:
    """The text of a tool_result's content (a string or text/image blocks)."""
    if isinstance(blocks, str):
        return blocks
    parts: list[str] = []
    for block in blocks or []:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "image":
            parts.append("[image omitted: this model's API takes no images in tool results]")
    return "\n".join(parts)


def _image_part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    elif source.get("type") == "url":
        url = str(source.get("url", ""))
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def _arguments(tool_input: Any) -> str:
    """A tool_use input as Chat Completions ``arguments`` (a JSON object text, always valid)."""
    if not isinstance(tool_input, Mapping) or UNPARSED_ARGUMENTS in tool_input:
        return "{}"
    # Deterministic (key order as stored, no spacing choice left to chance): the prefix
    # of the next request repeats these bytes exactly.
    return json.dumps(tool_input, ensure_ascii=False, separators=(", ", ": "))


def _user_messages(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content or []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            text = _text_of(block.get("content", ""))
            if block.get("is_error"):
                text = f"Error: {text}"
            out.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                        "content": text})
        elif kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            image = _image_part(block)
            if image is not None:
                parts.append(image)
    if parts:
        if all(p["type"] == "text" for p in parts):
            out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": "user", "content": parts})
    return out


def _assistant_message(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content or []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append({"id": str(block.get("id", "")), "type": "function",
                          "function": {"name": str(block.get("name", "")),
                                       "arguments": _arguments(block.get("input"))}})
        # thinking / redacted_thinking / server blocks: Anthropic's own, not sent here.
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    return message


def to_chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The request's system blocks and messages as Chat Completions messages (new dicts)."""
    out: list[dict[str, Any]] = []
    system = "\n\n".join(str(b.get("text", "")) for b in request.system
                         if isinstance(b, Mapping) and b.get("type", "text") == "text")
    if system:
        out.append({"role": "system", "content": system})
    for message in request.messages:
        if message.get("role") == "assistant":
            out.append(_assistant_message(message.get("content")))
        else:
            out.extend(_user_messages(message.get("content")))
    return out


def to_chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages API tool definitions as Chat Completions function tools (no cache marks)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping):
            continue  # an Anthropic server tool (no schema): nothing another API can run
        function: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description"):
            function["description"] = tool["description"]
        function["parameters"] = dict(schema)
        out.append({"type": "function", "function": function})
    return out


# --------------------------------------------------------------------------- translation back


def _tool_use(call_id: str | None, name: str, raw: str | None, number: int) -> dict[str, Any]:
    text = raw or ""
    try:
        parsed = json.loads(text) if text.strip() else {}
    except ValueError:
        parsed = None
    tool_input: dict[str, Any] = parsed if isinstance(parsed, dict) else {UNPARSED_ARGUMENTS: text}
    # Some local servers send no id; the loop pairs results by id, so one is made.
    return {"type": "tool_use", "id": call_id or f"call_memagent_{number}", "name": name,
            "input": tool_input}


def _usage(raw: Any) -> Usage:
    """Chat Completions usage as ``Usage`` (``input_tokens`` without the cached ones)."""
    if raw is None:
        return Usage()

    def get(obj: Any, name: str) -> int:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0

    details = raw.get("prompt_tokens_details") if isinstance(raw, Mapping) \
        else getattr(raw, "prompt_tokens_details", None)
    cached = get(details, "cached_tokens") if details is not None else 0
    prompt = get(raw, "prompt_tokens")
    return Usage(input_tokens=max(0, prompt - cached), output_tokens=get(raw, "completion_tokens"),
                 cache_read_input_tokens=cached)


def _content(text: str, calls: Sequence[tuple[str | None, str, str | None]]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [_tool_use(cid, name, raw, n) for n, (cid, name, raw) in enumerate(calls, 1)]
    return blocks


def _stop_reason(finish: str | None, has_calls: bool) -> str:
    reason = _STOP_REASONS.get(finish or "", "end_turn")
    # Several servers say "stop" while returning tool calls; the loop keys on tool_use.
    return "tool_use" if has_calls and reason == "end_turn" else reason


Call = tuple[str | None, str, str | None]  # (id, name, arguments text)


def offered_tools(params: Mapping[str, Any]) -> frozenset[str]:
    """The names of the function tools a Chat Completions body offers."""
    return frozenset(str((t.get("function") or {}).get("name")) for t in params.get("tools") or []
                     if isinstance(t, Mapping))


def _recovered(text: str, calls: list[Call], offered: frozenset[str]) -> tuple[str, list[Call]]:
    """Calls a small model wrote into its text (``toolcall_recovery``), when it sent none."""
    if calls or not offered:
        return text, calls
    found = recover(text, offered)
    if found is None:
        return text, calls
    return found.text, [(None, name, args) for name, args in found.calls]


def from_chat_completion(completion: Any, model: str, offered: frozenset[str] = frozenset()) -> ModelResponse:
    """A (non-streamed) ChatCompletion, SDK object or dict, as an Anthropic-shaped response;
    calls to ``offered`` tools written in its text become tool calls (``toolcall_recovery``)."""
    data = completion if isinstance(completion, Mapping) else completion.model_dump()
    choices = data.get("choices") or []
    if not choices:
        raise ModelError("the model API answered without a choice; try again")
    message = choices[0].get("message") or {}
    calls: list[Call] = [(c.get("id"), str((c.get("function") or {}).get("name") or ""),
                          (c.get("function") or {}).get("arguments"))
                         for c in message.get("tool_calls") or []]
    text, calls = _recovered(str(message.get("content") or ""), calls, offered)
    return ModelResponse(content=_content(text, calls),
                         stop_reason=_stop_reason(choices[0].get("finish_reason"), bool(calls)),
                         usage=_usage(data.get("usage")), model=model)


@dataclass
class Accumulator:
    """A streamed answer so far: text, tool calls by index, finish reason, usage.

    With tools offered, text that may be a call written as text passes a ``StreamGate``:
    held back until the answer ends, then shown only for what did not become calls.
    """

    offered: frozenset[str] = frozenset()
    gate: StreamGate | None = None
    text: list[str] = field(default_factory=list)
    calls: dict[int, list[Any]] = field(default_factory=dict)  # index -> [id, name, [argument pieces]]
    finish: str | None = None
    usage: Any = None
    emitted: bool = False

    def add(self, chunk: Any, on_text: TextCallback | None) -> None:
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or []:
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self.text.append(delta.content)
                    shown = self.gate.feed(delta.content) if self.gate is not None else delta.content
                    if shown:
                        self.emitted = True
                        if on_text is not None:
                            on_text(shown)
                for position, call in enumerate(delta.tool_calls or []):
                    # Servers that omit ``index`` send each call whole, in order.
                    index = call.index if isinstance(call.index, int) else len(self.calls) + position
                    entry = self.calls.setdefault(index, [None, "", []])
                    if call.id:
                        entry[0] = call.id
                    function = call.function
                    if function is not None:
                        if function.name:
                            entry[1] += function.name if not entry[1].endswith(function.name) else ""
                        if function.arguments:
                            entry[2].append(function.arguments)
            if choice.finish_reason:
                self.finish = choice.finish_reason

    def response(self, model: str, on_text: TextCallback | None = None) -> ModelResponse:
        calls: list[Call] = [(cid, name, "".join(pieces)) for _, (cid, name, pieces) in sorted(self.calls.items())]
        text = "".join(self.text)
        if self.gate is not None and self.gate.held:
            # Every block ``recover`` takes starts a line the gate held from, so what was
            # shown is prose; the held rest is shown now less the calls found in it.
            held = self.gate.held
            shown = text[: len(text) - len(held)]
            rest, calls = _recovered(held, calls, self.offered)
            if rest and on_text is not None:
                on_text(rest)
            text = (shown + rest).strip() if rest != held else text
        return ModelResponse(content=_content(text, calls),
                             stop_reason=_stop_reason(self.finish, bool(calls)),
                             usage=_usage(self.usage), model=model)
