"""Frontmatter across harnesses: skills from the wild in, their own keys back out.

Skills elsewhere carry keys the Agent Skills spec lacks (``version``,
``when_to_use``, ``argument-hint``...), lists where the spec wants strings, or no
``name``. ``import_skill`` rewrites such a file into one our validator accepts:
spec keys first, every other key moved under ``metadata`` as a string, and the
original frontmatter kept verbatim in ``metadata.memagent-original-frontmatter``.
``export_skill`` drops that marker and nothing else. Invariants:

- A skill that already passes our validator is never rewritten (byte for byte).
- Every exported ``SKILL.md`` passes the Agent Skills spec (skills-ref validate):
  keys outside the spec stay under ``metadata`` in every format.
- The round trip is lossless through the export manifest: ``import(export(m))``
  differs from ``m`` only by the marker, so the manifest keeps the stored file and
  the import gives it back; the kept original frontmatter then gives the original
  bytes (``metadata.memagent-original-frontmatter``) to whoever needs them.
- Emitted YAML is block style with plain or double-quoted scalars and never
  contains ``---`` (Agent Skills tools end the frontmatter there), so it passes
  both our validator and the skills-ref reference validator.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from memagent.validators import read_frontmatter, validate

from .base import Note

MARKER = "memagent-original-frontmatter"
SPEC_KEYS = ("name", "description", "license", "compatibility", "allowed-tools", "metadata")
MAX_DESCRIPTION = 1024


# -- scalars ---------------------------------------------------------------------


def quoted(text: str) -> str:
    """A YAML double-quoted scalar that never contains ``---``."""
    return json.dumps(text, ensure_ascii=False).replace("---", "-\\x2d-")


def scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain when YAML reads it back unchanged, else quoted."""
    if text and text == text.strip() and "\n" not in text and "---" not in text and not text.startswith(("'", '"')):
        try:
            if yaml.safe_load(f"k: {text}") == {"k": text}:
                return text
        except yaml.YAMLError:
            pass
    return quoted(text)


def as_text(value: Any) -> str:
    """A frontmatter value as the string memagent keeps under ``metadata``."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)  # dates and the like: their ISO text


def split_header(content: str) -> tuple[str, str] | None:
    """(frontmatter block including both ``---`` lines, body), or None without readable frontmatter."""
    doc = read_frontmatter(content)
    if doc.meta is None or not content.endswith(doc.body):
        return None
    return content[: len(content) - len(doc.body)], doc.body


def emit(pairs: list[tuple[str, Any]], body: str) -> str:
    """A frontmatter document from ordered (key, value) pairs; values are str, list[str] or dict[str, str]."""
    lines = ["---"]
    for key, value in pairs:
        k = scalar(key)
        if isinstance(value, dict):
            lines.append(f"{k}:")
            lines += [f"  {scalar(str(ik))}: {scalar(iv)}" for ik, iv in value.items()]
        elif isinstance(value, list):
            lines.append(f"{k}: [{', '.join(scalar(v) for v in value)}]")
        else:
            lines.append(f"{k}: {scalar(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n" + body


def first_paragraph(body: str) -> str:
    """The first paragraph of prose in ``body`` (headings skipped), for a missing description."""
    para: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped:
            if para:
                break
            continue
        if stripped.startswith(("#", "```", "---")) and not para:
            continue
        para.append(stripped)
    text = " ".join(para).replace("---", "-")
    return text[:MAX_DESCRIPTION].strip()


# -- skills ----------------------------------------------------------------------


def _skill_ok(name: str, content: str) -> bool:
    return not validate(f"/skills/{name}/SKILL.md", content)


def _lift(name: str, meta: dict[str, Any], body: str) -> tuple[list[tuple[str, Any]], list[str]]:
    """The spec-shaped frontmatter pairs for ``meta``, and what had to change (for notes)."""
    changes: list[str] = []
    pairs: list[tuple[str, Any]] = [("name", name)]
    if meta.get("name") != name:
        changes.append(f"name set to '{name}' (the folder name)" + (
            f"; it was {as_text(meta['name'])!r}" if "name" in meta else ""))
    description = meta.get("description")
    if isinstance(description, str) and description.strip():
        pairs.append(("description", description[:MAX_DESCRIPTION]))
        if len(description) > MAX_DESCRIPTION:
            changes.append(f"description cut to {MAX_DESCRIPTION} characters")
    else:
        pairs.append(("description", first_paragraph(body) or f"The {name} skill."))
        changes.append("description taken from the body (it had none)")
    for key in ("license", "compatibility", "allowed-tools"):
        if key in meta and meta[key] is not None:
            value = meta[key]
            if key == "allowed-tools" and isinstance(value, list):
                text = " ".join(as_text(v) for v in value)
                changes.append("allowed-tools list written as one space-separated string")
            else:
                text = as_text(value)
            if text.strip():
                pairs.append((key, text))
    metadata: dict[str, str] = {}
    lifted: list[str] = []
    for key, value in meta.items():
        if key in SPEC_KEYS:
            continue
        metadata[str(key)] = as_text(value)
        lifted.append(str(key))
    given = meta.get("metadata")
    if isinstance(given, dict):
        for key, value in given.items():
            if str(key) in metadata or str(key) == MARKER:
                changes.append(f"metadata.{key} clashes with a top-level key; the top-level value is kept")
                continue
            metadata[str(key)] = as_text(value)
    elif given is not None:
        metadata["metadata"] = as_text(given)
        lifted.append("metadata")
    if lifted:
        changes.append(f"{', '.join(lifted)} moved under metadata (Agent Skills has no such key)")
    if metadata:
        pairs.append(("metadata", metadata))
    return pairs, changes


def import_skill(name: str, content: str, source: str) -> tuple[str, list[Note]]:
    """A skill file from elsewhere as memagent stores it; the notes say what changed."""
    if _skill_ok(name, content):
        return content, []
    split = split_header(content)
    if split is None:
        if content.lstrip("\ufeff \t\r\n").startswith("---"):
            return content, []  # frontmatter that cannot be read: the validator will say where
        # No frontmatter at all (a Claude Code command, a bare note): give it one.
        pairs, _ = _lift(name, {}, content)
        return emit(pairs, content), [Note(source, "had no frontmatter; name and description were added")]
    header, body = split
    meta = read_frontmatter(content).meta or {}
    pairs, changes = _lift(name, meta, body)
    metadata = dict(pairs[-1][1]) if pairs[-1][0] == "metadata" else {}
    metadata[MARKER] = header
    if pairs[-1][0] == "metadata":
        pairs[-1] = ("metadata", metadata)
    else:
        pairs.append(("metadata", metadata))
    note = "; ".join(changes) if changes else "frontmatter rewritten in the Agent Skills shape"
    return emit(pairs, body), [Note(source, note + "; the original frontmatter is kept for export")]


def export_skill(content: str) -> str:
    """A stored skill as every target gets it: valid Agent Skills frontmatter, the keys
    outside the spec still under ``metadata`` (as strings), only the import marker gone.

    None of the targets (Claude Code, Codex, OpenCode, deepagents) reads a skill's extra
    keys from anywhere skills-ref accepts, so none gets them back at the top level: a
    ``SKILL.md`` there would fail the spec for a hint the harness may or may not use.
    The original bytes come back on import through the export manifest, which records
    every file the import of the export would not give back exactly."""
    doc = read_frontmatter(content)
    meta = doc.meta
    if not meta or not isinstance(meta.get("metadata"), dict) or MARKER not in meta["metadata"]:
        return content
    pairs: list[tuple[str, Any]] = [(str(k), as_text(v)) for k, v in meta.items() if k != "metadata"]
    metadata = {str(k): as_text(v) for k, v in meta["metadata"].items() if k != MARKER}
    if metadata:
        pairs.append(("metadata", metadata))
    return emit(pairs, doc.body)


# -- subagents ---------------------------------------------------------------------


def read_agent(content: str) -> tuple[dict[str, Any], str]:
    """(frontmatter values, body) of an agent file; no frontmatter gives ({}, content)."""
    doc = read_frontmatter(content)
    return (doc.meta or {}), doc.body


def subagent_file(name: str, description: str, tools: list[str] | None, model: str | None, body: str) -> str:
    """A memagent subagent in its canonical shape."""
    pairs: list[tuple[str, Any]] = [("name", name), ("description", description)]
    if tools is not None:
        pairs.append(("tools", tools))
    if model:
        pairs.append(("model", model))
    return emit(pairs, body)


def tool_list(value: Any) -> list[str] | None:
    """Tool names from a frontmatter value: a list, or a comma/space separated string."""
    if value is None:
        return None
    if isinstance(value, list):
        return [as_text(v).strip() for v in value if as_text(v).strip()]
    return [t for t in re.split(r"[,\s]+", as_text(value)) if t]
