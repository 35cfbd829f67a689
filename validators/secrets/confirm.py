"""The confirmers of the provider table (``providers``) and of the context rules (``context``).

A confirmer takes a rule's match and the whole text and says whether the match is a real
credential: a body that is random enough, a context that names a credential, no
placeholder, reference or public key. Each is named in its rule's table entry; the
judgments several families share are in ``values``.

Invariants: a confirmer is a pure function of the match and the text (no state, no I/O),
and it can only turn a match into no finding, never make one.
"""

from __future__ import annotations

import base64
import binascii
import re
import string

from .rule import _regex
from .values import (
    _CURSOR_NAMES,
    _NOT_SECRET_LAST_PART,
    _NOT_SECRET_NAME,
    _PASSWORD_SYMBOLS,
    _PUBLIC_NAME,
    _PUBLIC_PREFIXES,
    _REFERENCE_VALUE,
    _TRAILING,
    _URL_PASSWORD_WORD,
    _UUID,
    _VALUE_PLACEHOLDERS,
    _code_reference,
    _has_digit,
    _key_like,
    _mixed,
    _mixed_body,
    _name_at,
    _name_before,
    _not_jwt_io_example,
    _password_shaped,
    _random_value,
    _real_assigned_value,
    _real_command_password,
)


def _key_material_follows(m: re.Match[str], text: str) -> bool:
    # A header alone ("-----BEGIN PRIVATE KEY-----" in a how-to) is not a key;
    # base64 body lines (possibly JSON-escaped with \n) before the END line are.
    body = text[m.end() : m.end() + 600].split("-----", 1)[0]
    return re.search(r"[A-Za-z0-9+/]{32,}", body) is not None


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


def _real_url_password(m: re.Match[str], _: str) -> bool:
    pw = m.group("s").lower()
    # user == password (postgres:postgres@localhost) is a trivial local login, not a secret.
    if pw == m.group("u").lower():
        return False
    if pw[0] in "$<{[%" or _URL_PASSWORD_WORD.fullmatch(pw):
        return False
    return not any(p in pw for p in _URL_PLACEHOLDERS)


def _discord_user_id(m: re.Match[str], _: str) -> bool:
    # A Discord bot token starts with the bot's numeric id (a 17-20 digit snowflake) in base64.
    first = m.group("s").split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4))
    except (ValueError, binascii.Error):
        return False
    return raw.isdigit() and raw.isascii() and 17 <= len(raw) <= 20


def _in_reference(m: re.Match[str], text: str) -> bool:
    """The match sits inside a reference (arn:aws:secretsmanager:...:secret:name): no value."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    head = text[max(line_start, m.start() - 200) : m.start()]
    token = re.split(r"[\s\"'`=,(\[{]", head)[-1].lower()
    return token.startswith(("arn:", "valuefrom")) or "://" in token


def _cursor_before(m: re.Match[str], text: str) -> bool:
    """The name's part before the matched word is a cursor's (nextPageToken, SYNC_TOKEN), as a
    whole part: RSYNC_PASSWORD's part is "rsync", no cursor."""
    head = text[max(0, m.start() - 16) : m.start()].rstrip("_-.")
    parts = re.split(r"[^A-Za-z0-9]|(?<=[a-z])(?=[A-Z])", head)
    return bool(parts) and parts[-1].lower() in _CURSOR_NAMES


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


_REGISTRY_CLIENT = _regex(r"\b(?:docker|podman|nerdctl|buildah|helm[ \t]+registry)[ \t]+$")


def _registry_login(m: re.Match[str], text: str) -> bool:
    """``login ... -p X`` after docker, podman, nerdctl, buildah or helm registry, with a real password."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    before = text[max(line_start, m.start() - 40) : m.start()]
    return _REGISTRY_CLIENT.search(before) is not None and _real_command_password(m, text)


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
