"""search_memory and `memagent fs search`: ranked full-text search over memory and conversations.

On SQLite (FTS5, bm25) and Postgres (tsvector, ts_rank): the file a query is about
ranks first on a seeded corpus; the index follows every write path at once; no
query (FTS syntax, quotes, huge text) crashes or hangs.
"""

from __future__ import annotations

import time

import pytest

from memagent.agent.tools import ToolBox
from memagent.agent.tools.search import SearchTools
from memagent.vfs import SqlStore
from memagent.vfs.backends import postgres
from memagent.vfs.backends.sqlite import fts5_match
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from memagent.vfs.search.lexical import MAX_TERMS, STOP_WORDS, searched, snippet, terms
from tests.cli_helpers import err, out, run

CORPUS: dict[str, str] = {
    "/AGENTS.md": "# Preferences\n- Answer in British English.\n- Use bullet points for summaries.\n",
    "/skills/meeting-notes.md": (
        "---\nname: meeting-notes\ndescription: Summarise meeting notes and transcripts into decisions and "
        "action items with owners.\n---\n# Meeting notes\n1. List decisions.\n2. Action items with owner and "
        "due date.\n"),
    "/skills/draft-reply.md": (
        "---\nname: draft-reply\ndescription: Draft a reply to an email in the user's voice.\n---\n"
        "Keep replies short, polite, and sign off with Best.\n"),
    "/skills/triage-inbox.md": (
        "---\nname: triage-inbox\ndescription: Sort the inbox into act, reply, read later and ignore.\n---\n"
        "Newsletters go to read later. Invoices go to act.\n"),
    "/skills/cite-sources.md": (
        "---\nname: cite-sources\ndescription: Cite sources with links for every factual claim.\n---\n"
        "Every claim gets a footnote with the URL and access date.\n"),
    "/knowledge/people/alice.md": "Alice Martin is the head of finance. She prefers spreadsheets over slides.\n",
    "/knowledge/people/bob.md": "Bob Okafor plays chess on Tuesdays and is allergic to peanuts.\n",
    "/knowledge/people/carol.md": "Carol is our designer; she owns the brand guidelines and the logo files.\n",
    "/knowledge/projects/apollo.md": "Project Apollo migrates the billing database to Postgres by March.\n",
    "/knowledge/projects/zephyr.md": "Zephyr is the mobile app rewrite in Kotlin and Swift.\n",
    "/knowledge/travel.md": "Flights: prefer aisle seats, no red-eye flights, Star Alliance for miles.\n",
    "/knowledge/recipes/sourdough.md": "Sourdough: feed the starter twice a day; bake at 250 degrees with steam.\n",
    "/knowledge/health.md": "Dentist appointment every six months; the clinic is on Baker Street.\n",
    "/knowledge/garden.md": "Tomatoes need watering every morning in July; prune the roses in February.\n",
    "/knowledge/car.md": "The car needs new winter tyres in November; the garage is Smith Motors.\n",
    "/knowledge/finance/taxes.md": "File the tax return before 31 January; keep receipts for deductions.\n",
    "/knowledge/finance/budget.md": "Monthly budget: rent 1200, groceries 400, savings 500.\n",
    "/knowledge/tools/git.md": "Use rebase for feature branches; never force-push to main.\n",
    "/knowledge/tools/docker.md": "Docker images are pushed to the internal registry; tag them with the commit.\n",
    "/knowledge/pets.md": "The cat Miso eats wet food at seven; the vet is Dr Patel.\n",
    "/knowledge/music.md": "Favourite composers: Bach and Debussy; piano practice thirty minutes daily.\n",
    "/knowledge/books.md": "Reading list: Middlemarch, The Dispossessed, Thinking Fast and Slow.\n",
    "/knowledge/languages.md": "Learning Japanese: kanji flashcards every evening, JLPT N3 in December.\n",
    "/knowledge/running.md": "Marathon training: long run on Sundays, intervals on Wednesdays.\n",
    "/knowledge/home.md": "The boiler service is due in October; the plumber is called Dave.\n",
}

# (query, the file it is about)
QUERIES: list[tuple[str, str]] = [
    ("meeting action items", "/skills/meeting-notes.md"),
    ("how should I reply to an email", "/skills/draft-reply.md"),
    ("sort my inbox", "/skills/triage-inbox.md"),
    ("citations and sources for claims", "/skills/cite-sources.md"),
    ("head of finance", "/knowledge/people/alice.md"),
    ("chess", "/knowledge/people/bob.md"),
    ("peanut allergy", "/knowledge/people/bob.md"),
    ("logo and brand guidelines", "/knowledge/people/carol.md"),
    ("billing database migration", "/knowledge/projects/apollo.md"),
    ("Kotlin mobile app", "/knowledge/projects/zephyr.md"),
    ("aisle seat on flights", "/knowledge/travel.md"),
    ("baking bread starter", "/knowledge/recipes/sourdough.md"),
    ("dentist", "/knowledge/health.md"),
    ("watering tomatoes", "/knowledge/garden.md"),
    ("winter tyres", "/knowledge/car.md"),
    ("tax return deadline", "/knowledge/finance/taxes.md"),
    ("groceries budget", "/knowledge/finance/budget.md"),
    ("force push rebase", "/knowledge/tools/git.md"),
    ("docker registry tags", "/knowledge/tools/docker.md"),
    ("cat food vet", "/knowledge/pets.md"),
    ("piano practice", "/knowledge/music.md"),
    ("japanese kanji", "/knowledge/languages.md"),
    ("marathon long run", "/knowledge/running.md"),
    ("boiler plumber", "/knowledge/home.md"),
    ("British English bullet points", "/AGENTS.md"),
]


@pytest.fixture
def view(store: SqlStore) -> AgentView:
    store.bulk_write("agent:a", CORPUS)
    return AgentView(store, "a", user="tester")


def ranked(view: AgentView, query: str, k: int = 10) -> list[str]:
    """The full-text ranking (these tests are about it; tests/test_hybrid_search.py covers the others)."""
    return [h.path for h in view.search(query, k=k, mode="lexical")]


def test_the_file_a_query_is_about_ranks_first(view: AgentView, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(QUERIES) >= 20
    at1 = at3 = 0
    misses = []
    for query, want in QUERIES:
        got = ranked(view, query, 3)
        at1 += bool(got) and got[0] == want
        at3 += want in got
        if not got or got[0] != want:
            misses.append((query, want, got))
    dialect = view.store.engine.dialect.name  # type: ignore[attr-defined]
    with capsys.disabled():
        print(f"\nsearch_memory on {dialect}: hit@1 {at1}/{len(QUERIES)}, hit@3 {at3}/{len(QUERIES)}")
    assert at3 == len(QUERIES), misses
    assert at1 >= len(QUERIES) - 1, misses


def test_hits_carry_a_snippet_and_the_version(view: AgentView) -> None:
    hit = view.search("chess")[0]
    assert hit.path == "/knowledge/people/bob.md" and hit.version == 1
    assert "chess" in hit.snippet and "\n" not in hit.snippet
    assert view.search("zzzqqq", mode="lexical") == []


def test_index_follows_write_edit_move_delete_revert(view: AgentView) -> None:
    view.write("/knowledge/new.md", "The quokka lives on Rottnest Island.\n")
    assert ranked(view, "quokka") == ["/knowledge/new.md"]
    view.edit("/knowledge/new.md", "quokka", "wombat")
    assert ranked(view, "quokka") == [] and ranked(view, "wombat") == ["/knowledge/new.md"]
    view.move("/knowledge/new.md", "/knowledge/animals.md")
    assert ranked(view, "wombat") == ["/knowledge/animals.md"]
    view.delete("/knowledge/animals.md")
    assert ranked(view, "wombat") == []
    view.revert("/knowledge/animals.md", 1)
    assert ranked(view, "wombat") == ["/knowledge/animals.md"]
    view.store.bulk_write("agent:a", {"/knowledge/animals.md": "Only numbats now.\n",
                                      "/knowledge/birds.md": "A kookaburra laughs.\n"})
    assert ranked(view, "wombat") == [] and ranked(view, "numbat") == ["/knowledge/animals.md"]
    assert ranked(view, "kookaburra") == ["/knowledge/birds.md"]


def test_a_refused_write_leaves_the_index_alone(view: AgentView) -> None:
    from memagent.vfs.errors import StaleVersion

    with pytest.raises(StaleVersion):
        view.write("/knowledge/car.md", "Now about bicycles.\n", expected_version=7)
    assert ranked(view, "bicycles") == [] and ranked(view, "tyres")[0] == "/knowledge/car.md"


def test_user_memory_and_conversations_are_searched(store: SqlStore) -> None:
    store.write("user:tester", "/profile.md", "I am vegetarian and live in Lisbon.\n")
    threads = ThreadStore(store.engine)
    tid = threads.create("a", "m")
    threads.append(tid, {"role": "user", "content": [{"type": "text", "text": "Plan a trip to Porto by train"}]})
    threads.append(tid, {"role": "assistant", "content": [{"type": "text", "text": "The Alfa Pendular is fast."}]})
    view = AgentView(store, "a", user="tester")
    assert ranked(view, "vegetarian") == ["/user/profile.md"]
    hits = ranked(view, "Pendular train")
    assert len(hits) == 1 and hits[0].startswith("/conversations/")
    assert [h.path for h in view.search("train", path="/conversations")] == hits
    assert view.search("train", path="/knowledge") == []


HOSTILE = [
    '"', '""', "'", "*", "NEAR(a b)", "a NOT b", "content:secret", "path:/x", "^start", "a OR", "OR AND NOT",
    "(((", ")))", "{x y}", "\\", "%_%", "a' OR '1'='1", "x:y:z", "-a", "+b", "!", "\x00", "é à ü ß", "日本語",
    "🙂🙂", "a" * 10_000, "word " * 50_000, "& | ! <-> :*", "plainto_tsquery('x')", ";DROP TABLE files;",
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_neither_crash_nor_hang(view: AgentView, query: str) -> None:
    started = time.monotonic()
    hits = view.search(query)
    assert time.monotonic() - started < 10  # a generous bound: a hang would fail here
    assert all(h.path.startswith("/") for h in hits)
    assert view.read("/AGENTS.md").version == 1  # nothing changed


def test_query_text_is_bounded_and_quoted() -> None:
    assert len(terms("w" + " w".join(str(i) for i in range(1000)))) == MAX_TERMS
    assert terms("Meeting-notes, meeting NOTES!") == ["meeting", "notes"]
    assert fts5_match(['a"b']) == '"a""b"'
    assert terms('" * NEAR(') == ["near"]
    long_line = "x " * 5000 + "the needle is here " + "y " * 5000
    s = snippet(long_line, ["needle"])
    assert "needle" in s and len(s) <= 170


def test_the_tool_ranks_and_refuses_bad_calls(view: AgentView) -> None:
    box = ToolBox([SearchTools(view)])
    assert box.names() == ["search_memory"]
    result = box.run("search_memory", {"query": "winter tyres", "k": 2})
    assert not result.is_error
    first = result.content.splitlines()[0]
    assert first.startswith("1. /knowledge/car.md")
    assert box.run("search_memory", {"query": "  "}).is_error
    assert box.run("search_memory", {"query": "x", "k": 0}).is_error
    assert box.run("search_memory", {"query": "x", "k": "many"}).is_error
    assert "No memory file or conversation matches" in box.run(
        "search_memory", {"query": "qqqzzz", "mode": "lexical"}).content
    assert box.run("search_memory", {"query": "x", "mode": "fuzzy"}).is_error


def test_a_ranker_can_be_swapped_behind_the_tool(view: AgentView) -> None:
    from memagent.vfs.types import SearchHit

    class Fixed:
        def search(self, query: str, *, k: int = 10, mode: str = "hybrid") -> list[SearchHit]:
            return [SearchHit("/knowledge/pets.md", 0.9, "Miso", 1)]

    result = ToolBox([SearchTools(view, ranker=Fixed())]).run("search_memory", {"query": "anything"})
    assert result.content.startswith("1. /knowledge/pets.md")


def test_fs_search_through_the_command() -> None:
    assert run("init", "demo").returncode == 0
    run("fs", "write", "/knowledge/bob.md", "-a", "demo", stdin="Bob plays chess on Tuesdays.\n")
    run("fs", "write", "/knowledge/ann.md", "-a", "demo", stdin="Ann likes tea.\n")
    p = run("fs", "search", "chess tuesday", "-a", "demo")
    assert p.returncode == 0, err(p)
    lines = out(p).splitlines()
    assert lines[0].startswith("1. /knowledge/bob.md") and "chess" in lines[1]
    assert "/knowledge/ann.md" not in out(p)
    p = run("fs", "search", '"NEAR(*', "--mode", "lexical", "-a", "demo")
    # No match: exit 1, nothing on stdout, the reason on stderr (like fs grep).
    assert p.returncode == 1 and out(p) == "" and "No memory file or conversation matches" in err(p)
    p = run("fs", "search", "tea", "-k", "0", "-a", "demo")
    assert p.returncode == 2


def test_other_agents_files_never_crowd_out_or_leak_into_the_answer(store: SqlStore) -> None:
    store.create_agent("other")
    store.bulk_write("agent:other", {f"/n{i}.md": "walrus walrus walrus\n" for i in range(120)})
    store.write("agent:a", "/mine.md", "one walrus here, among other words\n")
    hits = AgentView(store, "a").search("walrus", k=3)
    assert [h.path for h in hits] == ["/mine.md"]
    assert len(AgentView(store, "other").search("walrus", k=50)) == 50


def test_stop_words_are_not_searched_unless_nothing_else_is_left(view: AgentView) -> None:
    assert searched(terms("how do we handle the billing")) == ["handle", "billing"]
    assert searched(terms("the who")) == ["the", "who"]
    assert {"how", "the", "we", "do"} <= STOP_WORDS
    # "how should I reply to an email" is about replying, not about every file with "to" in it.
    assert ranked(view, "how should I reply to an email", 1) == ["/skills/draft-reply.md"]
    assert ranked(view, "where is the") == ranked(view, "where is the")  # only stop words: still answered


@pytest.fixture
def crowded(store: SqlStore) -> AgentView:
    """More matching files than Postgres ranks exactly (postgres.PG_CANDIDATES)."""
    many = postgres.PG_CANDIDATES + 50
    files = {f"/notes/n{i:03d}.md": f"a walrus note {i}, " + "filler words about other things " * (i % 7 + 1) + "\n"
             for i in range(many)}
    files["/knowledge/walrus.md"] = "Walruses: tusks, whiskers and a walrus colony, " + "more " * 40 + "\n"
    files["/knowledge/arctic.md"] = "The walrus hauls out on Svalbard sea ice in the arctic summer.\n"
    files["/notes/zz-repeat.md"] = "walrus walrus walrus walrus, plain text\n"
    store.bulk_write("agent:a", files)
    return AgentView(store, "a")


def test_among_many_matches_the_path_and_the_most_words_still_rank_first(crowded: AgentView) -> None:
    # The file named after the word, and the short one that repeats it, beat 250 that say it once.
    assert set(ranked(crowded, "walrus", 2)) == {"/knowledge/walrus.md", "/notes/zz-repeat.md"}
    assert ranked(crowded, "walrus svalbard arctic", 1) == ["/knowledge/arctic.md"]
    assert len(crowded.search("walrus", k=50, mode="lexical")) == 50


def test_bounded_ranking_agrees_with_ranking_every_match(crowded: AgentView, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = ["walrus", "walrus svalbard", "walrus note filler", "other things walrus"]
    bounded = {q: crowded.search(q, k=10, mode="lexical") for q in queries}
    # Every match ranked exactly (the backend reads its constant at each search).
    monkeypatch.setattr(postgres, "PG_CANDIDATES", 100_000)
    for q in queries:
        assert crowded.search(q, k=10, mode="lexical") == bounded[q], q


def test_a_search_call_shows_its_query_in_the_chat_line() -> None:
    from memagent.agent.tools import describe_call

    shown = describe_call("search_memory", {"query": "numbered lists", "k": 3})
    assert shown == 'search_memory("numbered lists") {"k": 3}'
    assert describe_call("grep", {"pattern": "tea", "path": "/knowledge"}) == 'grep(tea) {"path": "/knowledge"}'
