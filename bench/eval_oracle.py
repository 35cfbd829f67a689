"""Scripted instant models for ``memagent eval``: one that uses memory, one that ignores it.

``OracleModel(uses_memory=True)`` behaves like a diligent agent with nothing but
rules: it applies the rules it can see (the system prompt's memory, the running
summary, the thread), saves standing preferences to ``/AGENTS.md``, turns a
worked-out procedure into a skill on ``/remember``, generalises repeated cases on
``/compact``, searches and reads memory and ``/conversations/`` to answer questions,
reads a matching skill and follows it, hands a task to a matching subagent and
calls the MCP tools it is offered when asked. ``uses_memory=False`` answers every
request with text from the user's words alone and never calls a tool. Both answer
at once (no network), so the harness's own cost can be measured, and the tests can
show the harness passes the first and fails the second.

Invariants: decisions depend only on the request (no state between calls), so a
request replayed gets the same answer; every write carries content the validators
accept; unknown situations end the turn with a plain answer, never a loop.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memagent.agent.model import ModelRequest, ModelResponse, Usage
from memagent.agent.model.base import TextCallback

RULE = re.compile(r"(?i)\b(from now on|always|never|i prefer|for this whole conversation)\b")
PROCEDURE = re.compile(r"(?i)^to ([a-z][a-z ]{2,40}?):\s*(.+)$")
SECRET = re.compile(r"(?i)\b(sk-[a-z0-9-]{8,}|password|api[_ ]key|token)\b|\bkey:")
CASE = re.compile(r"^- (.+?) \((.+?)\): (.+?)\.?$")
MEMORY_BLOCK = re.compile(r'<memory path="([^"]+)"[^>]*>\n(.*?)\n</memory>', re.S)
STOP = {"the", "a", "an", "of", "in", "on", "is", "are", "was", "what", "which", "who", "when", "did", "we",
        "about", "to", "for", "and", "it", "you", "i", "do", "does", "last", "week", "s", "me", "my", "our"}
REMEMBER_MARK = "Look back over this conversation"
COMPACT_MARK = "Compact your memory"
REFLECT_MARK = "You are reflecting in the background"
REFLECT_USER = re.compile(r"## User · \d\d:\d\d\n\n(.*?)(?=\n## |\n</conversation>)", re.S)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")


def _results(content: Any) -> list[str]:
    if isinstance(content, str):
        return []
    out = []
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            c = b.get("content")
            out.append(c if isinstance(c, str) else _text(c or []))
    return out


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+", text.strip())
    return [p.strip() for p in parts if p.strip()]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 2}


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))[:60]


def _rule_line(sentence: str) -> str:
    """A standing rule as an AGENTS.md line: the sentence without the teaching words."""
    s = re.sub(r"(?i)^(no,?\s*)?(remember,?\s*)?", "", sentence).strip()
    s = re.sub(r"(?i)\b(from now on|always)\b,?\s*", "", s).strip()
    s = re.sub(r"(?i)^i prefer\s+", "Prefer ", s)
    s = s.rstrip(".!") + "."
    return "- " + s[:1].upper() + s[1:]


class OracleModel:
    """A ``Model`` that answers by rule (see the module docstring)."""

    def __init__(self, *, uses_memory: bool = True, name: str = "scripted-oracle") -> None:
        self.uses_memory = uses_memory
        self.name = name
        self.calls = 0
        self.summaries = 0  # requests without tools: the context budget folding a thread
        self._ids = 0

    # -- Model ---------------------------------------------------------------------

    def respond(self, request: ModelRequest, *, on_text: TextCallback | None = None,
                on_retry: TextCallback | None = None) -> ModelResponse:
        self.calls += 1
        out = self._decide(request)
        content: list[dict[str, Any]]
        if isinstance(out, str):
            content = [{"type": "text", "text": out}]
            if on_text is not None:
                on_text(out)
            stop = "end_turn"
        else:
            content = []
            for name, args in out:
                self._ids += 1
                content.append({"type": "tool_use", "id": f"toolu_oracle_{self._ids:05d}", "name": name,
                                "input": args})
            stop = "tool_use"
        size = len(json.dumps([request.system, request.tools, request.messages], default=str)) // 4
        return ModelResponse(content, stop, Usage(input_tokens=size, output_tokens=len(json.dumps(content)) // 4),
                             self.name)

    # -- deciding ------------------------------------------------------------------

    def _decide(self, request: ModelRequest) -> str | list[tuple[str, dict[str, Any]]]:
        system = "\n".join(_text([b]) for b in request.system)
        messages = request.messages
        tools = {t["name"] for t in request.tools}
        start = max((i for i, m in enumerate(messages) if m["role"] == "user" and _text(m["content"]).strip()),
                    default=0)
        user = _text(messages[start]["content"]) if messages else ""
        results = [r for m in messages[start + 1:] if m["role"] == "user" for r in _results(m["content"])]
        step = sum(1 for m in messages[start + 1:] if m["role"] == "assistant")
        if not tools and "strict grader" in system:
            # A benchmark's judge: yes when the correct answer is in the assistant's answer.
            gold = re.search(r"Correct answer: (.*)", user)
            said = re.search(r"Assistant's answer: (.*)", user)
            found = gold and said and _words(gold.group(1)) <= _words(said.group(1))
            return "yes" if found else "no"
        if not tools:
            self.summaries += 1
            return self._summary(messages)
        if not self.uses_memory:
            return self._plain(user, "")
        visible = system + "\n" + "\n".join(_text(m["content"]) for m in messages[:start])
        agents = self._agents_md(system)
        # The chat sends a built-in prompt after what the person typed (/remember): look inside.
        if REMEMBER_MARK in user or user.startswith(REFLECT_MARK):
            return self._consolidate(step, agents, messages[:start], user, results)
        if COMPACT_MARK in user:
            return self._compact(step, agents)
        if "task" not in tools:
            return self._subagent(system, user)
        if RULE.search(user) and "this whole conversation" not in user.lower():
            if step == 0:
                return [("write_file", {"file_path": "/AGENTS.md", "content": self._merged(agents, [user]),
                                        "reason": "a standing preference the user gave"})]
            return "Noted; I saved that to /AGENTS.md." if not any("rror" in r[:40] for r in results) \
                else "I could not save that preference: the change was not approved."
        forget = re.search(r"(?i)forget the notes about ([a-z0-9 ]+)", user)
        if forget:
            return self._forget(step, _slug(forget.group(1)), results)
        mcp = [t for t in sorted(tools) if t.startswith("mcp__") and t.rsplit("__", 1)[-1] in user.lower()]
        if mcp:
            if step == 0:
                quoted = re.findall(r"'([^']+)'", user)
                return [(mcp[0], {"query": quoted[-1] if quoted else user})]
            return f"The directory says: {results[-1] if results else 'nothing'}"
        skill = self._match_index(system, "# Skills", user)
        if skill is not None:
            if step == 0:
                return [("read_file", {"file_path": skill})]
            steps = re.findall(r"`([^`]+)`", results[-1] if results else "")
            body = self._plain(user.split(":", 1)[-1] if ":" in user else user, visible)
            return "\n".join([steps[0], body, *steps[1:]]) if steps else body
        sub = self._match_index(system, "# Subagents", user)
        if sub is not None:
            if step == 0:
                name = sub.rsplit("/", 1)[-1].removesuffix(".md")
                return [("task", {"subagent": name, "description": user})]
            return results[-1] if results else "The subagent gave no answer."
        if user.rstrip().endswith("?") and not re.search(r"(?i)it is on", user):
            return self._recall(step, user, results)
        return self._plain(user, visible)

    @staticmethod
    def _agents_md(system: str) -> str:
        for path, body in MEMORY_BLOCK.findall(system):
            if path == "/AGENTS.md":
                return "" if body.startswith("(") else body
        return ""

    @staticmethod
    def _match_index(system: str, heading: str, user: str) -> str | None:
        """The path of the first index entry under ``heading`` whose name or description fits ``user``."""
        if heading not in system:
            return None
        section = system.split(heading, 1)[1].split("\n#", 1)[0]
        words = {w[:7] for w in _words(user) if len(w) > 3}
        for name, path, desc in re.findall(r"^- (\S+) \((\S+)\): (.*)$", section, re.M):
            if set(name.split("-")) <= _words(user) or ({w[:7] for w in _words(desc) if len(w) > 5} & words):
                return str(path)
        return None

    def _summary(self, messages: list[dict[str, Any]]) -> str:
        if not self.uses_memory:
            return "Earlier turns: summaries of several topics."
        rules = [s for m in messages if m["role"] == "user" for s in _sentences(_text(m["content"]))
                 if RULE.search(s)]
        return "Earlier in this conversation: the user asked for summaries." + \
            ("".join(f"\nRule the user set: {r}" for r in rules))

    def _plain(self, user: str, visible: str) -> str:
        """The answer from the user's words, shaped by the rules ``visible`` holds (none when ignoring)."""
        body = user.split(":", 1)[1] if user.lower().startswith(("summarise:", "note it down:")) else user
        items = [i.strip().rstrip(".") for i in re.split(r"[;]", body) if i.strip()]
        if re.search(r"(?i)YYYY-MM-DD", visible):
            months = {m: n for n, m in enumerate(["january", "february", "march", "april", "may", "june", "july",
                                                 "august", "september", "october", "november", "december"], 1)}

            def iso(m: re.Match[str]) -> str:
                return f"{m.group(3)}-{months[m.group(2).lower()]:02d}-{int(m.group(1)):02d}"

            items = [re.sub(r"(?i)\b(\d{1,2}) (" + "|".join(months) + r") (\d{4})\b", iso, i) for i in items]
        lang = re.findall(r"(?i)reply in (french|english)", self._agents_md(visible) or "")
        french = bool(lang) and lang[-1].lower() == "french"
        bullets = re.search(r"(?i)bullet", visible) is not None
        text = "\n".join(f"- {i}" for i in items) if bullets else "; ".join(items) + "."
        if french:
            text = "Réponse : " + text
        if re.search(r"(?i)euros", self._agents_md(visible) or ""):
            text = re.sub(r"\b(\d+)\b(?! ?EUR)", r"\1 EUR", text)
        ending = re.findall(r"(?i)end every answer with '([^']+)'", visible)
        if ending:
            text = f"{text}\n\n{ending[-1]}"
        return text

    def _merged(self, agents: str, texts: list[str]) -> str:
        """AGENTS.md with the rules of ``texts`` added: a rule replaces a line it contradicts,
        one already there is not repeated, secrets are never copied."""
        lines = agents.splitlines() or ["# Preferences"]
        for text in texts:
            for sentence in _sentences(text):
                if not RULE.search(sentence) or SECRET.search(sentence) or PROCEDURE.match(sentence):
                    continue
                rule = _rule_line(sentence)
                new = _words(rule)
                same = [i for i, line in enumerate(lines) if line.startswith("- ") and new <= _words(line) | {"use"}]
                if same or any(_words(line) >= new - {"remember"} for line in lines if line.startswith("- ")):
                    continue
                clash = [i for i, line in enumerate(lines) if line.startswith("- ")
                         and len(_words(line) & new) >= 2]
                if clash:
                    lines[clash[0]] = rule.replace(" instead of french", "")
                else:
                    lines.append(rule)
        return "\n".join(lines).rstrip() + "\n"

    def _consolidate(self, step: int, agents: str, before: list[dict[str, Any]], user: str,
                     results: list[str]) -> str | list[tuple[str, dict[str, Any]]]:
        if step > 0:
            return "I updated memory: " + ("the change was refused." if any("rror" in r[:60] for r in results)
                                           else "saved what is worth keeping.")
        said = [_text(m["content"]) for m in before if m["role"] == "user"]
        if user.startswith(REFLECT_MARK):
            said = [t.strip() for t in REFLECT_USER.findall(user)]
        calls: list[tuple[str, dict[str, Any]]] = []
        merged = self._merged(agents, said)
        if merged != (agents.rstrip() + "\n" if agents else "") and merged.strip() != "# Preferences":
            calls.append(("write_file", {"file_path": "/AGENTS.md", "content": merged,
                                         "reason": "standing preferences from the conversation"}))
        for text in said:
            for sentence in _sentences(text):
                m = PROCEDURE.match(sentence)
                if m is None:
                    continue
                name = _slug(m.group(1))
                steps = [s.strip().rstrip(".") for s in m.group(2).split(",") if s.strip()]
                body = "\n".join(f"{n}. {s[:1].upper()}{s[1:]}." for n, s in enumerate(steps, 1))
                calls.append(("write_file", {"file_path": f"/skills/{name}.md", "content":
                              f"---\nname: {name}\ndescription: How to {m.group(1)}. Use when asked to "
                              f"{m.group(1)}.\n---\n\n# {m.group(1).capitalize()}\n\n{body}\n",
                              "reason": "a procedure worked out in the conversation"}))
        return calls or "Nothing in this conversation is worth keeping."

    def _compact(self, step: int, agents: str) -> str | list[tuple[str, dict[str, Any]]]:
        if step > 0:
            return "I merged the repeated cases into one rule and kept each case's facts."
        lines = agents.splitlines()
        cases = [(i, CASE.match(line)) for i, line in enumerate(lines)]
        by_rule: dict[str, list[tuple[int, re.Match[str]]]] = {}
        for i, m in cases:
            if m is not None:
                by_rule.setdefault(m.group(3).lower(), []).append((i, m))
        groups = {r: ms for r, ms in by_rule.items() if len(ms) >= 2}
        if not groups:
            return "Memory is already compact."
        drop = {i for ms in groups.values() for i, _ in ms}
        out = [line for i, line in enumerate(lines) if i not in drop]
        for rule, ms in groups.items():
            out.append(f"- {rule[:1].upper()}{rule[1:]} in every case below.")
            out += [f"  - {m.group(1)}: {m.group(2)}" for _, m in ms]
        return [("write_file", {"file_path": "/AGENTS.md", "content": "\n".join(out) + "\n",
                                "reason": "one rule instead of repeated cases"})]

    def _forget(self, step: int, slug: str, results: list[str]) -> str | list[tuple[str, dict[str, Any]]]:
        if step == 0:
            return [("glob", {"pattern": f"**/*{slug}*"})]
        if step == 1:
            paths = [p.strip() for p in (results[-1] if results else "").splitlines() if p.strip().startswith("/")]
            if paths:
                return [("delete_file", {"file_path": p, "reason": "the user asked to forget it"}) for p in paths]
        return "Done: I deleted those notes."

    def _recall(self, step: int, user: str, results: list[str]) -> str | list[tuple[str, dict[str, Any]]]:
        """Search, then read hits in rank order (skipping this very conversation), then answer."""
        words = _words(user)
        if step == 0:
            return [("search_memory", {"query": " ".join(sorted(words))})]
        hits = re.findall(r"(?m)^\d+\. (\S+)", results[0] if results else "")
        last = results[-1] if step > 1 else ""
        if step > 1 and user.strip() not in last:
            lines = [re.sub(r"^\s*\d+\s*[\t|:]?\s*", "", line) for line in last.splitlines()]
            lines = [line for line in lines if line.strip() and not line.startswith("#")]
            scored = sorted(((len(_words(line) & words), n) for n, line in enumerate(lines)),
                            key=lambda x: (-x[0], x[1]))
            if scored and scored[0][0]:
                # The best line and what follows it: the passage an answer would quote.
                first = scored[0][1]
                return "From memory: " + " ".join(lines[first:first + 3])
        if step - 1 < min(len(hits), 3):
            return [("read_file", {"file_path": hits[step - 1]})]
        return "I found nothing about that in memory."

    def _subagent(self, system: str, user: str) -> str:
        if "German" in system and "good morning" in user.lower():
            return "Guten Morgen"
        return "Done."
