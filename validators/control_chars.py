"""Memory files hold no control characters a terminal or a reader would act on.

Invariants:
- Refused: C0 controls other than tab, newline and carriage return (NUL is left to
  ``text.check_encoding``, which reports it once), DEL, and every C1 control
  (U+0080-U+009F). ESC, BEL and U+009B (CSI) would let a file set a window title
  or clear the screen wherever it is shown; none of them is text.
- One Problem per write, whatever the count: it names the first such character by
  code point and abbreviation (``U+001B ESC``) and its line, and says how many
  there are in all. The message never quotes the content around it.
"""

from __future__ import annotations

import re

from .base import LineIndex, Problem, plural

KIND = "text"

_REFUSED = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# unicodedata has no names for controls; these are their standard abbreviations
# (ISO 6429), indexed by code point from U+0000 and from U+0080.
_C0 = ("NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR", "SO",
       "SI", "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS",
       "GS", "RS", "US")
_C1 = ("PAD", "HOP", "BPH", "NBH", "IND", "NEL", "SSA", "ESA", "HTS", "HTJ", "VTS", "PLD", "PLU", "RI",
       "SS2", "SS3", "DCS", "PU1", "PU2", "STS", "CCH", "MW", "SPA", "EPA", "SOS", "SGCI", "SCI", "CSI",
       "ST", "OSC", "PM", "APC")


def control_name(ch: str) -> str:
    """``U+001B ESC``: the code point and abbreviation of a C0, DEL or C1 control."""
    code = ord(ch)
    if code < 0x20:
        abbr = _C0[code]
    elif code == 0x7F:
        abbr = "DEL"
    else:
        abbr = _C1[code - 0x80]
    return f"U+{code:04X} {abbr}"


def check_controls(content: str, kind: str = KIND) -> list[Problem]:
    """One Problem naming the first refused control character and its line; [] if none."""
    first = _REFUSED.search(content)
    if first is None:
        return []
    count = sum(1 for _ in _REFUSED.finditer(content, first.start()))
    more = f" ({plural(count, 'control character')} in all)" if count > 1 else ""
    return [
        Problem(
            f"line {LineIndex(content).line_of(first.start())}",
            f"contains the control character {control_name(first.group())}{more}. Memory files are "
            "plain text: only tab, newline and carriage return are allowed among control characters "
            "(C0, DEL and C1 U+0080-U+009F); remove them, or write the escape as visible text (\\x1b).",
            kind,
        )
    ]
