"""The context rules: generic rules that read a name or a sentence rather than a prefix.

Every rule here is generic: reported only on lines where no specific rule fired, one
problem a line. In the order they were added (``engine._RULES`` places the base64-JSON
rule, which needs the engine, between ``CONTEXT_RULES`` and ``PASSWORD_VALUE_RULES``):

- a name ending in "key" given a long random base64 value (``COSMOS_KEY=...``; not a name
  saying public, cache, hash...); a secret named in a sentence, then "is <random key>";
  a key named by its power ("the algolia write key <key>");
- "login: user / <password>", and "log in ... (user / password)";
- a credentials file's line alone (``.pgpass``'s host:port:db:user:password, a plain
  htpasswd user:password);
- a key named like a password, secret or token assigned a real-looking value, quoted or
  not (``.env`` files); a word for "password" and, within the clause, a password-shaped
  token;
- the context rule, which generalises the per-provider ones (a third held-out set showed
  them too specific): a random value (20+ characters mixing letters and digits inside one
  part; not a placeholder, a ``${X}``/``<...>``/``env()``/``arn:``/``valueFrom`` reference,
  a code reference, a digest or, outside a secret's name, a UUID) assigned or paired with a
  name holding key, token, secret, pass, pwd, auth or credential (identifier, dict key,
  YAML/JSON key, HTTP header, CLI flag, env var), unless the name says public, anon,
  client id, site key, key id, hash, digest, cache... or the value sits in an encrypted block;
- a Markdown table's password, secret or token column;
- (``PASSWORD_VALUE_RULES``, the fourth held-out set's) a password-shaped value under a
  password's name in YAML, INI or an XML element, not a ``$``-delimited password hash.
"""

from __future__ import annotations

import re
import string

from .confirm import (
    _colon_file_password,
    _key_named_value,
    _password_value,
    _real_assigned_secret,
    _real_quoted_value,
    _secret_in_prose,
    _secret_named_value,
    _table_password,
    _user_slash_password,
)
from .rule import _Anchor, _regex, _Rule, _starts_folded
from .values import _CONTEXT_WORDS, _key_like, _password_in_prose

# Every word a secret's variable name may end with starts with one of these (the
# generic rule's anchors); each is as long as it can be, so fewer ordinary words are tried.
_SECRET_WORDS = (
    *("pass", "secret", "token", "apikey", "api_key", "accesskey", "access_key"),
    *("auth", "privatekey", "private_key", "credential"),
)

# What a .pgpass or htpasswd line's value may start with after its first ":" (a port is a digit
# or *): never a space, so the ": " of prose and YAML is no candidate.
_COLON_VALUE_STARTS = string.ascii_letters + string.digits + "*!#&+=?@^"


CONTEXT_RULES: tuple[_Rule, ...] = (
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
)


PASSWORD_VALUE_RULES: tuple[_Rule, ...] = (
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
)
