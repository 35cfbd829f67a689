"""The fifth held-out set's rules (issue 36): each reads a syntax, not a sample.

The last part of the scanner's table, specific and generic rules in the order they were
added: gitleaks' provider prefixes; password keywords in more syntaxes (SQL ``IDENTIFIED
BY``; a config directive's ``Name value`` line, ``requirepass``; ``-storepass``,
``--passphrase``, ``-U user%pw``, ``-u user -p pw``, ``ldap* -w``, ``htpasswd -b``,
``sqlplus user/pw@``; a quoted secret's name and value as two arguments or an XML key/value
pair; a call named for a password or credential given one; ``auth=(user, pw)``; PDO;
``[]byte("...")``; ``ConvertTo-SecureString ... -AsPlainText``; a base64'd ``user:pw`` for
Basic auth; Wi-Fi PSKs; Bundler's per-host credentials; Markdown `` `user` / `pw` ``);
words for a password in other languages; hook paths with a random id; credential query
parameters; session cookies; a JWK's ``"d"``; VAPID private keys; ``otpauth://`` secrets;
recovery-code lists; CloudFront signatures; a class given a random key as its string
argument (``Dropbox('sl.<token>')``). Their confirmers are ``confirm_heldout5``'s; what
is public by design whatever matched it is ``exemptions``'.

Invariant: the table is data, and every rule's anchors locate every one of its matches.
"""

from __future__ import annotations

import string

from .confirm_heldout5 import (
    _backticked_pair,
    _basic_pair,
    _bundler_credential,
    _cloudfront_signed,
    _constructor_key,
    _credential_call,
    _directive_value,
    _htpasswd_batch,
    _jwk_private,
    _named_literal,
    _pair_password,
    _paired_literal,
    _plaintext_secure_string,
    _psk,
    _recovery_codes,
    _session_cookie,
    _spaced_password,
    _token_userinfo,
    _url_query_secret,
    _user_p_password,
    _webhook_id,
)
from .rule import _DASHED_VALUE, _SCHEME_CHARS, _Anchor, _prefixed, _regex, _Rule, _starts, _starts_folded
from .values import _CONTEXT_WORDS, _has_digit, _mixed_body, _password_in_prose, _real_command_password

HELDOUT5_RULES: tuple[_Rule, ...] = (
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
