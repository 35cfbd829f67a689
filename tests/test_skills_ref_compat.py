"""Exported skills stay valid elsewhere: every skill our validator accepts also
passes the Agent Skills reference validator (the ``skills-ref`` package), and
skills that break a rule we share with it are refused by both.

skills-ref validates a skill *directory*, so each case is written to
``<tmp>/<name>/SKILL.md`` and checked as ``/skills/<name>/SKILL.md`` here.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import skills_ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memagent.validators import validate

VALID_DIR = Path(__file__).parent / "fixtures" / "validators" / "valid" / "skills"


def ours(name: str, content: str) -> list[str]:
    return [str(p) for p in validate(f"/skills/{name}/SKILL.md", content)]


def reference(root: Path, name: str, content: str) -> list[str]:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(content, encoding="utf-8")
    return list(skills_ref.validate(folder))


def fixture_skills() -> list[tuple[str, str]]:
    """(name, content) of every skill fixture, flat files and SKILL.md folders alike."""
    out = []
    for file in sorted(VALID_DIR.rglob("*.md")):
        if file.parent == VALID_DIR:
            out.append((file.stem, file.read_text(encoding="utf-8")))
        elif file.name == "SKILL.md":
            out.append((file.parent.name, file.read_text(encoding="utf-8")))
    return out


def fm(front: str, body: str = "# Steps\n\n1. Do the thing.\n") -> str:
    return f"---\n{front}---\n{body}"


D = "description: Turn raw notes into a summary. Use when the user pastes notes.\n"

VARIANTS: list[tuple[str, str]] = [
    ("notes", fm("name: notes\n" + D)),
    ("notes", fm("name: notes\n" + D, "")),
    ("notes", fm('name: "notes"\n' + D)),
    ("notes", fm("name: 'notes'  # the folder name\n" + D)),
    ("a", fm("name: a\ndescription: x\n")),
    ("x" * 64, fm(f"name: {'x' * 64}\ndescription: {'d' * 1024}\n")),
    ("v2-api-9", fm("name: v2-api-9\n" + D)),
    ("notes", fm("name: notes\ndescription: 'Use when: notes arrive; it''s quick.'\n")),
    ("notes", fm('name: notes\ndescription: "Quotes \\"inside\\", colons: fine, #hash"\n')),
    ("notes", fm("name: notes\ndescription: >-\n  Folded over\n  two lines.\n")),
    ("notes", fm("name: notes\ndescription: |\n  Literal\n  block.\n")),
    ("notes", fm("name: notes\ndescription: Café ☕, naïve résumé, 日本語 🚀\n")),
    ("notes", fm("name: notes\ndescription: Use [this] and {that}, 100% sure.\n")),
    ("notes", fm("name: notes\n" + D + "license: Apache-2.0\ncompatibility: " + "c" * 500 + "\n")),
    (
        "notes",
        fm(
            "name: notes\n" + D + "metadata:\n  author: ana\n  version: '1.0'\n"
            "  released: \"2025-01-01\"\n  empty: ''\n"
        ),
    ),
    ("notes", fm("name: notes\n" + D + "allowed-tools: Bash(git:*) Read read_file\n")),
    ("notes", fm("# a comment line\nname: notes\n\n" + D + "...\n")),
    ("notes", fm("name: notes\n" + D, "Body with a rule:\n\n---\n\nand more --- dashes.\n")),
    ("notes", fm("name: notes\n" + D).replace("\n", "\r\n")),
]


@pytest.mark.parametrize(
    ("name", "content"),
    fixture_skills() + VARIANTS,
    ids=[f"{n[:20]}-{i}" for i, (n, _) in enumerate(fixture_skills() + VARIANTS)],
)
def test_skill_we_accept_is_accepted_by_reference(name: str, content: str, tmp_path: Path) -> None:
    assert ours(name, content) == []
    assert reference(tmp_path, name, content) == []


def test_fixture_skills_are_found() -> None:
    assert {n for n, _ in fixture_skills()} >= {"meeting-notes", "pdf-forms"}


# Shared rules: both validators must refuse these.
BOTH_REFUSE: list[tuple[str, str, str]] = [
    ("uppercase-name", "notes", fm("name: Notes\n" + D)),
    ("leading-hyphen", "-notes", fm("name: -notes\n" + D)),
    ("trailing-hyphen", "notes-", fm("name: notes-\n" + D)),
    ("double-hyphen", "my--notes", fm("name: my--notes\n" + D)),
    ("name-too-long", "n" * 65, fm(f"name: {'n' * 65}\n" + D)),
    ("name-not-folder", "notes", fm("name: other\n" + D)),
    ("underscore", "my_notes", fm("name: my_notes\n" + D)),
    ("missing-name", "notes", fm(D)),
    ("missing-description", "notes", fm("name: notes\n")),
    ("empty-description", "notes", fm("name: notes\ndescription: ''\n")),
    ("long-description", "notes", fm("name: notes\ndescription: " + "d" * 1025 + "\n")),
    ("long-compatibility", "notes", fm("name: notes\n" + D + "compatibility: " + "c" * 501 + "\n")),
    ("unknown-key", "notes", fm("name: notes\n" + D + "version: '2'\n")),
    ("no-frontmatter", "notes", "# Notes\n\nJust a body.\n"),
    ("unclosed", "notes", "---\nname: notes\n" + D),
    ("flow-style", "notes", fm("name: notes\n" + D + "metadata: {author: ana}\n")),
    ("duplicate-key", "notes", fm("name: notes\nname: notes\n" + D)),
    ("anchor", "notes", fm("name: &n notes\n" + D)),
    ("tag", "notes", fm("name: !!str notes\n" + D)),
    ("yaml-error", "notes", fm("name: notes\ndescription: Use when: asked\n")),
]


@pytest.mark.parametrize(("case", "name", "content"), BOTH_REFUSE, ids=[c for c, _, _ in BOTH_REFUSE])
def test_shared_rule_is_enforced_by_both(case: str, name: str, content: str, tmp_path: Path) -> None:
    assert ours(name, content), f"{case}: we accepted it"
    assert reference(tmp_path, name, content), f"{case}: skills-ref accepted it"


# --- generated skills: "we accept" must imply "skills-ref accepts" ----------------------

_NAME_CHARS = "abcz019-_A "
_TEXT = st.text(
    alphabet=st.sampled_from(list("abcXYZ019 .,") * 4 + list(":#'\"-{}[]>|&*!%@`\t"))
    | st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
    min_size=1,
    max_size=60,
)


def _scalar(draw: st.DrawFn, text: str) -> str:
    style = draw(st.sampled_from(["plain", "single", "double", "folded", "literal"]))
    if style == "single":
        return "'" + text.replace("'", "''") + "'"
    if style == "double":
        return json.dumps(text, ensure_ascii=False)
    if style in ("folded", "literal") and text.strip() and "\n" not in text:
        return (">-" if style == "folded" else "|") + "\n  " + text
    return text


@st.composite
def generated_skill(draw: st.DrawFn) -> tuple[str, str]:
    # Mostly valid names, so that many generated skills pass ours and get compared.
    folder = draw(
        st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,2}", fullmatch=True)
        | st.text(alphabet=_NAME_CHARS, min_size=1, max_size=12).filter(
            lambda s: s.strip(" ") == s and s not in (".", "..")
        )
    )
    name = draw(st.sampled_from([folder, folder, folder.lower(), "notes"]))
    lines = [f"name: {_scalar(draw, name)}", f"description: {_scalar(draw, draw(_TEXT))}"]
    for key in draw(
        st.lists(
            st.sampled_from(["license", "compatibility", "allowed-tools", "metadata", "extra"]),
            unique=True,
            max_size=3,
        )
    ):
        if key == "metadata":
            k, v = draw(st.sampled_from(["author", "version", "x y"])), draw(_TEXT)
            lines.append(f"metadata:\n  {k}: {_scalar(draw, v)}")
        else:
            lines.append(f"{key}: {_scalar(draw, draw(_TEXT))}")
    opening = draw(st.sampled_from(["---", "---", "--- ", "---\r"]))
    body = draw(st.sampled_from(["", "# Body\n", "text\n---\nmore\n"]))
    return folder, opening + "\n" + "\n".join(lines) + "\n---\n" + body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated_skill())
def test_generated_skill_accepted_by_us_is_accepted_by_reference(case: tuple[str, str]) -> None:
    name, content = case
    if ours(name, content):
        return  # we refuse it: nothing to compare (refusing more is allowed)
    with tempfile.TemporaryDirectory() as tmp:
        assert reference(Path(tmp), name, content) == [], content


def test_dashes_inside_frontmatter_are_refused_because_reference_truncates(tmp_path: Path) -> None:
    # skills-ref splits the file on the first two "---": it would silently read a
    # shorter description, so we refuse rather than export a skill read differently.
    content = fm("name: notes\ndescription: one --- two\n")
    assert ours("notes", content)
    reference(tmp_path, "notes", content)
    assert skills_ref.read_properties(tmp_path / "notes").description == "one"
