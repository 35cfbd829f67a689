"""What no rule reports, whatever matched it: checked by the engine (``_skipped``) on
every match of every rule, beside the rule's own confirmer.

- ``_placeholder``: documentation stand-ins, AWS's ...EXAMPLE keys, a last part made of
  x, X, * or 0, and well-known documentation examples (GitHub's example token in its
  forms, Telegram's example bot token, Azurite's account key, kubeadm's example bootstrap
  token), recognised by the SHA-256 of the value (``_KNOWN_EXAMPLES``) so that this
  package holds none of them.
- ``_public_by_design``: a match inside a browser SDK's configuration (firebaseConfig,
  datadogRum, NREUM, Bugsnag.start, Paddle.Initialize, braintree's drop-in, a push
  subscription), or a value of a published public shape (Datadog's ``pub`` client tokens,
  ``NRJS-``, Braintree tokenization keys): public by design, as a browser ships it.

Invariant: an exemption only ever removes a finding; it never adds one.
"""

from __future__ import annotations

import hashlib
import re

from .rule import _regex

# Markers of a browser SDK's configuration: a key inside one is public by design (Firebase's web
# apiKey, Datadog RUM's clientToken, New Relic's browser licenseKey, Bugsnag's notifier key,
# Braintree's tokenization key, Paddle's client-side token, a VAPID applicationServerKey).
_BROWSER_CONFIG = _regex(
    r"firebaseConfig|authDomain|firebase\.initializeApp|NREUM|datadogRum|DD_RUM|Bugsnag\.start\("
    r"|Paddle\.(?:Initialize|Setup)\(|braintree\.(?:dropin|client)\.create\(|applicationServerKey|pushManager\."
)


# Values public by their published shape: Datadog client tokens (pub + 32 hex), New Relic browser
# keys (NRJS-), Braintree tokenization keys (environment_<8>_<16>).
_PUBLIC_VALUE = _regex(r"pub[0-9a-f]{32}|NRJS-[0-9a-f]{19}|(?:production|sandbox)_[a-z0-9]{8}_[a-z0-9]{16}")


def _public_by_design(m: re.Match[str], text: str) -> bool:
    """A match inside a browser SDK's config block, or a value whose shape says it is public."""
    if "s" in m.re.groupindex and m.group("s") is not None and _PUBLIC_VALUE.fullmatch(m.group("s")):
        return True
    statement = text[max(0, m.start() - 300) : m.end() + 200]
    return _BROWSER_CONFIG.search(statement) is not None


# SHA-256 of well-known documentation examples, so the values themselves are not in this file:
# GitHub's example token (its ghp_/gho_/ghu_/ghs_/ghr_ forms), Telegram's example bot token in
# the Bot API docs, the Azure storage emulator's (Azurite's) published account key, and
# kubeadm's example bootstrap token.
_KNOWN_EXAMPLES = frozenset(
    {
        "3543c50b0cb9cea8e55eb1f529b79f043cb250d485fde7b66cabbb5183add7da",
        "bc3ae723f57c6b9e3fd80b699fcc420f6074b0b1718039669d22631d508ac0a7",
        "82e74299544e00738f9c0acb69b1eb348b3e20ffcfabcb34779bd37590fead6c",
        "797c0ce414586cc8eb6929afe947c720e3e4d351dd070a6fe39f630beaab3054",
        "0cecafe4ec4766065c64799e2d0fc466059f86526e0a45b883de0fb856435236",
        "0b5dd075ccdd03c42f4edda8e299e6838e2a75d3486a2a8d86940ed1541e9178",
        "0011cc25eb4320717494d2703e8cba85743e71b500283c21c8b88147992f9059",
        "a4b8b245ab28bc4f72dcaa0d9ba9f73d6488fa758a2a5cb55ecb11511f002f80",
    }
)


def _placeholder(secret: str) -> bool:
    """Documentation stand-ins: AWS's ...EXAMPLE keys, runs of x, X, *, 0, well-known examples."""
    if "EXAMPLE" in secret or hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest() in _KNOWN_EXAMPLES:
        return True
    segments = [seg for seg in re.split(r"[_\-./]", secret) if seg]
    # (A random value may well end in "_0" or "-x": a one- or two-character tail is no placeholder.)
    return bool(segments) and len(segments[-1]) >= 3 and not set(segments[-1]) - set("xX*0")
