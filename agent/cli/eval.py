"""``memagent eval``: run memory scenarios or a benchmark on any model; ``memagent eval compare``.

Invariants:
- Exit status: 0 when every check passed, 1 when any check failed (or a scenario's
  model failed), 130 when Ctrl-C stopped the run early, 2 for a usage or set-up error
  (a malformed scenario: ``FILE:LINE: what is wrong``; a benchmark file not in its format; a model that is not set up;
  a scratch database that cannot be opened). Nothing reaches the user's database or
  agents: every scenario runs in a fresh temporary one (``evals.harness``).
- The model is made through the registry only (``cli.models``), like chat's.
- The table goes to stdout after the run; a progress bar goes to stderr, and only
  when stderr is a terminal. Text that came from a model or a file is escaped
  (``shown``) before it is printed.
- ``--out`` gets one JSON line per check and one summary line per scenario run, as
  each scenario finishes (``evals.results``), so an interrupted run keeps what it did.
- A benchmark file is read twice, one record at a time (``benchmarks.read``): first
  to find any mistake in it (exit 2 before a question is asked), then to run; memory
  never holds the file.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import islice
from pathlib import Path
from typing import IO, TYPE_CHECKING, NoReturn

import click
from click.core import ParameterSource

from memagent.agent.cli import templates
from memagent.agent.cli.reflect import BASE_URL_HELP, MODEL_HELP
from memagent.vfs import shown

if TYPE_CHECKING:
    from memagent.agent.evals.benchmarks import Benchmark
    from memagent.agent.evals.harness import ScenarioResult
    from memagent.agent.evals.scenario import Scenario
    from memagent.agent.model import Model

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _usage(message: str) -> NoReturn:
    click.echo(f"memagent: {shown(message)}", err=True)
    sys.exit(EXIT_USAGE)


def _model(name: str | None, base_url: str | None, what: str) -> Model:
    """The model ``name`` through the registry, or exit 2 with the provider's one line."""
    from memagent.agent.cli import models
    from memagent.agent.model import ModelError, registry

    model_id, opts = models.model_id(name), models.options(base_url)
    try:
        provider = registry.get(registry.parse(model_id)[0])
        status = provider.status(opts)
        if not status.configured:
            _usage(f"{status.detail} and run `memagent eval` again ({what} {model_id})")
        check = getattr(provider, "check", None)
        if check is not None:
            check(registry.parse(model_id)[1], opts)
        return registry.build(model_id, opts)
    except ModelError as err:
        _usage(f"{what} {model_id}: {err}")


def _scenario_files(targets: tuple[str, ...]) -> Iterator[Path | str]:
    """Each target as a file, the files of a folder, or a built-in scenario name ('builtin': all)."""
    from memagent.agent.evals.scenario import builtin_names

    names = builtin_names()
    for target in targets or ("builtin",):
        path = Path(target)
        if target in ("builtin", "memory"):
            yield from names
        elif path.is_dir():
            found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not found:
                _usage(f"{target}: no .yaml scenario files in this folder")
            yield from found
        elif path.is_file():
            yield path
        elif target in names:
            yield target
        else:
            _usage(f"{target}: no such scenario file, folder or built-in scenario; "
                   f"built-in: builtin (all) or one of {', '.join(names[:6])}, …")


def _load(targets: tuple[str, ...], pattern: str | None) -> list[Scenario]:
    from importlib import resources

    from memagent.agent.evals.scenario import ScenarioError, load, parse

    suite = resources.files("memagent.agent.evals").joinpath("suite")
    loaded: list[Scenario] = []
    seen: dict[str, str] = {}  # name -> the file it came from
    try:
        for item in _scenario_files(targets):
            scenario = load(item) if isinstance(item, Path) else \
                parse(suite.joinpath(f"{item}.yaml").read_text("utf-8"), f"suite/{item}.yaml")
            if scenario.name in seen:
                if Path(seen[scenario.name]).resolve() == Path(scenario.source).resolve():
                    continue  # the same file twice (a built-in named and `builtin`): run it once
                _usage(f"{scenario.source}: scenario name {scenario.name!r} is also the name of "
                       f"{seen[scenario.name]}; give each scenario its own name")
            seen[scenario.name] = scenario.source
            loaded.append(scenario)
    except ScenarioError as err:
        _usage(str(err))
    if pattern is not None:
        try:
            rx = re.compile(pattern, re.IGNORECASE)
        except re.error as err:
            _usage(f"-k {pattern!r} is not a valid regular expression: {err}")
        loaded = [s for s in loaded if rx.search(s.name)]
        if not loaded:
            _usage(f"-k {pattern!r} selects no scenario; drop it or match part of a scenario's name")
    return loaded


class _Progress:
    """A bar on stderr when it is a terminal; nothing otherwise."""

    def __init__(self, total: int, label: str) -> None:
        self._bar = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True) \
            if sys.stderr.isatty() and total > 1 else None
        if self._bar is not None:
            self._bar.__enter__()

    def step(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


COMPARE_HELP = """Usage: memagent eval compare A.jsonl B.jsonl

  Compare two results files that `memagent eval --out` wrote: each scenario's checks
  passed in A and in B, the tokens of a run ("-" where a file lacks the scenario), and
  what changed (better, worse, now failing, now passing). Totals count only the
  scenarios both files ran.

  Exit status: 0 no scenario got worse, 1 a scenario passes fewer checks in B than in
  A, 2 usage error (not two files, or a file eval did not write).
"""


class EvalCommand(click.Command):
    """``eval``, whose ``compare`` target has its own help: ``eval compare --help``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args[:1] == ["compare"] and any(a in ("--help", "-h") for a in args[1:]):
            click.echo(COMPARE_HELP, nl=False)
            ctx.exit(0)
        return super().parse_args(ctx, args)


@click.command("eval", cls=EvalCommand, context_settings={"ignore_unknown_options": False})
@click.argument("targets", nargs=-1)
@click.option("--model", "model_name", default=None, metavar="M", help=MODEL_HELP)
@click.option("--base-url", "base_url", default=None, metavar="URL", help=BASE_URL_HELP)
@click.option("--runs", type=click.IntRange(1, 100), default=1, show_default=True, help="Run each scenario N times.")
@click.option("--out", "out", type=click.Path(dir_okay=False, writable=True), default=None, metavar="FILE",
              help="Write every check's result as JSON lines (failures with the answer and the memory diff).")
@click.option("-k", "pattern", default=None, metavar="PATTERN", help="Only scenarios whose name matches (a regex).")
@click.option("--longmemeval", "longmemeval", type=click.Path(exists=True, dir_okay=False), default=None,
              metavar="FILE", help="Run LongMemEval's data file (longmemeval_s.json, _m or _oracle).")
@click.option("--locomo", "locomo", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
              help="Run LoCoMo's data file (locomo10.json).")
@click.option("--judge", "judge", default=None, metavar="M",
              help="Also grade benchmark answers with this model (registry id), yes/no.")
@click.option("--reflect", "use_reflect", is_flag=True,
              help="Benchmarks: run reflect over the replayed history before the questions.")
@click.option("--retrieval-only", is_flag=True,
              help="Benchmarks: recall@k of the evidence sessions through search_memory; no model.")
@click.option("--top", "top", type=click.IntRange(1, 50), default=10, show_default=True, metavar="K",
              help="The k of recall@k.")
@click.option("--limit", "limit", type=click.IntRange(1), default=None, metavar="N",
              help="Benchmarks: only the first N histories (instances or samples).")
@click.option("--list", "list_only", is_flag=True, help="List the scenarios (with -k: those it selects) and exit.")
@click.option("--scratch-db", "scratch_db", default=None, metavar="URL",
              help="A database server to run in (each run a new agent); default: a temporary SQLite file per run.")
@click.option("--no-memory", "no_memory", is_flag=True,
              help="The control: the agent gets no memory tools and no memory in its prompt (compare the two runs "
                   "to see what memory adds).")
def eval_cmd(targets: tuple[str, ...], model_name: str | None, base_url: str | None, runs: int, out: str | None,
             pattern: str | None, longmemeval: str | None, locomo: str | None, judge: str | None, use_reflect: bool,
             retrieval_only: bool, top: int, limit: int | None, list_only: bool, scratch_db: str | None,
             no_memory: bool) -> None:
    """Does memory work? Run memory scenarios (or a benchmark) on a model in throwaway agents.

    \b
    memagent eval                          the built-in suite (or: eval builtin)
    memagent eval my.yaml scenarios/       your own scenario files
    memagent eval --model ollama/qwen3:8b -k remember --out results.jsonl
    memagent eval --no-memory --out control.jsonl   the same with memory withheld
    memagent eval --longmemeval longmemeval_s.json --limit 20
    memagent eval --locomo locomo10.json --retrieval-only
    memagent eval compare before.jsonl after.jsonl
                                           (exit 1 when a scenario got worse;
                                           eval compare --help says more)

    Exit status: 0 every check passed, 1 a check failed, 2 usage or set-up error.
    """
    if targets[:1] == ("compare",):
        _compare(targets[1:])
        return
    if list_only:
        for scenario in _load(targets, pattern):
            click.echo(shown(f"{scenario.name}  ({scenario.checks} checks) {scenario.description}"))
        return
    if longmemeval and locomo:
        _usage("give --longmemeval or --locomo, not both (run them one after the other)")
    bench: tuple[Benchmark, Path] | None = (
        ("longmemeval", Path(longmemeval)) if longmemeval else ("locomo", Path(locomo)) if locomo else None)
    if bench is None and (retrieval_only or judge or use_reflect or limit):
        _usage("--retrieval-only, --judge, --reflect and --limit go with --longmemeval FILE or --locomo FILE")
    if bench is not None and (targets or pattern):
        _usage("give scenarios or a benchmark file, not both")
    if bench is not None and no_memory:
        _usage("--no-memory is the control of scenario runs; a benchmark's questions are about its history, "
               "so run it without --no-memory")
    given = click.get_current_context().get_parameter_source
    if bench is not None and given("runs") is not ParameterSource.DEFAULT:
        _usage("--runs repeats scenarios; a benchmark runs once (run it again with another --out)")
    if not retrieval_only and given("top") is not ParameterSource.DEFAULT:
        _usage("--top K is the k of --retrieval-only's recall@k; add --retrieval-only or drop --top")
    from memagent.agent.evals import results
    from memagent.agent.evals.harness import SetupError

    if out:
        _check_writable(Path(out))
    finished: list[ScenarioResult] = []
    interrupted = False
    runner: Iterator[ScenarioResult]
    with ExitStack() as stack:
        # Opened at the first result: a run that stops at a malformed scenario or a model
        # that is not set up leaves an earlier results file as it was.
        sink: IO[str] | None = None
        try:
            if bench is not None:
                runner = _benchmark(bench[0], bench[1], model_name, base_url, judge, use_reflect, retrieval_only,
                                    top, limit, scratch_db)
            else:
                runner = _scenarios(targets, pattern, model_name, base_url, runs, scratch_db, memory=not no_memory)
            for result in runner:
                finished.append(result)
                if out and sink is None:
                    sink = stack.enter_context(_open_out(Path(out)))
                if sink is not None:
                    results.write(sink, result)
        except SetupError as err:
            _usage(str(err))
        except KeyboardInterrupt:
            interrupted = True
            click.echo("interrupted; the table shows the scenarios that finished", err=True)
    for line in results.table(finished):
        click.echo(shown(line))
    if bench is not None and finished:
        # The benchmark's own numbers: each metric over all questions (the table counts checks).
        click.echo("")
        for line in results.metrics(finished):
            click.echo(shown(line))
    problems = results.failures(finished)
    if problems:
        click.echo(f"\n{len(problems)} failed:")
        for line in problems[:50]:
            click.echo(f"  {shown(line)}")
        if len(problems) > 50:
            where = f" (all in {out})" if out else " (--out FILE keeps them all)"
            click.echo(f"  … {len(problems) - 50} more{where}")
    if out and finished:
        click.echo(f"results: {shown(out)}")
    if interrupted:
        # Not every check ran, so this is not "all passed" (0) nor a verdict (1): the shell's
        # status for a run stopped by Ctrl-C.
        sys.exit(EXIT_INTERRUPTED)
    if problems or any(r.error for r in finished):
        sys.exit(EXIT_FAILED)


def _check_writable(path: Path) -> None:
    """Exit 2 now, before any model time is spent, when ``--out`` could not be written."""
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        _usage(f"--out {path}: no folder {folder}; create it or give another path")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        _usage(f"--out {path}: not writable; give a path you can write")


def _open_out(path: Path) -> IO[str]:
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as err:
        _usage(f"--out {path}: cannot write it: {err.strerror or err}")


def _scenarios(targets: tuple[str, ...], pattern: str | None, model_name: str | None, base_url: str | None,
               runs: int, scratch_db: str | None, *, memory: bool = True) -> Iterator[ScenarioResult]:
    from memagent.agent.evals.harness import preflight, run_scenario

    loaded = _load(targets, pattern)
    for scenario in loaded:
        preflight(scenario, templates.files)  # a SetupError: exit 2 before any scenario runs
    model = _model(model_name, base_url, "model")
    progress = _Progress(len(loaded) * runs, "eval")
    try:
        for scenario in loaded:
            for n in range(1, runs + 1):
                yield run_scenario(scenario, model, templates=templates.files, db_url=scratch_db, run=n,
                                   memory=memory)
                progress.step()
    finally:
        progress.close()


def _benchmark(kind: Benchmark, path: Path, model_name: str | None, base_url: str | None, judge: str | None,
               use_reflect: bool, retrieval_only: bool, top: int, limit: int | None,
               scratch_db: str | None) -> Iterator[ScenarioResult]:
    from memagent.agent.evals import benchmarks

    # Two passes, one record in memory at a time (the published files reach 2.7 GB): the
    # first finds any mistake in the file before a question is asked, and counts them.
    try:
        questions = benchmarks.check(kind, path, limit)
    except benchmarks.BenchmarkError as err:
        _usage(str(err))
    histories = islice(benchmarks.read(kind, path), limit)
    progress = _Progress(questions, kind)
    try:
        if retrieval_only:
            if judge or use_reflect:
                _usage("--retrieval-only asks no model: drop --judge and --reflect")
            stream = benchmarks.retrieval(kind, histories, k=top, db_url=scratch_db)
        else:
            model = _model(model_name, base_url, "model")
            grader = _model(judge, base_url, "judge") if judge else None
            stream = benchmarks.answer_questions(kind, histories, model, db_url=scratch_db,
                                                 use_reflect=use_reflect, judge=grader)
        for result in stream:
            yield result
            progress.step()
    except benchmarks.BenchmarkError as err:  # the file changed since the first pass read it
        _usage(str(err))
    finally:
        progress.close()


def _compare(files: tuple[str, ...]) -> None:
    from memagent.agent.evals.results import ResultsError, compare, load

    if len(files) != 2:
        _usage("compare needs two results files: memagent eval compare A.jsonl B.jsonl")
    try:
        a, b = load(Path(files[0])), load(Path(files[1]))
    except ResultsError as err:
        _usage(str(err))
    result = compare(a, b, Path(files[0]).stem, Path(files[1]).stem)
    for line in result.lines:
        click.echo(shown(line))
    click.echo(f"{result.differ} scenario(s) differ" if result.differ else "no scenario differs in checks passed")
    if result.worse:
        # CI gates on it: a scenario that passes fewer checks than before is a failure.
        click.echo(f"{result.worse} scenario(s) got worse", err=True)
        raise SystemExit(1)
