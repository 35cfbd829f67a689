"""Re-basing a review proposal onto a file that changed: whole, unchanged lines or a conflict.

The two cases from issue 22 (a deletion glued two numbered items together; an
edit landed inside ``OBSOLETE: …``) end as conflicts on SQLite and Postgres, in
process and through `memagent review`; a conflict is re-proposed (the next reflect
run redoes it) or discarded, never applied. Property tests: a re-base equals the
proposal's line hunks applied to lines the other change left alone, or is a
conflict — never an edit inside a line.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memagent.agent.chat.session import build_session
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.cli import config
from memagent.agent.gate import Decision
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.reflection import Checked, Resolution, Resolve, Review, rebase, reflect, review, split_lines
from memagent.agent.tools import ApprovalRequest
from memagent.vfs import SqlStore, open_store
from memagent.vfs.records.queue import NewProposal, ProposalStore
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import out, run

# Hypothesis: no example database (a failure found once must not make every later
# run fail) and no deadline (timing margins fail on a busy machine).
PROPERTY = settings(database=None, deadline=None, max_examples=300)

NUMBERED_BEFORE = "# Rules\n- Be brief.\n- Reply in English.\n- Sign as Bob.\n"
NUMBERED_AFTER = "# Rules\n- Be brief.\n- Sign as Bob.\n"
NUMBERED_NOW = "# Rules\n1. Be brief.\n2. Reply in English.\n3. Sign as Bob.\n"

SIGN_BEFORE = "# Rules\nReply in English.\nSign as Bob.\n"
SIGN_AFTER = "# Rules\nReply in English.\nSign as Robert.\n"
SIGN_NOW = "# Rules\nReply in English.\nOBSOLETE: Sign as Bob.\nSign as Alice.\n"


def test_the_two_cases_of_the_issue_do_not_rebase() -> None:
    # Matching inside lines used to give "2. 3. Sign as Bob." and "OBSOLETE: Sign as Robert.".
    assert rebase(NUMBERED_BEFORE, NUMBERED_AFTER, NUMBERED_NOW) is None
    assert rebase(SIGN_BEFORE, SIGN_AFTER, SIGN_NOW) is None


def test_whole_unchanged_lines_rebase() -> None:
    # A change elsewhere (not next to the hunk) leaves the proposal's lines alone.
    assert rebase("a\nb\nc\nd\ne\n", "a\nb\nc\nD\ne\n", "A\nb\nc\nd\ne\n") == "A\nb\nc\nD\ne\n"
    # Two hunks, the person's edit between them.
    assert rebase("a\nb\nc\nd\ne\nf\ng\n", "a\nB\nc\nd\ne\nF\ng\n", "a\nb\nc\nd2\ne\nf\ng\n") \
        == "a\nB\nc\nd2\ne\nF\ng\n"


@pytest.mark.parametrize(("before", "after", "current"), [
    ("a\nb\nc\n", "a\nc\n", "a\nb\nc2\n"),          # the line after a deletion was edited
    ("a\nb\nc\n", "a\nc\n", "a0\nb\nc\n"),          # the line before it was edited
    ("a\nb\nc\n", "a\nb\nx\nc\n", "a\nb\ny\nc\n"),  # both inserted at the same place
    ("a\nb\nc\n", "a\nB\nc\n", "a\nb c\n"),         # the line was glued to the next
    ("a\nb\nc\n", "a\nB\nc\n", "a\nb\nb\nc\n"),     # the hunk's lines are there twice
    ("a\nb\nc\n", "a\nB\nc\n", "a\nb\n"),           # the context after it is gone
    ("a\nb\n", "a\nb\nc\n", "a\nb\nd\n"),           # an insertion at the end, the end moved
    ("a\nb\n", "x\na\nb\n", "w\na\nb\n"),           # an insertion at the start, the start moved
    ("a\nb\nc\nd\n", "a\nB\nc\nD\n", "a\nb\nz\nc\nd\n"),  # a line slipped into a shared context
    ("a\nb", "a\nB", "a\nb\n"),                     # the last line gained its newline
])
def test_conflicts(before: str, after: str, current: str) -> None:
    assert rebase(before, after, current) is None


# -- the issue's cases through the review, on both databases ------------------------------------


def propose(store: SqlStore, before: str, after: str) -> int:
    """A reflect run's proposal to turn /AGENTS.md from ``before`` (its version now) into ``after``."""
    queue = ProposalStore(store.engine)
    version = store.write("agent:a", "/AGENTS.md", before).version
    run_ = queue.start_run("a", model="test")
    [pid] = queue.finish_run(run_.id, "done", upto_message=None, new=[
        NewProposal("agent:a", "/AGENTS.md", "/AGENTS.md", "edit", version, before, after, "tidy the rules")])
    return pid


def status(queue: ProposalStore, pid: int) -> str:
    p = queue.get(pid)
    assert p is not None
    return p.status


def refuse(request: ApprovalRequest) -> Decision:
    raise AssertionError(f"a conflict was put to approval: {request.note}")


@pytest.mark.parametrize(("before", "after", "now"), [(NUMBERED_BEFORE, NUMBERED_AFTER, NUMBERED_NOW),
                                                       (SIGN_BEFORE, SIGN_AFTER, SIGN_NOW)],
                         ids=["numbered", "obsolete"])
def test_the_issue_cases_end_as_conflicts_in_review(store: SqlStore, before: str, after: str, now: str) -> None:
    pid = propose(store, before, after)
    view = AgentView(store, "a")
    version = view.write("/AGENTS.md", now).version
    queue = ProposalStore(store.engine)

    [p] = queue.pending("a")
    checked = Review(view, queue).check(p)
    assert (checked.state, checked.after) == ("conflict", None)
    assert "overlaps those changes; it is not applied" in checked.why

    # Without a way to answer, review shows both sides and leaves it pending.
    lines: list[str] = []
    summary = review(view, queue, refuse, on_log=lines.append)
    assert summary.applied == [] and [q.id for q, _ in summary.conflicts] == [pid]
    text = "\n".join(lines)
    assert f"conflict in proposal #{pid}" in text and "=== the proposal (against version 1) ===" in text
    assert f"=== changes to /AGENTS.md since (version 1 -> version {version}) ===" in text
    assert "\n+" + now.splitlines()[2] in text  # the person's side
    assert "\n+" + after.splitlines()[-1] in text or "\n-" + before.splitlines()[2] in text  # the proposal's

    # Skipped: still pending; discarded: gone. The file never changes.
    seen: list[Checked] = []

    def answer(choice: Resolution) -> Resolve:
        def resolve(c: Checked) -> Resolution:
            seen.append(c)
            return choice
        return resolve

    review(view, queue, refuse, resolve=answer("skip"))
    assert [q.id for q in queue.pending("a")] == [pid]
    summary = review(view, queue, refuse, resolve=answer("discard"))
    assert [q.id for q, _ in summary.dropped] == [pid] and queue.pending("a") == []
    assert status(queue, pid) == "stale"
    assert [c.state for c in seen] == ["conflict", "conflict"]
    fc = view.read("/AGENTS.md")
    assert (fc.content, fc.version) == (now, version)
    assert [r.version for r in view.history("/AGENTS.md")] == [version, 1]


def test_a_rebase_applies_the_hunks_to_untouched_lines(store: SqlStore) -> None:
    propose(store, NUMBERED_BEFORE, NUMBERED_AFTER)
    view = AgentView(store, "a")
    view.write("/AGENTS.md", "# Rules for Bob\n\n- Be brief.\n- Reply in English.\n- Sign as Bob.\n")
    summary = review(view, ProposalStore(store.engine), lambda _: Decision("approve"))
    assert [c.version for _, c in summary.applied] == [3]
    assert view.read("/AGENTS.md").content == "# Rules for Bob\n\n- Be brief.\n- Sign as Bob.\n"


def test_repropose_hands_the_conflict_to_the_next_reflect_run(store: SqlStore) -> None:
    pid = propose(store, SIGN_BEFORE, SIGN_AFTER)
    view = AgentView(store, "a")
    view.write("/AGENTS.md", SIGN_NOW)
    queue = ProposalStore(store.engine)
    summary = review(view, queue, refuse, resolve=lambda c: "repropose")
    assert [q.id for q in summary.reproposed] == [pid] and queue.pending("a") == []
    assert status(queue, pid) == "repropose"
    assert view.read("/AGENTS.md").content == SIGN_NOW

    # No new conversation, yet the run happens: it is shown the change and redoes it.
    model = ScriptedModel()
    model.enqueue_tool_use("edit_file", {"file_path": "/AGENTS.md", "old_string": "Sign as Alice.",
                                         "new_string": "Sign as Robert.", "reason": "redo #1"})
    model.enqueue_text("Redone.")
    result = reflect(view, model, queue)
    assert result.status == "done"
    prompt = model.requests[0]["messages"][0]["content"][0]["text"]
    assert f"proposal #{pid}: edit /AGENTS.md — tidy the rules" in prompt
    assert "-Sign as Bob.\n+Sign as Robert." in prompt
    assert status(queue, pid) == "reproposed"
    [new] = queue.pending("a")
    assert Review(view, queue).check(new).state == "fresh"
    review(view, queue, lambda _: Decision("approve"))
    assert view.read("/AGENTS.md").content == SIGN_NOW.replace("Alice", "Robert")
    # Handed over once: the run after that has nothing to do.
    assert reflect(view, ScriptedModel(), queue).status == "nothing"


def test_a_proposal_the_file_already_reflects_is_dropped_unasked(store: SqlStore) -> None:
    propose(store, SIGN_BEFORE, SIGN_AFTER)
    view = AgentView(store, "a")
    view.write("/AGENTS.md", SIGN_AFTER)
    summary = review(view, ProposalStore(store.engine), refuse)
    assert len(summary.dropped) == 1 and "already reads as the proposal would make it" in summary.dropped[0][1]


# -- through the command ------------------------------------------------------------------------------


@pytest.fixture
def home_store(chat_env: None) -> Iterator[SqlStore]:
    s = open_store(config.db_url())
    s.create_agent("a", {"/AGENTS.md": "# Rules\n"})
    yield s
    s.close()


def test_review_command_shows_both_sides_and_discards(home_store: SqlStore) -> None:
    pid = propose(home_store, SIGN_BEFORE, SIGN_AFTER)
    AgentView(home_store, "a").write("/AGENTS.md", SIGN_NOW)

    p = run("review", "a", "--list")
    assert p.returncode == 0 and f"#{pid}" in out(p) and "[CONFLICT: file changed; re-propose or discard]" in out(p)

    p = run("review", "a", stdin="y\nd\n")  # "y" is not an answer to a conflict
    text = out(p)
    assert p.returncode == 0, text
    assert f"--- CONFLICT in proposal #{pid}: edit /AGENTS.md (not applied) ---" in text
    assert "=== the proposal (against version 2) ===" in text and "+Sign as Robert." in text
    assert "=== changes to /AGENTS.md since (version 2 -> version 3) ===" in text
    assert "+OBSOLETE: Sign as Bob." in text
    assert "answer r, d or s" in text
    assert "0 applied, 0 rejected, 1 dropped as stale, 0 pending" in text
    assert run("fs", "cat", "/AGENTS.md", "-a", "a").stdout.decode() == SIGN_NOW


def test_review_command_reproposes(home_store: SqlStore) -> None:
    pid = propose(home_store, NUMBERED_BEFORE, NUMBERED_AFTER)
    AgentView(home_store, "a").write("/AGENTS.md", NUMBERED_NOW)
    p = run("review", "a", stdin="r\n")
    assert p.returncode == 0 and "0 applied, 0 rejected, 0 dropped as stale, 1 re-proposed, 0 pending" in out(p)
    assert status(ProposalStore(home_store.engine), pid) == "repropose"
    assert run("fs", "cat", "/AGENTS.md", "-a", "a").stdout.decode() == NUMBERED_NOW


# -- properties -------------------------------------------------------------------------------------------

Edit = tuple[int, int, tuple[str, ...]]  # lines [start, end) of the base become the new lines


def apply_edits(base: list[str], edits: list[Edit]) -> list[str]:
    """``edits`` (never overlapping) applied to ``base``; an insertion goes before a replacement at the same line."""
    out: list[str] = []
    at = 0
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1])):
        out += base[at:start]
        out += new
        at = end
    return out + base[at:]


@st.composite
def two_changes(draw: st.DrawFn) -> tuple[list[str], list[Edit], list[Edit]]:
    """Distinct base lines; the proposal's and the person's edits, on separate lines and gaps.

    Every new line is new (none equals a base line), so where a block of lines is can
    never be ambiguous: the expected outcome follows from the edits alone. The person's
    edits include the in-line ones of the issue: a number in front, a line glued to the
    next, a line split in two.
    """
    n = draw(st.integers(0, 9))
    base = [f"line {i}\n" for i in range(n)]
    mine: list[Edit] = []
    theirs: list[Edit] = []
    fresh = iter(range(10_000))
    k = 0
    while k <= n:
        owner = draw(st.sampled_from(["", "", "p", "q"]))
        if owner == "p" and draw(st.booleans()):  # insert in the gap before line k
            mine.append((k, k, tuple(f"new {next(fresh)}\n" for _ in range(draw(st.integers(1, 2))))))
        elif owner == "q" and draw(st.booleans()):
            theirs.append((k, k, (f"theirs {next(fresh)}\n",)))
        if k == n:
            break
        owner = draw(st.sampled_from(["", "", "p", "q"]))
        if owner == "p":
            count = draw(st.integers(0, 2))
            mine.append((k, k + 1, tuple(f"new {next(fresh)}\n" for _ in range(count))))
        elif owner == "q":
            how = draw(st.sampled_from(["number", "delete", "split", "glue"]))
            if how == "glue" and k + 1 < n:
                theirs.append((k, k + 2, (f"{base[k].strip()} {base[k + 1].strip()} {next(fresh)}\n",)))
                k += 2
                continue
            new = {"number": (f"{next(fresh)}. {base[k]}",), "delete": (),
                   "split": (f"{base[k].strip()} (a{next(fresh)})\n", f"(b{next(fresh)})\n")}.get(how, ())
            theirs.append((k, k + 1, new))
        k += 1
    return base, mine, theirs


def hunks(edits: list[Edit]) -> list[tuple[int, int]]:
    """The proposal's edits as the hunks a line diff sees: touching edits are one hunk."""
    out: list[tuple[int, int]] = []
    for start, end, _ in sorted(edits, key=lambda e: (e[0], e[1])):
        if out and out[-1][1] >= start:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def touches(hunk: tuple[int, int], edit: Edit) -> bool:
    """Whether the person's edit changes the hunk's lines, the line before or after them,
    or slips a line in between (the start and end of the file count as lines)."""
    k1, k2 = hunk
    q1, q2, _ = edit
    if q1 == q2:  # an insertion in the gap before line q1
        return k1 <= q1 <= k2
    return q1 <= k2 and q2 >= k1


@PROPERTY
@given(two_changes())
def test_rebase_is_the_three_way_merge_of_whole_lines_or_a_conflict(
        change: tuple[list[str], list[Edit], list[Edit]]) -> None:
    base, mine, theirs = change
    before, after, current = "".join(base), "".join(apply_edits(base, mine)), "".join(apply_edits(base, theirs))
    got = rebase(before, after, current)
    if any(touches(h, e) for h in hunks(mine) for e in theirs):
        assert got is None
    else:
        assert got == "".join(apply_edits(base, mine + theirs))


LINES = st.sampled_from(["a\n", "b\n", "a b\n", "2. a\n", "OBSOLETE: b\n", "\n", "a", "b"])


@st.composite
def related_texts(draw: st.DrawFn) -> tuple[str, str, str]:
    """A text and two edits of it, from few distinct lines (repeats, prefixes, a last line
    without its newline): where a block is can be ambiguous."""
    base = draw(st.lists(LINES, max_size=8))

    def edited() -> list[str]:
        start = draw(st.integers(0, len(base)))
        end = draw(st.integers(start, len(base)))
        return base[:start] + draw(st.lists(LINES, max_size=3)) + base[end:]

    return "".join(base), "".join(edited()), "".join(edited())


@PROPERTY
@given(related_texts())
def test_a_rebase_only_moves_whole_lines(texts: tuple[str, str, str]) -> None:
    before, after, current = texts
    got = rebase(before, after, current)
    assert rebase(before, after, before) in (None, after)
    if got is None:
        return
    lines = split_lines(got)
    # Never a partial-line edit: every line is a whole line of the file now or of the proposal.
    assert set(lines) <= set(split_lines(current)) | set(split_lines(after))
    # Exactly the proposal's lines removed and added, counted line by line.
    delta = Counter(lines)
    delta.subtract(split_lines(current))
    wanted = Counter(split_lines(after))
    wanted.subtract(split_lines(before))
    assert {k: v for k, v in delta.items() if v} == {k: v for k, v in wanted.items() if v}
    # And undoing the proposal the same way gives the file back, or is a conflict itself.
    assert rebase(after, before, got) in (None, current)


def test_chat_review_shows_a_conflict_and_leaves_it_pending(store: SqlStore) -> None:
    pid = propose(store, NUMBERED_BEFORE, NUMBERED_AFTER)
    view = AgentView(store, "a", user="tester")
    view.write("/AGENTS.md", NUMBERED_NOW)
    stdout, stderr = io.StringIO(), io.StringIO()
    session = build_session(view, ScriptedModel(), PlainUI(io.StringIO("/review\n"), stdout, stderr),
                            threads=ThreadStore(store.engine))
    assert session.run() == 0
    shown = stdout.getvalue()
    assert f"CONFLICT in proposal #{pid}" in shown and "+2. Reply in English." in shown
    assert "-- Reply in English." in shown and "Review done: 0 applied" in shown
    assert [p.id for p in ProposalStore(store.engine).pending("a")] == [pid]
    assert view.read("/AGENTS.md").content == NUMBERED_NOW


@pytest.mark.parametrize(("answer", "left"), [("d", 0), ("s", 1)])
def test_chat_review_asks_about_a_conflict(store: SqlStore, answer: str, left: int) -> None:
    pid = propose(store, NUMBERED_BEFORE, NUMBERED_AFTER)
    view = AgentView(store, "a", user="tester")
    view.write("/AGENTS.md", NUMBERED_NOW)
    stdout = io.StringIO()
    session = build_session(view, ScriptedModel(), PlainUI(io.StringIO(f"/review\n{answer}\n"), stdout,
                                                           io.StringIO()),
                            threads=ThreadStore(store.engine))
    assert session.run() == 0
    shown = stdout.getvalue()
    assert f"CONFLICT in proposal #{pid}" in shown and "[r]e-propose, [d]iscard or [s]kip?" in shown
    assert len(ProposalStore(store.engine).pending("a")) == left
    assert view.read("/AGENTS.md").content == NUMBERED_NOW


def test_review_escapes_what_the_proposal_carries(home_store: SqlStore) -> None:
    # A proposal stored with control characters (an old queue, or a model's reason) never
    # reaches the terminal raw: not in the list, the diff, the reason or a conflict.
    queue = ProposalStore(home_store.engine)
    before = home_store.read("agent:a", "/AGENTS.md").content
    run_ = queue.start_run("a", model="test")
    queue.finish_run(run_.id, "done", upto_message=None, new=[
        NewProposal("agent:a", "/AGENTS.md", "/AGENTS.md", "edit", 1, before, before + "\x1b]0;pwned\x07\n",
                    "why \x1b[2J\u202e")])
    for args, stdin in ((("--list",), ""), ((), "n\n")):
        p = run("review", "a", *args, stdin=stdin)
        text = out(p)
        assert p.returncode == 0, text
        assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
        assert "\\x1b" in text and "\\u202e" in text
