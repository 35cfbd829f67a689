"""Text changes: exact-string edits and unified diffs.

Invariants:
- ``apply_edit`` replaces ``old`` only when it occurs exactly once (or every
  occurrence with ``replace_all``); anything else is an ``EditMismatch`` naming the
  path as the caller gave it.
- ``unified_diff`` shows a change as small as it is: the lines both sides share at
  the start and the end are set aside before difflib sees the rest, so a one-line
  edit of a file of 20,000 repeated lines is one ``-`` and one ``+`` line (difflib
  alone treats such common lines as junk and rewrites the whole file). Hunk headers
  count lines of the whole file.
- Work is bounded: linear for the shared ends; the differing middle goes to difflib
  without the junk heuristic while it is small, else to a shortest-edit-script
  search (Myers) with a fixed work budget, which finds a few scattered edits in a
  large file of repeated lines; past the budget, difflib with its junk heuristic
  (correct, fast, maybe not minimal). Nothing is quadratic in the file size.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from memagent.vfs.errors import EditMismatch

CONTEXT = 3
# Above this many line pairs in the differing middle, difflib keeps its "popular
# lines are junk" heuristic: the diff stays correct, maybe not minimal, and fast.
# Without the heuristic difflib is worse than quadratic on repeated lines (250 x 250
# repeated lines: ~0.1 s; 2,000 x 2,000: ~25 s).
_EXACT_PAIRS = 250 * 250
# Steps (diagonal moves and edits) the Myers search may take before giving up:
# about a second in CPython; 20 scattered edits in 20,000 repeated lines take 1/100 s.
_MYERS_BUDGET = 500_000

Opcode = tuple[str, int, int, int, int]


def apply_edit(path: str, content: str, old: str, new: str, replace_all: bool) -> str:
    if old == "":
        raise EditMismatch("old_string is empty; give the exact text to replace (use write_file to rewrite a file)")
    if old == new:
        raise EditMismatch("old_string and new_string are the same; nothing would change")
    count = content.count(old)
    if count == 0:
        raise EditMismatch(
            f"old_string was not found in {path} (0 matches); read the file and copy the "
            "exact text, including whitespace and line breaks"
        )
    if count > 1 and not replace_all:
        raise EditMismatch(
            f"old_string appears {count} times in {path}; add surrounding lines to make it "
            "unique, or set replace_all to replace every occurrence"
        )
    return content.replace(old, new)


def _opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    """difflib-style opcodes over the whole of ``a`` and ``b``, shared ends matched first."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    out: list[Opcode] = []
    if head:
        out.append(("equal", 0, head, 0, head))
    if mid_a or mid_b:
        exact = len(mid_a) * len(mid_b) <= _EXACT_PAIRS
        found = None if exact or not mid_a or not mid_b else _myers(mid_a, mid_b, _MYERS_BUDGET)
        codes: list[Opcode] = (
            found if found is not None
            else list(difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=not exact).get_opcodes())
        )
        for tag, i1, i2, j1, j2 in codes:
            out.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        out.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return out


def _myers(a: list[str], b: list[str], budget: int) -> list[Opcode] | None:
    """Opcodes of a shortest edit script from ``a`` to ``b``, or None past ``budget`` steps.

    The greedy forward search of Myers' O((N+M)D) algorithm: for each number of
    edits d, the furthest point reached on every diagonal k = x - y; the reached
    points of every round are kept (O(D^2) memory, D bounded by the budget) and
    walked back to recover the script.
    """
    n, m = len(a), len(b)
    v: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    steps = 0
    for d in range(n + m + 1):
        trace.append(dict(v))
        for k in range(-d, d + 1, 2):
            x = v[k + 1] if k == -d or (k != d and v[k - 1] < v[k + 1]) else v[k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            steps += 1 + x - start
            v[k] = x
            if x >= n and y >= m:
                return _script(trace, n, m)
        if steps > budget:
            return None
    return None  # not reached: d = n + m always ends the search


def _script(trace: list[dict[int, int]], n: int, m: int) -> list[Opcode]:
    """Walk the rounds back from (n, m) to (0, 0): equal runs and the edits between them."""
    runs: list[Opcode] = []  # backwards; each an equal run or a one-line edit
    x, y = n, m
    for d in range(len(trace) - 1, -1, -1):
        v = trace[d]
        k = x - y
        prev_k = k + 1 if k == -d or (k != d and v[k - 1] < v[k + 1]) else k - 1
        prev_x = v[prev_k]
        prev_y = prev_x - prev_k
        snake = min(x - prev_x, y - prev_y) if d else x
        if snake > 0:
            runs.append(("equal", x - snake, x, y - snake, y))
            x, y = x - snake, y - snake
        if d:
            runs.append(("insert", x, x, prev_y, y) if x == prev_x else ("delete", prev_x, x, y, y))
            x, y = prev_x, prev_y
    out: list[Opcode] = []
    for tag, i1, i2, j1, j2 in reversed(runs):
        if out and (out[-1][0] == "equal") == (tag == "equal"):
            last = out[-1]  # one opcode per run of equal lines, one per run of edits
            out[-1] = (last[0] if tag == "equal" else "replace", last[1], i2, last[3], j2)
        else:
            out.append((tag, i1, i2, j1, j2))
    return out


def _hunks(codes: list[Opcode], n: int) -> Iterator[list[Opcode]]:
    """Group opcodes into hunks with at most ``n`` lines of context around each change."""
    if not codes or all(c[0] == "equal" for c in codes):
        return
    codes = list(codes)
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = (tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = (tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n))
    hunk: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * n and hunk:
            # A long run of shared lines ends this hunk and starts the next one.
            hunk.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            yield hunk
            hunk = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        hunk.append((tag, i1, i2, j1, j2))
    if hunk and not (len(hunk) == 1 and hunk[0][0] == "equal"):
        yield hunk


def _range(start: int, stop: int) -> str:
    """A hunk header range: 1-based first line and count (``N,0`` names the line before)."""
    length = stop - start
    first = start + 1
    if length == 1:
        return str(first)
    if length == 0:
        first -= 1
    return f"{first},{length}"


def unified_diff(before: str | None, after: str | None, a: str, b: str, *, context: int = CONTEXT) -> str:
    """A unified diff; a missing side (new or deleted file) diffs against nothing."""
    old = (before or "").splitlines(keepends=True)
    new = (after or "").splitlines(keepends=True)
    out: list[str] = []
    for hunk in _hunks(_opcodes(old, new), context):
        if not out:
            out.append(f"--- {a if before is not None else '/dev/null'}\n")
            out.append(f"+++ {b if after is not None else '/dev/null'}\n")
        first, last = hunk[0], hunk[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in hunk:
            if tag == "equal":
                out += (" " + line for line in old[i1:i2])
                continue
            out += ("-" + line for line in old[i1:i2])
            out += ("+" + line for line in new[j1:j2])
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)
