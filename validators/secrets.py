"""Secret scanner run on every write: credentials never enter memory.

Invariants:
- Only high-confidence patterns: a provider's fixed prefix plus a body of the
  right alphabet and length, a PEM private-key header followed by key material,
  or a key name that says "AWS secret" next to a 40-character value. Ordinary
  prose, Markdown, code that *names* keys (``api_key = os.environ["X"]``),
  UUIDs, git SHAs, sha256 hex and base64 hashes must not match: a false alarm
  blocks a legitimate write and teaches the model to distrust the check.
- Obvious placeholders (bodies made of x/X/*/0, AWS's documented ...EXAMPLE
  keys, a URL password that is only a word such as ``password`` or ``pass123``
  (one merely containing "pass" is real), ``${VAR}`` references, ``changeme``,
  pagination cursors such as ``nextPageToken``) are not
  secrets; nor are well-known documentation examples (GitHub's example token,
  the jwt.io token, Azurite's emulator key, Telegram's example bot token),
  recognised by the SHA-256 of the value so this file holds none of them, nor a
  URL whose password equals its user name (``postgres:postgres@localhost``).
- Passwords on a command line count (``mysql -pX``, ``curl -u user:X``,
  ``sshpass -p X``, ``--password X``); a flag alone (``mysql -p``, ``curl -u user``)
  makes the program prompt and is no secret.
- The generic rule (a key named like a password, secret or token assigned a
  real-looking value, as in ``.env`` files) is reported only on lines where no
  specific rule fired, so one credential gives one problem. So are the rules that
  read context rather than a prefix: a name ending in "key" given a long random
  base64 value (``COSMOS_KEY=...``; not a name saying public, cache, hash...), a
  secret named in a sentence and then "is <random key>", "login: user / <password>",
  and a credentials file's line alone (``.pgpass``'s host:port:db:user:password, a
  plain htpasswd user:password). A kubeadm bootstrap token (``abc123.<16>``) is a
  value, not a code reference; an EJSON ``EJ[1:...]`` value is encrypted in place.
- The context rule generalises the per-provider ones (a third held-out set showed them
  too specific): a random value (20+ characters mixing letters and digits inside one
  part; not a placeholder, a ``${X}``/``<...>``/``env()``/``arn:``/``valueFrom``
  reference, a code reference, a digest or, outside a secret's name, a UUID) assigned
  or paired with a name holding key, token, secret, pass, pwd, auth or credential
  (identifier, dict key, YAML/JSON key, HTTP header, CLI flag, env var), unless the name
  says public, anon, client id, site key, key id, hash, digest, cache... or the value sits
  in an encrypted block. Also generic: a Markdown table's password/secret/token column,
  "log in ... (user / password)", and base64 JSON (``eyJ...`` with no dots, a
  dockerconfigjson) decoded and scanned with these same rules. A JWT whose role is
  ``anon`` is public by design.
- The fourth held-out set's contexts, general too: a password-shaped value under a
  password's name in YAML, INI or an XML element (not a ``$``-delimited password hash); a
  function or class named for a key, token or credential given a random string literal; a
  client factory given (id, key) unless the text says search-only or public; curl's
  ``-H 'X-...Api...: key'`` and ``-u <key>:``; ``redis-cli -a``; ``net use ... /user:u pw``;
  Go's ``user:pass@tcp(...)`` DSN. A ``--secret`` flag's value made of words only is a
  secret's name, not the secret; Razorpay's ``rzp_live_`` key id is public.
- The fifth held-out set's contexts, general too: password keywords in more syntaxes (SQL
  ``IDENTIFIED BY``; a config directive's ``Name value`` line, ``requirepass``; ``-storepass``,
  ``--passphrase``, ``-U user%pw``, ``-u user -p pw``, ``ldap* -w``, ``htpasswd -b``,
  ``sqlplus user/pw@``; a quoted secret's name and value as two arguments or an XML key/value
  pair; a call named for a password or credential given one; ``auth=(user, pw)``; PDO;
  ``[]byte("...")``; ``ConvertTo-SecureString ... -AsPlainText``; a base64'd ``user:pw`` for
  Basic auth; Wi-Fi PSKs; Bundler's per-host credentials; Markdown `` `user` / `pw` ``), words
  for a password in other languages, any ``Authorization: <scheme> <token>``, hook paths with a
  random id, credential query parameters, session cookies, a JWK's ``"d"``, VAPID private keys,
  ``otpauth://`` secrets, recovery-code lists, CloudFront signatures, gitleaks' provider
  prefixes. A match inside a browser SDK's configuration (firebaseConfig, datadogRum, NREUM,
  Bugsnag.start, Paddle.Initialize, braintree's drop-in, a push subscription) or a value of a
  published public shape (Datadog's ``pub`` client tokens, ``NRJS-``, Braintree tokenization
  keys) is public by design; Laravel's ``eyJpdiI6`` ciphertext and HCL's ``${var.x}`` are no values.
- The path and a revision message are scanned with the same rules
  (``scan_path``, ``scan_message``); their problems say where, never what.
- Scanning is linear in the content: a rule's start is never preceded by a
  character its own body may contain (a look-behind instead of ``\\b`` where
  needed) and open-ended parts are only used where nothing follows them, so a
  crafted file such as "a-a-a-..." cannot make the regexes quadratic.
- A Problem names the line and the kind of credential and never contains any
  part of the matched text; messages are built from fixed strings only.
- Speed never changes what is found. A rule's regex is not run over the whole
  text (a leading ``\\b``, look-behind or ``(?i)`` stops ``re`` from searching
  for a literal prefix, so it would try every position). Instead each rule
  names anchors: literals that every one of its matches starts with (or, for
  URLs, ends its scheme with). All anchors are found together in a few passes,
  and the regex is tried with ``match`` only at those candidate starts, in
  order, skipping any inside the previous match. That returns exactly what
  ``finditer`` returns, provided the candidates include every position where
  the regex matches (an extra candidate only costs a failed ``match``) and no
  regex can match the empty string. ``_scan_reference`` is the plain
  ``finditer`` scan; the tests assert both give the same matches and problems.
  The regexes are tried at a subset of the positions finditer tries, and the
  anchor passes do bounded work per character, so scanning stays linear.
- Case-insensitive rules look for their anchors in a folded copy of the text of
  the same length, so offsets carry over; it maps every character that
  ``(?i)`` matches as an ASCII letter to that letter, including the four
  non-ASCII ones (U+0130, U+0131, U+017F, U+212A).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple, cast

from .base import LineIndex, Problem

KIND = "secret"


class _LazyRegex:
    """A regex compiled the first time it is used.

    Compiling the scanner's ~330 regexes took ~0.2 s of every process's start-up,
    though a process that reads memory never scans, and a scan tries a rule's regex
    only where one of its anchors occurs. On first use the compiled pattern's
    methods are copied onto the instance, so later calls cost what the pattern's own
    do (no ``__getattr__`` after the first).
    """

    def __init__(self, source: str, flags: int = 0) -> None:
        self.pattern = source
        self.flags = flags

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self.pattern, self.flags)
        for attr in ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
                     "groupindex", "groups"):
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)


def _regex(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile``, deferred to the pattern's first use (``_LazyRegex``)."""
    return cast("re.Pattern[str]", _LazyRegex(source, flags))


@dataclass(frozen=True)
class _Anchor:
    """A literal that locates every match of a rule.

    Every match starts where an occurrence of ``literal`` starts (in the folded
    text when ``folded``), or, when ``back_over`` is set, where the run of
    ``back_over`` characters that ends at the occurrence starts, if that run is
    1 to ``back_max`` characters long. With ``followed_by`` (a one-character
    literal only), only occurrences followed by one of its characters count: they
    are found by a regex of their own, not with the groups (``_followed``), so a
    literal as common as ":" costs a C-speed pass, not a Python step per occurrence.
    """

    literal: str
    folded: bool = False
    back_over: str = ""
    back_max: int = 0
    followed_by: str = ""
    # Where _Candidates keeps this anchor's occurrences (computed once: starts() reads it per rule per scan).
    key: tuple[bool, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        literal = self.literal if not self.followed_by else f"{self.literal}[{self.followed_by}]"
        object.__setattr__(self, "key", (self.folded, literal))


@dataclass(frozen=True)
class _Rule:
    what: str  # the kind, as it reads in a sentence: "an AWS access key id"
    regex: re.Pattern[str]  # the secret part is the named group "s" when present
    anchors: tuple[_Anchor, ...]  # between them, locate every match (see _Anchor)
    confirm: Callable[[re.Match[str], str], bool] | None = None
    generic: bool = False  # only reported on lines where no specific rule fired


def _prefixed(
    what: str, prefixes: Iterable[str], body: str, confirm: Callable[[re.Match[str], str], bool] | None = None
) -> _Rule:
    """A token that starts a word with one of ``prefixes`` and goes on as ``body`` (a regex)."""
    prefixes = tuple(prefixes)
    alternatives = "|".join(re.escape(p) for p in prefixes)
    return _Rule(what, _regex(rf"\b(?P<s>(?:{alternatives}){body})"), _starts(*prefixes), confirm)


def _starts(*literals: str) -> tuple[_Anchor, ...]:
    """Every match starts with one of ``literals``, case as written."""
    return tuple(_Anchor(lit) for lit in literals)


def _starts_folded(*words: str) -> tuple[_Anchor, ...]:
    """Every match of a ``(?i)`` rule starts with one of ``words``, in any case."""
    return tuple(_Anchor(word, folded=True) for word in words)


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
    "changeme",
    "example",
    "your",
    "placeholder",
    "redacted",
    "token",
    "xxx",
    "***",
)


# A password that is only a word for "password" (user:password@, u:pass123@, :secret@) is a
# documentation stand-in; a password merely *containing* such a word (Pass9xK2vQ) is real.
_URL_PASSWORD_WORD = _regex(
    r"(?:my|your|the|some|db|user|app)?[-_]?(?:pass(?:word|wd)?|pwd|secret|token|changeme|admin|root|test)"
    r"[-_]?\d{0,4}"
)


def _real_url_password(m: re.Match[str], _: str) -> bool:
    pw = m.group("s").lower()
    # user == password (postgres:postgres@localhost) is a trivial local login, not a secret.
    if pw == m.group("u").lower():
        return False
    if pw[0] in "$<{[%" or _URL_PASSWORD_WORD.fullmatch(pw):
        return False
    return not any(p in pw for p in _URL_PLACEHOLDERS)


def _b64_json(segment: str) -> object:
    try:
        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error):
        return None


def _not_jwt_io_example(m: re.Match[str], _: str) -> bool:
    # jwt.io's default token (every algorithm) carries this payload; it is on countless pages.
    # A token whose role says anon is public by design (Supabase's anon key ships in browsers).
    payload = _b64_json(m.group("s").split(".")[1])
    if isinstance(payload, dict) and payload.get("role") == "anon":
        return False
    return not (isinstance(payload, dict) and payload.get("sub") == "1234567890" and payload.get("name") == "John Doe")


def _discord_user_id(m: re.Match[str], _: str) -> bool:
    # A Discord bot token starts with the bot's numeric id (a 17-20 digit snowflake) in base64.
    first = m.group("s").split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4))
    except (ValueError, binascii.Error):
        return False
    return raw.isdigit() and raw.isascii() and 17 <= len(raw) <= 20


_VALUE_PLACEHOLDERS = (
    "changeme",
    "change_me",
    "change-me",
    "example",
    "your",
    "placeholder",
    "redacted",
    "dummy",
    "sample",
    "xxx",
    "***",
    "...",
    # Redacted with bullets or dots (a dashboard's "shpat_••••9ac4").
    "•••",
    "●●●",
    "···",
    "todo",
    "fixme",
    "replace",
    "insert",
)
_CODE_REFERENCE = _regex(r"[A-Za-z_][A-Za-z0-9_]*(?:[.:][A-Za-z_][A-Za-z0-9_]*)+")
# A kubeadm bootstrap token (token id "." token secret) reads like a.b but is a credential.
_BOOTSTRAP_TOKEN = _regex(r"[a-z0-9]{6}\.[a-z0-9]{16}")


def _code_reference(value: str) -> bool:
    """settings.SECRET_KEY, os.environ: a name in code, not a value (a bootstrap token is a value)."""
    if _BOOTSTRAP_TOKEN.fullmatch(value) and any(c.isdigit() for c in value):
        return False
    # A part of 16+ characters mixing letters and digits is random, not a name (patXXX.<hex>).
    if any(len(p) >= 16 and _letters_and_digits(p) for p in re.split(r"[.:]", value)):
        return False
    return _CODE_REFERENCE.fullmatch(value) is not None


def _letters_and_digits(text: str) -> bool:
    return any(c.isalpha() for c in text) and any(c.isdigit() for c in text)


def _in_reference(m: re.Match[str], text: str) -> bool:
    """The match sits inside a reference (arn:aws:secretsmanager:...:secret:name): no value."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    head = text[max(line_start, m.start() - 200) : m.start()]
    token = re.split(r"[\s\"'`=,(\[{]", head)[-1].lower()
    return token.startswith(("arn:", "valuefrom")) or "://" in token


def _real_assigned_value(m: re.Match[str], _: str) -> bool:
    """A value that looks like a real credential, not a placeholder, a reference or code."""
    value = m.group("s")
    low = value.lower()
    # ("!" may start a password; a YAML tag such as "!vault |" is followed by a space and too short.)
    if any(p in low for p in _VALUE_PLACEHOLDERS) or value[0] in "/.%&*@=:#-+" or _SPELLS_PASSWORD.fullmatch(value):
        return False
    if value[0] == "~" and (len(value) == 1 or "/" in value):  # a home path, or YAML's null
        return False
    if _code_reference(value) or len(set(value)) < 5:  # settings.SECRET_KEY, aaaa1111
        return False
    if "://" in value and "@" not in value:  # an address (op://vault/item/field, https://...), no credential
        return False
    if value.startswith(_PUBLIC_PREFIXES):
        return False
    classes = sum(
        (
            any(c.isupper() for c in value),
            any(c.islower() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )
    has_letter, has_digit = any(c.isalpha() for c in value), any(c.isdigit() for c in value)
    return (has_letter and has_digit) or (len(value) >= 16 and classes >= 3)


# A name ending with one of these before the word "token" names a pagination or sync
# cursor (nextPageToken, continuationToken, sync_token): opaque, but no credential.
_CURSOR_NAMES = ("page", "next", "continuation", "sync", "resume", "cursor", "start", "marker")


def _cursor_before(m: re.Match[str], text: str) -> bool:
    """The name's part before the matched word is a cursor's (nextPageToken, SYNC_TOKEN), as a
    whole part: RSYNC_PASSWORD's part is "rsync", no cursor."""
    head = text[max(0, m.start() - 16) : m.start()].rstrip("_-.")
    parts = re.split(r"[^A-Za-z0-9]|(?<=[a-z])(?=[A-Z])", head)
    return bool(parts) and parts[-1].lower() in _CURSOR_NAMES


# A name saying its value is public by design (publicAccessToken, PUBLISHABLE_KEY, anon_key), or
# Plaid's link_token (handed to the browser to open Link): the matched word ends such a name.
_PUBLIC_NAME = _regex(r"(?i)pub(?:lic|lishable)|anon|link_?$")


def _name_before(m: re.Match[str], text: str) -> str:
    """The name characters right before the match, on its line, at most 48 (DD_APP_ before KEY)."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    head = text[max(line_start, m.start() - 48) : m.start()]
    return head[len(head.rstrip(_NAME_CHARS)) :]


def _public_name_before(m: re.Match[str], text: str) -> bool:
    return _PUBLIC_NAME.search(_name_before(m, text)) is not None


_PUBLIC_COMMENT = _regex(r"(?://|#|--|/\*).*\b(?:public|search[- ]only)\b", re.IGNORECASE)
# How far after a value its comment is looked for: a bounded window keeps the scan linear.
_COMMENT_WINDOW = 120


def _said_public_after(m: re.Match[str], text: str) -> bool:
    """A comment after the value, on its line, says the key is public (``// public search key``)."""
    end = text.find("\n", m.end(), m.end() + _COMMENT_WINDOW)
    window = text[m.end() : end if end >= 0 else m.end() + _COMMENT_WINDOW]
    return _PUBLIC_COMMENT.search(window) is not None


def _real_assigned_secret(m: re.Match[str], text: str) -> bool:
    if _cursor_before(m, text) or _in_reference(m, text) or _public_name_before(m, text):
        return False
    return not _said_public_after(m, text) and _real_assigned_value(m, text)


def _real_bearer(m: re.Match[str], text: str) -> bool:
    # A JWT in the header is judged as a JWT: jwt.io's example token is on countless pages.
    if m.group("s").count(".") == 2 and m.group("s").startswith("eyJ") and not _not_jwt_io_example(m, text):
        return False
    value = m.group("s")
    # A 32+ hex digit part (Asana's 2/<user>/<app>:<hex>, many services' keys) is random too.
    return _mixed(value) or (
        any(c.isalpha() for c in value) and re.search(r"[0-9a-f]{32}", value) is not None and _has_digit(m, text)
    )


def _real_auth_header(m: re.Match[str], text: str) -> bool:
    """Authorization: <scheme> <token>. Bearer, Token, Basic and SSWS as _real_bearer; any other
    scheme (GenieKey, Splunk, a vendor's own word) names a credential scheme, so its token counts
    as soon as it is random: a UUID (many services issue them as keys) included."""
    if m.group("scheme").lower() in ("bearer", "token", "basic", "ssws"):
        # A UUID is a bearer token too (Squarespace's and Heroku's keys are UUIDs); not one of zeros.
        value = m.group("s")
        if m.group("scheme").lower() != "basic" and _UUID.fullmatch(value) and len(set(value)) >= 10:
            return True
        return _real_bearer(m, text)
    value = m.group("s")
    return bool(_UUID.fullmatch(value)) or _real_bearer(m, text) or _key_like(m, text)


def _flag_value(m: re.Match[str], text: str) -> bool:
    """``--secret X`` as _real_command_password, except a resource's name made of words
    (``--secret=stripe-key`` in ``gcloud secrets versions access``): a name, not a value."""
    if re.fullmatch(r"[a-z]+(?:[-_][a-z]+)+", m.group("s").strip("'\"")):
        return False
    return _real_command_password(m, text)


def _client_key(m: re.Match[str], text: str) -> bool:
    """A client factory's key, unless the text around it says the key is search-only or public."""
    line_start = text.rfind("\n", 0, max(0, text.rfind("\n", 0, m.start()))) + 1
    line_end = text.find("\n", m.end())
    around = text[line_start : line_end if line_end >= 0 else len(text)].lower()
    if re.search(r"search[-_ ]?only|public", around):
        return False
    return _key_like(m, text)


def _called_with_key(m: re.Match[str], text: str) -> bool:
    """A function or class named for a key, token or credential given a random string literal
    (AzureKeyCredential("..."), Auth.api_key("...")); not one whose name says public, id, hash."""
    name = (_name_before(m, text) + m.group("n")).lower()
    if _NOT_SECRET_NAME.search(name) or any(c in name for c in _CURSOR_NAMES):
        return False
    value = m.group("s")
    # (A token of lower-case letters and digits, Mattermost's 26, is random when long and digit-rich.)
    long_random = len(value) >= 24 and sum(c.isdigit() for c in value) >= 4
    return (_key_like(m, text) or long_random) and _random_value(value)


def _password_value(m: re.Match[str], _: str) -> bool:
    """A value under a password's name (YAML, INI, XML element): password-shaped; a leading
    ``%`` or ``*`` is the password's own character, not a reference, once the rest is checked."""
    value = m.group("s")
    name = _name_at(m, _) if "n" in m.re.groupindex else ""
    if _NOT_SECRET_NAME.search(name) or _REFERENCE_VALUE.search(value):
        return False
    # A password hash (pbkdf2_sha256$870000$salt$hash, $2b$12$...) is stored instead of a password.
    if value.count("$") >= 2:
        return False
    return _password_shaped(value[1:] if value[0] in "%*" else value, 8)


def _real_command_password(m: re.Match[str], text: str) -> bool:
    """A password given on a command line (mysql -pX, curl -u u:X, --password X): not a
    variable, a placeholder or a word, and shaped like a password."""
    value = m.group("s").strip("'\"")
    if len(value) < 6 or value[0] in "$<{[%*" or _URL_PASSWORD_WORD.fullmatch(value.lower()):
        return False
    return not any(p in value.lower() for p in _VALUE_PLACEHOLDERS) and len(set(value)) >= 5


_REGISTRY_CLIENT = _regex(r"\b(?:docker|podman|nerdctl|buildah|helm[ \t]+registry)[ \t]+$")


def _registry_login(m: re.Match[str], text: str) -> bool:
    """``login ... -p X`` after docker, podman, nerdctl, buildah or helm registry, with a real password."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    before = text[max(line_start, m.start() - 40) : m.start()]
    return _REGISTRY_CLIENT.search(before) is not None and _real_command_password(m, text)


def _key_like(m: re.Match[str], _: str) -> bool:
    """A random key: mixed case and digits, or 32+ hex digits with letters and digits."""
    body = m.group("s")
    hexed = len(body) >= 32 and all(c in "0123456789abcdefABCDEF" for c in body)
    # A provider's word, "_" and 32+ hex digits (live_<hex>, a key's documented shape) is random too.
    prefixed = re.fullmatch(r"[a-z]{2,12}_[0-9a-f]{32,}", body) is not None and _has_digit(m, _)
    return _mixed(body) or prefixed or (hexed and any(c.isdigit() for c in body) and any(c.isalpha() for c in body))


def _defined_secret(m: re.Match[str], text: str) -> bool:
    """``#define NAME "value"`` with a secret's name (not a public one) and a real-looking value."""
    return _PUBLIC_NAME.search(m.group("n")) is None and _real_assigned_value(m, text)


def _django_key(m: re.Match[str], _: str) -> bool:
    # startproject's keys draw from lower-case letters, digits and !@#$%^&*(-_=+); a real one
    # mixes letters with digits or symbols, where a snake_case name does not.
    key = m.group("s")
    return any(c.isalpha() for c in key) and sum(not c.isalpha() for c in key) >= 5


def _hex_mixed(m: re.Match[str], _: str) -> bool:
    body = m.group("s")
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body[-32:])


# A quoted value that only refers to a secret kept elsewhere: a shell or template variable,
# a secret manager's reference, or a value encrypted in place (sops, Jasypt, EJSON, Ansible Vault).
_REFERENCE_VALUE = _regex(
    # Each form is strict (a whole ${NAME} or HCL's ${var.name}, $(cmd), {{ x }}, %(name)s, ENC[...],
    # Laravel's encrypt() payload: base64 of {"iv":..., "value":..., "mac":...}) because a
    # random key may hold "$(" or "%(" by chance: startproject's alphabet has $, %, ( and ).
    r"\$\{[A-Za-z_][A-Za-z0-9_.]*(?:[:?=-][^}]*)?\}|^eyJpdiI6|^\$[A-Za-z_][A-Za-z0-9_]*$|^\$\([a-z][^)]*\)$|\{\{|\{%"
    r"|%\([A-Za-z_]+\)[sd]|%env\(|^env\(|^<[^>]*>$|^(?i:enc)[\[(]|^EJ\[\d+:|^!vault|^(?:op|vault|secret|arn|sm)://|^(?i:vault):|\$ANSIBLE_VAULT"
)


# Keys public by design, named by their prefix: Stripe's publishable keys, Mapbox's public tokens,
# Razorpay's key ids (the key secret that goes with one has no prefix).
_PUBLIC_PREFIXES = ("pk_live_", "pk_test_", "pk.eyJ", "rzp_live_", "rzp_test_")


def _real_quoted_value(m: re.Match[str], text: str) -> bool:
    """A quoted value after a secret's name (.env, YAML, shell): punctuation is part of it."""
    value = m.group("s")
    if _REFERENCE_VALUE.search(value) or value[0] in "/~." or value.startswith(_PUBLIC_PREFIXES):
        return False
    if _public_name_before(m, text) or _said_public_after(m, text):
        return False
    if _cursor_before(m, text) or any(p in value.lower() for p in _VALUE_PLACEHOLDERS):
        return False
    if _code_reference(value) or len(set(value)) < 5:
        return False
    if _password_shaped(value, 8) or _real_assigned_value(m, text):
        return True
    # Letters and two kinds of punctuation, no digit (a generated key such as "q#w!er$ty^ui").
    return len(value) >= 12 and any(c.isalpha() for c in value) and len(_PASSWORD_SYMBOLS.intersection(value)) >= 2


_PASSWORD_SYMBOLS = frozenset("!@#$%^&*+=?~|<>[]{}()'\";:,")
_VERSION = _regex(r"v?\d+(?:\.\d+)+[A-Za-z0-9.+-]*")


def _password_shaped(token: str, shortest: int = 8) -> bool:
    """What a person's or a generator's password looks like: letters and digits with a symbol
    (Tr0ub4dor&3), or 12+ characters of upper case, lower case and digits; never a
    version, an address, a path, an email, a reference or a placeholder."""
    if not shortest <= len(token) <= 100 or token[0] in "/~$<{%-" or "://" in token:
        return False
    if _VERSION.fullmatch(token) or re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", token):
        return False
    low = token.lower()
    if any(p in low for p in _VALUE_PLACEHOLDERS) or _URL_PASSWORD_WORD.fullmatch(low):
        return False
    letters, digits = any(c.isalpha() for c in token), any(c.isdigit() for c in token)
    if not (letters and digits):
        return False
    if any(c in _PASSWORD_SYMBOLS for c in token):
        return True
    return len(token) >= 12 and any(c.isupper() for c in token) and any(c.islower() for c in token)


# Where a password written in prose ends: the sentence's own punctuation, not the password's.
_TRAILING = ".,;:)]}'\"`"


# The textbook bad password: the word itself, then digits or a "!" (password123, P@ssw0rd1!).
_SPELLS_PASSWORD = _regex(r"(?i)p[a@]ssw(?:[o0]rd|ort)[0-9]*[!.]?")


def _password_in_prose(m: re.Match[str], text: str) -> bool:
    """A word for "password" followed, within the same clause, by a password-shaped token
    ("the password for the staging db is Tr0ub4dor&3", "pass: Xk9#mPq2!vL")."""
    window = m.group("w")
    # A Google app password: four groups of four lower-case letters after "app password".
    if text[max(0, m.start() - 4) : m.start()].lower() == "app " and re.search(
        r"(?<![a-z])[a-z]{4} [a-z]{4} [a-z]{4} [a-z]{4}(?![a-z])", window
    ):
        return True
    raws = window.split()
    # A token the 80-character window cut off (a long base64 blob) is not judged by its head.
    if raws and m.end() < len(text) and not text[m.end()].isspace():
        raws.pop()
    for raw in raws:
        token = raw.strip("'\"`(").rstrip(_TRAILING)
        # Code, a flag (CFLAGS=-O2), or a value encrypted in place (ENC[...]): not a password.
        if _ONE_CASE_ASSIGNMENT.match(token) or "(" in token or _REFERENCE_VALUE.search(token):
            continue
        # A policy's example of a bad password spells the word itself (Password123!, P@ssw0rd1).
        if _password_shaped(token, 8) and not _SPELLS_PASSWORD.fullmatch(token):
            return True
    return False


_ASSIGNMENT = _regex(r"[A-Za-z_][A-Za-z0-9_]*=")
# A variable being set (CFLAGS=-O2, db_pass=...): a name in one case. A password may hold "="
# after mixed-case letters and digits (nOO4g8iXE=F=xU), which is no name.
_ONE_CASE_ASSIGNMENT = _regex(r"(?:[A-Z_][A-Z0-9_]*|[a-z_][a-z0-9_]*)=")


# A name ending in "key" that says the key is public or is no credential at all.
_NOT_SECRET_KEY_NAMES = (
    *("pub", "site", "search", "host", "ssh", "cache", "hash", "digest", "checksum", "fingerprint"),
    *("integrity", "idempotency", "partition", "sort", "primary", "foreign", "object", "lookup"),
)


def _key_named_value(m: re.Match[str], text: str) -> bool:
    """A long random base64 value under a name ending in "key" (COSMOS_KEY=..., masterKey: ...),
    unless the name says the key is public or no credential (PublicKey, sitekey, cache_key)."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    head = text[max(line_start, m.start() - 48) : m.start()]
    name = head[len(head.rstrip(string.ascii_letters + string.digits + "_.-")) :].lower()
    # (A sentence naming the key a cache's, "restored from key: <os>-<tool>-<hash>", says so too.)
    if any(word in name for word in _NOT_SECRET_KEY_NAMES) or "cache" in head.lower():
        return False
    value = m.group("s")
    # A token led by a word and "_" (sk_test_, live_) is a provider's: its own rules judge it.
    # One led by an algorithm and "-" (sha512-..., a lock file's integrity) is a digest.
    if re.match(r"[A-Za-z]{2,8}_|(?i:sha\d+|md5|blake2b?)-", value):
        return False
    return _mixed(value) and len(set(value)) >= 16


# Words between a secret's name and "is" that make the value something else than the secret.
_NOT_THE_SECRET = _regex(r"(?i)\b(?:id|ids|name|names|type|format|length|prefix|hint|path|owner)\b")


def _secret_in_prose(m: re.Match[str], text: str) -> bool:
    """A secret named in a sentence, then "is" and a random key ("the client secret for billing
    is <key>"): mixed case and digits, not public (a publishable key), not an id or a name."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    before = text[max(line_start, m.start() - 24) : m.start()].lower()
    between = m.group("w").lower()
    if "pub" in before or _NOT_THE_SECRET.search(between) or any(w in between for w in _CURSOR_NAMES):
        return False  # a publishable key, a key's id, a pagination cursor ("the token for the next page")
    value = m.group("s")
    low = value.lower()
    if value.startswith(_PUBLIC_PREFIXES) or any(p in low for p in _VALUE_PLACEHOLDERS):
        return False
    return _mixed(value) and len(set(value)) >= 10


def _user_slash_password(m: re.Match[str], text: str) -> bool:
    """A login's user and password as a pair ("login: deploy / <password>"): password-shaped."""
    value = m.group("s").rstrip(_TRAILING)
    return not _REFERENCE_VALUE.search(value) and _password_shaped(value, 8)


# Names before a colon that make "name:value" a digest or an address, not a user and password.
_NOT_A_USER = _regex(r"(?i)(?:sha\d*|md5|h\d|blake2?b?|crc32|base64|[a-z][a-z0-9+.-]*(?:url|uri|href|src)|[a-z])")


def _colon_file_password(m: re.Match[str], _: str) -> bool:
    """A credentials file's line: ~/.pgpass (host:port:database:user:password) or a plain
    htpasswd entry (user:password) alone on its line."""
    value = m.group("s")
    if value[0] in "$<{[%*" or "\\" in value or _REFERENCE_VALUE.search(value):
        return False
    if m.group("pg") is not None:  # the .pgpass form is telling enough: any real password
        letters = any(c.isalpha() for c in value)
        return _real_command_password(m, _) and letters and not value.isalpha()
    user = m.group("u")
    if not (user[0].isalpha() or user[0] == "_") or _NOT_A_USER.fullmatch(user):
        return False
    return len(value) <= 64 and _password_shaped(value, 8)


def _docker_auth(m: re.Match[str], _: str) -> bool:
    """A docker config "auth": base64 of "user:password" with a real password."""
    try:
        raw = base64.b64decode(m.group("s"), validate=True).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    user, sep, password = raw.partition(":")
    return bool(sep and user and len(password) >= 6 and password.isprintable() and password.lower() != user.lower())


def _pem_private_key_in_base64(m: re.Match[str], _: str) -> bool:
    """base64 of a PEM block (kubeconfig client-key-data) whose header names a private key."""
    head = m.group("s")[:64]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4]).decode("ascii", "replace")
    except (ValueError, binascii.Error):
        return False
    return "PRIVATE KEY" in decoded


def _signed_url(m: re.Match[str], text: str) -> bool:
    """An Azure SAS signature: a ``sig=`` among the other SAS parameters (sv=, se=, sp=)."""
    query = text[max(0, m.start() - 300) : m.start()]
    return any(p in query for p in ("sv=", "se=", "sp=", "sr=")) and _mixed_body(m, text)


# --- the context rule: a random value under a secret's name -------------------------------

# Words a secret's name contains (the context rule's anchors: its match starts at one). Names
# with private, session, signing, bearer or unseal hold one of them too (PRIVATE_KEY, Unseal Key 1,
# SESSION_SECRET); each literal costs a pass over every text, so there are no more of them. "pw"
# locates "pwd" and "auth" every "authorization": passes the other rules already make.
_CONTEXT_WORDS = ("key", "token", "secret", "pass", "pw", "auth", "credential")
# A name containing one of these says the value is public, an id, or no credential at all.
_NOT_SECRET_NAME = _regex(
    r"pub|anon|link_?token|client_?id|site_?key|key_?id|idempotency|author(?!i[sz])|hash|sha\d|checksum|digest"
    r"|etag|integrity|fingerprint|cache|partition|sort_?key|primary|foreign|lookup|object_?key|search"
    r"|bypass|passeng|passport|passthr|passiv|compass|passage|monkey|turkey|hockey|keyboard|keyword"
    r"|keyspace|keystore_?(?:path|type)|keychain|keyring|keypair_?name|ssh|host_?key|client[_-]?key|encrypted|recipient"
)
# The name's last part saying the value is about a secret, not the secret (token_type, key_name).
_NOT_SECRET_LAST_PART = frozenset(
    (
        *("id", "ids", "name", "names", "type", "types", "url", "uri", "urls", "endpoint", "path", "file"),
        *("dir", "length", "size", "count", "format", "version", "prefix", "hint", "ttl", "expiry", "expires"),
        *("expiration", "alg", "algorithm", "header", "field", "env", "var", "ref", "arn", "region", "label"),
        *("policy", "mode", "usage", "limit", "scope", "scopes", "enc"),
    )
)
_UUID = _regex(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_NAME_CHARS = string.ascii_letters + string.digits + "_.-"


def _name_at(m: re.Match[str], text: str) -> str:
    """The whole name a context match starts inside (DD_APP_KEY from KEY on), lower case."""
    return (_name_before(m, text) + text[m.start() : m.end("n")]).lower()


# Values that are a reference, a digest (SRI's sha512-...), a test-mode key or a public key (age1...).
_NOT_A_SECRET_VALUE = ("arn:", "sha256", "sha384", "sha512", "sha1", "md5", "sk_test_", "age1", "ssh-")


def _random_value(value: str) -> bool:
    """A generated value: 20+ characters mixing letters and digits inside one part (not a name
    made of words and numbers such as release_2024_candidate), varied, no placeholder or reference."""
    low = value.lower()
    if len(value) < 20 or len(set(value)) < 10 or value[0] in "/~.":
        return False
    if any(p in low for p in _VALUE_PLACEHOLDERS) or _REFERENCE_VALUE.search(value) or _code_reference(value):
        return False
    # (A test-mode key, sk_test_..., opens no live account: the provider rules skip it too.)
    if value.startswith(_PUBLIC_PREFIXES) or low.startswith(_NOT_A_SECRET_VALUE):
        return False
    return any(_letters_and_digits(part) for part in re.split(r"[_.\-/+=~]", value))


def _secret_named_value(m: re.Match[str], text: str) -> bool:
    """A random value assigned or paired with a secret's name (see the rule); not public, an id,
    a hash, a cursor, a reference, or a UUID under any name but a secret's."""
    name = _name_at(m, text)
    if _NOT_SECRET_NAME.search(name) or _in_reference(m, text) or _said_public_after(m, text):
        return False
    parts = [p for p in re.split(r"[_.\-]|(?<=[a-z])(?=[A-Z])", text[m.end("n") - len(name) : m.end("n")]) if p]
    last = parts[-1].lower() if parts else ""
    if last in _NOT_SECRET_LAST_PART and not (last == "id" and "secret" in name):
        return False
    if any(c in name for c in _CURSOR_NAMES):
        return False
    value = m.group("s")
    # A value in a block of encrypted ones (a SealedSecret's encryptedData) is ciphertext.
    if "encrypted" in text[max(0, m.start() - 300) : m.start()].lower():
        return False
    if value.startswith("eyJ") and value.count(".") == 2 and not _not_jwt_io_example(m, text):
        return False
    # Paired by a space only on a command line: a flag (--secret X) or an auth verb's argument.
    spaced = m.group("ws") is not None
    if spaced and not ((name.startswith("-") or name.startswith(("authori", "authent"))) and _mixed(value)):
        return False
    # A value followed by "(" is a function being called (urlBase64ToUint8Array(...)), not a value.
    if text[m.end() : m.end() + 1] == "(":
        return False
    line_start = text.rfind("\n", 0, m.start()) + 1
    before = text[max(line_start, m.start() - 48) : m.start()]
    # "key" alone is any lookup key (a CI cache's key: deps-<hash>): only a mixed-case random value,
    # and none on a line that says cache, unless it is a login or init call's key= argument.
    if name.strip("-_.") in ("key", "keys"):
        if re.search(r"(?:login|auth[a-z]*|init|connect|configure)\([^()]*$", before):
            return _random_value(value)
        if not _mixed(value) or "cache" in before.lower():
            return False
    if _UUID.fullmatch(value):
        return any(w in name for w in ("secret", "token", "pass", "apikey", "api_key", "api-key"))
    return _random_value(value)


def _table_password(m: re.Match[str], text: str) -> bool:
    """A Markdown table whose header names a password, secret or token column, with a real one in it."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    prefix = text[line_start : m.start()]
    if not prefix.rstrip(" \t").endswith("|"):
        return False
    column = prefix.count("|")
    for row in m.group("rows").splitlines():
        cells = row.split("|")
        if len(cells) <= column:
            continue
        cell = cells[column].strip().strip("`'\"")
        if not cell or _REFERENCE_VALUE.search(cell) or "/" in cell:
            continue
        if _password_shaped(cell, 8) or _random_value(cell):
            return True
    return False


def _encoded_json_secret(m: re.Match[str], text: str) -> bool:
    """base64 of JSON (a dockerconfigjson, a service account key) holding a credential: the
    decoded text is scanned with the same rules. Each level is 3/4 as long, so it ends."""
    value = m.group("s")
    if len(value) > 65536:
        return False
    try:
        raw = base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4))
        decoded = raw.decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    return bool(_find(decoded))


# A constructor's name that says its argument is public or no credential.
_NOT_SECRET_CLASS = _regex(r"(?i)pub|hash|digest|uuid|id$|address|path|url|uri|decimal|sha|color|version|date")


def _constructor_key(m: re.Match[str], text: str) -> bool:
    """A class given a random key as its only string argument: Dropbox('sl.<token>')."""
    if _NOT_SECRET_CLASS.search(m.group("c")):
        return False
    value = m.group("s")
    # (Or 32+ hex digits mixing letters and digits: a Meraki or Flickr key, DashboardAPI("<hex>").)
    hexed = len(value) >= 32 and _key_like(m, text)
    return ((_mixed(value) and len(set(value)) >= 16) or hexed) and _random_value(value)


# --- the fifth held-out set's contexts (issue 36) ---------------------------------------
#
# Each helper below judges a context that says "this is a credential" in some syntax the
# earlier rules did not read; none of them names one sample's values.


def _password_like(value: str) -> bool:
    """A password or a generated key: password-shaped, a random value, or 24+ hex digits; one
    word (a value holding spaces is a sentence, a message, a format)."""
    if any(c.isspace() for c in value) or _REFERENCE_VALUE.search(value):
        return False
    if any(p in value.lower() for p in _VALUE_PLACEHOLDERS):
        return False
    hexed = len(value) >= 24 and all(c in string.hexdigits for c in value) and _letters_and_digits(value)
    return _password_shaped(value, 8) or _random_value(value) or hexed


def _secret_name_ok(name: str) -> bool:
    """A name holding a secret's word that does not say public, id, hash, cursor..."""
    if _NOT_SECRET_NAME.search(name):
        return False
    parts = [p for p in re.split(r"[_.\-\s]", name) if p]
    return not (parts and parts[-1] in _NOT_SECRET_LAST_PART)


def _paired_literal(m: re.Match[str], text: str) -> bool:
    """A quoted secret's name then its quoted value, as two arguments ("DB_PASSWORD", "<pw>") or
    an XML key/value pair (key="ClearTextPassword" value="<pw>"): the pair is the assignment."""
    name = _name_at(m, text)
    start = m.end("n") - len(name)
    if start <= 0 or text[start - 1] not in "'\"" or not _secret_name_ok(name):
        return False
    value = m.group("s")
    # (Or a generated salt or key with every kind of punctuation, WordPress's AUTH_KEY; one word.)
    salt = len(value) >= 32 and len(_PASSWORD_SYMBOLS.intersection(value)) >= 4 and " " not in value
    return _password_like(value) or salt


def _named_literal(m: re.Match[str], text: str) -> bool:
    """A variable or call named for a secret given a literal: []byte("<key>"), b"<key>"."""
    return _secret_name_ok(_name_at(m, text)) and _password_like(m.group("s"))


def _credential_call(m: re.Match[str], text: str) -> bool:
    """new PasswordAuthentication(user, "<pw>"), NetworkCredential(user, @"<pw>"): a later argument."""
    return _secret_name_ok(_name_at(m, text)) and _password_shaped(m.group("s"), 8)


def _pair_password(m: re.Match[str], _: str) -> bool:
    """The second of a (user, password) pair: password-shaped or random."""
    return _password_like(m.group("s"))


def _directive_value(m: re.Match[str], text: str) -> bool:
    """A config file's "Name value" line (redis.conf, GeoIP.conf, Fluent Bit): the name, alone at
    the start of its line, holds a secret's word; the value is password-shaped or random, or a
    long mixed-case run of letters (a generated token with no digit)."""
    name = _name_at(m, text)
    line_start = text.rfind("\n", 0, m.start()) + 1
    if text[line_start : m.end("n") - len(name)].strip() or not _secret_name_ok(name):
        return False
    value = m.group("s")
    if _password_like(value):
        return True
    upper, lower = any(c.isupper() for c in value), any(c.islower() for c in value)
    return len(value) >= 24 and value.isalpha() and upper and lower and len(set(value)) >= 14


def _user_p_password(m: re.Match[str], text: str) -> bool:
    """``-u user -p <pw>``: a real password, not a port mapping (docker run -u 1000 -p 8080:80) nor
    the user's own name (cassandra/cassandra, a default login)."""
    value = m.group("s").strip("'\"").rstrip(_TRAILING)
    if re.fullmatch(r"[\d.:]+(?:/(?:tcp|udp))?", value) or value.lower() == m.group("u").lower():
        return False
    return _real_command_password(m, text)


def _htpasswd_batch(m: re.Match[str], text: str) -> bool:
    """htpasswd -b [-c] file user <pw> (or -nb user <pw>): batch mode takes the password as an argument."""
    flags = m.group("f").replace("-", "").replace(" ", "").replace("\t", "")
    if "b" not in flags:
        return False
    args = [a for a in (m.group("a"), m.group("b2"), m.group("c")) if a]
    want = 2 if "n" in flags else 3
    if len(args) < want:
        return False
    value = args[want - 1].strip("'\"")
    return len(value) >= 6 and value[0] not in "$<{[%*" and (_password_shaped(value, 6) or _random_value(value))


def _webhook_id(m: re.Match[str], text: str) -> bool:
    """A URL's hook path followed by its random id (Mattermost /hooks/<id>, Feishu /hook/<uuid>,
    Zapier /hooks/catch/<n>/<id>): the id is the credential, anyone holding it can post."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    head = text[max(line_start, m.start() - 300) : m.start()]
    token = re.split(r"[\s\"'`(<\[]", head)[-1]
    if "://" not in token:
        return False
    value = m.group("s")
    if m.group("z"):
        return len(value) >= 6 and _letters_and_digits(value)
    return bool(_UUID.fullmatch(value)) or (len(value) >= 20 and _random_value(value))


def _url_query_secret(m: re.Match[str], text: str) -> bool:
    """?access_token=, ?code=, ?key=... in a URL (a DingTalk robot, an Azure Function key): random."""
    value = m.group("s").replace("%3D", "=").replace("%3d", "=").replace("%2B", "+").replace("%2F", "/")
    hexed = len(value) >= 32 and all(c in string.hexdigits for c in value) and _letters_and_digits(value)
    return hexed or (_random_value(value) and len(set(value)) >= 12)


_SESSION_COOKIE = _regex(r"(?i)sess|sid$|^sid|auth|token|remember|jwt|login|identity")
_NOT_SESSION_COOKIE = _regex(r"(?i)csrf|xsrf|lang|theme|consent|locale|tz|timezone|_ga|_gid|utm|pref")


def _session_cookie(m: re.Match[str], _: str) -> bool:
    """A Cookie header or curl -b holding a session-named cookie with a long random value."""
    for pair in m.group("c").strip("'\"").split(";"):
        name, sep, value = pair.strip().partition("=")
        if not sep or not _SESSION_COOKIE.search(name) or _NOT_SESSION_COOKIE.search(name):
            continue
        value = value.strip().strip('"').replace("%3A", ":").replace("%3a", ":")
        if len(value) >= 20 and len(set(value)) >= 10 and _letters_and_digits(value) and not _placeholder(value):
            return True
    return False


def _jwk_private(m: re.Match[str], text: str) -> bool:
    """A JWK's private exponent or scalar ("d") in the same object as its "kty"."""
    window = text[max(0, m.start() - 3000) : m.end() + 3000]
    return '"kty"' in window and _mixed(m.group("s"))


def _cloudfront_signed(m: re.Match[str], text: str) -> bool:
    """A CloudFront signed URL: its Signature next to a Key-Pair-Id."""
    return "Key-Pair-Id=" in text[max(0, m.start() - 3000) : m.end() + 300] and _mixed_body(m, text)


def _token_userinfo(m: re.Match[str], _: str) -> bool:
    """An API transport's DSN with a token as its user (postmark+api://<token>@default)."""
    value = m.group("s")
    return bool(_UUID.fullmatch(value)) or _random_value(value)


_RECOVERY_CODE = _regex(
    r"[ \t]*(?:[-*]|\d{1,2}[.)])?[ \t]*`?(?:[0-9a-z]{4,10}-[0-9a-z]{4,10}|[0-9A-Za-z]{8,16})`?[ \t]*"
)


def _recovery_codes(m: re.Match[str], text: str) -> bool:
    """2FA recovery or backup codes: four or more code-shaped lines under the heading."""
    lines = text[m.end() : m.end() + 2000].split("\n")[1:13]
    codes = [line for line in lines if _RECOVERY_CODE.fullmatch(line) and any(c.isdigit() for c in line)]
    return len(codes) >= 4


_PS_ASSIGNED = "[ \t]*=[ \t]*(?:'((?:[^'\\n]|''){1,200})'|\"((?:[^\"\\n]|\"\"){1,200})\")"


def _assigned_literal(name: str, text: str, before: int) -> str | None:
    """The string literal last assigned to ``$name`` or ``name`` in the 2,000 characters before."""
    window = text[max(0, before - 2000) : before]
    found = None
    for a in re.finditer(r"(?<![A-Za-z0-9_])\$?" + re.escape(name) + _PS_ASSIGNED, window):
        found = (a.group(1) or "").replace("''", "'") if a.group(1) is not None else a.group(2).replace('""', '"')
    return found


def _plaintext_secure_string(m: re.Match[str], text: str) -> bool:
    """ConvertTo-SecureString <literal or $var> -AsPlainText: a password written in the script."""
    if m.group("s") is not None:
        value: str | None = m.group("s").replace("''", "'")
    elif m.group("s2") is not None:
        value = m.group("s2").replace('""', '"')
    else:
        value = _assigned_literal(m.group("v"), text, m.start())
    return value is not None and not _REFERENCE_VALUE.search(value) and _password_shaped(value, 8)


def _basic_pair(m: re.Match[str], text: str) -> bool:
    """A "user:password" literal base64-encoded for an Authorization: Basic header."""
    value = m.group("s")
    if value is None:
        value = _assigned_literal(m.group("v"), text, m.start())
    if not value or "basic" not in text[max(0, m.start() - 600) : m.end() + 600].lower():
        return False
    user, sep, password = value.partition(":")
    return bool(sep and re.fullmatch(r"[A-Za-z0-9_.@\\-]{1,64}", user)) and _password_shaped(password, 8)


def _bundler_credential(m: re.Match[str], _: str) -> bool:
    """Bundler's per-host credentials (BUNDLE_GEMS__HOST__COM: "user:password" or a token)."""
    value = m.group("s")
    user, sep, password = value.partition(":")
    if sep:
        return len(password) >= 6 and _letters_and_digits(password) and len(set(password)) >= 5
    return _random_value(value)


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


def _spaced_password(m: re.Match[str], text: str) -> bool:
    """A quoted password holding spaces: a word of it is random (mixed case and digits)."""
    value = m.group("s")
    if " " not in value or not _secret_name_ok(_name_at(m, text)) or _REFERENCE_VALUE.search(value):
        return False
    return any(_mixed(word) for word in value.split()) and _password_shaped(value.replace(" ", ""), 8)


def _backticked_pair(m: re.Match[str], _: str) -> bool:
    """`user` / `password` in Markdown: a user name's code span, a slash, a password-shaped one."""
    user = m.group("u")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.@-]{0,63}", user):
        return False
    value = m.group("s")
    return not _REFERENCE_VALUE.search(value) and _password_shaped(value, 8)


def _psk(m: re.Match[str], _: str) -> bool:
    """A Wi-Fi pre-shared key (wpa_supplicant psk="...", hostapd wpa_passphrase=...)."""
    value = m.group("s")
    return _password_shaped(value, 8) or (len(value) == 64 and all(c in string.hexdigits for c in value))


_SCHEME_CHARS = string.ascii_lowercase + string.digits + "+.-"
# Every word a secret's variable name may end with starts with one of these (the
# generic rule's anchors); each is as long as it can be, so fewer ordinary words are tried.
_SECRET_WORDS = (
    *("pass", "secret", "token", "apikey", "api_key", "accesskey", "access_key"),
    *("auth", "privatekey", "private_key", "credential"),
)
# What a .pgpass or htpasswd line's value may start with after its first ":" (a port is a digit
# or *): never a space, so the ": " of prose and YAML is no candidate.
# A password that starts with "-" after a flag that always takes a value (docker login -p, redis-cli
# -a): anything but another flag (-x, --no-auth-warning, --password-stdin).
_DASHED_VALUE = r"-(?![-A-Za-z]+(?:[\s=]|$))\S{5,200}"

_COLON_VALUE_STARTS = string.ascii_letters + string.digits + "*!#&+=?@^"

_RULES: tuple[_Rule, ...] = (
    _Rule(
        "a private key block",
        _regex(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
        _starts("-----BEGIN "),
        _key_material_follows,
    ),
    _Rule("a private key block", _regex(r"PuTTY-User-Key-File-\d+:"), _starts("PuTTY-User-Key-File-")),
    _prefixed("an AWS access key id", ("AKIA", "ASIA", "ABIA", "ACCA"), r"[A-Z0-9]{16}\b"),
    _Rule(
        "an AWS secret access key",
        _regex(
            r"(?i)(?:aws.?secret.?(?:access.?)?key|secret.?access.?key)[\"']?\s*[:=]"
            r"\s*[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        _starts_folded("aws", "secret"),
        _mixed_body,
    ),
    _Rule("an Anthropic API key", _regex(r"\b(?P<s>sk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_-]{32,})"), _starts("sk-")),
    _Rule("an OpenAI API key", _regex(r"\b(?P<s>sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,})"), _starts("sk-")),
    _Rule("an OpenAI API key", _regex(r"\bsk-(?!ant-)(?P<s>[A-Za-z0-9]{32,})\b"), _starts("sk-"), _has_digit),
    _prefixed("a GitHub token", (f"gh{c}_" for c in "pousr"), r"[A-Za-z0-9]{36,255}\b"),
    _Rule(
        "a GitHub personal access token",
        _regex(r"\b(?P<s>github_pat_[A-Za-z0-9_]{36,})"),
        _starts("github_pat_"),
    ),
    _Rule("a GitLab personal access token", _regex(r"\b(?P<s>glpat-[A-Za-z0-9_-]{20,})"), _starts("glpat-")),
    _Rule(
        "a Slack token",
        _regex(r"\bxox[abposre]-(?P<s>[A-Za-z0-9-]{20,})"),
        _starts(*(f"xox{c}-" for c in "abposre")),
        _has_digit,
    ),
    _Rule(
        "a Slack webhook URL",
        _regex(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"[A-Za-z0-9_-]+/[A-Za-z0-9_-]+/(?P<s>[A-Za-z0-9_-]{16,})"
        ),
        _starts("https://hooks.slack.com/"),
    ),
    _Rule("a Google API key", _regex(r"\b(?P<s>AIza[0-9A-Za-z_-]{35})(?![0-9A-Za-z_-])"), _starts("AIza")),
    _Rule("a Google OAuth client secret", _regex(r"\b(?P<s>GOCSPX-[A-Za-z0-9_-]{28})"), _starts("GOCSPX-")),
    _prefixed("a Stripe live secret key", ("sk_live_", "rk_live_"), "[0-9A-Za-z]{20,}"),
    _Rule("an npm access token", _regex(r"\b(?P<s>npm_[A-Za-z0-9]{36})\b"), _starts("npm_")),
    _Rule(
        "a PyPI API token",
        _regex(r"\b(?P<s>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})"),
        _starts("pypi-AgEIcHlwaS5vcmc"),
    ),
    _Rule("a Hugging Face token", _regex(r"\bhf_(?P<s>[A-Za-z0-9]{34})\b"), _starts("hf_"), _mixed_body),
    _Rule(
        "a SendGrid API key",
        _regex(r"\b(?P<s>SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])"),
        _starts("SG."),
    ),
    _prefixed("a DigitalOcean token", (f"do{c}_v1_" for c in "opr"), r"[a-f0-9]{64}\b"),
    _prefixed("a Shopify access token", (f"shp{k}_" for k in ("at", "ca", "pa", "ss")), r"[a-fA-F0-9]{32}\b"),
    _Rule(
        "a JSON Web Token",
        _regex(
            r"(?<![A-Za-z0-9_-])(?P<s>eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\."
            r"[A-Za-z0-9_-]{10,})"
        ),
        _starts("eyJ"),
        _not_jwt_io_example,
    ),
    _Rule(
        "a bearer token in an Authorization header",
        _regex(
            # (Or a directive's space and a quote: nginx's proxy_set_header Authorization "Basic ...".)
            r"(?i)\bauthorization[\"']?(?:\s*[:=]\s*|[ \t]+(?=[\"']))[\"']?(?P<scheme>[a-z][a-z0-9_-]{1,24})\s+"
            r"(?P<s>[A-Za-z0-9._~+/=:-]{20,})"
        ),
        _starts_folded("auth"),  # "auth" rather than "authorization": the context rule's anchor, no pass of its own
        _real_auth_header,
    ),
    _Rule(
        "a password inside a URL",
        _regex(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,30}://(?P<u>[^\s:/@\"'<>]*):(?P<s>[^\s/@\"'<>]+)@[^\s/@]"),
        # The scheme has no literal; the match starts where the run of scheme
        # characters before "://" starts (the look-behind forbids an earlier
        # start, and ':' cannot be part of a scheme, so this "://" is the first).
        (_Anchor("://", back_over=_SCHEME_CHARS, back_max=31),),
        _real_url_password,
    ),
    _Rule(
        "an Azure storage or service bus key",
        _regex(
            r"(?<![A-Za-z0-9])(?i:accountkey|sharedaccesskey)[ \t]*=[ \t]*"
            r"(?P<s>[A-Za-z0-9+/]{40,100}={0,2})(?![A-Za-z0-9+/=])"
        ),
        _starts_folded("accountkey", "sharedaccesskey"),
        _mixed_body,
    ),
    _Rule(
        "a Twilio auth token",
        _regex(
            r"(?<![A-Za-z0-9])(?i:twilio)[A-Za-z0-9_.-]{0,30}?(?i:auth|token|secret)[A-Za-z0-9_]{0,20}"
            r"[\"']?[ \t]*[:=][ \t]*[\"']?(?P<s>[0-9a-fA-F]{32})(?![0-9A-Za-z])"
        ),
        _starts_folded("twilio"),
        _has_digit,
    ),
    _Rule(
        "a Telegram bot token",
        # Alone, or in a Bot API URL (https://api.telegram.org/bot<token>/getMe).
        _regex(r"(?:(?<=/bot)|(?<![0-9A-Za-z_-]))(?P<s>[0-9]{8,10}:AA[0-9A-Za-z_-]{32,33})(?![0-9A-Za-z_-])"),
        # The match starts where the run of digits before ":AA" starts.
        (_Anchor(":AA", back_over=string.digits, back_max=10),),
    ),
    _Rule(
        "a Discord bot token",
        # The first segment is a snowflake id (17-20 digits, not starting with 0) in base64,
        # so it starts with one of the nine pairs that two ASCII digits 1-9 and 0-9 encode to.
        _regex(
            r"(?<![A-Za-z0-9_-])(?P<s>(?:M[Tjz]|N[DTjz]|O[DT])[A-Za-z0-9_-]{21,25}\.[A-Za-z0-9_-]{6}\."
            r"[A-Za-z0-9_-]{27,40})(?![A-Za-z0-9_-])"
        ),
        _starts("MT", "Mj", "Mz", "ND", "NT", "Nj", "Nz", "OD", "OT"),
        _discord_user_id,
    ),
    _prefixed(
        "an AWS session token",
        # Session tokens are base64 of a fixed binary header: these are its two current openings.
        ("IQoJb3JpZ2luX2Vj", "FwoGZXIvYXdzE"),
        r"[A-Za-z0-9+/]{100,}",
    ),
    _prefixed(
        "a GitLab token", ("glrt-", "gldt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-"), r"[A-Za-z0-9_-]{20,}"
    ),
    _Rule(
        "a Slack app-level token",
        _regex(r"\b(?P<s>xapp-\d-[A-Z0-9]{8,}-\d{8,}-[a-f0-9]{32,})"),
        _starts("xapp-"),
    ),
    _prefixed("a Stripe webhook secret", ("whsec_",), r"[A-Za-z0-9+/]{24,}", _has_digit),
    _prefixed("a Twilio API key", ("SK",), r"[0-9a-f]{32}\b", _hex_mixed),
    _prefixed("a Mailgun API key", ("key-",), r"[0-9a-f]{32}\b", _hex_mixed),
    _Rule(
        "a Discord webhook URL",
        _regex(r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d{15,22}/(?P<s>[A-Za-z0-9_-]{50,})"),
        _starts("https://discord", "https://ptb.discord", "https://canary.discord"),
    ),
    _prefixed("an Atlassian API token", ("ATATT3", "ATCTT3"), r"[A-Za-z0-9_=-]{150,}"),
    _prefixed("a Notion integration token", ("ntn_",), r"\d{11}[A-Za-z0-9]{35}\b"),
    _prefixed("a HashiCorp Vault token", ("hvs.", "hvb."), r"[A-Za-z0-9_-]{90,}", _mixed_body),
    _Rule(
        "a Terraform Cloud token",
        _regex(r"(?<![A-Za-z0-9])(?P<s>[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,})"),
        # The match starts where the run of 14 letters and digits before ".atlasv1." starts.
        (_Anchor(".atlasv1.", back_over=string.ascii_letters + string.digits, back_max=14),),
    ),
    _Rule(
        "an age secret key",
        _regex(r"\b(?P<s>AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})\b"),
        _starts("AGE-SECRET-KEY-1"),
    ),
    _Rule(
        "a Django secret key",
        _regex(r"\bdjango-insecure-(?P<s>[a-z0-9!@#$%^&*(\-_=+)]{40,60})(?![a-z0-9!@#$%^&*(\-_=+)])"),
        _starts("django-insecure-"),
        _django_key,
    ),
    _Rule(
        "a Django secret key",
        # startproject's alphabet, 50 characters, quoted: prose does not look like this.
        _regex(r"(?i:secret_key)[\"']?[ \t]*[:=][ \t]*([\"'])(?P<s>[a-z0-9!@#$%^&*(\-_=+)]{50})\1"),
        _starts_folded("secret_key"),
        _django_key,
    ),
    _Rule(
        "a Django secret key",
        # The same key unquoted, alone on its line (a .env file): 50 characters of any case.
        _regex(r"(?im)\bsecret_key[ \t]*=[ \t]*(?P<s>[a-z0-9!@#$%^&*(\-_=+)]{50})[ \t\r]*$"),
        _starts_folded("secret_key"),
        _django_key,
    ),
    _Rule(
        "a password on a command line",
        # mysql -p'pw' / -ppw (the password glued to -p; "-p" alone prompts for it).
        _regex(
            r"\bmysql(?:dump|admin)?(?:[ \t][^\n]{0,80}?)?[ \t]-p"
            r"(?P<s>'[^'\s]{1,200}'|\"[^\"\s]{1,200}\"|[^\s'\"-][^\s'\"]{1,200})"
        ),
        _starts("mysql"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        # curl -u user:pw, curl --user 'user:pw' (a user alone makes curl prompt for the password).
        _regex(
            r"\bcurl(?:[ \t][^\n]{0,200}?)?[ \t](?:-u|--user)[ \t]*=?[ \t]*[\"']?[^\s:'\"$]{1,100}:[\"']?"
            r"(?P<s>[^\s'\"]{1,200})"
        ),
        _starts("curl"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        _regex(r"\bsshpass[ \t]{1,10}-p[ \t]{0,10}(?P<s>'[^'\s]{1,200}'|\"[^\"\s]{1,200}\"|\S{1,200})"),
        _starts("sshpass"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        _regex(
            r"(?<![\w-])--(?:[a-z0-9]+-)*(?:password|passwd|token|api-key|apikey|apiKey|secret|access-key|accessKey)"
            r"(?:=|[ \t]{1,10})(?P<s>'[^'\s]{1,200}'|\"[^\"\s]{1,200}\"|[^\s'\"-]\S{0,200})"
        ),
        _starts("--"),
        _flag_value,
    ),
    # Signed URLs: the signature is the credential (anyone holding the URL has the access).
    _Rule(
        "a signed URL (Azure SAS)",
        _regex(r"(?<=[?&])sig=(?P<s>[A-Za-z0-9%+/]{40,120}(?:%3[Dd]|=){0,2})(?![A-Za-z0-9%+/=])"),
        _starts("sig="),
        _signed_url,
    ),
    _Rule(
        "a signed URL (AWS or Google Cloud)",
        _regex(r"(?i:X-(?:Amz|Goog)-Signature)=(?P<s>[0-9a-f]{64,1024})(?![0-9a-zA-Z])"),
        _starts_folded("x-amz-signature=", "x-goog-signature="),
        _hex_mixed,
    ),
    _Rule(
        "a signed URL (AWS or Google Cloud)",
        _regex(r"(?i:X-Amz-Security-Token)=(?P<s>[A-Za-z0-9%+/]{100,})"),
        _starts_folded("x-amz-security-token="),
        _mixed_body,
    ),
    _Rule(
        "an Azure AD client secret",
        # Entra ID (Azure AD) client secrets: three characters, a digit, "Q~", then 31 to 34 more.
        _regex(r"(?<![A-Za-z0-9_~.-])(?P<s>[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_~.-])"),
        (_Anchor("Q~", back_over=string.ascii_letters + string.digits + "_~.-", back_max=4),),
        _mixed_body,
    ),
    _Rule(
        "an X (Twitter) bearer token",
        _regex(r"(?<![A-Za-z0-9%+/])(?P<s>A{20,24}[A-Za-z0-9%]{60,160})(?![A-Za-z0-9%+/=])"),
        _starts("A" * 20),
        _mixed_body,
    ),
    _prefixed("a Facebook or Square access token", ("EAA",), r"[A-Za-z0-9_-]{56,}(?![A-Za-z0-9_-])", _mixed_body),
    # Anchored without their "-": a literal ending in "-" is checked at every "-" of the text.
    _prefixed("a Square OAuth token", ("sq0",), r"(?:atp|csp)-[A-Za-z0-9_-]{22,60}(?![A-Za-z0-9_-])"),
    _Rule(
        "a Braintree or PayPal access token",
        _regex(r"\b(?P<s>access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32})"),
        _starts("access_token$"),
    ),
    _prefixed("an Adyen API key", ("AQE",), r"[A-Za-z0-9+/=._-]{80,}", _mixed_body),
    _Rule(
        "a Mailchimp API key",
        _regex(r"(?<![A-Za-z0-9])(?P<s>[0-9a-f]{32}-us\d{1,2})(?![A-Za-z0-9])"),
        (_Anchor("-us", back_over="0123456789abcdef", back_max=32),),
        _hex_mixed,
    ),
    _prefixed("a Klaviyo private key", ("pk_",), r"[A-Za-z0-9]{34}\b", _mixed_body),
    _prefixed(
        "a HubSpot private app token",
        ("pat-na1-", "pat-na2-", "pat-eu1-", "pat-ap1-"),
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
    ),
    _Rule(
        "a HashiCorp Vault token",
        # The service tokens before Vault 1.10: "s." and 24 letters and digits.
        _regex(r"\b(?P<s>s\.[A-Za-z0-9]{24})(?![A-Za-z0-9_.-])"),
        _starts("s."),
        _mixed_body,
    ),
    _Rule(
        "a Doppler token",
        _regex(r"\b(?P<s>dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44})\b"),
        _starts("dp."),
        _mixed_body,
    ),
    _prefixed("a 1Password service account token", ("ops_eyJ",), r"[A-Za-z0-9_-]{50,}"),
    _Rule(
        "an Infisical token",
        _regex(
            r"\b(?P<s>st\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.[0-9a-f]{32}\.[0-9a-f]{32})\b"
        ),
        _starts("st."),
    ),
    _Rule(
        "a private key block",
        # base64 of a PEM block (kubeconfig client-key-data, a Kubernetes Secret's data).
        _regex(r"(?<![A-Za-z0-9+/])(?P<s>LS0tLS1CRUdJTi[A-Za-z0-9+/]{60,}={0,2})"),
        _starts("LS0tLS1CRUdJTi"),
        _pem_private_key_in_base64,
    ),
    _Rule(
        "a container registry password",
        # ~/.docker/config.json: "auth" is base64 of "user:password".
        _regex(r"\"auth\"[ \t]*:[ \t]*\"(?P<s>[A-Za-z0-9+/]{8,400}={0,2})\""),
        _starts('"auth"'),
        _docker_auth,
    ),
    _prefixed("a Docker Hub access token", ("dckr_pat_", "dckr_oat_"), r"[A-Za-z0-9_-]{27,}"),
    _prefixed("an Airtable personal access token", ("pat",), r"[A-Za-z0-9]{14}\.[a-f0-9]{64}\b"),
    _prefixed(
        "an Authress service key",
        ("sc_", "ext_", "scauth_", "authress_"),
        r"[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-][A-Za-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}",
    ),
    _prefixed("a GitLab feature flag client token", ("glffct-",), r"[A-Za-z0-9_-]{20}(?![A-Za-z0-9_-])", _has_digit),
    _prefixed("a Prefect API key", ("pnu_",), r"[A-Za-z0-9]{36}\b", _mixed_body),
    _Rule(
        "a PKCS#12 bundle",
        # Base64 of a PFX: SEQUENCE, INTEGER 3, then the pkcs7-data content (what `base64 x.p12` prints).
        _regex(r"\bMII[A-Za-z0-9+/]{3}IBAzCC[A-Za-z0-9+/]{4}CSqGSIb3DQEHAaCC[A-Za-z0-9+/]{60,}"),
        _starts("MII"),
    ),
    _prefixed("a SonarQube token", ("sqp_", "squ_", "sqa_"), r"[0-9a-f]{40}\b", _has_digit),
    _prefixed("an Octopus Deploy API key", ("API-",), r"[A-Z0-9]{26}\b", _has_digit),
    _Rule(
        "a Twitter access token",
        # <user id>-<40 letters and digits> (OAuth 1.0a), as tweepy and twurl take it.
        _regex(r"(?<![\w-])(?P<s>[0-9]{15,25}-[A-Za-z0-9]{20,40})(?![\w-])"),
        (_Anchor("-", back_over=string.digits, back_max=25),),
        _mixed_body,
    ),
    _Rule(
        "a Facebook app access token",
        # <app id>|<app secret>: the app's own token, as Graph API URLs and SDK calls carry it.
        _regex(r"(?<![\w|])(?P<s>[0-9]{13,17}\|[0-9a-f]{32})(?![\w|])"),
        (_Anchor("|", back_over=string.digits, back_max=17),),
        _hex_mixed,
    ),
    _prefixed("a Flutterwave secret key", ("FLWSECK",), r"(?:_TEST)?-?[a-fA-F0-9]{12,32}(?:-X)?\b", _has_digit),
    _Rule(
        "a Fly deploy token",
        _regex(r"\b(?P<s>(?:FlyV1[ \t]+)?fm[12][a-z]?_[A-Za-z0-9+/=,_-]{40,})"),
        _starts("FlyV1", "fm1", "fm2"),
        _mixed_body,
    ),
    _prefixed("a SettleMint token", ("sm_pat_", "sm_aat_", "sm_sat_"), r"[A-Za-z0-9]{16}\b", _mixed_body),
    _Rule(
        "a password in a Bundler config",
        # bundle config [set] [--global|--local] gems.example.com user:password
        _regex(
            r"\bbundle[ \t]+config[ \t]+(?:set[ \t]+)?(?:--(?:global|local)[ \t]+)?"
            r"[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,8}[ \t]+[^\s:]{1,64}:(?P<s>\S{6,200})"
        ),
        _starts("bundle"),
        _real_command_password,
    ),
    _Rule(
        "a password in a Bundler config",
        # BUNDLE_GEMS__EXAMPLE__COM=user:password (the same setting in the environment).
        _regex(r"\bBUNDLE_[A-Z0-9_]{1,80}__[A-Z]{2,10}[ \t]*=[ \t]*[\"']?[^\s:\"']{1,64}:(?P<s>[^\s\"']{6,200})"),
        _starts("BUNDLE_"),
        _real_command_password,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # A C or C++ #define of a secret's name to a string literal (#define IO_KEY "...").
        _regex(
            r"#[ \t]*define[ \t]+(?P<n>[A-Za-z0-9_]{0,40}(?:KEY|TOKEN|SECRET|PASS(?:WORD)?|PWD|AUTH)[A-Za-z0-9_]{0,40})"
            r"[ \t]+\"(?P<s>[^\"\n]{8,200})\""
        ),
        _starts("#"),
        _defined_secret,
        generic=True,
    ),
    _Rule(
        "a password on a command line",
        # docker login -p X (and podman, nerdctl, buildah, helm registry).
        # From "login" on (one anchor, not one per program); _registry_login checks the program.
        # The anchor is folded: the pass that finds it also serves "login: user / password".
        _regex(
            r"(?<=[ \t])login\b[^\n]{0,200}?[ \t]-p[ \t]*=?[ \t]*"
            rf"(?P<s>'[^'\s]{{1,200}}'|\"[^\"\s]{{1,200}}\"|[^\s'\"-]\S{{0,200}}|{_DASHED_VALUE})"
        ),
        _starts_folded("login"),
        _registry_login,
    ),
    _prefixed("a Brevo (Sendinblue) key", ("xkeysib-", "xsmtpsib-"), r"[0-9a-f]{64}-[A-Za-z0-9]{16}\b"),
    _prefixed("a JFrog Artifactory API key", ("AKCp",), r"[A-Za-z0-9]{60,}\b", _mixed_body),
    _Rule(
        "a Microsoft Teams webhook URL",
        _regex(
            r"webhook\.office\.com/webhookb2/[0-9a-f-]{36}@[0-9a-f-]{36}/IncomingWebhook/"
            r"(?P<s>[0-9a-f]{32})/[0-9a-f-]{36}"
        ),
        _starts("webhook.office.com/webhookb2/"),
    ),
    _Rule(
        "a Honeycomb API key",
        # OTEL_EXPORTER_OTLP_HEADERS="x-honeycomb-team=<key>": the header named as a team carries the key.
        _regex(r"(?i:x-honeycomb-team)[\"']?[ \t]*[=:][ \t]*[\"']?(?P<s>[A-Za-z0-9]{22,64})(?![A-Za-z0-9])"),
        _starts_folded("x-honeycomb-team"),
        _mixed_body,
    ),
    _Rule(
        "an API key passed to a client",
        # A client factory given (application or account id, key): algoliasearch('APPID', '<key>'),
        # require('twilio')('AC...', '<auth token>').
        _regex(
            r"(?i:algoliasearch|twilio)[\"']?\)?\([ \t]*([\"'])[A-Za-z0-9]{8,40}\1[ \t]*,[ \t]*([\"'])"
            r"(?P<s>[A-Za-z0-9]{32,64})\2"
        ),
        _starts_folded("algoliasearch", "twilio"),
        _client_key,
    ),
    _Rule(
        "an API key passed to a client",
        # A function or class named for a key given it as a string: AzureKeyCredential("<key>"),
        # Auth.api_key("<key>"). (The anchors are the context rule's: no pass of their own.)
        _regex(
            r"(?P<n>(?i:key|token|credential)[A-Za-z0-9_]{0,20})\([ \t]*([\"'])(?P<s>[A-Za-z0-9+/=_.~-]{20,400})\2"
        ),
        _starts_folded("key", "token", "credential"),
        _called_with_key,
    ),
    _Rule(
        "an API key in an HTTP header",
        # curl -H 'X-JFrog-Art-Api: <key>': an X- header naming an API (key/token/auth ones: the context rule).
        _regex(r"-H[ \t]*[\"']?(?i:x-[a-z0-9-]*api[a-z0-9-]*)[ \t]*:[ \t]*(?P<s>[A-Za-z0-9+/=_.~-]{20,400})"),
        _starts("-H"),
        _key_like,
    ),
    _Rule(
        "a password on a command line",
        # curl -u <api key>: (Freshdesk, Stripe, Mailgun style: the key is the user, the password X or empty).
        _regex(
            r"\bcurl(?:[ \t][^\n]{0,200}?)?[ \t](?:-u|--user)[ \t]*=?[ \t]*[\"']?"
            r"(?P<s>[A-Za-z0-9_-]{16,100}):(?:[Xx]?)(?=[\s\"'])"
        ),
        _starts("curl"),
        _key_like,
    ),
    _Rule(
        "a password on a command line",
        # redis-cli -a <password> (and --pass).
        _regex(
            r"\bredis-cli\b[^\n]{0,200}?[ \t](?:-a|--pass)[ \t]+"
            rf"(?P<s>'[^'\s]{{1,200}}'|\"[^\"\s]{{1,200}}\"|[^\s'\"-]\S{{0,200}}|{_DASHED_VALUE})"
        ),
        _starts("redis-cli"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        # net use Z: \\host\share /user:DOMAIN\user <password> ("*" makes it prompt).
        _regex(r"(?i:net[ \t]+use)\b[^\n]{0,200}?[ \t]/(?i:user|u):\S{1,100}[ \t]+(?P<s>[^\s/*]\S{0,200})"),
        _starts_folded("net use"),
        _real_command_password,
    ),
    _Rule(
        "a password inside a URL",
        # Go's MySQL DSN: user:password@tcp(host:port)/db, with no scheme. Starts where the run of
        # user and password characters before "@tcp(" starts.
        _regex(
            r"(?<![A-Za-z0-9_.!#%^&*+=?~:-])(?P<u>[A-Za-z0-9_.-]{1,64}):"
            r"(?P<s>[A-Za-z0-9_.!#%^&*+=?~-]{1,150})@(?:tcp|unix)\("
        ),
        tuple(
            _Anchor(lit, back_over=string.ascii_letters + string.digits + "_.!#%^&*+=?~:-", back_max=220)
            for lit in ("@tcp(", "@unix(")
        ),
        _real_url_password,
    ),
    _prefixed("a Groq API key", ("gsk_",), r"[A-Za-z0-9]{48,}\b", _mixed_body),
    _prefixed("a Perplexity API key", ("pplx",), r"-[A-Za-z0-9]{40,}\b", _mixed_body),
    _prefixed("a Together AI API key", ("tgp_v1_",), r"[A-Za-z0-9_-]{40,}"),
    _prefixed("a Fireworks AI API key", ("fw_",), r"[A-Za-z0-9]{20,}\b", _mixed_body),
    _prefixed("a Replicate API token", ("r8_",), r"[A-Za-z0-9]{30,}\b", _mixed_body),
    _prefixed("an xAI API key", ("xai",), r"-[A-Za-z0-9]{60,}\b", _mixed_body),
    _prefixed("an OpenRouter API key", ("sk-or-v1-",), r"[0-9a-f]{64}\b"),
    _Rule(
        "an API key passed to a client",
        # An SDK client given its key as a string literal: cohere.Client('...'), Client(sid, '...').
        _regex(
            r"Client(?:V\d)?(?:\.new|::new)?\([ \t]*(?:[^()\n]{0,120}?,[ \t]*)?(?:api_key[ \t]*=[ \t]*)?"
            r"([\"'])(?P<s>[A-Za-z0-9_.-]{24,200})\1"
        ),
        _starts("Client"),
        _key_like,
    ),
    _prefixed(
        "a service access token",
        # Prefixed tokens of developer services (Grafana, Linear, Sentry, Supabase, PlanetScale,
        # Netlify, Figma, Buildkite, Fly.io, Neon).
        (
            *("glsa_", "glc_", "lin_api_", "sntrys_", "sntryu_", "sbp_", "pscale_tkn_", "pscale_pw_"),
            *("pscale_oauth_", "nfp_", "figd_", "bkua_", "fo1_", "napi_"),
        ),
        r"[A-Za-z0-9_-]{20,}",
        _has_digit,
    ),
    # New Relic, Postman, Contentful: anchored without their "-", see the Square rule.
    _prefixed("a service access token", ("NRAK", "PMAK", "CFPAT"), r"-[A-Za-z0-9_-]{20,}", _has_digit),
    _Rule(
        "a Firebase Cloud Messaging server key",
        _regex(r"(?<![A-Za-z0-9_-])(?P<s>[A-Za-z0-9_-]{7,11}:APA91b[A-Za-z0-9_-]{100,})"),
        (_Anchor(":APA91b", back_over=string.ascii_letters + string.digits + "_-", back_max=11),),
        _mixed_body,
    ),
    _prefixed("a Mapbox secret token", ("sk.eyJ",), r"[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{20,}"),
    _Rule(
        "a password in a netrc file",
        _regex(r"\bmachine[ \t]+\S+\s+(?:login[ \t]+\S+\s+)?password[ \t]+(?P<s>\S{1,200})"),
        _starts("machine"),
        _real_command_password,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # A name ending in "key" given a long random base64 value (an Azure or Fernet key, COSMOS_KEY=).
        _regex(r"(?i:key)[\"']?[ \t]*[:=][ \t]*[\"']?(?P<s>[A-Za-z0-9+/_-]{32,400}={0,2})(?![A-Za-z0-9+/=_.~-])"),
        _starts_folded("key"),
        _key_named_value,
        generic=True,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # A secret named in a sentence, then "is" and a random key ("the secret access key for ci is <key>").
        _regex(
            r"(?<![A-Za-z0-9])(?i:secret|token|key)(?P<w>[^\n.;!?]{0,40}?)[ \t](?i:is|was)[ \t]+[\"'`]?"
            r"(?P<s>[A-Za-z0-9+/=_~-]{20,200})(?![A-Za-z0-9+/=_~-])"
        ),
        _starts_folded("secret", "token", "key"),
        _secret_in_prose,
        generic=True,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # A key named by its power in a sentence, then the key ("use the algolia write key <key>").
        _regex(
            r"(?<![A-Za-z0-9])(?i:admin|write|secret|private|master|server|api)[ \t_-]?(?i:key)[ \t]+[\"'`]?"
            r"(?P<s>[A-Za-z0-9_-]{24,200})(?![A-Za-z0-9_-])"
        ),
        _starts_folded("admin", "write", "secret", "private", "master", "server", "api"),
        _key_like,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # "login: deploy / <password>": a login's user and password written as a pair.
        _regex(
            r"(?<![A-Za-z0-9_])(?i:login|credentials)(?:[ \t]*[:=]|[ \t]+(?i:is|are))[ \t]*[^\s/:]{1,64}"
            r"[ \t]*/[ \t]*(?P<s>\S{8,100})"
        ),
        _starts_folded("login", "credential"),
        _user_slash_password,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # A credentials file's line alone: ~/.pgpass (host:port:database:user:password) or a plain
        # htpasswd entry (user:password). Starts where the run of name characters before ":" starts.
        # Anchored at a ":" followed by one of _COLON_VALUE_STARTS, not at every ":".
        _regex(
            r"(?m)(?<![^\n])(?P<u>[A-Za-z0-9._*-]{1,64}):(?:(?P<pg>(?:\d{1,5}|\*):[^\s:]{1,63}:[^\s:]{1,63}):)?"
            rf"(?P<s>[{re.escape(_COLON_VALUE_STARTS)}][^\s:]{{0,199}})[ \t\r]*$"
        ),
        (
            _Anchor(
                ":",
                back_over=string.ascii_letters + string.digits + "._*-",
                back_max=64,
                followed_by=_COLON_VALUE_STARTS,
            ),
        ),
        _colon_file_password,
        generic=True,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # A quoted value (.env, shell, YAML): punctuation belongs to it (DJANGO_SECRET_KEY='k$(3...').
        _regex(
            r"(?i:passw(?:ord|d)|passphrase|secret(?:_?key)?(?:_?base)?|token|api_?key|access_?key|auth_?key"
            r"|private_?key|credentials?)"
            r"[\"']?[ \t]*(?:=>|[:=])[ \t]*([\"'])(?P<s>(?:(?!\1)\S){8,200})\1"
        ),
        _starts_folded(*_SECRET_WORDS),
        _real_quoted_value,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # A word for a password, then within the clause a password-shaped token (see _password_in_prose).
        _regex(
            r"(?<![A-Za-z0-9_])(?i:passwords?|passwd|passphrase|passwort|pwd?|pass)(?=[ \t:=])(?P<w>[^\n]{1,80})"
        ),
        _starts_folded("pass", "pw"),
        _password_in_prose,
        generic=True,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # From the word the variable's name ends with (DB_PASSWORD matches from PASSWORD on): the
        # rest of the name changes nothing, and starting there keeps each attempt short.
        _regex(
            r"(?i:passw(?:ord|d)|passphrase|secret(?:_?key)?(?:_?base)?|token|api_?key|access_?key|auth_?key"
            r"|private_?key|credentials?)"
            r"[\"']?[ \t]*[:=][ \t]*[\"']?(?P<s>[^\s\"'`$<>{}()\[\]\\,;]{8,200}+)(?![^\s\"'`,;])"
        ),
        _starts_folded(*_SECRET_WORDS),
        _real_assigned_secret,
        generic=True,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # The context rule: a random value (see _random_value) assigned or paired with a name that
        # holds a secret's word: KEY=, "secret": , 'app_secret' => , ["SECRET_KEY"] = , X-Auth-Key: ,
        # --token X, Key 1 (ops): X, an optional scheme word before it (Bearer, FlyV1, base64:).
        _regex(
            r"(?i:key|token|secret|pass|pwd|auth|credential)"
            r"(?P<n>[A-Za-z0-9_.-]{0,40})(?:[ \t]{1,3}\d{1,2})?(?:[ \t]{1,3}\([^()\n]{1,30}\))?"
            r"(?:(?:\\?[\"'`\]]){0,3}[ \t]*(?:=>|[:=])[ \t]*(?:\\?[\"'`])?(?:base64:|[A-Za-z][A-Za-z0-9-]{1,24}[ \t]+)?"
            r"|(?P<ws>[ \t]+(?:[^\s\"'`]{1,64}[ \t]+)?[\"']?))"
            # (Possessive and bounded, with nothing after it: a crafted "token=token=..." stays linear;
            # the first 400 characters of a longer value are enough to judge it.)
            r"(?P<s>[A-Za-z0-9+/=_.~-]{20,400}+)"
        ),
        _starts_folded(*_CONTEXT_WORDS),
        _secret_named_value,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # A Markdown table with a password, secret or token column, and a real one in a row below.
        _regex(
            r"(?i:passwords?|passwd|passphrase|secrets?|tokens?|api[_-]?keys?)[ \t]*\|[^\n]{0,300}\n"
            r"[ \t]*\|?[ \t]*:?-{3,40}[-:| \t]{0,300}\n(?P<rows>(?:[ \t]*\|[^\n]{0,300}(?:\n|$)){1,50})"
        ),
        _starts_folded("pass", "secret", "token", "api_key", "api-key", "apikey"),
        _table_password,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # "log in to the iDRAC at 10.0.9.12 (root / <password>)": a login named, then user / password.
        _regex(
            r"(?i:log ?in|credentials?)[^\n]{0,80}?[(:=][ \t]*[^\s/:()]{1,64}"
            r"[ \t]*/[ \t]*(?P<s>[^\s()/]{8,100})"
        ),
        _starts_folded("login", "log in", "credential"),
        _user_slash_password,
        generic=True,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # base64 of JSON (a dockerconfigjson): decoded and scanned with these same rules.
        _regex(r"(?<![A-Za-z0-9+/_.-])(?P<s>eyJ[A-Za-z0-9+/_-]{16,}={0,2})(?![A-Za-z0-9+/=_.-])"),
        _starts("eyJ"),
        _encoded_json_secret,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # A password's name, then "=", ":" or an XML element's ">", then the value alone to the end of
        # the line or the element (pass_phrase=..., password: %Ufp..., <password>...</password>).
        _regex(
            r"(?m)(?<![A-Za-z0-9])(?i:pass(?:_?phrase|w(?:or)?d)?|pwd)(?P<n>[A-Za-z0-9_-]{0,20})"
            r"(?:[ \t]*[:=][ \t]*|>)(?P<s>[^\s\"'`<>]{8,100})(?:<|[ \t\r]*$)"
        ),
        _starts_folded("pass", "pw"),
        _password_value,
        generic=True,
    ),
    # --- the fifth held-out set's contexts (issue 36): each rule reads a syntax, not a sample ---
    # Provider prefixes from gitleaks' published rule list: a fixed prefix and a body of the
    # documented alphabet and length, as the rules above.
    _prefixed(
        "a service access token", ("y0_", "y1_", "y2_", "y3_"), r"[A-Za-z0-9_-]{50,60}(?![A-Za-z0-9_-])", _mixed_body
    ),
    _prefixed("a service access token", ("ico",), r"-[A-Za-z0-9]{32}\b", _mixed_body),  # Infracost
    _prefixed("a service access token", ("shippo_live_",), r"[a-fA-F0-9]{40}\b"),
    _prefixed("a service access token", ("rdme_",), r"[a-z0-9]{70}\b", _has_digit),  # ReadMe
    _prefixed("a service access token", ("md",), r"-[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])", _mixed_body),  # Mandrill
    _prefixed("a service access token", ("live_",), r"[a-f0-9]{35}\b", _has_digit),  # Lob (its test_ keys open nothing)
    _prefixed(
        "a service access token",
        # Plaid access tokens and LaunchDarkly server SDK keys: a fixed word, then a UUID.
        ("access-production-", "access-development-", "sdk-"),
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
    ),
    _Rule(
        "a 1Password secret key",
        _regex(
            r"\b(?P<s>A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5})\b"
        ),
        _starts("A3-"),
    ),
    _Rule(
        "a service access token",
        # A LiveKit key pair (LIVEKIT_KEYS="API<12>: <43>"): the key id's fixed "API" and its secret.
        _regex(r"\bAPI[A-Za-z0-9]{12}:[ \t]*(?P<s>[A-Za-z0-9]{43})\b"),
        _starts("API"),
        _mixed_body,
    ),
    # Webhook URLs of any service: a hook path segment, then the random id that is the credential.
    _Rule(
        "a webhook URL",
        _regex(r"/(?:web)?hooks?/(?P<z>catch/\d{4,12}/)?(?P<s>[A-Za-z0-9_-]{6,100})(?![A-Za-z0-9_-])"),
        _starts("/hook/", "/hooks/", "/webhook/", "/webhooks/"),
        _webhook_id,
    ),
    _Rule(
        "a token in a URL",
        # A query parameter that carries a credential (?access_token=, ?code= of an Azure Function, ?key=).
        _regex(
            r"(?<=[?&])(?i:access_token|api_?key|apikey|hapikey|token|code|key|auth|secret)="
            r"(?P<s>[A-Za-z0-9%_.~+/=-]{20,400}+)"
        ),
        _starts_folded("access_token=", "api_key=", "apikey=", "hapikey=", "token=", "code=", "key=", "auth=",
                       "secret="),
        _url_query_secret,
    ),
    _Rule(
        "a session cookie",
        # A Cookie header (or a cookie: key) holding a session-named cookie with a long random value.
        _regex(r"(?i:cookie)[\"']?[ \t]*[:=][ \t]*(?P<c>[^\n]{1,2000})"),
        _starts_folded("cookie"),
        _session_cookie,
    ),
    _Rule(
        "a session cookie",
        _regex(r"(?<![\w-])(?:-b|--cookie)[ \t]+(?P<c>'[^'\n]{1,2000}'|\"[^\"\n]{1,2000}\"|[^\s'\"-]\S{0,2000})"),
        _starts("-b", "--cookie"),
        _session_cookie,
    ),
    _Rule(
        "a private key (JWK or VAPID)",
        # A JSON Web Key's private part ("d", with "kty" in the same object).
        _regex(r"\"d\"[ \t]*:[ \t]*\"(?P<s>[A-Za-z0-9_-]{32,2000})\""),
        _starts('"d"'),
        _jwk_private,
    ),
    _Rule(
        "a private key (JWK or VAPID)",
        # web-push's setVapidDetails(subject, publicKey, privateKey): the third argument.
        _regex(
            r"setVapidDetails\([^(),]{0,300},[^(),]{0,300},[ \t\r\n]*(?P<q>[\"'`])(?P<s>[A-Za-z0-9_-]{40,50})(?P=q)"
        ),
        _starts("setVapidDetails("),
        _mixed_body,
    ),
    _Rule(
        "a TOTP seed",
        # An otpauth:// URI's secret: whoever holds it generates the second factor.
        _regex(r"otpauth://[a-z]{4}/[^\s?]{0,300}\?(?:[^\s#&]{0,300}&){0,10}?secret=(?P<s>[A-Za-z2-7]{16,128})"),
        _starts("otpauth://"),
    ),
    _Rule(
        "2FA recovery codes",
        _regex(r"(?i:recovery|backup)[ \t_-]?(?i:codes?)\b[^\n]{0,200}"),
        _starts_folded("recovery", "backup"),
        _recovery_codes,
    ),
    _Rule(
        "a signed URL (AWS or Google Cloud)",
        # A CloudFront signed URL: Signature= beside a Key-Pair-Id=.
        _regex(r"(?<=[?&])Signature=(?P<s>[A-Za-z0-9_~%+/=-]{100,2000})"),
        _starts("Signature="),
        _cloudfront_signed,
    ),
    _Rule(
        "a password inside a URL",
        # An API transport's DSN whose user is the token (Symfony's postmark+api://<token>@default).
        _regex(r"(?<![a-z0-9+.-])[a-z][a-z0-9.-]{0,30}\+(?:api|https?|smtps?)://(?P<s>[A-Za-z0-9_.~%-]{16,200})@"),
        (_Anchor("://", back_over=_SCHEME_CHARS, back_max=31),),
        _token_userinfo,
    ),
    # Passwords in more syntaxes: SQL, config directives, command-line flags, code.
    _Rule(
        "a password written in plain text",
        # SQL: CREATE USER ... IDENTIFIED BY 'pw' (MySQL, Oracle), ALTER ROLE ... PASSWORD 'pw'.
        _regex(
            r"(?i:identified)[ \t]+(?i:by)[ \t]+(?:(?i:password)[ \t]*)?(?P<q>[\"'])(?P<s>[^\"'\n]{1,200})(?P=q)"
        ),
        _starts_folded("identified"),
        _real_command_password,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # A config directive "Name value" alone on its line (requirepass, LicenseKey, logzio_token).
        _regex(
            r"(?m)(?i:key|token|secret|pass|pwd|auth)(?P<n>[A-Za-z0-9_]{0,20})[ \t]+(?P<s>[^\s\"'`]{8,200}+)[ \t\r]*$"
        ),
        _starts_folded("key", "token", "secret", "pass", "pw", "auth"),
        _directive_value,
        generic=True,
    ),
    _Rule(
        "a password on a command line",
        # keytool -storepass / -keypass (and -srcstorepass, -destkeypass...).
        _regex(
            r"(?<![\w-])-(?:src|dest)?(?:store|key)pass[ \t]+"
            r"(?P<s>'[^'\s]{1,200}'|\"[^\"\s]{1,200}\"|[^\s'\"-]\S{0,200})"
        ),
        _starts("-storepass", "-keypass", "-srcstorepass", "-deststorepass", "-srckeypass", "-destkeypass"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        # --passphrase / --pass: quoted values may hold spaces (a passphrase of words).
        _regex(
            r"(?<![\w-])--pass(?:phrase)?(?:=|[ \t]{1,10})(?P<s>'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"|[^\s'\"-]\S{0,200})"
        ),
        _starts("--pass"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        # Samba's -U user%password (smbclient, rpcclient, net rpc).
        _regex(r"(?<![\w-])-U[ \t]*(?P<q>['\"]?)[^\s%'\"]{1,100}%(?P<s>[^\s'\"]{1,200})(?P=q)"),
        _starts("-U"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        # -u user -p <password> (cqlsh, mongo, influx...); -p alone prompts.
        _regex(
            r"(?<![\w-])-u[ \t]*(?P<q>['\"]?)(?P<u>[^\s'\"-][^\s'\"]{0,63})(?P=q)[ \t]+-p[ \t]*"
            rf"(?P<s>'[^'\s]{{1,200}}'|\"[^\"\s]{{1,200}}\"|[^\s'\"-]\S{{0,200}}|{_DASHED_VALUE})"
        ),
        _starts("-u"),
        _user_p_password,
    ),
    _Rule(
        "a password on a command line",
        # OpenLDAP's clients: ldapsearch ... -w <bind password> (-W prompts).
        _regex(
            r"\bldap[a-z]{2,10}\b[^\n]{0,300}?[ \t]-w[ \t]*(?P<s>'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"|[^\s'\"-]\S{0,200})"
        ),
        _starts("ldap"),
        _real_command_password,
    ),
    _Rule(
        "a password on a command line",
        # htpasswd -b (batch mode) takes the password as its last argument.
        _regex(
            r"\bhtpasswd(?P<f>(?:[ \t]+-[A-Za-z]{1,6}){1,6})[ \t]+(?P<a>[^\s-]\S{0,200})[ \t]+(?P<b2>\S{1,200})"
            r"(?:[ \t]+(?P<c>\S{1,200}))?"
        ),
        _starts("htpasswd"),
        _htpasswd_batch,
    ),
    _Rule(
        "a password on a command line",
        # Oracle's tools: sqlplus user/password@connect (and sqlldr, expdp, impdp, rman).
        _regex(
            r"\b(?:sqlplus|sqlldr|expdp|impdp|rman)[ \t]+(?:-[A-Za-z]+[ \t]+){0,5}(?P<q>[\"']?)"
            r"[A-Za-z0-9_$#.]{1,64}/(?P<s>[^\s@/\"']{1,200})@"
        ),
        _starts("sqlplus", "sqlldr", "expdp", "impdp", "rman"),
        _real_command_password,
    ),
    _Rule(
        "a password written in plain text",
        # A quoted secret's name and its quoted value as two arguments (define('DB_PASSWORD', '...'),
        # AddDefaultHeader("PLAID-SECRET", "...")) or an XML key/value pair (key="ClearTextPassword" value="...").
        _regex(
            r"(?i:key|token|secret|pass|pwd|auth|credential|salt)(?P<n>[A-Za-z0-9_.-]{0,40})[\"']"
            r"(?:[ \t]*,[ \t]*@?|[ \t]+value[ \t]*=[ \t]*)(?P<q>[\"'])(?P<s>[^\"'\n]{6,200})(?P=q)"
        ),
        _starts_folded(*_CONTEXT_WORDS, "salt"),
        _paired_literal,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # A call named for a password or credential given the password as a later argument:
        # new PasswordAuthentication(user, "..."), new NetworkCredential(user, @"..."), HTTPBasicAuth(u, "...").
        _regex(
            r"(?i:pass(?:word|wd)|credentials?|auth)(?P<n>[A-Za-z0-9_]{0,30})\([^()\n]{0,160}?,[ \t]*@?"
            r"(?P<q>[\"'])(?P<s>[^\"'\n]{6,200})(?P=q)"
        ),
        _starts_folded("pass", "credential", "auth"),
        _credential_call,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # (user, password) given to an auth parameter: auth=("neo4j", "..."), http_auth=("u", "...").
        _regex(
            r"(?i:auth|credentials?)[A-Za-z0-9_]{0,20}[\"']?[ \t]*[:=][ \t]*[(\[][ \t]*"
            r"(?P<q1>[\"'])[^\"'\n]{1,100}(?P=q1)"
            r"[ \t]*,[ \t]*(?P<q>[\"'])(?P<s>[^\"'\n]{6,200})(?P=q)"
        ),
        _starts_folded("auth", "credential"),
        _pair_password,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # PHP's database constructors: new PDO(dsn, user, password), mysqli(host, user, password).
        _regex(
            r"\b(?:PDO|mysqli_connect|mysqli)\([ \t]*(?P<q1>[\"'])[^\"'\n]{1,300}(?P=q1)[ \t]*,[ \t]*(?P<q2>[\"'])"
            r"[^\"'\n]{1,100}(?P=q2)[ \t]*,[ \t]*(?P<q>[\"'])(?P<s>[^\"'\n]{4,200})(?P=q)"
        ),
        _starts("PDO(", "mysqli"),
        _real_command_password,
    ),
    _Rule(
        "a password, secret or token assigned in plain text",
        # A byte-string literal under a secret's name: Go's jwtKey = []byte("..."), Python's KEY = b"...".
        _regex(
            r"(?i:key|token|secret|pass|pwd|auth|salt)(?P<n>[A-Za-z0-9_]{0,30})[ \t]*:?="
            r"[ \t]*(?:\[\]byte\(|b(?=[\"'`]))"
            r"(?P<q>[\"'`])(?P<s>[^\"'`\n]{8,200})(?P=q)"
        ),
        _starts_folded("key", "token", "secret", "pass", "pw", "auth", "salt"),
        _named_literal,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # PowerShell: ConvertTo-SecureString '<pw>' -AsPlainText (or a $variable assigned the literal).
        _regex(
            r"(?i:convertto-securestring)[ \t]+(?:'(?P<s>(?:[^'\n]|''){1,200})'|\"(?P<s2>(?:[^\"\n]|\"\"){1,200})\""
            r"|\$(?P<v>[A-Za-z_][A-Za-z0-9_]{0,60}))(?=[^\n]{0,100}?(?i:-asplaintext))"
        ),
        _starts_folded("convertto-securestring"),
        _plaintext_secure_string,
    ),
    _Rule(
        "a password written in plain text",
        # "user:password" base64-encoded for a Basic Authorization header, from a literal or a variable.
        _regex(
            r"(?:GetBytes|b64encode|btoa)\([ \t]*(?:b?(?P<q>[\"'])(?P<s>[^\"'\n]{1,200})(?P=q)"
            r"|\$?(?P<v>[A-Za-z_][A-Za-z0-9_]{0,60})\))"
        ),
        _starts("GetBytes(", "b64encode(", "btoa("),
        _basic_pair,
    ),
    _Rule(
        "a password written in plain text",
        # A Wi-Fi pre-shared key: wpa_supplicant's psk="...", hostapd's wpa_passphrase=...
        _regex(r"(?<![A-Za-z0-9_])(?i:psk|wpa_passphrase)[ \t]*[:=][ \t]*(?P<q>[\"']?)(?P<s>[^\s\"']{8,64})(?P=q)"),
        _starts_folded("psk", "wpa_passphrase"),
        _psk,
    ),
    _Rule(
        "a registry credential",
        # Bundler's per-host credentials: BUNDLE_<HOST__WITH__DOUBLE__UNDERSCORES>: "user:password".
        _regex(r"\bBUNDLE_(?:[A-Z0-9-]+__)+[A-Z0-9-]+[\"']?[ \t]*[:=][ \t]*[\"']?(?P<s>[^\s\"']{8,300})"),
        _starts("BUNDLE_"),
        _bundler_credential,
    ),
    _Rule(
        "a password written in plain text",
        # A quoted value with spaces under a password's name (INI, YAML: password = "<words>"):
        # one of its words mixes upper case, lower case and digits, so it is no sentence.
        _regex(
            r"(?<![A-Za-z0-9])(?i:pass(?:_?phrase|w(?:or)?d)?|pwd)(?P<n>[A-Za-z0-9_-]{0,20})[ \t]*[:=][ \t]*"
            r"(?P<q>[\"'])(?P<s>[^\"'\n]{8,100})(?P=q)"
        ),
        _starts_folded("pass", "pw"),
        _spaced_password,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # Markdown: `user` / `password` (two code spans and a slash), the password password-shaped.
        _regex(r"`(?P<u>[^`\s/]{1,64})`[ \t]*/[ \t]*`(?P<s>[^`\s]{8,100})`"),
        _starts("`"),
        _backticked_pair,
        generic=True,
    ),
    _Rule(
        "a password written in plain text",
        # A word for "password" in other languages, then a password-shaped token in the clause.
        _regex(
            r"(?:(?<![A-Za-z0-9_])(?i:passwort|kennwort|contrase(?:ñ|n)as?|mot de passe|senha|wachtwoord)"
            r"|пароль|Пароль|ПАРОЛЬ|密码|密碼|パスワード|비밀번호)(?P<w>[^\n]{1,80})"
        ),
        (
            *_starts_folded("passwort", "kennwort", "contrase", "mot de passe", "senha", "wachtwoord"),
            *_starts("пароль", "Пароль", "ПАРОЛЬ", "密码", "密碼", "パスワード", "비밀번호"),
        ),
        _password_in_prose,
        generic=True,
    ),
    _Rule(
        "an API key passed to a client",
        # A class given a random key as its string argument: dropbox.Dropbox('sl.<token>').
        _regex(
            r"(?<![A-Za-z0-9_])(?P<c>[A-Z][A-Za-z0-9_]{0,40})\([ \t]*([\"'])(?P<s>[A-Za-z0-9_.+/=:-]{32,400})\2"
        ),
        # One pass finds both "('" and '("'; the match starts where the class name does.
        (_Anchor("(", back_over=string.ascii_letters + string.digits + "_", back_max=41, followed_by="'\""),),
        _constructor_key,
    ),
)

_GENERIC_ORDER = {what: i for i, what in enumerate(dict.fromkeys(r.what for r in _RULES if r.generic))}

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


_ADVICE = (
    "Secrets must never be stored in memory: remove it (it is not repeated here). Keep the "
    "credential in an environment variable or a secret manager and refer to it by name "
    "(in tools.json as a ${VAR} reference)."
)


# --- finding candidate starts -------------------------------------------------

# A pass over the text costs about the same whatever literal it looks for, so
# anchors sharing a "hinge" character are found together in one pass. Hinges are
# characters uncommon in prose, preferred in this order: every occurrence of a
# hinge costs one attempt of its group's regex (in C, cheap). An anchor with none
# of them is searched on its own (re still finds it by its literal prefix).
_HINGES = "_-:.A"


class _Literal(NamedTuple):
    text: str
    hinge: int  # index of the group's hinge character in text
    # The group's other literals that can sit on the same hinge too: the finder
    # reports only the first alternative that matches, so these are checked.
    others: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class _Group:
    folded: bool
    # Starts with a literal (the hinge), so re searches for it with its fast
    # literal-prefix loop; matches where one of the literals sits on the hinge.
    # Each literal ends its alternative with an empty group, so the number of
    # the last group that matched says which literal it was: literals[n - 1].
    finder: re.Pattern[str]
    literals: tuple[_Literal, ...]


def _hinge_index(literal: str) -> int | None:
    for char in _HINGES:
        if char in literal:
            return literal.index(char)
    return None


def _can_share_hinge(a: str, i: int, b: str, j: int) -> bool:
    """Whether ``a`` and ``b`` can both occur with a[i] and b[j] at one position."""
    return all(a[i + d] == b[j + d] for d in range(max(-i, -j), min(len(a) - i, len(b) - j)))


def _group(folded: bool, literals: list[str]) -> _Group:
    hinged = [(lit, _hinge_index(lit) or 0) for lit in literals]
    # Alternatives that go on past the hinge begin with a literal character, so
    # re rejects most of them with one comparison; the look-behind confirming
    # the part before the hinge comes last. Literals that end at the hinge can
    # only be confirmed by a look-behind: one per length (a look-behind must
    # have a fixed width), each an alternation re also rejects cheaply.
    alternatives: list[str] = []
    order: list[tuple[str, int]] = []  # literal of each empty group, in group order
    ending_at_hinge: dict[int, list[tuple[str, int]]] = {}
    for lit, i in hinged:
        if i + 1 < len(lit):
            alternatives.append(re.escape(lit[i + 1 :]) + (f"(?<={re.escape(lit)})" if i else "") + "()")
            order.append((lit, i))
        else:
            ending_at_hinge.setdefault(len(lit), []).append((lit, i))
    for _, members in sorted(ending_at_hinge.items()):
        alternatives.append("(?<=" + "|".join(re.escape(lit) + "()" for lit, _ in members) + ")")
        order.extend(members)
    lit0, i0 = hinged[0]
    finder = _regex(f"{re.escape(lit0[i0])}(?:{'|'.join(alternatives)})")
    entries = tuple(
        _Literal(lit, i, tuple((o, j) for o, j in order if o != lit and _can_share_hinge(lit, i, o, j)))
        for lit, i in order
    )
    return _Group(folded, finder, entries)


def _groups(rules: Iterable[_Rule]) -> dict[tuple[bool, str], _Group]:
    """(folded, literal) -> the group that finds it, for every anchor of ``rules``."""
    members: dict[tuple[bool, str], list[str]] = {}
    for rule in rules:
        for anchor in rule.anchors:
            if anchor.followed_by:  # found by its own regex (_followed)
                continue
            lit = anchor.literal
            i = _hinge_index(lit)
            key = (anchor.folded, lit if i is None else lit[i])
            if lit not in members.setdefault(key, []):
                members[key].append(lit)
    out: dict[tuple[bool, str], _Group] = {}
    for (folded, _), literals in members.items():
        group = _group(folded, literals)
        out.update({(folded, lit): group for lit in literals})
    return out


@cache
def _group_of() -> dict[tuple[bool, str], _Group]:
    """Built on the first scan, not at import: it costs ~30 ms (``_LazyRegex``'s reason)."""
    return _groups(_RULES)


@cache
def _all_groups() -> tuple[_Group, ...]:
    return tuple({id(group): group for group in _group_of().values()}.values())


def _followed(rules: Iterable[_Rule]) -> dict[tuple[bool, str], re.Pattern[str]]:
    """anchor key -> the regex finding the anchor, for every anchor with ``followed_by``."""
    out: dict[tuple[bool, str], re.Pattern[str]] = {}
    for anchor in (a for rule in rules for a in rule.anchors if a.followed_by):
        # One character: matches cannot overlap, so finditer sees every occurrence.
        assert len(anchor.literal) == 1, anchor
        after = "".join(re.escape(c) for c in anchor.followed_by)
        out[anchor.key] = _regex(f"{re.escape(anchor.literal)}(?=[{after}])")
    return out


@cache
def _followed_finders() -> dict[tuple[bool, str], re.Pattern[str]]:
    return _followed(_RULES)

# Non-ASCII characters that (?i) matches as an ASCII letter (Unicode simple case
# folding); each maps to one character, so replacing them keeps offsets.
_FOLDS_TO_ASCII = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


def _fold(text: str) -> str:
    """``text`` lower-cased for anchor search, with the same length (offsets carry over).

    str.lower() alone is not enough: U+0130 lower-cases to two characters, and
    U+0131 and U+017F are already lower case yet (?i) matches them as i and s.
    Other non-ASCII characters become "?" (no anchor contains one); going
    through the ASCII codec is also several times faster than str.lower() on
    text that holds any non-ASCII character.
    """
    if text.isascii():
        return text.lower()
    for char, ascii_letter in _FOLDS_TO_ASCII.items():
        if char in text:  # a one-character `in` runs at memchr speed; a regex class is 10x slower
            text = text.replace(char, ascii_letter)
    return text.encode("ascii", "replace").decode("ascii").lower()


class _Candidates:
    """Candidate match starts in one text: every group of anchors searched once, up front."""

    def __init__(self, text: str) -> None:
        self._text = text
        folded = _fold(text)
        self._found: dict[tuple[bool, str], list[int]] = {}
        for group in _all_groups():
            self._search(group, folded if group.folded else text)
        for key, finder in _followed_finders().items():
            self._found[key] = [m.start() for m in finder.finditer(folded if key[0] else text)]

    def starts(self, rule: _Rule) -> list[int]:
        """Sorted, distinct positions that include every start of a match of ``rule``."""
        found = [self._placed(anchor, at) for anchor in rule.anchors if (at := self._found[anchor.key])]
        if len(found) <= 1:  # the usual case, already sorted and distinct
            return found[0] if found else []
        return sorted(set().union(*found))

    def _occurrences(self, folded: bool, literal: str) -> list[int]:
        """Every start of ``literal``, overlapping ones included, ascending."""
        return self._found[folded, literal]

    def _placed(self, anchor: _Anchor, occurrences: list[int]) -> list[int]:
        """Where matches can start, given where the anchor's literal occurs."""
        if not anchor.back_over:
            return occurrences
        out: list[int] = []
        for at in occurrences:
            # The original text, not the folded one: back_over is matched case-sensitively.
            window = self._text[max(0, at - anchor.back_max - 1) : at]
            run = len(window) - len(window.rstrip(anchor.back_over))
            # A run longer than back_max leaves no allowed start (each would have
            # a run character before it); an empty one leaves none either.
            if 0 < run <= anchor.back_max:
                out.append(at - run)
        return out

    def _search(self, group: _Group, target: str) -> None:
        found: dict[str, list[int]] = {lit.text: [] for lit in group.literals}
        # A group none of whose literals occurs has no hit: str's substring search (C, memchr
        # speed) says so several times faster than the finder's regex search would.
        if len(group.literals) <= 2 and not any(lit.text in target for lit in group.literals):
            for text in found:
                self._found[group.folded, text] = []
            return
        # search() from one past each hinge rather than finditer(): a match may
        # run past the next hinge, and occurrences may overlap ("AKIAKIA...").
        m = group.finder.search(target)
        while m is not None:
            hinge = m.start()
            assert m.lastindex is not None  # every alternative ends with an empty group
            lit = group.literals[m.lastindex - 1]
            found[lit.text].append(hinge - lit.hinge)
            for other, j in lit.others:
                if hinge >= j and target.startswith(other, hinge - j):
                    found[other].append(hinge - j)
            m = group.finder.search(target, hinge + 1)
        for text, positions in found.items():
            self._found[group.folded, text] = positions


def _fast_matches(rule: _Rule, content: str, starts: list[int]) -> Iterator[re.Match[str]]:
    """The matches ``rule.regex.finditer(content)`` returns, trying only ``starts``.

    finditer returns the leftmost match at or after the end of the previous one;
    trying the candidates in order from that end finds the same one, because
    every position where the regex can match is a candidate. ``match(content,
    pos)`` sees the text before ``pos``, so ``\\b`` and look-behinds behave
    as they do in finditer.
    """
    end = 0
    for start in starts:
        if start < end:
            continue
        m = rule.regex.match(content, start)
        if m is not None:
            yield m
            end = m.end()


def _skipped(rule: _Rule, m: re.Match[str], content: str) -> bool:
    """A match that is no finding: a placeholder, unconfirmed, or public by design."""
    secret = m.group("s") if "s" in rule.regex.groupindex else None
    if secret is not None and _placeholder(secret):
        return True
    return bool(rule.confirm and not rule.confirm(m, content)) or _public_by_design(m, content)


def _findings(content: str, matches: Iterable[tuple[_Rule, Iterable[re.Match[str]]]]) -> list[tuple[int, str]]:
    """(line, kind) of each confirmed match, once each, in line order; generic ones only where alone."""
    index: LineIndex | None = None
    found: set[tuple[int, str]] = set()
    generic: set[tuple[int, str]] = set()
    for rule, rule_matches in matches:
        for m in rule_matches:
            if _skipped(rule, m, content):
                continue
            index = index or LineIndex(content)
            (generic if rule.generic else found).add((index.line_of(m.start()), rule.what))
    specific_lines = {line for line, _ in found}
    # One generic problem a line (the first generic rule's kind): they all say the same thing.
    first_generic: dict[int, str] = {}
    for line, what in sorted(generic, key=lambda lw: (lw[0], _GENERIC_ORDER[lw[1]])):
        first_generic.setdefault(line, what)
    found |= {(line, what) for line, what in first_generic.items() if line not in specific_lines}
    return sorted(found)


@cache
def _anchor_finders() -> tuple[Any, Any] | None:
    """Two RE2 alternations, of every case-sensitive anchor literal and of every folded
    one (None without RE2). Every rule is tried only where one of its anchors occurs
    (``_Candidates``), so a text in which neither finds anything has no finding; RE2
    answers that in one linear pass (~0.02 ms for 4.7 KB), where the anchor groups
    take ~0.25 ms in Python's ``re``. Built on first use, like RE2's import."""
    try:
        import re2
    except ImportError:  # pragma: no cover - a declared dependency; the scan is exact without it
        return None
    options = re2.Options()
    options.log_errors = False

    def pattern(anchor: _Anchor) -> str:
        if not anchor.followed_by:
            return str(re2.escape(anchor.literal))
        return re2.escape(anchor.literal) + "[" + "".join(re2.escape(c) for c in anchor.followed_by) + "]"

    patterns = {(anchor.folded, pattern(anchor)) for rule in _RULES for anchor in rule.anchors}

    def alternation(folded: bool) -> Any:
        return re2.compile("|".join(sorted(p for f, p in patterns if f is folded)), options)

    return alternation(False), alternation(True)


def _no_anchor(text: str) -> bool:
    """True when no rule's anchor occurs in ``text`` (so nothing can be found); False
    when one may, or when this cannot be decided quickly (no RE2, a lone surrogate)."""
    finders = _anchor_finders()
    if finders is None:
        return False
    raw, folded = finders
    try:
        # Folded anchors are lower-case ASCII, searched in _fold(text) as _Candidates does.
        return raw.search(text) is None and folded.search(_fold(text)) is None
    except Exception:  # noqa: BLE001 - e.g. a lone surrogate RE2 cannot encode: the full scan decides
        return False


def _find(content: str) -> list[tuple[int, str]]:
    if _no_anchor(content):
        return []
    candidates = _Candidates(content)
    return _findings(
        content,
        ((rule, _fast_matches(rule, content, starts)) for rule in _RULES if (starts := candidates.starts(rule))),
    )


def scan_secrets(content: str) -> list[Problem]:
    """One problem per (line, kind) found in file content, in line order."""
    return [Problem(f"line {line}", f"contains {what}. {_ADVICE}", KIND) for line, what in _find(content)]


def _secret_spans(text: str) -> list[tuple[int, int]]:
    """Where each confirmed match lies in ``text`` (generic ones included), in rule order."""
    if _no_anchor(text):
        return []
    candidates = _Candidates(text)
    spans: list[tuple[int, int]] = []
    for rule in _RULES:
        starts = candidates.starts(rule)
        for m in _fast_matches(rule, text, starts) if starts else ():
            if not _skipped(rule, m, text):
                spans.append(m.span())
    return spans


WITHHELD = "[withheld]"


def _segments_with_secrets(path: str) -> list[int]:
    """1-based positions of the path's segments (the parts between slashes, empty ones
    skipped) that hold any part of a credential."""
    spans = _secret_spans(path)
    out: list[int] = []
    at, n = 0, 0
    for part in path.split("/"):
        end = at + len(part)
        if part:
            n += 1
            if any(start < end and at < stop for start, stop in spans):
                out.append(n)
        at = end + 1
    return out


def redact_path(path: str) -> str:
    """``path`` with every segment that holds a credential replaced by ``[withheld]``: how a
    refused path is shown, so the refusal never repeats the secret it refuses."""
    held = set(_segments_with_secrets(path))
    if not held:
        return path
    n, parts = 0, []
    for part in path.split("/"):
        if part:
            n += 1
            part = WITHHELD if n in held else part
        parts.append(part)
    return "/".join(parts)


def _ordinal_list(numbers: list[int]) -> str:
    """'2', '2 and 4', '1, 2 and 4'."""
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def scan_path(path: str) -> list[Problem]:
    """Credentials in a file's path: a name is shown in listings, diffs and prompts.

    The problem names the segment (``segment 2`` of ``/knowledge/<token>.md``), never its
    text, and carries the path as ``redact_path`` shows it, which ``format_problems`` uses."""
    found = list(dict.fromkeys(what for _, what in _find(path)))
    if not found:
        return []
    held = _segments_with_secrets(path)
    noun = "segment" if len(held) == 1 else "segments"
    where = f" ({noun} {_ordinal_list(held)} of the path, shown as {WITHHELD})" if held else ""
    shown = redact_path(path)
    return [
        Problem(
            "path",
            f"the file's path contains {what}{where}. Secrets must never be stored in memory, not even in a "
            "file name: choose a path without it (it is not repeated here).",
            KIND,
            shown_path=shown,
        )
        for what in found
    ]


def scan_message(text: str) -> list[Problem]:
    """Credentials in a revision message (kept forever in the history); locations say "message line N"."""
    return [
        Problem(
            f"message line {line}",
            f"the revision message contains {what}. Write the message without it (it is not repeated "
            "here); messages are kept in the history for good.",
            KIND,
        )
        for line, what in _find(text)
    ]


def _scan_reference(content: str) -> list[Problem]:
    """scan_secrets the slow, obvious way (every regex over the whole text); for tests."""
    found = _findings(content, ((rule, rule.regex.finditer(content)) for rule in _RULES))
    return [Problem(f"line {line}", f"contains {what}. {_ADVICE}", KIND) for line, what in found]
