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
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
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
from memagent.vfs import SqlStore
from memagent.vfs.proposals import ProposalStore
from memagent.vfs.scopes import AgentView
from memagent.vfs.threads import ThreadStore

Benchmark = Literal["longmemeval", "locomo"]
F1_PASS = 0.5
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


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise BenchmarkError(f"{path}: cannot read it: {err}") from None
    except json.JSONDecodeError as err:
        raise BenchmarkError(f"{path}:{err.lineno}: not JSON ({err.msg})") from None


def longmemeval(path: Path) -> list[History]:
    data = _load_json(path)
    if not isinstance(data, list):
        raise BenchmarkError(f"{path}: LongMemEval files are a JSON list of instances; is this one?")
    out: list[History] = []
    for n, item in enumerate(data):
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
        out.append(History(q.id, hist, [q]))
    return out


_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"^D(\d+):\d+$")


def locomo(path: Path) -> list[History]:
    data = _load_json(path)
    if not isinstance(data, list):
        raise BenchmarkError(f"{path}: LoCoMo files are a JSON list of samples; is this one?")
    out: list[History] = []
    for n, sample in enumerate(data):
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
        out.append(History(sid, hist, questions))
    return out


def load(kind: Benchmark, path: Path) -> list[History]:
    return longmemeval(path) if kind == "longmemeval" else locomo(path)


def _seed(store: SqlStore, agent: str, model_name: str, history: History) -> tuple[AgentView, dict[str, str]]:
    """The agent with the history as past threads; conversation file path -> session id."""
    store.create_agent(agent, {})
    view = AgentView(store, agent, user="eval")
    threads = ThreadStore(store.db)
    ids = threads.create_many(agent, model_name, [msgs for _, _, msgs in history.sessions])
    files: dict[str, str] = {}
    for tid, (sid, _, _) in zip(ids, history.sessions, strict=True):
        path = threads.conversation_file(tid)
        if path is not None:
            files[f"/conversations{path}"] = sid
    return view, files


def retrieval(kind: Benchmark, histories: list[History], *, k: int, db_url: str | None) -> Iterator[ScenarioResult]:
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


def answer_questions(kind: Benchmark, histories: list[History], model: Model, *, db_url: str | None,
                     use_reflect: bool = False, judge: Model | None = None) -> Iterator[ScenarioResult]:
    """Ask each question in a new thread of the replayed agent and score the answer."""
    for history in histories:
        with scratch(db_url) as (store, agent):
            _seed(store, agent, model.name, history)
            counting = Counting(model)
            if use_reflect:
                reflect(AgentView(store, agent, user="eval"), counting, ProposalStore(store.db), yolo=True)
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
