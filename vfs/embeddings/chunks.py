"""Cutting a file into the pieces that are embedded.

Invariants:
- ``spans(content)`` is a pure function of the text: the same text always gives the
  same spans, so a chunk's number names the same text when a snippet is cut later.
- A chunk is whole lines of at most ``CHUNK_CHARS`` characters (about 400 words: the
  whole in-memory matrix is multiplied per query, so fewer, larger chunks keep a
  query at 10,000 files of 1-8 KB to ~30,000 rows; a longer line is
  cut), broken preferably at a blank line; at most ``MAX_CHUNKS`` a file (the first
  and the last halves of a longer one: a conversation's newest turns count), so
  embedding a file is bounded whatever its size.
- Each chunk is embedded with the file's path as words in front
  (``/preferences/meeting-notes.md`` -> ``preferences meeting notes``): a file named
  for its subject is found by it.
- What is embedded leaves out numbers and identifiers (``meaningful``): runs of
  digits (dates, clock times, counts) and hex ids (uuids, hashes, a conversation
  file's thread id). A conversation file holds the minute it was written and random
  ids; embedded, they moved a file's similarity by as much as the gap between two
  topics (LoCoMo question 2 ranked the wrong session when the test ran at another
  minute), so the same words would rank differently by when and where they were
  stored. Ranking by meaning is a function of the words only; full-text search
  still finds the numbers.
"""

from __future__ import annotations

import re

CHUNK_CHARS = 2000
MAX_CHUNKS = 32

_PATH_WORD = re.compile(r"[^\W_]+")
# A whole word (letters and digits) that is a number or an identifier: a uuid, digits
# only, or six or more hex digits with at least one digit ("decade" is a word, kept;
# "gpt4" and "k8s" are not all digits or hex, kept).
_NOISE_WORD = r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|\d+|(?=[a-f]*\d)[0-9a-f]{6,}"
_NOISE = re.compile(rf"(?<![^\W_])(?:{_NOISE_WORD})(?![^\W_])", re.IGNORECASE)
_NOISE_FULL = re.compile(rf"(?:{_NOISE_WORD})", re.IGNORECASE)


def meaningful(text: str) -> str:
    """``text`` without its numbers and identifiers (see the module docstring)."""
    return _NOISE.sub("", text)


def path_words(path: str) -> str:
    words = _PATH_WORD.findall(path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path)
    return " ".join(w for w in words if not _NOISE_FULL.fullmatch(w))


def spans(content: str) -> list[tuple[int, int]]:
    """The chunks of ``content`` as (start, end) offsets, in order (one empty span for an empty text)."""
    out: list[tuple[int, int]] = []
    start = pos = 0
    last_blank = -1  # end offset of the last blank line inside the current chunk
    n = len(content)
    while pos < n:
        nl = content.find("\n", pos)
        end = n if nl == -1 else nl + 1
        if end - start > CHUNK_CHARS:
            if pos > start:  # close the chunk before this line (at a blank line if there is one)
                cut = last_blank if last_blank > start else pos
                out.append((start, cut))
                start, last_blank = cut, -1
                continue
            # One line longer than a chunk: cut it.
            out.append((start, start + CHUNK_CHARS))
            start = pos = start + CHUNK_CHARS
            continue
        if content[pos:end].strip() == "":
            last_blank = end
        pos = end
    if start < n or not out:
        out.append((start, n))
    if len(out) > MAX_CHUNKS:
        half = MAX_CHUNKS // 2
        out = out[:half] + out[-half:]
    return out


def texts(path: str, content: str) -> list[str]:
    """What is embedded for ``path``: each chunk with the path's words in front, both
    without numbers and identifiers (``meaningful``)."""
    head = path_words(path)
    return [f"{head}\n{meaningful(content[s:e])}" for s, e in spans(content)]


def chunk_text(content: str, chunk: int) -> str:
    """The text of chunk number ``chunk`` (the whole text if the number is out of range)."""
    found = spans(content)
    if 0 <= chunk < len(found):
        s, e = found[chunk]
        return content[s:e]
    return content
