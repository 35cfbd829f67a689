"""Approval rules per agent (``vfs/records/rules.py``): syntax, globs, precedence, rules
for one tool; kept where no tool reaches them; honoured by chat, ``mcp serve`` and
subagents (``memagent run`` in tests/test_run.py), with ``--yolo`` over them.
"""

from __future__ import annotations

import io
import json
import tomllib

import pytest

from memagent.agent.chat.session import build_session
from memagent.agent.chat.ui.plain import PlainUI
from memagent.agent.formats import FORMATS, export_agent
from memagent.agent.formats.base import ExportOptions
from memagent.agent.gate import Decision
from memagent.agent.model.scripted import ScriptedModel
from memagent.agent.serve.server import Session
from memagent.vfs import SqlStore
from memagent.vfs.errors import StaleVersion
from memagent.vfs.paths import scope_name
from memagent.vfs.records.queue import ProposalStore
from memagent.vfs.records.rules import RULES_PATH, RuleBook, RuleError, decide, parse_rule, parse_rules
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.agent_helpers import last_tool_result, make_agent
from tests.cli_helpers import err, out, run

S = "agent:a"
SETTINGS = scope_name("settings", "a")


def rules(*lines: str) -> list:  # type: ignore[type-arg]
    return parse_rules("\n".join(lines))


# -- syntax, globs, precedence ------------------------------------------------------------------


def test_globs_stay_in_a_folder_or_cross_them() -> None:
    star, deep, everything = (parse_rule(s, "allow") for s in
                              ("write_file(/knowledge/*.md)", "write_file(/knowledge/**)", "write_file(**)"))
    assert star.matches("write_file", "/knowledge/a.md") and not star.matches("write_file", "/knowledge/x/a.md")
    assert deep.matches("write_file", "/knowledge/x/y/a.md") and not deep.matches("write_file", "/knowledgebase.md")
    assert everything.matches("write_file", "/AGENTS.md") and everything.matches("write_file", "/user/a/b.md")
    assert parse_rule("write_file(/**/notes.md)", "deny").matches("write_file", "/notes.md")
    assert parse_rule("write_file(/**/notes.md)", "deny").matches("write_file", "/a/b/notes.md")
    assert parse_rule("edit_file(/AGENTS.md)", "ask").spec == "edit_file(/AGENTS.md)"
    assert parse_rule("delete_file(knowledge/?.md)", "deny").pattern == "/knowledge/?.md"


def test_a_rule_is_for_its_own_tool_only() -> None:
    rule = parse_rule("edit_file(/AGENTS.md)", "deny")
    assert rule.matches("edit_file", "/AGENTS.md")
    assert not rule.matches("write_file", "/AGENTS.md") and not rule.matches("delete_file", "/AGENTS.md")
    mcp = parse_rule("mcp__time__*", "allow")
    assert mcp.matches("mcp__time__now", None) and not mcp.matches("mcp__files__read", None)
    assert not mcp.matches("write_file", "/mcp__time__x")


def test_an_mcp_server_alone_is_every_tool_of_that_server() -> None:
    """Claude Code's shape: ``mcp__time`` covers every tool of the server ``time``, not a tool
    literally named ``mcp__time`` (which no server offers: such a rule would never match)."""
    server = parse_rule("mcp__time", "deny")
    assert server.matches("mcp__time__now", None) and server.matches("mcp__time__convert", None)
    assert not server.matches("mcp__timer__now", None) and not server.matches("mcp__files__read", None)
    assert not server.matches("write_file", "/x")
    assert decide(rules("mcp__time deny", "mcp__time__now allow"), "mcp__time__now", None).number == 1


def test_first_match_wins_and_no_match_is_the_default() -> None:
    book = rules("edit_file(/AGENTS.md) deny", "edit_file(**) allow", "write_file(/knowledge/**) queue")
    assert decide(book, "edit_file", "/AGENTS.md").action == "deny"
    assert decide(book, "edit_file", "/AGENTS.md").number == 1
    found = decide(book, "edit_file", "/knowledge/a.md")
    assert (found.action, found.number, found.describe()) == ("allow", 2, "rule 2 (edit_file(/**) allow)")
    assert decide(book, "write_file", "/knowledge/a.md").action == "queue"
    assert decide(book, "delete_file", "/knowledge/a.md").describe() == "no rule (default: ask)"
    reversed_book = rules("edit_file(**) allow", "edit_file(/AGENTS.md) deny")
    assert decide(reversed_book, "edit_file", "/AGENTS.md").action == "allow"


@pytest.mark.parametrize(("spec", "action", "why"), [
    ("bogus(/x)", "allow", "unknown tool 'bogus'"),
    ("write_file(/x)", "maybe", "unknown action 'maybe'"),
    ("mcp__time__now(/x)", "allow", "takes no path pattern"),
    ("write_file()", "allow", "empty path pattern"),
    ("write_file(/../x)", "allow", "goes above the root"),
    ("write_file(/a", "allow", "cannot read rule"),
    ("mcp__", "allow", "names no MCP server"),
])
def test_bad_rules_say_what_is_wrong(spec: str, action: str, why: str) -> None:
    with pytest.raises(RuleError, match=why.replace("(", r"\(")):
        parse_rule(spec, action)


# -- a pattern is kept in the form it is matched in (issue #36) -------------------------------------

# Each was accepted and stored as typed, then matched against normalised paths: never.
SPELLINGS = ["write_file(/knowledge//**)", "write_file(/knowledge/./**)", "write_file(/x/../knowledge/**)",
             "write_file(knowledge/**)", "write_file( /knowledge/** )", "write_file(/knowledge/**)"]


@pytest.mark.parametrize("spec", SPELLINGS)
def test_a_pattern_is_kept_in_the_form_it_is_matched_in(spec: str) -> None:
    rule = parse_rule(spec, "deny")
    assert rule.pattern == "/knowledge/**" and str(rule) == "write_file(/knowledge/**) deny"
    assert rule.matches("write_file", "/knowledge/a.md") and rule.matches("write_file", "/knowledge/x/y.md")
    assert parse_rule("write_file(/cafe\u0301/**)", "deny").pattern == "/caf\u00e9/**"  # NFC, as paths are


@pytest.mark.parametrize(("spec", "why"), [
    ("write_file(/knowledge/**/)", "ends with a slash"),
    ("write_file(/knowledge/)", "ends with a slash"),
    ("write_file(/**/../secret.md)", "after the wildcard"),
    ("write_file(/knowledge/*/..)", "after the wildcard"),
    ("write_file(/x/..)", "names the root"),
    ("write_file(/x/../../knowledge/**)", "goes above the root"),
    ("write_file(/knowledge\u2215**)", "U+2215"),
])
def test_patterns_that_could_never_mean_what_they_say_are_refused(spec: str, why: str) -> None:
    with pytest.raises(RuleError, match=why.replace("+", r"\+")) as err:
        parse_rule(spec, "deny")
    assert "\n" not in str(err.value)


def test_every_accepted_spelling_denies_the_model(store: SqlStore) -> None:
    book = RuleBook(store, "a")
    for spec in SPELLINGS:
        assert book.add(spec, "deny") == (1, parse_rule("write_file(/knowledge/**)", "deny"))
        agent, model, approver = make_agent(store, answers=[Decision("approve")])
        model.enqueue_tool_use("write_file", {"file_path": "/knowledge/x.md", "content": "x\n"})
        model.enqueue_text("ok")
        agent.turn("write x")
        result = last_tool_result(model)
        assert result["is_error"] and "refused by approval rule 1" in str(result["content"]), spec
        assert approver.asked == [] and not store.exists(S, "/knowledge/x.md"), spec
        book.remove(1)


def test_rules_stored_before_are_read_in_the_form_they_are_matched_in(store: SqlStore) -> None:
    # What earlier versions stored as typed: each now means what it says.
    store.write(SETTINGS, RULES_PATH, "write_file(/knowledge//**) deny\nedit_file(/notes/**/) deny\n")
    book = RuleBook(store, "a")
    assert [str(r) for r in book.rules()] == ["write_file(/knowledge/**) deny", "edit_file(/notes/**) deny"]
    assert book.decide("write_file", "/knowledge/a.md").action == "deny"
    assert book.decide("edit_file", "/notes/a/b.md").action == "deny"


# -- where they live: no tool can change them ------------------------------------------------------


def test_rules_are_versioned_revisions_outside_every_view(store: SqlStore) -> None:
    book = RuleBook(store, "a")
    assert book.add("write_file(/knowledge/**)", "allow") == (1, parse_rule("write_file(/knowledge/**)", "allow"))
    book.add("delete_file(**)", "deny")
    assert [str(r) for r in book.rules()] == ["write_file(/knowledge/**) allow", "delete_file(/**) deny"]
    book.remove(1)
    assert [str(r) for r in book.rules()] == ["delete_file(/**) deny"]
    assert sorted(h.version for h in store.history(SETTINGS, RULES_PATH)) == [1, 2, 3]
    with pytest.raises(RuleError, match="rules 1 to 1"):
        book.remove(2)
    # Two writers that read the same version: the second is refused, nothing is lost.
    stale = store.prepare_write(SETTINGS, RULES_PATH, "write_file(**) allow\n", expected_version=3)
    book.add("edit_file(**)", "ask")
    with pytest.raises(StaleVersion):
        store.commit(stale, author="cli", approval="cli")
    assert [str(r) for r in book.rules()] == ["delete_file(/**) deny", "edit_file(/**) ask"]


def test_no_memory_tool_can_read_or_change_the_rules(store: SqlStore) -> None:
    book = RuleBook(store, "a")
    book.add("write_file(**)", "deny")
    before = store.read(SETTINGS, RULES_PATH)
    agent, model, approver = make_agent(store, answers=[Decision("approve")] * 10)
    attempts = [
        ("write_file", {"file_path": RULES_PATH, "content": "write_file(**) allow\n"}),
        ("write_file", {"file_path": "/settings/approval.rules", "content": "write_file(**) allow\n"}),
        ("write_file", {"file_path": "/../approval.rules", "content": "write_file(**) allow\n"}),
        ("edit_file", {"file_path": RULES_PATH, "old_string": "deny", "new_string": "allow"}),
        ("delete_file", {"file_path": RULES_PATH}),
        ("read_file", {"file_path": RULES_PATH}),
        ("glob", {"pattern": "**/*.rules"}),
    ]
    for name, args in attempts:
        model.enqueue_tool_use(name, args)
    model.enqueue_text("tried")
    agent.turn("loosen your own rules")
    after = store.read(SETTINGS, RULES_PATH)
    assert (after.version, after.content) == (before.version, before.content)
    assert not store.exists(S, RULES_PATH)  # the agent's own /approval.rules is just a memory file
    assert approver.asked == []  # the rule (write_file deny) refused the writes before anyone was asked
    assert last_tool_result(model)["content"] == "No files found."
    # An MCP client cannot reach them either.
    session = Session(AgentView(store, "a"), "yolo", "client 1", None)
    for name, args in attempts[:5]:
        session.run(name, args)
    assert store.read(SETTINGS, RULES_PATH).version == before.version


# -- honoured by every writer -----------------------------------------------------------------------


def test_chat_says_which_rule_decided_each_edit(store: SqlStore) -> None:
    book = RuleBook(store, "a")
    book.add("write_file(/knowledge/**)", "allow")
    book.add("write_file(/drafts/**)", "queue")
    book.add("delete_file(**)", "deny")
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/knowledge/a.md", "content": "a\n"})
    model.enqueue_tool_use("write_file", {"file_path": "/drafts/b.md", "content": "b\n"})
    model.enqueue_tool_use("delete_file", {"file_path": "/knowledge/a.md"})
    model.enqueue_text("ok")
    stdout = io.StringIO()
    view = AgentView(store, "a", user="tester")
    session = build_session(view, model, PlainUI(io.StringIO("file these\n/approval\n"), stdout, io.StringIO()),
                            threads=ThreadStore(store.engine))
    assert session.run() == 0
    text = stdout.getvalue()
    assert "approval rule 1 (write_file(/knowledge/**) allow): write_file /knowledge/a.md allowed" in text
    assert "approval rule 2 (write_file(/drafts/**) queue): write_file /drafts/b.md queued" in text
    assert "approval rule 3 (delete_file(/**) deny): delete_file /knowledge/a.md denied" in text
    assert "Approve?" not in text  # nothing asked
    assert "  1  write_file(/knowledge/**) allow" in text  # /approval
    assert store.read(S, "/knowledge/a.md").content == "a\n"
    assert store.history(S, "/knowledge/a.md")[-1].approval == "rule"
    [queued] = ProposalStore(store.engine).pending("a")
    assert queued.shown == "/drafts/b.md" and not store.exists(S, "/drafts/b.md")


def test_chat_asks_where_no_rule_matches_and_yolo_overrides(store: SqlStore) -> None:
    RuleBook(store, "a").add("write_file(/knowledge/**)", "deny")
    agent, model, approver = make_agent(store, answers=[Decision("approve")])
    model.enqueue_tool_use("write_file", {"file_path": "/notes.md", "content": "n\n"})
    model.enqueue_text("ok")
    agent.turn("note")
    assert [r.path for r in approver.asked] == ["/notes.md"]  # the default: ask
    yolo, model2, _ = make_agent(store, yolo=True)
    model2.enqueue_tool_use("write_file", {"file_path": "/knowledge/k.md", "content": "k\n"})
    model2.enqueue_text("ok")
    yolo.turn("write k")
    assert store.history(S, "/knowledge/k.md")[-1].approval == "yolo"


SCRIBE = """---
name: scribe
description: Writes notes. Use to file a note.
tools: [write_file]
---
You write notes.
"""


def test_subagents_honour_the_rules(store: SqlStore) -> None:
    store.write(S, "/subagents/scribe.md", SCRIBE)
    RuleBook(store, "a").add("write_file(/secret/**)", "deny")
    agent, model, approver = make_agent(store)
    model.enqueue_tool_use("task", {"subagent": "scribe", "description": "file it"})
    model.enqueue_tool_use("write_file", {"file_path": "/secret/x.md", "content": "x\n"})  # the subagent
    model.enqueue_text("could not")
    model.enqueue_text("done")
    agent.turn("file x")
    child = model.requests[2]["messages"][-1]["content"][0]
    assert child["is_error"] and "refused by approval rule 1 (write_file(/secret/**) deny)" in child["content"]
    assert approver.asked == [] and not store.exists(S, "/secret/x.md")


@pytest.mark.parametrize("mode", ["client", "queue"])
def test_mcp_serve_honours_the_rules(store: SqlStore, mode: str) -> None:
    book = RuleBook(store, "a")
    book.add("write_file(/knowledge/**)", "allow")
    book.add("edit_file(/AGENTS.md)", "queue")
    book.add("delete_file(**)", "deny")
    store.write(S, "/AGENTS.md", "# A\n")
    queue = ProposalStore(store.engine)
    session = Session(AgentView(store, "a"), mode, "client 1", queue if mode == "queue" else None)  # type: ignore[arg-type]
    assert not session.run("write_file", {"file_path": "/knowledge/k.md", "content": "k\n"}).is_error
    assert store.history(S, "/knowledge/k.md")[-1].approval == "rule"
    session.run("read_file", {"file_path": "/AGENTS.md"})
    queued = session.run("edit_file", {"file_path": "/AGENTS.md", "old_string": "# A", "new_string": "# B"})
    assert "Queued for review" in queued.content and store.read(S, "/AGENTS.md").content == "# A\n"
    assert [p.shown for p in queue.pending("a")] == ["/AGENTS.md"]
    denied = session.run("delete_file", {"file_path": "/knowledge/k.md"})
    assert denied.is_error and "refused by approval rule 3" in denied.content
    # No rule: the server's own mode (the client asked its user, or the review queue).
    free = session.run("write_file", {"file_path": "/other.md", "content": "o\n"})
    assert ("Queued" in free.content) == (mode == "queue")


# -- the command line -------------------------------------------------------------------------------


def test_approval_add_list_rm_through_the_command(chat_env: None) -> None:
    assert run("init", "notes").returncode == 0
    p = run("approval", "add", "notes", "write_file(/knowledge/**)", "allow")
    assert p.returncode == 0 and "rule 1: write_file(/knowledge/**) allow" in out(p)
    assert run("approval", "add", "notes", "delete_file(**)", "deny").returncode == 0
    p = run("approval", "list", "notes")
    assert out(p).splitlines()[:2] == ["  1  write_file(/knowledge/**) allow", "  2  delete_file(/**) deny"]
    bad = run("approval", "add", "notes", "rm_file(/x)", "allow")
    assert bad.returncode == 2 and "unknown tool 'rm_file'" in err(bad) and "Traceback" not in err(bad)
    bad = run("approval", "rm", "notes", "7")
    assert bad.returncode == 2 and "rules 1 to 2" in err(bad)
    p = run("approval", "rm", "notes", "1")
    assert p.returncode == 0 and "removed rule 1: write_file(/knowledge/**) allow" in out(p)
    assert out(run("approval", "list", "notes")).splitlines()[0] == "  1  delete_file(/**) deny"
    assert run("approval", "list", "nobody").returncode == 1
    # A pattern is stored, listed and matched in its normalised form, or refused in one line.
    p = run("approval", "add", "notes", "write_file(/x/../knowledge//**)", "deny")
    assert p.returncode == 0 and "rule 2: write_file(/knowledge/**) deny" in out(p)
    assert "written as 'write_file(/x/../knowledge//**)'" in out(p)
    assert out(run("approval", "list", "notes")).splitlines()[1] == "  2  write_file(/knowledge/**) deny"
    bad = run("approval", "add", "notes", "write_file(/knowledge/**/)", "deny")
    assert bad.returncode == 2 and "ends with a slash" in err(bad) and "Traceback" not in err(bad)
    assert len(out(run("approval", "list", "notes")).splitlines()) == 3  # two rules and the footer


# -- export carries them ----------------------------------------------------------------------------

MEMORY = {
    "/AGENTS.md": "# Rules\n",
    "/tools.json": json.dumps({
        "mcp_servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}},
        "tools": [{"server": "time", "name": "now"}, {"server": "time", "name": "convert", "approval": True}],
    }) + "\n",
}
RULES = ["mcp__time__now ask", "mcp__time__convert allow", "write_file(/knowledge/**) allow",
         "edit_file(/AGENTS.md) queue", "delete_file(**) deny"]


def export_with(fmt: str) -> tuple[dict[str, bytes], list[str]]:
    result = export_agent(FORMATS[fmt], MEMORY, ExportOptions(agent="a", rules=rules(*RULES)))
    return result.files, [str(n) for n in result.notes]


def test_export_carries_rules_to_claude_code_permissions() -> None:
    files, notes = export_with("claude-code")
    permissions = json.loads(files[".claude/settings.json"])["permissions"]
    assert permissions == {"allow": ["mcp__time__convert", "Edit(/knowledge/**)"],
                           "ask": ["mcp__time__now", "Edit(/AGENTS.md)"]}  # each tool in one list
    assert any("rule 4 (edit_file(/AGENTS.md) queue): carried as ask" in n for n in notes)
    assert any("rule 5 (delete_file(/**) deny): not carried" in n for n in notes)
    assert any("Claude Code applies deny, then ask, then allow" in n for n in notes)


def test_export_carries_rules_to_opencode_and_codex_and_lists_the_rest() -> None:
    files, notes = export_with("opencode")
    permission = json.loads(files["opencode.json"])["permission"]
    assert permission["time_now"] == "ask" and permission["time_convert"] == "allow"
    assert "edit" not in permission
    assert sum("not carried" in n for n in notes) == 3  # two path rules and the delete
    files, notes = export_with("codex")
    config = tomllib.loads(files[".codex/config.toml"].decode())
    assert config["mcp_servers"]["time"]["tools"]["now"]["approval_mode"] == "prompt"
    assert sum("not carried: Codex approves per session" in n for n in notes) == 4
    files, notes = export_with("folder")
    assert any("5 rule(s) not carried" in n for n in notes)


def test_export_carries_a_whole_server_rule() -> None:
    result = export_agent(FORMATS["opencode"], MEMORY, ExportOptions(agent="a", rules=rules("mcp__time deny")))
    assert json.loads(result.files["opencode.json"])["permission"]["time_*"] == "deny"
    result = export_agent(FORMATS["claude-code"], MEMORY, ExportOptions(agent="a", rules=rules("mcp__time deny")))
    assert json.loads(result.files[".claude/settings.json"])["permissions"]["deny"] == ["mcp__time"]


def test_export_of_a_rule_without_a_pattern_is_every_edit() -> None:
    # write_file with no (pattern) is every path: Claude Code's bare Edit, OpenCode's edit.
    book = rules("write_file allow", "delete_file(**) deny")
    result = export_agent(FORMATS["claude-code"], MEMORY, ExportOptions(agent="a", rules=book))
    permissions = json.loads(result.files[".claude/settings.json"])["permissions"]
    assert [n for n in permissions["allow"] if n.startswith("Edit")] == ["Edit"]
    # delete_file is not carried, so it cannot outrank the write rule there: no order note.
    assert not any("order:" in str(n) for n in result.notes)
    result = export_agent(FORMATS["opencode"], MEMORY, ExportOptions(agent="a", rules=book))
    assert json.loads(result.files["opencode.json"])["permission"]["edit"] == "allow"


def test_chat_yolo_says_it_turns_the_rules_off(store: SqlStore) -> None:
    RuleBook(store, "a").add("write_file(**)", "deny")
    model = ScriptedModel()
    model.enqueue_tool_use("write_file", {"file_path": "/n.md", "content": "n\n"})
    model.enqueue_text("ok")
    stdout = io.StringIO()
    session = build_session(AgentView(store, "a", user="tester"), model,
                            PlainUI(io.StringIO("/yolo\nwrite n\n/approval\n"), stdout, io.StringIO()),
                            threads=ThreadStore(store.engine))
    assert session.run() == 0
    text = stdout.getvalue()
    assert "the approval rules are off too" in text and "yolo is on: the rules are not applied" in text
    assert "denied" not in text and store.history(S, "/n.md")[-1].approval == "yolo"
