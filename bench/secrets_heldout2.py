"""A SECOND held-out corpus for the secret scanner, written after the first one was spent.

``bench/secrets_heldout.py`` was measured once, at the end of the tuning for issue #36,
and its misses were then looked at and fixed: from then on it is no longer held out.
This set was written at that moment, before those fixes, without running any scanner on
it, so it measured how the rules generalise: 58 / 65 caught, 1 / 68 false alarm, once.

SPENT: its misses and its false alarm were then looked at and fixed with general rules
(a long base64 value under a name ending in "key", a secret named in a sentence then
"is <key>", "login: user / password", .pgpass and htpasswd lines, kubeadm bootstrap
tokens, EJSON values). It is now a tuning set like ``bench/secrets_corpus.py``, held to
the same bar (tests/test_secrets_corpus.py); its figure no longer says how the rules
generalise. Same rules as the first set: published formats, synthetic values, data
only; change a sample only to correct a misstated format, never to make a rule pass.

Invariants:
- Data only and deterministic (a ``random.Random`` seeded per sample).
- No real credential, and no provider prefix written out whole in this file.
- Every credential sample carries the credential (``secret``); look-alikes carry "".
"""

from __future__ import annotations

import base64
import random
import string
import uuid
import zlib

from bench.secrets_corpus import Sample

ALNUM = string.ascii_letters + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(f"heldout2/{name}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        digits_ok = n < 8 or not (set(alphabet) & set(string.digits)) or any(c.isdigit() for c in out)
        if digits_ok and (not any(c.isalpha() for c in alphabet) or any(c.isalpha() for c in out)):
            return out


def _pw(rng: random.Random, n: int = 13) -> str:
    while True:
        out = _pick(rng, ALNUM + "!@#%&*?+=-_.", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(not c.isalnum() for c in out):
            return out


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


# (kind, template with {s}, how to build the secret)
_CREDENTIALS: list[tuple[str, str, object]] = [
    ("cloud: Azure Cosmos DB key", "COSMOS_KEY={s}", lambda r: base64.b64encode(r.randbytes(64)).decode()),
    (
        "cloud: Azure Event Hubs connection string",
        "Endpoint=sb://acme-hub.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={s};EntityPath=ev",
        lambda r: base64.b64encode(r.randbytes(32)).decode(),
    ),
    (
        "cloud: Azure queue SAS URL",
        "https://acmeq.queue.core.windows.net/jobs?se=2026-01-01&sp=raup&sv=2021-12-02&sig={s}",
        lambda r: (
            base64.b64encode(r.randbytes(32)).decode().replace("/", "%2F").replace("+", "%2B").replace("=", "%3D")
        ),
    ),
    (
        "cloud: AWS presigned PUT URL",
        "upload with curl -X PUT -T f.zip 'https://u.s3.us-east-2.amazonaws.com/in/f.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-SignedHeaders=host&X-Amz-Signature={s}'",
        lambda r: _pick(r, HEX, 64),
    ),
    ("cloud: AWS secret key in prose", "the secret access key for ci-bot is {s}", lambda r: _pick(r, B64, 40)),
    (
        "cloud: GCP service account JSON",
        '{"type": "service_account", "private_key_id": "' + "0" * 8 + '", "private_key": "{s}"}',
        lambda r: "-----BEGIN PRIV" + "ATE KEY-----\\nMIIE" + _pick(r, B64, 120) + "\\n-----END PRIVATE KEY-----\\n",
    ),
    ("cloud: Alibaba access key secret", "ALIBABA_CLOUD_ACCESS_KEY_SECRET={s}", lambda r: _pick(r, ALNUM, 30)),
    ("cloud: DigitalOcean Spaces secret", "SPACES_SECRET={s}", lambda r: _pick(r, B64, 43)),
    (
        "chat: Telegram token in .env quotes",
        'TG_TOKEN="{s}"',
        lambda r: str(r.randrange(10**9, 10**10)) + ":AA" + _pick(r, B64URL, 33),
    ),
    (
        "chat: Slack webhook in YAML",
        "slack:\n  url: https://hooks.slack.com/services/{s}",
        lambda r: "T" + _pick(r, UPPER_DIGITS, 10) + "/B" + _pick(r, UPPER_DIGITS, 10) + "/" + _pick(r, ALNUM, 24),
    ),
    (
        "chat: Slack user token",
        "curl -H 'Authorization: Bearer {s}' https://slack.com/api/auth.test",
        lambda r: (
            "xo"
            + "xp-"
            + str(r.randrange(10**11, 10**12))
            + "-"
            + str(r.randrange(10**11, 10**12))
            + "-"
            + str(r.randrange(10**12, 10**13))
            + "-"
            + _pick(r, HEX, 32)
        ),
    ),
    (
        "chat: Discord webhook (canary)",
        "{s}",
        lambda r: (
            "https://canary.discord.com/api/webhooks/" + str(r.randrange(10**17, 10**18)) + "/" + _pick(r, B64URL, 68)
        ),
    ),
    ("chat: Mattermost bot token", "MM_BOT_TOKEN={s}", lambda r: _pick(r, LOWER_DIGITS, 26)),
    ("social: Instagram graph token", "IG_ACCESS_TOKEN={s}", lambda r: "IGQV" + _pick(r, B64URL, 150)),
    ("social: LinkedIn client secret", "linkedin:\n  client_secret: {s}", lambda r: _pick(r, ALNUM, 16)),
    ("social: X access token secret", "ACCESS_TOKEN_SECRET={s}", lambda r: _pick(r, ALNUM, 45)),
    ("payment: Stripe key in JSON", '{"stripeSecretKey": "{s}"}', lambda r: "sk" + "_live_" + _pick(r, ALNUM, 99)),
    ("payment: Razorpay key secret", "RAZORPAY_KEY_SECRET={s}", lambda r: _pick(r, ALNUM, 24)),
    (
        "payment: Paddle API key",
        "PADDLE_API_KEY={s}",
        lambda r: (
            "pdl_live_apikey_" + _pick(r, LOWER_DIGITS, 26) + "_" + _pick(r, ALNUM, 22) + "_" + _pick(r, ALNUM, 3)
        ),
    ),
    ("payment: Square token in header", "-H 'Authorization: Bearer {s}'", lambda r: "EA" + "AA" + _pick(r, B64URL, 60)),
    (
        "marketing: SendGrid key in prose",
        "the SendGrid key we use for receipts is {s}",
        lambda r: "S" + "G." + _pick(r, B64URL, 22) + "." + _pick(r, B64URL, 43),
    ),
    (
        "marketing: Mailchimp key in YAML",
        "mailchimp:\n  api_key: {s}",
        lambda r: _pick(r, HEX, 32) + "-us" + str(r.randrange(1, 21)),
    ),
    (
        "marketing: Brevo key",
        "BREVO_API_KEY={s}",
        lambda r: "xkey" + "sib-" + _pick(r, HEX, 64) + "-" + _pick(r, ALNUM, 16),
    ),
    ("marketing: Postmark server token", "X-Postmark-Server-Token: {s}", lambda r: _uuid(r)),
    (
        "marketing: Twilio auth token in JSON",
        '{"accountSid": "AC' + "1" * 32 + '", "authToken": "{s}"}',
        lambda r: _pick(r, HEX, 32),
    ),
    ("marketing: HubSpot token in .env", "HUBSPOT_ACCESS_TOKEN={s}", lambda r: "pat" + "-na1-" + _uuid(r)),
    ("identity: Okta token in YAML", "okta:\n  token: {s}", lambda r: "00" + _pick(r, B64URL, 40)),
    (
        "identity: Auth0 management token",
        "AUTH0_MGMT_TOKEN={s}",
        lambda r: "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + _pick(r, B64URL, 120) + "." + _pick(r, B64URL, 86),
    ),
    (
        "identity: Azure AD secret in YAML",
        "azure:\n  client-secret: {s}",
        lambda r: _pick(r, ALNUM, 3) + "8Q~" + _pick(r, ALNUM + "_~.-", 34),
    ),
    (
        "identity: Keycloak secret in prose",
        "the keycloak client secret for billing is {s}",
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "identity: OIDC client secret in JSON",
        '{"client_id": "web", "client_secret": "{s}"}',
        lambda r: _pick(r, B64URL, 48),
    ),
    (
        "vault: Vault token header",
        "curl -H 'X-Vault-Token: {s}' https://vault:8200/v1/secret/data/x",
        lambda r: "hv" + "s." + _pick(r, B64URL, 91),
    ),
    ("vault: Doppler token in prose", "doppler token for prd: {s}", lambda r: "dp" + ".st.prd." + _pick(r, ALNUM, 40)),
    (
        "vault: 1Password connect token",
        "OP_CONNECT_TOKEN={s}",
        lambda r: (
            "eyJhbGciOiJFUzI1NiIsImtpZCI6I"
            + _pick(r, B64URL, 40)
            + ".eyJ"
            + _pick(r, B64URL, 200)
            + "."
            + _pick(r, B64URL, 86)
        ),
    ),
    (
        "vault: Infisical token in YAML",
        "infisical:\n  token: {s}",
        lambda r: "st." + _uuid(r) + "." + _pick(r, HEX, 32) + "." + _pick(r, HEX, 32),
    ),
    ("vault: Akeyless access key", "AKEYLESS_ACCESS_KEY={s}", lambda r: _pick(r, B64, 44)),
    (
        "cluster: kubeconfig token (opaque)",
        "    token: {s}",
        lambda r: _pick(r, LOWER_DIGITS, 6) + "." + _pick(r, LOWER_DIGITS, 16),
    ),
    ("cluster: Kubernetes Secret stringData", "stringData:\n  password: {s}", lambda r: _pw(r, 16)),
    ("cluster: Helm values password", "postgresql:\n  auth:\n    postgresPassword: {s}", lambda r: _pw(r, 16)),
    (
        "registry: docker login to GitLab",
        "docker login registry.gitlab.com -u ci -p {s}",
        lambda r: "glp" + "at-" + _pick(r, B64URL, 20),
    ),
    (
        "registry: npm token in .npmrc",
        "//npm.pkg.github.com/:_authToken={s}",
        lambda r: "gh" + "p_" + _pick(r, ALNUM, 36),
    ),
    (
        "registry: pip index with token",
        "pip install --index-url https://__token__:{s}@pypi.acme.io/simple pkg",
        lambda r: _pick(r, ALNUM, 32),
    ),
    ("registry: Artifactory API key", "ARTIFACTORY_API_KEY={s}", lambda r: "AKC" + "p" + _pick(r, ALNUM, 69)),
    ("model: Anthropic key in JSON", '{"apiKey": "{s}"}', lambda r: "sk" + "-ant-api03-" + _pick(r, B64URL, 93) + "AA"),
    (
        "model: OpenAI project key in prose",
        "OpenAI key for evals: {s}",
        lambda r: "sk" + "-proj-" + _pick(r, B64URL, 120),
    ),
    ("model: Groq key in prose", "groq {s}", lambda r: "gs" + "k_" + _pick(r, ALNUM, 52)),
    ("model: Hugging Face token in Python", 'login(token="{s}")', lambda r: "h" + "f_" + _pick(r, ALNUM, 34)),
    ("model: Replicate token in header", "-H 'Authorization: Token {s}'", lambda r: "r" + "8_" + _pick(r, ALNUM, 37)),
    ("model: Gemini API key", "GEMINI_API_KEY={s}", lambda r: "AI" + "za" + _pick(r, B64URL, 35)),
    ("model: Mistral key in code", 'client = Mistral(api_key="{s}")', lambda r: _pick(r, ALNUM, 32)),
    ("model: Voyage key", "VOYAGE_API_KEY={s}", lambda r: "pa-" + _pick(r, B64URL, 43)),
    ("prose: db password with colon", "Prod DB — user: app, password: {s}", _pw),
    ("prose: password is", "FYI the admin password is {s}", _pw),
    ("prose: pwd in notes", "jenkins pwd {s}", _pw),
    ("prose: login creds slash", "login: deploy / {s}", _pw),
    ("prose: password in parentheses", "the NAS (password {s}) is in the closet", _pw),
    ("prose: passphrase for key", "GPG passphrase: {s}", _pw),
    ("env: quoted secret with symbols", "export APP_SECRET='{s}'", lambda r: _pick(r, ALNUM + "!@#$%^&*()", 40)),
    ("env: quoted password with spaces around", 'MYSQL_PASSWORD = "{s}"', _pw),
    (
        "url: redis URL with password",
        "REDIS_URL=rediss://default:{s}@cache.acme.io:6380",
        lambda r: _pick(r, ALNUM, 32),
    ),
    ("url: SMTP URL", "EMAIL_URL=smtp://mailer:{s}@smtp.acme.io:587", _pw),
    ("file: .pgpass", "*:*:*:replicator:{s}", _pw),
    ("file: htpasswd plain", "ops:{s}", _pw),
    ("file: JDBC URL password", "jdbc:postgresql://db:5432/app?user=app&password={s}", _pw),
    (
        "file: ODBC connection string",
        "Server=tcp:acme.database.windows.net,1433;User ID=app;Password={s};Encrypt=true",
        _pw,
    ),
]


def credentials() -> list[Sample]:
    out: list[Sample] = []
    for kind, template, make in _CREDENTIALS:
        secret = make(_rng(kind))  # type: ignore[operator]
        out.append(Sample(kind, template.replace("{s}", secret), secret))
    return out


def _lookalike_texts() -> list[tuple[str, str]]:
    r = _rng("lookalikes")
    b64 = lambda n: base64.b64encode(r.randbytes(n)).decode()  # noqa: E731 - data helper
    return [
        (
            "encrypted: sops YAML block",
            "db:\n    password: ENC[AES256_GCM,data:" + b64(15) + ",iv:" + b64(32) + ",tag:" + b64(16) + ",type:str]",
        ),
        (
            "encrypted: sops metadata",
            "sops:\n    mac: ENC[AES256_GCM,data:" + b64(48) + ",type:str]\n    version: 3.9.0",
        ),
        (
            "encrypted: Ansible vault var",
            "vault_db_password: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n      " + _pick(r, HEX, 64),
        ),
        ("encrypted: sealed secret JSON", '{"encryptedData": {"token": "AgC' + _pick(r, B64, 300) + '=="}}'),
        ("encrypted: git-crypt header", "\\x00GITCRYPT\\x00 binary file, not shown"),
        ("encrypted: Jasypt in YAML", "spring:\n  datasource:\n    password: ENC(" + b64(48) + ")"),
        ("encrypted: EJSON value", '"password": "EJ[1:' + b64(32) + ":" + b64(24) + ":" + b64(40) + ']"'),
        ("encrypted: KMS blob", '"CiphertextBlob": "AQICAHi' + _pick(r, B64, 180) + '=="'),
        ("hash: bcrypt in YAML", "users:\n  admin:\n    password_hash: $2a$12$" + _pick(r, ALNUM + "./", 53)),
        ("hash: Django password hash", "password: pbkdf2_sha256$870000$" + _pick(r, ALNUM, 22) + "$" + b64(32)),
        (
            "hash: shadow entry",
            "deploy:$y$j9T$" + _pick(r, ALNUM + "./", 22) + "$" + _pick(r, ALNUM + "./", 43) + ":19800:0:99999:7:::",
        ),
        ("hash: md5 apr1", "ops:$apr1$" + _pick(r, ALNUM, 8) + "$" + _pick(r, ALNUM + "./", 22)),
        ("lock: npm integrity sha512", '"integrity": "sha512-' + b64(64) + '",'),
        ("lock: yarn berry checksum", "  checksum: " + _pick(r, HEX, 128)),
        ("lock: bun lockb note", '"lodash": ["lodash@4.17.21", "", {}, "sha512-' + b64(64) + '"]'),
        ("lock: go.sum line", "github.com/stretchr/testify v1.9.0 h1:" + b64(32)),
        ("lock: Pipfile.lock", '"hashes": ["sha256:' + _pick(r, HEX, 64) + '", "sha256:' + _pick(r, HEX, 64) + '"]'),
        ("lock: mix.lock", '"jason": {:hex, :jason, "1.4.1", "' + _pick(r, HEX, 64) + '", [:mix], [], "hexpm"}'),
        (
            "lock: conda explicit",
            "https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4.conda#" + _pick(r, HEX, 32),
        ),
        ("lock: Docker image digest", "FROM python:3.12-slim@sha256:" + _pick(r, HEX, 64)),
        ("lock: nix hash", 'sha256 = "' + _pick(r, "0123456789abcdfghijklmnpqrsvwxyz", 52) + '";'),
        ("public: Stripe publishable key in JS", "const stripe = Stripe('p" + "k_live_" + _pick(r, ALNUM, 99) + "');"),
        (
            "public: Google client id in JSON",
            '{"client_id": "'
            + str(r.randrange(10**11, 10**12))
            + "-"
            + _pick(r, LOWER_DIGITS, 32)
            + '.apps.googleusercontent.com"}',
        ),
        (
            "public: Firebase web config",
            "const firebaseConfig = { authDomain: 'acme.firebaseapp.com', projectId: 'acme', appId: '1:"
            + str(r.randrange(10**11, 10**12))
            + ":web:"
            + _pick(r, HEX, 22)
            + "' };",
        ),
        ("public: Azure ids", "AZURE_TENANT_ID=" + _uuid(r) + "\nAZURE_SUBSCRIPTION_ID=" + _uuid(r)),
        (
            "public: AWS ARN and account",
            "arn:aws:lambda:eu-west-1:" + str(r.randrange(10**11, 10**12)) + ":function:ingest",
        ),
        (
            "public: Auth0 client id in JS",
            "createAuth0Client({ domain: 'acme.eu.auth0.com', clientId: '" + _pick(r, ALNUM, 32) + "' })",
        ),
        (
            "public: Okta client id in YAML",
            "okta:\n  client-id: 0oa" + _pick(r, ALNUM, 17) + "\n  issuer: https://acme.okta.com/oauth2/default",
        ),
        ("public: Algolia search-only key", "ALGOLIA_SEARCH_ONLY_KEY=" + _pick(r, HEX, 32)),
        ("public: reCAPTCHA site key", 'data-sitekey="6L' + _pick(r, B64URL, 38) + '"'),
        ("public: Segment write key", "analytics.load('" + _pick(r, ALNUM, 32) + "');"),
        (
            "public: Sentry DSN in JS",
            "Sentry.init({ dsn: 'https://"
            + _pick(r, HEX, 32)
            + "@o"
            + str(r.randrange(10**5, 10**6))
            + ".ingest.us.sentry.io/"
            + str(r.randrange(10**6, 10**7))
            + "' })",
        ),
        ("public: Twilio SID", "Account SID AC" + _pick(r, HEX, 32) + " (public; the token is in Vault)"),
        ("public: Slack channel id", "post to channel C" + _pick(r, UPPER_DIGITS, 10)),
        ("public: Discord guild id", "guild_id: " + str(r.randrange(10**17, 10**18))),
        (
            "public: GitHub app id and installation",
            "GITHUB_APP_ID="
            + str(r.randrange(10**5, 10**6))
            + "\nGITHUB_INSTALLATION_ID="
            + str(r.randrange(10**7, 10**8)),
        ),
        ("public: SSH ed25519 public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _pick(r, B64, 43) + " ci@acme"),
        ("public: age recipient", "age1" + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)),
        (
            "public: PGP public key",
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n" + _pick(r, B64, 64) + "\n-----END PGP PUBLIC KEY BLOCK-----",
        ),
        (
            "public: certificate in kubeconfig",
            "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t" + _pick(r, B64, 120),
        ),
        (
            "public: Mapbox pk in env",
            "MAPBOX_PUBLIC_TOKEN=p" + "k.eyJ1Ijoi" + _pick(r, B64URL, 50) + "." + _pick(r, B64URL, 22),
        ),
        (
            "placeholder: env template",
            "STRIPE_SECRET_KEY=sk_live_...\nSENDGRID_API_KEY=SG.xxxxx\nTWILIO_AUTH_TOKEN=your_auth_token",
        ),
        (
            "placeholder: docker login prompt",
            "docker login -u ci registry.acme.io   # you will be asked for the password",
        ),
        (
            "placeholder: kubeconfig exec",
            "user:\n  exec:\n    apiVersion: client.authentication.k8s.io/v1beta1\n"
            "    command: aws\n    args: [eks, get-token, --cluster-name, prod]",
        ),
        ("placeholder: GitHub Actions secret", "password: ${{ secrets.REGISTRY_PASSWORD }}"),
        ("placeholder: Vault agent template", '{{ with secret "secret/data/db" }}{{ .Data.data.password }}{{ end }}'),
        ("placeholder: Spring property", "spring.datasource.password=${DB_PASSWORD:}"),
        ("placeholder: .NET user secrets", 'dotnet user-secrets set "Stripe:SecretKey" "<your-key>"'),
        ("placeholder: quoted angle", "API_KEY='<insert-key>'"),
        ("placeholder: masked in logs", "Using token ghp_************************************ for the clone"),
        ("placeholder: redacted JSON", '{"password": "[REDACTED]", "token": "***"}'),
        ("placeholder: doc password pattern", "Passwords must match ^(?=.*[A-Z])(?=.*\\d).{12,}$"),
        ("placeholder: terraform sensitive", 'variable "db_password" {\n  type      = string\n  sensitive = true\n}'),
        ("placeholder: password prompt", "read -s -p 'Password: ' PW && export PGPASSWORD=\"$PW\""),
        ("prose: password manager note", "All passwords live in Bitwarden; the staging one was rotated on 2025-06-01."),
        ("prose: pass through", "pass --help lists commands; pass insert web/acme adds an entry."),
        ("prose: token ttl", "Tokens expire after 3600s; refresh with POST /oauth/token."),
        ("prose: password field doc", "The `password` field (string, 8-128 chars) is required on POST /users."),
        ("prose: pw in a CLI usage", "Usage: mysql -u USER -p DB   (omit the password after -p to be prompted)"),
        ("prose: secret name list", "Secrets used: STRIPE_SECRET_KEY, DB_PASSWORD, JWT_SECRET (all in Doppler)."),
        ("data: git SHA list", "\n".join(_pick(r, HEX, 40) for _ in range(3))),
        ("data: UUIDs", " ".join(_uuid(r) for _ in range(3))),
        ("data: base64 image", "![logo](data:image/png;base64," + b64(300) + ")"),
        ("data: S3 object key", "s3://acme-logs/2025/06/01/" + _uuid(r) + ".json.gz"),
        ("data: trace ids", "traceparent: 00-" + _pick(r, HEX, 32) + "-" + _pick(r, HEX, 16) + "-01"),
        ("data: content hash in filename", "app." + _pick(r, HEX, 20) + ".js and styles." + _pick(r, HEX, 8) + ".css"),
        (
            "data: YouTube and short links",
            "https://youtu.be/" + _pick(r, B64URL, 11) + " https://t.co/" + _pick(r, ALNUM, 10),
        ),
        ("data: npm package URL", "https://registry.npmjs.org/react/-/react-19.0.0.tgz#" + _pick(r, HEX, 40)),
    ]


def lookalikes() -> list[Sample]:
    return [Sample(kind, text, "") for kind, text in _lookalike_texts()]
