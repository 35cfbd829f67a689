"""Recall by meaning (issue 26): vectors kept in step with the files, the three search
modes, switching embedders, and the embedders themselves.

On SQLite and Postgres: after any mix of writes, edits, moves, deletes, reverts and
imports, the vectors of the current model are exactly the live files at their
current versions, chunk for chunk; a paraphrase finds its file by meaning where the
words find nothing; switching embedders re-embeds. The OpenAI-compatible embedder is
the real ``openai`` SDK against ``bench/fake_openai_api.py``; wordllama loads with
no network.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from bench.fake_openai_api import FakeOpenAIAPI
from bench.search_quality_set import NOTES, QUERIES, check
from memagent.agent.tools import ToolBox
from memagent.agent.tools.search import SearchTools
from memagent.vfs import SqlStore
from memagent.vfs.embeddings import chunks, registry
from memagent.vfs.embeddings.base import EmbedderError
from memagent.vfs.paths import scope_name
from memagent.vfs.records.threads import ThreadStore
from memagent.vfs.scopes import AgentView
from tests.cli_helpers import err, out, run

S = scope_name("agent", "a")
WORDS = ["garden", "tomatoes", "roses", "river", "bicycle", "piano", "chess", "coffee", "invoice", "budget",
         "travel", "train", "dentist", "teeth", "kitten", "cat", "dog", "weather", "rain", "winter",
         "summer", "holiday", "beach", "mountain", "book", "novel", "kotlin", "swift", "database",
         "postgres", "meeting", "notes", "bullets", "summary", "email", "reply", "deadline"]


def _vectors(store: SqlStore) -> dict[tuple[str, str], tuple[int, int]]:
    """(scope, path) -> (version embedded, chunks) for the current model's vectors."""
    model = store.vectors.embedder.model
    with store.engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT f.scope, f.path, e.version, count(*) AS n FROM embeddings AS e "
            "JOIN files AS f ON f.id = e.file_id WHERE e.model = :m GROUP BY f.scope, f.path, e.version"),
            {"m": model}).all()
        others = conn.execute(text("SELECT count(*) FROM embeddings WHERE model <> :m"), {"m": model}).scalar()
    assert others == 0, "vectors of another model are kept"
    found = {(r.scope, r.path): (r.version, r.n) for r in rows}
    assert len(found) == len({k for k in found}), "a file has vectors of two versions"
    return found


def _expected(store: SqlStore) -> dict[tuple[str, str], tuple[int, int]]:
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT scope, path, version, content FROM files WHERE content IS NOT NULL")).all()
    return {(r.scope, r.path): (r.version, len(chunks.spans(r.content))) for r in rows}


def _pending(store: SqlStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM embedding_pending")).scalar() or 0)


def _text(rng: random.Random, lines: int = 3) -> str:
    return "".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) + "\n"
                   for _ in range(lines))


@pytest.mark.parametrize("seed", [1, 2])
def test_vectors_follow_every_kind_of_change(store: SqlStore, seed: int) -> None:
    rng = random.Random(seed)
    view = AgentView(store, "a")
    live: dict[str, int] = {}  # path -> versions written (for reverts)
    gone: list[str] = []
    for step in range(40):
        op = rng.choice(["write", "write", "edit", "move", "delete", "revert", "import", "long"])
        if op in ("write", "long") or not live:
            path = f"/notes/n{rng.randint(0, 12)}.md"
            content = _text(rng, 200 if op == "long" else rng.randint(1, 4))  # long: several chunks
            view.write(path, content)
            live[path] = view.stat(path).version
        elif op == "edit":
            path = rng.choice(sorted(live))
            first = view.read(path).content.split()[0]
            view.edit(path, first, rng.choice(WORDS), replace_all=True)
        elif op == "move":
            src = rng.choice(sorted(live))
            dst = f"/moved/m{step}.md"
            view.move(src, dst)
            live.pop(src)
            live[dst] = 1
            gone.append(src)
        elif op == "delete":
            path = rng.choice(sorted(live))
            view.delete(path)
            live.pop(path)
            gone.append(path)
        elif op == "revert" and gone:
            path = gone.pop(rng.randrange(len(gone)))
            view.revert(path, 1)
            live[path] = 1
        elif op == "import":
            batch = {f"/imported/i{rng.randint(0, 5)}.md": _text(rng) for _ in range(3)}
            store.bulk_write(S, batch)
            live.update(dict.fromkeys(batch, 1))
        if step % 4 == 0 or step == 39:
            store.vectors.sync()
            assert _vectors(store) == _expected(store), (seed, step, op)
            assert _pending(store) == 0
            # Ranking answers only live files at their current versions.
            for hit in store.search([S], rng.choice(WORDS), k=50, mode="semantic"):
                assert (S, hit.path) in _expected(store) and hit.version == _expected(store)[(S, hit.path)][0]


def test_a_search_embeds_what_was_written_and_the_merge_thread_keeps_up(store: SqlStore) -> None:
    view = AgentView(store, "a")
    view.write("/preferences/meeting-notes.md", "Format notes as bullets: decisions first, then actions.\n")
    assert _pending(store) == 1  # the write only noted it
    assert [h.path for h in view.search("how do I like my minutes summarised?", mode="semantic")][:1] == [
        "/preferences/meeting-notes.md"]
    assert _pending(store) == 0
    # The model is loaded now: the background merge embeds later writes by itself.
    done = threading.Event()
    for i in range(3):
        view.write(f"/knowledge/k{i}.md", f"Kitten number {i} likes wet food.\n")
    for _ in range(2000):  # waits on the state the thread produces, not on time
        if _pending(store) == 0:
            done.set()
            break
        done.wait(0.01)
    assert done.is_set(), "the background merge did not embed the noted files"
    assert _vectors(store) == _expected(store)


def test_a_paraphrase_is_found_by_meaning_not_by_words(store: SqlStore) -> None:
    store.bulk_write(S, NOTES)
    view = AgentView(store, "a")
    query = "which espresso drink should I order"
    assert "/preferences/coffee.md" not in [h.path for h in view.search(query, mode="lexical")]
    for mode in ("semantic", "hybrid"):
        hits = view.search(query, k=3, mode=mode)  # type: ignore[arg-type]
        assert "/preferences/coffee.md" in [h.path for h in hits], mode
        assert all("\n" not in h.snippet and h.snippet for h in hits)
    # Words still win in hybrid when the query is the file's own words.
    assert view.search("oat milk flat white", k=1)[0].path == "/preferences/coffee.md"


def test_the_labelled_set_keeps_its_own_rules() -> None:
    check()
    assert len(QUERIES) >= 50


def test_conversations_are_searched_by_meaning(store: SqlStore) -> None:
    threads = ThreadStore(store.engine)
    tid = threads.create("a", "m")
    threads.append(tid, {"role": "user", "content": [{"type": "text", "text": "Plan a trip to Porto by train"}]})
    view = AgentView(store, "a")
    hits = view.search("railway journey to Portugal", mode="hybrid")
    assert hits and hits[0].path.startswith("/conversations/")


def test_switching_embedders_re_embeds(store: SqlStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.bulk_write(S, {"/a.md": "chess on tuesdays\n", "/b.md": "tomatoes need water\n"})
    store.vectors.sync()
    first = store.vectors.embedder.model
    assert first == "wordllama/l2_supercat" and len(_vectors(store)) == 2
    with FakeOpenAIAPI() as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        fake = registry.build("openai-compatible/fake-embed")
        store.vectors.use(fake)
        hits = store.search([S], "chess tuesdays", mode="semantic")
        assert hits[0].path == "/a.md"
        assert _vectors(store) == _expected(store)  # every file again, under the new model only
        asked = [r for r in api.requests if r.get("model") == "fake-embed"]
        assert asked and any("chess on tuesdays" in " ".join(r["input"]) for r in asked)
    store.vectors.use(registry.build("wordllama"))
    store.vectors.sync()
    assert _vectors(store) == _expected(store)


def test_reindex_rebuilds_every_vector(store: SqlStore) -> None:
    store.bulk_write(S, {"/a.md": "chess\n", "/b.md": "roses\n"})
    store.vectors.sync()
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM embeddings WHERE chunk = 0 AND file_id = (SELECT min(id) FROM files)"))
    report = store.reindex_embeddings()
    assert report.files == len(_expected(store)) and _vectors(store) == _expected(store)


def test_the_tool_takes_a_mode(store: SqlStore) -> None:
    store.bulk_write(S, NOTES)
    box = ToolBox([SearchTools(AgentView(store, "a"))])
    result = box.run("search_memory", {"query": "what does my kitten eat", "mode": "semantic", "k": 3})
    assert not result.is_error and "/home/pets.md" in result.content
    bad = box.run("search_memory", {"query": "x", "mode": "vector"})
    assert bad.is_error and "lexical, semantic, hybrid" in bad.content


def test_hybrid_falls_back_to_words_when_the_embedder_is_down(store: SqlStore,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # An embeddings server that is not running: hybrid (the default) still finds by words
    # and says why; semantic, asked for, fails with the embedder's line.
    monkeypatch.setenv("MEMAGENT_EMBEDDER", "openai-compatible/e")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    store.bulk_write(S, NOTES)
    box = ToolBox([SearchTools(AgentView(store, "a"))])
    word = NOTES["/home/pets.md"].split()[2]
    result = box.run("search_memory", {"query": word})
    assert not result.is_error and "/home/pets.md" in result.content
    assert result.content.startswith("(search by meaning is unavailable, so these are matches by words only")
    semantic = box.run("search_memory", {"query": word, "mode": "semantic"})
    assert semantic.is_error and "embeddings endpoint" in semantic.content


# -- embedders ---------------------------------------------------------------------------


def test_unknown_or_incomplete_embedders_say_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EmbedderError, match="unknown embedder 'nope'.*wordllama"):
        registry.build("nope/x")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EmbedderError, match="OPENAI_BASE_URL"):
        registry.build("openai-compatible/x")


@pytest.mark.skipif(importlib.util.find_spec("fastembed") is not None, reason="fastembed is installed")
def test_a_missing_optional_embedder_is_one_line_naming_the_extra() -> None:
    assert run("init", "demo").returncode == 0
    run("fs", "write", "/k.md", "-a", "demo", stdin="chess\n")
    p = run("fs", "search", "chess", "--mode", "semantic", "-a", "demo",
            env={"MEMAGENT_EMBEDDER": "fastembed/BAAI/bge-small-en-v1.5"})
    assert p.returncode == 2 and out(p) == ""  # not 1, which says "nothing matched"
    assert err(p).strip().count("\n") == 0 and "memagent[fastembed]" in err(p) and "Traceback" not in err(p)
    # Lexical search needs no embedder at all.
    p = run("fs", "search", "chess", "--mode", "lexical", "-a", "demo",
            env={"MEMAGENT_EMBEDDER": "fastembed/BAAI/bge-small-en-v1.5"})
    assert p.returncode == 0, err(p)


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare -n (root)")
def test_wordllama_loads_with_no_network() -> None:
    probe = ("from memagent.vfs.embeddings import registry; e = registry.build('wordllama'); "
             "v = e.embed(['format notes as bullets']); print(v.shape[1], round(float((v * v).sum()), 3))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    p = subprocess.run(["unshare", "-n", sys.executable, "-c", probe], capture_output=True, text=True,
                       env=env, timeout=120)
    if p.returncode != 0 and "unshare failed" in p.stderr:
        pytest.skip("this machine refuses network namespaces")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["256", "1.0"]


def test_loading_wordllama_leaves_the_processes_logging_alone() -> None:
    # wordllama's import calls logging.basicConfig(level=INFO): every library's INFO
    # lines (httpx's requests among them) would then reach the user's stderr.
    probe = ("import logging; root = logging.getLogger(); before = (root.level, len(root.handlers)); "
             "from memagent.vfs.embeddings import registry; registry.build('wordllama').embed(['x']); "
             "print(before == (root.level, len(root.handlers)))")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True" and p.stderr == ""


# -- the commands ----------------------------------------------------------------------------


def test_fs_search_modes_and_db_reindex_through_the_command() -> None:
    assert run("init", "demo").returncode == 0
    run("fs", "write", "/preferences/coffee.md", "-a", "demo", stdin="Flat white with oat milk, never sugar.\n")
    run("fs", "write", "/home/garden.md", "-a", "demo", stdin="Water the tomatoes every morning.\n")
    p = run("fs", "search", "which espresso drink should I order", "-a", "demo")  # hybrid, the default
    assert p.returncode == 0, err(p)
    assert err(p) == ""  # loading the embedder logs nothing at the user
    assert out(p).splitlines()[0].startswith("1. /preferences/coffee.md")
    p = run("fs", "search", "which espresso drink should I order", "--mode", "lexical", "-a", "demo")
    assert p.returncode == 1 and out(p) == ""
    p = run("fs", "search", "x", "--mode", "fuzzy", "-a", "demo")
    assert p.returncode == 2 and "fuzzy" in err(p)
    # A search that cannot run is 2, never 1 ("nothing matched", which a script reads as an answer).
    p = run("fs", "search", "espresso", "--mode", "semantic", "-a", "demo", env={"MEMAGENT_EMBEDDER": "bogus"})
    assert p.returncode == 2 and "unknown embedder 'bogus'" in err(p) and "Traceback" not in err(p)
    p = run("fs", "search", "  ", "-a", "demo")
    assert p.returncode == 2 and "query is empty" in err(p)
    p = run("fs", "search", "oat milk", "-a", "demo", env={"MEMAGENT_EMBEDDER": "bogus"})  # hybrid: words only
    assert p.returncode == 0 and out(p).startswith("1. /preferences/coffee.md") and "words only" in err(p)
    p = run("db", "reindex", "--embeddings")
    assert p.returncode == 0, err(p)
    assert "embedded" in out(p) and "wordllama/l2_supercat" in out(p)
    assert run("db", "reindex").returncode == 2


def test_a_real_hit_never_shows_score_0() -> None:
    # bm25 of a word every file holds is ~1e-6: rounded to 4 places it printed "score 0".
    assert run("init", "demo").returncode == 0
    for name in ("a", "b"):
        run("fs", "write", f"/k/{name}.md", "-a", "demo", stdin=f"chess club {name}\n")
    p = run("fs", "search", "chess", "--mode", "lexical", "-a", "demo")
    assert p.returncode == 0, err(p)
    assert "(score 0," not in out(p) and "(score -0," not in out(p)


@pytest.fixture
def fake_api() -> Iterator[FakeOpenAIAPI]:
    with FakeOpenAIAPI() as api:
        yield api


def test_the_openai_compatible_embedder_through_the_command(fake_api: FakeOpenAIAPI) -> None:
    env = {"MEMAGENT_EMBEDDER": "openai-compatible/fake-embed", "OPENAI_BASE_URL": fake_api.base_url}
    assert run("init", "demo").returncode == 0
    run("fs", "write", "/k/chess.md", "-a", "demo", stdin="chess club on tuesdays\n")
    run("fs", "write", "/k/roses.md", "-a", "demo", stdin="prune the roses\n")
    p = run("fs", "search", "tuesdays chess", "--mode", "semantic", "-a", "demo", env=env)
    assert p.returncode == 0, err(p)
    assert out(p).splitlines()[0].startswith("1. /k/chess.md")
    assert any(r.get("model") == "fake-embed" for r in fake_api.requests)
