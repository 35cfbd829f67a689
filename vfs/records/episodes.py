"""Episodic memory: how each thread of an agent is rendered as one Markdown file.

The files live in the ``files`` table under scope ``conversations:<agent>``, so ls,
glob, grep and read answer them with the store's own queries and indexes (the
trigram index included); ``AgentView`` mounts that scope read-only at
``/conversations/``. This module only renders (the one place that turns a message
into text); ``conversation_files`` is the only writer of those rows and says what
their ``version`` means (the seq of the last message shown, not a revision), and
``ThreadStore`` decides when they are written.

Invariants:
- A conversation file is a projection of the ``messages`` table, which stays the
  record: derived data, so it gets no revision rows and no validation.
- Rendering is a pure function of a message's row (role, content, time, state):
  rendering a thread piece by piece gives the same text as rendering it at once.
- The path is fixed when the thread's first message arrives:
  ``/<YYYY-MM-DD>-<slug of the title>-<first 8 characters of the id>.md``.
- What is rendered: the title, date and thread id; each user and assistant text
  (of a built-in prompt, only what the person typed: ``built_in_message``);
  one line per tool call; one line per memory edit (path and new version); failed
  and interrupted turns marked. Tool results are not copied: they stay in the
  thread's messages.
- Control, C1 and bidi characters of titles and messages are rendered escaped by
  ``terminal_text.shown`` (``\x1b``, ``\u202e``): a conversation file holds nothing a
  terminal would act on, and its title stays on one line.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from memagent.vfs import paths
from memagent.vfs.terminal_text import shown

_SLUG_WORDS = 6
_SLUG_CHARS = 48
_ARGS_CHARS = 160
_EDIT = re.compile(r"^(Wrote|Edited|Deleted) (\S+) \(now version (\d+)\)")


def scope_of(agent: str) -> str:
    """The store scope that holds ``agent``'s conversation files."""
    return paths.scope_name("conversations", agent)


def slug(title: str) -> str:
    """Lower-case ASCII words of ``title`` joined by hyphens (bounded), or ``conversation``."""
    words = re.findall(r"[a-z0-9]+", title.lower())[:_SLUG_WORDS]
    out = "-".join(words)[:_SLUG_CHARS].strip("-")
    return out or "conversation"


def file_path(created_at: datetime, title: str, thread_id: str) -> str:
    return f"/{created_at:%Y-%m-%d}-{slug(title)}-{thread_id[:8]}.md"


def header(*, title: str, thread_id: str, agent: str, model: str, created_at: datetime) -> str:
    return (
        f"# {shown(title, one_line=True) or 'Untitled conversation'}\n\n"
        f"- date: {created_at:%Y-%m-%d %H:%M} UTC\n"
        f"- thread: {thread_id} (continue it with `memagent chat {agent} --thread {thread_id[:8]}`)\n"
        f"- agent: {agent}; model: {model or 'unknown'}\n"
    )


# A built-in prompt (``# note``, ``/remember``, ``/compact``) goes to the model as what
# the person typed, then its instructions inside this tag; people are shown only
# what they typed (the recap, conversation files).
BUILT_IN_TAG = "built-in-prompt"


def built_in_message(typed: str, prompt: str) -> str:
    """The user message for a built-in prompt the person invoked by typing ``typed``."""
    return f"{typed}\n\n<{BUILT_IN_TAG}>\n{prompt}\n</{BUILT_IN_TAG}>"


def typed_part(text: str) -> str:
    """What the person typed of a user message's text (a built-in prompt's instructions cut)."""
    return text.split(f"\n\n<{BUILT_IN_TAG}>\n", 1)[0]


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)]


def _call_line(block: dict[str, Any]) -> str:
    args = block.get("input") or {}
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items()) \
        if isinstance(args, dict) else ""
    shown = " ".join(shown.split())
    if len(shown) > _ARGS_CHARS:
        shown = shown[: _ARGS_CHARS - 1] + "…"
    return f"- tool call: {block.get('name', '?')}({shown})"


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def render_message(role: str, content: Any, at: datetime, *, state: str | None = None) -> str:
    """One message as a Markdown piece (starting with a blank line); "" if nothing to show."""
    texts: list[str] = []
    lines: list[str] = []
    for block in _blocks(content):
        kind = block.get("type")
        text = str(block.get("text", ""))
        if kind == "text" and role == "user":
            text = typed_part(text)
        if kind == "text" and text.strip():
            texts.append(text.strip())
        elif kind == "tool_use":
            lines.append(_call_line(block))
        elif kind == "tool_result":
            text = _result_text(block)
            edit = _EDIT.match(text)
            if edit and not block.get("is_error"):
                verb, path, version = edit.groups()
                lines.append(f"- memory edit: {verb.lower()} {path}, now version {version}")
            elif block.get("is_error") and "interrupted" in text:
                lines.append("- tool call interrupted by the user")
    if not texts and not lines:
        return ""
    heading = "User" if role == "user" and texts else ("Assistant" if role == "assistant" else "")
    out = "\n"
    if heading:
        out += f"## {heading} · {at:%H:%M}\n\n"
    if texts:
        out += "\n\n".join(texts) + "\n"
    if lines:
        out += ("\n" if texts else "") + "\n".join(lines) + "\n"
    if state == "failed":
        out += failed_note()
    # Escaped here, once, so no reader of the file (fs cat, grep, read_file) gets raw controls.
    return shown(out)


def failed_note() -> str:
    """What a failed turn's rendering ends with."""
    return "\n_(the model request for this turn failed; it was not answered)_\n"
