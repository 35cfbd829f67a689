r"""grep and glob never hang, and still answer exactly what the plain implementations do.

Issue 9, items 1 and 2. A hang here would freeze the test run, so everything that
could hang runs in a child process under a timeout (``Runner`` or the real CLI):

- the issue's reproductions through ``memagent fs grep`` / ``fs glob``;
- the same through the store on SQLite and Postgres, in every output mode;
- a backreference that backtracks for minutes returns at the deadline with a note;
- a Postgres pre-filter that runs too long is stopped by the statement timeout;
- properties (hypothesis): for generated adversarial patterns over adversarial
  content and paths, grep and glob finish within a fixed bound, and equal
  ``SqlStore._grep_plain`` / the plain-``re`` glob whenever those finish within
  their own small budget;
- pure Python: the RE2 translation is used for every regular pattern, and the
  linear-time glob matcher equals the plain-``re`` one (``scan`` against
  ``scan_plain`` on RE2 is tests/test_fastpaths.py's property).
"""

from __future__ import annotations

import json
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import literal_column

from memagent.agent.cli import config, templates
from memagent.vfs import SqlStore, open_store
from memagent.vfs.grep import engine, prefilter
from memagent.vfs.grep.engine import compile_pattern, render
from memagent.vfs.grep.globbing import compile_glob, glob_matcher
from tests.cli_helpers import err, out, run

S = "agent:a"
BOUND = 30.0  # seconds: anything slower is a hang (the real answers take milliseconds)
CLI_BOUND = 90.0  # the same through a fresh `memagent` process, whose start alone is slow on a busy machine
SLOW_DEADLINE = 1.5  # grep's deadline inside the runner, so cut searches end quickly

NOTES = "# Notes\nFixed in " + "3f" * 20 + ".\n"
RUNS = "aaa\n" + "a" * 40 + "!\nhello\n" + "a" * 40 + "\n"
ISSUE_GREPS = [r"(\w+\s?)+$", r"(a+)+$", r"^(a|aa)+$", r"hello|(a+)+$"]
DEEP = "/" + "/".join(["d"] * 400) + "/x.md"
LONG_NAME = "/names/" + "a" * 250
ISSUE_GLOBS = ["**/**/**/**/**/zzz", "*a*a*a*a*b", "**/**/**/**/**/*a*a*a*a*b"]


# Each catastrophic pattern beside one that matches the same lines without backtracking
# (no nested quantifier), which plain re answers at once.
SAFE_TWINS = {
    r"(\w+\s?)+$": r"\w(?:\w|\s(?!\s))*$",
    r"(a+)+$": r"a+$",
    r"^(a|aa)+$": r"^a+$",
    r"hello|(a+)+$": r"hello|a+$",
    r"(é+)+$": r"é+$",
    r"(?i)(\w+\s?)+K$": r"(?i)\w(?:\w|\s(?!\s))*K$",
    r"(.*a){12}!": r"(?:[^a]*a){12}!",
}


def _lines_matching(pattern: str, *texts: tuple[str, str]) -> list[str]:
    """What ``fs grep`` prints in content mode, by plain Python ``re`` (safe inputs only)."""
    regex = re.compile(pattern, re.M)
    found = []
    for path, content in texts:
        lines = content.split("\n")
        if content.endswith("\n"):
            lines.pop()
        found += [f"{path}:{n}:{line}" for n, line in enumerate(lines, 1) if regex.search(line)]
    return found


# -- the child that runs what could hang ------------------------------------------------

RUNNER = r"""
import dataclasses, json, sys
from memagent.vfs import open_store
from memagent.vfs.grep import engine
from memagent.vfs.grep.globbing import compile_glob
engine.GREP_DEADLINE = float(sys.argv[1])
stores = {}
for line in sys.stdin:
    req = json.loads(line)
    url = req.pop("url")
    if req["op"] == "forget":  # the test is over: its database is about to be dropped
        for old in stores.values():
            old.close()
        stores.clear()
        print(json.dumps("forgotten"), flush=True)
        continue
    if url not in stores:
        for old in stores.values():
            old.close()
        stores.clear()
        stores[url] = open_store(url, migrate=False)
    store = stores[url]
    op = req.pop("op")
    if op == "ping":
        res = "pong"
    elif op == "grep":
        res = dataclasses.asdict(store.grep(**req))
    elif op == "grep_plain":
        res = dataclasses.asdict(store._grep_plain(**req))
    elif op == "render":
        res = engine.render(store.grep(**req))
    elif op == "glob":
        res = store.glob(**req)
    else:  # glob_plain: the reference, Python's backtracking re over every path (as store.glob
        # reads it: a leading / only anchors at the root, the rest is the pattern)
        pattern = req["pattern"]
        regex = compile_glob(pattern[1:] if pattern.startswith("/") else pattern)
        res = [f.path for f in store.all_files(req["scope"]) if regex.match(f.path[1:])]
    print(json.dumps(res), flush=True)
"""


class Runner:
    """A child process answering store calls; a call past its timeout kills it."""

    def __init__(self, deadline: float = SLOW_DEADLINE) -> None:
        self.deadline = deadline
        self.proc: subprocess.Popen[str] | None = None

    def call(self, timeout: float, **req: Any) -> Any:
        """The answer, or TimeoutError (the child is then killed).

        A new child first imports and opens the store, untimed by ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", RUNNER, str(self.deadline)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, start_new_session=True)
            self._ask(BOUND, url=req["url"], op="ping")
        return self._ask(timeout, **req)

    def _ask(self, timeout: float, **req: Any) -> Any:
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        ready = select.select([proc.stdout], [], [], timeout)[0]
        if not ready:
            self.close()
            raise TimeoutError(f"no answer within {timeout} s: {req}")
        line = proc.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"the runner died on {req}")
        return json.loads(line)

    def forget(self) -> None:
        """Close the child's stores (a test's end), keeping the child for the next test."""
        if self.proc is not None and self.proc.poll() is None:
            self._ask(BOUND, url="", op="forget")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
            self.proc = None


# One child of each kind for the module: starting one (a Python that imports memagent) costs
# most of a second, and some 30 tests use them. What a child keeps between calls is the store of
# the database it was last asked about; each test gets new databases and the child closes its
# stores when the test ends (``forget``). A child killed at a timeout is started again by the
# next call.
@pytest.fixture(scope="module")
def runner_process() -> Iterator[Runner]:
    r = Runner()
    yield r
    r.close()


@pytest.fixture(scope="module")
def reference_process() -> Iterator[Runner]:
    r = Runner()
    yield r
    r.close()


@pytest.fixture
def runner(runner_process: Runner) -> Iterator[Runner]:
    yield runner_process
    runner_process.forget()


@pytest.fixture
def reference(reference_process: Runner) -> Iterator[Runner]:
    """Runs the plain implementations, which may backtrack for minutes."""
    yield reference_process
    reference_process.forget()


def _url(store: SqlStore) -> str:
    return store.engine.url.render_as_string(hide_password=False)


def _bounded(r: Runner, store: SqlStore, op: str, **req: Any) -> Any:
    started = time.monotonic()
    try:
        res = r.call(BOUND, url=_url(store), op=op, **req)
    except TimeoutError:
        pytest.fail(f"{op} {req} did not finish within {BOUND} s")
    assert time.monotonic() - started < BOUND
    return res


def _grep_dict(store: SqlStore, **kw: Any) -> dict[str, Any]:
    """A GrepResult as the runner sends it (tuples become lists)."""
    res: dict[str, Any] = json.loads(json.dumps(asdict(store._grep_plain(S, **kw))))
    return res


# -- the issue's reproductions, through the real CLI -------------------------------------


def test_issue_reproductions_through_the_cli() -> None:
    # The files go in through the library (what `memagent init default` and `fs write` store):
    # the commands under test are fs grep and fs glob, each a `memagent` process below.
    store = open_store(config.db_url())
    store.create_agent("default", templates.files(templates.DEFAULT_TEMPLATE))
    store.write("agent:default", "/notes/x.md", NOTES)
    store.write("agent:default", "/notes/runs.md", RUNS)
    agents_md = store.read("agent:default", "/AGENTS.md").content
    texts = (("/AGENTS.md", agents_md), ("/notes/runs.md", RUNS), ("/notes/x.md", NOTES))
    shown = {}
    for pattern in ISSUE_GREPS:
        try:
            p = run("fs", "grep", pattern, timeout=CLI_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"memagent fs grep {pattern!r} did not finish within {CLI_BOUND} s")
        want = _lines_matching(SAFE_TWINS[pattern], *texts)
        # No match: exit 1 and nothing on stdout, like grep (issue 15).
        assert p.returncode == (0 if want else 1), err(p)
        assert out(p).splitlines() == want, pattern
        shown[pattern] = out(p)
    assert "/notes/runs.md:4:" + "a" * 40 in shown[r"hello|(a+)+$"]

    store.write("agent:default", DEEP, "deep\n")
    store.write("agent:default", LONG_NAME, "long\n")
    store.close()
    for pattern in ISSUE_GLOBS:
        try:
            p = run("fs", "glob", pattern, timeout=CLI_BOUND)
        except subprocess.TimeoutExpired:
            pytest.fail(f"memagent fs glob {pattern!r} did not finish within {CLI_BOUND} s")
        assert p.returncode == 1 and out(p) == "", (pattern, err(p))  # no match: exit 1 (issue 15)
    assert out(run("fs", "glob", "**/**/**/x.md")).splitlines() == [DEEP, "/notes/x.md"]
    assert out(run("fs", "glob", "*a*a*a*a*")).splitlines() == [LONG_NAME]


# -- the same through the store, on both databases ---------------------------------------


@pytest.fixture
def hostile(store: SqlStore) -> SqlStore:
    store.write(S, "/notes/x.md", NOTES)
    store.write(S, "/notes/runs.md", RUNS)
    store.write(S, "/notes/unicode.md", "Kelvin \u212a and straße — ſ\n" + "é" * 40 + "!\n")
    store.write(S, DEEP, "deep\n")
    store.write(S, LONG_NAME, "long\n")
    return store


@pytest.mark.parametrize("mode", ["files_with_matches", "content", "count"])
def test_issue_greps_finish_and_are_right(hostile: SqlStore, runner: Runner, mode: str) -> None:
    for pattern, twin in SAFE_TWINS.items():
        got = _bounded(runner, hostile, "grep", scope=S, pattern=pattern, output_mode=mode)
        assert got == _grep_dict(hostile, pattern=twin, output_mode=mode), pattern
        assert got["cut"] is None
    got = _bounded(runner, hostile, "grep", scope=S, pattern=r"hello|(a+)+$", output_mode="content")
    assert [tuple(x) for x in got["lines"]] == [
        ("/notes/runs.md", 1, "aaa"), ("/notes/runs.md", 3, "hello"), ("/notes/runs.md", 4, "a" * 40)]


def test_issue_globs_finish_and_are_right(hostile: SqlStore, runner: Runner) -> None:
    for pattern in ISSUE_GLOBS:
        assert _bounded(runner, hostile, "glob", scope=S, pattern=pattern) == []
    assert _bounded(runner, hostile, "glob", scope=S, pattern="**/**/**/**/**/x.md") == [DEEP, "/notes/x.md"]
    assert _bounded(runner, hostile, "glob", scope=S, pattern="d/**/**/d/x.md") == [DEEP]
    assert _bounded(runner, hostile, "glob", scope=S, pattern="*a*a*a*a*") == [LONG_NAME]
    # grep's --glob goes through the same matcher
    got = _bounded(runner, hostile, "grep", scope=S, pattern="long|deep", glob="*a*a*a*a*b")
    assert got["files"] == []
    got = _bounded(runner, hostile, "grep", scope=S, pattern="long|deep", glob="**/**/**/**/x.md")
    assert got["files"] == [DEEP]


# -- what cannot run in linear time: a deadline and a note ------------------------------

BACKREF = r"(a|aa)+\1b"  # a backreference: no RE2 form; on 40 a's Python backtracks for minutes


def test_backreference_is_cut_at_the_deadline(store: SqlStore, runner: Runner) -> None:
    store.write(S, "/a.md", "aab\n")  # matches, and is searched first
    store.write(S, "/b.md", "a" * 40 + "\n")
    store.write(S, "/c.md", "aab\n")  # after the cut: not searched
    started = time.monotonic()
    got = _bounded(runner, store, "grep", scope=S, pattern=BACKREF)
    assert time.monotonic() - started < SLOW_DEADLINE + 10
    assert got["files"] == ["/a.md"]
    assert got["cut"] is not None and "backreference" in got["cut"] and "/b.md" in got["cut"]
    text = _bounded(runner, store, "render", scope=S, pattern=BACKREF, output_mode="content")
    assert text.splitlines()[0] == "/a.md:1:aab"
    assert text.splitlines()[-1].startswith("(incomplete: grep stopped after 1.5 s in /b.md")
    # The runner's worker was killed and replaced: the next search answers fully.
    got = _bounded(runner, store, "grep", scope=S, pattern=r"(a)\1b")
    assert got == _grep_dict(store, pattern=r"(a)\1b")
    assert got["files"] == ["/a.md", "/c.md"] and got["cut"] is None


def test_render_of_a_cut_result() -> None:
    from memagent.vfs.types import GrepResult

    empty = GrepResult(mode="files_with_matches", cut="grep stopped after 5 s in /x.md")
    assert render(empty) == "No matches found in the part searched.\n(incomplete: grep stopped after 5 s in /x.md)"
    assert render(GrepResult(mode="files_with_matches")) == "No matches found."


def test_non_ascii_word_boundary_falls_back_exactly(store: SqlStore) -> None:
    """RE2's \\b is ASCII-only: a non-ASCII file goes to Python's re, same answer."""
    store.write(S, "/u.md", "éfoo foo\nfooé\nnaïve café\n")
    store.write(S, "/a.md", "foo\nfoobar\n")
    for pattern in (r"\bfoo\b", r"\bcaf", r"é\b", r"(?a)\bfoo\b", r"\w\b"):
        for mode in ("files_with_matches", "content", "count"):
            got = store.grep(S, pattern, output_mode=mode)
            assert got == store._grep_plain(S, pattern, output_mode=mode), (pattern, mode)
            assert got.cut is None


@pytest.mark.postgres
@pytest.mark.parametrize("backend_url", ["postgres"], indirect=True)
def test_postgres_prefilter_is_stopped_by_the_statement_timeout(
        store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server-side filter that runs too long (here: it sleeps) ends at grep's deadline."""
    store.write(S, "/a.md", "555-1234\n")
    sleeping = literal_column("(SELECT true FROM pg_sleep(20))")
    monkeypatch.setattr(prefilter, "choose", lambda conn, features, regex: (sleeping, None))
    monkeypatch.setattr(engine, "GREP_DEADLINE", 1.0)
    started = time.monotonic()
    got = store.grep(S, "[0-9]{3}-[0-9]{4}")
    assert time.monotonic() - started < 10
    assert got.files == [] and got.cut is not None and "database" in got.cut
    monkeypatch.undo()
    assert store.grep(S, "[0-9]{3}-[0-9]{4}").files == ["/a.md"]  # the connection is fine


# -- properties: bounded, and equal to the plain implementations -------------------------

ATOMS = ["a", "aa", "b", r"\w", r"\s", r"\d", ".", "[ab]", "[^b]", "é", "k", "3f", " ", r"\W"]
QUANT = ["+", "*", "?", "{2,}", "{1,3}", "+?"]


@st.composite
def adversarial_patterns(draw: st.DrawFn) -> str:
    """Nested quantifiers and alternations, anchors, sometimes a backtracking-only construct."""
    def group(depth: int) -> str:
        if depth == 0 or draw(st.booleans()):
            return draw(st.sampled_from(ATOMS)) + draw(st.sampled_from(QUANT + ["", ""]))
        parts = [group(depth - 1) for _ in range(draw(st.integers(1, 3)))]
        body = "|".join(parts) if draw(st.booleans()) else "".join(parts)
        return "(" + body + ")" + draw(st.sampled_from(QUANT))

    pattern = group(3)
    if draw(st.booleans()):
        pattern = "^" + pattern
    if draw(st.booleans()):
        pattern += draw(st.sampled_from(["$", "!", r"\b", "$", "b"]))
    if draw(st.integers(0, 9)) == 0:
        pattern = draw(st.sampled_from(["hello|", r"(?i)", r"\bx|", r"(?<=a)", "(a)\\1|"])) + pattern
    try:
        re.compile(pattern)
    except re.error:
        return "(a+)+$"
    return pattern


@st.composite
def adversarial_texts(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(1, 4))):
        run_char = draw(st.sampled_from(["a", "3f", "é", "ab", "a "]))
        lines.append(run_char * draw(st.integers(0, 30)) + draw(st.sampled_from(["", "!", "b", ".", "\u212a"])))
    text = "\n".join(lines)
    return text + "\n" if draw(st.booleans()) else text


class Counter:
    n = 0


PROPERTY = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
REFERENCE_BUDGET = 0.3  # seconds the plain implementation gets before a case is not compared
# Through PgBouncer the properties run a quarter of the examples: what they check (the answers
# against the plain implementations, within the bound) does not depend on the connection path,
# which runs the same statements as Postgres; the pooler path itself is covered in full above
# (every issue pattern, in every mode, and the cut at the deadline, [pgbouncer]) and in
# tests/test_regex_prefilter.py and tests/test_fastpaths.py, whose every test runs through it.
THROUGH_PGBOUNCER = settings(PROPERTY, max_examples=10)
DIRECT = pytest.mark.parametrize("backend_url", ["sqlite", "postgres"], indirect=True)
POOLED = pytest.mark.parametrize("backend_url", ["pgbouncer"], indirect=True)
GREP_CASES = given(pattern=adversarial_patterns(), texts=st.lists(adversarial_texts(), min_size=1, max_size=3),
                   mode=st.sampled_from(["files_with_matches", "content", "count"]), ci=st.booleans())


@DIRECT
@PROPERTY
@GREP_CASES
def test_grep_property(store: SqlStore, runner: Runner, reference: Runner, pattern: str, texts: list[str],
                       mode: str, ci: bool) -> None:
    grep_case(store, runner, reference, pattern, texts, mode, ci)


@POOLED
@THROUGH_PGBOUNCER
@GREP_CASES
def test_grep_property_through_pgbouncer(store: SqlStore, runner: Runner, reference: Runner, pattern: str,
                                         texts: list[str], mode: str, ci: bool) -> None:
    grep_case(store, runner, reference, pattern, texts, mode, ci)


def grep_case(store: SqlStore, runner: Runner, reference: Runner, pattern: str, texts: list[str],
              mode: str, ci: bool) -> None:
    Counter.n += 1
    folder = f"/ex{Counter.n}"
    for i, t in enumerate(texts):
        store.write(S, f"{folder}/f{i}.md", t)
    kw = {"scope": S, "pattern": pattern, "path": folder, "output_mode": mode, "case_insensitive": ci}
    got = _bounded(runner, store, "grep", **kw)
    try:
        want = reference.call(REFERENCE_BUDGET, url=_url(store), op="grep_plain", **kw)
    except TimeoutError:
        return  # plain re did not finish: only the bound above is checked
    assert got == want, (pattern, texts)


GLOB_PIECES = ["**", "*", "*a*", "a*a*", "?", "[ad]", "d", "x.md", "{a,d}*", "*b", "*.md", "zzz"]


@st.composite
def adversarial_globs(draw: st.DrawFn) -> str:
    segs = draw(st.lists(st.sampled_from(GLOB_PIECES), min_size=1, max_size=7))
    joined = "/".join(segs)
    return draw(st.sampled_from(["", "/"])) + joined if draw(st.booleans()) else joined


GLOB_PATHS = [DEEP, LONG_NAME, "/" + "/".join(["a"] * 60) + "/" + "a" * 200 + ".md", "/x.md",
              "/d/x.md", "/a/b/zzz", "/names/" + "ab" * 100]


@DIRECT
@PROPERTY
@given(pattern=adversarial_globs())
def test_glob_property(store: SqlStore, runner: Runner, reference: Runner, pattern: str) -> None:
    glob_case(store, runner, reference, pattern)


@POOLED
@THROUGH_PGBOUNCER
@given(pattern=adversarial_globs())
def test_glob_property_through_pgbouncer(store: SqlStore, runner: Runner, reference: Runner, pattern: str) -> None:
    glob_case(store, runner, reference, pattern)


def glob_case(store: SqlStore, runner: Runner, reference: Runner, pattern: str) -> None:
    if not store.exists(S, "/x.md"):
        for p in GLOB_PATHS:
            store.write(S, p, "x\n")
    got = _bounded(runner, store, "glob", scope=S, pattern=pattern)
    try:
        want = reference.call(REFERENCE_BUDGET, url=_url(store), op="glob_plain", scope=S, pattern=pattern)
    except TimeoutError:
        return
    assert got == want, pattern


# -- pure Python: RE2 carries every regular pattern, with Python's answers -----------------


def test_issue_patterns_run_on_re2() -> None:
    for pattern in ISSUE_GREPS + [r"\bword\b", r"(?i)kelvin", r"(?i)é+", r"\Aab\Z", r"a\nb", r"x{1000}"]:
        regex = compile_pattern(pattern, case_insensitive=False, fixed_strings=False)
        assert isinstance(prefilter.linear(regex.pattern, regex.flags), prefilter.Linear), pattern
    for pattern, why in ((r"(a)\1", "backreference"), (r"(?<=a)b", "lookaround"), (r"a*+", "possessive"),
                         (r"(?>a)", "atomic"), (r"\Ba", "\\B"), (r"a{1001}", "over 1000")):
        found = prefilter.linear(pattern, re.M | re.U)
        assert isinstance(found, str) and why in found, pattern
    for pattern in ISSUE_GLOBS:
        assert glob_matcher(pattern).linear is not None


GLOB_TEXT = st.text(alphabet="ab/.*?[]!{},xé", max_size=14)
PATH_TEXT = st.lists(st.text(alphabet="ab.xé[]", min_size=1, max_size=5), min_size=1, max_size=5)


@settings(max_examples=600, deadline=None)
@given(pattern=GLOB_TEXT, segments=PATH_TEXT)
def test_glob_matcher_equals_compile_glob(pattern: str, segments: list[str]) -> None:
    path = "/".join(segments)
    try:
        reference = compile_glob(pattern)
    except Exception as exc:  # the same refusal, from both
        with pytest.raises(type(exc)):
            glob_matcher(pattern)
        return
    assert glob_matcher(pattern).match(path) == (reference.match(path) is not None), (pattern, path)
