r"""The regex pre-filter (vfs/grep/prefilter.py, its translator vfs/grep/regex_tree.py) never drops a file grep
would report.

- The translator's decisions: what is translated (and into what), what is refused.
- Its character sets are Python's: ``\d``, ``\w``, ``\s`` and IGNORECASE partners
  against every code point, computed another way than the module does.
- Soundness, on random patterns and texts: whenever Python finds a matching line,
  RE2 matches the whole text, and ``scan`` with the filter equals ``scan_plain``.
- Postgres' regex on the same translations answers exactly as RE2 does.
- Through the store on SQLite and Postgres: ``grep`` equals ``_grep_plain`` for
  tricky patterns over tricky texts, the filter really runs, and a translation
  Postgres refuses, or a missing RE2, only turns the filter off.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from bench.corpus import REGEX_NO_LITERAL, generate
from memagent.vfs import SqlStore
from memagent.vfs.grep import prefilter, regex_tree
from memagent.vfs.grep.engine import compile_pattern, scan, scan_plain
from memagent.vfs.grep.fts import detect
from memagent.vfs.grep.prefilter import LineFilter, translate
from memagent.vfs.grep.regex_tree import Chars, build, category_set, ci_partners

S = "agent:a"
M = re.MULTILINE | re.UNICODE
EVERY = regex_tree._every_char()


def _set(ranges: tuple[tuple[int, int], ...]) -> set[int]:
    return {c for lo, hi in ranges for c in range(lo, hi + 1)}


def _line_chars(chars: set[int]) -> set[int]:
    """What a set may hold after translation: no \\n, no surrogates."""
    return {c for c in chars if c != 10 and not 0xD800 <= c <= 0xDFFF}


# -- what is translated, and into what -----------------------------------------------

DIGIT = r"[\x{30}-\x{39}]"
NOT_NL = r"[\x{0}-\x{9}\x{B}-\x{D7FF}\x{E000}-\x{10FFFF}]"


@pytest.mark.parametrize(
    ("pattern", "flags", "want"),
    [
        ("[0-9]{3}-[0-9]{4}", M, f"(?m){DIGIT}{{3}}\\x{{2D}}{DIGIT}{{4}}"),
        (r"(?i)k", M, r"(?m)[\x{4B}\x{6B}\x{212A}]"),
        ("k", M | re.IGNORECASE, r"(?m)[\x{4B}\x{6B}\x{212A}]"),
        (r"(?i:s)", M, r"(?m)[\x{53}\x{73}\x{17F}]"),
        (r"(?ai)s", re.MULTILINE, r"(?m)[\x{53}\x{73}]"),
        (r"\bab\B", M, r"(?m)\x{61}\x{62}"),  # word boundaries dropped: looser
        (r"x{2,500}", M, r"(?m)\x{78}{2,}"),  # bounds past the cap: looser
        (r"x{150}", M, r"(?m)\x{78}{100,}"),
        (r"x{0,3}y", M, r"(?m)\x{78}{0,3}\x{79}"),
        (r"a+?b??", M, r"(?m)\x{61}+\x{62}?"),  # lazy = greedy for "is there a match"
        (r"^a|b$", M, r"(?m)(?:^\x{61}|\x{62}$)"),
        (r"(?:ab)+", M, r"(?m)(?:\x{61}\x{62})+"),
        (r".x", M, f"(?m){NOT_NL}\\x{{78}}"),
        (r"(?s).x", M, f"(?m){NOT_NL}\\x{{78}}"),  # a line has no \n to match
        (r"[^\n]x", M, f"(?m){NOT_NL}\\x{{78}}"),
        (r"(?a:\d)x", M, f"(?m){DIGIT}\\x{{78}}"),
        (r"[\na]z", M, r"(?m)\x{61}\x{7A}"),  # no line holds a \n for the class to match
        (r"a(?:\n|b)", M, r"(?m)\x{61}\x{62}"),  # parsed as the class [\nb]
    ],
)
def test_translations(pattern: str, flags: int, want: str) -> None:
    found = translate(pattern, flags)
    assert found is not None and found.re2_pattern == want
    assert found.compiled is not None
    # The Postgres form is the same tree, characters written the other way.
    pg = re.sub(r"\\x\{([0-9A-F]+)\}", lambda m: f"\\U{int(m[1], 16):08X}", want)
    assert found.pg_pattern == "(?n)" + pg.removeprefix("(?m)")


def test_unicode_digits_are_not_ascii_digits() -> None:
    digit = build(r"\d", M)
    assert isinstance(digit, Chars) and 0x663 in _set(digit.ranges)  # '٣'
    ascii_range = build(r"[0-9]", M)
    assert isinstance(ascii_range, Chars) and _set(ascii_range.ranges) == set(range(0x30, 0x3A))


@pytest.mark.parametrize(
    "pattern",
    [
        # they look past the line or depend on what the match does not contain
        r"(?<=a)bc", r"(?<!a)bc", r"ab(?=c)", r"ab(?!c)", r"\Aabc", r"abc\Z",
        r"(?-m:^abc)", r"(?-m:abc$)",
        # not regular: back references, conditionals; atomic and possessive
        r"(a)\1", r"(?P<x>a)b(?P=x)", r"(a)?(?(1)b|c)", r"(?>ab)c", r"a*+b", r"a++b",
        # case folding beyond ASCII, or categories lower-cased with letters
        r"(?i)é", r"(?i)[à-ÿ]x", r"(?i)[\wé]", r"(?i)[\da]", "(?i)\u212a",
        # a newline, which no line contains: refused outright rather than reasoned about
        r"a\nb", "a\nb", r"z(?:\n)?",
        # can match the empty string: every line matches, nothing could be skipped
        r"a*", r"^$", r"^", r"$", r"(?:ab)?", r"\b", r"x?y?", r"(?:)", r"a{0}",
        # too big to compile quickly
        r"\w{100}",
        # not a pattern at all
        r"[", r"(?",
    ],
)
def test_refused(pattern: str) -> None:
    assert translate(pattern, M) is None


def test_refused_by_re2_still_has_a_postgres_form() -> None:
    found = translate(r"(?:(?:ab){100}){100}x", M)  # RE2 limits nested repeats to 1,000
    assert found is not None and found.compiled is None and found.pg_pattern.startswith("(?n)")


def test_whole_refusal_when_inside_an_alternative() -> None:
    assert translate(r"abc|(?<=x)y", M) is None
    assert translate(r"[0-9]|\Z", M) is None


# -- the character sets are Python's ---------------------------------------------------


def test_categories_match_python() -> None:
    import re._constants as C  # noqa: N812

    every = [chr(c) for c in range(0x110000)]
    digit = {i for i, ch in enumerate(every) if ch.isdecimal()}
    space = {i for i, ch in enumerate(every) if ch.isspace()}
    word = {i for i, ch in enumerate(every) if ch.isalnum() or ch == "_"}
    everything = set(range(0x110000))
    for cat, want in ((C.CATEGORY_DIGIT, digit), (C.CATEGORY_SPACE, space),
                      (C.CATEGORY_WORD, word), (C.CATEGORY_NOT_DIGIT, everything - digit),
                      (C.CATEGORY_NOT_SPACE, everything - space),
                      (C.CATEGORY_NOT_WORD, everything - word)):
        assert _set(category_set(cat, False)) == want, cat
    ascii_word = {ord(c) for c in "_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    assert _set(category_set(C.CATEGORY_WORD, True)) == ascii_word
    assert _set(category_set(C.CATEGORY_DIGIT, True)) == set(range(0x30, 0x3A))
    assert _set(category_set(C.CATEGORY_SPACE, True)) == {ord(c) for c in " \t\n\r\f\v"}


def test_case_partners_match_python() -> None:
    """Every code point Python's IGNORECASE equates with each ASCII character."""
    partners = ci_partners(False)
    for code in range(128):
        want = {ord(x) for x in re.findall("(?i)" + re.escape(chr(code)), EVERY)}
        assert _set(partners[code]) == want, chr(code)
    assert _set(partners[ord("k")]) == {ord("k"), ord("K"), 0x212A}
    ascii_partners = ci_partners(True)
    for code in range(128):
        want = {ord(x) for x in re.findall("(?ai)" + re.escape(chr(code)), EVERY)}
        assert _set(ascii_partners[code]) == want, chr(code)


@pytest.mark.parametrize(
    "pattern",
    [r"[a-z]", r"[^k]", r"[K-S_0-9]", r"[^A-Z]", r"[\d]", r"[^\s]", r"\W", r"[i-k]", r"[^\w]",
     r"[ -~]", r"[^i]", r"[\x00-\x1f]", r"[^\d\s]", r"[Ss]"],
)
@pytest.mark.parametrize("ci", [False, True])
def test_class_sets_match_python(pattern: str, ci: bool) -> None:
    flags = M | (re.IGNORECASE if ci else 0)
    node = build(pattern, flags)
    assert isinstance(node, Chars), pattern
    want = {ord(x) for x in re.findall(pattern, EVERY, flags)}
    assert _set(node.ranges) == _line_chars(want)


# -- soundness on random patterns and texts ------------------------------------------

FRAGMENTS = [
    "a", "b", "k", "K", "s", "i", "ab", "-", "3", "٣", "[0-9]", r"\d", r"\D", r"\w", r"\W", r"\s",
    r"\S", ".", "[^a]", "[a-c]", "[^0-9]", "x{2}", "[0-9]{2,3}", "a*", "b+", "a?", "(?:ab|ba)",
    "(a|bc)", "^", "$", r"\b", r"\B", "(?i:k)", "(?i:[a-k])", "(?a:\\w)", "(?s:.)", "x*?", "\u212a",
    "ſ", "é", "É", "İ", "ı", r"[\d-]", r"\r", "\u2028", r"[^\s\d]", r"(?:a|$)", r"(?:^|b)",
]
TEXT = st.text(alphabet="abkKsSiIxé \n\r\t-3٣_\u212aſİı\x85\u2028", max_size=40)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4))
    pattern = "".join(parts)
    if draw(st.booleans()):
        pattern = pattern + "|" + draw(st.sampled_from(FRAGMENTS))
    try:
        re.compile(pattern)
    except re.error:
        return "ab"
    return pattern


def _has_line_match(regex: re.Pattern[str], content: str) -> bool:
    return bool(scan_plain([("/f", content)], regex, "files_with_matches").files)


@settings(max_examples=600, deadline=None)
@given(texts=st.lists(TEXT, min_size=1, max_size=4), pattern=patterns(), ci=st.booleans())
def test_filter_keeps_every_matching_text(texts: list[str], pattern: str, ci: bool) -> None:
    regex = compile_pattern(pattern, case_insensitive=ci, fixed_strings=False)
    found = prefilter.for_regex(regex)
    if found is None or found.compiled is None:
        return
    for t in texts:
        if _has_line_match(regex, t):
            assert found.keep(t), (pattern, ci, t, found.re2_pattern)
    rows = [(f"/f{i}.md", t) for i, t in enumerate(texts)]
    for mode in ("files_with_matches", "content", "count"):
        assert scan(rows, regex, mode, 50, found.keep) == scan_plain(rows, regex, mode, 50)  # type: ignore[arg-type]


def test_filter_is_tight_on_the_benchmark_pattern() -> None:
    """Not only sound: it really drops what cannot match, including other digits."""
    found = translate(REGEX_NO_LITERAL, M)
    assert found is not None
    assert found.keep("call 555-1234\n")
    assert not found.keep("call ٣٣٣-٣٣٣٣ or １２３-４５６７\n")
    assert not found.keep("555-\n1234\n")  # a match may not cross a line
    unicode_digits = translate(r"\d{3}-\d{4}", M)
    assert unicode_digits is not None and unicode_digits.keep("٣٣٣-٣٣٣٣")
    assert found.keep("\udc80 555-1234") and found.keep("\ud800")  # not UTF-8: Python decides


def _random_cases(seed: int, n_patterns: int, n_texts: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    pats: list[str] = []
    while len(pats) < n_patterns:
        p = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:
            p = "(?i)" + p
        try:
            re.compile(p)
        except re.error:
            continue
        if translate(p, M) is not None:
            pats.append(p)
    alphabet = "abkKsSiIxé \n\r\t-3٣_\u212aſİı\x85\u2028"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(n_texts)]
    return pats, texts


@pytest.mark.postgres
def test_postgres_agrees_with_re2(fresh_pg_url: str) -> None:
    """Postgres' (?n) regex on the translations answers exactly as RE2 (and so soundly)."""
    pats, texts = _random_cases(11, 150, 60)
    pats += [REGEX_NO_LITERAL, r"\d{3}-\d{4}", r"(?i)kelvin\d", r"^-\s", r"[^\x00-\x7f]{2}",
             r"\s$", r"(?:^|x)[^a]$", "\u2028.", r"\r$"]
    texts += ["call 555-1234\n", "٣٣٣-٣٣٣٣", "555-\n1234", "\u212aELVIN٣\n", "- x\n-\t", "ab\r\n"]
    engine = create_engine(fresh_pg_url)
    with engine.connect() as conn:
        for p in pats:
            found = translate(p, M)
            assert found is not None and found.compiled is not None, p
            got = conn.execute(text("SELECT t ~ :p FROM unnest(CAST(:ts AS text[])) "
                                    "WITH ORDINALITY AS x(t, n) ORDER BY n"),
                               {"p": found.pg_pattern, "ts": texts}).scalars().all()
            regex = re.compile(p, re.M)
            for t, pg in zip(texts, got, strict=True):
                assert pg == found.keep(t), (p, t, found.pg_pattern)
                if _has_line_match(regex, t):
                    assert pg, (p, t)
    engine.dispose()


# -- through the store, on both databases ---------------------------------------------

EDGE = {
    "/u/digits.md": "phone ٣٣٣-٣٣٣٣ here\nascii 555-1234\n",
    "/u/arabic-only.md": "٣٣٣-٣٣٣٣\n",
    "/u/fullwidth.md": "１２３-４５６７\n",
    "/u/kelvin.md": "\u212a 273\nKELVIN\n",
    "/u/long-s.md": "ſ and S\n",
    "/u/dotless.md": "ı İ i I\n",
    "/u/crlf.md": "123-4567\r\nabc\r\n",
    "/u/no-newline.md": "end 999-0000",
    "/u/blank.md": "\n\n",
    "/u/empty.md": "",
    "/u/tabs.md": "\t\t-\t\n",
    "/u/separators.md": "a\x85b\u2028c 12\n",
    "/u/split.md": "123-\n4567\n",
    "/u/accents.md": "café CAFÉ 42-42\n",
}

STORE_PATTERNS = [
    REGEX_NO_LITERAL, r"\d{3}-\d{4}", r"[0-9]{3}-[0-9]{4}$", r"^[0-9]{3}", r"[0-9]{5}",
    r"\d{3}-\d{4}$", r"(?i)[k]", r"(?i)k\s", r"[^\x00-\x7f]", r"\s\d", r"\d\s*$", r"-\d", r"..-",
    r"\b\d\d\b", r"[٠-٩]+", r"(?i)[a-z]\d", r"(?a)\d{3}", r"\w-\w", r"\W\d", r"\S-", "[ſ]", "ı|İ",
    r"\r$", r"3-$", r"^-", r"x*y", r"a+?b", r"(?:12|٣٣)", r"[^a-z\s]{2}", r"(?i)^[^a-z]+$",
    "\u2028", r"\x85", r"^\t+-", r"[A-Z][a-z]+ [A-Z]", r"^- [a-z]+", r"(?i)^[0-9]{3}", r"\d$",
    # refused: the scan runs as before
    r"(?<=\d)-", r"(\d)\1", r"a*", r"\d\Z",
]


@pytest.fixture
def loaded(store: SqlStore) -> SqlStore:
    # /u/separators.md's U+0085 stands for memory stored before control characters were
    # refused (validators/control_chars.py): grep must still answer over it.
    legacy = store.validator
    store.validator = lambda path, content: []
    try:
        store.bulk_write(S, {**generate(300, seed=7).files, **EDGE})
    finally:
        store.validator = legacy
    store.write("agent:other", "/u/x.md", "555-1234 in another scope\n")
    store.write(S, "/gone.md", "555-1234 deleted\n")
    store.delete(S, "/gone.md")
    return store


def test_grep_matches_plain(loaded: SqlStore, request: pytest.FixtureRequest) -> None:
    patterns = STORE_PATTERNS
    if request.node.callspec.params.get("backend_url") == "pgbouncer":
        # PgBouncer carries the very statements [postgres] sends: every third pattern shows
        # each kind goes through the pooler; the whole set runs on the direct connection.
        patterns = patterns[::3]
    for pattern in patterns:
        for ci in (False, True):
            for mode in ("files_with_matches", "content", "count"):
                kw = {"output_mode": mode, "case_insensitive": ci, "limit": 10**6}
                got = loaded.grep(S, pattern, **kw)  # type: ignore[arg-type]
                assert got == loaded._grep_plain(S, pattern, **kw), (pattern, ci, mode)  # type: ignore[arg-type]
    for pattern in (REGEX_NO_LITERAL, r"\d{3}"):
        for kw in ({"path": "/u"}, {"path": "/u/digits.md"}, {"glob": "u/*.md"}, {"limit": 1},
                   {"limit": 0, "output_mode": "content"}, {"path": "/gone.md"}):
            assert loaded.grep(S, pattern, **kw) == loaded._grep_plain(S, pattern, **kw), kw  # type: ignore[arg-type]


def test_the_filter_runs(loaded: SqlStore) -> None:
    """SQLite: RE2 in Python. Postgres: its own regex over the trigram index."""
    regex = compile_pattern(REGEX_NO_LITERAL, case_insensitive=False, fixed_strings=False)
    with loaded.engine.connect() as conn:
        features = detect(conn)
        if features.pg_trgm:
            # The choice asks the planner's costs: analyze first, so they do not depend on
            # whether autovacuum has analyzed the freshly loaded table yet.
            conn.exec_driver_sql("ANALYZE files")
        condition, keep = prefilter.choose(conn, features, regex)
        if features.pg_trgm:
            assert condition is not None and keep is None
            # pg_trgm cannot narrow five digits in a row: then RE2 in Python.
            five = compile_pattern("[0-9]{5}", case_insensitive=False, fixed_strings=False)
            assert prefilter.choose(conn, features, five)[0] is None
            assert prefilter.choose(conn, features, five)[1] is not None
        else:
            assert condition is None and keep is not None
    found = set(loaded.grep(S, REGEX_NO_LITERAL, limit=10**6).files)
    assert {"/u/crlf.md", "/u/digits.md", "/u/no-newline.md"} <= found
    assert not found & {"/u/arabic-only.md", "/u/fullwidth.md", "/u/split.md"}


@pytest.fixture
def no_cache() -> Iterator[None]:
    translate.cache_clear()
    yield
    translate.cache_clear()


def test_a_pattern_postgres_refuses_only_turns_its_filter_off(
        loaded: SqlStore, monkeypatch: pytest.MonkeyPatch, no_cache: None) -> None:
    real = translate(REGEX_NO_LITERAL, M)
    assert real is not None
    broken = LineFilter(real.re2_pattern, "(?n)[\\U00000030", real.compiled)
    monkeypatch.setattr(prefilter, "for_regex", lambda regex: broken)
    for mode in ("files_with_matches", "content"):
        got = loaded.grep(S, REGEX_NO_LITERAL, output_mode=mode)
        assert got == loaded._grep_plain(S, REGEX_NO_LITERAL, output_mode=mode)
        assert loaded.grep(S, "abc", output_mode=mode) == loaded._grep_plain(S, "abc", output_mode=mode)


def test_without_re2_grep_still_answers(loaded: SqlStore, monkeypatch: pytest.MonkeyPatch,
                                        no_cache: None) -> None:
    monkeypatch.setattr(prefilter, "_re2", lambda: None)
    found = translate(REGEX_NO_LITERAL, M)
    assert found is not None and found.compiled is None
    with loaded.engine.connect() as conn:
        features = detect(conn)
        regex = compile_pattern("[0-9]{5}", case_insensitive=False, fixed_strings=False)
        assert prefilter.choose(conn, features, regex) == (None, None)
    for pattern in (REGEX_NO_LITERAL, "[0-9]{5}"):
        assert loaded.grep(S, pattern, output_mode="content") == loaded._grep_plain(
            S, pattern, output_mode="content")
