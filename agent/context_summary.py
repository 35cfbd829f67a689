"""A thread's turns and their running summary: what the context window folds, and into what.

The message helpers read messages as the loop stores them (Anthropic-shaped:
content a string or a list of blocks): ``is_turn_start`` (a user message with text
that answers no tool call: the only place folding may start), ``as_blocks``,
``tool_inputs``, ``result_text``. The summary side: ``Folding`` (the summary stands
for ``messages[:folded]``), the instructions of the model-written summary
(``summary_prompt``, the built-in ``prompts/summary.md``), the transcript the model
reads, the deterministic ``fallback_summary`` (the first sentence of each folded
message) used when that call fails, the facts the user asked to be noted
(``noted_facts``, copied verbatim), and the stored form (``compose`` /
``split_stored``, inverse of each other). ``ContextWindow`` (``context.py``) decides
when to fold and calls the model.

Invariants: nothing here calls a model or mutates a message passed in
(``as_blocks`` copies); every text produced is bounded by the limit its caller
gives (``noted_facts``' ``limit_chars``, ``fallback_summary``'s ``max_chars``,
``transcript``'s ``result_chars``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

SummaryMethod = Literal["model", "fallback"]

SUMMARY_OPEN = "<conversation-summary>"
SUMMARY_CLOSE = "</conversation-summary>"
NOTED_HEADING = "Facts the user asked to keep (verbatim):"
_NOTE = re.compile(
    r"\b(note|remember|memori[sz]e|don'?t forget|do not forget|keep in mind|write (?:this|that|it) down|"
    r"for the record|jot (?:this|that|it) down)\b",
    re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def summary_prompt() -> str:
    files = resources.files("memagent.skills_templates")
    return files.joinpath("prompts/summary.md").read_text("utf-8").strip()


# -- messages ---------------------------------------------------------------------------



def is_turn_start(message: dict[str, Any]) -> bool:
    """A user message that opens a turn: it has text and answers no tool call."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return bool(content)
    if not isinstance(content, list):
        return False
    blocks = [b for b in content if isinstance(b, dict)]
    return (any(b.get("type") == "text" for b in blocks)
            and not any(b.get("type") == "tool_result" for b in blocks))


def as_blocks(content: Any) -> list[dict[str, Any]]:
    """A message's content as a list of blocks, each a copy (the caller may change them)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(b) for b in content]


def tool_inputs(messages: Sequence[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each ``tool_use`` id of ``messages``: the tool's name and its input."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for m in messages:
        if m.get("role") == "assistant" and isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    args = b.get("input")
                    out[str(b.get("id"))] = (str(b.get("name")), args if isinstance(args, dict) else {})
    return out


def result_text(block: dict[str, Any]) -> str | None:
    """A ``tool_result`` block's text; None when it holds more than text (an image)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    return None


@dataclass
class Folding:
    """The running summary of a thread: it stands for ``messages[:folded]``."""

    folded: int = 0
    text: str = ""
    noted: list[str] = field(default_factory=list)
    method: SummaryMethod | None = None


# -- summaries ------------------------------------------------------------------------


def noted_facts(messages: Sequence[dict[str, Any]], limit_chars: int = 400) -> list[str]:
    """Sentences in user turns that ask for something to be noted, with the sentence after."""
    out: list[str] = []
    for m in messages:
        if not is_turn_start(m):
            continue
        for b in as_blocks(m["content"]):
            if b.get("type") != "text":
                continue
            text = str(b.get("text", ""))
            if not _NOTE.search(text):
                continue
            sentences = _SENTENCE.split(" ".join(text.split()))
            for i, s in enumerate(sentences):
                if _NOTE.search(s):
                    fact = s
                    if (s.rstrip().endswith(":") or len(s) < 60) and i + 1 < len(sentences):
                        fact += " " + sentences[i + 1]
                    fact = fact.strip()
                    if len(fact) > limit_chars:
                        fact = fact[: limit_chars - 1] + "…"
                    if fact not in out:
                        out.append(fact)
    return out


def _first_sentence(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    first = _SENTENCE.split(text, maxsplit=1)[0] if text else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def fallback_summary(previous: str, messages: Sequence[dict[str, Any]], max_chars: int) -> str:
    """The deterministic summary: the previous one, then the first sentence of each message."""
    lines = [ln for ln in previous.splitlines() if ln.strip()] if previous else []
    if not lines or not lines[0].startswith("(Automatic summary"):
        lines = ["(Automatic summary: the first sentence of each earlier message.)"] + lines
    for m in messages:
        texts = [str(b.get("text", "")) for b in as_blocks(m["content"]) if b.get("type") == "text"]
        calls = [str(b.get("name")) for b in as_blocks(m["content"]) if b.get("type") == "tool_use"]
        text = _first_sentence(" ".join(texts))
        if text:
            lines.append(f"- {m['role']}: {text}")
        if calls:
            lines.append(f"- {m['role']} called: {', '.join(calls)}")
    # Keep the newest lines that fit (and the heading).
    head, body = lines[0], lines[1:]
    size = len(head)
    kept: list[str] = []
    for line in reversed(body):
        if size + len(line) + 1 > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join([head, *reversed(kept)])


def transcript(messages: Sequence[dict[str, Any]], result_chars: int = 2000) -> list[str]:
    """The messages as plain text pieces for the summariser (one piece per message)."""
    pieces: list[str] = []
    calls = tool_inputs(messages)
    for m in messages:
        who = "User" if m["role"] == "user" else "Assistant"
        parts: list[str] = []
        for b in as_blocks(m["content"]):
            kind = b.get("type")
            if kind == "text" and str(b.get("text", "")).strip():
                parts.append(str(b["text"]).strip())
            elif kind == "tool_use":
                args = json.dumps(b.get("input") or {}, ensure_ascii=False)
                parts.append(f"[tool call {b.get('name')}: {args[:500]}]")
            elif kind == "tool_result":
                text = result_text(b) or "(non-text result)"
                name = calls.get(str(b.get("tool_use_id")), ("tool", {}))[0]
                more = f" … ({len(text):,} characters in all)" if len(text) > result_chars else ""
                parts.append(f"[{name} result{' (error)' if b.get('is_error') else ''}: "
                             f"{text[:result_chars]}{more}]")
        if parts:
            pieces.append(f"{who}: " + "\n".join(parts))
    return pieces


def compose(body: str, noted: Sequence[str]) -> str:
    """The stored summary text: the body, then the noted facts."""
    if not noted:
        return body
    return body + "\n\n" + NOTED_HEADING + "\n" + "\n".join(f"- {f}" for f in noted)


def split_stored(text: str) -> tuple[str, list[str]]:
    """Inverse of ``compose``."""
    body, sep, rest = text.partition("\n\n" + NOTED_HEADING + "\n")
    if not sep:
        return text, []
    return body, [ln[2:] for ln in rest.splitlines() if ln.startswith("- ")]
