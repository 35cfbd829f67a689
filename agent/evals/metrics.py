"""The benchmarks' judge-free scores: exact match, substring, token F1, recall@k.

Invariants:
- Answers are compared after the usual SQuAD-style normalisation (lowercase, no
  punctuation, no articles, single spaces), as LoCoMo's and LongMemEval's own
  scripts do before their string metrics; numbers compare as their text.
- Every function is total: empty strings score 0 (never a division by zero).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    return " ".join(_ARTICLES.sub(" ", str(text).lower().translate(_PUNCT)).split())


def exact_match(prediction: str, gold: str) -> bool:
    return bool(normalize(gold)) and normalize(prediction) == normalize(gold)


def contains(prediction: str, gold: str) -> bool:
    """The gold answer appears in the prediction (LongMemEval's lenient string check)."""
    g = normalize(gold)
    return bool(g) and f" {g} " in f" {normalize(prediction)} "


def token_f1(prediction: str, gold: str) -> float:
    """Token-level F1 of the normalised texts (LoCoMo's QA metric)."""
    p, g = normalize(prediction).split(), normalize(gold).split()
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def recall_at_k(ranked: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """The share of ``relevant`` ids among the first ``k`` of ``ranked`` (1.0 when none are relevant)."""
    want = set(relevant)
    if not want:
        return 1.0
    return len(want & set(ranked[:k])) / len(want)
