"""A deterministic corpus of fake credentials and of look-alikes, for the secret scanner.

``credentials()`` gives realistic but FAKE credentials: each provider's real format
(prefix, alphabet, length, checksum-free), its body drawn from a seeded RNG, set in
the kind of line it is found in (prose, an env file, a config file, a shell
command, a URL). ``lookalikes()`` gives text that looks like a credential and is
not one: documentation examples, digests, git SHAs, UUIDs, public keys,
certificates, base64 images, pagination cursors, identifiers that are public by
design, version strings, ``${VAR}`` references and placeholders.

Invariants:
- Deterministic: the same samples, byte for byte, on every run and machine (each
  kind has its own ``random.Random`` seeded from its name).
- Nothing here is a real credential, and this file holds no literal token: every
  provider prefix is assembled from pieces at run time, so push-protection scanners
  find nothing in the repository. The well-known documentation examples are built
  the same way.
- Every credential sample carries the credential itself (``secret``), so a test can
  check that no message repeats any part of it; look-alikes carry "".
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = UPPER + DIGITS
LOWER_DIGITS = LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
DJANGO = "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)"  # django.core.management.utils


@dataclass(frozen=True)
class Sample:
    kind: str  # what it is: "Slack app-level token", "git commit SHA"
    text: str  # the credential (or look-alike) in a realistic context
    secret: str  # the credential itself; "" for a look-alike


def _rng(name: str, i: int = 0) -> random.Random:
    return random.Random(zlib.crc32(f"{name}/{i}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet``; with letters and digits in it, at least one of each."""
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        wants_digit = any(c in DIGITS for c in alphabet)
        wants_letter = any(c.isalpha() for c in alphabet)
        if n < 8 or (
            (not wants_digit or any(c.isdigit() for c in out)) and (not wants_letter or any(c.isalpha() for c in out))
        ):
            return out


def _url_b64(rng: random.Random, n: int) -> str:
    """base64 of ``n`` random bytes, URL-encoded as it appears in a query string."""
    raw = base64.b64encode(rng.randbytes(n)).decode()
    return raw.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    head = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = _b64url(json.dumps({"sub": f"user-{rng.randrange(10**6)}", "role": "service", "exp": 1893456000}).encode())
    return f"{head}.{body}.{_pick(rng, B64URL, 43)}"


def _pem(rng: random.Random, label: str, lines: int = 6) -> str:
    body = "\n".join(_pick(rng, B64, 64) for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n{_pick(rng, B64, 24)}=\n-----END {label}-----"


_PRIV = "PRIV" + "ATE KEY"


def _discord_token(rng: random.Random) -> str:
    snowflake = str(rng.randrange(10**17, 10**18)).encode()
    return _b64url(snowflake) + "." + _pick(rng, B64URL, 6) + "." + _pick(rng, B64URL, 38)


# One credential kind: a generator of the credential and the contexts it appears in
# ("{s}" is replaced by the credential; str.replace, so JSON braces need no escaping).
_Kind = tuple[str, Callable[[random.Random], str], tuple[str, ...]]

_CREDENTIALS: tuple[_Kind, ...] = (
    (
        "AWS access key id",
        lambda r: "AK" + "IA" + _pick(r, UPPER_DIGITS, 16),
        ("[default]\naws_access_key_id = {s}", "The CI user's key is {s}, rotate it in June."),
    ),
    (
        "AWS temporary access key id",
        lambda r: "AS" + "IA" + _pick(r, UPPER_DIGITS, 16),
        ('"AccessKeyId": "{s}",', "export AWS_ACCESS_KEY_ID={s}"),
    ),
    (
        "AWS secret access key",
        lambda r: _pick(r, B64, 40),
        ("aws_secret_access_key = {s}", 'AWS_SECRET_ACCESS_KEY="{s}"', '"SecretAccessKey": "{s}",'),
    ),
    (
        "AWS session token",
        lambda r: "IQoJb3JpZ2luX2Vj" + _pick(r, B64, 340) + "==",
        ("aws_session_token = {s}", 'export AWS_SESSION_TOKEN="{s}"', '"SessionToken": "{s}",'),
    ),
    (
        "GitHub personal access token (classic)",
        lambda r: "gh" + "p_" + _pick(r, ALNUM, 36),
        ("GITHUB_TOKEN={s}", "git clone https://{s}@github.com/acme/infra.git", "my token is {s} for now"),
    ),
    (
        "GitHub OAuth token",
        lambda r: "gh" + "o_" + _pick(r, ALNUM, 36),
        ("oauth_token: {s}", "Authorization: token {s}"),
    ),
    ("GitHub app token", lambda r: "gh" + "s_" + _pick(r, ALNUM, 36), ("installation token {s} expires in an hour",)),
    ("GitHub user-to-server token", lambda r: "gh" + "u_" + _pick(r, ALNUM, 36), ('{"token": "{s}"}',)),
    ("GitHub refresh token", lambda r: "gh" + "r_" + _pick(r, ALNUM, 76), ("refresh_token={s}",)),
    (
        "GitHub fine-grained token",
        lambda r: "github" + "_pat_" + _pick(r, ALNUM, 22) + "_" + _pick(r, ALNUM, 59),
        ("GH_TOKEN={s}", "Use {s} to push the release."),
    ),
    (
        "GitLab personal access token",
        lambda r: "gl" + "pat-" + _pick(r, B64URL, 20),
        ("export GITLAB_TOKEN={s}", "private_token: {s}"),
    ),
    (
        "GitLab runner token",
        lambda r: "gl" + "rt-" + _pick(r, B64URL, 20),
        ('token = "{s}"', "register the runner with {s}"),
    ),
    (
        "Slack bot token",
        lambda r: "xo" + "xb-" + _pick(r, DIGITS, 12) + "-" + _pick(r, DIGITS, 13) + "-" + _pick(r, ALNUM, 24),
        ("SLACK_BOT_TOKEN={s}", "The bot posts with {s} in #deploys."),
    ),
    (
        "Slack user token",
        lambda r: (
            "xo"
            + "xp-"
            + _pick(r, DIGITS, 12)
            + "-"
            + _pick(r, DIGITS, 12)
            + "-"
            + _pick(r, DIGITS, 13)
            + "-"
            + _pick(r, HEX, 32)
        ),
        ('slack_token: "{s}"',),
    ),
    (
        "Slack app-level token",
        lambda r: "xa" + "pp-1-A" + _pick(r, UPPER_DIGITS, 10) + "-" + _pick(r, DIGITS, 13) + "-" + _pick(r, HEX, 64),
        ("Socket mode needs the app-level token {s} (connections:write).", "SLACK_APP_TOKEN={s}"),
    ),
    (
        "Slack webhook URL",
        lambda r: (
            "https://hooks.slack.com/"
            + "services/T"
            + _pick(r, UPPER_DIGITS, 8)
            + "/B"
            + _pick(r, UPPER_DIGITS, 10)
            + "/"
            + _pick(r, ALNUM, 24)
        ),
        ("Alerts go to {s}", 'webhook_url: "{s}"'),
    ),
    (
        "Stripe secret key",
        lambda r: "sk" + "_live_" + _pick(r, ALNUM, 99),
        ("STRIPE_SECRET_KEY={s}", "stripe.api_key = '{s}'"),
    ),
    ("Stripe restricted key", lambda r: "rk" + "_live_" + _pick(r, ALNUM, 99), ("The reporting job uses {s}.",)),
    (
        "Stripe webhook signing secret",
        lambda r: "wh" + "sec_" + _pick(r, ALNUM, 32),
        ("The endpoint's signing secret is {s}; verify every event with it.", "STRIPE_WEBHOOK_SECRET={s}"),
    ),
    (
        "OpenAI project key",
        lambda r: "sk-" + "proj-" + _pick(r, B64URL, 156),
        ("OPENAI_API_KEY={s}", 'client = OpenAI(api_key="{s}")'),
    ),
    (
        "OpenAI legacy key",
        lambda r: "sk-" + _pick(r, ALNUM, 20) + "T3Blbk" + "FJ" + _pick(r, ALNUM, 20),
        ('openai.api_key = "{s}"',),
    ),
    (
        "Anthropic API key",
        lambda r: "sk-" + "ant-api03-" + _pick(r, B64URL, 93) + "AA",
        ("ANTHROPIC_API_KEY={s}", "I set the key to {s} in the notebook."),
    ),
    (
        "Google API key",
        lambda r: "AI" + "za" + _pick(r, B64URL, 35),
        ("https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key={s}", "GOOGLE_API_KEY={s}"),
    ),
    (
        "Google OAuth client secret",
        lambda r: "GOC" + "SPX-" + _pick(r, B64URL, 28),
        ('"client_secret": "{s}",', "client secret: {s}"),
    ),
    (
        "Google service account key",
        lambda r: _pem(r, _PRIV, 4).replace("\n", "\\n"),
        ('  "private_key": "{s}\\n",',),
    ),
    ("RSA private key", lambda r: _pem(r, "RSA " + _PRIV), ("{s}",)),
    ("OpenSSH private key", lambda r: _pem(r, "OPENSSH " + _PRIV), ("~/.ssh/deploy:\n{s}",)),
    ("EC private key", lambda r: _pem(r, "EC " + _PRIV, 3), ("{s}",)),
    ("PGP private key block", lambda r: _pem(r, "PGP " + _PRIV + " BLOCK"), ("{s}",)),
    (
        "npm access token",
        lambda r: "np" + "m_" + _pick(r, ALNUM, 36),
        ("//registry.npmjs.org/:_authToken={s}", "NPM_TOKEN={s}"),
    ),
    (
        "PyPI API token",
        lambda r: "py" + "pi-AgEIcHlwaS5vcmc" + _pick(r, B64URL, 140),
        ("[pypi]\n  username = __token__\n  password = {s}", "TWINE_PASSWORD={s}"),
    ),
    (
        "Hugging Face token",
        lambda r: "h" + "f_" + _pick(r, ALNUM, 34),
        ("HF_TOKEN={s}", "huggingface-cli login --token {s}"),
    ),
    (
        "SendGrid API key",
        lambda r: "S" + "G." + _pick(r, B64URL, 22) + "." + _pick(r, B64URL, 43),
        ("SENDGRID_API_KEY={s}", "smtp password: {s}"),
    ),
    (
        "DigitalOcean token",
        lambda r: "do" + "p_v1_" + _pick(r, HEX, 64),
        ("DIGITALOCEAN_TOKEN={s}", "doctl auth init -t {s}"),
    ),
    ("Shopify access token", lambda r: "sh" + "pat_" + _pick(r, HEX, 32), ("X-Shopify-Access-Token: {s}",)),
    ("JSON Web Token", _jwt, ("Authorization: Bearer {s}", "session cookie was {s}")),
    (
        "bearer token",
        lambda r: _pick(r, ALNUM, 40),
        ('curl -H "Authorization: Bearer {s}" https://api.acme.io/v1/me', "headers = {'Authorization': 'Bearer {s}'}"),
    ),
    (
        "basic auth header",
        lambda r: base64.b64encode(f"deploy:{_pick(r, ALNUM, 18)}".encode()).decode(),
        ("Authorization: Basic {s}",),
    ),
    (
        "Postgres URL with a password",
        lambda r: "postgresql://app:" + _pick(r, ALNUM, 20) + "@db.internal:5432/app",
        ("DATABASE_URL={s}", "Connect with psql {s}"),
    ),
    (
        "Postgres URL with a password containing 'pass'",
        lambda r: "postgres://billing:Pass" + _pick(r, ALNUM, 12) + "@10.0.3.7:5432/billing",
        ("DATABASE_URL={s}", "The billing DB is at {s}."),
    ),
    (
        "MySQL URL with a password",
        lambda r: "mysql://root:" + _pick(r, ALNUM + "!%", 16) + "@mysql.prod:3306/shop",
        ("SQLALCHEMY_DATABASE_URI = '{s}'",),
    ),
    (
        "Redis URL with an empty user",
        lambda r: "redis://:" + _pick(r, ALNUM, 24) + "@cache.internal:6379/0",
        ("REDIS_URL={s}", "broker_url = '{s}'"),
    ),
    (
        "MongoDB URL with a password",
        lambda r: "mongodb+srv://admin:" + _pick(r, ALNUM, 16) + "@cluster0.ab1cd.mongodb.net/prod",
        ("MONGO_URI={s}",),
    ),
    (
        "AMQP URL with a password",
        lambda r: "amqp://worker:" + _pick(r, ALNUM, 20) + "@rabbit.internal:5672/%2F",
        ("CELERY_BROKER_URL={s}",),
    ),
    (
        "Azure storage connection string",
        lambda r: (
            "DefaultEndpointsProtocol=https;AccountName=acmeprod;Account"
            + "Key="
            + base64.b64encode(r.randbytes(64)).decode()
            + ";EndpointSuffix=core.windows.net"
        ),
        ("AZURE_STORAGE_CONNECTION_STRING={s}",),
    ),
    (
        "Azure Service Bus connection string",
        lambda r: (
            "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;Shared"
            + "AccessKey="
            + base64.b64encode(r.randbytes(32)).decode()
        ),
        ('"ServiceBus": "{s}"',),
    ),
    (
        "Azure AD client secret",
        lambda r: _pick(r, ALNUM, 3) + "8Q~" + _pick(r, ALNUM + "_~.-", 34),
        ("AZURE_CLIENT_SECRET={s}", "client_secret: {s}"),
    ),
    ("Twilio auth token", lambda r: _pick(r, HEX, 32), ("TWILIO_AUTH_TOKEN={s}", 'twilio_token: "{s}"')),
    (
        "Twilio API key",
        lambda r: "S" + "K" + _pick(r, HEX, 32),
        ("TWILIO_API_KEY={s}", "API key {s} belongs to the IVR."),
    ),
    (
        "Telegram bot token",
        lambda r: _pick(r, DIGITS, 10) + ":A" + "A" + _pick(r, B64URL, 33),
        ("TELEGRAM_BOT_TOKEN={s}", "https://api.telegram.org/bot{s}/sendMessage"),
    ),
    ("Discord bot token", _discord_token, ("DISCORD_TOKEN={s}", "client.run('{s}')")),
    (
        "Discord webhook URL",
        lambda r: "https://discord.com/api/" + "webhooks/" + _pick(r, DIGITS, 18) + "/" + _pick(r, B64URL, 68),
        ("Post the build result to {s}",),
    ),
    ("Mailgun API key", lambda r: "ke" + "y-" + _pick(r, HEX, 32), ("MAILGUN_API_KEY={s}", "mailgun: api key {s}")),
    (
        "Mailchimp API key",
        lambda r: _pick(r, HEX, 32) + "-us" + str(r.randrange(1, 21)),
        ("MAILCHIMP_API_KEY={s}", "mailchimp api_key: {s}"),
    ),
    (
        "Django SECRET_KEY",
        lambda r: "django-insecure-" + _pick(r, DJANGO, 50),
        ("SECRET_KEY = '{s}'",),
    ),
    (
        "Django SECRET_KEY (production)",
        lambda r: _pick(r, DJANGO, 50),
        ("SECRET_KEY = '{s}'", 'DJANGO_SECRET_KEY="{s}"'),
    ),
    (
        "password in an env file",
        lambda r: _pick(r, ALNUM + "!#%", 18),
        ("DB_PASSWORD={s}", "  password: {s}", 'POSTGRES_PASSWORD="{s}"'),
    ),
    (
        "mysql -p password",
        lambda r: _pick(r, ALNUM, 16),
        ("mysql -u root -p'{s}' shop < dump.sql", "mysql -uadmin -p{s} -h db.prod"),
    ),
    (
        "curl -u user:password",
        lambda r: _pick(r, ALNUM, 18),
        (
            "curl -u admin:{s} https://jenkins.acme.io/api/json",
            "curl --user deploy:'{s}' -X POST https://ci.acme.io/build",
        ),
    ),
    (
        "password on a command line",
        lambda r: _pick(r, ALNUM, 16),
        ("sshpass -p '{s}' ssh root@10.0.0.5", "docker login -u ci --password {s} registry.acme.io"),
    ),
    (
        "Atlassian API token",
        lambda r: "ATA" + "TT3xFfGF0" + _pick(r, B64URL, 183) + "=" + _pick(r, HEX.upper(), 8),
        ("JIRA_API_TOKEN={s}",),
    ),
    ("Databricks token", lambda r: "da" + "pi" + _pick(r, HEX, 32), ("DATABRICKS_TOKEN={s}", "token = {s}")),
    ("Linear API key", lambda r: "lin" + "_api_" + _pick(r, ALNUM, 40), ("LINEAR_API_KEY={s}",)),
    (
        "Notion integration token",
        lambda r: "nt" + "n_" + _pick(r, DIGITS, 11) + _pick(r, ALNUM, 35),
        ("NOTION_TOKEN={s}", "The Notion integration secret is {s}."),
    ),
    ("HashiCorp Vault token", lambda r: "hv" + "s." + _pick(r, B64URL, 90), ("VAULT_TOKEN={s}", "vault login {s}")),
    (
        "Terraform Cloud token",
        lambda r: _pick(r, ALNUM, 14) + ".atlas" + "v1." + _pick(r, ALNUM, 67),
        ('credentials "app.terraform.io" {\n  token = "{s}"\n}',),
    ),
    (
        "Grafana service account token",
        lambda r: "gl" + "sa_" + _pick(r, ALNUM, 32) + "_" + _pick(r, HEX, 8),
        ("GRAFANA_TOKEN={s}",),
    ),
    ("New Relic user key", lambda r: "NR" + "AK-" + _pick(r, UPPER_DIGITS, 27), ("NEW_RELIC_API_KEY={s}",)),
    ("Sentry auth token", lambda r: "sntr" + "ys_" + _pick(r, B64URL, 150), ("SENTRY_AUTH_TOKEN={s}",)),
    ("Postman API key", lambda r: "PM" + "AK-" + _pick(r, HEX, 24) + "-" + _pick(r, HEX, 34), ("POSTMAN_API_KEY={s}",)),
    ("Square access token", lambda r: "EA" + "AA" + _pick(r, B64URL, 60), ("SQUARE_ACCESS_TOKEN={s}",)),
    ("Supabase access token", lambda r: "sb" + "p_" + _pick(r, HEX, 40), ("SUPABASE_ACCESS_TOKEN={s}",)),
    ("Dropbox access token", lambda r: "sl" + "." + _pick(r, B64URL, 136), ("DROPBOX_TOKEN={s}",)),
    (
        "age secret key",
        lambda r: "AGE-SECRET" + "-KEY-1" + _pick(r, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58),
        ("# created: 2024-05-01\n{s}",),
    ),
    ("Heroku API key", lambda r: str(uuid.UUID(int=r.getrandbits(128), version=4)), ("HEROKU_API_KEY={s}",)),
    ("Cloudflare API token", lambda r: _pick(r, B64URL, 40), ("CLOUDFLARE_API_TOKEN={s}",)),
    # Kinds added for issue 36 (the tuning set; bench/secrets_heldout.py measures, never tunes).
    (
        "Azure SAS signature",
        lambda r: _url_b64(r, 32),
        ("SAS_URL=https://logs.blob.core.windows.net/app?sp=racwdl&st=2025-01-01&se=2025-02-01&sv=2022-11-02&sig={s}",),
    ),
    (
        "AWS presigned URL signature",
        lambda r: _pick(r, HEX, 64),
        ("curl 'https://b.s3.amazonaws.com/x.zip?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={s}'",),
    ),
    (
        "GCS signed URL signature",
        lambda r: _pick(r, HEX, 256),
        ("https://storage.googleapis.com/acme/a.bin?X-Goog-Expires=600&X-Goog-Signature={s}",),
    ),
    (
        "Azure AD client secret (prose)",
        lambda r: _pick(r, ALNUM, 3) + "2Q~" + _pick(r, ALNUM + "_~.-", 34),
        ("the app registration's secret value is {s} (expires 2026)",),
    ),
    (
        "X bearer token",
        lambda r: "A" * 22 + _pick(r, ALNUM, 10) + "A" * 7 + _url_b64(r, 30) + _pick(r, ALNUM, 40),
        ("bearer_token: {s}", "x_client = tweepy.Client(bearer_token='{s}')"),
    ),
    ("Facebook page token", lambda r: "EA" + "AG" + _pick(r, ALNUM, 150), ("page token {s}",)),
    ("Square OAuth token", lambda r: "sq0" + "atp-" + _pick(r, B64URL, 22), ("square token {s}",)),
    (
        "Braintree access token",
        lambda r: "access_token" + "$sandbox$" + _pick(r, LOWER_DIGITS, 16) + "$" + _pick(r, HEX, 32),
        ('gateway = braintree.BraintreeGateway(access_token="{s}")',),
    ),
    ("Adyen API key", lambda r: "AQE" + _pick(r, B64, 120), ("X-API-Key: {s}",)),
    ("Mailchimp API key", lambda r: _pick(r, HEX, 32) + "-us" + str(r.randrange(1, 21)), ("mailchimp key {s}",)),
    ("Klaviyo private key", lambda r: "p" + "k_" + _pick(r, ALNUM, 34), ("Authorization: Klaviyo-API-Key {s}",)),
    (
        "HubSpot private app token",
        lambda r: "pat" + "-eu1-" + str(uuid.UUID(int=r.getrandbits(128), version=4)),
        ("hubspot.Client.create(access_token='{s}')",),
    ),
    (
        "Okta API token",
        lambda r: "00" + _pick(r, B64URL, 40),
        ("curl -H 'Authorization: SSWS {s}' https://acme.okta.com",),
    ),
    ("Keycloak client secret", lambda r: _pick(r, ALNUM, 32), ("keycloak:\n  credentials:\n    secret: {s}",)),
    ("Vault legacy token", lambda r: "s." + _pick(r, ALNUM, 24), ("vault token: {s}", "VAULT_TOKEN={s}")),
    ("Doppler token", lambda r: "dp" + ".sa." + _pick(r, ALNUM, 43), ("doppler service account {s}",)),
    (
        "1Password service account token",
        lambda r: "op" + "s_eyJ" + _pick(r, B64URL, 400),
        ("export OP_SERVICE_ACCOUNT_TOKEN={s}",),
    ),
    (
        "Infisical service token",
        lambda r: (
            "st."
            + str(uuid.UUID(int=r.getrandbits(128), version=4))
            + "."
            + _pick(r, HEX, 32)
            + "."
            + _pick(r, HEX, 32)
        ),
        ("infisical export --token={s}",),
    ),
    (
        "Kubernetes Secret data (private key)",
        lambda r: base64.b64encode(_pem(r, "EC " + _PRIV, 3).encode()).decode(),
        ("data:\n  tls.key: {s}",),
    ),
    (
        "docker config auth",
        lambda r: base64.b64encode(("robot:" + _pick(r, ALNUM, 24)).encode()).decode(),
        ('"auths":{"quay.io":{"auth":"{s}","email":""}}',),
    ),
    ("Docker Hub access token", lambda r: "dckr" + "_pat_" + _pick(r, B64URL, 27), ("DOCKERHUB_TOKEN={s}",)),
    (
        "registry password on docker login",
        lambda r: _pick(r, UPPER_DIGITS, 40),
        ("podman login -u bot -p {s} quay.io",),
    ),
    ("Groq API key", lambda r: "gs" + "k_" + _pick(r, ALNUM, 52), ("GROQ_API_KEY={s}",)),
    ("Perplexity API key", lambda r: "ppl" + "x-" + _pick(r, ALNUM, 48), ('"apiKey": "{s}"',)),
    ("Together AI key", lambda r: "tgp" + "_v1_" + _pick(r, B64URL, 43), ("TOGETHER_API_KEY={s}",)),
    ("Fireworks AI key", lambda r: "f" + "w_" + _pick(r, ALNUM, 24), ("FIREWORKS_API_KEY={s}",)),
    ("Replicate API token", lambda r: "r" + "8_" + _pick(r, ALNUM, 37), ("replicate token: {s}",)),
    ("xAI API key", lambda r: "xa" + "i-" + _pick(r, ALNUM, 80), ("client = Client(api_key='{s}')",)),
    ("OpenRouter API key", lambda r: "sk" + "-or-v1-" + _pick(r, HEX, 64), ("openrouter key {s}",)),
    ("Cohere API key", lambda r: _pick(r, ALNUM, 40), ("client = cohere.ClientV2('{s}')", "co = cohere.Client('{s}')")),
    (
        "password in prose",
        lambda r: _pick(r, ALNUM, 8) + "!" + _pick(r, DIGITS, 2),
        ("The VPN password is {s} until Friday.", "pw: {s}", "passphrase for the deploy key = {s}"),
    ),
    (
        "password in prose with = and .",
        lambda r: _pick(r, ALNUM, 4) + "." + _pick(r, ALNUM, 3) + "=" + _pick(r, ALNUM, 3),
        ("the wifi password is {s}", "root password: {s} (rotate monthly)"),
    ),
    (
        ".netrc password",
        lambda r: _pick(r, HEX, 40),
        ("machine git.acme.io login bot password {s}",),
    ),
    ("Grafana Cloud token in prose", lambda r: "gl" + "c_" + _pick(r, B64URL, 60), ("grafana cloud token {s}",)),
    ("New Relic key in prose", lambda r: "NR" + "AK-" + _pick(r, UPPER_DIGITS, 27), ("new relic user key is {s}",)),
    (
        "Firebase Cloud Messaging server key",
        lambda r: "AAAA" + _pick(r, B64URL, 7) + ":APA91b" + _pick(r, B64URL, 134),
        ('{"to": "/topics/all", "server_key": "{s}"}',),
    ),
    (
        "Mapbox secret token",
        lambda r: "s" + "k.eyJ1Ijoi" + _pick(r, B64URL, 60) + "." + _pick(r, B64URL, 22),
        ("mapbox secret token {s}",),
    ),
    ("hex key passed to a client", lambda r: _pick(r, HEX, 32), ("rest = TwilioClient('AC' + sid, '{s}')",)),
    (
        ".env value in quotes with punctuation",
        lambda r: _pick(r, DJANGO + UPPER, 54),
        ("DJANGO_SECRET_KEY='{s}'", 'export SECRET_KEY="{s}"', "export SESSION_SECRET='{s}'"),
    ),
)


def credentials() -> list[Sample]:
    out: list[Sample] = []
    for kind, make, contexts in _CREDENTIALS:
        for i, context in enumerate(contexts):
            secret = make(_rng(kind, i))
            out.append(Sample(kind, context.replace("{s}", secret), secret))
    return out


# --- look-alikes -------------------------------------------------------------


def _digest(name: str, i: int) -> bytes:
    return hashlib.sha256(f"{name}/{i}".encode()).digest()


def _b64_json_part(obj: dict[str, object]) -> str:
    return _b64url(json.dumps(obj, separators=(",", ":")).encode())


def _lookalike_kinds() -> list[tuple[str, list[str]]]:
    r = _rng("lookalikes")
    d = [hashlib.sha256(f"doc {i}".encode()) for i in range(40)]
    uuids = [str(uuid.UUID(int=r.getrandbits(128), version=4)) for _ in range(6)]
    pub = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _pick(r, B64, 43)
    rsa_pub = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ" + _pick(r, B64, 540)
    ecdsa = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBB" + _pick(r, B64, 90) + "="
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + r.randbytes(600)).decode()
    jwt_io = (
        _b64_json_part({"alg": "HS256", "typ": "JWT"})
        + "."
        + _b64_json_part({"sub": "1234567890", "name": "John Doe", "iat": 1516239022})
        + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6"
        + "yJV_adQssw5c"
    )
    return [
        (
            "AWS documentation example key",
            [
                "aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
                "export AWS_ACCESS_KEY_ID=AKIA" + "I44QH8DHBEXAMPLE",
            ],
        ),
        (
            "other documentation examples",
            [
                "GITHUB_TOKEN=gh" + "p_16C7e42F292c6912" + "E7710c838347Ae178B4a",
                "curl https://api.telegram.org/bot110201543:AA" + "HdqTcvCH1vGWJxfSeofSA" + "s0K5PALDsaw/getMe",
                "STRIPE_KEY=sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
                "Example: Authorization: Bearer " + jwt_io,
                "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlC"
                + "DXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;",
            ],
        ),
        (
            "sha256 digest",
            [
                f"sha256sum: {d[0].hexdigest()}  dist/app.tar.gz",
                f"image: ghcr.io/acme/app@sha256:{d[1].hexdigest()}",
                f"    --hash=sha256:{d[2].hexdigest()}",
                f'"checksum": "{d[3].hexdigest().upper()}"',
            ],
        ),
        (
            "sha1 and md5 digests",
            [
                f"SHA1 ({'release.zip'}) = {hashlib.sha1(b'r').hexdigest()}",
                f"md5: {hashlib.md5(b'x').hexdigest()}",
                f'ETag: "{hashlib.md5(b"etag").hexdigest()}"',
            ],
        ),
        (
            "sha512 integrity",
            [
                '"integrity": "sha512-' + base64.b64encode(hashlib.sha512(b"pkg").digest()).decode() + '"',
                '<script src="app.js" integrity="sha384-'
                + base64.b64encode(hashlib.sha384(b"js").digest()).decode()
                + '" crossorigin="anonymous"></script>',
                "h1:" + base64.b64encode(_digest("gosum", 1)).decode() + " golang.org/x/text v0.14.0",
            ],
        ),
        (
            "git commit SHA",
            [
                f"commit {hashlib.sha1(b'c1').hexdigest()}",
                f"Fixed in {hashlib.sha1(b'c2').hexdigest()[:12]} (see #418).",
                f"git checkout {hashlib.sha1(b'c3').hexdigest()}",
                f"https://github.com/acme/app/commit/{hashlib.sha1(b'c4').hexdigest()}",
                f'rev = "{hashlib.sha1(b"c5").hexdigest()}"',
            ],
        ),
        (
            "UUID",
            [
                f"request_id: {uuids[0]}",
                f"TENANT_ID={uuids[1]}",
                f'"subscriptionId": "{uuids[2]}"',
                f"Trace {uuids[3].upper()} failed at step 3.",
                f"job_id={uuids[4].replace('-', '')}",
            ],
        ),
        (
            "public key",
            [
                pub + " ana@laptop",
                rsa_pub + " deploy@ci",
                ecdsa + " root@bastion",
                "github.com "
                + pub.split(" ", 1)[0]
                + " AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
                "-----BEGIN PUBLIC KEY-----\n"
                + "\n".join(_pick(r, B64, 64) for _ in range(4))
                + "\n-----END PUBLIC KEY-----",
                "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
                + "\n".join(_pick(r, B64, 64) for _ in range(4))
                + "\n-----END PGP PUBLIC KEY BLOCK-----",
            ],
        ),
        (
            "certificate",
            [
                "-----BEGIN CERTIFICATE-----\n"
                + "\n".join(_pick(r, B64, 64) for _ in range(6))
                + "\n-----END CERTIFICATE-----",
                "-----BEGIN CERTIFICATE REQUEST-----\n"
                + "\n".join(_pick(r, B64, 64) for _ in range(4))
                + "\n-----END CERTIFICATE REQUEST-----",
                "ca_cert: |\n  -----BEGIN CERTIFICATE-----\n  " + _pick(r, B64, 64) + "\n  -----END CERTIFICATE-----",
                "How to make a key: openssl genrsa -out key.pem 2048 (the file starts with -----BEGIN "
                + _PRIV
                + "-----).",
            ],
        ),
        (
            "base64 image",
            [
                f"![logo](data:image/png;base64,{png})",
                f'<img src="data:image/png;base64,{png[:400]}">',
                "background: url(data:image/svg+xml;base64,"
                + base64.b64encode(b"<svg xmlns='x'>" + r.randbytes(200)).decode()
                + ");",
            ],
        ),
        (
            "pagination cursor",
            [
                '"nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA2ZzhrcjBrEgoI' + _pick(r, B64URL, 20) + '"',
                "pageToken=" + _pick(r, B64URL, 40) + "&maxResults=50",
                '"next_cursor": "' + base64.b64encode(b"user:U0" + _pick(r, UPPER_DIGITS, 8).encode()).decode() + '"',
                'endCursor: "'
                + base64.b64encode(b"arrayconnection:" + str(r.randrange(10**6)).encode()).decode()
                + '"',
                "continuationToken: " + _pick(r, B64URL, 48),
                '"sync_token": "' + _pick(r, B64URL, 30) + '"',
                "next_page_token=" + _pick(r, ALNUM, 32),
            ],
        ),
        (
            "public identifiers",
            [
                "STRIPE_PUBLISHABLE_KEY=pk_" + "live_" + _pick(r, ALNUM, 99),
                "Customer cus_" + _pick(r, ALNUM, 14) + " paid invoice in_" + _pick(r, ALNUM, 24) + ".",
                "payment_intent: pi_" + _pick(r, ALNUM, 24),
                "TWILIO_ACCOUNT_SID=AC" + _pick(r, HEX, 32),
                "GOOGLE_CLIENT_ID="
                + _pick(r, DIGITS, 12)
                + "-"
                + _pick(r, LOWER_DIGITS, 32)
                + ".apps.googleusercontent.com",
                "SENTRY_DSN=https://"
                + _pick(r, HEX, 32)
                + "@o"
                + _pick(r, DIGITS, 6)
                + ".ingest.sentry.io/"
                + _pick(r, DIGITS, 7),
                "MAPBOX_TOKEN=pk."
                + _b64_json_part({"u": "acme", "a": "ck" + _pick(r, LOWER_DIGITS, 20)})
                + "."
                + _pick(r, B64URL, 22),
                "Slack channel C0" + _pick(r, UPPER_DIGITS, 9) + ", user U0" + _pick(r, UPPER_DIGITS, 9),
                "arn:aws:iam::" + _pick(r, DIGITS, 12) + ":role/deploy-" + _pick(r, LOWER_DIGITS, 8),
                "instance i-0" + _pick(r, HEX, 16) + " in sg-0" + _pick(r, HEX, 16),
                "RECAPTCHA_SITE_KEY=6Lc" + _pick(r, B64URL, 37),
                "eth address 0x" + _pick(r, HEX, 40) + ", btc bc1q" + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 38),
                "ipfs://bafybei" + _pick(r, "abcdefghijklmnopqrstuvwxyz234567", 52),
                "gpg fingerprint: " + " ".join(_pick(r, HEX.upper(), 4) for _ in range(10)),
                "Pod web-" + _pick(r, LOWER_DIGITS, 10) + "-" + _pick(r, LOWER_DIGITS, 5) + " restarted.",
                '<script src="/static/js/main.' + _pick(r, HEX, 8) + '.chunk.js"></script>',
            ],
        ),
        (
            "version strings",
            [
                "numpy==1.26.4\nrequests==2.32.3\nsqlalchemy>=2.0.30,<2.1",
                "version: 3.12.0-rc.1+build.20240501.abcdef0",
                "Bumped to v2024.10.1-beta.3 (build 7f3e2a1).",
                '"resolved": "https://registry.npmjs.org/react/-/react-18.3.1.tgz",',
            ],
        ),
        (
            "variable references",
            [
                "DB_PASSWORD=${DB_PASSWORD}",
                'password: "{{ vault_db_password }}"',
                "token: ${{ secrets.GITHUB_TOKEN }}",
                'api_key = os.environ["OPENAI_API_KEY"]',
                'export GITHUB_TOKEN="$(gh auth token)"',
                'psql "postgres://app:${PGPASSWORD}@db:5432/app"',
                "REDIS_URL=redis://:$(REDIS_PASSWORD)@cache:6379/0",
                'mysql -u root -p"$MYSQL_ROOT_PASSWORD" shop',
                'curl -u "$JENKINS_USER:$JENKINS_TOKEN" https://jenkins.acme.io/api/json',
                "SECRET_KEY = os.environ['DJANGO_SECRET_KEY']",
            ],
        ),
        (
            "placeholders",
            [
                "OPENAI_API_KEY=your-api-key-here",
                "SLACK_BOT_TOKEN=xoxb-your-bot-token",
                "OPENAI_API_KEY=sk-" + "x" * 48,
                "api_key: <YOUR_API_KEY>",
                "password: ********",
                "DB_PASSWORD=changeme",
                "token: REDACTED",
                "Authorization: Bearer <token>",
                "mysql -u root -p shop   # prompts for the password",
                "curl -u admin https://jenkins.acme.io/api/json   # curl asks for the password",
                "DATABASE_URL=postgresql://postgres:postgres@localhost:5432/app",
                "DATABASE_URL=postgresql://user:password@localhost:5432/app",
                "https://user:pass@example.com/  (a doc example)",
                "SECRET_KEY = 'django-insecure-change-me'",
            ],
        ),
        (
            "prose and config",
            [
                "Rotate the password every 90 days; the token expires after 3600 seconds.",
                "PASSWORD_MIN_LENGTH=12\nTOKEN_TTL=86400\nMAX_TOKENS=4096",
                "password: at least 12 characters, one digit",
                "AWS access key ids begin with AKIA; GitHub tokens look like ghp_ followed by 36 letters.",
                "redis://localhost:6379/0 and mongodb://localhost:27017/test",
                "git@github.com:acme/infra.git and ssh://git@gitlab.acme.io:2222/ops/runbooks.git",
                "password = getpass.getpass('Password: ')",
                "secret_key = settings.SECRET_KEY",
                "token_type: bearer\nexpires_in: 3599",
                "The session_token column is a UUID; see migrations/0042_session_token.py.",
            ],
        ),
        (
            "encrypted or hashed values",
            [
                "$ANSIBLE_VAULT;1.1;AES256\n" + "\n".join(_pick(r, HEX, 80) for _ in range(4)),
                "admin:$2b$12$" + _pick(r, ALNUM + "./", 53),
                "root:$6$" + _pick(r, ALNUM, 16) + "$" + _pick(r, ALNUM + "./", 86) + ":19700:0:99999:7:::",
                "pbkdf2_sha256$600000$" + _pick(r, ALNUM, 22) + "$" + base64.b64encode(_digest("pbkdf2", 0)).decode(),
            ],
        ),
        (
            "references, ids and encrypted values (issue 36)",
            [
                "DJANGO_SECRET_KEY='${DJANGO_SECRET_KEY}'",
                'export SECRET_KEY="$SECRET_KEY"',
                "password: \"{{ lookup('env', 'DB_PW') }}\"",
                "SESSION_SECRET='%(session_secret)s'",
                '{"data": "ENC[AES256_GCM,data:' + _pick(r, B64, 24) + ",iv:" + _pick(r, B64, 43) + '=,type:str]"}',
                "app.secret_key: ENC(" + _pick(r, B64, 44) + ")",
                '{"credsStore": "desktop", "auths": {"ghcr.io": {}}}',
                "STRIPE_PUBLISHABLE_KEY=pk_" + "test_" + _pick(r, ALNUM, 99),
                "SQUARE_APP_ID=sq0idp-" + _pick(r, B64URL, 22),
                "client = redis.Client('cache.internal', 6379)",
                "OKTA_ISSUER=https://acme.okta.com/oauth2/default\nOKTA_CLIENT_ID=0oa" + _pick(r, ALNUM, 17),
                "The password is stored in Vault at secret/data/ci; pass --dry-run 2.1.0-rc1 to test.",
                "Password reset links expire after 30 minutes (PASSWORD_RESET_TIMEOUT=1800).",
                "pass CFLAGS=-O2 -march=native to the build; the passphrase prompt appears once.",
                "checksum: 10c0/" + _pick(r, HEX, 128),
                '"node_modules/left-pad": {"version": "1.3.0", "integrity": "sha1-' + _pick(r, B64, 27) + '="}',
                "bucket url https://acme.s3.amazonaws.com/public/logo.png?versionId=" + _pick(r, B64URL, 32),
                "AZURE_CLIENT_ID=" + str(uuid.UUID(int=r.getrandbits(128), version=4)),
                "secrets:\n  password: ENC[AES256_GCM,data:" + _pick(r, B64, 20) + ",type:str]",
                "encryptedData:\n  password: AgA" + _pick(r, B64, 500),
                "hashed_password: pbkdf2:sha256:600000$" + _pick(r, ALNUM, 16) + "$" + _pick(r, HEX, 64),
                "const map = new Map({ accessToken: 'p"
                + "k.eyJ1Ijoi"
                + _pick(r, B64URL, 40)
                + "."
                + _pick(r, B64URL, 22)
                + "' });",
            ],
        ),
        (
            "random-looking data",
            [
                "color: #1f2937; background: #f9fafb; border-color: #e5e7eb;",
                "font-data: " + base64.b64encode(r.randbytes(300)).decode(),
                "nonce-" + base64.b64encode(r.randbytes(16)).decode(),
                "ULID 01" + _pick(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24),
                "tx hash 0x" + _pick(r, HEX, 64),
                "ssh host key fingerprint SHA256:" + base64.b64encode(_digest("fp", 0)).decode().rstrip("="),
                "yt video https://www.youtube.com/watch?v=" + _pick(r, B64URL, 11) + "&t=42s",
                "short link https://bit.ly/" + _pick(r, ALNUM, 7) + " and https://goo.gl/maps/" + _pick(r, ALNUM, 17),
                "Bundle-Hash: " + _pick(r, HEX, 40) + "\nBuild-Id: " + _pick(r, HEX, 32),
            ],
        ),
    ]


def lookalikes() -> list[Sample]:
    return [Sample(kind, text, "") for kind, texts in _lookalike_kinds() for text in texts]


def corpus() -> list[Sample]:
    return credentials() + lookalikes()
