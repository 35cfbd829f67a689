"""``python -m bench secrets``: memagent's secret scanner against detect-secrets on one corpus.

Both scanners see every sample of ``bench/secrets_corpus.py`` (fake credentials of
many kinds, each in a realistic line, and look-alikes). A credential counts as
caught when the scanner reports anything in its sample; a look-alike counts as a
false alarm when it does. The table gives, per kind, caught / samples for the
credentials and alarms / samples for the look-alikes, memagent beside
detect-secrets; with ``--out`` (by default ``bench/RESULTS.md``) it replaces the
"secrets" section of that file and nothing else.

It then measures the eight once-held-out corpora the same way (``bench/secrets_heldout.py``,
``bench/secrets_heldout2.py``, ``bench/secrets_heldout3.py``, ``bench/secrets_heldout4.py``,
``bench/secrets_heldout5.py``, and ``bench/secrets_heldout6.py`` .. ``secrets_heldout8.py``, drawn
at random from gitleaks' rule list: written from published formats; each was measured once while
held out, then tuned on, so all are spent)
and writes them, totals and every miss and false alarm by kind, into the "secrets-heldout" section.

Invariants:
- Same input for both: each sample is written to a file named ``notes.md`` (memory
  files are Markdown) and detect-secrets scans it with its default settings (all
  plugins and heuristic filters of the installed version); memagent's is
  ``validators.scan_secrets`` on the same text.
- Deterministic: the corpus is seeded; the figures change only with the scanners.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench import (
    secrets_heldout,
    secrets_heldout2,
    secrets_heldout3,
    secrets_heldout4,
    secrets_heldout5,
    secrets_heldout6,
    secrets_heldout7,
    secrets_heldout8,
    sections,
)
from bench.secrets_corpus import Sample, credentials, lookalikes
from memagent.validators import scan_secrets

Scanner = Callable[[str], bool]


def memagent_scanner() -> Scanner:
    return lambda text: bool(scan_secrets(text))


def detect_secrets_scanner(folder: Path) -> tuple[Scanner, str] | None:
    """detect-secrets' default scan of one file, and its version; None when it is not installed."""
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.__version__ import VERSION
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    path = folder / "notes.md"

    def scan(text: str) -> bool:
        path.write_text(text, "utf-8")
        with default_settings():
            found = SecretsCollection(root=str(folder))
            found.scan_file(str(path))
        return bool(found.json())

    return scan, VERSION


def _rows(samples: list[Sample], scanners: list[Scanner]) -> list[tuple[str, int, list[int]]]:
    """(kind, samples, hits per scanner) in corpus order."""
    rows: dict[str, tuple[int, list[int]]] = {}
    for s in samples:
        n, hits = rows.setdefault(s.kind, (0, [0] * len(scanners)))
        for i, scan in enumerate(scanners):
            hits[i] += scan(s.text)
        rows[s.kind] = (n + 1, hits)
    return [(kind, n, hits) for kind, (n, hits) in rows.items()]


def table(names: list[str], scanners: list[Scanner]) -> str:
    creds, looks = credentials(), lookalikes()
    cred_rows, look_rows = _rows(creds, scanners), _rows(looks, scanners)
    caught = [sum(r[2][i] for r in cred_rows) for i in range(len(scanners))]
    alarms = [sum(r[2][i] for r in look_rows) for i in range(len(scanners))]
    head = "| kind | samples | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names)
    out = [
        "## Secrets: memagent's scanner against detect-secrets\n",
        f"{len(creds)} fake credentials of {len(cred_rows)} kinds and {len(looks)} look-alikes "
        "(`bench/secrets_corpus.py`, seeded; `python -m bench secrets` regenerates this section).\n",
        "| | " + " | ".join(names) + " |\n|---|" + "---|" * len(names),
        "| credentials caught | "
        + " | ".join(f"{c} / {len(creds)} ({100 * c / len(creds):.1f} %)" for c in caught)
        + " |",
        "| false alarms on look-alikes | " + " | ".join(f"{a} / {len(looks)}" for a in alarms) + " |",
        "",
        "### Credentials caught, per kind\n",
        head,
    ]
    out += [f"| {kind} | {n} | " + " | ".join(str(h) for h in hits) + " |" for kind, n, hits in cred_rows]
    out += ["", "### False alarms on look-alikes, per kind\n", head]
    out += [f"| {kind} | {n} | " + " | ".join(str(h) for h in hits) + " |" for kind, n, hits in look_rows]
    return "\n".join(out) + "\n"


# The held-out corpora, with what each measurement means (see their module docstrings).
HELD_OUT = (
    (
        "`bench/secrets_heldout.py`",
        "written first, from published formats; the scanner before issue 36 caught 75 / 108 with 2 / 106 "
        "false alarms; measured once after tuning on `bench/secrets_corpus.py` (99 / 108, 4 / 106), then its "
        "misses were fixed (through new tuning samples): no longer held out",
        secrets_heldout,
    ),
    (
        "`bench/secrets_heldout2.py`",
        "written after the first set was spent and before its fixes; measured once while held out "
        "(58 / 65, 1 / 68 false alarm), then its misses and false alarm were fixed with general rules: "
        "spent, a tuning set now, so this figure is tuned",
        secrets_heldout2,
    ),
    (
        "`bench/secrets_heldout3.py`",
        "written after the second set was spent and before its fixes; measured once while held out "
        "(122 / 139, 3 / 100 false alarms), then its misses and false alarms were fixed with general "
        "rules (a random value paired with a secret's name, tables, base64 JSON): spent, a tuning set "
        "now, so this figure is tuned",
        secrets_heldout3,
    ),
    (
        "`bench/secrets_heldout4.py`",
        "written after the third set was spent and before its fixes; measured once while held out "
        "(106 / 125, 2 / 97 false alarms), then its misses and false alarms were fixed with general "
        "rules (password-named values in YAML, INI and XML, command-line password flags, keys passed "
        "to clients and X- headers, DSNs, prose): spent, a tuning set now, so this figure is tuned",
        secrets_heldout4,
    ),
    (
        "`bench/secrets_heldout5.py`",
        "written after the fourth set was spent, from published formats and gitleaks', trufflehog's and "
        "detect-secrets' rule lists, by someone who never saw the scanner; measured once while held out "
        "(184 / 245, 10 / 152 false alarms), then its misses and false alarms were fixed with general rules "
        "(password keywords in SQL, config directives, command-line flags and code; other languages' words "
        "for a password; any Authorization scheme with a token; webhook URLs, URL tokens, session cookies, "
        "JWKs, TOTP seeds; browser SDK keys public by design): spent, a tuning set now, so this figure is tuned",
        secrets_heldout5,
    ),
    (
        "`bench/secrets_heldout6.py`",
        "the first of three sets drawn at random from gitleaks' rule list (70 rule ids each, seeded, plus the "
        "generic passwords, keys and connection strings every set has), so it weighs formats as a rule set "
        "does rather than chasing ones earlier sets missed; written by someone who never saw the scanner; "
        "measured once while held out (212 / 224, 3 / 159 false alarms), then tuned: spent",
        secrets_heldout6,
    ),
    (
        "`bench/secrets_heldout7.py`",
        "the second random draw (70 of the rule ids the sixth did not draw, and the most pasted tokens); "
        "measured once while held out, after tuning on the sixth (206 / 215, 2 / 157 false alarms), then "
        "tuned: spent",
        secrets_heldout7,
    ),
    (
        "`bench/secrets_heldout8.py`",
        "the third random draw (70 of the 82 rule ids neither earlier draw took); measured once while held "
        "out, after tuning on the seventh (219 / 234, 1 / 161 false alarm), then tuned: spent",
        secrets_heldout8,
    ),
)


def _pct(n: int, d: int) -> str:
    return f"{n} / {d} ({100 * n / d:.1f} %)"


def held_out_table(names: list[str], scanners: list[Scanner]) -> str:
    out = [
        "## Secrets, held out\n",
        "Corpora written as held-out sets; all are spent now (measured once, then tuned on), so "
        "their figures are tuned ones (`python -m bench secrets` regenerates this section). "
        "Never-tuned recall, each set's one measurement while held out: 75 / 108 (69 %) for the "
        "first as the scanner stood when it was written, then 99 / 108 (92 %) after tuning on the "
        "corpus; 58 / 65 (89 %) for the second; 122 / 139 (87.8 %) for the third; 106 / 125 (84.8 %) "
        "for the fourth; 184 / 245 (75.1 %) for the fifth. The fifth and earlier sets chased formats "
        "the sets before them had missed; the sixth to eighth were drawn at random from gitleaks' rule "
        "list, so they weigh formats as a rule set does: 212 / 224 (94.6 %, 3 / 159 false alarms), "
        "206 / 215 (95.8 %, 2 / 157) and 219 / 234 (93.6 %, 1 / 161). Every fresh set so far is short "
        "of the 97 % promise (94-96 % on the random draws), which the tuned figures below do not show. "
        "Each set's misses were fixed with general context rules (see SECURITY.md), not per-sample "
        "ones, yet the next fresh set still found formats and contexts the rules did not read. "
        "A credential counts as caught when the scanner reports anything in its sample.\n",
        "| corpus | | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names),
    ]
    notes: list[str] = []
    for label, what, module in HELD_OUT:
        creds, looks = module.credentials(), module.lookalikes()
        caught = [[scan(s.text) for s in creds] for scan in scanners]
        alarms = [[scan(s.text) for s in looks] for scan in scanners]
        out.append(f"| {label} | credentials caught | " + " | ".join(_pct(sum(c), len(creds)) for c in caught) + " |")
        out.append("| | false alarms | " + " | ".join(f"{sum(a)} / {len(looks)}" for a in alarms) + " |")
        missed = [s.kind for s, hit in zip(creds, caught[0], strict=True) if not hit]
        false = [s.kind for s, hit in zip(looks, alarms[0], strict=True) if hit]
        notes.append(
            f"- {label}: {what}. memagent misses: {', '.join(missed) or 'none'}; "
            f"false alarms: {', '.join(false) or 'none'}."
        )
    return "\n".join([*out, "", *notes]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench secrets", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")), help="results file ('-' = print)")
    args = ap.parse_args(argv)
    names, scanners = ["memagent"], [memagent_scanner()]
    with tempfile.TemporaryDirectory() as folder:
        peer = detect_secrets_scanner(Path(folder))
        if peer is not None:
            names.append(f"detect-secrets {peer[1]}")
            scanners.append(peer[0])
        section = table(names, scanners)
        held_out = held_out_table(names, scanners)
    print(section)
    print(held_out)
    if args.out != "-":
        sections.write(args.out, "secrets", section)
        sections.write(args.out, "secrets-heldout", held_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
