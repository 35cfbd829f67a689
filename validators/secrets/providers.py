"""The provider table: the first 106 rules of the scanner's table, in the order they were added.

Mostly specific rules, each a provider's fixed prefix or a well-known format with a body of
the right alphabet and length (private key blocks, AWS, Anthropic, OpenAI, GitHub, Slack,
Stripe, JWTs, signed URLs, webhook URLs...), a password inside a URL, passwords on a
command line (``mysql -pX``, ``curl -u user:X``, ``sshpass -p X``, ``--password X``,
``docker login -p X``, a netrc, Bundler's config) and keys passed to a client. Any
``Authorization: <scheme> <token>`` counts (Bearer, Token, Basic and SSWS judged as bearer
tokens; any other scheme names a credential scheme). One generic rule sits here where it
was added: a C ``#define`` of a secret's name to a string literal.

The fourth held-out set's contexts, general rules: a function or class named for a key,
token or credential given a random string literal; a client factory given (id, key) unless
the text says search-only or public; curl's ``-H 'X-...Api...: key'`` and ``-u <key>:``;
``redis-cli -a``; ``net use ... /user:u pw``; Go's ``user:pass@tcp(...)`` DSN. A
``--secret`` flag's value made of words only is a secret's name, not the secret
(``_flag_value``); Razorpay's ``rzp_live_`` key id is public (``values._PUBLIC_PREFIXES``).
(The fourth set's YAML, INI and XML password values are ``context.PASSWORD_VALUE_RULES``.)

Invariants: the table is data (a confirmer is named, never written here), and every rule's
anchors locate every one of its matches (the package's speed invariant).
"""

from __future__ import annotations

import string

from .confirm import (
    _called_with_key,
    _client_key,
    _defined_secret,
    _discord_user_id,
    _django_key,
    _docker_auth,
    _flag_value,
    _hex_mixed,
    _key_material_follows,
    _pem_private_key_in_base64,
    _real_auth_header,
    _real_url_password,
    _registry_login,
    _signed_url,
)
from .rule import _DASHED_VALUE, _SCHEME_CHARS, _Anchor, _prefixed, _regex, _Rule, _starts, _starts_folded
from .values import _has_digit, _key_like, _mixed_body, _not_jwt_io_example, _real_command_password

PROVIDER_RULES: tuple[_Rule, ...] = (
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
)
