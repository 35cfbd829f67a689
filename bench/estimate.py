"""How far the context budget's local token estimate is from a real Claude tokenizer.

Run: ``python -m bench.estimate --tokenizer PATH/tokenizer.json`` (needs the
``tokenizers`` package; the only Claude tokenizer published for offline use is the
legacy one shipped in the ``anthropic`` SDK up to 0.38 as ``anthropic/tokenizer.json``).
Current models tokenize somewhat differently, which is why the budget also rescales
its estimate by the usage the API reports and asks the API to count near the budget;
this figure says how good the starting point is. Invariant: inputs are the
repository's own files and fixed samples, so the figure is reproducible.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from memagent.agent.context import estimate

ROOT = Path(__file__).resolve().parent.parent


def samples() -> dict[str, list[str]]:
    prose = [p.read_text("utf-8") for p in [ROOT / "README.md", ROOT / "ARCHITECTURE.md",
                                             *sorted((ROOT / "skills_templates").rglob("*.md"))]]
    # vfs's own modules: its top level and the sub-packages that were one flat folder until issue 38.
    code = [p.read_text("utf-8") for part in ("", "files", "grep", "records", "search")
            for p in sorted((ROOT / "vfs" / part).glob("*.py"))]
    numbered = ["".join(f"{n + 1:>6}\t{line}\n" for n, line in enumerate(text.splitlines())) for text in code[:8]]
    from memagent.agent.tools.memory import DEFINITIONS

    tools = [json.dumps(d) for d in DEFINITIONS]
    other = ["Les réunions du lundi sont déplacées à mardi. " * 40, "会议改到星期二下午三点。" * 40,
             "Die Besprechung am Montag wird auf Dienstag verschoben. " * 40]
    return {"prose (Markdown)": prose, "code": code, "tool results (read_file lines)": numbered,
            "tool definitions (JSON)": tools, "other languages": other}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.estimate", description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", required=True, help="path to a tokenizers-format tokenizer.json")
    args = ap.parse_args(argv)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    print("| kind | texts | tokens (reference) | estimate / reference: median | min | max |")
    print("|---|---|---|---|---|---|")
    every: list[float] = []
    for kind, texts in samples().items():
        ratios = []
        total = 0
        for t in texts:
            ref = len(tok.encode(t).ids)
            if ref < 20:
                continue
            total += ref
            ratios.append(estimate(t) / ref)
        every += ratios
        print(f"| {kind} | {len(ratios)} | {total:,} | {statistics.median(ratios):.2f} | {min(ratios):.2f} | "
              f"{max(ratios):.2f} |")
    print(f"| all | {len(every)} | | {statistics.median(every):.2f} | {min(every):.2f} | {max(every):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
