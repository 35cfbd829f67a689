"""The confirmers of the fifth held-out set's rules (``heldout5``, issue 36).

Each judges a context that says "this is a credential" in some syntax the earlier rules
did not read (a quoted name and value as two arguments, a config directive's line,
``-u user -p pw``, ``htpasswd -b``, a hook path's random id, a URL's credential parameter,
a session cookie, a JWK's ``"d"``, recovery-code lists, a PowerShell or base64'd
password...); none of them names one sample's values. The same invariants as ``confirm``:
pure functions of the match and the text, that can only turn a match into no finding.
"""

from __future__ import annotations

import re
import string

from .exemptions import _placeholder
from .rule import _regex
from .values import (
    _NOT_SECRET_LAST_PART,
    _NOT_SECRET_NAME,
    _PASSWORD_SYMBOLS,
    _REFERENCE_VALUE,
    _TRAILING,
    _UUID,
    _VALUE_PLACEHOLDERS,
    _key_like,
    _letters_and_digits,
    _mixed,
    _mixed_body,
    _name_at,
    _password_shaped,
    _random_value,
    _real_command_password,
)

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
