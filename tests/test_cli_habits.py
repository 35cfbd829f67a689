"""Commands that work the way a person types them (issue 43: items 3, 4, 5, 8, 12 and parts of 11 and 16).

- The README's first command (``init`` then ``chat``) runs a second time: ``init`` on an
  existing agent says it changed nothing and exits 0, naming the next command.
- ``fs edit PATH "- old" "- new"`` (most memory lines start with "- ") and ``fs grep "- x"``
  take the dash words as arguments; a mistyped option is still refused.
- ``fs diff PATH`` shows the last change and versions may be positional (``fs diff PATH 2 5``),
  as in git; ``fs revert PATH 3`` takes the version after the path.
- ``fs write --append`` adds to a file (the help's quick start uses it); an overwrite says how
  many lines it replaced and how to revert it (item 12).
- A mistyped command names the one meant (``chta`` -> ``chat``, ``search`` -> ``fs search``).
- A scripted chat whose model server refuses the connection (a loopback address nothing listens
  on) fails at once, without retries or a "/retry" hint, and exits 1 (item 8).
"""

from __future__ import annotations

import socket

from tests.cli_helpers import err, out, run


def test_init_twice_is_a_notice_and_the_chain_goes_on() -> None:
    first = run("init", "myagent", "--template", "assistant")
    assert first.returncode == 0, err(first)
    run("fs", "write", "/AGENTS.md", "-a", "myagent", stdin="- taught since\n")
    again = run("init", "myagent", "--template", "assistant")
    assert again.returncode == 0, err(again)
    said = out(again)
    assert "already exists" in said and "init changed nothing" in said and "chat myagent" in said
    # Nothing was overwritten.
    assert out(run("fs", "cat", "/AGENTS.md", "-a", "myagent")) == "- taught since\n"


def test_dash_lines_positional_versions_and_revert() -> None:
    assert run("init", "a").returncode == 0
    assert run("fs", "write", "/notes.md", "-a", "a", stdin="- old line\n- keep\n").returncode == 0
    edited = run("fs", "edit", "/notes.md", "- old line", "- new line", "-a", "a")
    assert edited.returncode == 0, err(edited)
    assert "/notes.md:2:- keep" in out(run("fs", "grep", "- keep", "/", "-n", "-a", "a"))
    typo = run("fs", "edit", "/notes.md", "--expect-versio", "3", "x", "y", "-a", "a")
    assert typo.returncode == 2 and "unexpected extra argument" in err(typo)

    last = run("fs", "diff", "/notes.md", "-a", "a")  # the last change: 1 -> 2
    assert last.returncode == 0, err(last)
    assert "-- old line" in out(last) and "+- new line" in out(last) and "@1" in out(last)
    assert out(run("fs", "diff", "/notes.md", "1", "2", "-a", "a")) == out(last)
    assert out(run("fs", "diff", "/notes.md", "--from", "1", "-a", "a")) == out(last)
    both = run("fs", "diff", "/notes.md", "1", "--to", "2", "-a", "a")
    assert both.returncode == 2 and "not both" in err(both)

    reverted = run("fs", "revert", "/notes.md", "1", "-a", "a")
    assert reverted.returncode == 0 and "now version 3" in out(reverted), err(reverted)
    assert out(run("fs", "cat", "/notes.md", "-a", "a")) == "- old line\n- keep\n"
    unsaid = run("fs", "revert", "/notes.md", "-a", "a")
    assert unsaid.returncode == 2 and "fs revert /notes.md N" in err(unsaid)

    # A missing file names the commands that find one, not the model's tool names (item 11).
    missing = run("fs", "cat", "/nope.md", "-a", "a")
    assert missing.returncode == 1
    assert err(missing) == ("memagent: no file at /nope.md; `memagent fs ls` or `memagent fs glob` finds the "
                            "right path\n")

    assert run("fs", "write", "/one.md", "-a", "a", stdin="x\n").returncode == 0
    single = run("fs", "diff", "/one.md", "-a", "a")
    assert single.returncode == 0 and "one version" in out(single)


def test_a_wrong_command_names_the_one_meant() -> None:
    typo = run("chta")
    assert typo.returncode == 2 and "No such command 'chta'. Did you mean 'chat'?" in err(typo)
    nested = run("search", "meeting notes")
    assert nested.returncode == 2 and "Did you mean 'fs search'?" in err(nested)
    unknown = run("zzz")
    assert unknown.returncode == 2 and "memagent --help` lists the commands" in err(unknown)


def test_write_appends_or_says_what_it_replaced() -> None:
    assert run("init", "a", "--template", "assistant").returncode == 0
    before = out(run("fs", "cat", "/AGENTS.md", "-a", "a"))
    appended = run("fs", "write", "/AGENTS.md", "--append", "-a", "a", stdin="- Use bullet points.\n")
    assert appended.returncode == 0 and "appended to /AGENTS.md (version 2" in out(appended), err(appended)
    assert out(run("fs", "cat", "/AGENTS.md", "-a", "a")) == before + "- Use bullet points.\n"
    appended_new = run("fs", "write", "/new.md", "--append", "-a", "a", stdin="first\n")
    assert "created /new.md (version 1" in out(appended_new)
    stale = run("fs", "write", "/new.md", "--append", "--expect-version", "7", "-a", "a", stdin="x\n")
    assert stale.returncode == 1 and "not 7; nothing was written" in err(stale)
    replaced = run("fs", "write", "/AGENTS.md", "-a", "a", stdin="one line\n")
    was = len(before.splitlines()) + 1
    assert f"replaced {was} lines with 1; `memagent fs revert /AGENTS.md 2` undoes it" in out(replaced)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_scripted_chat_with_no_server_fails_at_once_and_exits_1() -> None:
    assert run("init", "a").returncode == 0
    url = f"http://127.0.0.1:{_closed_port()}"
    for args, env in ((("chat", "a"), {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url}),
                      (("chat", "a", "--model", "openai-compatible/m", "--base-url", f"{url}/v1"),
                       {"OPENAI_API_KEY": "k"})):
        proc = run(*args, stdin="hi\n", env=env)
        said = err(proc)
        assert proc.returncode == 1, said
        assert "the connection was refused (nothing listens there" in said
        # Refused by a loopback address: not retried as if the server were busy, and no
        # "/retry" hint on a pipe.
        assert "retrying" not in said and "/retry" not in said
