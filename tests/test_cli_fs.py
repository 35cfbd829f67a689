"""``memagent init / agents / fs ...`` end to end, as a person runs them."""

from __future__ import annotations

import pytest

from memagent.agent.cli import config, templates
from memagent.vfs import SqlStore, open_store
from memagent.vfs.db import HEAD
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import err, out, run

AGENTS = "# Rules\n- Use bullet points.\n"


def init_agent(name: str) -> SqlStore:
    """What `memagent init NAME` makes (the default template), through the library: the
    set-up of the tests below, not what they test (test_round_trip_on_fresh_home runs
    `memagent init` itself). Each `memagent` process costs most of a second; the caller
    closes the store."""
    store = open_store(config.db_url())
    store.create_agent(name, templates.files(templates.DEFAULT_TEMPLATE))
    return store


def test_round_trip_on_fresh_home() -> None:
    p = run("init", "demo")
    assert p.returncode == 0 and "created agent 'demo'" in out(p)
    assert out(run("agents")) == "demo  (1 file)\n"

    p = run("fs", "write", "/AGENTS.md", "--agent", "demo", stdin=AGENTS)
    assert p.returncode == 0, err(p)
    lines = len(AGENTS.splitlines())
    assert out(p) == (f"wrote /AGENTS.md (version 2, {len(AGENTS)} bytes; replaced 0 lines with {lines}; "
                      "`memagent fs revert /AGENTS.md 1` undoes it)\n")
    assert run("fs", "cat", "/AGENTS.md", "-a", "demo").stdout == AGENTS.encode()

    p = run("fs", "edit", "/AGENTS.md", "bullet points", "short bullet points", "-a", "demo")
    assert out(p) == "edited /AGENTS.md (version 3)\n"
    assert out(run("fs", "grep", "bullet", "-a", "demo")) == "/AGENTS.md:2:- Use short bullet points.\n"
    assert out(run("fs", "grep", "-l", "Rules", "-a", "demo")) == "/AGENTS.md\n"
    # Like grep: no match is exit 1 with nothing on stdout (issue 15).
    nomatch = run("fs", "grep", "zebra", "-a", "demo")
    assert (nomatch.returncode, out(nomatch)) == (1, "")

    run("fs", "write", "/knowledge/people/ann.md", "-a", "demo", stdin="Ann likes tea\n")
    assert out(run("fs", "glob", "**/*.md", "-a", "demo")) == "/AGENTS.md\n/knowledge/people/ann.md\n"
    assert out(run("fs", "ls", "-a", "demo")) == "AGENTS.md  (35 B)\nknowledge/  (1 file)\n"

    header, *log = out(run("fs", "log", "/AGENTS.md", "-a", "demo")).splitlines()
    assert header.split() == ["version", "date", "author", "approval", "size", "origin", "reason"]
    assert [line.split()[0] for line in log] == ["v3", "v2", "v1"]
    assert "cli" in log[0] and "UTC" in log[0]

    p = run("fs", "rm", "/AGENTS.md", "-a", "demo")
    assert "deleted /AGENTS.md (version 4)" in out(p)
    p = run("fs", "cat", "/AGENTS.md", "-a", "demo")
    assert p.returncode == 1 and "was deleted" in err(p)

    p = run("fs", "revert", "/AGENTS.md", "--to", "2", "-a", "demo")
    assert out(p) == "reverted /AGENTS.md to version 2 (now version 5)\n"
    assert run("fs", "cat", "/AGENTS.md", "-a", "demo").stdout == AGENTS.encode()

    diff = out(run("fs", "diff", "/AGENTS.md", "--from", "2", "--to", "3", "-a", "demo"))
    assert "-- Use bullet points." in diff and "+- Use short bullet points." in diff


def test_agent_from_environment() -> None:
    init_agent("envy").close()
    p = run("fs", "ls", env={"MEMAGENT_AGENT": "envy"})
    assert p.returncode == 0 and "AGENTS.md" in out(p)


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (("fs", "cat", "../../etc/passwd"), None, "goes above the root"),
        (("fs", "cat", "/a/../../b"), None, "goes above the root"),
        (("fs", "cat", "/a\x01b"), None, "control character"),
        (("fs", "cat", "/" + "x" * 2000), None, "at most 255 bytes"),
        (("fs", "cat", "/" + "/".join(["y" * 200] * 10)), None, "longer than 1024 bytes"),
        (("fs", "write", "/x.md"), b"\xff\xfeabc", "not UTF-8"),
        (("fs", "cat", "/missing.md"), None, "no file at /missing.md"),
        (("fs", "edit", "/AGENTS.md", "absent", "x"), None, "0 matches"),
        (("fs", "edit", "/AGENTS.md", "apples", "x"), None, "appears 2 times"),
        (("fs", "revert", "/AGENTS.md", "--to", "7"), None, "has no version 7"),
        (("fs", "write", "/AGENTS.md", "--expect-version", "1"), "new", "changed since you read it"),
    ],
)
def test_bad_input_one_line_nothing_changed(args: tuple[str, ...], stdin: bytes | str | None,
                                            message: str) -> None:
    # The bad command runs through the real CLI; the set-up and the "nothing changed" checks
    # go through the library (the same history and paths `fs log` and `fs glob` print), so
    # each case starts one `memagent` process instead of six.
    store = init_agent("demo")
    try:
        view = AgentView(store, "demo", user=config.user_id())  # as the command sees it
        view.write("/AGENTS.md", "apples and apples\n")
        before = view.history("/AGENTS.md")
        p = run(*args, "--agent", "demo", stdin=stdin)
        assert p.returncode == 1
        lines = err(p).splitlines()
        assert len(lines) == 1 and lines[0].startswith("memagent: ") and message in lines[0]
        assert "Traceback" not in err(p)
        assert view.history("/AGENTS.md") == before
        assert view.read("/AGENTS.md").content == "apples and apples\n"
        assert view.glob("**") == ["/AGENTS.md"]
    finally:
        store.close()


def test_unknown_agent() -> None:
    p = run("fs", "ls", "--agent", "ghost")
    assert p.returncode == 1
    assert err(p) == (
        "memagent: no agent named 'ghost'; create it with `memagent init ghost` "
        "or list agents with `memagent agents`\n"
    )


def test_unreachable_postgres() -> None:
    p = run("--db", "postgresql+psycopg://nobody@127.0.0.1:1/none", "agents")
    assert p.returncode == 1 and len(err(p).splitlines()) == 1
    assert "cannot open the database" in err(p) and "Traceback" not in err(p)


def test_bad_db_url() -> None:
    p = run("--db", "not a url", "agents")
    assert p.returncode == 1 and "is not a SQLAlchemy URL" in err(p)


def test_usage_error_exits_2() -> None:
    p = run("fs", "revert", "/AGENTS.md")
    assert p.returncode == 2 and "--to" in err(p)


def test_db_upgrade() -> None:
    p = run("db", "upgrade")
    assert p.returncode == 0 and out(p) == f"database upgraded from empty to {HEAD}\n"
    assert out(run("db", "upgrade")) == f"database already at revision {HEAD}\n"


def test_glob_with_an_absolute_pattern_naming_a_mount_matches_inside_it() -> None:
    # `fs glob '/user/*.md'` read as a path from / (as '/knowledge/*.md' is) found nothing,
    # while `fs glob '*.md' /user` did; the same for /conversations/ and /org/.
    store = init_agent("demo")
    ann = AgentView(store, "demo", user="ann")
    ann.write("/user/prefs.md", "Likes tea.\n")
    ann.write("/knowledge/tea.md", "Green tea.\n")
    store.close()
    env = {"MEMAGENT_USER": "ann"}
    assert out(run("fs", "glob", "/user/*.md", "-a", "demo", env=env)) == "/user/prefs.md\n"
    assert out(run("fs", "glob", "/knowledge/*.md", "-a", "demo", env=env)) == "/knowledge/tea.md\n"
    assert out(run("fs", "glob", "/**/*.md", "-a", "demo", env=env)) == (
        "/AGENTS.md\n/knowledge/tea.md\n/user/prefs.md\n")


def test_an_unknown_agent_whose_name_init_would_refuse_is_not_suggested_to_init() -> None:
    # `memagent export 'My Agent' out` said "create it with `memagent init My Agent`", which fails.
    for db_exists in (False, True):
        if db_exists:
            init_agent("demo").close()
        p = run("fs", "ls", "-a", "My Agent")
        assert p.returncode == 1 and len(err(p).splitlines()) == 1
        assert "memagent init" not in err(p) and "agent names are 1-64 characters" in err(p), err(p)
    p = run("fs", "ls", "-a", "other")
    assert "create it with `memagent init other`" in err(p)
