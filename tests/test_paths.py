"""Path rules, as examples and as properties (hypothesis)."""

from __future__ import annotations

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
