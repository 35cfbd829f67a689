"""The fast paths of ls, glob and grep answer exactly what the plain implementations do.

Over a generated corpus (bench/corpus.py, 300 files plus hand-made edge cases) on
SQLite and Postgres: grep against ``SqlStore._grep_plain`` (every file into
Python, one regex search per line), glob and ls against references computed from
``all_files``. Pure-Python properties check ``scan`` against ``scan_plain`` and the
soundness of the required-literal analysis on random texts and patterns.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from bench.corpus import COMMON, RARE, REGEX, REGEX_NO_LITERAL, generate
from memagent.vfs import SqlStore, db, open_store
from memagent.vfs.errors import InvalidPath, IsADirectory, NotFound, ValidationFailed, VfsError
from memagent.vfs.grep.engine import compile_pattern, scan, scan_plain
from memagent.vfs.grep.fts import candidates, detect, fts5_query, like_pattern
from memagent.vfs.grep.globbing import compile_glob
from memagent.vfs.grep.regex_info import (
    CI_UNSAFE_ASCII,
    AllOf,
    AnyOf,
    Needle,
    Req,
    analyze,
    needle_runs,
)
from memagent.vfs.types import Entry

S = "agent:a"

EDGE = {
    "/edge/unicode.md": "Ünïcode line\nStraße und ſtraße\nİstanbul ıi\n\u212aelvin KELVIN kelvin\n"
                        "café CAFÉ\nΣΊΣΥΦΟΣ σίσυφος ς\n",
    "/edge/empty.md": "",
    "/edge/no-newline.md": "first\nlast line zephyr",
    "/edge/blank-lines.md": "\n\n\nzephyr\n\n",
    "/edge/meta.md": 'cost is $5 (approx)\na.b [x] (?i) back\\slash "quoted" 100% 5%_ok\n',
    "/edge/crlf.md": "zephyr\r\nline two\r\n",
    "/edge/lookaround.md": "xzephyr\nzephyr y\n# Ref\n",
    "/edge/tabs.md": "\tzephyr\t\n   \n",
    "/edge/dup.md": "abcabc zephyrzephyr\naa\nQUOKKA\n",
    "/edge/deep/er/still.md": "INC-12345 and 555-1234\n",
}

PATTERNS = [
    # literals, rare and common, and short ones no trigram can help with
    RARE, COMMON, "INC-", "reference", "the", "zep", "a", "ab", "é", "K", "ſ", "ς",
    # regexes with and without a required literal
    REGEX, REGEX_NO_LITERAL, r"zeph?yr", r"(zephyr|QUOKKA)", r"foo|zephyr", r"zephyr|ab",
    r"\bzephyr\b", r"^# ", r"^- \w+", r"ing$", r"(?i)ZEPHYR", r"z.p.yr", r"INC-\d+",
    r"(?:abc)+zephyr", r"(abc){2}", r"\d{3}", r"[A-Z]{3}-", r"^$", r"^", r"x*", r"\s$", r".",
    r"\w+ing\b", r"zephyr\s+\w+", r"[^z]ephyr", r"(?s)zep.hyr", r"zephyr\r", r"e\n",
    # anchors and lookarounds that see past a line's end
    r"\Azephyr", r"zephyr\Z", r"\A", r"(?-m:^# R)", r"(?-m:y$)", r"zephyr(?=\s)",
    r"(?<=\s)zephyr", r"(?<!x)zephyr", r"zephyr(?! y)",
    # atomic groups, possessive repeats, back references, conditionals
    r"(?>zeph\w*)\s", r"(?>a\s*)$", r"zephyr\s*+$", r"(a)\1", r"(?P<x>z)ephyr(?P=x)?",
    r"(z)?(?(1)ephyr|QUOKKA)",
    # unicode and case folding
    "ünïcode", "Straße", "straße", "İstanbul", "café", "\u212aelvin", "kelvin", "σίσυφος",
    r"[ſs]tra", r"(?i:stra)ße",
]
FIXED = ["$5 (", "a.b", "[x]", "(?i)", "back\\slash", '"quoted"', "100%", "5%_", "\\", "^#"]


@pytest.fixture
def loaded(store: SqlStore) -> SqlStore:
    corpus = generate(300, seed=7)
    store.bulk_write(S, {**corpus.files, **EDGE})
    store.write("agent:other", "/knowledge/x.md", f"{RARE} in another scope\n")
    store.write(S, "/gone.md", f"{RARE} deleted\n")
    store.delete(S, "/gone.md")
    return store


def _check_grep(store: SqlStore, pattern: str, **kw: object) -> None:
    fast = store.grep(S, pattern, **kw)  # type: ignore[arg-type]
    plain = store._grep_plain(S, pattern, **kw)  # type: ignore[arg-type]
    assert fast == plain, (pattern, kw)


def test_grep_matches_plain(loaded: SqlStore, request: pytest.FixtureRequest) -> None:
    # Whole-scope greps: the reference is scan_plain over every live file, read once
    # (the same as _grep_plain with path="/" and no glob, which the tests below use).
    rows = [(f.path, loaded.read(S, f.path).content) for f in loaded.all_files(S)]
    assert len(rows) == 300 + len(EDGE)
    cases = [(p, fixed) for p in PATTERNS for fixed in (False,)]
    cases += [(p, True) for p in FIXED + [RARE, "zephyr"]]
    if request.node.callspec.params.get("backend_url") == "pgbouncer":
        # PgBouncer carries the very statements [postgres] sends: every third pattern shows
        # each kind goes through the pooler; the whole set runs on the direct connection.
        cases = cases[::3]
    for pattern, fixed in cases:
        for ci in (False, True):
            regex = compile_pattern(pattern, case_insensitive=ci, fixed_strings=fixed)
            for mode in ("files_with_matches", "content", "count"):
                got = loaded.grep(S, pattern, output_mode=mode, case_insensitive=ci,
                                  fixed_strings=fixed, limit=10**6)
                want = scan_plain(rows, regex, mode, 10**6)  # type: ignore[arg-type]
                assert got == want, (pattern, mode, ci, fixed)


@pytest.mark.parametrize("mode", ["files_with_matches", "content", "count"])
def test_grep_limits_paths_and_globs(loaded: SqlStore, mode: str) -> None:
    for limit in (0, 1, 5, 200):
        for pattern in (COMMON, "the", REGEX_NO_LITERAL, r"^$"):
            _check_grep(loaded, pattern, output_mode=mode, limit=limit)
    for path in ("/knowledge", "/people/", "/edge", "/edge/meta.md", "/edge/deep", "/nothing",
                 "/gone.md", "/kn"):
        for pattern in (COMMON, RARE, "a", r"\$"):
            _check_grep(loaded, pattern, path=path, output_mode=mode)
    for glob in ("*.md", "**/*.md", "edge/*.md", "edge/**", "/edge/*.md", "{edge,people}/*",
                 "people/*-00?.md", "still.md", "deep/er/*.md", "nomatch/*", "*.{md,txt}"):
        for path in ("/", "/edge"):
            for pattern in (COMMON, "INC", r"\d"):
                _check_grep(loaded, pattern, glob=glob, path=path, output_mode=mode)


def test_prefilter_is_used(loaded: SqlStore) -> None:
    """The databases under test have the trigram index, so the fast path really runs."""
    with loaded.engine.connect() as conn:
        features = detect(conn)
        assert features.sqlite_fts or features.pg_trgm
        assert candidates(features, analyze(RARE, re.M).required, conn=conn, scope=S) is not None
        assert candidates(features, analyze(REGEX_NO_LITERAL, re.M).required, conn=conn, scope=S) is None


def test_index_follows_every_mutation(loaded: SqlStore) -> None:
    needle = "WOMBAT-NEEDLE"
    assert loaded.grep(S, needle).files == []
    loaded.write(S, "/m/a.md", f"a {needle}\n")
    loaded.edit(S, "/edge/tabs.md", "zephyr", needle)
    loaded.move(S, "/edge/dup.md", "/m/dup.md")
    loaded.edit(S, "/m/dup.md", "abcabc", needle)
    assert loaded.grep(S, needle).files == ["/edge/tabs.md", "/m/a.md", "/m/dup.md"]
    loaded.delete(S, "/m/a.md")
    loaded.edit(S, "/edge/tabs.md", needle, "gone")
    assert loaded.grep(S, needle).files == ["/m/dup.md"]
    loaded.revert(S, "/m/a.md", 1)
    loaded.revert(S, "/edge/tabs.md", 1)
    assert loaded.grep(S, "abcabc").files == []
    for pattern in (needle, "zephyr", "abcabc", "gone"):
        _check_grep(loaded, pattern, output_mode="content")


# -- glob and ls ---------------------------------------------------------------


def _glob_plain(store: SqlStore, pattern: str, path: str = "/") -> list[str]:
    base = "/" if pattern.startswith("/") else path.rstrip("/") or "/"
    regex = compile_glob(pattern.lstrip("/") if pattern.startswith("/") else pattern)
    prefix = base if base.endswith("/") else base + "/"
    return [f.path for f in store.all_files(S)
            if f.path.startswith(prefix) and regex.match(f.path[len(prefix):])]


def test_glob_matches_plain(loaded: SqlStore) -> None:
    patterns = ["**/*.md", "skills/*.md", "*.md", "**", "edge/**", "/edge/*", "people/*-0[0-4]?.md",
                "{edge,skills}/*.md", "**/deep/**/*.md", "still.md", "*/*/*.md", "cases/20*/0?/*",
                "nomatch/*", "knowledge/**/reference-*", "edge/{un,em}*.md", "?????.md"]
    for pattern in patterns:
        for path in ("/", "/edge", "/knowledge"):
            assert loaded.glob(S, pattern, path) == _glob_plain(loaded, pattern, path), pattern


def _ls_plain(store: SqlStore, path: str) -> list[Entry]:
    prefix = path.rstrip("/") + "/"
    dirs: dict[str, int] = {}
    out: list[Entry] = []
    for f in store.all_files(S):
        if not f.path.startswith(prefix):
            continue
        head, sep, _ = f.path[len(prefix):].partition("/")
        if sep:
            dirs[head] = dirs.get(head, 0) + 1
        else:
            out.append(Entry(head, False, f.size))
    out += [Entry(d, True, n) for d, n in dirs.items()]
    return sorted(out, key=lambda e: e.name)


def test_ls_matches_plain(loaded: SqlStore) -> None:
    for path in ("/", "/people", "/edge/", "/edge/deep", "/knowledge", "/cases"):
        assert loaded.ls(S, path) == _ls_plain(loaded, path), path
    assert len(loaded.ls(S, "/people")) == 100
    assert loaded.ls(S, "/edge/meta.md") == [Entry("meta.md", False, len(EDGE["/edge/meta.md"]))]
    with pytest.raises(NotFound):
        loaded.ls(S, "/gone.md")
    with pytest.raises(NotFound):
        loaded.ls(S, "/nothing")


# -- bulk_write ----------------------------------------------------------------


def test_bulk_write(store: SqlStore) -> None:
    store.write(S, "/keep.md", "one\n")
    store.write(S, "/dead.md", "x\n")
    store.delete(S, "/dead.md")
    changes = store.bulk_write(S, {"/keep.md": "two\n", "b//c.md": "c\n", "/dead.md": "back\n"},
                               author="import", approval="cli", message="import")
    assert [(c.path, c.version, c.before) for c in changes] == [
        ("/b/c.md", 1, None), ("/dead.md", 3, None), ("/keep.md", 2, "one\n")]
    assert store.history(S, "/keep.md")[0].author == "import"
    assert store.read(S, "/b/c.md").content == "c\n"
    assert store.grep(S, "back").files == ["/dead.md"]


@pytest.mark.parametrize(
    ("batch", "error"),
    [
        ({"/ok.md": "fine\n", "/skills/bad.md": "no frontmatter\n"}, ValidationFailed),
        ({"/ok.md": "fine\n", "/keep.md/below.md": "x\n"}, InvalidPath),
        ({"/ok.md": "fine\n", "/dir": "x\n"}, IsADirectory),
        ({"/new.md": "x\n", "/new.md/deeper.md": "y\n"}, (InvalidPath, IsADirectory)),
        ({"/twice.md": "x\n", "twice.md": "y\n"}, VfsError),
        ({"/ok.md": "fine\n", "/../x.md": "y\n"}, InvalidPath),
    ],
)
def test_bulk_write_is_all_or_nothing(store: SqlStore, batch: dict[str, str],
                                      error: type[Exception] | tuple[type[Exception], ...]
                                      ) -> None:
    store.write(S, "/keep.md", "one\n")
    store.write(S, "/dir/inside.md", "x\n")
    before = store.all_files(S)
    with pytest.raises(error):
        store.bulk_write(S, batch)
    assert store.all_files(S) == before


# -- the migration on a database that already has data ---------------------------


def _migrate(url: str, target: str, down: bool = False) -> None:
    from alembic import command
    from alembic.config import Config

    engine = db.create(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    with engine.connect().execution_options(**{db.WRITE: True}) as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, target)
        conn.commit()
    engine.dispose()


def _seed_at(url: str, scope: str, batch: dict[str, str]) -> None:
    """Rows as a database at an old schema holds them, written with plain SQL: today's
    store writes columns later migrations added, so it cannot write an old schema."""
    import hashlib
    from datetime import UTC, datetime

    from sqlalchemy import MetaData, insert, select

    engine = db.create(url)
    meta = MetaData()
    meta.reflect(engine, only=["agents", "files", "revisions"])
    agents, files, revisions = (meta.tables[n] for n in ("agents", "files", "revisions"))
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(insert(agents).values(name=scope.split(":", 1)[1], created_at=now))
        for path, content in sorted(batch.items()):
            size = len(content.encode("utf-8"))
            file_id = conn.execute(insert(files).values(
                scope=scope, path=path, content=content, size=size, version=1, deleted=False,
                sha256=hashlib.sha256(content.encode("utf-8")).hexdigest(), created_at=now, updated_at=now,
            ).returning(files.c.id)).scalar_one()
            conn.execute(insert(revisions).values(
                file_id=file_id, version=1, author="import", approval="cli", message="seed", content=content,
                deleted=False, size=size, created_at=now))
        assert conn.scalar(select(files.c.id).limit(1)) is not None
    engine.dispose()


def _drop_search_indexes(url: str) -> None:
    """What migration 0003 adds, removed again: the grep fast paths' indexes."""
    engine = db.create(url)
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            for trigger in conn.scalars(text("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                             "AND name LIKE 'files_fts%'")).all():
                conn.execute(text(f'DROP TRIGGER "{trigger}"'))
            conn.execute(text("DROP TABLE IF EXISTS files_fts"))
        else:
            conn.execute(text("DROP INDEX IF EXISTS ix_files_content_trgm"))
            conn.execute(text("DROP INDEX IF EXISTS ix_files_listing"))
    engine.dispose()


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_migration_0003_on_existing_data(db_url: str) -> None:
    _migrate(db_url, "0002")
    _seed_at(db_url, S, {**generate(150, seed=3).files, **EDGE})
    _migrate(db_url, "0003")
    store = open_store(db_url)
    with store.engine.connect() as conn:
        assert detect(conn).sqlite_fts or detect(conn).pg_trgm
    for pattern in (COMMON, RARE, "zep", REGEX, "ünïcode"):
        _check_grep(store, pattern, output_mode="content", limit=10**6)
    store.write(S, "/after.md", "WOMBAT\n")
    assert store.grep(S, "WOMBAT").files == ["/after.md"]
    store.close()
    _migrate(db_url, "0002", down=True)
    engine = db.create(db_url)
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            left = conn.execute(text("SELECT name FROM sqlite_master WHERE name LIKE 'files_fts%'"))
        else:
            left = conn.execute(text("SELECT indexname FROM pg_indexes WHERE indexname IN "
                                     "('ix_files_content_trgm', 'ix_files_listing')"))
        assert left.all() == []
    engine.dispose()
    # The store still works without the search indexes (today's schema without them).
    _migrate(db_url, "head")
    _drop_search_indexes(db_url)
    down = open_store(db_url, migrate=False)
    with down.engine.connect() as conn:
        assert not (detect(conn).sqlite_fts or detect(conn).pg_trgm)
    down.write(S, "/down.md", "WOMBAT again\n")
    assert down.grep(S, "WOMBAT").files == ["/after.md", "/down.md"]
    down.close()


# -- pure Python: scan and the pattern analysis ------------------------------------


def test_unsafe_case_insensitive_characters() -> None:
    """Exactly these ASCII characters have non-ASCII IGNORECASE partners in Python."""
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    unsafe = set()
    for code in range(0x20, 0x7F):
        ch = chr(code)
        if any(not x.isascii() for x in re.findall("(?i)" + re.escape(ch), everything)):
            unsafe.add(ch)
    assert unsafe == set(CI_UNSAFE_ASCII)


def test_query_rendering() -> None:
    assert fts5_query(Needle('ab"cd', False)) == '"ab""" AND "b""c" AND """cd"'
    assert fts5_query(AnyOf((Needle("abc", False), Needle("xyz", True)))) == '("abc") OR ("xyz")'
    assert like_pattern(Needle("50%_a\\b", False)) == "%50\\%\\_a\\\\b%"
    assert like_pattern(Needle("Kiosk", True)) == "%__o__%"
    assert needle_runs(Needle("invoice", True)) == ["nvo", "ce"]


def _required_holds(req: Req, text: str) -> bool:
    """What the database filters promise, modelled in Python."""
    if isinstance(req, Needle):
        if not req.ci:
            return req.text in text
        return all(run.lower() in text.lower() for run in needle_runs(req))
    results = (_required_holds(p, text) for p in req.parts)
    return all(results) if isinstance(req, AllOf) else any(results)


FRAGMENTS = ["a", "b", "k", "K", "s", "ab", "abc", "kab", "\n", ".", r"\s", r"\w", r"\d",
             "^", "$", r"\b", r"\A", r"\Z", "a*", "b+", "(?:ab|ba)", "(a|bc)", "[^a]", "[a-c]",
             "(?=a)", "(?<!b)", "(?>a*)", "a*+", "(?i:k)", "(?-m:$)", "(?s:.)", r"\1", "x?",
             "\u212a", "ſ", "é", "É",
             # what the exact RE2 translation (prefilter.linear) must get right
             "ß", "İ", "ı", "[à-ÿ]", r"[\wé]", "(?i:é)", "(?i:[é-ë])", "(?i:[^é])", r"(?a:\b)", r"\W",
             "(?:a|é){1,3}", r"\B", "\x85", r"(?-m:^)", "a+?", "x{0}", "(?:^)*", r"[\d-]"]
TEXT = st.text(alphabet="abkKsSxé É\n\t\u212aſ1ßİı\x85", max_size=40)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4))
    pattern = "(a)?" + "".join(parts) if r"\1" in parts else "".join(parts)
    try:
        re.compile(pattern)
    except re.error:
        return "a"
    return pattern


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4), pattern=patterns(), ci=st.booleans(),
       limit=st.integers(0, 6))
# Found by hypothesis: the whole-text search matched \B on the empty line (between
# start and "\n"), where Python's re, on the line alone, does not match (\B never
# matches an empty string); with limit 0 the fast scan said "truncated".
@example(texts=["\n"], pattern=r"\B", ci=False, limit=0)
@example(texts=["a\n\n \n"], pattern=r"\B", ci=False, limit=3)
def test_scan_equals_scan_plain(texts: list[str], pattern: str, ci: bool, limit: int) -> None:
    regex = compile_pattern(pattern, case_insensitive=ci, fixed_strings=False)
    rows = [(f"/f{i}.md", t) for i, t in enumerate(texts)]
    for mode in ("files_with_matches", "content", "count"):
        assert scan(rows, regex, mode, limit) == scan_plain(rows, regex, mode, limit)  # type: ignore[arg-type]
    required = analyze(regex.pattern, regex.flags).required
    if required is not None:
        for path, t in rows:
            if scan_plain([(path, t)], regex, "files_with_matches").files:
                assert _required_holds(required, t), (pattern, t, required)


@pytest.mark.parametrize("pattern", [r"\B", r"\B$", r"^\B", r"(?:\B)*\B", r"x?\B"])
@pytest.mark.parametrize("text", ["\n", "\n\n", "a\n\nb", "", " \n\n", "a\n"])
def test_empty_lines_are_judged_alone(pattern: str, text: str) -> None:
    """An empty line matches exactly when the pattern matches an empty string, whichever
    matcher (whole text, RE2, line by line) scan picks; a limit of 0 is truncated only
    when some line matches."""
    regex = compile_pattern(pattern, case_insensitive=False, fixed_strings=False)
    rows = [("/f.md", text)]
    for mode in ("files_with_matches", "content", "count"):
        for limit in (0, 1, 5):
            assert scan(rows, regex, mode, limit) == scan_plain(rows, regex, mode, limit), (mode, limit)  # type: ignore[arg-type]
    lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    assert scan(rows, regex, "content", 0).truncated == any(regex.search(line) for line in lines)


def test_unknown_constructs_turn_shortcuts_off() -> None:
    info = analyze(r"(?<=a)b", re.M)
    assert not info.whole_text_ok and not info.line_local
    assert analyze(r"ab\s+cd", re.M).line_local is False
    assert analyze(r"ab\w+cd", re.M).line_local is True
    assert analyze(r"[", re.M).required is None  # invalid: no facts, no error


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("corpus")


def test_corpus_is_deterministic_and_planted(sample_dir: Path) -> None:
    a, b = generate(300, seed=7), generate(300, seed=7)
    assert a.files == b.files and a.truth == b.truth
    assert len(a.files) == 300 and len(a.truth["rare"]) == 3
    for name, pattern in (("rare", RARE), ("common", COMMON), ("regex", REGEX),
                          ("regex_no_literal", REGEX_NO_LITERAL)):
        found = sorted(p for p, c in a.files.items() if re.search(pattern, c))
        assert found == a.truth[name], name
    a.write_folder(sample_dir)
    assert (sample_dir / "knowledge" / "reference-4k.md").stat().st_size == 4096
