"""The last few turns of a thread, as a short recap shown when a thread is resumed.

Invariants:
- Only text a person would recognise is shown: the user's words (without attached
  ``<memory>`` blocks, and of a built-in prompt only what they typed, e.g. ``# note``
  or ``/remember``) and the agent's answers; tool calls and results are left out.
- The recap is bounded: at most ``turns`` user turns with the answers after them,
  each message cut to ``LINES`` lines of at most ``WIDTH`` characters.
"""

from __future__ import annotations

from typing import Any

from memagent.vfs import typed_part

LINES = 3
WIDTH = 160


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def _cut(text: str) -> list[str]:
    text = typed_part(text).split("\n\n<memory ", 1)[0].strip()
    lines = [ln if len(ln) <= WIDTH else ln[: WIDTH - 1] + "…" for ln in text.splitlines() if ln.strip()]
    if len(lines) > LINES:
        lines = lines[:LINES] + ["…"]
    return lines


def recap(messages: list[dict[str, Any]], agent: str, turns: int = 3) -> list[str]:
    """Lines ``you: …`` / ``<agent>: …`` for the last ``turns`` user turns of ``messages``."""
    said: list[tuple[str, list[str]]] = []
    for message in messages:
        text = _text(message.get("content", ""))
        if not text.strip():
            continue  # tool results, tool calls without words
        said.append((message.get("role", ""), _cut(text)))
    starts = [i for i, (role, _) in enumerate(said) if role == "user"]
    tail = said[starts[-turns]:] if len(starts) >= turns else said
    out: list[str] = []
    for role, lines in tail:
        who = "you" if role == "user" else agent
        pad = " " * (len(who) + 2)
        out += [f"{who}: {lines[0]}", *(pad + ln for ln in lines[1:])] if lines else []
    return out
