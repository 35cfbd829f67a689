"""Path rules, as examples and as properties (hypothesis)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memagent.vfs.errors import InvalidPath
from memagent.vfs.paths import normalize, normalize_file

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
