"""The secret corpus (bench/secrets_corpus.py) through the validators: at least 97 % of
the fake credentials refused, at most one look-alike refused, and no message that
repeats any part of a credential. A rule that stops catching a kind fails here.
"""

from __future__ import annotations

import pytest

from bench.secrets_corpus import Sample, credentials, lookalikes
from memagent.validators import secrets as scanner
from memagent.validators import validate

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
