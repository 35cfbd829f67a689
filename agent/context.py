"""The context budget: what each model request may hold, and how a long thread fits in it.

Sits between the loop and the model: ``ContextWindow.prepare`` takes the system
blocks (memory), the tool definitions and the whole conversation, and returns the
``ModelRequest`` to send. Memory is not history: the loop's message list (and the
thread in the database) keeps every message; only the request is shaped.

Invariants of every request ``prepare`` returns:
- Its size, counted by the model's ``count_tokens`` (the Messages API's counting)
  when the local estimate says it is near the budget, otherwise by the calibrated
  local estimate, is at most ``budget`` minus a 10 % margin.
- The system blocks and the tools are passed through unchanged: memory is never
  trimmed, so their bytes only change when memory does (prompt caching holds).
- The oldest turns are folded into a running summary, written by the model with
  the built-in ``prompts/summary.md``; if that call fails, a deterministic fallback
  (the first sentence of each folded message) is used and the turn goes on. Facts
  the user asked to be noted are copied from the folded messages verbatim too.
  The summary rides at the head of the first message, in its own block with a
  cache breakpoint, so tools + system stay a cached prefix and the summary is
  cached after them.
- The messages sent start with a user turn (text, no orphan ``tool_result``) and
  alternate; a ``tool_use`` is never sent without its ``tool_result`` nor the
  reverse: folding happens only at the start of a user turn, and tool steps left
  out of an oversized current turn go out as whole (call, result) pairs.
- A single oversized tool result (or, as a last resort, any block) is cut in the
  request with a note saying how to read the rest; the stored message is whole.
- Folding goes down to half the budget, not just under it, so a summary is written
  once per many turns, not on every request.
- A folding this window did not make under its current budget (one restored with a
  thread, or made before the budget grew) is undone at the next request when the
  whole conversation fits in half the budget (the level folding aims at, so it is
  not folded again at once): the earlier messages go back in full and ``notice``
  says so. That check is made once per restored folding and budget.

Where the rest lives: ``context_tokens`` counts (the calibrated local estimate, the
API's count near the limit); ``context_summary`` holds the message helpers, the
summary's forms (model-written, fallback, noted facts) and ``Folding``. Their public
names are importable from here too (``__all__``), as the loop and the front ends do.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memagent.agent.context_summary import (
    NOTED_HEADING,
    SUMMARY_CLOSE,
    SUMMARY_OPEN,
    Folding,
    SummaryMethod,
    as_blocks,
    compose,
    fallback_summary,
    is_turn_start,
    noted_facts,
    result_text,
    split_stored,
    summary_prompt,
    tool_inputs,
    transcript,
)
from memagent.agent.context_tokens import NEAR, Counted, Counter, TokenCounting, estimate
from memagent.agent.model import Model, ModelError, ModelRequest, Usage

__all__ = [
    "DEFAULT_BUDGET", "DEFAULT_WINDOW", "FOLD_TO", "MARGIN", "MIN_BUDGET", "NEAR", "NOTED_HEADING", "NOTED_SHARE",
    "SUMMARY_CLOSE", "SUMMARY_OPEN", "SUMMARY_OUTPUT_TOKENS", "SUMMARY_SHARE", "TOOL_RESULT_SHARE",
    "ContextWindow", "Counted", "Counter", "Folding", "Notice", "Shaped", "SummaryMethod", "TokenCounting",
    "budget_for", "compose", "cut_note", "estimate", "fallback_summary", "is_turn_start", "noted_facts",
    "split_stored", "summary_prompt", "transcript",
]

log = logging.getLogger("memagent.agent")

# Claude's context window (tokens), assumed when the model's provider does not know
# its window; the default budget is half the window, which leaves room for the
# answer, for thinking and for counting error, and keeps requests cheap.
DEFAULT_WINDOW = 200_000
DEFAULT_BUDGET = DEFAULT_WINDOW // 2
MIN_BUDGET = 2_000
MARGIN = 0.10          # share of the budget kept free of what the counter says
FOLD_TO = 0.5          # after folding, the request is at most this share of the budget
TOOL_RESULT_SHARE = 0.25  # one tool result may take at most this share of the limit
SUMMARY_SHARE = 0.125     # the summary body may take at most this share of the limit
NOTED_SHARE = 0.0625      # and the facts noted verbatim this share
SUMMARY_OUTPUT_TOKENS = 2048

_NUMBERED_LINE = re.compile(r"^\s*(\d+)\t", re.MULTILINE)


# -- shaping one request --------------------------------------------------------------


def cut_note(shown: str, total: int, call: tuple[str, dict[str, Any]] | None) -> str:
    """The note after a tool result cut to fit: how much is shown and how to read on."""
    head = (f"\n\n[cut to fit the context budget: {len(shown):,} of {total:,} characters shown; "
            "the whole result is kept in the thread.")
    if call is not None and call[0] == "read_file":
        lines = _NUMBERED_LINE.findall(shown)
        last = int(lines[-1]) if lines else 0
        path = call[1].get("file_path", "?")
        return head + f" Read on with read_file(file_path={json.dumps(path)}, offset={last}).]"
    if call is not None:
        return head + f" Run {call[0]} again with a narrower query, path or limit to see the rest.]"
    return head + "]"


def _cut_text(text: str, keep: int) -> str:
    """``text`` cut to about ``keep`` characters, at a line end when one is near."""
    cut = text[:keep]
    nl = cut.rfind("\n")
    return cut[:nl] if nl > keep * 0.8 else cut


@dataclass
class Shaped:
    """What ``prepare`` decided for one request (``/context`` shows the same figures)."""

    request: ModelRequest
    tokens: int
    counted: Counted
    memory_tokens: int
    summary_tokens: int
    recent_tokens: int
    recent_messages: int
    elided_steps: int = 0



# -- the window ----------------------------------------------------------------------------


def budget_for(window: int | None) -> int:
    """The default budget for a model whose window is ``window`` tokens (its provider's
    ``ModelInfo.context_window``, e.g. what Ollama says): half of it, at least
    ``MIN_BUDGET``; ``DEFAULT_BUDGET`` when the window is unknown."""
    if window is None or window <= 0:
        return DEFAULT_BUDGET
    return max(window // 2, MIN_BUDGET)


Notice = Callable[[str], None]


class ContextWindow:
    """Keeps one conversation's requests under ``budget`` tokens (see the module docstring)."""

    def __init__(self, model: Model, *, budget: int | None = None) -> None:
        self.model = model
        # No budget given: from the window the model says it has (a model MAY carry
        # ``context_window``), else the default.
        window = getattr(model, "context_window", None)
        self.budget = budget if budget is not None else budget_for(window if isinstance(window, int) else None)
        self.counter = Counter(model)
        self.folding = Folding()
        self.spent = Usage()  # usage of summarising calls, drained by the loop
        self.last: Shaped | None = None
        self.conversation_path: str | None = None
        # The budget under which the current folding is known to be needed (it was
        # made or checked under it); None: check before the next request.
        self._folded_under: int | None = None
        # An unfolding found by report() (/context) is told with the next request.
        self._unfold_note: str | None = None

    @property
    def limit(self) -> int:
        """What the counter may say a request holds: the budget less the margin."""
        return max(int(self.budget * (1 - MARGIN)), 1)

    def reset(self, folding: Folding | None = None) -> None:
        self.folding = folding or Folding()
        self.last = None
        self._folded_under = None
        self._unfold_note = None

    def _unfold_if_room(self, system: list[dict[str, Any]], tools: list[dict[str, Any]],
                        messages: list[dict[str, Any]], max_tokens: int) -> None:
        if not self.folding.folded or self._folded_under == self.budget:
            return
        self._folded_under = self.budget
        whole = self._shape(system, tools, messages, max_tokens, 0)
        if whole.tokens > int(self.budget * FOLD_TO):
            return
        folded = self.folding.folded
        self.folding = Folding()
        self._unfold_note = (f"context: the {folded} earlier messages folded into the summary are back in "
                             f"full (the {self.budget:,}-token budget holds the whole thread)")

    # -- the request --------------------------------------------------------------------

    def prepare(self, system: list[dict[str, Any]], tools: list[dict[str, Any]],
                messages: list[dict[str, Any]], *, max_tokens: int,
                on_fold: Callable[[Folding, int], None] | None = None,
                notice: Notice | None = None) -> Shaped:
        """The request for ``messages`` under the budget (may fold turns into the summary).

        ``on_fold(folding, folded_before)`` is told about a new summary (to store it);
        ``notice`` gets one line for the person when turns are folded.
        """
        limit = self.limit
        self._unfold_if_room(system, tools, messages, max_tokens)
        if self._unfold_note is not None and notice is not None:
            notice(self._unfold_note)
            self._unfold_note = None
        shaped = self._shape(system, tools, messages, max_tokens, self.folding.folded)
        if shaped.tokens > limit:
            start = self._fold_point(system, tools, messages, limit)
            if start > self.folding.folded:
                before = self.folding.folded
                self._fold(messages, start, limit)
                self._folded_under = self.budget
                if on_fold is not None:
                    on_fold(self.folding, before)
                if notice is not None:
                    notice(f"context: {start - before} earlier messages folded into the running summary "
                           f"to stay under the {self.budget:,}-token budget (/context shows it)")
                shaped = self._shape(system, tools, messages, max_tokens, self.folding.folded)
            if shaped.tokens > limit:
                shaped = self._squeeze(system, tools, messages, max_tokens, limit)
        self.last = shaped
        return shaped

    def _summary_block(self, elided: list[str]) -> dict[str, Any] | None:
        f = self.folding
        if not f.text and not elided:
            return None
        parts = [SUMMARY_OPEN]
        if f.text:
            where = f" (the whole thread is {self.conversation_path})" if self.conversation_path else ""
            parts.append(f"Summary of the {f.folded} earlier messages of this conversation, folded to fit the "
                         f"context budget{where}:")
            parts.append(compose(f.text, f.noted))
        if elided:
            parts.append(f"{len(elided)} earlier tool steps of the current turn are left out here to fit the "
                         "budget (their results are kept in the thread; run a tool again if you need one): "
                         + "; ".join(elided))
        parts.append(SUMMARY_CLOSE)
        return {"type": "text", "text": "\n".join(parts), "cache_control": {"type": "ephemeral"}}

    def _shape(self, system: list[dict[str, Any]], tools: list[dict[str, Any]],
               messages: list[dict[str, Any]], max_tokens: int, start: int,
               elide: int = 0, squeeze: dict[tuple[int, int], int] | None = None) -> Shaped:
        """The request for ``messages[start:]``: summary at the head, big results cut.

        ``elide`` leaves out that many (call, result) steps after the current turn's
        first message; ``squeeze`` cuts block (message, block) to so many characters.
        """
        recent = list(messages[start:])
        elided: list[str] = []
        if elide:
            # recent[0] opens the current turn; steps are (assistant, user) pairs after it.
            dropped = recent[1 : 1 + 2 * elide]
            for m in dropped:
                if m["role"] == "assistant":
                    elided += [f"{b.get('name')}" for b in as_blocks(m["content"]) if b.get("type") == "tool_use"]
            recent = recent[:1] + recent[1 + 2 * elide :]
        calls = tool_inputs(recent)
        cap = max(int(self.limit * TOOL_RESULT_SHARE / max(self.counter.factor, 0.1) * 3.5), 2000)
        out: list[dict[str, Any]] = []
        for i, m in enumerate(recent):
            content = m["content"]
            changed = False
            blocks = as_blocks(content)
            for j, b in enumerate(blocks):
                limit_chars = (squeeze or {}).get((i, j))
                if b.get("type") == "tool_result":
                    text = result_text(b)
                    keep = min(cap, limit_chars) if limit_chars is not None else cap
                    if text is not None and len(text) > keep:
                        shown = _cut_text(text, keep)
                        b["content"] = shown + cut_note(shown, len(text), calls.get(str(b.get("tool_use_id"))))
                        changed = True
                elif b.get("type") == "text" and limit_chars is not None:
                    text = str(b.get("text", ""))
                    if len(text) > limit_chars:
                        shown = _cut_text(text, limit_chars)
                        b["text"] = (shown + f"\n\n[cut to fit the context budget: {len(shown):,} of "
                                     f"{len(text):,} characters shown; the whole message is kept in the thread]")
                        changed = True
            out.append({"role": m["role"], "content": blocks} if changed else m)
        block = self._summary_block(elided)
        summary_tokens = 0
        if block is not None and out:
            head = out[0]
            out[0] = {"role": head["role"], "content": [block, *as_blocks(head["content"])]}
            summary_tokens = self.counter.scaled(self.counter.raw(block))
        request = ModelRequest(system=system, messages=out, tools=tools, max_tokens=max_tokens)
        tokens, counted = self.counter.count(request, self.limit)
        memory = self.counter.scaled(self.counter.raw_list(system) + self.counter.raw_list(tools))
        return Shaped(request, tokens, counted, memory, summary_tokens,
                      max(tokens - memory - summary_tokens, 0), len(recent), len(elided))

    def _fold_point(self, system: list[dict[str, Any]], tools: list[dict[str, Any]],
                    messages: list[dict[str, Any]], limit: int) -> int:
        """The first message to keep verbatim: the earliest turn start that leaves the
        request at ``FOLD_TO`` of the budget (or the current turn's start)."""
        fixed = self.counter.scaled(self.counter.raw_list(system) + self.counter.raw_list(tools))
        reserve = int(limit * (SUMMARY_SHARE + NOTED_SHARE))
        target = max(int(self.budget * FOLD_TO) - fixed - reserve, 0)
        starts = [i for i in range(self.folding.folded + 1, len(messages)) if is_turn_start(messages[i])]
        if not starts:
            return self.folding.folded
        suffix = 0
        tail: dict[int, int] = {}
        for i in range(len(messages) - 1, self.folding.folded - 1, -1):
            suffix += self.counter.raw(messages[i])
            tail[i] = self.counter.scaled(suffix)
        for i in starts:
            if tail[i] <= target:
                return i
        return starts[-1]

    def _squeeze(self, system: list[dict[str, Any]], tools: list[dict[str, Any]],
                 messages: list[dict[str, Any]], max_tokens: int, limit: int) -> Shaped:
        """The current turn alone is over the limit: leave out its older tool steps,
        then cut its biggest blocks, until the request fits."""
        start = self.folding.folded
        recent = messages[start:]
        steps = max((len(recent) - 2) // 2, 0)  # keep the opening message and the last step
        shaped = self._shape(system, tools, messages, max_tokens, start)
        elide = 0
        while shaped.tokens > limit and elide < steps:
            elide = min(steps, max(elide * 2, 1))
            shaped = self._shape(system, tools, messages, max_tokens, start, elide=elide)
        squeeze: dict[tuple[int, int], int] = {}
        for _ in range(8):
            if shaped.tokens <= limit:
                break
            sent = shaped.request.messages
            sizes = []
            for i, m in enumerate(sent):
                for j, b in enumerate(as_blocks(m["content"])):
                    text = b.get("text") if b.get("type") == "text" else result_text(b)
                    if isinstance(text, str) and not text.startswith(SUMMARY_OPEN):
                        # Index into the unsummarised message: the summary block shifts the head by one.
                        jj = j - 1 if i == 0 and shaped.summary_tokens else j
                        sizes.append((len(text), i, jj))
            if not sizes:
                break
            size, i, j = max(sizes)
            over_chars = int((shaped.tokens - limit) * 3.5 / max(self.counter.factor, 0.1)) + 200
            squeeze[(i, j)] = max(size - over_chars - size // 8, 200)
            shaped = self._shape(system, tools, messages, max_tokens, start, elide=elide, squeeze=squeeze)
        if shaped.tokens > limit:
            log.warning("request of %d tokens is over the %d-token limit even after folding", shaped.tokens, limit)
        return shaped

    # -- folding ------------------------------------------------------------------------

    def _fold(self, messages: list[dict[str, Any]], start: int, limit: int) -> None:
        f = self.folding
        chunk = messages[f.folded : start]
        noted = list(f.noted)
        for fact in noted_facts(chunk):
            if fact not in noted:
                noted.append(fact)
        noted_cap = int(limit * NOTED_SHARE * 3.5)
        while noted and sum(len(n) + 3 for n in noted) > noted_cap:
            noted.pop()  # the newest go first: the oldest are the ones a reader cannot find nearby
        body_cap = int(limit * SUMMARY_SHARE * 3.5)
        body, method = self._summarise(f.text, chunk, limit, body_cap)
        self.folding = Folding(start, body, noted, method)

    def _summarise(self, previous: str, chunk: list[dict[str, Any]], limit: int,
                   body_cap: int) -> tuple[str, SummaryMethod]:
        """A new summary body from the previous one and ``chunk``: the model's, or the fallback."""
        pieces = transcript(chunk)
        # What one summarising request may carry besides the instructions and the previous summary.
        room = max(int((limit - SUMMARY_OUTPUT_TOKENS) * 3.0) - len(previous) - len(summary_prompt()), 2000)
        batches: list[str] = []
        current = ""
        for piece in pieces:
            while len(piece) > room:  # a message bigger than one request: in parts
                if current:
                    batches.append(current)
                    current = ""
                batches.append(piece[:room])
                piece = piece[room:]
            if current and len(current) + len(piece) + 2 > room:
                batches.append(current)
                current = ""
            current += piece + "\n\n"
        if current:
            batches.append(current)
        body = previous
        try:
            for batch in batches:
                body = self._ask(body, batch, body_cap)
        except ModelError as err:
            log.info("summary request failed (%s); using the fallback summary", err)
            return fallback_summary(previous, chunk, body_cap), "fallback"
        return body, "model"

    def _ask(self, previous: str, batch: str, body_cap: int) -> str:
        prompt = summary_prompt().replace("{max_words}", str(max(body_cap // 6, 100)))
        text = (f"<previous-summary>\n{previous or '(none yet: this is the start of the conversation)'}\n"
                f"</previous-summary>\n\n<new-messages>\n{batch}</new-messages>\n\n"
                "Write the updated summary now.")
        request = ModelRequest(system=[{"type": "text", "text": prompt}],
                               messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
                               tools=[], max_tokens=SUMMARY_OUTPUT_TOKENS)
        response = self.model.respond(request)
        self.spent.add(response.usage)
        answer = response.text.strip()
        if not answer:
            raise ModelError("the summary request came back without text")
        if len(answer) > body_cap:
            answer = answer[: body_cap - 1] + "…"
        return answer

    # -- reporting ------------------------------------------------------------------------

    def report(self, system: list[dict[str, Any]], tools: list[dict[str, Any]],
               messages: list[dict[str, Any]], max_tokens: int) -> Shaped:
        """The figures of the request that would be sent now (nothing is folded; a
        folding the budget no longer needs is undone, as the next request would)."""
        self._unfold_if_room(system, tools, messages, max_tokens)
        return self._shape(system, tools, messages, max_tokens, self.folding.folded)
