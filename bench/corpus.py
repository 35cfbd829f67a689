"""A deterministic memory corpus for the benchmarks and the fast-path tests.

Invariants:
- ``generate(n, seed)`` is a pure function of its arguments: same (n, seed), same
  files byte for byte, on every machine and Python version (only ``random.Random``
  with an explicit seed, no hash ordering, no clock).
- Every file passes the real validators (skills carry valid frontmatter whose
  ``name`` equals the stem; nothing looks like a credential).
- The planted needles never occur by accident: the filler vocabulary is lowercase
  ASCII words built from syllables, and every needle contains an upper-case letter
  or a digit, or is a word the vocabulary is filtered to exclude. ``Corpus.truth``
  records exactly which files each needle was planted in, so a benchmark can check
  that every engine agrees with it.

Shape (n = 1,000 or 10,000): Markdown files of 1-8 KB under nested folders
(``/knowledge/<topic>/<sub>/``, ``/cases/<year>/<month>/``, ``/notes/``), a
``/people/`` folder of exactly 100 entries, ~1 % skills under ``/skills/``, an
``/AGENTS.md`` and a 4 KB ``/knowledge/reference-4k.md`` for the read benchmark.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

# The needles. RARE is planted in exactly 3 files, REGEX_HIT (matching REGEX) in
# ~1 %, COMMON in ~30 %. Each pattern is valid as a Python regex, a GNU grep ERE
# and a ripgrep regex, with the same meaning in all three.
RARE = "QUOKKA-PLUTONIUM-7731"
COMMON = "zephyr"
REGEX = "INC-[0-9]{5}"
# A regex with no literal of 3+ characters: no trigram index can narrow it.
REGEX_NO_LITERAL = "[0-9]{3}-[0-9]{4}"
# The 4 KB file the read benchmarks time (run.py and peers.py).
READ_PATH = "/knowledge/reference-4k.md"

_ONSETS = ["b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w",
           "br", "cl", "dr", "fl", "gr", "pl", "pr", "st", "tr", "th", "sh", "ch"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck"]
TOPICS = ["architecture", "billing", "clients", "deploys", "design", "finance",
          "hiring", "incidents", "legal", "marketing", "onboarding", "product",
          "research", "security", "support", "travel"]


@dataclass
class Corpus:
    files: dict[str, str]
    # needle name -> sorted paths it was planted in
    truth: dict[str, list[str]] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(len(c.encode("utf-8")) for c in self.files.values())

    def write_folder(self, root: Path) -> None:
        """The same files as a real folder (for grep -r, rg and pathlib)."""
        made: set[Path] = set()
        for path, content in self.files.items():
            target = root / path.lstrip("/")
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            target.write_bytes(content.encode("utf-8"))


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(1, 3)))
        w += rng.choice(_CODAS)
        if COMMON not in w:
            words.add(w)
    return sorted(words)


def _paragraph(rng: random.Random, vocab: list[str], words: int) -> str:
    chosen = rng.choices(vocab, k=words)
    lines: list[str] = []
    line: list[str] = []
    width = 0
    for w in chosen:
        if width + len(w) > 78:
            lines.append(" ".join(line))
            line, width = [], 0
        line.append(w)
        width += len(w) + 1
    if line:
        lines.append(" ".join(line))
    return "\n".join(lines)


def _body(rng: random.Random, vocab: list[str], target: int, title: str) -> list[str]:
    """Markdown blocks (heading, paragraphs, bullets) adding up to ~``target`` bytes."""
    blocks = [f"# {title}"]
    size = len(title) + 2
    while size < target:
        kind = rng.random()
        if kind < 0.15:
            block = "## " + " ".join(rng.choices(vocab, k=rng.randint(2, 5)))
        elif kind < 0.35:
            block = "\n".join("- " + " ".join(rng.choices(vocab, k=rng.randint(3, 9)))
                              for _ in range(rng.randint(2, 6)))
        else:
            block = _paragraph(rng, vocab, rng.randint(20, 70))
        blocks.append(block)
        size += len(block) + 2
    return blocks


def _plant(rng: random.Random, blocks: list[str], text: str) -> None:
    """Put ``text`` inside a random body block (never the title line)."""
    i = rng.randint(1, len(blocks) - 1) if len(blocks) > 1 else 0
    words = blocks[i].split(" ")
    j = rng.randint(0, len(words))
    words.insert(j, text)
    blocks[i] = " ".join(words)


def _paths(rng: random.Random, n: int, vocab: list[str]) -> list[str]:
    out = ["/AGENTS.md", READ_PATH]
    out += [f"/people/{w}-{i:03d}.md" for i, w in enumerate(rng.sample(vocab, 100))]
    skills = max(5, n // 100)
    out += [f"/skills/{w}-{i}.md" for i, w in enumerate(rng.sample(vocab, skills))]
    seen = set(out)
    while len(out) < n:
        r = rng.random()
        name = f"{rng.choice(vocab)}-{rng.choice(vocab)}.md"
        if r < 0.55:
            t = rng.choice(TOPICS)
            p = f"/knowledge/{t}/{rng.choice(vocab[:40])}/{name}"
        elif r < 0.9:
            p = f"/cases/{rng.randint(2019, 2025)}/{rng.randint(1, 12):02d}/{name}"
        else:
            p = f"/notes/{name}"
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out[:n]


def generate(n: int, seed: int = 1234) -> Corpus:
    """``n`` files (n >= 120), deterministic in (n, seed)."""
    if n < 120:
        raise ValueError("the corpus needs at least 120 files (100 people + skills + AGENTS.md)")
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 3000)
    paths = _paths(rng, n, vocab)
    plain = [p for p in paths if not p.startswith("/skills/") and p != "/AGENTS.md"
             and p != READ_PATH]
    rare = set(rng.sample(plain, 3))
    regex_hits = set(rng.sample(plain, max(3, n // 100)))
    no_lit_hits = set(rng.sample(plain, max(3, n // 100)))
    common = set(rng.sample(plain, (3 * n) // 10))
    files: dict[str, str] = {}
    for path in paths:
        if path == "/AGENTS.md":
            files[path] = (
                "# Instructions\n\n- Answer in short bullet points.\n"
                "- Keep candidate notes under /people/, one file per person.\n"
                "- Check /skills/ before starting a task.\n"
            )
            continue
        if path == READ_PATH:
            # Exactly 4,096 bytes (the text is ASCII), ending in a newline.
            files[path] = "\n\n".join(_body(rng, vocab, 4400, "Reference"))[:4095] + "\n"
            continue
        stem = path.rsplit("/", 1)[1][:-3]
        blocks = _body(rng, vocab, rng.randint(1000, 8000), stem.replace("-", " ").title())
        if path in rare:
            _plant(rng, blocks, RARE)
        if path in regex_hits:
            _plant(rng, blocks, f"INC-{rng.randint(10000, 99999)}")
        if path in no_lit_hits:
            _plant(rng, blocks, f"call {rng.randint(200, 999)}-{rng.randint(1000, 9999)}")
        if path in common:
            for _ in range(rng.randint(1, 4)):
                _plant(rng, blocks, COMMON)
        text = "\n\n".join(blocks) + "\n"
        if path.startswith("/skills/"):
            desc = " ".join(rng.choices(vocab, k=12))
            text = f"---\nname: {stem}\ndescription: Use when {desc}.\n---\n" + text
        files[path] = text
    return Corpus(
        files=files,
        truth={
            "rare": sorted(rare),
            "regex": sorted(regex_hits),
            "regex_no_literal": sorted(no_lit_hits),
            "common": sorted(common),
        },
    )
