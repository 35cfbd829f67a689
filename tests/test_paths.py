"""Path rules, as examples and as properties (hypothesis)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memagent.vfs.errors import InvalidPath
from memagent.vfs.paths import lookalike_key, normalize, normalize_file

segments = st.sampled_from(["a", "b", "..", ".", "", "skills", "x.md", "ü", " sp ace"])
raw_paths = st.lists(segments, max_size=12).map(lambda parts: "/".join(parts)) | st.text(max_size=80)


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("/AGENTS.md", "/AGENTS.md"), ("AGENTS.md", "/AGENTS.md"), ("//a///b", "/a/b"),
     ("/a/./b/", "/a/b"), ("/a/b/../c", "/a/c"), ("/", "/"), ("/a/..", "/")],
)
def test_examples(raw: str, norm: str) -> None:
    assert normalize(raw) == norm


@pytest.mark.parametrize(
    ("raw", "why"),
    [("../../etc/passwd", "above the root"), ("/a/../../b", "above the root"),
     ("/a\x00b", "NUL"), ("/a\nb", "control"), ("/a\\b", "backslash"), ("", "empty"),
     ("/" + "x" * 256, "at most 255 bytes"), ("/" + "/".join(["y" * 200] * 10), "1024 bytes"),
     ("/" + "é" * 128, "at most 255 bytes")],
)
def test_refused(raw: str, why: str) -> None:
    with pytest.raises(InvalidPath, match=why):
        normalize(raw)


def test_file_paths_refuse_directories() -> None:
    for raw in ("/", "/skills/"):
        with pytest.raises(InvalidPath, match="directory"):
            normalize_file(raw)


@given(raw_paths)
def test_normalize_properties(raw: str) -> None:
    try:
        out = normalize(raw)
    except InvalidPath as exc:
        assert str(exc) and "\n" not in str(exc)  # one refusal type, one line
        return
    assert out.startswith("/")
    assert ".." not in out.split("/") and "." not in out.split("/")
    assert "//" not in out and (out == "/" or not out.endswith("/"))
    assert normalize(out) == out  # idempotent
    assert len(out.encode()) <= 1024


REFUSED_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"}
# Characters that look like nothing, or reorder what follows, in a diff or an approval.
SNEAKY = ["\x85", "\x9f", "\x80", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067",
          "\u2068", "\u2069", "\u200b", "\u200e", "\u200f", "\u2060", "\ufeff", "\u00ad", "\u2028",
          "\u2029", "\U000e0041", "\ud800", "\u0378", "\x7f", "\t"]


@pytest.mark.parametrize("ch", SNEAKY)
def test_invisible_and_control_characters_refused(ch: str) -> None:
    with pytest.raises(InvalidPath) as err:
        normalize(f"/notes/report{ch}txt.md")
    msg = str(err.value)
    assert f"U+{ord(ch):04X}" in msg and "\n" not in msg and "remove it" in msg
    assert ch not in msg  # shown escaped, never raw


def test_refusal_names_the_character() -> None:
    with pytest.raises(InvalidPath, match=r"U\+202E RIGHT-TO-LEFT OVERRIDE \(an invisible formatting character\)"):
        normalize("/x\u202edm.txt")
    with pytest.raises(InvalidPath, match=r"U\+0085 \(a control character\)"):
        normalize("/a\x85b")


def test_visible_unicode_still_accepted() -> None:
    for raw in ("/ü/✓.md", "/日本語/ノート.md", "/😀.md", "/a b/c-d_e.md", "/\u00a0nbsp.md"):
        assert normalize(raw) == raw


sneaky_paths = st.lists(
    st.sampled_from(["a", "/", "ü", "."]) | st.sampled_from(SNEAKY) | st.characters(), max_size=20
).map("".join)


@given(sneaky_paths | st.text(max_size=40))
def test_no_accepted_path_holds_an_invisible_character(raw: str) -> None:
    try:
        out = normalize(raw)
    except InvalidPath as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert not {unicodedata.category(c) for c in out} & REFUSED_CATEGORIES


# -- one spelling per path: NFC, and no character that reads as a folder separator --------------------


def test_paths_are_nfc_so_two_spellings_that_render_the_same_are_one_path() -> None:
    nfd, nfc = "/cafe\u0301/t.md", "/caf\u00e9/t.md"
    assert normalize(nfd) == nfc == normalize(nfc)
    assert normalize("/A\u030angstro\u0308m.md") == "/\u00c5ngstr\u00f6m.md"
    assert normalize_file("/ko\u0301/x.md") == "/k\u00f3/x.md"


@given(raw_paths | st.text(alphabet=st.sampled_from("ae/\u0301\u0308\u0338\u00e9 ."), max_size=20))
def test_every_accepted_path_is_nfc(raw: str) -> None:
    try:
        out = normalize(raw)
    except InvalidPath:
        return
    assert unicodedata.is_normalized("NFC", out) and normalize(out) == out


# Characters a reader takes for "/" (or "\"): refused outright, named by code point.
SLASH_LOOKALIKES = ["\u2215", "\u2044", "\uff0f", "\u29f8", "\u2571", "\u27cb", "\u2f03", "\u3033",
                    "\u2216", "\u29f5", "\u29f9", "\ufe68", "\uff3c", "\u2572"]


@pytest.mark.parametrize("ch", SLASH_LOOKALIKES)
def test_slash_lookalikes_refused_outright(ch: str) -> None:
    with pytest.raises(InvalidPath) as err:
        normalize(f"/knowledge{ch}x.md")
    msg = str(err.value)
    assert f"U+{ord(ch):04X}" in msg and "looks like" in msg and "\n" not in msg


@pytest.mark.parametrize("raw", ["/knowledge%2fx.md", "/knowledge%2Fx.md", "/a/b%5cc.md", "/a/b%5C.md"])
def test_percent_encoded_separators_refused(raw: str) -> None:
    with pytest.raises(InvalidPath, match="percent-encoded") as err:
        normalize(raw)
    assert "\n" not in str(err.value)


def test_percent_signs_and_cjk_names_still_accepted() -> None:
    for raw in ("/100%.md", "/a%20b.md", "/%2.md", "/日本語/ノート.md", "/a/≠.md"):
        assert normalize(raw) == raw


@pytest.mark.parametrize(("a", "b"), [
    ("knowledge", "Knowledge"), ("knowledge", "\uff4bnowledge"), ("knowledge", "kno\u0301wledge"),
    ("knowledge", "knowledge\u0338"), ("knowledge", "knowledge "), ("knowledge", "knowledge."),
    ("knowledge", "knowledge\u00a0"), ("knowledge", "kn\u043ewledge"), ("notes.md", "NOTES.MD"),
    ("my-notes.md", "my\u2010notes.md"), ("a b.md", "a  b.md"), ("\u0391\u0392.md", "ab.md"),
    ("stra\u00dfe", "STRASSE"), ("\ufb01le.md", "file.md"),
])
def test_lookalike_names_share_a_key(a: str, b: str) -> None:
    assert lookalike_key(a) == lookalike_key(b)


@pytest.mark.parametrize(("a", "b"), [
    ("notes.md", "notes2.md"), ("notes.md", "notes.txt"), (".env.md", "env.md"), ("a-b.md", "a_b.md"),
    ("log0.md", "logo.md"), ("\u0915\u0941\u0932", "\u0915\u0932"), ("kno wledge", "knowledge"),
])
def test_distinct_names_keep_distinct_keys(a: str, b: str) -> None:
    assert lookalike_key(a) != lookalike_key(b)
