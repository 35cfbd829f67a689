"""``@path`` in a chat message: attach that memory file's content to the message.

Invariants:
- A token is ``@`` at the start of the message or after white space or an opening
  bracket or quote, followed by a path (``@/AGENTS.md``, ``@skills/x.md``: relative
  means from the root). An address like ``ann@example.com`` is never a token.
- Only live files are attached, each once, in the order first named, at most
  ``MAX_FILES`` of them and ``MAX_BYTES`` in all; the message text itself is sent
  unchanged, with the files after it as ``<memory path=... version=...>`` blocks
  fenced like the system prompt's, so an attached file cannot close its block.
- A token that names no file is left as typed; one that starts with ``@/`` (clearly
  meant as a path) is reported, so the person knows it went without the file.
- Trailing sentence punctuation (``@/AGENTS.md.``) is not part of the path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memagent.agent.prompt import memory_block
from memagent.vfs import AgentView, VfsError, human_size

TOKEN = re.compile(r"(?:^|(?<=[\s(\[{\"'`]))@(/?[^\s@\"'`<>|]+)")
TRAILING = ".,;:!?)]}"
MAX_FILES = 20
MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class Attached:
    path: str
    version: int
    size: int


@dataclass
class Attachments:
    text: str  # the message as the model receives it
    files: list[Attached] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # "@/..." tokens that name no file
    skipped: list[str] = field(default_factory=list)  # files left out over the limits


def _candidates(token: str) -> list[str]:
    path = "/" + token.lstrip("/")
    found = [path]
    while path and path[-1] in TRAILING:
        path = path[:-1]
        found.append(path)
    return found


def attach(view: AgentView, text: str) -> Attachments:
    """``text`` with the memory files its ``@path`` tokens name appended."""
    result = Attachments(text)
    blocks: list[str] = []
    total = 0
    seen: set[str] = set()
    for match in TOKEN.finditer(text):
        token = match.group(1)
        hit = None
        for path in _candidates(token):
            try:
                if view.exists(path):
                    hit = view.read(path)  # a folder raises IsADirectory
                    break
            except VfsError:
                continue
        if hit is None:
            if token.startswith("/"):
                result.missing.append("@" + token.rstrip(TRAILING))
            continue
        if hit.path in seen:
            continue
        seen.add(hit.path)
        size = len(hit.content.encode("utf-8"))
        if len(result.files) >= MAX_FILES or total + size > MAX_BYTES:
            result.skipped.append(hit.path)
            continue
        total += size
        result.files.append(Attached(hit.path, hit.version, size))
        blocks.append(memory_block(hit.path, hit.version, hit.content))
    if blocks:
        result.text = text + "\n\n" + "\n\n".join(blocks)
    return result


def describe(files: list[Attached]) -> str:
    shown = ", ".join(f"{f.path} (version {f.version}, {human_size(f.size)})" for f in files)
    return f"attached {shown}"
