"""Tool calls that small models write as text, recovered as tool calls.

Small local models (Qwen2.5-Coder 1.5B under llama.cpp, recorded in
``tests/fixtures/local_model/``) often answer a tool-calling request with the call
written into the text, as bare JSON or in a ```` ```json ```` fence, rather than in
the chat template's tool-call syntax, so the server returns it as prose.
``recover(text, offered)`` turns such text into calls; ``StreamGate`` holds back,
while an answer streams, only the text that may turn out to be a call.

The rule (precise, so prose that merely contains JSON is left alone):
- A *call* is a JSON object ``{"name": N, "arguments": A}`` or ``{"name": N,
  "parameters": A}``, ``{"function": N, "parameters"|"arguments": A}``, or
  ``{"type": "function", "function": {"name": N, "arguments": A}}`` (optionally with an
  ``id``), whose N is the name of a tool OFFERED in the request, with no other keys;
  A is an object or a string holding a JSON object (anything else is kept as the
  raw text, so the tool box answers the model how to fix the call), and may be left
  out for a call without arguments. A JSON array of calls is the same calls.
- A *block* is one of: ``<tool_call>…</tool_call>`` starting a line (the closing tag
  may be missing at the end of the answer); a fenced code block whose fences are on their own lines
  and whose language is none, ``json`` or ``tool_call``; or bare JSON that starts a
  line (after indentation) and ends one. JSON that begins or ends inside a line of
  prose ("you could send {"name": …} to …") is never a block.
- A line of JSON inside a fenced or tagged block is not a block of its own: the
  enclosing block is judged whole.
- A block becomes calls only when everything in it is calls (one JSON value, or
  several separated by whitespace). Blocks that are not wholly calls stay in the
  text, untouched. The text left after removing the call blocks (blank-line tidied)
  is what the person sees; nothing else is changed.
- Recovery applies only to an answer that carried no native tool call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Recovered", "StreamGate", "Verdict", "recover"]

_DECODER = json.JSONDecoder()
_CALL_KEYS = {"name", "arguments", "parameters", "id", "type", "function"}
_TAG = re.compile(r"^[ \t]*<tool_call>(.*?)(?:</tool_call>|\Z)", re.S | re.M)
_FENCE = re.compile(r"^[ \t]*```[ \t]*(?P<lang>[A-Za-z_]*)[ \t]*\n(?P<body>.*?)\n?[ \t]*```[ \t]*$", re.S | re.M)
_FENCE_LANGS = {"", "json", "tool_call", "jsonc", "json5"}


@dataclass(frozen=True)
class Recovered:
    """The text to show and the calls found in it: ``(name, arguments as JSON text)``."""

    text: str
    calls: list[tuple[str, str]] = field(default_factory=list)


def _arguments(value: Any) -> str | None:
    """A call's arguments as JSON object text (``None``: not a call's arguments at all)."""
    if value is None:
        return "{}"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        return value  # a JSON object in a string, or raw text the tool box will refuse with a hint
    return json.dumps(value, ensure_ascii=False)


def _call(value: Any, offered: Collection[str]) -> tuple[str, str] | None:
    """``value`` as one call to an offered tool, or None."""
    if not isinstance(value, dict) or not value or not set(value) <= _CALL_KEYS:
        return None
    function = value.get("function")
    if isinstance(function, dict):  # {"type": "function", "function": {"name", "arguments"}}
        if set(value) - {"type", "function", "id"} or not set(function) <= _CALL_KEYS - {"function"}:
            return None
        name, args = function.get("name"), function.get("arguments", function.get("parameters"))
    elif isinstance(function, str):  # {"function": "task", "parameters": {...}}
        if "name" in value:
            return None
        name, args = function, value.get("parameters", value.get("arguments"))
    else:
        name, args = value.get("name"), value.get("arguments", value.get("parameters"))
    if "arguments" in value and "parameters" in value:
        return None
    if not isinstance(name, str) or name not in offered:
        return None
    text = _arguments(args)
    return None if text is None else (name, text)


def _values(text: str) -> list[Any] | None:
    """The JSON values ``text`` is made of (whitespace between them), or None."""
    values: list[Any] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return values or None
        try:
            value, at = _DECODER.raw_decode(text, at)
        except ValueError:
            return None
        values.append(value)


def _calls(body: str, offered: Collection[str]) -> list[tuple[str, str]] | None:
    """The calls ``body`` wholly consists of, or None when anything in it is not a call."""
    body = body.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced and fenced.group("lang").lower() in _FENCE_LANGS:
        body = fenced.group("body")
    values = _values(body)
    if values is None:
        return None
    calls: list[tuple[str, str]] = []
    for value in values:
        items = value if isinstance(value, list) and value else [value]
        for item in items:
            call = _call(item, offered)
            if call is None:
                return None
            calls.append(call)
    return calls


def _line_json_spans(text: str) -> list[tuple[int, int]]:
    """Spans of bare JSON values that start and end a line (see the module docstring)."""
    spans: list[tuple[int, int]] = []
    at = 0
    for line in text.splitlines(keepends=True):
        start = at
        at += len(line)
        if spans and start < spans[-1][1]:
            continue  # inside a value that began on an earlier line
        stripped = line.lstrip(" \t")
        if not stripped.startswith(("{", "[")):
            continue
        begin = start + (len(line) - len(stripped))
        try:
            _, end = _DECODER.raw_decode(text, begin)
        except ValueError:
            continue
        rest = text[end:]
        newline = rest.find("\n")
        if rest[: newline if newline >= 0 else len(rest)].strip():
            continue  # prose after it on the same line
        spans.append((begin, end))
    return spans


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def recover(text: str, offered: Collection[str]) -> Recovered | None:
    """The calls to ``offered`` tools written in ``text`` and the text without them, or None
    when there are none (the rule is in the module docstring)."""
    if not text or not offered or not any(ch in text for ch in "{["):
        return None
    found: list[tuple[int, int, list[tuple[str, str]]]] = []

    def take(start: int, end: int, body: str) -> None:
        if any(s < end and start < e for s, e, _ in found):
            return  # inside a block already taken
        calls = _calls(body, offered)
        if calls:
            found.append((start, end, calls))

    # Tagged and fenced blocks (of any language) are judged whole: a line of JSON inside
    # one is never a block of its own.
    whole: list[tuple[int, int]] = []
    for match in _TAG.finditer(text):
        whole.append((match.start(), match.end()))
        take(match.start(), match.end(), match.group(1))
    for match in _FENCE.finditer(text):
        whole.append((match.start(), match.end()))
        if match.group("lang").lower() in _FENCE_LANGS:
            take(match.start(), match.end(), match.group("body"))
    for start, end in _line_json_spans(text):
        if not any(s <= start and end <= e for s, e in whole):
            take(start, end, text[start:end])
    if not found:
        return None
    found.sort()
    kept: list[str] = []
    calls: list[tuple[str, str]] = []
    at = 0
    for start, end, block in found:
        kept.append(text[at:start])
        calls.extend(block)
        at = end
    kept.append(text[at:])
    return Recovered(_tidy("".join(kept)), calls)


# --------------------------------------------------------------------------- streaming

Verdict = Literal["block", "maybe", "prose"]


def _verdict(head: str) -> Verdict:
    """Whether a line starting with ``head`` (indentation removed) may begin a block."""
    if not head:
        return "maybe"
    first = head[0]
    if first == "<":
        tag = "<tool_call>"
        return "block" if head.startswith(tag) else "maybe" if tag.startswith(head) else "prose"
    if first == "`":
        if not "```".startswith(head[:3]):
            return "prose"
        if len(head) < 3 or "\n" not in head:
            return "maybe"  # the fence's language is not known yet
        return "block" if head[3:head.index("\n")].strip().lower() in _FENCE_LANGS else "prose"
    if first in "{[":
        rest = head[1:].lstrip()
        if not rest:
            return "maybe"
        if first == "{":
            return "block" if rest[0] == '"' else "prose"
        return _verdict(rest) if rest[0] == "{" else "prose"
    return "prose"


class StreamGate:
    """Passes streamed text on at once, except from a line that may begin a call block.

    A line whose start (after indentation) may still begin a block (``{"``, ``[{"``, a
    fence of no language or ``json``, ``<tool_call>``) is held while that is undecided;
    once it does begin one, everything from there is held until the answer ends
    (``held``); a line that turns out to be prose is released as soon as that is clear.
    So prose is not held back, and a call's JSON never reaches the screen: after the
    answer the caller shows what ``recover`` left of the held part.
    """

    def __init__(self) -> None:
        self.line = ""  # held text: the current line's undecided start, or everything from a block on
        self.prose = False  # the current line is known prose: passed on as it comes
        self.holding = False  # a possible block began: hold everything from here
        self.code = False  # inside a fenced block of another language (```python): all prose

    def feed(self, piece: str) -> str:
        """What of ``piece`` may be shown now."""
        if self.holding:
            self.line += piece
            return ""
        out: list[str] = []
        for ch in piece:
            if self.holding:
                self.line += ch
            elif self.prose:
                out.append(ch)
                self.prose = ch != "\n"
            else:
                self.line += ch
                head = self.line.lstrip(" \t")
                verdict: Verdict
                if self.code:  # only the closing fence matters; the line is prose either way
                    verdict = "maybe" if head and "```".startswith(head) and head != "```" else "prose"
                    self.code = not head.startswith("```")
                else:
                    verdict = "prose" if head == "\n" else _verdict(head)
                    # A fence of another language: what follows up to its closing fence is code.
                    self.code = verdict == "prose" and head.startswith("```")
                if verdict == "prose":
                    out.append(self.line)
                    self.prose = ch != "\n"
                    self.line = ""
                elif verdict == "block":
                    self.holding = True
        return "".join(out)

    @property
    def held(self) -> str:
        """The text not passed on (from the first possible block to the end)."""
        return self.line
