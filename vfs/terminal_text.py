"""The one escaping of text written to a terminal: ``shown``.

A terminal acts on some characters instead of drawing them: C0 controls (ESC
starts a sequence that can set the window title or clear the screen, CR returns
to the start of a line so later text covers earlier text), DEL, C1 controls
(U+009B is a one-character CSI on many terminals) and the bidirectional controls
(U+202E turns the rest of a line around). Text that comes from memory, a name or
the model passes through ``shown`` before any front end writes it to a person.

Invariants:
- ``shown`` replaces each such character with a visible escape and leaves every
  other character as it is: C0 (except tab and newline), DEL and C1 become
  ``\\xHH`` (ESC is ``\\x1b``); bidi controls (U+061C, U+200E, U+200F,
  U+202A-U+202E, U+2066-U+2069) become ``\\uHHHH`` (``\\u202e``). A carriage
  return is left alone only right before a newline (a CRLF line end draws nothing
  over anything); elsewhere it is ``\\r``. With ``one_line`` tab and newline are
  escaped too (``\\t``, ``\\n``), for titles and names that must stay one line.
- Text without such characters is returned unchanged (the same object), so plain
  text costs one regular-expression search.
- A backslash already in the text is not doubled: the escaping is for reading,
  not a reversible encoding, and the result never holds a character a terminal
  acts on.
- Conversation files (``episodes``) are rendered through it too, so the escape a
  person sees in chat is the one stored in ``/conversations/``.
"""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_ACTIVE = re.compile(f"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f{_BIDI}]|\\r(?!\\n)")
_ACTIVE_ONE_LINE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character a terminal would act on made visible (see the module)."""
    pattern = _ACTIVE_ONE_LINE if one_line else _ACTIVE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)
