"""Secret scanner run on every write: credentials never enter memory.

Invariants:
- Only high-confidence patterns: a provider's fixed prefix plus a body of the
  right alphabet and length, a PEM private-key header followed by key material,
  or a key name that says "AWS secret" next to a 40-character value. Ordinary
  prose, Markdown, code that *names* keys (``api_key = os.environ["X"]``),
  UUIDs, git SHAs, sha256 hex and base64 hashes must not match: a false alarm
  blocks a legitimate write and teaches the model to distrust the check.
- Obvious placeholders (bodies made of x/X/*/0, AWS's documented ...EXAMPLE
  keys, "password" in a URL) are not secrets.
- Scanning is linear in the content: a rule's start is never preceded by a
  character its own body may contain (a look-behind instead of ``\\b`` where
  needed) and open-ended parts are only used where nothing follows them, so a
  crafted file such as "a-a-a-..." cannot make the regexes quadratic.
- A Problem names the line and the kind of credential and never contains any
  part of the matched text; messages are built from fixed strings only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .base import LineIndex, Problem

KIND = "secret"


@dataclass(frozen=True)
class _Rule:
    what: str  # the kind, as it reads in a sentence: "an AWS access key id"
    regex: re.Pattern[str]  # the secret part is the named group "s" when present
    confirm: Callable[[re.Match[str], str], bool] | None = None


def _mixed(text: str) -> bool:
    """Random tokens mix upper case, lower case and digits; words and hex do not."""
    return bool(re.search(r"[A-Z]", text) and re.search(r"[a-z]", text) and re.search(r"\d", text))


def _has_digit(m: re.Match[str], _: str) -> bool:
    return any(c.isdigit() for c in m.group("s"))


def _key_material_follows(m: re.Match[str], text: str) -> bool:
    # A header alone ("-----BEGIN PRIVATE KEY-----" in a how-to) is not a key;
    # base64 body lines (possibly JSON-escaped with \n) before the END line are.
    body = text[m.end() : m.end() + 600].split("-----", 1)[0]
    return re.search(r"[A-Za-z0-9+/]{32,}", body) is not None


def _mixed_body(m: re.Match[str], _: str) -> bool:
    return _mixed(m.group("s"))


_URL_PLACEHOLDERS = (
    "pass",
    "pwd",
    "secret",
    "changeme",
    "example",
    "your",
    "placeholder",
    "redacted",
    "token",
    "xxx",
    "***",
)


def _real_url_password(m: re.Match[str], _: str) -> bool:
    pw = m.group("s").lower()
    return not (pw[0] in "$<{[%" or any(p in pw for p in _URL_PLACEHOLDERS))


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "a private key block",
        re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
        _key_material_follows,
    ),
    _Rule("a private key block", re.compile(r"PuTTY-User-Key-File-\d+:")),
    _Rule("an AWS access key id", re.compile(r"\b(?P<s>(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})\b")),
    _Rule(
        "an AWS secret access key",
        re.compile(
            r"(?i)(?:aws.?secret.?(?:access.?)?key|secret.?access.?key)[\"']?\s*[:=]"
            r"\s*[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        _mixed_body,
    ),
    _Rule("an Anthropic API key", re.compile(r"\b(?P<s>sk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_-]{32,})")),
    _Rule("an OpenAI API key", re.compile(r"\b(?P<s>sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,})")),
    _Rule("an OpenAI API key", re.compile(r"\bsk-(?!ant-)(?P<s>[A-Za-z0-9]{32,})\b"), _has_digit),
    _Rule("a GitHub token", re.compile(r"\b(?P<s>gh[pousr]_[A-Za-z0-9]{36,255})\b")),
    _Rule("a GitHub personal access token", re.compile(r"\b(?P<s>github_pat_[A-Za-z0-9_]{36,})")),
    _Rule("a GitLab personal access token", re.compile(r"\b(?P<s>glpat-[A-Za-z0-9_-]{20,})")),
    _Rule("a Slack token", re.compile(r"\bxox[abposre]-(?P<s>[A-Za-z0-9-]{20,})"), _has_digit),
    _Rule(
        "a Slack webhook URL",
        re.compile(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"[A-Za-z0-9_-]+/[A-Za-z0-9_-]+/(?P<s>[A-Za-z0-9_-]{16,})"
        ),
    ),
    _Rule("a Google API key", re.compile(r"\b(?P<s>AIza[0-9A-Za-z_-]{35})(?![0-9A-Za-z_-])")),
    _Rule("a Google OAuth client secret", re.compile(r"\b(?P<s>GOCSPX-[A-Za-z0-9_-]{28})")),
    _Rule("a Stripe live secret key", re.compile(r"\b(?P<s>[sr]k_live_[0-9A-Za-z]{20,})")),
    _Rule("an npm access token", re.compile(r"\b(?P<s>npm_[A-Za-z0-9]{36})\b")),
    _Rule("a PyPI API token", re.compile(r"\b(?P<s>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})")),
    _Rule("a Hugging Face token", re.compile(r"\bhf_(?P<s>[A-Za-z0-9]{34})\b"), _mixed_body),
    _Rule(
        "a SendGrid API key",
        re.compile(r"\b(?P<s>SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])"),
    ),
    _Rule("a DigitalOcean token", re.compile(r"\b(?P<s>do[opr]_v1_[a-f0-9]{64})\b")),
    _Rule("a Shopify access token", re.compile(r"\b(?P<s>shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32})\b")),
    _Rule(
        "a JSON Web Token",
        re.compile(
            r"(?<![A-Za-z0-9_-])(?P<s>eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\."
            r"[A-Za-z0-9_-]{10,})"
        ),
    ),
    _Rule(
        "a bearer token in an Authorization header",
        re.compile(
            r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:bearer|token|basic)\s+"
            r"(?P<s>[A-Za-z0-9._~+/=-]{20,})"
        ),
        _mixed_body,
    ),
    _Rule(
        "a password inside a URL",
        re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,30}://[^\s:/@\"'<>]+:(?P<s>[^\s/@\"'<>]+)@[^\s/@]"),
        _real_url_password,
    ),
)


def _placeholder(secret: str) -> bool:
    """Documentation stand-ins: AWS's ...EXAMPLE keys, runs of x, X, *, 0."""
    if "EXAMPLE" in secret:
        return True
    segments = [seg for seg in re.split(r"[_\-./]", secret) if seg]
    return bool(segments) and not set(segments[-1]) - set("xX*0")


_ADVICE = (
    "Secrets must never be stored in memory: remove it (it is not repeated here). Keep the "
    "credential in an environment variable or a secret manager and refer to it by name "
    "(in tools.json as a ${VAR} reference)."
)


def scan_secrets(content: str) -> list[Problem]:
    """One problem per (line, kind) found, in line order."""
    index: LineIndex | None = None
    found: set[tuple[int, str]] = set()
    for rule in _RULES:
        for m in rule.regex.finditer(content):
            if "s" in rule.regex.groupindex and _placeholder(m.group("s")):
                continue
            if rule.confirm and not rule.confirm(m, content):
                continue
            index = index or LineIndex(content)
            found.add((index.line_of(m.start()), rule.what))
    return [Problem(f"line {line}", f"contains {what}. {_ADVICE}", KIND) for line, what in sorted(found)]
