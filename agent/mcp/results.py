"""An MCP tool result as Messages API content: text passed on, images as image blocks,
everything else described. Bounded whatever the server sends.

Invariants:
- Nothing is dropped silently: every content item becomes a block or a one-line
  description (audio, binary resources, resource links, unknown kinds, images the
  model cannot take), and a result cut at a cap says so and how much was left out.
- The text of a result is at most ``MAX_TEXT_CHARS`` characters; at most
  ``MAX_IMAGES`` images pass, each at most ``MAX_IMAGE_BYTES`` of base64.
- ``ToolOutput.text`` is a readable text version of the whole result (what the
  terminal shows and the thread's event log keeps); ``blocks`` is what the model
  receives, and is ``None`` when the result is text only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_TEXT_CHARS = 100_000
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # the Messages API's limit for one image
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True)
class ToolOutput:
    text: str
    blocks: list[dict[str, Any]] | None
    is_error: bool


def _size(data: str) -> str:
    n = len(data) * 3 // 4
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} bytes"


def _attr(item: Any, name: str, default: Any = None) -> Any:
    return getattr(item, name, default)


def _describe(item: Any) -> str:
    kind = _attr(item, "type", type(item).__name__)
    if kind == "audio":
        return f"[audio content: {_attr(item, 'mime_type', '?')}, {_size(_attr(item, 'data', ''))}; not shown]"
    if kind == "resource_link":
        parts = [f"[resource link: {_attr(item, 'name', '')} <{_attr(item, 'uri', '')}>"]
        if _attr(item, "mime_type"):
            parts.append(f" ({item.mime_type})")
        if _attr(item, "description"):
            parts.append(f": {' '.join(str(item.description).split())[:300]}")
        return "".join(parts) + "]"
    return f"[{kind} content; not shown]"


def _resource_text(item: Any) -> str:
    res = _attr(item, "resource")
    uri = _attr(res, "uri", "")
    mime = _attr(res, "mime_type") or "unknown type"
    text = _attr(res, "text")
    if isinstance(text, str):
        return f"[resource <{uri}> ({mime})]\n{text}"
    return f"[resource <{uri}> ({mime}), {_size(_attr(res, 'blob', '') or '')} of binary data; not shown]"


def convert_result(result: Any, *, max_chars: int = MAX_TEXT_CHARS) -> ToolOutput:
    """``result`` (an ``mcp_types.CallToolResult``) as text and content blocks."""
    pieces: list[str | dict[str, Any]] = []
    images = 0
    for item in list(_attr(result, "content", None) or []):
        kind = _attr(item, "type")
        if kind == "text":
            pieces.append(str(_attr(item, "text", "")))
        elif kind == "image":
            mime, data = _attr(item, "mime_type", ""), _attr(item, "data", "") or ""
            if mime not in IMAGE_TYPES:
                pieces.append(f"[image: {mime}, {_size(data)}; this type cannot be shown to the model]")
            elif len(data) > MAX_IMAGE_BYTES:
                pieces.append(f"[image: {mime}, {_size(data)}; over the size cap, not shown]")
            elif images >= MAX_IMAGES:
                pieces.append(f"[image: {mime}, {_size(data)}; more than {MAX_IMAGES} images, not shown]")
            else:
                images += 1
                pieces.append({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
        elif kind == "resource":
            pieces.append(_resource_text(item))
        else:
            pieces.append(_describe(item))
    structured = _attr(result, "structured_content")
    if not pieces and structured is not None:
        pieces.append(json.dumps(structured, ensure_ascii=False, indent=2, default=str))
    if not pieces:
        pieces.append("(the tool returned no content)")

    blocks: list[dict[str, Any]] = []
    shown: list[str] = []
    budget = max_chars
    cut = 0
    for piece in pieces:
        if isinstance(piece, dict):
            blocks.append(piece)
            shown.append(f"[image: {piece['source']['media_type']}, {_size(piece['source']['data'])}]")
            continue
        if budget <= 0:
            cut += len(piece)
            continue
        text = piece[:budget]
        cut += len(piece) - len(text)
        budget -= len(text)
        blocks.append({"type": "text", "text": text})
        shown.append(text)
    if cut:
        note = (f"[result cut: {cut:,} more characters not shown (the cap is {max_chars:,}); ask the tool "
                "for less, e.g. a narrower query or a page]")
        blocks.append({"type": "text", "text": note})
        shown.append(note)
    text = "\n".join(shown)
    only_text = all(b["type"] == "text" for b in blocks)
    return ToolOutput(text, None if only_text else blocks, bool(_attr(result, "is_error", False)))
