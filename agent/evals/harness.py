"""One scenario, run in a fresh throwaway agent: sessions, commands, checks.

Invariants:
- Every run starts from nothing the user has: a new temporary SQLite file (removed
  afterwards), or on a given scratch database a new agent named ``eval-<random>``.
- Turns go through the chat's own ``Session`` (``chat.session.build_session``): the
  agent loop, the approval gate (answered ``approve: all`` = yes, ``none`` = no, per
  session), the MCP servers of ``/tools.json``; ``/remember`` and ``/compact`` are
  dispatched as the chat's slash commands in the previous session's thread;
  ``reflect`` is ``agent.reflection.reflect`` (applied at once with ``approve: all``,
  left as proposals with ``none``). Past threads are stored through ``ThreadStore``,
  so they appear under ``/conversations/`` as real ones do.
- Tokens and cost are counted per model response (``Counting``), priced through the
  registry (``pricing.cost_usd``); cost is None when the price is unknown.
- With ``memory=False`` (``memagent eval --no-memory``, the control) every session's
  agent is offered no tool and its system prompt holds nothing of memory
  (``builder.withhold_memory``); the agent is still seeded, so the memory checks look
  at what the control left, and a ``reflect`` step does nothing. The result says
  which mode it ran in (``ScenarioResult.memory``).
- A set-up problem (a template that does not exist, a file that fails validation,
  a database that cannot be opened) raises ``SetupError``; a model error ends the
  scenario with its checks failed and the error in the result, never a traceback.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from memagent.agent.builder import withhold_memory
from memagent.agent.chat import slash
from memagent.agent.chat.session import Session, build_session
from memagent.agent.chat.ui.base import UI, PromptInfo
from memagent.agent.evals.checks import Call, Observed, describe, run_check, versions
from memagent.agent.evals.scenario import Approve, Check, Scenario, Step
from memagent.agent.gate import Decision
from memagent.agent.model import Model, ModelError, ModelRequest, ModelResponse, Usage
from memagent.agent.model.base import TextCallback
from memagent.agent.pricing import cost_usd
from memagent.agent.reflection import reflect
from memagent.agent.tools import ApprovalRequest, ToolResult
from memagent.validators import validate
from memagent.vfs import AgentView, Memory, SqlStore, VfsError, open_store, unified_diff

Templates = Callable[[str], dict[str, str]]

# The user id of every eval agent's view (its /user/ mount is empty and private to the run).
EVAL_USER = "eval"
_TOPICS = ("budget", "invoice", "hiring", "roadmap", "vendor", "audit", "travel", "security", "onboarding",
           "pricing", "support", "launch", "backlog", "design", "release", "contract", "training", "metrics")


class SetupError(Exception):
    """The scenario cannot be run as written (one line: what and how to fix it)."""


@dataclass
class CheckResult:
    scenario: str
    check: str  # the kind
    label: str  # the kind and its argument, short
    where: str  # "session 2 turn 1" or "end"
    passed: bool
    detail: str
    line: int
    answer: str = ""
    memory_diff: str = ""
    score: float | None = None  # a benchmark metric's value (recall@k, token F1), beside its pass/fail


@dataclass
class ScenarioResult:
    scenario: str
    run: int
    checks: list[CheckResult] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float | None = 0.0
    seconds: float = 0.0
    requests: int = 0
    error: str | None = None
    memory: bool = True  # False: the control run, memory withheld (--no-memory)

    @property
    def mode(self) -> str:
        return "memory" if self.memory else "no-memory"

    @property
    def passed(self) -> int:
        return sum(1 for c in self.checks if c.passed)

    @property
    def total(self) -> int:
        return len(self.checks)


# A rejected key (401), no access (403) or no such model (404) fails every scenario alike:
# a set-up error that stops the run (exit 2), not a model that failed one scenario.
SETUP_STATUSES = frozenset({401, 403, 404})


def refused(err: ModelError) -> SetupError | None:
    """The ``SetupError`` a model error means, when it is one of ``SETUP_STATUSES``."""
    return SetupError(f"the model cannot be used: {err}") if err.status in SETUP_STATUSES else None


class Counting:
    """A ``Model`` wrapper that counts requests, prompt tokens and cost of every response,
    and keeps a set-up refusal (``refused``) the chat's session turns into a plain line."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.prompts: list[int] = []
        self.tokens = 0
        self.cost: float | None = 0.0
        self.refused: SetupError | None = None

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        try:
            response = self.inner.respond(request, on_text=on_text, on_retry=on_retry)
        except ModelError as err:
            self.refused = self.refused or refused(err)
            raise
        usage: Usage = response.usage
        self.prompts.append(usage.total_input_tokens)
        self.tokens += usage.total_input_tokens + usage.output_tokens
        cost = cost_usd(response.model, usage)
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        return response

    def count_tokens(self, request: ModelRequest) -> int | None:
        counter = getattr(self.inner, "count_tokens", None)
        return counter(request) if counter is not None else None


class EvalUI(UI):
    """The chat UI of an unattended run: approvals answered by ``approve``, calls recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.approve: Approve = "all"
        self.calls: list[Call] = []
        self.text: list[str] = []
        self.errors: list[str] = []
        self.interrupted = False

    def read_text(self, question: str) -> str | None:
        return None

    def read_input(self, prompt: PromptInfo) -> str | None:
        return None

    def confirm(self, request: ApprovalRequest) -> Decision:
        if self.approve == "all":
            return Decision("approve")
        return Decision("reject", "the user does not approve memory changes in this session")

    def header(self, lines: list[str]) -> None:
        return None

    def info(self, text: str) -> None:
        return None

    def note(self, text: str) -> None:
        # Chat turns Ctrl-C during a model request into an interrupted turn and goes on (its
        # note says so); an unattended run has no one to go on with, so it stops (``_turn``).
        if text.startswith("interrupted"):
            self.interrupted = True

    def error(self, text: str) -> None:
        self.errors.append(text)

    def show_text(self, text: str) -> None:
        return None

    def show_file(self, path: str, content: str) -> None:
        return None

    def on_text(self, chunk: str) -> None:
        self.text.append(chunk)

    def on_model_start(self) -> None:
        # Text before a tool call and the text after it are separate blocks in chat; joined
        # bare, "Let me check" + "- a" would hide the line start an answer check looks for.
        if self.text and not self.text[-1].endswith("\n"):
            self.text.append("\n")

    def on_model_end(self) -> None:
        return None

    def on_tool_call(self, name: str, args: dict[str, object]) -> None:
        self.calls.append(Call(name, dict(args)))

    def on_tool_result(self, name: str, result: ToolResult) -> None:
        return None

    def on_retry(self, note: str) -> None:
        return None


def knowledge_files(count: int, folder: str) -> dict[str, str]:
    """``count`` generated filler notes (deterministic), for recall through search at scale."""
    rng = random.Random(count)
    out: dict[str, str] = {}
    for i in range(1, count + 1):
        topic, other = rng.sample(_TOPICS, 2)
        team = rng.randrange(1, 60)
        out[f"{folder}/note-{i:05d}.md"] = (
            f"# {topic.title()} note {i}\n\nThe {topic} review of team {team} is filed with the {other} "
            f"records (reference {topic[:3].upper()}-{i:05d}); owner: team {team} lead.\n")
    return out


@contextmanager
def scratch(db_url: str | None) -> Iterator[tuple[SqlStore, str]]:
    """A store and a new agent name that nothing else uses; removed afterwards (SQLite)."""
    folder = None if db_url is not None else tempfile.mkdtemp(prefix="memagent-eval-")
    url = db_url if db_url is not None else f"sqlite:///{Path(folder or '') / 'eval.db'}"
    try:
        try:
            store = open_store(url)
        except VfsError as err:
            raise SetupError(f"cannot open the scratch database: {err}") from None
        try:
            yield store, f"eval-{uuid.uuid4().hex[:10]}"
        finally:
            store.close()
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _memory(view: AgentView) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in view.store.all_files(view.scope):
        try:
            out[f.path] = view.read(f.path, limit=1_000_000).content
        except VfsError:
            continue
    return out


def memory_diff(before: dict[str, str], view: AgentView, *, skip: str | None = None, limit: int = 20_000) -> str:
    """The unified diff of the agent's memory since the start (bounded; paths under ``skip``,
    the generated filler, left out unless they changed)."""
    after = {p: c for p, c in _memory(view).items()
             if skip is None or not p.startswith(skip) or p in before}
    parts = [unified_diff(before.get(p), after.get(p), p, p) for p in sorted(set(before) | set(after))
             if before.get(p) != after.get(p)]
    text = "".join(parts)
    return text if len(text) <= limit else text[:limit] + "\n… (diff cut)\n"


class Run:
    """The state of one scenario run (see the module docstring)."""

    def __init__(self, scenario: Scenario, model: Counting, store: SqlStore, agent: str, run: int = 1,
                 ui: EvalUI | None = None, *, memory: bool = True) -> None:
        self.scenario = scenario
        self.model = model
        self.store = store
        self.memory = memory
        self.result = ScenarioResult(scenario.name, run, memory=memory)
        self.view = AgentView(store, agent, user=EVAL_USER)
        self.threads = Memory.of(store).threads
        self.ui = ui or EvalUI()
        self.session: Session | None = None
        self.answer = ""
        self.start_versions: dict[str, int] = {}
        self.start_memory: dict[str, str] = {}

    @classmethod
    def attach(cls, scenario: Scenario, model: Counting, store: SqlStore, agent: str, ui: EvalUI) -> Run:
        """A run over an agent that exists already (the benchmarks seed their own)."""
        return cls(scenario, model, store, agent, ui=ui)

    @classmethod
    def start(cls, scenario: Scenario, model: Model, store: SqlStore, agent: str, run: int,
              templates: Templates, *, memory: bool = True) -> Run:
        """A new agent ``agent`` seeded as ``scenario`` says (files, knowledge, past threads)."""
        files: dict[str, str] = {}
        if scenario.template is not None:
            try:
                files = templates(scenario.template)
            except VfsError as err:
                raise SetupError(f"{scenario.source}: {err}") from None
        files.update(scenario.files)
        files.update(knowledge_files(scenario.knowledge, scenario.knowledge_folder) if scenario.knowledge else {})
        try:
            store.create_agent(agent, files)
        except VfsError as err:
            raise SetupError(f"{scenario.source}: a starting file is refused: {err}") from None
        self = cls(scenario, Counting(model), store, agent, run, memory=memory)
        if scenario.threads:
            self.threads.create_many(agent, model.name, [list(t) for t in scenario.threads])
        self.start_versions = versions(self.view)
        generated = scenario.knowledge_folder + "/"
        self.start_memory = {p: c for p, c in _memory(self.view).items()
                             if not (scenario.knowledge and p.startswith(generated))}
        return self

    def ask(self, text: str) -> str:
        """One question in a new thread; its answer (``ModelError`` when the model failed)."""
        self.ui.approve = "none"
        session = self._new_session()
        try:
            self._turn(session, text)
        finally:
            self.close()
        return self.answer

    def _new_session(self) -> Session:
        self.close()
        # The control offers no tool, so it starts none of /tools.json's servers either.
        session = build_session(self.view, self.model, self.ui, threads=self.threads,
                                context_budget=self.scenario.context_budget, start_mcp=self.memory)
        if not self.memory:
            withhold_memory(session.agent)
        self.session = session
        return session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def _turn(self, session: Session, text: str | None, command: str | None = None) -> None:
        self.ui.text.clear()
        errors = len(self.ui.errors)
        if command is not None:
            slash.dispatch(session, command)
        else:
            assert text is not None
            session.send(text)
        if self.ui.interrupted:
            raise KeyboardInterrupt
        if len(self.ui.errors) > errors:
            # The chat's advice to type /retry means nothing here.
            raise ModelError(self.ui.errors[-1].removesuffix(" (/retry sends the message again)"))
        self.answer = "".join(self.ui.text)

    def _check(self, checks: tuple[Check, ...], where: str, calls: list[Call], prompts: list[int]) -> None:
        for check in checks:
            obs = Observed(self.answer, calls, prompts, self.view, self.start_versions)
            passed, detail = run_check(check.kind, check.arg, obs)
            result = CheckResult(self.scenario.name, check.kind, describe(check.kind, check.arg), where, passed,
                                 detail, check.line)
            if not passed:
                result.answer = self.answer
                generated = self.scenario.knowledge_folder + "/" if self.scenario.knowledge else None
                result.memory_diff = memory_diff(self.start_memory, self.view, skip=generated)
            self.result.checks.append(result)

    def _step(self, n: int, step: Step) -> None:
        self.ui.approve = step.approve
        if step.command == "reflect":
            if not self.memory:
                self.answer = "reflect skipped: memory is withheld (--no-memory)"
                return
            queue = Memory.of(self.store).queue
            outcome = reflect(self.view, self.model, queue, yolo=step.approve == "all")
            self.answer = outcome.message
            return
        if step.command is not None:
            session = self.session or self._new_session()
            self._turn(session, None, f"{step.command} {step.hint}".strip())
            return
        session = self._new_session()
        for t, turn in enumerate(step.turns, 1):
            calls, prompts = len(self.ui.calls), len(self.model.prompts)
            self._turn(session, turn.user)
            self._check(turn.expect, f"session {n} turn {t}", self.ui.calls[calls:], self.model.prompts[prompts:])

    def run(self) -> ScenarioResult:
        started = time.perf_counter()
        try:
            for n, step in enumerate(self.scenario.steps, 1):
                self._step(n, step)
            self._check(self.scenario.expect, "end", self.ui.calls, self.model.prompts)
        except ModelError as err:
            if self.model.refused is not None:
                raise self.model.refused from None
            self.result.error = f"the model request failed: {err}"
        except VfsError as err:
            self.result.error = str(err)
        finally:
            self.close()
        if self.result.error is not None:
            self._unreached()
        self.result.seconds = time.perf_counter() - started
        self.result.tokens = self.model.tokens
        self.result.cost_usd = self.model.cost
        self.result.requests = len(self.model.prompts)
        return self.result

    def _unreached(self) -> None:
        """Checks the run never got to fail, each naming the error."""
        done = {(c.line, c.check) for c in self.result.checks}
        pending = [(c, f"session {n} turn {t}") for n, s in enumerate(self.scenario.steps, 1)
                   for t, turn in enumerate(s.turns, 1) for c in turn.expect]
        pending += [(c, "end") for c in self.scenario.expect]
        for check, where in pending:
            if (check.line, check.kind) not in done:
                self.result.checks.append(CheckResult(
                    self.scenario.name, check.kind, describe(check.kind, check.arg), where, False,
                    f"not reached: {self.result.error}", check.line, answer=self.answer))


def preflight(scenario: Scenario, templates: Templates) -> None:
    """``SetupError`` now for what ``Run.start`` would refuse later (an unknown template, a
    starting file its validators reject), so a run stops before any model time is spent."""
    if scenario.template is not None:
        try:
            templates(scenario.template)
        except VfsError as err:
            raise SetupError(f"{scenario.source}: {err}") from None
    for path, content in scenario.files.items():
        problems = validate(path, content)
        if problems:
            # The problem's first line; its example stays out.
            first = str(problems[0]).splitlines()[0].removesuffix(" For example:")
            raise SetupError(f"{scenario.source}: a starting file is refused: {path}: {first}")


def run_scenario(scenario: Scenario, model: Model, *, templates: Templates, db_url: str | None = None,
                 run: int = 1, memory: bool = True) -> ScenarioResult:
    """Run ``scenario`` once with ``model`` in a fresh agent (see the module docstring);
    ``memory=False``: the control, memory withheld from the agent."""
    with scratch(db_url) as (store, agent):
        return Run.start(scenario, model, store, agent, run, templates, memory=memory).run()

