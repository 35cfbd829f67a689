"""The secret corpus (bench/secrets_corpus.py) through the validators: at least 97 % of
the fake credentials refused, at most one look-alike refused, and no message that
repeats any part of a credential. A rule that stops catching a kind fails here.

The earlier held-out corpora (bench/secrets_heldout.py, bench/secrets_heldout2.py,
bench/secrets_heldout3.py, bench/secrets_heldout4.py, bench/secrets_heldout5.py) are spent: each
was measured once while held out, then its misses were fixed, so they are tuning sets now, held
to the same >= 97 % / <= 1 % bar as regression tests.
"""

from __future__ import annotations

import importlib

import pytest

from bench.secrets_corpus import Sample, credentials, lookalikes
from memagent.validators import validate
from memagent.validators.secrets import engine as scanner

PATH = "/knowledge/notes.md"


def _secret_problems(text: str) -> list[str]:
    return [str(p) for p in validate(PATH, text) if p.kind == "secret"]


def test_the_corpus_is_as_large_and_varied_as_promised() -> None:
    creds, looks = credentials(), lookalikes()
    assert len(creds) >= 100 and len({s.kind for s in creds}) >= 40
    assert len(looks) >= 100
    assert all(s.secret and s.secret in s.text for s in creds)
    assert credentials() == creds and lookalikes() == looks  # deterministic


def test_at_least_97_percent_of_credentials_are_refused() -> None:
    creds = credentials()
    missed = [s.kind for s in creds if not _secret_problems(s.text)]
    assert len(creds) - len(missed) >= 0.97 * len(creds), missed


def test_at_most_one_lookalike_is_refused() -> None:
    alarms = [(s.kind, s.text[:60]) for s in lookalikes() if _secret_problems(s.text)]
    assert len(alarms) <= 1, alarms


def _windows(text: str, n: int = 4) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}


def _fixed_vocabulary() -> set[str]:
    """Every 4-character window of the fixed text a secret problem is made of: its
    location ("line N"), the kind's name and the advice. A credential's window found
    there is the sentence's own wording (a random token may well contain "line")."""
    out: set[str] = set()
    for rule in scanner._RULES:
        for n in range(1, 20):
            out |= _windows(f"line {n}: contains {rule.what}. {scanner._ADVICE}")
    return out


FIXED = _fixed_vocabulary()


@pytest.mark.parametrize("sample", credentials(), ids=lambda s: s.kind)
def test_no_message_repeats_any_part_of_the_credential(sample: Sample) -> None:
    messages = _secret_problems(sample.text)
    said = set().union(*(_windows(m) for m in messages)) if messages else set()
    echoed = sorted((_windows(sample.secret) & said) - FIXED)
    assert not echoed, (sample.kind, echoed)
    # Nothing but fixed text: each message is exactly a location, a kind and the advice.
    for message in messages:
        assert _windows(message) <= FIXED, message


# --- the held-out corpora (issue 36): measurements of the product promise ---------------------


def _caught_and_alarms(module: object) -> tuple[int, int, int, int]:
    creds, looks = module.credentials(), module.lookalikes()  # type: ignore[attr-defined]
    caught = sum(bool(_secret_problems(s.text)) for s in creds)
    alarms = sum(bool(_secret_problems(s.text)) for s in looks)
    return caught, len(creds), alarms, len(looks)


# The spent held-out corpora: (module, at least N credentials, at least M look-alikes), and
# each one's measurement while it was still held out (caught, false alarms). Each was then
# tuned on (misses and false alarms fixed with general rules), so the bar below is a
# regression bar, not a measure of how the rules generalise.
SPENT = [
    ("secrets_heldout", 100, 100),  # 99/108, 4/106 (after tuning on the main corpus)
    ("secrets_heldout2", 60, 60),  # 58/65, 1/68
    ("secrets_heldout3", 130, 100),  # 122/139, 3/100
    ("secrets_heldout4", 120, 95),  # 106/125, 2/97
    ("secrets_heldout5", 240, 150),  # 184/245, 10/152
    ("secrets_heldout6", 220, 155),  # 212/224, 3/159 (drawn at random from gitleaks' rule list)
    ("secrets_heldout7", 210, 155),  # 206/215, 2/157 (the same draw over the rules the sixth left)
    ("secrets_heldout8", 230, 155),  # 219/234, 1/161 (the same draw over the rules the two left)
]


@pytest.mark.parametrize(("name", "at_least_n", "at_least_m"), SPENT, ids=[s[0] for s in SPENT])
def test_each_spent_held_out_corpus_meets_the_promise(name: str, at_least_n: int, at_least_m: int) -> None:
    """>= 97 % caught, <= 1 % false alarms on ``bench/<name>.py``."""
    module = importlib.import_module(f"bench.{name}")
    caught, n, alarms, m = _caught_and_alarms(module)
    assert n >= at_least_n and m >= at_least_m
    assert caught >= 0.97 * n, (caught, n)
    assert alarms <= 0.01 * m, (alarms, m)


@pytest.mark.parametrize("module", [s[0] for s in SPENT])
def test_held_out_messages_repeat_no_part_of_a_credential(module: str) -> None:
    for sample in importlib.import_module(f"bench.{module}").credentials():
        for message in _secret_problems(sample.text):
            assert sample.secret[:8] not in message and sample.secret[-8:] not in message, sample.kind
