"""The secret corpus (bench/secrets_corpus.py) through the validators: at least 97 % of
the fake credentials refused, at most one look-alike refused, and no message that
repeats any part of a credential. A rule that stops catching a kind fails here.

The earlier held-out corpora (bench/secrets_heldout.py, bench/secrets_heldout2.py,
bench/secrets_heldout3.py, bench/secrets_heldout4.py, bench/secrets_heldout5.py) are spent: each
was measured once while held out, then its misses were fixed, so they are tuning sets now, held
to the same >= 97 % / <= 1 % bar as regression tests.
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


# --- the held-out corpora (issue 36): measurements of the product promise ---------------------


def _caught_and_alarms(module: object) -> tuple[int, int, int, int]:
    creds, looks = module.credentials(), module.lookalikes()  # type: ignore[attr-defined]
    caught = sum(bool(_secret_problems(s.text)) for s in creds)
    alarms = sum(bool(_secret_problems(s.text)) for s in looks)
    return caught, len(creds), alarms, len(looks)


def test_the_first_held_out_corpus_meets_the_promise() -> None:
    """>= 97 % caught, <= 1 % false alarms on bench/secrets_heldout.py. Its misses were looked
    at after its one clean measurement (99/108, 4/106), so this is now a regression bar."""
    from bench import secrets_heldout

    caught, n, alarms, m = _caught_and_alarms(secrets_heldout)
    assert n >= 100 and m >= 100
    assert caught >= 0.97 * n, (caught, n)
    assert alarms <= 0.01 * m, (alarms, m)


def test_the_second_held_out_corpus_meets_the_promise() -> None:
    """>= 97 % caught, <= 1 % false alarms on bench/secrets_heldout2.py. Measured once while held
    out (58/65, 1/68 false alarm), then its misses were fixed with general rules: it is spent, a
    tuning set now, and this is a regression bar, not a measure of how the rules generalise."""
    from bench import secrets_heldout2

    caught, n, alarms, m = _caught_and_alarms(secrets_heldout2)
    assert n >= 60 and m >= 60
    assert caught >= 0.97 * n, (caught, n)
    assert alarms <= 0.01 * m, (alarms, m)


def test_the_third_held_out_corpus_meets_the_promise() -> None:
    """>= 97 % caught, <= 1 % false alarms on bench/secrets_heldout3.py. Measured once while held
    out (122/139, 3/100 false alarms), then its misses and false alarms were fixed with general
    rules: it is spent, a tuning set now, and this is a regression bar, not a measure of generalisation."""
    from bench import secrets_heldout3

    caught, n, alarms, m = _caught_and_alarms(secrets_heldout3)
    assert n >= 130 and m >= 100
    assert caught >= 0.97 * n, (caught, n)
    assert alarms <= 0.01 * m, (alarms, m)


def test_the_fourth_held_out_corpus_meets_the_promise() -> None:
    """>= 97 % caught, <= 1 % false alarms on bench/secrets_heldout4.py. Measured once while held
    out (106/125, 2/97 false alarms), then its misses and false alarms were fixed with general
    rules: it is spent, a tuning set now, and this is a regression bar, not a measure of generalisation."""
    from bench import secrets_heldout4

    caught, n, alarms, m = _caught_and_alarms(secrets_heldout4)
    assert n >= 120 and m >= 95
    assert caught >= 0.97 * n, (caught, n)
    assert alarms <= 0.01 * m, (alarms, m)


def test_the_fifth_held_out_corpus_meets_the_promise() -> None:
    """>= 97 % caught, <= 1 % false alarms on bench/secrets_heldout5.py. Measured once while held
    out (184/245, 10/152 false alarms), then its misses and false alarms were fixed with general
    rules: it is spent, a tuning set now, and this is a regression bar, not a measure of generalisation."""
    from bench import secrets_heldout5

    caught, n, alarms, m = _caught_and_alarms(secrets_heldout5)
    assert n >= 240 and m >= 150
    assert caught >= 0.97 * n, (caught, n)
    assert alarms <= 0.01 * m, (alarms, m)


@pytest.mark.parametrize(
    "module", ["secrets_heldout", "secrets_heldout2", "secrets_heldout3", "secrets_heldout4", "secrets_heldout5"]
)
def test_held_out_messages_repeat_no_part_of_a_credential(module: str) -> None:
    import importlib

    for sample in importlib.import_module(f"bench.{module}").credentials():
        for message in _secret_problems(sample.text):
            assert sample.secret[:8] not in message and sample.secret[-8:] not in message, sample.kind
