"""LongMemEval and LoCoMo: their official data files replayed into fresh agents.

Formats (as the benchmarks publish them):

- LongMemEval (``longmemeval_s.json``, ``_m``, ``_oracle``): a JSON list of instances
  with ``question_id``, ``question_type``, ``question``, ``answer``, ``question_date``,
  ``haystack_session_ids``, ``haystack_dates``, ``haystack_sessions`` (each a list of
  ``{role, content}`` turns) and ``answer_session_ids``. Each instance has its own
  history: one fresh agent per instance.
- LoCoMo (``locomo10.json``): a JSON list of samples with ``sample_id``,
  ``conversation`` (``speaker_a``, ``speaker_b``, ``session_N`` lists of
  ``{speaker, dia_id, text}`` and ``session_N_date_time``) and ``qa`` (``question``,
  ``answer``, ``evidence`` such as ``["D1:3"]`` = session 1, ``category``). One fresh
  agent per sample, all its questions.

Invariants:
- Each history session becomes one past thread (``ThreadStore.create_many``), so it
  is a file under ``/conversations/`` like any real conversation; messages alternate
  user/assistant (LoCoMo's ``speaker_a`` is the user), the session date opens it.
- ``--reflect`` runs ``agent.reflection.reflect`` (yolo) over the history first.
- Questions are asked in new threads through the chat session (``harness.Run``);
  scores are the judge-free metrics (``metrics``) plus, with a judge model, its yes/no.
- Retrieval-only asks no model: for each question ``AgentView.search`` (what
  ``search_memory`` answers) ranks the conversation files; recall@k is the share of
  the evidence sessions among the first k.
- A file that is not in the format is a ``BenchmarkError`` naming the file and the
  item (the CLI exits 2), never a traceback.
- Files are read one record (instance or sample) at a time (``records``): memory holds
  one record's text and what is made of it, never the file (``longmemeval_m.json`` is
  about 2.7 GB; its records about 6 MB). A record may nest at most ``MAX_DEPTH`` levels
  (the formats need 6) and hold at most ``MAX_RECORD_CHARS`` characters; beyond either
  it is refused in one line, before any recursive code walks it.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from memagent.agent.evals.checks import short
from memagent.agent.evals.harness import (
    CheckResult,
    Counting,
    EvalUI,
    Run,
    ScenarioResult,
    SetupError,
    refused,
    scratch,
)
from memagent.agent.evals.metrics import contains, exact_match, recall_at_k, token_f1
from memagent.agent.evals.scenario import Scenario, Step, Turn
from memagent.agent.model import Model, ModelError, ModelRequest
from memagent.agent.reflection import reflect
from memagent.validators.nesting import MAX_DEPTH, line_and_column, too_deep
from memagent.vfs import AgentView, Memory, SqlStore

Benchmark = Literal["longmemeval", "locomo"]
F1_PASS = 0.5
# Bytes read at a time; a record longer than what is buffered makes the next read as long.
CHUNK = 1 << 20
# The published records are at most a few MB; a record over this is not one of them.
MAX_RECORD_CHARS = 64 << 20
JUDGE_PROMPT = (
    "You grade an assistant's answer to a question about a past conversation.\n"
    "Question: {question}\nCorrect answer: {gold}\nAssistant's answer: {answer}\n\n"
    "Does the assistant's answer contain the correct answer (same meaning)? Reply with one word: yes or no.")


class BenchmarkError(Exception):
    """A data file not in the benchmark's published format (one line)."""


@dataclass
class Question:
    id: str
    text: str
    gold: str
    evidence: list[str]  # session ids
    kind: str


@dataclass
class History:
    """One agent's past: its sessions (id, date, messages) and the questions about them."""

    id: str
    sessions: list[tuple[str, str, list[dict[str, Any]]]]
    questions: list[Question]


def _alternating(turns: list[tuple[str, str]], date: str) -> list[dict[str, Any]]:
    """Messages that alternate user/assistant, starting with the user, the date first."""
    merged: list[tuple[str, str]] = []
    for role, text in turns:
        if merged and merged[-1][0] == role:
            merged[-1] = (role, merged[-1][1] + "\n\n" + text)
        else:
            merged.append((role, text))
    if not merged or merged[0][0] != "user":
        merged.insert(0, ("user", ""))
    head = f"[conversation of {date}]" if date else "[conversation]"
    merged[0] = ("user", f"{head}\n{merged[0][1]}".rstrip())
    return [{"role": r, "content": [{"type": "text", "text": t or "(no text)"}]} for r, t in merged]


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _Text:
    """A UTF-8 file read as text in pieces: ``buf[pos:]`` is what is not consumed yet."""

    def __init__(self, path: Path, chunk: int) -> None:
        self.path, self.chunk = path, chunk
        self.file = path.open("rb")
        self.utf8 = codecs.getincrementaldecoder("utf-8")()
        self.buf, self.pos = "", 0
        self.lines = 0  # newlines before buf[0]
        self.eof = False

    def more(self, at_least: int) -> None:
        """Drop what is consumed and append at least ``at_least`` more bytes' worth (or reach the end)."""
        self.lines += self.buf.count("\n", 0, self.pos)
        self.buf, self.pos = self.buf[self.pos:], 0
        data = self.file.read(max(self.chunk, at_least))
        self.eof = not data
        try:
            self.buf += self.utf8.decode(data, final=self.eof)
        except UnicodeDecodeError as err:
            raise BenchmarkError(f"{self.path}:{self.line(len(self.buf))}: not UTF-8 text ({err.reason}); "
                                 "is this the published file?") from None

    def next_char(self) -> str:
        """The next character that is not white space ('' at the end), not consumed."""
        while True:
            blank = _WHITESPACE.match(self.buf, self.pos)
            self.pos = blank.end() if blank else self.pos
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos:self.pos + 1]
            self.more(0)

    def line(self, offset: int) -> int:
        return self.lines + self.buf.count("\n", 0, offset) + 1

    def close(self) -> None:
        self.file.close()


def records(path: Path, what: str, *, chunk: int = CHUNK) -> Iterator[Any]:
    """The items of the JSON list in ``path`` (``what``: "instance", "sample"), one at a time.

    Each item is parsed by ``json`` once its text is buffered whole (a parse that runs
    out of text reads as much again and tries again, so each item costs linear time);
    items deeper than ``MAX_DEPTH`` or longer than ``MAX_RECORD_CHARS`` are refused.
    """
    try:
        text = _Text(path, chunk)
    except OSError as err:
        raise BenchmarkError(f"{path}: cannot read it: {err}") from None
    try:
        first = text.next_char()
        if first != "[":
            found = f"it starts with {first!r} where the list's '[' should be" if first else "the file is empty"
            raise BenchmarkError(f"{path}:{text.line(text.pos)}: not JSON or not a list of {what}s ({found}); "
                                 "is this the published file?")
        text.pos += 1
        n = 0
        while True:
            if text.next_char() == "]" and n == 0:
                text.pos += 1
                break
            item, end = _item(text, what, n)
            yield item
            n += 1
            text.pos = end
            after = text.next_char()
            if after == "]":
                text.pos += 1
                break
            if after != ",":
                raise BenchmarkError(f"{path}:{text.line(text.pos)}: not JSON (expected ',' or ']' after "
                                     f"{what} {n - 1})")
            text.pos += 1
        if text.next_char() != "":
            raise BenchmarkError(f"{path}:{text.line(text.pos)}: not JSON (text after the list of {what}s)")
    except OSError as err:
        raise BenchmarkError(f"{path}: cannot read it: {err}") from None
    finally:
        text.close()


def _item(text: _Text, what: str, n: int) -> tuple[Any, int]:
    """Item ``n``, starting at ``text.pos``, and the offset where it ends."""
    item: Any = None
    while True:
        try:
            item, end = _DECODER.raw_decode(text.buf, text.pos)
        except RecursionError:
            end = -1  # deeper than the parser goes: certainly deeper than MAX_DEPTH, found below
        except json.JSONDecodeError as err:
            held = len(text.buf) - text.pos
            if not text.eof and held < MAX_RECORD_CHARS:
                text.more(held)  # the item may go on: read as much again (linear overall)
                continue
            if not text.eof:
                raise BenchmarkError(f"{text.path}:{text.line(text.pos)}: {what} {n} is not JSON or is longer "
                                     f"than {MAX_RECORD_CHARS >> 20} Mi characters (the published records are "
                                     "a few MB)") from None
            raise BenchmarkError(f"{text.path}:{text.line(err.pos)}: not JSON ({err.msg})") from None
        if end < 0 or _deeper_than(item, MAX_DEPTH):
            # Only a refusal pays for finding the line: the bracket count over the record's text.
            source = text.buf[text.pos:end] if end >= 0 else text.buf[text.pos:]
            deep = too_deep(source, "json")
            line = text.line(text.pos) + (line_and_column(source, deep)[0] - 1 if deep is not None else 0)
            raise BenchmarkError(f"{text.path}:{line}: {what} {n} nests deeper than {MAX_DEPTH} levels (the "
                                 "published format needs 6); is this the published file?")
        return item, end


def _deeper_than(item: Any, limit: int) -> bool:
    """Whether lists and objects nest more than ``limit`` levels in ``item`` (a loop, not recursion)."""
    stack: list[tuple[Any, int]] = [(item, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _longmemeval_history(path: Path, n: int, item: Any) -> History:
    try:
        ids, dates, sessions = item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
        if not (len(ids) == len(dates) == len(sessions)):
            raise ValueError("haystack_session_ids, haystack_dates and haystack_sessions differ in length")
        hist = [(str(sid), str(date), _alternating([(str(t["role"]), str(t["content"])) for t in turns],
                                                   str(date)))
                for sid, date, turns in zip(ids, dates, sessions, strict=True)]
        q = Question(str(item["question_id"]), str(item["question"]), str(item["answer"]),
                     [str(s) for s in item.get("answer_session_ids", [])], str(item.get("question_type", "")))
    except (KeyError, TypeError, ValueError) as err:
        raise BenchmarkError(f"{path}: instance {n}: not LongMemEval's format ({type(err).__name__}: {err}); "
                             "see the README for where to download the data") from None
    return History(q.id, hist, [q])


_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"^D(\d+):\d+$")


def _locomo_history(path: Path, n: int, sample: Any) -> History:
    try:
        conv = sample["conversation"]
        user = str(conv["speaker_a"])
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
        hist = []
        for num in numbers:
            date = str(conv.get(f"session_{num}_date_time", ""))
            turns = [("user" if str(t["speaker"]) == user else "assistant", f"{t['speaker']}: {t['text']}")
                     for t in conv[f"session_{num}"]]
            if turns:
                hist.append((str(num), date, _alternating(turns, date)))
        sid = str(sample.get("sample_id", n))
        questions = []
        for q_n, qa in enumerate(sample["qa"]):
            gold = qa.get("answer", qa.get("adversarial_answer"))
            if gold is None:
                continue
            evidence = sorted({m.group(1) for e in qa.get("evidence", [])
                               for part in str(e).replace(";", " ").split() if (m := _EVIDENCE.match(part))})
            questions.append(Question(f"{sid}-q{q_n + 1}", str(qa["question"]), str(gold), evidence,
                                      str(qa.get("category", ""))))
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise BenchmarkError(f"{path}: sample {n}: not LoCoMo's format ({type(err).__name__}: {err}); "
                             "see the README for where to download the data") from None
    return History(sid, hist, questions)


def read(kind: Benchmark, path: Path, *, chunk: int = CHUNK) -> Iterator[History]:
    """The file's histories one at a time, each made as its record is read."""
    what, make = ("instance", _longmemeval_history) if kind == "longmemeval" else ("sample", _locomo_history)
    for n, item in enumerate(records(path, what, chunk=chunk)):
        yield make(path, n, item)


def check(kind: Benchmark, path: Path, limit: int | None = None) -> int:
    """Read the first ``limit`` histories (all: None) without keeping them: how many questions they ask.

    Raises the ``BenchmarkError`` a run would meet, before anything runs.
    """
    return sum(len(h.questions) for h in islice(read(kind, path), limit))


def longmemeval(path: Path) -> list[History]:
    return list(read("longmemeval", path))


def locomo(path: Path) -> list[History]:
    return list(read("locomo", path))


def load(kind: Benchmark, path: Path) -> list[History]:
    """Every history of the file in a list (a small file; runs use ``read``)."""
    return list(read(kind, path))


def _seed(store: SqlStore, agent: str, model_name: str, history: History) -> tuple[AgentView, dict[str, str]]:
    """The agent with the history as past threads; conversation file path -> session id."""
    store.create_agent(agent, {})
    view = AgentView(store, agent, user="eval")
    threads = Memory.of(store).threads
    ids = threads.create_many(agent, model_name, [msgs for _, _, msgs in history.sessions])
    files: dict[str, str] = {}
    for tid, (sid, _, _) in zip(ids, history.sessions, strict=True):
        path = threads.conversation_file(tid)
        if path is not None:
            files[f"/conversations{path}"] = sid
    return view, files


def retrieval(kind: Benchmark, histories: Iterable[History], *, k: int,
              db_url: str | None) -> Iterator[ScenarioResult]:
    """Recall@k of the evidence sessions through the agent's search, no model at all."""
    for history in histories:
        started = time.perf_counter()
        with scratch(db_url) as (store, agent):
            view, files = _seed(store, agent, "none", history)
            for q in history.questions:
                result = ScenarioResult(f"{kind}/{q.id}", 1)
                hits = [files.get(h.path, "") for h in view.search(q.text, k=k)]
                ranked = list(dict.fromkeys(s for s in hits if s))
                score = recall_at_k(ranked, q.evidence, k)
                result.checks.append(CheckResult(result.scenario, f"recall@{k}", f"recall@{k}", "retrieval",
                                                 score >= 1.0, f"recall@{k} {score:.2f}: evidence "
                                                 f"{', '.join(q.evidence) or 'none'}; ranked {', '.join(ranked[:k])}",
                                                 0, score=score))
                result.seconds = time.perf_counter() - started
                started = time.perf_counter()
                yield result


def _judge(judge: Model, q: Question, answer: str) -> tuple[bool, str]:
    text = JUDGE_PROMPT.format(question=q.text, gold=q.gold, answer=answer)
    reply = judge.respond(ModelRequest(system=[{"type": "text", "text": "You are a strict grader."}],
                                       messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
                                       max_tokens=16)).text
    verdict = reply.strip().lower().startswith("yes")
    return verdict, f"judge said {reply.strip()[:40]!r}"


def answer_questions(kind: Benchmark, histories: Iterable[History], model: Model, *, db_url: str | None,
                     use_reflect: bool = False, judge: Model | None = None) -> Iterator[ScenarioResult]:
    """Ask each question in a new thread of the replayed agent and score the answer."""
    for history in histories:
        with scratch(db_url) as (store, agent):
            _seed(store, agent, model.name, history)
            counting = Counting(model)
            if use_reflect:
                reflect(AgentView(store, agent, user="eval"), counting, Memory.of(store).queue, yolo=True)
            for q in history.questions:
                started = time.perf_counter()
                scenario = Scenario(name=f"{kind}/{q.id}", description=q.kind, source=q.id,
                                    steps=(Step("none", turns=(Turn(q.text),)),))
                run = Run.attach(scenario, counting, store, agent, EvalUI())
                result = ScenarioResult(scenario.name, 1)
                tokens, prompts, cost = counting.tokens, len(counting.prompts), counting.cost
                try:
                    answer = run.ask(q.text)
                except ModelError as err:
                    if counting.refused is not None:
                        raise counting.refused from None
                    result.error = f"the model request failed: {err}"
                    answer = ""
                # What was answered beside the gold, so a failure line says why without the JSONL.
                said = f"gold {q.gold!r}, answered {short(answer)!r}"
                scores: list[tuple[str, bool, str]] = [
                    ("exact_match", exact_match(answer, q.gold), said),
                    ("contains", contains(answer, q.gold), said),
                ]
                f1 = token_f1(answer, q.gold)
                scores.append(("token_f1", f1 >= F1_PASS, f"F1 {f1:.2f} (pass at {F1_PASS}); {said}"))
                if judge is not None and result.error is None:
                    try:
                        verdict, detail = _judge(judge, q, answer)
                    except ModelError as err:
                        if (setup := refused(err)) is not None:
                            raise SetupError(f"--judge: {setup}") from None
                        verdict, detail = False, f"the judge failed: {err}"
                    scores.append(("judge", verdict, detail))
                for name, passed, detail in scores:
                    result.checks.append(CheckResult(result.scenario, name, name, q.kind or "question", passed,
                                                     detail, 0, answer=answer if not passed else "",
                                                     score=f1 if name == "token_f1" else None))
                result.tokens = counting.tokens - tokens
                result.requests = len(counting.prompts) - prompts
                result.cost_usd = None if counting.cost is None or cost is None else counting.cost - cost
                result.seconds = time.perf_counter() - started
                yield result
