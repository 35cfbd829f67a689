"""System-prompt assembly: base instructions + AGENTS.md + skills and subagents indexes.

Invariants:
- The prompt reflects memory as it is now: ``build`` re-reads memory whenever the
  store's generation number for the agent's (or user's) scope has changed, so a
  resumed thread sees current memory, not the memory it started with. The loop asks
  for that check at the start of every turn and after each memory edit of its own.
- Only name + description of skills and subagents enter the prompt (progressive
  disclosure); a file whose frontmatter cannot be read is listed by path with a note,
  never silently dropped.
- The whole system text is one block marked for prompt caching.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from memagent.vfs.errors import NotFound
from memagent.vfs.scopes import AgentView


def base_instructions(agent: str) -> str:
    text = resources.files("memagent.skills_templates").joinpath("prompts/system.md").read_text("utf-8")
    return text.replace("{agent}", agent)


@dataclass(frozen=True)
class SystemPrompt:
    text: str
    agents_md_version: int | None

    def blocks(self) -> list[dict[str, Any]]:
        return [{"type": "text", "text": self.text, "cache_control": {"type": "ephemeral"}}]


def frontmatter_fields(content: str) -> dict[str, Any] | None:
    """The YAML mapping at the top of a Markdown file, or None if there is none/invalid."""
    if not content.startswith("---"):
        return None
    end = content.find("\n---", 3)
    if end == -1:
        return None
    try:
        data = yaml.safe_load(content[3:end])
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


class PromptBuilder:
    def __init__(self, view: AgentView) -> None:
        self.view = view
        self._key: int | None = None
        self._cached: SystemPrompt | None = None

    def _generation(self) -> int:
        scopes = [self.view.scope] + ([f"user:{self.view.user}"] if self.view.user else [])
        return self.view.store.generation(*scopes)

    def build(self, *, check: bool = True) -> SystemPrompt:
        """The prompt for current memory; ``check=False`` trusts the cache if there is one."""
        if not check and self._cached is not None:
            return self._cached
        key = self._generation()
        if self._cached is None or key != self._key:
            self._cached = self._assemble()
            self._key = key
        return self._cached

    def _index(self, patterns: tuple[str, ...]) -> list[str]:
        lines = []
        found: list[str] = []
        for pattern in patterns:
            found += self.view.glob(pattern, "/")
        for path in sorted(set(found)):
            try:
                meta = frontmatter_fields(self.view.read(path).content)
            except NotFound:
                continue
            if not meta or not meta.get("name"):
                lines.append(f"- {path}: (frontmatter unreadable; read and fix this file)")
                continue
            desc = " ".join(str(meta.get("description", "")).split())
            lines.append(f"- {meta['name']} ({path}): {desc}")
        return lines

    def _assemble(self) -> SystemPrompt:
        parts = [base_instructions(self.view.agent)]
        version: int | None = None
        try:
            fc = self.view.read("/AGENTS.md")
            version = fc.version
            body = fc.content.strip() or "(empty: nothing learned yet)"
        except NotFound:
            body = "(there is no /AGENTS.md yet; create it when you learn a standing preference)"
        parts.append(f"# /AGENTS.md (version {version or 0})\n{body}")
        skills = self._index(("skills/*.md", "skills/*/SKILL.md"))
        parts.append("# Skills\n" + ("\n".join(skills) if skills else "(none yet)"))
        subagents = self._index(("subagents/*.md",))
        if subagents:
            parts.append("# Subagents\n" + "\n".join(subagents))
        if self.view.user:
            try:
                user_md = self.view.read("/user/AGENTS.md").content.strip()
            except NotFound:
                user_md = ""
            if user_md:
                parts.append(f"# /user/AGENTS.md (the user's preferences for all agents)\n{user_md}")
        return SystemPrompt("\n\n".join(parts), version)
