"""The judgments of a value and a name that several rule families share.

What a random token, a password, a placeholder, a reference and a secret's name look
like, used by the confirmers of every table (``confirm``, ``confirm_heldout5``) and named
in the tables themselves (``_mixed_body``, ``_has_digit``, ``_key_like``,
``_real_command_password``, ``_password_in_prose``, ``_CONTEXT_WORDS``).

Invariants (what is not a value, whatever name it sits under):
- A placeholder word (``_VALUE_PLACEHOLDERS``: changeme, example, your..., bullets) or a
  URL password that is only a word for "password" (``_URL_PASSWORD_WORD``: password,
  pass123; one merely containing "pass" is real).
- A reference to a secret kept elsewhere (``_REFERENCE_VALUE``: ``${VAR}``, HCL's
  ``${var.x}``, ``$(cmd)``, ``{{ x }}``, ``<...>``, ``env()``, ``op://``, ``arn:``, a value
  encrypted in place: sops ``ENC[...]``, EJSON ``EJ[1:...]``, Ansible Vault, Laravel's
  ``eyJpdiI6`` ciphertext); each form is strict, because a random key may hold ``$(``.
- A name in code (``settings.SECRET_KEY``), except a kubeadm bootstrap token
  (``abc123.<16>``) or a part of 16+ random characters: those are values.
- A key public by its prefix (``_PUBLIC_PREFIXES``: Stripe's publishable keys, Mapbox's
  public tokens, Razorpay's key ids), a digest, a test-mode key, an age public key.
- A JWT carrying jwt.io's example payload, or whose role is ``anon`` (public by design).
- A password is password-shaped (``_password_shaped``): letters and digits with a symbol,
  or 12+ characters mixing cases and digits; never a version, address, path, email.
- A secret's name (``_NOT_SECRET_NAME``, ``_NOT_SECRET_LAST_PART``) is not one that says
  public, anon, client id, site key, key id, hash, digest, cache..., nor one whose last
  part says the value is about the secret (token_type, key_name).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import string

from .rule import _regex


def _mixed(text: str) -> bool:
    """Random tokens mix upper case, lower case and digits; words and hex do not."""
    return bool(re.search(r"[A-Z]", text) and re.search(r"[a-z]", text) and re.search(r"\d", text))


def _has_digit(m: re.Match[str], _: str) -> bool:
    return any(c.isdigit() for c in m.group("s"))


def _mixed_body(m: re.Match[str], _: str) -> bool:
    return _mixed(m.group("s"))


# A password that is only a word for "password" (user:password@, u:pass123@, :secret@) is a
# documentation stand-in; a password merely *containing* such a word (Pass9xK2vQ) is real.
_URL_PASSWORD_WORD = _regex(
    r"(?:my|your|the|some|db|user|app)?[-_]?(?:pass(?:word|wd)?|pwd|secret|token|changeme|admin|root|test)"
    r"[-_]?\d{0,4}"
)


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


# A name saying its value is public by design (publicAccessToken, PUBLISHABLE_KEY, anon_key), or
# Plaid's link_token (handed to the browser to open Link): the matched word ends such a name.
_PUBLIC_NAME = _regex(r"(?i)pub(?:lic|lishable)|anon|link_?$")


def _name_before(m: re.Match[str], text: str) -> str:
    """The name characters right before the match, on its line, at most 48 (DD_APP_ before KEY)."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    head = text[max(line_start, m.start() - 48) : m.start()]
    return head[len(head.rstrip(_NAME_CHARS)) :]


def _real_command_password(m: re.Match[str], text: str) -> bool:
    """A password given on a command line (mysql -pX, curl -u u:X, --password X): not a
    variable, a placeholder or a word, and shaped like a password."""
    value = m.group("s").strip("'\"")
    if len(value) < 6 or value[0] in "$<{[%*" or _URL_PASSWORD_WORD.fullmatch(value.lower()):
        return False
    return not any(p in value.lower() for p in _VALUE_PLACEHOLDERS) and len(set(value)) >= 5


def _key_like(m: re.Match[str], _: str) -> bool:
    """A random key: mixed case and digits, or 32+ hex digits with letters and digits."""
    body = m.group("s")
    hexed = len(body) >= 32 and all(c in "0123456789abcdefABCDEF" for c in body)
    # A provider's word, "_" and 32+ hex digits (live_<hex>, a key's documented shape) is random too.
    prefixed = re.fullmatch(r"[a-z]{2,12}_[0-9a-f]{32,}", body) is not None and _has_digit(m, _)
    return _mixed(body) or prefixed or (hexed and any(c.isdigit() for c in body) and any(c.isalpha() for c in body))


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
