"""A FOURTH held-out corpus for the secret scanner, written after the third one was measured.

``bench/secrets_heldout.py``, ``secrets_heldout2.py`` and ``secrets_heldout3.py`` have all
been measured and their misses looked at, so none of them is held out any more. This set
was written from the providers' published formats alone, by someone who never opened the
scanner's rules and never ran a scanner on it, so its first measurement says how the rules
generalise. It aims at what users really paste into an agent's memory notes: an AWS key
pair or a GCP service-account JSON, a webhook URL, a ``.env`` line, a kubeconfig, a
``docker login``, a connection string, a shell-history line with ``-p`` on it, a runbook
sentence, a Markdown table, a snippet in Python, JS, Go, Java, C# or PowerShell. The
look-alikes are what sits next to them in the same notes and must stay quiet: encrypted
values, lock-file hashes, digests, public ids, publishable keys, references and
placeholders, labelled documentation examples, public keys and certificates. Same rules as
before: published formats, synthetic values, data only; change a sample only to correct a
misstated format, never to make a rule pass.

Invariants:
- Data only and deterministic (a ``random.Random`` seeded per sample).
- No real credential, and no provider prefix written out whole in this file.
- Every credential sample carries the credential (``secret``); look-alikes carry "".

Measured once, never tuned on (the scanner of commit 77fc266, `validate` of
``/knowledge/notes.md``): 106 of 125 credentials caught (84.8 %), 2 of 97 look-alikes
refused. From then on it is a tuning set, like the three before it.
"""

from __future__ import annotations

import base64
import json
import random
import string
import struct
import uuid
import zlib

from bench.secrets_corpus import Sample

ALNUM = string.ascii_letters + string.digits
LOWER = string.ascii_lowercase
LOWER_DIGITS = string.ascii_lowercase + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
UPPER_HEX = "0123456789ABCDEF"
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
DIGITS = string.digits


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(f"heldout4/{name}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        digits_ok = n < 8 or not (set(alphabet) & set(string.digits)) or any(c.isdigit() for c in out)
        if digits_ok and (not any(c.isalpha() for c in alphabet) or any(c.isalpha() for c in out)):
            return out


def _pw(rng: random.Random, n: int = 14) -> str:
    while True:
        out = _pick(rng, ALNUM + "!#%*?+=-_.@", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(not c.isalnum() for c in out):
            return out


def _shell_pw(rng: random.Random, n: int = 16) -> str:
    """A password that needs no quoting on a shell command line."""
    while True:
        out = _pick(rng, ALNUM + "_-.%+", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(c.islower() for c in out):
            return out


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _b64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode()


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _pct(text: str) -> str:
    return text.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")


def _jwt(rng: random.Random, header: dict[str, object], claims: dict[str, object], sig_len: int = 43) -> str:
    def part(obj: dict[str, object]) -> str:
        return _b64u(json.dumps(obj, separators=(",", ":")).encode())

    return part(header) + "." + part(claims) + "." + _pick(rng, B64URL, sig_len)


def _wrap(body: str, width: int = 64) -> str:
    return "\n".join(body[i : i + width] for i in range(0, len(body), width))


def _ssh_str(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _basic(user: str, secret: str) -> str:
    return base64.b64encode(f"{user}:{secret}".encode()).decode()


# DER openings, so the base64 bodies start the way real ones do.
_RSA_PKCS1 = bytes.fromhex("308204a40201000282010100")
_PKCS8_RSA = bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8") + _RSA_PKCS1
_EC_P256_HEAD = bytes.fromhex("30770201010420")
_EC_P256_MID = bytes.fromhex("a00a06082a8648ce3d030107a144034200") + b"\x04"
_SPKI_RSA = bytes.fromhex("30820122300d06092a864886f70d01010105000382010f003082010a0282010100")
_SPKI_ED25519 = bytes.fromhex("302a300506032b6570032100")

_BEGIN = "-----BEGIN "
_PRIV = "PRIV" + "ATE KEY-----"


def _rsa_body(r: random.Random) -> str:
    return _wrap(base64.b64encode(_RSA_PKCS1 + r.randbytes(1180)).decode())


def _pkcs8_raw(r: random.Random) -> str:
    return base64.b64encode(_PKCS8_RSA + r.randbytes(1180)).decode()


def _ec_body(r: random.Random) -> str:
    return _wrap(base64.b64encode(_EC_P256_HEAD + r.randbytes(32) + _EC_P256_MID + r.randbytes(64)).decode())


def _openssh_rsa_body(r: random.Random) -> str:
    e, n = b"\x01\x00\x01", b"\x00" + r.randbytes(256)
    blob = _ssh_str(b"ssh-rsa") + _ssh_str(e) + _ssh_str(n)
    check = r.randbytes(4)
    priv = check + check + _ssh_str(b"ssh-rsa") + _ssh_str(n) + _ssh_str(e)
    priv += _ssh_str(r.randbytes(256)) + _ssh_str(r.randbytes(128)) + _ssh_str(r.randbytes(128))
    priv += _ssh_str(r.randbytes(128)) + _ssh_str(b"backup@nas")
    priv += bytes(range(1, 1 + (-len(priv)) % 8))
    data = (
        b"openssh-key-v1\x00"
        + _ssh_str(b"none")
        + _ssh_str(b"none")
        + _ssh_str(b"")
        + struct.pack(">I", 1)
        + _ssh_str(blob)
        + _ssh_str(priv)
    )
    return _wrap(base64.b64encode(data).decode(), 70)


def _pgp_private_body(r: random.Random) -> str:
    # an old-format secret-key packet (tag 5) with a two-byte length, then the key material
    data = bytes.fromhex("9503c6") + b"\x04" + r.randbytes(4) + b"\x01" + r.randbytes(960)
    body = base64.b64encode(data).decode()
    crc = base64.b64encode(r.randbytes(3)).decode()
    return _wrap(body) + "\n=" + crc


def _ssh_pub(r: random.Random, algo: bytes, *parts: bytes) -> str:
    return base64.b64encode(_ssh_str(algo) + b"".join(_ssh_str(p) for p in parts)).decode()


def _aws_secret(r: random.Random) -> str:
    return _pick(r, B64, 40)


def _sts_token(r: random.Random) -> str:
    return "FwoGZXIvYXdzE" + _pick(r, B64, 340)


def _gcp_pem_escaped(r: random.Random) -> str:
    """A PKCS#8 body as it sits in a service-account JSON: lines joined by a literal backslash-n."""
    return _wrap(_pkcs8_raw(r)).replace("\n", "\\n")


def _gcp_sa_b64(r: random.Random) -> str:
    pem = _BEGIN + _PRIV + "\n" + _wrap(_pkcs8_raw(r)) + "\n-----END PRIVATE KEY-----\n"
    doc = {
        "type": "service_account",
        "project_id": "acme-analytics",
        "private_key_id": _pick(r, HEX, 40),
        "private_key": pem,
        "client_email": "bq-loader@acme-analytics.iam.gserviceaccount.com",
        "client_id": str(r.randrange(10**20, 10**21)),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    return base64.b64encode(json.dumps(doc, indent=2).encode()).decode()


def _slack_user(r: random.Random) -> str:
    return (
        "xo"
        + "xp-"
        + str(r.randrange(10**10, 10**12))
        + "-"
        + str(r.randrange(10**10, 10**12))
        + "-"
        + str(r.randrange(10**12, 10**13))
        + "-"
        + _pick(r, HEX, 32)
    )


def _slack_bot(r: random.Random) -> str:
    return (
        "xo"
        + "xb-"
        + str(r.randrange(10**10, 10**12))
        + "-"
        + str(r.randrange(10**12, 10**13))
        + "-"
        + _pick(r, ALNUM, 24)
    )


def _slack_hook(r: random.Random) -> str:
    return "T" + _pick(r, UPPER_DIGITS, 10) + "/B" + _pick(r, UPPER_DIGITS, 10) + "/" + _pick(r, ALNUM, 24)


def _teams_hook(r: random.Random) -> str:
    return (
        _uuid(r)
        + "@"
        + _uuid(r)
        + "/IncomingWebhook/"
        + _pick(r, HEX, 32)
        + "/"
        + _uuid(r)
        + "/V2"
        + _pick(r, B64URL, 43)
    )


def _mapbox_secret(r: random.Random) -> str:
    claims = {"u": "acme-maps", "a": _pick(r, LOWER_DIGITS, 25)}
    return "s" + "k." + _b64u(json.dumps(claims, separators=(",", ":")).encode()) + "." + _pick(r, B64URL, 22)


def _artifactory_ref(r: random.Random) -> str:
    raw = f"reftkn:01:{r.randrange(10**9, 10**10)}:{_pick(r, ALNUM, 43)}"
    return base64.b64encode(raw.encode()).decode().rstrip("=")


def _intercom(r: random.Random) -> str:
    return base64.b64encode(f"tok:{_uuid(r)}:1:0".encode()).decode()


def _elastic_api_key(r: random.Random) -> str:
    return base64.b64encode(f"{_pick(r, B64URL, 20)}:{_pick(r, B64URL, 22)}".encode()).decode()


def _docker_auth(r: random.Random) -> str:
    return _basic("acmebuild", "dckr" + "_pat_" + _pick(r, B64URL, 27))


# Public parts that sit next to a credential (ids, account numbers): not the secret.
_IDS = _rng("public ids")
_AWS_KEY_ID = "AK" + "IA" + _pick(_IDS, UPPER_DIGITS, 16)
_AWS_KEY_ID2 = "AK" + "IA" + _pick(_IDS, UPPER_DIGITS, 16)
_AWS_TMP_ID = "AS" + "IA" + _pick(_IDS, UPPER_DIGITS, 16)
_AWS_TMP_ID2 = "AS" + "IA" + _pick(_IDS, UPPER_DIGITS, 16)
_AWS_ACCOUNT = str(_IDS.randrange(10**11, 10**12))
_ALI_KEY_ID = "LT" + "AI5t" + _pick(_IDS, ALNUM, 18)
_TWILIO_SID = "A" + "C" + _pick(_IDS, HEX, 32)
_TWILIO_KEY_SID = "S" + "K" + _pick(_IDS, HEX, 32)
_AZ_APP = _uuid(_IDS)
_AZ_TENANT = _uuid(_IDS)
_GOOGLE_CLIENT = (
    str(_IDS.randrange(10**11, 10**12)) + "-" + _pick(_IDS, LOWER_DIGITS, 32) + ".apps.googleusercontent.com"
)
_RZP_KEY_ID = "rzp" + "_live_" + _pick(_IDS, ALNUM, 14)
_VONAGE_KEY = _pick(_IDS, HEX, 8)
_SENTRY_PUB = _pick(_IDS, HEX, 32)
_ALGOLIA_APP = _pick(_IDS, UPPER_DIGITS, 10)
_X_CONSUMER = _pick(_IDS, ALNUM, 25)
_AUTH0_CLIENT = _pick(_IDS, ALNUM, 32)
_OKTA_CLIENT = "0o" + "a" + _pick(_IDS, ALNUM, 17)
_OCI_USER = "ocid1.user.oc1.." + _pick(_IDS, LOWER_DIGITS, 60)
_DISCORD_HOOK_ID = str(_IDS.randrange(10**18, 10**19))
_KUBEADM_CA = _pick(_IDS, HEX, 64)
_NR_ACCOUNT = str(_IDS.randrange(10**6, 10**7))


# (kind, template with {s}, how to build the secret)
_CREDENTIALS: list[tuple[str, str, object]] = [
    # --- cloud ---
    (
        "cloud: AWS key pair in a Markdown note",
        "## prod deploy user\n\n- Access key ID: `"
        + _AWS_KEY_ID
        + "`\n- Secret access key: `{s}`\n- Region: us-west-2",
        _aws_secret,
    ),
    (
        "cloud: AWS key pair as PowerShell env",
        '$env:AWS_ACCESS_KEY_ID = "' + _AWS_KEY_ID2 + '"\n$env:AWS_SECRET_ACCESS_KEY = "{s}"',
        _aws_secret,
    ),
    (
        "cloud: AWS secret in boto3",
        's3 = boto3.client("s3", aws_access_key_id="' + _AWS_KEY_ID + '", aws_secret_access_key="{s}")',
        _aws_secret,
    ),
    (
        "cloud: AWS STS assume-role JSON output",
        '{\n    "Credentials": {\n        "AccessKeyId": "' + _AWS_TMP_ID + '",\n'
        '        "SecretAccessKey": "' + _pick(_IDS, B64, 40) + '",\n'
        '        "SessionToken": "{s}",\n        "Expiration": "2025-06-01T13:00:00+00:00"\n    }\n}',
        _sts_token,
    ),
    (
        "cloud: AWS session token in credentials file",
        "[ops-mfa]\naws_access_key_id = "
        + _AWS_TMP_ID2
        + "\naws_secret_access_key = "
        + _pick(_IDS, B64, 40)
        + "\naws_session_token = {s}",
        lambda r: "IQoJb3JpZ2luX2Vj" + _pick(r, B64, 700),
    ),
    (
        "cloud: GCP service-account JSON private_key",
        '{\n  "type": "service_account",\n  "project_id": "acme-prod",\n  "private_key_id": "'
        + _pick(_IDS, HEX, 40)
        + '",\n  "private_key": "'
        + _BEGIN
        + _PRIV
        + '\\n{s}\\n-----END PRIVATE KEY-----\\n",\n'
        '  "client_email": "deployer@acme-prod.iam.gserviceaccount.com"\n}',
        _gcp_pem_escaped,
    ),
    (
        "cloud: BigQuery service-account key base64 in CI env",
        "GCP_SA_KEY_B64={s}",
        _gcp_sa_b64,
    ),
    (
        "cloud: Azure storage connection string in .env",
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmemedia;AccountKey={s};"
        "EndpointSuffix=core.windows.net",
        lambda r: _b64(r, 64),
    ),
    (
        "cloud: Azure storage key on az CLI",
        "az storage blob upload --account-name acmelogs --account-key '{s}' -c raw -f app.log -n app.log",
        lambda r: _b64(r, 64),
    ),
    (
        "cloud: Azure Event Hubs connection string in Java",
        'String conn = "Endpoint=sb://acme-telemetry.servicebus.windows.net/;SharedAccessKeyName=send;'
        'SharedAccessKey={s};EntityPath=clicks";',
        lambda r: _b64(r, 32),
    ),
    (
        "cloud: Azure Service Bus connection string in local.settings.json",
        '{\n  "Values": {\n    "ServiceBusConnection": "Endpoint=sb://acme-jobs.servicebus.windows.net/;'
        'SharedAccessKeyName=listen;SharedAccessKey={s}"\n  }\n}',
        lambda r: _b64(r, 32),
    ),
    (
        "cloud: Alibaba Cloud AccessKey secret on aliyun CLI",
        "aliyun configure set --mode AK --access-key-id "
        + _ALI_KEY_ID
        + " --access-key-secret {s} --region cn-hangzhou",
        lambda r: _pick(r, ALNUM, 30),
    ),
    (
        "cloud: IBM Cloud API key on the CLI",
        "ibmcloud login --apikey {s} -r eu-de -g default",
        lambda r: _pick(r, B64URL, 44),
    ),
    (
        "cloud: Oracle OCI auth token for OCIR",
        "docker login fra.ocir.io -u 'acmetenancy/oracleidentitycloudservice/ops@acme.io' -p '{s}'",
        lambda r: _pick(r, ALNUM + "()<>;:.{}[]+-_#", 20),
    ),
    (
        "cloud: Oracle OCI key passphrase in config",
        "[DEFAULT]\nuser="
        + _OCI_USER
        + "\nfingerprint="
        + ":".join(_pick(_IDS, HEX, 2) for _ in range(16))
        + "\nkey_file=~/.oci/oci_api_key.pem\npass_phrase={s}\nregion=eu-frankfurt-1",
        _pw,
    ),
    # --- signed URLs ---
    (
        "signed: S3 presigned URL with a session token",
        "https://acme-exports.s3.us-west-2.amazonaws.com/q3.parquet?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=" + _AWS_TMP_ID + "%2F20250601%2Fus-west-2%2Fs3%2Faws4_request&X-Amz-Date=20250601T120000Z"
        "&X-Amz-Expires=604800&X-Amz-Security-Token={s}&X-Amz-SignedHeaders=host&X-Amz-Signature="
        + _pick(_IDS, HEX, 64),
        lambda r: _pct("IQoJb3JpZ2luX2Vj" + _pick(r, B64, 600)),
    ),
    (
        "signed: Azure SAS token in a PowerShell azcopy",
        'azcopy copy ".\\backup.bak" "https://acmesql.blob.core.windows.net/bak/backup.bak?sv=2023-01-03&ss=b&srt=co'
        '&sp=rwdlac&se=2026-01-01T00:00:00Z&st=2025-06-01T00:00:00Z&spr=https&sig={s}"',
        lambda r: _pct(_b64(r, 32)),
    ),
    # --- chat and social ---
    ("chat: Slack bot token in .env", "SLACK_BOT_TOKEN={s}", _slack_bot),
    (
        "chat: Slack user token in a curl",
        'curl -H "Authorization: Bearer {s}" https://slack.com/api/conversations.history?channel=C0123ABCD',
        _slack_user,
    ),
    (
        "chat: Slack incoming webhook in a Python alert",
        'requests.post("https://hooks.slack.com/services/{s}", json={"text": "deploy failed"})',
        _slack_hook,
    ),
    (
        "chat: Discord webhook in a Markdown note",
        "Alerts go to #ops via https://discord.com/api/webhooks/" + _DISCORD_HOOK_ID + "/{s} (don't share)",
        lambda r: _pick(r, B64URL, 68),
    ),
    (
        "chat: Telegram bot token in Go",
        'bot, err := tgbotapi.NewBotAPI("{s}")',
        lambda r: str(r.randrange(10**9, 10**10)) + ":AA" + _pick(r, B64URL, 33),
    ),
    (
        "chat: Teams incoming webhook in PowerShell",
        "Invoke-RestMethod -Method Post -ContentType 'application/json' -Body $card "
        "-Uri 'https://acme.webhook.office.com/webhookb2/{s}'",
        _teams_hook,
    ),
    (
        "social: X API key secret in YAML",
        "twitter:\n  consumer_key: " + _X_CONSUMER + "\n  consumer_secret: {s}",
        lambda r: _pick(r, ALNUM, 50),
    ),
    (
        "social: X access token secret in tweepy",
        'auth = tweepy.OAuth1UserHandler("' + _X_CONSUMER + '", CONSUMER_SECRET, ACCESS_TOKEN, "{s}")',
        lambda r: _pick(r, ALNUM, 45),
    ),
    (
        "social: Facebook page token in JS fetch",
        "await fetch(`https://graph.facebook.com/v19.0/${PAGE_ID}/feed?access_token={s}`, { method: 'POST' });",
        lambda r: "EA" + "A" + r.choice("BGIJ") + _pick(r, ALNUM, 190),
    ),
    # --- payments and commerce ---
    (
        "payment: Stripe secret key in C#",
        'StripeConfiguration.ApiKey = "{s}";',
        lambda r: "sk" + "_live_51" + _pick(r, ALNUM, 97),
    ),
    (
        "payment: Stripe restricted key in .env",
        "STRIPE_RESTRICTED_KEY={s}",
        lambda r: "rk" + "_live_51" + _pick(r, ALNUM, 97),
    ),
    (
        "payment: Stripe secret key in a chat message",
        "ok here's the live key for the billing job: {s} — rotate it after the migration",
        lambda r: "sk" + "_live_" + _pick(r, ALNUM, 24),
    ),
    (
        "payment: PayPal client secret in application.yml",
        "paypal:\n  mode: live\n  client-id: A" + _pick(_IDS, B64URL, 79) + "\n  client-secret: {s}",
        lambda r: "E" + _pick(r, B64URL, 79),
    ),
    (
        "payment: Razorpay key secret in Node",
        "const rzp = new Razorpay({ key_id: '" + _RZP_KEY_ID + "', key_secret: '{s}' });",
        lambda r: _pick(r, ALNUM, 24),
    ),
    (
        "payment: Paystack secret key in a curl",
        'curl https://api.paystack.co/transaction/verify/ref_881 -H "Authorization: Bearer {s}"',
        lambda r: "sk" + "_live_" + _pick(r, HEX, 40),
    ),
    (
        "payment: Square production token in Python",
        'client = Client(access_token="{s}", environment="production")',
        lambda r: "EA" + "AA" + _pick(r, B64URL, 60),
    ),
    (
        "commerce: Shopify admin token in TOML",
        '[shopify]\nshop = "acme-store.myshopify.com"\nadmin_token = "{s}"',
        lambda r: "shp" + "at_" + _pick(r, HEX, 32),
    ),
    (
        "commerce: Shopify custom-app token in GraphQL curl",
        "curl -X POST https://acme-store.myshopify.com/admin/api/2024-10/graphql.json "
        "-H 'Content-Type: application/json' -H 'X-Shopify-Access-Token: {s}' -d @query.json",
        lambda r: "shp" + "ca_" + _pick(r, HEX, 32),
    ),
    # --- messaging and email ---
    (
        "messaging: Twilio auth token in Node",
        "const client = require('twilio')('" + _TWILIO_SID + "', '{s}');",
        lambda r: _pick(r, HEX, 32),
    ),
    (
        "messaging: Twilio API key secret in C#",
        'TwilioClient.Init("' + _TWILIO_KEY_SID + '", "{s}", "' + _TWILIO_SID + '");',
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "messaging: Vonage API secret in .env",
        "VONAGE_API_KEY=" + _VONAGE_KEY + "\nVONAGE_API_SECRET={s}",
        lambda r: _pick(r, ALNUM, 16),
    ),
    (
        "messaging: MessageBird live key in a header",
        "curl https://rest.messagebird.com/messages -H 'Authorization: AccessKey {s}' -d recipients=31612345678",
        lambda r: _pick(r, ALNUM, 25),
    ),
    (
        "email: SendGrid key in Django settings",
        'EMAIL_HOST = "smtp.sendgrid.net"\nEMAIL_HOST_USER = "apikey"\nEMAIL_HOST_PASSWORD = "{s}"',
        lambda r: "S" + "G." + _pick(r, B64URL, 22) + "." + _pick(r, B64URL, 43),
    ),
    (
        "email: Mailgun private key in Go",
        'mg := mailgun.NewMailgun("mg.acme.io", "{s}")',
        lambda r: "ke" + "y-" + _pick(r, HEX, 32),
    ),
    (
        "email: Postmark server token in Rails config",
        "config.action_mailer.postmark_settings = { api_token: '{s}' }",
        _uuid,
    ),
    (
        "email: SparkPost key in .env",
        "SPARKPOST_API_KEY={s}",
        lambda r: _pick(r, HEX, 40),
    ),
    (
        "email: Brevo API key in PHP",
        "$config = Configuration::getDefaultConfiguration()->setApiKey('api-key', '{s}');",
        lambda r: "xkey" + "sib-" + _pick(r, HEX, 64) + "-" + _pick(r, ALNUM, 16),
    ),
    (
        "email: Brevo SMTP key in msmtprc",
        "account brevo\nhost smtp-relay.brevo.com\nport 587\nuser ops@acme.io\npassword {s}",
        lambda r: "xsmtp" + "sib-" + _pick(r, HEX, 64) + "-" + _pick(r, ALNUM, 16),
    ),
    # --- identity ---
    (
        "identity: Okta API token in a header",
        "curl https://acme.okta.com/api/v1/users?limit=25 -H 'Authorization: SSWS {s}'",
        lambda r: "00" + _pick(r, B64URL, 40),
    ),
    (
        "identity: Okta client secret in .env",
        "OKTA_CLIENT_ID=" + _OKTA_CLIENT + "\nOKTA_CLIENT_SECRET={s}",
        lambda r: _pick(r, B64URL, 64),
    ),
    (
        "identity: Auth0 client secret in Python",
        'auth0 = GetToken("acme.us.auth0.com", "' + _AUTH0_CLIENT + '", client_secret="{s}")',
        lambda r: _pick(r, B64URL, 64),
    ),
    (
        "identity: Azure AD client secret in appsettings.json",
        '{\n  "AzureAd": {\n    "TenantId": "' + _AZ_TENANT + '",\n    "ClientId": "' + _AZ_APP + '",\n'
        '    "ClientSecret": "{s}"\n  }\n}',
        lambda r: _pick(r, ALNUM, 3) + "8Q~" + _pick(r, ALNUM + "_~.-", 34),
    ),
    (
        "identity: Google OAuth client secret in client_secret.json",
        '{"web": {"client_id": "' + _GOOGLE_CLIENT + '", "project_id": "acme-web", "client_secret": "{s}", '
        '"redirect_uris": ["https://app.acme.io/oauth/callback"]}}',
        lambda r: "GOC" + "SPX-" + _pick(r, B64URL, 28),
    ),
    (
        "identity: Google OAuth client secret in a note",
        "Google login for the staging app: client id " + _GOOGLE_CLIENT + ", secret {s}",
        lambda r: "GOC" + "SPX-" + _pick(r, B64URL, 28),
    ),
    ("identity: JWT signing secret in .env", "JWT_SECRET={s}", lambda r: _pick(r, HEX, 64)),
    (
        "identity: JWT signing secret in Express",
        "app.use(expressjwt({ secret: '{s}', algorithms: ['HS256'] }));",
        lambda r: _b64(r, 48),
    ),
    # --- secret managers and CI ---
    (
        "vault: Vault token export",
        "export VAULT_ADDR=https://vault.acme.io:8200\nexport VAULT_TOKEN={s}",
        lambda r: "hv" + "s." + _pick(r, B64URL, 91),
    ),
    (
        "vault: Vault batch token in Go",
        'client.SetToken("{s}")',
        lambda r: "hv" + "b." + _pick(r, B64URL, 138),
    ),
    (
        "vault: Doppler service token in Dockerfile build arg",
        "docker build --build-arg DOPPLER_TOKEN={s} -t acme/api .",
        lambda r: "dp" + ".st.prd." + _pick(r, ALNUM, 40),
    ),
    (
        "ci: CircleCI personal token in a curl",
        "curl -H 'Circle-Token: {s}' https://circleci.com/api/v2/me",
        lambda r: "CCI" + "PAT_" + _pick(r, ALNUM, 22) + "_" + _pick(r, HEX, 40),
    ),
    (
        "ci: Travis CI API token in a curl",
        'curl -H "Travis-API-Version: 3" -H "Authorization: token {s}" https://api.travis-ci.com/user',
        lambda r: _pick(r, ALNUM, 22),
    ),
    (
        "ci: GitLab token in .gitlab-ci.yml variables",
        "variables:\n  GIT_DEPTH: 10\n  GITLAB_TOKEN: {s}\nrelease:\n  script: [semantic-release]",
        lambda r: "gl" + "pat-" + _pick(r, B64URL, 20),
    ),
    (
        "ci: secrets dumped by a debug step in GitHub Actions",
        'Run echo \'${{ toJSON(secrets) }}\'\n{\n  "github_token": "***",\n  "NPM_TOKEN": "{s}"\n}',
        lambda r: "np" + "m_" + _pick(r, ALNUM, 36),
    ),
    (
        "ci: GitHub classic PAT in a workflow env",
        "jobs:\n  release:\n    runs-on: ubuntu-latest\n    env:\n      GH_TOKEN: {s}",
        lambda r: "gh" + "p_" + _pick(r, ALNUM, 36),
    ),
    (
        "ci: Jenkins API token in a curl",
        "curl -X POST -u deploy:{s} https://jenkins.acme.io/job/api-release/buildWithParameters?TAG=v2.4.0",
        lambda r: "11" + _pick(r, HEX, 32),
    ),
    (
        "ci: Bitbucket app password in a git URL",
        "git clone https://acme-ci:{s}@bitbucket.org/acme/payments.git",
        lambda r: "AT" + "BB" + _pick(r, ALNUM, 32),
    ),
    # --- registries and clusters ---
    (
        "registry: docker config.json auths",
        '{\n  "auths": {\n    "https://index.docker.io/v1/": {\n      "auth": "{s}"\n    }\n  }\n}',
        _docker_auth,
    ),
    (
        "cluster: kubeconfig with a Rancher token",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: edge\n  cluster:\n    server: https://rancher.acme.io/k8s/clusters/"
        "c-m-7xk2p\nusers:\n- name: edge\n  user:\n    token: {s}",
        lambda r: "kubeconfig-user-" + _pick(r, LOWER_DIGITS, 5) + ":" + _pick(r, LOWER_DIGITS, 54),
    ),
    (
        "cluster: kubeadm join with a bootstrap token",
        "kubeadm join 10.0.0.10:6443 --token {s} --discovery-token-ca-cert-hash sha256:" + _KUBEADM_CA,
        lambda r: _pick(r, LOWER_DIGITS, 6) + "." + _pick(r, LOWER_DIGITS, 16),
    ),
    (
        "registry: Helm repo password on the command line",
        "helm repo add acme https://charts.acme.io --username ci-bot --password {s}",
        _shell_pw,
    ),
    (
        "registry: Artifactory reference token in .npmrc",
        "registry=https://acme.jfrog.io/artifactory/api/npm/npm/\n"
        "//acme.jfrog.io/artifactory/api/npm/npm/:_authToken={s}",
        _artifactory_ref,
    ),
    (
        "registry: Artifactory API key in a curl",
        "curl -H 'X-JFrog-Art-Api: {s}' -T app.jar https://acme.jfrog.io/artifactory/libs-release/app.jar",
        lambda r: "AK" + "Cp8" + _pick(r, ALNUM, 70),
    ),
    (
        "registry: Nexus password in Maven settings.xml",
        "<servers>\n  <server>\n    <id>nexus-releases</id>\n    <username>deployment</username>\n"
        "    <password>{s}</password>\n  </server>\n</servers>",
        _pw,
    ),
    # --- databases ---
    (
        "db: Postgres URL in Prisma .env",
        'DATABASE_URL="postgresql://app_user:{s}@db.acme.internal:5432/app?schema=public"',
        lambda r: _pick(r, ALNUM, 28),
    ),
    (
        "db: MySQL DSN in Go",
        'db, err := sql.Open("mysql", "shop:{s}@tcp(10.0.4.12:3306)/shop?parseTime=true")',
        lambda r: _pick(r, ALNUM + "_-", 20),
    ),
    (
        "db: MongoDB URI in application.properties",
        "spring.data.mongodb.uri=mongodb://reporting:{s}@mongo-0.acme.internal:27017,mongo-1.acme.internal:27017/"
        "reports?replicaSet=rs0&authSource=admin",
        lambda r: _pick(r, ALNUM, 24),
    ),
    (
        "db: Redis TLS URL in .env",
        "REDIS_URL=rediss://default:{s}@redis-12345.c1.eu-west-1-2.ec2.cloud.redislabs.com:12345",
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "db: Elasticsearch URL with password",
        "ELASTICSEARCH_URL=https://elastic:{s}@acme-logs.es.eu-west-1.aws.found.io:9243",
        lambda r: _pick(r, ALNUM, 24),
    ),
    (
        "db: Elasticsearch API key header",
        "curl -H 'Authorization: ApiKey {s}' https://es.acme.internal:9200/_cat/indices",
        _elastic_api_key,
    ),
    (
        "db: ClickHouse URL in Python",
        'client = clickhouse_connect.get_client(dsn="clickhouse://default:{s}@ch.acme.cloud:8443/events")',
        lambda r: _pick(r, ALNUM + "_~", 22),
    ),
    (
        "db: Snowflake password in a TOML connection file",
        '[connections.etl]\naccount = "acme-xy12345"\nuser = "LOADER"\npassword = "{s}"\nwarehouse = "LOAD_WH"',
        _pw,
    ),
    # --- observability ---
    (
        "obs: Datadog API key in docker run",
        "docker run -d -e DD_API_KEY={s} -e DD_SITE=datadoghq.com gcr.io/datadoghq/agent:7",
        lambda r: _pick(r, HEX, 32),
    ),
    (
        "obs: Datadog application key in Python",
        'configuration.api_key["appKeyAuth"] = "{s}"',
        lambda r: _pick(r, HEX, 40),
    ),
    (
        "obs: New Relic user key in Terraform",
        'provider "newrelic" {\n  account_id = ' + _NR_ACCOUNT + '\n  api_key    = "{s}"\n  region     = "EU"\n}',
        lambda r: "NR" + "AK-" + _pick(r, UPPER_DIGITS, 27),
    ),
    (
        "obs: Sentry DSN with the secret part",
        "SENTRY_DSN=https://" + _SENTRY_PUB + ":{s}@o123456.ingest.sentry.io/4504123",
        lambda r: _pick(r, HEX, 32),
    ),
    (
        "obs: Honeycomb key in OTEL headers",
        'OTEL_EXPORTER_OTLP_HEADERS="x-honeycomb-team={s}"',
        lambda r: _pick(r, ALNUM, 22),
    ),
    (
        "obs: Grafana service account token in a curl",
        'curl -H "Authorization: Bearer {s}" https://acme.grafana.net/api/dashboards/uid/api-latency',
        lambda r: "gl" + "sa_" + _pick(r, ALNUM, 32) + "_" + _pick(r, HEX, 8),
    ),
    # --- model providers ---
    (
        "model: Anthropic key in TypeScript",
        "const anthropic = new Anthropic({ apiKey: '{s}' });",
        lambda r: "sk" + "-ant-api03-" + _pick(r, B64URL, 93) + "AA",
    ),
    (
        "model: OpenAI key in a chat sentence",
        "use my openai key for now: {s} (it's on the team plan)",
        lambda r: "sk" + "-proj-" + _pick(r, B64URL, 156),
    ),
    (
        "model: Azure OpenAI key in C#",
        'var client = new AzureOpenAIClient(new Uri("https://acme-eastus.openai.azure.com/"), '
        'new AzureKeyCredential("{s}"));',
        lambda r: _pick(r, HEX, 32),
    ),
    (
        "model: Google AI Studio key in Python",
        'genai.configure(api_key="{s}")',
        lambda r: "AI" + "za" + "Sy" + _pick(r, B64URL, 33),
    ),
    (
        "model: Groq key in .env",
        "GROQ_API_KEY={s}",
        lambda r: "gs" + "k_" + _pick(r, ALNUM, 52),
    ),
    (
        "model: Mistral key in a curl",
        'curl https://api.mistral.ai/v1/models -H "Authorization: Bearer {s}"',
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "model: Cohere key in Python",
        'co = cohere.ClientV2(api_key="{s}")',
        lambda r: _pick(r, ALNUM, 40),
    ),
    (
        "model: Hugging Face token in huggingface-cli",
        "huggingface-cli login --token {s} --add-to-git-credential",
        lambda r: "h" + "f_" + _pick(r, ALNUM, 34),
    ),
    (
        "model: Replicate token in a curl",
        "curl -s -H 'Authorization: Bearer {s}' https://api.replicate.com/v1/account",
        lambda r: "r" + "8_" + _pick(r, ALNUM, 37),
    ),
    (
        "model: Together key in Python",
        'client = Together(api_key="{s}")',
        lambda r: _pick(r, HEX, 64),
    ),
    (
        "model: OpenRouter key in YAML",
        "providers:\n  openrouter:\n    base_url: https://openrouter.ai/api/v1\n    api_key: {s}",
        lambda r: "sk" + "-or-v1-" + _pick(r, HEX, 64),
    ),
    (
        "model: DeepSeek key in JS",
        "const ds = new OpenAI({ baseURL: 'https://api.deepseek.com', apiKey: '{s}' });",
        lambda r: "s" + "k-" + _pick(r, HEX, 32),
    ),
    (
        "model: Voyage key export",
        "export VOYAGE_API_KEY={s}",
        lambda r: "p" + "a-" + _pick(r, B64URL, 43),
    ),
    (
        "model: Pinecone key in Python",
        'pc = Pinecone(api_key="{s}")',
        lambda r: "pc" + "sk_" + _pick(r, ALNUM, 5) + "_" + _pick(r, ALNUM, 63),
    ),
    (
        "model: Weaviate Cloud key in Python",
        'client = weaviate.connect_to_weaviate_cloud(cluster_url=URL, auth_credentials=Auth.api_key("{s}"))',
        lambda r: _pick(r, ALNUM, 40),
    ),
    # --- SaaS ---
    (
        "saas: Atlassian API token in .netrc",
        "machine acme.atlassian.net\n  login ops@acme.io\n  password {s}",
        lambda r: "ATA" + "TT3xFfGF0" + _pick(r, B64URL, 171) + "=" + _pick(r, UPPER_HEX, 8),
    ),
    (
        "saas: Asana PAT in a curl",
        "curl https://app.asana.com/api/1.0/users/me -H 'Authorization: Bearer {s}'",
        lambda r: (
            "2/" + str(r.randrange(10**15, 10**16)) + "/" + str(r.randrange(10**15, 10**16)) + ":" + _pick(r, HEX, 32)
        ),
    ),
    (
        "saas: Trello token in a URL",
        "https://api.trello.com/1/members/me/boards?key=" + _pick(_IDS, HEX, 32) + "&token={s}",
        lambda r: "AT" + "TA" + _pick(r, HEX, 64) + _pick(r, UPPER_HEX, 8),
    ),
    (
        "saas: Zendesk API token in curl -u",
        "curl https://acme.zendesk.com/api/v2/tickets.json -u support@acme.io/token:{s}",
        lambda r: _pick(r, ALNUM, 40),
    ),
    (
        "saas: Intercom access token in Ruby",
        "intercom = Intercom::Client.new(token: '{s}')",
        _intercom,
    ),
    (
        "saas: Freshdesk key in a curl",
        "curl -u {s}:X https://acme.freshdesk.com/api/v2/tickets",
        lambda r: _pick(r, ALNUM, 20),
    ),
    (
        "saas: Algolia admin key in a Node indexer",
        "const client = algoliasearch('" + _ALGOLIA_APP + "', '{s}'); // admin key, server side only",
        lambda r: _pick(r, HEX, 32),
    ),
    ("saas: Mapbox secret token in .env", "MAPBOX_DOWNLOADS_TOKEN={s}", _mapbox_secret),
    (
        "saas: Segment write key in a server-side source",
        "analytics.write_key = '{s}'  # backend source, not the browser one",
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "saas: Mixpanel service account secret",
        "MIXPANEL_SERVICE_ACCOUNT=etl-export.7f1a2c.mp-service-account\nMIXPANEL_SERVICE_SECRET={s}",
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "saas: Amplitude secret key in the export API",
        "curl -u "
        + _pick(_IDS, HEX, 32)
        + ":{s} 'https://amplitude.com/api/2/export?start=20250601T00&end=20250602T00'",
        lambda r: _pick(r, HEX, 32),
    ),
    # --- private keys ---
    (
        "key: OpenSSH RSA private key in a note",
        "backup box key (id_rsa):\n" + _BEGIN + "OPENSSH " + _PRIV + "\n{s}\n-----END OPENSSH PRIVATE KEY-----",
        _openssh_rsa_body,
    ),
    (
        "key: PGP private key block",
        _BEGIN + "PGP " + "PRIV" + "ATE KEY BLOCK-----\n\n{s}\n-----END PGP PRIVATE KEY BLOCK-----",
        _pgp_private_body,
    ),
    (
        "key: EC private key in a Go raw string",
        "const signingKey = `" + _BEGIN + "EC " + _PRIV + "\n{s}\n-----END EC PRIVATE KEY-----`",
        _ec_body,
    ),
    (
        "key: RSA private key in a YAML block",
        "tls:\n  key: |\n    " + _BEGIN + "RSA " + _PRIV + "\n{s}\n    -----END RSA PRIVATE KEY-----",
        lambda r: "\n".join("    " + line for line in _rsa_body(r).split("\n")),
    ),
    # --- passwords in prose, runbooks, tables, YAML and shell history ---
    (
        "shell: mysql -p in shell history",
        "  512  mysql -u root -p{s} -h 127.0.0.1 shop < dump.sql",
        _shell_pw,
    ),
    (
        "shell: sshpass in a runbook",
        "To reach the old NAS: `sshpass -p '{s}' ssh admin@10.0.8.4`",
        _pw,
    ),
    (
        "shell: redis-cli -a in history",
        "redis-cli -h cache-01 -a {s} --no-auth-warning FLUSHDB",
        _shell_pw,
    ),
    (
        "shell: PowerShell plaintext SecureString",
        '$pw = ConvertTo-SecureString "{s}" -AsPlainText -Force\n'
        "$cred = New-Object System.Management.Automation.PSCredential('ACME\\svc_backup', $pw)",
        _pw,
    ),
    (
        "shell: net use with a password",
        "net use Z: \\\\fs01\\finance /user:ACME\\jdoe {s} /persistent:yes",
        _shell_pw,
    ),
    (
        "yaml: Ansible inventory password",
        "all:\n  hosts:\n    legacy-01:\n      ansible_host: 10.0.7.3\n      ansible_user: root\n"
        "      ansible_password: {s}",
        _pw,
    ),
    (
        "yaml: Spring datasource password",
        "spring:\n  datasource:\n    url: jdbc:postgresql://db:5432/orders\n    username: orders\n    password: {s}",
        _pw,
    ),
    (
        "prose: Markdown table of router logins",
        "| device | IP | login | password |\n|---|---|---|---|\n| core switch | 10.0.0.2 | admin | {s} |",
        _pw,
    ),
    (
        "prose: runbook sentence",
        "If the VPN concentrator reboots, the local fallback account is netops with password {s}.",
        _pw,
    ),
    ("prose: chat message", "btw grafana admin pw got reset to {s} lol", _pw),
    (
        "prose: memory note about a user",
        "User's home NAS: Synology at 192.168.1.20, login 'dana', password is {s}",
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
    sha = lambda: _pick(r, HEX, 40)  # noqa: E731 - data helper
    digest = lambda: "sha256:" + _pick(r, HEX, 64)  # noqa: E731 - data helper
    mapbox_pub = (
        "p"
        + "k."
        + _b64u(json.dumps({"u": "acme-maps", "a": _pick(r, LOWER_DIGITS, 25)}, separators=(",", ":")).encode())
        + "."
        + _pick(r, B64URL, 22)
    )
    return [
        # --- encrypted values ---
        (
            "encrypted: sops YAML",
            "db:\n  password: ENC[AES256_GCM,data:"
            + b64(20)
            + ",iv:"
            + b64(32)
            + ",tag:"
            + b64(16)
            + ",type:str]\nsops:\n  kms:\n    - arn: arn:aws:kms:us-east-1:"
            + str(r.randrange(10**11, 10**12))
            + ":key/"
            + _uuid(r)
            + "\n      enc: AQICAHh"
            + _pick(r, B64, 180)
            + "==",
        ),
        (
            "encrypted: ansible-vault inline variable",
            "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n"
            + "\n".join("  " + _pick(r, HEX, 80) for _ in range(5)),
        ),
        (
            "encrypted: age file with recipient",
            "# encrypted to age1"
            + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)
            + "\n-----BEGIN AGE ENCRYPTED FILE-----\n"
            + _wrap("YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSB" + b64(150))
            + "\n-----END AGE ENCRYPTED FILE-----",
        ),
        (
            "encrypted: KMS encrypt output",
            '{\n    "CiphertextBlob": "AQICAHh'
            + _pick(r, B64, 220)
            + '==",\n    "KeyId": "arn:aws:kms:eu-west-1:'
            + str(r.randrange(10**11, 10**12))
            + ":key/"
            + _uuid(r)
            + '",\n    "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"\n}',
        ),
        (
            "encrypted: EJSON file",
            '{\n  "_public_key": "'
            + _pick(r, HEX, 64)
            + '",\n  "stripe_secret": "EJ[1:'
            + b64(32)
            + ":"
            + b64(24)
            + ":"
            + b64(48)
            + ']"\n}',
        ),
        ("encrypted: Jasypt property", "spring.datasource.password=ENC(" + b64(48) + ")"),
        (
            "encrypted: hiera-eyaml value",
            "profile::db::password: >\n    ENC[PKCS7,MIIBiQYJKoZIhvcNAQcDoIIBejCCAXYCAQAxggEhMIIBHQIBADAFMAACAQEw"
            + _pick(r, B64, 300)
            + "]",
        ),
        (
            "encrypted: dotenvx encrypted value",
            'DOTENV_PUBLIC_KEY="02' + _pick(r, HEX, 64) + '"\nDATABASE_URL="encrypted:BD' + _pick(r, B64, 160) + '="',
        ),
        (
            "encrypted: Chef encrypted data bag item",
            '{"id": "mysql", "password": {"encrypted_data": "'
            + b64(40)
            + '\\n", "iv": "'
            + b64(12)
            + '\\n", "auth_tag": "'
            + b64(16)
            + '\\n", "version": 3, "cipher": "aes-256-gcm"}}',
        ),
        (
            "encrypted: GCP KMS ciphertext in a note",
            "gcloud kms encrypt output (base64), decrypt with the prod-secrets keyring: CiQA"
            + _pick(r, B64, 120)
            + "==",
        ),
        # --- lock files and integrity hashes ---
        (
            "lock: package-lock sha512",
            '"node_modules/zod": {\n  "version": "3.23.8",\n  "resolved": "https://registry.npmjs.org/zod/-/zod-3.23.8.tgz",'
            '\n  "integrity": "sha512-' + b64(64) + '"\n}',
        ),
        (
            "lock: go.sum lines",
            "golang.org/x/net v0.30.0 h1:" + b64(32) + "\ngolang.org/x/net v0.30.0/go.mod h1:" + b64(32),
        ),
        (
            "lock: poetry.lock files",
            'files = [\n    {file = "pydantic-2.9.2-py3-none-any.whl", hash = "sha256:' + _pick(r, HEX, 64) + '"},\n]',
        ),
        ("lock: Pipfile.lock hashes", '"hashes": [\n    "sha256:' + _pick(r, HEX, 64) + '"\n],\n"version": "==2.2.3"'),
        (
            "lock: mix.lock entry",
            '"jason": {:hex, :jason, "1.4.4", "'
            + _pick(r, HEX, 64)
            + '", [:mix], [], "hexpm", "'
            + _pick(r, HEX, 64)
            + '"},',
        ),
        ("lock: pubspec.lock sha256", '    description:\n      name: http\n      sha256: "' + _pick(r, HEX, 64) + '"'),
        (
            "lock: gradle verification-metadata",
            '<component group="com.squareup.okhttp3" name="okhttp" version="4.12.0">\n'
            '  <artifact name="okhttp-4.12.0.jar">'
            '\n    <sha256 value="'
            + _pick(r, HEX, 64)
            + '" origin="Generated by Gradle"/>\n  </artifact>\n</component>',
        ),
        (
            "lock: Nix SRI hash",
            'src = fetchurl {\n  url = "mirror://gnu/hello/hello-2.12.tar.gz";\n  hash = "sha256-' + b64(32) + '";\n};',
        ),
        # --- git ---
        ("git: merge log", "Merge: " + _pick(r, HEX, 7) + " " + _pick(r, HEX, 7) + "\ncommit " + sha()),
        ("git: blame line", "^" + _pick(r, HEX, 7) + " (Dana Ops 2025-05-30 14:02:11 +0200 42)     retries = 3"),
        ("git: compare URL", "https://github.com/acme/api/compare/" + sha() + "..." + sha()),
        ("git: reflog", sha()[:7] + " HEAD@{0}: rebase (finish): returning to refs/heads/main"),
        ("git: cherry-pick note", "Cherry-picked from " + sha() + " onto release/2.4"),
        # --- docker digests ---
        ("docker: pinned FROM", "FROM python:3.12-slim@" + digest() + "\nWORKDIR /app"),
        ("docker: pod imageID", "    imageID: docker.io/library/nginx@" + digest()),
        (
            "docker: OCI manifest layers",
            '{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "'
            + digest()
            + '", "size": 29126484}',
        ),
        ("docker: buildx output", "#12 writing image " + digest() + " done\n#12 naming to ghcr.io/acme/api:2.4.0"),
        # --- UUIDs and other public ids ---
        ("id: W3C traceparent", "traceparent: 00-" + _pick(r, HEX, 32) + "-" + _pick(r, HEX, 16) + "-01"),
        (
            "id: AWS request ids",
            "x-amz-request-id: " + _pick(r, UPPER_HEX, 16) + "\nx-amz-id-2: " + b64(57),
        ),
        ("id: Kubernetes object uid", "metadata:\n  name: api-7d9f\n  uid: " + _uuid(r)),
        ("id: Azure correlation id", "Correlation ID: " + _uuid(r) + "\nTimestamp: 2025-06-01 10:22:31Z"),
        ("id: Sentry event id", "Sentry event " + _pick(r, HEX, 32) + " grouped into issue API-3KF"),
        ("id: Cloudflare Ray ID", "cf-ray: " + _pick(r, HEX, 16) + "-FRA"),
        ("id: MongoDB ObjectId", 'db.orders.find({ _id: ObjectId("' + _pick(r, HEX, 24) + '") })'),
        ("id: ULID job id", "job 01J" + _pick(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 23) + " finished in 4.2s"),
        (
            "id: Slack ids in a note",
            "Post to channel C" + _pick(r, UPPER_DIGITS, 10) + " and mention user U" + _pick(r, UPPER_DIGITS, 10),
        ),
        (
            "id: Discord snowflakes",
            "guild_id=" + str(r.randrange(10**17, 10**19)) + " channel_id=" + str(r.randrange(10**17, 10**19)),
        ),
        (
            "id: Stripe object ids",
            "Refunded pi_"
            + _pick(r, ALNUM, 24)
            + " (charge ch_"
            + _pick(r, ALNUM, 24)
            + ") for cus_"
            + _pick(r, ALNUM, 14)
            + ", sub_"
            + _pick(r, ALNUM, 24),
        ),
        (
            "id: Twilio account SID alone",
            "Support ticket: our account SID is A" + "C" + _pick(r, HEX, 32) + ", region US1",
        ),
        ("id: YouTube link", "Demo recording: https://www.youtube.com/watch?v=" + _pick(r, B64URL, 11)),
        ("id: Bitcoin address", "Donations: bc1q" + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 38)),
        ("id: CloudTrail event", '{"eventID": "' + _uuid(r) + '", "eventName": "AssumeRole", "readOnly": true}'),
        # --- OAuth client ids ---
        (
            "client id: Okta SPA",
            "const oktaAuth = new OktaAuth({ issuer: 'https://acme.okta.com/oauth2/default', "
            "clientId: '0o" + "a" + _pick(r, ALNUM, 17) + "' });",
        ),
        ("client id: Auth0 SPA", '<Auth0Provider domain="acme.us.auth0.com" clientId="' + _pick(r, ALNUM, 32) + '">'),
        (
            "client id: Azure app registration",
            "Application (client) ID: " + _uuid(r) + "\nDirectory (tenant) ID: " + _uuid(r),
        ),
        (
            "client id: Google sign-in button",
            '<div id="g_id_onload" data-client_id="'
            + str(r.randrange(10**11, 10**12))
            + "-"
            + _pick(r, LOWER_DIGITS, 32)
            + '.apps.googleusercontent.com"></div>',
        ),
        ("client id: GitHub OAuth app", "GITHUB_OAUTH_CLIENT_ID=Ov23li" + _pick(r, ALNUM, 14)),
        # --- publishable and public keys by design ---
        (
            "publishable: Stripe key in Stripe.js",
            "const stripe = Stripe('p" + "k_live_51" + _pick(r, ALNUM, 97) + "');",
        ),
        (
            "publishable: Algolia search-only key",
            "// search-only API key, safe in the frontend\nconst search = algoliasearch('"
            + _pick(r, UPPER_DIGITS, 10)
            + "', '"
            + _pick(r, HEX, 32)
            + "'); // search-only",
        ),
        ("publishable: Mapbox public token", "mapboxgl.accessToken = '" + mapbox_pub + "';"),
        (
            "publishable: Razorpay key id in checkout",
            "var rzp = new Razorpay({ key: 'rzp"
            + "_live_"
            + _pick(r, ALNUM, 14)
            + "', amount: 50000, currency: 'INR' });",
        ),
        (
            "publishable: Paystack public key",
            "PaystackPop.setup({ key: 'p" + "k_live_" + _pick(r, HEX, 40) + "', email });",
        ),
        (
            "publishable: Square application id",
            "const payments = Square.payments('sq0"
            + "idp-"
            + _pick(r, B64URL, 22)
            + "', 'L"
            + _pick(r, UPPER_DIGITS, 12)
            + "');",
        ),
        (
            "publishable: Sentry DSN without a secret",
            "Sentry.init({ dsn: 'https://" + _pick(r, HEX, 32) + "@o123456.ingest.us.sentry.io/4507654321' });",
        ),
        ("publishable: Amplitude browser key", "amplitude.init('" + _pick(r, HEX, 32) + "', { autocapture: true });"),
        (
            "publishable: PayPal JS SDK client id",
            '<script src="https://www.paypal.com/sdk/js?client-id=A'
            + _pick(r, B64URL, 79)
            + '&currency=EUR"></script>',
        ),
        # --- placeholders and references ---
        ("placeholder: angle brackets", 'export ANTHROPIC_API_KEY="<your-token>"'),
        (
            "placeholder: Actions secrets reference",
            "        env:\n          STRIPE_KEY: ${{ secrets.STRIPE_SECRET_KEY }}",
        ),
        ("placeholder: vault read substitution", 'export DB_PASSWORD="$(vault read -field=password secret/prod/db)"'),
        ("placeholder: os.environ in Python", 'sg = SendGridAPIClient(os.environ["SENDGRID_API_KEY"])'),
        ("placeholder: vals ref+vault", "password: ref+vault://secret/data/prod/db#/password"),
        (
            "placeholder: xxxx in a README",
            "SLACK_BOT_TOKEN=xo" + "xb-xxxxxxxxxxxx-xxxxxxxxxxxxx-xxxxxxxxxxxxxxxxxxxxxxxx",
        ),
        (
            "placeholder: changeme in docs",
            "The default admin password is `changeme`; the installer forces you to change it.",
        ),
        ("placeholder: Ansible variable", 'mysql_root_password: "{{ vault_mysql_root_password }}"'),
        ("placeholder: Terraform variable", 'resource "aws_db_instance" "main" {\n  password = var.db_password\n}'),
        ("placeholder: PowerShell env read", '$headers = @{ Authorization = "Bearer $env:GITHUB_TOKEN" }'),
        ("placeholder: Go os.Getenv", 'token := os.Getenv("TELEGRAM_BOT_TOKEN")'),
        ("placeholder: Java System.getenv", 'String key = System.getenv("OPENAI_API_KEY");'),
        ("placeholder: C# configuration", 'var secret = builder.Configuration["AzureAd:ClientSecret"];'),
        ("placeholder: masked CLI output", "API key: ******************************** (hidden)"),
        ("placeholder: redacted log", "Authorization: Bearer [REDACTED]"),
        (
            "placeholder: truncated key in a dashboard",
            "Key created: s" + "k-proj-...a9Xf (last used 2 days ago)",
        ),
        (
            "placeholder: SSM read command",
            "aws ssm get-parameter --name /prod/db/password --with-decryption --query Parameter.Value",
        ),
        ("placeholder: gcloud secrets access", "gcloud secrets versions access latest --secret=stripe-key"),
        ("placeholder: envFrom secretRef", "envFrom:\n  - secretRef:\n      name: api-secrets"),
        ("placeholder: Doppler CLI", "doppler secrets get STRIPE_KEY --plain --project api --config prd"),
        (
            "placeholder: connection string template",
            "Server=tcp:acme.database.windows.net;User ID={user};Password={password};",
        ),
        # --- documented examples, clearly labelled ---
        (
            "example: Slack docs webhook",
            "From the Slack docs (example only): https://hooks.slack.com/services/T00000000/B00000000/" + "X" * 24,
        ),
        (
            "example: Stripe docs test key",
            "The Stripe API reference examples use the public sample key s" + "k_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
        ),
        (
            "example: AWS docs list-access-keys output",
            '# example from the IAM docs\n{"AccessKeyMetadata": [{"UserName": "Bob", "AccessKeyId": "AK'
            + 'IAIOSFODNN7EXAMPLE", "Status": "Active"}]}',
        ),
        # --- base64 images and fonts ---
        ("data: base64 PNG in Markdown", "![dot](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA" + b64(240) + ")"),
        ("data: base64 JPEG in JSON", '{"avatar": "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQ' + b64(300) + '"}'),
        ("data: base64 WebP", "background-image: url(data:image/webp;base64,UklGR" + b64(180) + ");"),
        (
            "data: base64 woff",
            "src: url(data:application/font-woff;base64,d09GRgABAAAA" + b64(320) + ") format('woff');",
        ),
        # --- public keys and certificates ---
        (
            "public: ed25519 public key",
            "ssh-ed25519 " + _ssh_pub(r, b"ssh-ed25519", r.randbytes(32)) + " dana@laptop",
        ),
        (
            "public: PGP public key block",
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ"
            + _wrap(b64(300))
            + "\n="
            + b64(3)
            + "\n-----END PGP PUBLIC KEY BLOCK-----",
        ),
        (
            "public: certificate signing request",
            "-----BEGIN CERTIFICATE REQUEST-----\nMIICijCCAXICAQAwRTELMAkGA1UEBhMC"
            + _wrap(b64(600))
            + "\n-----END CERTIFICATE REQUEST-----",
        ),
        (
            "public: kubeconfig CA data",
            "clusters:\n- cluster:\n    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSU"
            + _pick(r, B64, 600)
            + "\n    server: https://10.0.0.1:6443\n  name: prod",
        ),
        (
            "public: Ed25519 public key PEM",
            "-----BEGIN PUBLIC KEY-----\n"
            + base64.b64encode(_SPKI_ED25519 + r.randbytes(32)).decode()
            + "\n-----END PUBLIC KEY-----",
        ),
        ("public: minisign public key", "untrusted comment: minisign public key\nRWQ" + _pick(r, B64, 53)),
        ("public: GPG fingerprint", "Signed with key " + " ".join(_pick(r, UPPER_HEX, 4) for _ in range(10))),
        ("public: age recipient", "Encrypt backups to age1" + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)),
        (
            "public: SSH host key fingerprint prompt",
            "ED25519 key fingerprint is SHA256:"
            + b64(32).rstrip("=")
            + ".\nAre you sure you want to continue connecting?",
        ),
        (
            "public: RSA public key PEM",
            "-----BEGIN PUBLIC KEY-----\n"
            + _wrap(base64.b64encode(_SPKI_RSA + r.randbytes(256) + bytes.fromhex("0203010001")).decode())
            + "\n-----END PUBLIC KEY-----",
        ),
        # --- checksums ---
        ("checksum: sha512sum", _pick(r, HEX, 128) + "  node-v22.11.0-linux-x64.tar.xz"),
        (
            "checksum: cosign digest",
            "Verified OK\n  digest: " + digest() + "\n  tlog index: " + str(r.randrange(10**8, 10**9)),
        ),
        ("checksum: S3 multipart ETag", 'ETag: "' + _pick(r, HEX, 32) + '-14"'),
    ]


def lookalikes() -> list[Sample]:
    return [Sample(kind, text, "") for kind, text in _lookalike_texts()]
