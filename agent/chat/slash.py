"""Slash commands of ``memagent chat``: small functions registered in one table.

Invariants:
- ``COMMANDS`` is the only list of commands: dispatch, ``/help`` and the terminal's
  completion all read it, so a command cannot exist without its one-line help.
- Commands change memory only two ways: ``/remember`` and ``/compact`` send a prompt
  through ``Agent.turn``, so every edit passes the validators and the approval gate;
  ``/undo``, ``/redo`` and ``/edit`` are the person's own acts, taken through
  ``vfs.entrance.submit`` and recorded as author ``user``, approval ``human``
  (``changes`` keeps undo and redo stacking).
- A command's mistake (a missing file, a bad path) is one line through the UI; it
  never ends the session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from memagent.agent.chat import changes
from memagent.agent.context import compose
from memagent.agent.tools import READ_ONLY
from memagent.agent.tools.mcp import render_report
from memagent.validators import check_name, read_frontmatter, validate
from memagent.vfs import (
    Change,
    NotFound,
    Origin,
    ValidationFailed,
    VfsError,
    built_in_message,
    human_size,
    render_log,
    when,
)

if TYPE_CHECKING:
    from memagent.agent.chat.session import Session

Handler = Callable[["Session", str], None]


@dataclass(frozen=True)
class Command:
    name: str
    args: str
    help: str
    run: Handler


COMMANDS: dict[str, Command] = {}


def command(name: str, args: str, help: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = Command(name, args, help, fn)
        return fn

    return register


def is_command(line: str) -> bool:
    return line.startswith("/")


def is_note(line: str) -> bool:
    """``# note``: a line for memory, routed through the agent (as in Claude Code)."""
    return line.startswith("#") and bool(line.lstrip("#").strip())


def note(session: Session, line: str) -> None:
    """Route a ``#`` note to the right memory file through the agent and the approval gate."""
    from memagent.agent.reflection import note_prompt

    text = line.lstrip("#").strip()
    session.run_turn(built_in_message(line, note_prompt(text)), title="note: " + " ".join(text.split())[:50])


def dispatch(session: Session, line: str) -> None:
    name, _, arg = line.strip().partition(" ")
    cmd = COMMANDS.get(name.lower())
    if cmd is None:
        session.ui.error(f"unknown command {name}; type /help to see the commands")
        return
    try:
        cmd.run(session, arg.strip())
    except VfsError as exc:
        session.ui.error(str(exc))


def prompt_text(name: str) -> str:
    """A built-in prompt from ``skills_templates/prompts/<name>.md``."""
    files = resources.files("memagent.skills_templates")
    return files.joinpath(f"prompts/{name}.md").read_text("utf-8").strip()


# -- memory --------------------------------------------------------------------------


@command("/remember", "[hint]", "reflect on this conversation and update memory (gated)")
def remember(session: Session, arg: str) -> None:
    text = prompt_text("remember")
    if arg:
        text += f"\n\nThe user adds this hint about what to remember: {arg}"
    typed = f"/remember {arg}".strip()
    session.run_turn(built_in_message(typed, text), title=typed)


@command("/compact", "", "merge duplicates and generalise memory; move detail into skills (gated)")
def compact(session: Session, arg: str) -> None:
    session.run_turn(built_in_message("/compact", prompt_text("compact")), title="/compact")


def memory_tree(files: list[tuple[str, int]], root: str = "/") -> str:
    """``files`` (path, size) under ``root`` as an indented tree with sizes."""
    tree: dict[str, object] = {}
    for path, size in files:
        node = tree
        parts = path[len(root):].strip("/").split("/")
        for part in parts[:-1]:
            child = node.setdefault(part + "/", {})
            assert isinstance(child, dict)
            node = child
        node[parts[-1]] = size
    total = sum(size for _, size in files)
    lines = [f"{root}  ({len(files)} file{'s' if len(files) != 1 else ''}, {human_size(total)})"]

    def walk(node: dict[str, object], indent: str) -> None:
        names = sorted(node)
        for i, name in enumerate(names):
            last = i == len(names) - 1
            value = node[name]
            branch = "└── " if last else "├── "
            if isinstance(value, dict):
                lines.append(f"{indent}{branch}{name}")
                walk(value, indent + ("    " if last else "│   "))
            else:
                assert isinstance(value, int)
                lines.append(f"{indent}{branch}{name}  ({human_size(value)})")

    walk(tree, "")
    return "\n".join(lines)


@command("/memory", "[PATH]", "show the memory tree with sizes, or one file")
def memory(session: Session, arg: str) -> None:
    view = session.view
    if arg and view.exists(arg):
        fc = view.read(arg)
        if fc.content:
            session.ui.show_file(fc.path, fc.content)
        else:
            session.ui.info(f"{fc.path} is empty (version {fc.version}).")
        return
    root = "/" + arg.strip("/") + "/" if arg and arg.strip("/") else "/"
    found = sorted(p for p in view.glob("*", "/") if p.startswith(root))
    if not found:
        if root != "/":
            raise NotFound(f"nothing in memory at {arg}; type /memory to see the tree")
        session.ui.info("Memory is empty.")
        return
    session.ui.show_text(memory_tree([(p, view.stat(p).size) for p in found], root))


@command("/history", "[PATH]", "revisions of PATH; without PATH, those made in this session")
def history(session: Session, arg: str) -> None:
    view = session.view
    if arg:
        session.ui.show_text(f"{arg}\n" + render_log(view.history(arg)))
        return
    if not session.log.made:
        session.ui.info("No memory changes in this session yet.")
        return
    revs = []
    for change in reversed(session.log.made):
        revs += [r for r in view.history(change.path) if r.version == change.version]
    session.ui.show_text(render_log(revs, with_path=True))


@command("/undo", "[N]", "take back this session's last memory edit (N: the last N), newest first")
def undo(session: Session, arg: str) -> None:
    count = _count(session, arg, "/undo")
    if count is None:
        return
    for i in range(count):
        done = changes.undo(session.memory, Origin("chat", thread=session.agent.thread_id, detail="/undo"))
        if done is None:
            if i:
                session.ui.info("Nothing more to undo.")
            elif session.log.redoable:
                session.ui.info("Nothing to undo; /redo re-applies what was undone.")
            else:
                session.ui.info("Nothing to undo: no memory edit was made in this session.")
            return
        session.ui.info(done.describe("undo"))


@command("/redo", "[N]", "re-apply the last edit /undo took back (N: the last N)")
def redo(session: Session, arg: str) -> None:
    count = _count(session, arg, "/redo")
    if count is None:
        return
    for i in range(count):
        done = changes.redo(session.memory, Origin("chat", thread=session.agent.thread_id, detail="/redo"))
        if done is None:
            session.ui.info("Nothing more to redo." if i else "Nothing to redo: /redo re-applies what /undo took back.")
            return
        session.ui.info(done.describe("redo"))


def _count(session: Session, arg: str, name: str) -> int | None:
    if not arg:
        return 1
    if not arg.isdigit() or int(arg) < 1:
        session.ui.error(f"{name} takes a number of edits, e.g. `{name} 2`; got {arg!r}")
        return None
    return int(arg)


@command("/diff", "[PATH]", "what this session changed in memory so far (in PATH only, if given)")
def diff(session: Session, arg: str) -> None:
    path = "/" + arg.strip().lstrip("/") if arg.strip() else None
    found = changes.session_diff(session.log, path)
    if not found:
        session.ui.info(f"No changes to {path} in this session." if path
                        else "No memory changes in this session yet.")
        return
    for shown, text in found:
        if text:
            session.ui.show_diff(shown, text)
        else:
            session.ui.info(f"{shown}: changed and changed back; no difference now.")


@command("/edit", "PATH", "open a memory file in $EDITOR; on save it is validated and kept as your revision")
def edit(session: Session, arg: str) -> None:
    if not arg.strip():
        session.ui.error("/edit needs a file, e.g. /edit /AGENTS.md")
        return
    from memagent.agent.chat.editor import edit_text, keep
    from memagent.vfs import approved_policy, require_change, submit_change

    view, path = session.view, "/" + arg.strip().lstrip("/")
    if view.exists(path):
        fc = view.read(path)  # a folder raises IsADirectory: one line
        original, version = fc.content, fc.version
    else:
        original, version = "", 0
        session.ui.note(f"{path} does not exist yet; saving creates it")
    text = original
    while True:
        with session.ui.external():
            text = edit_text(text, path)
        if text == original:
            session.ui.info(f"No change; {path} is as it was.")
            return
        try:
            pending = view.prepare_write(path, text, expected_version=version)
        except ValidationFailed as exc:
            session.ui.error(str(exc))
            if _ask_reopen(session):
                continue
            session.ui.info(f"Discarded; {path} is unchanged (your text is in {keep(text, path)}).")
            return
        except VfsError as exc:
            session.ui.error(f"{exc} (your text is in {keep(text, path)})")
            return
        change = require_change(submit_change(
            view.store, pending, policy=approved_policy("human"), author="user", reason="edited by hand (/edit)",
            origin=Origin("chat", thread=session.agent.thread_id, detail="/edit")))
        session.log.record(change)
        # The model's idea of the file is stale: it must read the file again.
        session.memory.seen.pop(change.path, None)
        session.ui.show_diff(change.path, pending.diff)  # what the save changed, as /diff shows it
        session.ui.info(f"Saved {change.path} (now version {change.version}); /undo takes it back.")
        return


def _ask_reopen(session: Session) -> bool:
    while True:
        answer = session.ui.read_text("[e]dit again or [d]iscard?")
        if answer is None:
            return False
        word = answer.strip().lower()
        if word in ("e", "edit", "r", "reopen", "y", "yes"):
            return True
        if word in ("d", "discard", "n", "no"):
            return False
        session.ui.info("Please answer e (edit again) or d (discard).")


@command("/review", "", "review the memory edits waiting in the queue (reflect, memagent run, mcp serve)")
def review(session: Session, arg: str) -> None:
    from memagent.agent.chat.review import work_through
    from memagent.vfs import memory_of

    records = memory_of(session.view)
    if records is None:  # a store with no database (a double): nothing can be queued
        session.ui.info("This memory has no review queue.")
        return
    queue = records.queue
    if not queue.count_pending(session.view.agent):
        session.ui.info("No proposals waiting for review (`memagent reflect`, `memagent run` and "
                        "`memagent mcp serve --approval queue` make them).")
        return

    def applied(change: Change) -> None:
        session.log.record(change)
        # The model's idea of the file is now stale: make it read the file again.
        session.memory.seen.pop(change.path, None)

    work_through(session.ui, session.view, queue, on_applied=applied)


@command("/approval", "", "the agent's approval rules, in the order they are tried (memagent approval)")
def approval(session: Session, arg: str) -> None:
    from memagent.vfs import RuleBook

    rules = RuleBook(session.view.store, session.view.agent).rules()
    if session.gate.yolo:
        session.ui.info("yolo is on: the rules are not applied until /yolo turns it off.")
    for n, rule in enumerate(rules, 1):
        session.ui.info(f"{n:>3}  {rule}")
    session.ui.info(("No rules" if not rules else "No rule matches") + ": memory edits ask you here. Change them "
                    f"with `memagent approval add|rm {session.view.agent} ...`; the model cannot.")


# -- tools and subagents --------------------------------------------------------------


@command("/tools", "", "MCP servers of /tools.json: status, allowed tools, tools offered but not allowed")
def tools(session: Session, arg: str) -> None:
    mcp = session.mcp
    if mcp is None:
        session.ui.info("MCP tools are off in this session.")
        return
    mcp.refresh()
    if mcp.version is None:
        session.ui.info("No /tools.json: this agent uses no MCP servers. `memagent tools --help` shows "
                        "how to write one.")
        return
    session.ui.show_text(render_report(mcp.reports(), error=mcp.config.error))


@command("/agents", "", "the subagents in /subagents/ with their descriptions and tools")
def agents(session: Session, arg: str) -> None:
    view = session.view
    paths = sorted(p for p in view.glob("subagents/*.md", "/") if p.count("/") == 2)
    if not paths:
        session.ui.info("No subagents yet: a subagent is a file /subagents/<name>.md (see README).")
        return
    available = set(session.agent.tools.names())
    lines: list[str] = []
    for path in paths:
        content = view.read(path).content
        stem = path.rsplit("/", 1)[-1][:-3]
        problems = validate(path, content) if check_name(stem) is None else []
        if check_name(stem) is not None or problems:
            why = problems[0].message if problems else "not a valid subagent name"
            lines.append(f"{stem}  (cannot run: {' '.join(why.split())[:120]})")
            continue
        meta = read_frontmatter(content).meta or {}
        listed = meta.get("tools")
        names = [str(t) for t in listed] if isinstance(listed, list) else sorted(READ_ONLY)
        shown = [n if n in available else f"{n} (unavailable)" for n in names]
        desc = " ".join(str(meta.get("description", "")).split())
        lines.append(f"{stem}: {desc[:200]}")
        lines.append(f"  tools: {', '.join(shown) if shown else '(none)'}"
                     + ("" if isinstance(listed, list) else " (the default)")
                     + (f"; model {meta['model']}" if meta.get("model") else ""))
    session.ui.show_text("\n".join(lines))


# -- session ---------------------------------------------------------------------------


@command("/yolo", "", "toggle approvals off/on (the prompt shows (yolo) while off)")
def yolo(session: Session, arg: str) -> None:
    gate = session.gate
    gate.yolo = not gate.yolo
    if gate.yolo:
        session.ui.info("yolo on: memory edits are applied without asking (recorded as yolo); the approval "
                        "rules are off too.")
    else:
        # Turning approvals back on should mean every edit asks again.
        gate.always = False
        session.ui.info("yolo off: every memory edit asks for approval (or follows its approval rule, /approval).")


@command("/threads", "", "list this agent's threads: ids, titles, dates, message counts")
def threads(session: Session, arg: str) -> None:
    items = session.threads.list(session.view.agent)
    if not items:
        session.ui.info("No threads yet.")
        return
    current = session.agent.thread_id
    if current is not None and all(t.id != current for t in items):
        items.append(session.threads.get(session.view.agent, current))  # older than the list: still marked
    lines = []
    for t in items:
        mark = "*" if t.id == current else " "
        title = t.title or "(untitled)"
        count = f"{t.messages} message{'s' if t.messages != 1 else ''}"
        lines.append(f"{mark} {t.id[:8]}  {when(t.updated_at)}  {count:>12}  {title}")
    if current is None:
        # A new thread is stored with its first message; until then it has no id to show.
        lines.insert(0, "* (new)     this thread: nothing sent yet; it is saved with the first message")
    lines.append(f"Switch with /resume ID, or later `memagent chat {session.view.agent} --thread ID` "
                 "(* = this thread).")
    session.ui.show_text("\n".join(lines))


@command("/resume", "[ID]", "switch to a thread (an id prefix from /threads; none: the latest other one)")
def resume(session: Session, arg: str) -> None:
    threads, agent = session.threads, session.view.agent
    if arg.strip():
        tid = threads.get(agent, arg.strip()).id  # unknown or ambiguous: one line
    else:
        others = [t for t in threads.list(agent) if t.id != session.agent.thread_id]
        if not others:
            session.ui.info("No other thread to resume; /threads lists them.")
            return
        tid = others[0].id
    if tid == session.agent.thread_id:
        session.ui.info(f"Already in thread {tid[:8]}.")
        return
    session.switch_thread(tid)


@command("/new", "", "start a fresh thread (memory stays)")
def new(session: Session, arg: str) -> None:
    session.agent.new_thread()
    # What the model read belongs to the old conversation.
    session.memory.seen.clear()
    session.ui.info("Started a new thread.")


@command("/context", "", "the context budget as a bar (memory, summary, recent turns, free) and the summary")
def context(session: Session, arg: str) -> None:
    agent = session.agent
    shaped = agent.shape()
    window = agent.context
    session.ui.show_text(render_context(
        budget=window.budget, memory=shaped.memory_tokens, summary=shaped.summary_tokens,
        recent=shaped.recent_tokens, recent_messages=shaped.recent_messages,
        folded=window.folding.folded, total_messages=len(agent.messages), counted=shaped.counted,
        summary_text=compose(window.folding.text, window.folding.noted), method=window.folding.method,
        warnings=list(agent.prompt.build().warnings)))


def render_context(*, budget: int, memory: int, summary: int, recent: int, recent_messages: int,
                   folded: int, total_messages: int, counted: str, summary_text: str,
                   method: str | None, warnings: list[str], width: int = 50) -> str:
    """The ``/context`` report: one bar, one line per part, then the running summary."""
    free = max(budget - memory - summary - recent, 0)
    parts = [("memory", memory, "█"), ("summary", summary, "▓"), ("recent", recent, "▒"), ("free", free, "░")]
    total = max(budget, memory + summary + recent)
    bar = ""
    for _, n, ch in parts:
        bar += ch * round(n / total * width)
    bar = bar[:width].ljust(width, "░")
    how = "counted by the model API" if counted == "api" else "local estimate"
    lines = [f"Context: {memory + summary + recent:,} of {budget:,} tokens ({how})",
             f"[{bar}]",
             f"  █ memory   {memory:>9,}  system prompt (AGENTS.md, indexes) and tool definitions",
             f"  ▓ summary  {summary:>9,}  {folded} earlier messages folded"
             + (" (fallback summary: the summarising request failed)" if method == "fallback" else ""),
             f"  ▒ recent   {recent:>9,}  {recent_messages} messages verbatim",
             f"  ░ free     {free:>9,}",
             (f"The thread keeps all {total_messages} message{'' if total_messages == 1 else 's'}; the oldest "
              "fold into the summary when a request would pass the budget." if total_messages else
              "The thread has no messages yet; the oldest fold into the summary once a request would pass "
              "the budget.")]
    lines += [f"warning: {w}" for w in warnings]
    lines.append("")
    lines.append("Running summary:" if summary_text else "Running summary: (none yet: nothing has been folded)")
    if summary_text:
        lines.append(summary_text)
    return "\n".join(lines)


@command("/retry", "", "send the last message again (after a failed or unsatisfying turn)")
def retry(session: Session, arg: str) -> None:
    text = session.agent.retry_text
    if not text:
        session.ui.info("Nothing to retry: no message was sent in this thread yet.")
        return
    failed = session.last_turn_failed
    if session.run_turn(text) is not None and failed:
        session.failed_turns -= 1  # the retry answered the turn that had failed


@command("/help", "", "list the commands")
def help_(session: Session, arg: str) -> None:
    width = max(len(f"{c.name} {c.args}".strip()) for c in COMMANDS.values())
    lines = [f"{(c.name + ' ' + c.args).strip():<{width}}  {c.help}" for c in COMMANDS.values()]
    # The two things typed inside a message rather than as a command.
    lines.append(f"{'# NOTE':<{width}}  a line starting with # is a note for memory: the agent files it "
                 "(gated)")
    lines.append(f"{'@PATH':<{width}}  in a message, attaches that memory file (Tab completes it)")
    lines.append("Anything else is sent to the agent. Ctrl-C stops a turn, Ctrl-D quits.")
    session.ui.show_text("\n".join(lines))


@command("/exit", "", "end the session")
def exit_(session: Session, arg: str) -> None:
    session.done = True
