"""A HELD-OUT corpus for the secret scanner: measured on, never tuned on.

It was written before the scanner's rules were changed for issue #36, from the
providers' published token formats (prefix, alphabet, length) for the providers
that the public rule sets of gitleaks, trufflehog and detect-secrets name, and
from the kinds of look-alike text that trip scanners (encrypted values, lock-file
hashes, public and client ids, placeholders). Rules are tuned on
``bench/secrets_corpus.py``; this file only measures them. Change a sample here
only to fix a sample that misstates a published format, never to make a rule
pass, and say so in the commit.

Invariants:
- Data only: deterministic samples (each kind has its own ``random.Random``
  seeded from its name), no logic beyond building them.
- Nothing here is a real credential: every value is random characters in the
  right shape, and every provider prefix is assembled from pieces at run time,
  so push-protection scanners find no literal token in the repository.
- Every credential sample carries the credential itself (``secret``); look-alikes
  carry "".
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
import zlib
from collections.abc import Callable

from bench.secrets_corpus import Sample

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + DIGITS
LOWER_DIGITS = LOWER + DIGITS
UPPER_DIGITS = UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
PUNCT = "!@#%^&*()-_=+[]{}:,.?~"


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(f"heldout/{name}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet``; with letters and digits in it, at least one of each."""
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        if n < 8:
            return out
        digit_ok = not any(c in DIGITS for c in alphabet) or any(c.isdigit() for c in out)
        letter_ok = not any(c.isalpha() for c in alphabet) or any(c.isalpha() for c in out)
        if digit_ok and letter_ok:
            return out


def _password(rng: random.Random, n: int = 14) -> str:
    """A person's password: letters, digits and punctuation, each at least once."""
    while True:
        out = _pick(rng, ALNUM + "!@#%^&*-_=+?.", n)
        if any(c.isdigit() for c in out) and any(not c.isalnum() for c in out) and any(c.isupper() for c in out):
            return out


def _b64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _jwt(rng: random.Random, claims: dict[str, object]) -> str:
    head = _b64url(json.dumps({"alg": "RS256", "kid": _pick(rng, B64URL, 12)}).encode())
    return f"{head}.{_b64url(json.dumps(claims).encode())}.{_pick(rng, B64URL, 86)}"


def _pct(text: str) -> str:
    return text.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")


# --- credentials ----------------------------------------------------------------
# Each entry: (kind, make(rng) -> (text, secret)). Kinds name the category first.

_Make = Callable[[random.Random], tuple[str, str]]


def _s(template: str, secret: str) -> tuple[str, str]:
    return template.replace("{s}", secret), secret


def _azure_conn(r: random.Random) -> tuple[str, str]:
    key = _b64(r, 64)
    return _s(
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmeprodlogs;"
        "AccountKey={s};EndpointSuffix=core.windows.net",
        key,
    )


def _azure_sas(r: random.Random) -> tuple[str, str]:
    sig = _pct(_b64(r, 32))
    return _s(
        "Download it from https://acmeexports.blob.core.windows.net/reports/q3.csv?sv=2022-11-02&ss=b&srt=o"
        "&sp=r&se=2026-03-01T00:00:00Z&st=2025-03-01T00:00:00Z&spr=https&sig={s}",
        sig,
    )


def _azure_sas_token(r: random.Random) -> tuple[str, str]:
    sig = _pct(_b64(r, 32))
    return _s("AZURE_SAS_TOKEN=?sv=2023-01-03&ss=bfqt&srt=sco&sp=rwdlacupitfx&se=2026-12-31&sig={s}", sig)


def _servicebus(r: random.Random) -> tuple[str, str]:
    key = _b64(r, 32)
    return _s(
        '"ServiceBus": "Endpoint=sb://acme-events.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;'
        'SharedAccessKey={s}"',
        key,
    )


def _aws_presigned(r: random.Random) -> tuple[str, str]:
    akid = "AS" + "IA" + _pick(r, UPPER_DIGITS, 16)
    url = (
        f"https://acme-backups.s3.eu-west-1.amazonaws.com/db/2025-05-01.sql.gz?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential={akid}%2F20250501%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20250501T101500Z"
        f"&X-Amz-Expires=604800&X-Amz-Security-Token={_pct(_b64(r, 180))}&X-Amz-SignedHeaders=host"
        f"&X-Amz-Signature={_pick(r, HEX, 64)}"
    )
    return _s("presigned link for the auditors: {s}", url)


def _aws_presigned_v2(r: random.Random) -> tuple[str, str]:
    akid = "AK" + "IA" + _pick(r, UPPER_DIGITS, 16)
    url = (
        f"https://s3.amazonaws.com/acme-media/raw/video.mp4?AWSAccessKeyId={akid}&Expires=1767225600"
        f"&Signature={_pct(_b64(r, 20))}"
    )
    return _s("{s}", url)


def _gcs_signed(r: random.Random) -> tuple[str, str]:
    url = (
        "https://storage.googleapis.com/acme-ml-data/train.parquet?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        "&X-Goog-Credential=exporter%40acme-ml.iam.gserviceaccount.com%2F20250501%2Fauto%2Fstorage%2Fgoog4_request"
        "&X-Goog-Date=20250501T101500Z&X-Goog-Expires=86400&X-Goog-SignedHeaders=host"
        f"&X-Goog-Signature={_pick(r, HEX, 512)}"
    )
    return _s("signed url (24h): {s}", url)


def _gcs_hmac(r: random.Random) -> tuple[str, str]:
    secret = _b64(r, 30)
    return _s("[gcs]\naccess_key = GOOG1E" + _pick(r, UPPER_DIGITS, 55) + "\nsecret = {s}", secret)


def _azure_ad_secret(r: random.Random) -> tuple[str, str]:
    secret = _pick(r, ALNUM, 3) + r.choice(DIGITS) + "Q~" + _pick(r, ALNUM + "_.~-", 34)
    return _s('"clientSecret": "{s}",', secret)


def _azure_ad_env(r: random.Random) -> tuple[str, str]:
    secret = _pick(r, ALNUM, 3) + r.choice(DIGITS) + "Q~" + _pick(r, ALNUM + "_.~-", 34)
    return _s(f"AZURE_TENANT_ID={_uuid(r)}\nAZURE_CLIENT_ID={_uuid(r)}\nAZURE_CLIENT_SECRET={{s}}", secret)


def _telegram(r: random.Random) -> tuple[str, str]:
    token = str(r.randrange(10**9, 10**10)) + ":AA" + _pick(r, B64URL, 33)
    return _s("bot = telebot.TeleBot('{s}')", token)


def _telegram_prose(r: random.Random) -> tuple[str, str]:
    token = str(r.randrange(10**8, 10**9)) + ":AA" + _pick(r, B64URL, 33)
    return _s("The alerts bot's token from BotFather is {s}", token)


def _discord_bot(r: random.Random) -> tuple[str, str]:
    token = _b64url(str(r.randrange(10**18, 10**19)).encode()) + "." + _pick(r, B64URL, 6) + "." + _pick(r, B64URL, 38)
    return _s('DISCORD_BOT_TOKEN="{s}"', token)


def _discord_webhook(r: random.Random) -> tuple[str, str]:
    url = f"https://discord.com/api/webhooks/{r.randrange(10**17, 10**18)}/{_pick(r, B64URL, 68)}"
    return _s("deploy notifications go to {s}", url)


def _slack_webhook(r: random.Random) -> tuple[str, str]:
    ids = f"T{_pick(r, UPPER_DIGITS, 8)}/B{_pick(r, UPPER_DIGITS, 10)}"
    url = f"https://hooks.slack.com/services/{ids}/{_pick(r, ALNUM, 24)}"
    return _s("webhook_url: {s}", url)


def _slack_app(r: random.Random) -> tuple[str, str]:
    token = f"xa{'pp'}-1-A{_pick(r, UPPER_DIGITS, 10)}-{r.randrange(10**12, 10**13)}-{_pick(r, HEX, 64)}"
    return _s("SLACK_APP_TOKEN={s}", token)


def _slack_bot(r: random.Random) -> tuple[str, str]:
    token = f"xo{'xb'}-{r.randrange(10**11, 10**12)}-{r.randrange(10**12, 10**13)}-{_pick(r, ALNUM, 24)}"
    return _s("app = App(token='{s}')", token)


def _twitter_bearer(r: random.Random) -> tuple[str, str]:
    token = "A" * 22 + _pick(r, ALNUM, 8) + "A" * 7 + _pct(_b64(r, 24)) + _pick(r, ALNUM, 50)
    return _s("TWITTER_BEARER_TOKEN={s}", token)


def _twitter_bearer_header(r: random.Random) -> tuple[str, str]:
    token = "A" * 22 + _pick(r, ALNUM, 8) + "A" * 7 + _pct(_b64(r, 24)) + _pick(r, ALNUM, 50)
    return _s('curl "https://api.x.com/2/tweets/20" -H "Authorization: Bearer {s}"', token)


def _twitter_secret(r: random.Random) -> tuple[str, str]:
    secret = _pick(r, ALNUM, 50)
    return _s("consumer_key: " + _pick(r, ALNUM, 25) + "\nconsumer_secret: {s}", secret)


def _facebook_token(r: random.Random) -> tuple[str, str]:
    token = "EA" + "AB" + _pick(r, ALNUM, 180)
    return _s("graph.facebook.com/v19.0/me?access_token={s}", token)


def _facebook_app_secret(r: random.Random) -> tuple[str, str]:
    secret = _pick(r, HEX, 32)
    return _s("FACEBOOK_APP_SECRET={s}", secret)


def _stripe_restricted(r: random.Random) -> tuple[str, str]:
    return _s("stripe.api_key = '{s}'", "rk" + "_live_" + _pick(r, ALNUM, 99))


def _stripe_secret_prose(r: random.Random) -> tuple[str, str]:
    return _s("Billing runs with {s} until we rotate it", "sk" + "_live_" + _pick(r, ALNUM, 99))


def _square_token(r: random.Random) -> tuple[str, str]:
    return _s("SQUARE_ACCESS_TOKEN={s}", "EA" + "AA" + _pick(r, B64URL, 60))


def _square_oauth(r: random.Random) -> tuple[str, str]:
    return _s("square:\n  application_secret: {s}", "sq0" + "csp-" + _pick(r, B64URL, 43))


def _square_legacy(r: random.Random) -> tuple[str, str]:
    return _s("legacy token {s}", "sq0" + "atp-" + _pick(r, B64URL, 22))


def _braintree(r: random.Random) -> tuple[str, str]:
    token = "access_token" + "$production$" + _pick(r, LOWER_DIGITS, 16) + "$" + _pick(r, HEX, 32)
    return _s("BRAINTREE_ACCESS_TOKEN={s}", token)


def _paypal_secret(r: random.Random) -> tuple[str, str]:
    secret = "E" + _pick(r, B64URL, 79)
    return _s(f"PAYPAL_CLIENT_ID=A{_pick(r, B64URL, 79)}\nPAYPAL_CLIENT_SECRET={{s}}", secret)


def _adyen(r: random.Random) -> tuple[str, str]:
    key = (
        "AQE"
        + _pick(r, ALNUM, 40)
        + "/"
        + _pick(r, ALNUM, 30)
        + "+"
        + _pick(r, ALNUM, 20)
        + "-"
        + _pick(r, ALNUM + "=", 30)
    )
    return _s('adyen:\n  apiKey: "{s}"', key)


def _mailchimp(r: random.Random) -> tuple[str, str]:
    return _s("MAILCHIMP_API_KEY={s}", _pick(r, HEX, 32) + "-us" + str(r.randrange(1, 21)))


def _mailchimp_code(r: random.Random) -> tuple[str, str]:
    return _s('client.set_config({"api_key": "{s}", "server": "us6"})', _pick(r, HEX, 32) + "-us6")


def _sendgrid(r: random.Random) -> tuple[str, str]:
    return _s("sg = SendGridAPIClient('{s}')", "SG." + _pick(r, B64URL, 22) + "." + _pick(r, B64URL, 43))


def _twilio_token(r: random.Random) -> tuple[str, str]:
    return _s(f"client = Client('AC{_pick(r, HEX, 32)}', '{{s}}')", _pick(r, HEX, 32))


def _twilio_api_key(r: random.Random) -> tuple[str, str]:
    return _s("TWILIO_API_KEY={s}", "S" + "K" + _pick(r, HEX, 32))


def _mailgun(r: random.Random) -> tuple[str, str]:
    return _s("MAILGUN_API_KEY={s}", _pick(r, HEX, 32) + "-" + _pick(r, HEX, 8) + "-" + _pick(r, HEX, 8))


def _mailgun_legacy(r: random.Random) -> tuple[str, str]:
    return _s("auth=('api', '{s}')", "ke" + "y-" + _pick(r, HEX, 32))


def _klaviyo(r: random.Random) -> tuple[str, str]:
    return _s("KLAVIYO_PRIVATE_API_KEY={s}", "pk" + "_" + _pick(r, HEX, 34))


def _hubspot(r: random.Random) -> tuple[str, str]:
    return _s("hubspot private app token: {s}", "pat" + "-na1-" + _uuid(r))


def _hubspot_header(r: random.Random) -> tuple[str, str]:
    return _s("-H 'Authorization: Bearer {s}'", "pat" + "-eu1-" + _uuid(r))


def _okta(r: random.Random) -> tuple[str, str]:
    return _s("Authorization: SSWS {s}", "00" + _pick(r, B64URL, 40))


def _okta_env(r: random.Random) -> tuple[str, str]:
    return _s("OKTA_API_TOKEN={s}", "00" + _pick(r, B64URL, 40))


def _auth0(r: random.Random) -> tuple[str, str]:
    return _s(
        f"AUTH0_DOMAIN=acme.eu.auth0.com\nAUTH0_CLIENT_ID={_pick(r, ALNUM, 32)}\nAUTH0_CLIENT_SECRET={{s}}",
        _pick(r, B64URL, 64),
    )


def _auth0_yaml(r: random.Random) -> tuple[str, str]:
    return _s("auth0:\n  client_secret: '{s}'", _pick(r, B64URL, 64))


def _keycloak(r: random.Random) -> tuple[str, str]:
    return _s('{"realm": "acme", "resource": "billing", "credentials": {"secret": "{s}"}}', _pick(r, ALNUM, 32))


def _keycloak_env(r: random.Random) -> tuple[str, str]:
    return _s("KC_CLIENT_SECRET={s}", _pick(r, ALNUM, 32))


def _vault_hvs(r: random.Random) -> tuple[str, str]:
    return _s("vault login {s}", "hv" + "s." + _pick(r, B64URL, 91))


def _vault_legacy(r: random.Random) -> tuple[str, str]:
    return _s('export VAULT_TOKEN="{s}"', "s." + _pick(r, ALNUM, 24))


def _vault_legacy_prose(r: random.Random) -> tuple[str, str]:
    return _s("root token for the dev vault: {s}", "s." + _pick(r, ALNUM, 24))


def _doppler(r: random.Random) -> tuple[str, str]:
    return _s("DOPPLER_TOKEN={s}", "dp" + ".st.prd." + _pick(r, ALNUM, 40))


def _doppler_cli(r: random.Random) -> tuple[str, str]:
    return _s("doppler configure set token {s}", "dp" + ".pt." + _pick(r, ALNUM, 43))


def _onepassword(r: random.Random) -> tuple[str, str]:
    payload = _b64url(
        json.dumps(
            {
                "signInAddress": "acme.1password.com",
                "email": f"{_pick(r, LOWER, 10)}@acme.1password",
                "secretKey": _pick(r, UPPER_DIGITS, 34),
                "deviceUuid": _pick(r, LOWER_DIGITS, 26),
            }
        ).encode()
    )
    return _s("OP_SERVICE_ACCOUNT_TOKEN={s}", "op" + "s_" + payload)


def _infisical(r: random.Random) -> tuple[str, str]:
    token = "st." + _uuid(r) + "." + _pick(r, HEX, 32) + "." + _pick(r, HEX, 32)
    return _s("INFISICAL_TOKEN={s}", token)


def _infisical_ua(r: random.Random) -> tuple[str, str]:
    return _s(
        f"infisical login --method=universal-auth --client-id={_uuid(r)} --client-secret={{s}}", _pick(r, HEX, 64)
    )


def _kube_client_key(r: random.Random) -> tuple[str, str]:
    pem = (
        "-----BEGIN RSA "
        + "PRIVATE KEY-----\n"
        + "\n".join(_pick(r, B64, 64) for _ in range(8))
        + "\n-----END RSA "
        + "PRIVATE KEY-----\n"
    )
    data = base64.b64encode(pem.encode()).decode()
    return _s(
        "users:\n- name: admin\n  user:\n"
        "    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=\n    client-key-data: {s}",
        data,
    )


def _kube_token(r: random.Random) -> tuple[str, str]:
    claims = {
        "iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": "ci",
        "sub": "system:serviceaccount:ci:deployer",
    }
    return _s("users:\n- name: deployer\n  user:\n    token: {s}", _jwt(r, claims))


def _kube_bootstrap(r: random.Random) -> tuple[str, str]:
    token = _pick(r, LOWER_DIGITS, 6) + "." + _pick(r, LOWER_DIGITS, 16)
    return _s(
        "kubeadm join 10.0.0.10:6443 --token {s} --discovery-token-ca-cert-hash sha256:" + _pick(r, HEX, 64), token
    )


def _docker_auths(r: random.Random) -> tuple[str, str]:
    auth = base64.b64encode(f"deploy:{_password(r, 16)}".encode()).decode()
    return _s('{"auths": {"registry.acme.io": {"auth": "{s}"}}}', auth)


def _docker_auths_hub(r: random.Random) -> tuple[str, str]:
    auth = base64.b64encode(("acmebot:dckr_" + "pat_" + _pick(r, B64URL, 27)).encode()).decode()
    return _s('{\n  "auths": {\n    "https://index.docker.io/v1/": {\n      "auth": "{s}"\n    }\n  }\n}', auth)


def _dockerhub_pat(r: random.Random) -> tuple[str, str]:
    return _s("echo {s} | docker login -u acmebot --password-stdin", "dckr" + "_pat_" + _pick(r, B64URL, 27))


def _ghcr(r: random.Random) -> tuple[str, str]:
    return _s("echo {s} | docker login ghcr.io -u acme-ci --password-stdin", "gh" + "p_" + _pick(r, ALNUM, 36))


def _quay(r: random.Random) -> tuple[str, str]:
    return _s('docker login -u="acme+deployer" -p="{s}" quay.io', _pick(r, UPPER_DIGITS, 64))


def _harbor(r: random.Random) -> tuple[str, str]:
    return _s("docker login harbor.acme.io -u 'robot$ci+pusher' -p '{s}'", _pick(r, ALNUM, 32))


def _harbor_yaml(r: random.Random) -> tuple[str, str]:
    return _s("harbor:\n  username: robot$ci+pusher\n  password: {s}", _pick(r, ALNUM, 32))


def _groq(r: random.Random) -> tuple[str, str]:
    return _s('client = Groq(api_key="{s}")', "gs" + "k_" + _pick(r, ALNUM, 52))


def _mistral(r: random.Random) -> tuple[str, str]:
    return _s("MISTRAL_API_KEY={s}", _pick(r, ALNUM, 32))


def _cohere(r: random.Random) -> tuple[str, str]:
    return _s("co = cohere.Client('{s}')", _pick(r, ALNUM, 40))


def _perplexity(r: random.Random) -> tuple[str, str]:
    return _s("PPLX key: {s}", "ppl" + "x-" + _pick(r, ALNUM, 48))


def _together(r: random.Random) -> tuple[str, str]:
    return _s("TOGETHER_API_KEY={s}", _pick(r, HEX, 64))


def _together_v1(r: random.Random) -> tuple[str, str]:
    return _s("together key {s}", "tgp" + "_v1_" + _pick(r, B64URL, 43))


def _fireworks(r: random.Random) -> tuple[str, str]:
    return _s('fireworks.client.api_key = "{s}"', "f" + "w_" + _pick(r, ALNUM, 24))


def _replicate(r: random.Random) -> tuple[str, str]:
    return _s("export REPLICATE_API_TOKEN={s}", "r" + "8_" + _pick(r, ALNUM, 37))


def _huggingface(r: random.Random) -> tuple[str, str]:
    return _s("huggingface-cli login --token {s}", "h" + "f_" + _pick(r, ALNUM, 34))


def _xai(r: random.Random) -> tuple[str, str]:
    return _s("XAI_API_KEY={s}", "xa" + "i-" + _pick(r, ALNUM, 80))


def _deepseek(r: random.Random) -> tuple[str, str]:
    return _s('client = OpenAI(api_key="{s}", base_url="https://api.deepseek.com")', "s" + "k-" + _pick(r, HEX, 32))


def _openrouter(r: random.Random) -> tuple[str, str]:
    return _s("OPENROUTER_API_KEY={s}", "sk" + "-or-v1-" + _pick(r, HEX, 64))


def _anthropic_prose(r: random.Random) -> tuple[str, str]:
    return _s("use my key {s} for the eval run", "sk" + "-ant-api03-" + _pick(r, B64URL, 93) + "AA")


def _prose_password(template: str) -> _Make:
    return lambda r: _s(template, _password(r))


def _env_quoted(name: str, quote: str, export: bool = False) -> _Make:
    def make(r: random.Random) -> tuple[str, str]:
        value = _pick(r, LOWER_DIGITS + "!@#$%^&*(-_=+)", 50) if "DJANGO" in name else _password(r, 24)
        return _s(("export " if export else "") + f"{name}={quote}{{s}}{quote}", value)

    return make


def _db_url(r: random.Random) -> tuple[str, str]:
    return _s("DATABASE_URL=postgres://billing:{s}@db.internal:5432/billing", _pick(r, ALNUM, 20))


def _mongo_srv(r: random.Random) -> tuple[str, str]:
    return _s('MONGO_URI="mongodb+srv://app:{s}@cluster0.ab1cd.mongodb.net/prod?retryWrites=true"', _pick(r, ALNUM, 16))


def _netrc(r: random.Random) -> tuple[str, str]:
    return _s("machine api.heroku.com\n  login ops@acme.io\n  password {s}", _uuid(r))


def _pgpass(r: random.Random) -> tuple[str, str]:
    return _s("db.internal:5432:billing:billing:{s}", _password(r, 18))


def _npmrc(r: random.Random) -> tuple[str, str]:
    return _s("//registry.npmjs.org/:_authToken={s}", "np" + "m_" + _pick(r, ALNUM, 36))


def _datadog(r: random.Random) -> tuple[str, str]:
    return _s("DD_API_KEY={s}", _pick(r, HEX, 32))


def _pulumi(r: random.Random) -> tuple[str, str]:
    return _s("PULUMI_ACCESS_TOKEN={s}", "pu" + "l-" + _pick(r, HEX, 40))


def _planetscale(r: random.Random) -> tuple[str, str]:
    return _s("password: {s}", "pscale" + "_pw_" + _pick(r, B64URL, 43))


def _grafana(r: random.Random) -> tuple[str, str]:
    return _s("grafana service account token {s}", "gl" + "sa_" + _pick(r, ALNUM, 32) + "_" + _pick(r, HEX, 8))


def _netlify(r: random.Random) -> tuple[str, str]:
    return _s("NETLIFY_AUTH_TOKEN={s}", "nf" + "p_" + _pick(r, ALNUM, 36))


def _figma(r: random.Random) -> tuple[str, str]:
    return _s("X-Figma-Token: {s}", "fig" + "d_" + _pick(r, B64URL, 40))


def _sentry(r: random.Random) -> tuple[str, str]:
    return _s("SENTRY_AUTH_TOKEN={s}", "sntry" + "u_" + _pick(r, HEX, 64))


def _linear(r: random.Random) -> tuple[str, str]:
    return _s("Linear key for the triage bot: {s}", "lin" + "_api_" + _pick(r, ALNUM, 40))


def _gitlab(r: random.Random) -> tuple[str, str]:
    return _s(
        "git remote set-url origin https://oauth2:{s}@gitlab.acme.io/ops/infra.git",
        "glp" + "at-" + _pick(r, B64URL, 20),
    )


def _firebase_fcm(r: random.Random) -> tuple[str, str]:
    return _s("FCM server key: {s}", "AAAA" + _pick(r, B64URL, 7) + ":APA91b" + _pick(r, B64URL, 134))


def _mapbox_secret(r: random.Random) -> tuple[str, str]:
    return _s("MAPBOX_DOWNLOADS_TOKEN={s}", "s" + "k.eyJ1Ijoi" + _pick(r, B64URL, 50) + "." + _pick(r, B64URL, 22))


_CREDENTIALS: tuple[tuple[str, _Make], ...] = (
    ("cloud: Azure storage connection string", _azure_conn),
    ("cloud: Azure blob SAS URL", _azure_sas),
    ("cloud: Azure SAS token", _azure_sas_token),
    ("cloud: Azure Service Bus connection string", _servicebus),
    ("cloud: AWS presigned URL (SigV4, session)", _aws_presigned),
    ("cloud: AWS presigned URL (SigV2)", _aws_presigned_v2),
    ("cloud: GCS signed URL", _gcs_signed),
    ("cloud: GCS HMAC secret", _gcs_hmac),
    ("identity: Azure AD client secret (JSON)", _azure_ad_secret),
    ("identity: Azure AD client secret (.env)", _azure_ad_env),
    ("chat: Telegram bot token (code)", _telegram),
    ("chat: Telegram bot token (prose)", _telegram_prose),
    ("chat: Discord bot token", _discord_bot),
    ("chat: Discord webhook", _discord_webhook),
    ("chat: Slack webhook", _slack_webhook),
    ("chat: Slack app token", _slack_app),
    ("chat: Slack bot token", _slack_bot),
    ("social: X bearer token (.env)", _twitter_bearer),
    ("social: X bearer token (header)", _twitter_bearer_header),
    ("social: X consumer secret", _twitter_secret),
    ("social: Facebook access token", _facebook_token),
    ("social: Facebook app secret", _facebook_app_secret),
    ("payment: Stripe restricted key", _stripe_restricted),
    ("payment: Stripe secret key in prose", _stripe_secret_prose),
    ("payment: Square access token", _square_token),
    ("payment: Square OAuth secret", _square_oauth),
    ("payment: Square legacy token", _square_legacy),
    ("payment: Braintree access token", _braintree),
    ("payment: PayPal client secret", _paypal_secret),
    ("payment: Adyen API key", _adyen),
    ("marketing: Mailchimp key (.env)", _mailchimp),
    ("marketing: Mailchimp key (code)", _mailchimp_code),
    ("marketing: SendGrid key", _sendgrid),
    ("marketing: Twilio auth token (code)", _twilio_token),
    ("marketing: Twilio API key", _twilio_api_key),
    ("marketing: Mailgun private key", _mailgun),
    ("marketing: Mailgun legacy key", _mailgun_legacy),
    ("marketing: Klaviyo private key", _klaviyo),
    ("marketing: HubSpot private app token", _hubspot),
    ("marketing: HubSpot token in header", _hubspot_header),
    ("identity: Okta API token (SSWS)", _okta),
    ("identity: Okta API token (.env)", _okta_env),
    ("identity: Auth0 client secret (.env)", _auth0),
    ("identity: Auth0 client secret (YAML)", _auth0_yaml),
    ("identity: Keycloak client secret (JSON)", _keycloak),
    ("identity: Keycloak client secret (.env)", _keycloak_env),
    ("vault: Vault service token", _vault_hvs),
    ("vault: Vault legacy token (.env)", _vault_legacy),
    ("vault: Vault legacy token (prose)", _vault_legacy_prose),
    ("vault: Doppler service token", _doppler),
    ("vault: Doppler personal token", _doppler_cli),
    ("vault: 1Password service account token", _onepassword),
    ("vault: Infisical service token", _infisical),
    ("vault: Infisical client secret", _infisical_ua),
    ("cluster: kubeconfig client-key-data", _kube_client_key),
    ("cluster: kubeconfig token", _kube_token),
    ("cluster: kubeadm bootstrap token", _kube_bootstrap),
    ("registry: docker config auth", _docker_auths),
    ("registry: docker config auth (Hub)", _docker_auths_hub),
    ("registry: Docker Hub PAT", _dockerhub_pat),
    ("registry: GHCR login", _ghcr),
    ("registry: Quay robot token", _quay),
    ("registry: Harbor robot secret (login)", _harbor),
    ("registry: Harbor robot secret (YAML)", _harbor_yaml),
    ("model: Groq key", _groq),
    ("model: Mistral key", _mistral),
    ("model: Cohere key", _cohere),
    ("model: Perplexity key", _perplexity),
    ("model: Together key (hex)", _together),
    ("model: Together key (v1)", _together_v1),
    ("model: Fireworks key", _fireworks),
    ("model: Replicate token", _replicate),
    ("model: Hugging Face token", _huggingface),
    ("model: xAI key", _xai),
    ("model: DeepSeek key", _deepseek),
    ("model: OpenRouter key", _openrouter),
    ("model: Anthropic key in prose", _anthropic_prose),
    ("prose: staging db password", _prose_password("the password for the staging db is {s}")),
    ("prose: runbook login", _prose_password("Runbook step 3: log in as admin with password {s} and rotate it")),
    ("prose: wifi passphrase", _prose_password("Office wifi: ACME-5G, passphrase {s}")),
    ("prose: root password", _prose_password("root pw is {s} on the bastion")),
    ("prose: credentials pair", _prose_password("SFTP creds: user ingest / pass {s}")),
    ("prose: password colon", _prose_password("- Grafana admin password: {s}")),
    ("prose: password was set", _prose_password("I set the Jenkins password to {s} yesterday")),
    ("env: Django key, single quotes", _env_quoted("DJANGO_SECRET_KEY", "'")),
    ("env: Django key, double quotes", _env_quoted("DJANGO_SECRET_KEY", '"')),
    ("env: Django key, export", _env_quoted("DJANGO_SECRET_KEY", "'", export=True)),
    ("env: db password, double quotes", _env_quoted("DB_PASSWORD", '"')),
    ("env: password, export single", _env_quoted("POSTGRES_PASSWORD", "'", export=True)),
    ("env: jwt secret, single", _env_quoted("JWT_SECRET", "'")),
    ("env: session secret, export double", _env_quoted("SESSION_SECRET", '"', export=True)),
    ("env: app secret, unquoted", lambda r: _s("APP_SECRET={s}", _pick(r, ALNUM, 40))),
    ("url: database URL", _db_url),
    ("url: MongoDB SRV URL", _mongo_srv),
    ("file: .netrc password", _netrc),
    ("file: .pgpass line", _pgpass),
    ("file: .npmrc token", _npmrc),
    ("devops: Datadog API key", _datadog),
    ("devops: Pulumi token", _pulumi),
    ("devops: PlanetScale password", _planetscale),
    ("devops: Grafana service account token", _grafana),
    ("devops: Netlify token", _netlify),
    ("devops: Figma token", _figma),
    ("devops: Sentry user token", _sentry),
    ("devops: Linear key in prose", _linear),
    ("devops: GitLab token in a remote URL", _gitlab),
    ("devops: Firebase FCM server key", _firebase_fcm),
    ("devops: Mapbox secret token", _mapbox_secret),
)


def credentials() -> list[Sample]:
    out: list[Sample] = []
    for kind, make in _CREDENTIALS:
        text, secret = make(_rng(kind))
        out.append(Sample(kind, text, secret))
    return out


# --- look-alikes -----------------------------------------------------------------


def _lookalike_texts() -> list[tuple[str, str]]:
    r = _rng("lookalikes")
    sha512 = lambda: base64.b64encode(r.randbytes(64)).decode()  # noqa: E731 - data helper
    return [
        # encrypted values
        (
            "encrypted: sops value",
            f"password: ENC[AES256_GCM,data:{_b64(r, 18)},iv:{_b64(r, 32)},tag:{_b64(r, 16)},type:str]",
        ),
        (
            "encrypted: sops env",
            f"DB_PASSWORD=ENC[AES256_GCM,data:{_b64(r, 12)},iv:{_b64(r, 32)},tag:{_b64(r, 16)},type:str]",
        ),
        (
            "encrypted: ansible vault",
            "$ANSIBLE_VAULT;1.2;AES256;prod\n" + "\n".join(_pick(r, HEX, 80) for _ in range(5)),
        ),
        (
            "encrypted: ansible inline",
            "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  " + "\n  ".join(_pick(r, HEX, 64) for _ in range(4)),
        ),
        (
            "encrypted: age armor",
            "-----BEGIN AGE ENCRYPTED FILE-----\n"
            + "\n".join(_pick(r, B64, 64) for _ in range(4))
            + "\n-----END AGE ENCRYPTED FILE-----",
        ),
        ("encrypted: sealed secret", "spec:\n  encryptedData:\n    password: AgB" + _pick(r, B64, 400) + "=="),
        (
            "encrypted: PGP message",
            "-----BEGIN PGP MESSAGE-----\n\n"
            + "\n".join(_pick(r, B64, 64) for _ in range(5))
            + "\n="
            + _pick(r, B64, 4)
            + "\n-----END PGP MESSAGE-----",
        ),
        ("encrypted: KMS ciphertext", "ciphertext_blob: AQICAHh" + _pick(r, B64, 200) + "=="),
        ("encrypted: Jasypt", "spring.datasource.password=ENC(" + _b64(r, 48) + ")"),
        (
            "encrypted: Rails credentials",
            "config/credentials.yml.enc: " + _b64(r, 120) + "--" + _b64(r, 12) + "--" + _b64(r, 16),
        ),
        ("hash: bcrypt in htpasswd", "admin:$2y$10$" + _pick(r, ALNUM + "./", 53)),
        (
            "hash: argon2",
            'password_hash = "$argon2id$v=19$m=65536,t=3,p=4$' + _pick(r, B64, 22) + "$" + _pick(r, B64, 43) + '"',
        ),
        ("hash: scrypt", "hashed_password: scrypt:32768:8:1$" + _pick(r, ALNUM, 16) + "$" + _pick(r, HEX, 128)),
        (
            "hash: postgres SCRAM verifier",
            "rolpassword = SCRAM-SHA-256$4096:" + _b64(r, 16) + "$" + _b64(r, 32) + ":" + _b64(r, 32),
        ),
        # lock-file hashes
        ("lock: package-lock integrity", '"integrity": "sha512-' + sha512() + '"'),
        (
            "lock: yarn.lock",
            'lodash@^4.17.21:\n  version "4.17.21"\n  resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#'
            + _pick(r, HEX, 40)
            + '"\n  integrity sha512-'
            + sha512(),
        ),
        ("lock: pnpm-lock", "  /react@18.3.1:\n    resolution: {integrity: sha512-" + sha512() + "}"),
        (
            "lock: poetry.lock",
            'files = [\n    {file = "requests-2.32.3-py3-none-any.whl", hash = "sha256:' + _pick(r, HEX, 64) + '"},\n]',
        ),
        (
            "lock: pip hashes",
            "requests==2.32.3 \\\n    --hash=sha256:"
            + _pick(r, HEX, 64)
            + " \\\n    --hash=sha256:"
            + _pick(r, HEX, 64),
        ),
        (
            "lock: Cargo.lock",
            '[[package]]\nname = "serde"\nversion = "1.0.203"\n'
            'source = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "' + _pick(r, HEX, 64) + '"',
        ),
        (
            "lock: go.sum",
            "golang.org/x/crypto v0.23.0 h1:" + _b64(r, 32) + "\ngolang.org/x/crypto v0.23.0/go.mod h1:" + _b64(r, 32),
        ),
        ("lock: Gemfile.lock checksum", "CHECKSUMS\n  rack (3.0.11) sha256=" + _pick(r, HEX, 64)),
        ("lock: flake.lock", '"narHash": "sha256-' + _b64(r, 32) + '",\n"rev": "' + _pick(r, HEX, 40) + '"'),
        (
            "lock: composer.lock",
            '"dist": {"type": "zip", "shasum": "' + _pick(r, HEX, 40) + '", "reference": "' + _pick(r, HEX, 40) + '"}',
        ),
        ("lock: Package.resolved", '"revision" : "' + _pick(r, HEX, 40) + '",\n"version" : "1.5.4"'),
        (
            "lock: uv.lock",
            'sdist = { url = "https://files.pythonhosted.org/packages/source/r/rich/rich-13.7.1.tar.gz", '
            'hash = "sha256:' + _pick(r, HEX, 64) + '", size = 221248 }',
        ),
        ("digest: container image", "image: ghcr.io/acme/api@sha256:" + _pick(r, HEX, 64)),
        (
            "digest: SRI script",
            '<script src="https://cdn.jsdelivr.net/npm/htmx.org@2.0.0" integrity="sha384-'
            + _b64(r, 48)
            + '" crossorigin="anonymous"></script>',
        ),
        (
            "digest: terraform lock",
            'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.50.0"\n  hashes = [\n    "h1:'
            + _b64(r, 32)
            + '",\n    "zh:'
            + _pick(r, HEX, 64)
            + '",\n  ]\n}',
        ),
        # public ids and client ids
        ("public: Stripe publishable key", "STRIPE_PUBLISHABLE_KEY=pk" + "_live_" + _pick(r, ALNUM, 99)),
        (
            "public: Google OAuth client id",
            "GOOGLE_CLIENT_ID="
            + str(r.randrange(10**11, 10**12))
            + "-"
            + _pick(r, LOWER_DIGITS, 32)
            + ".apps.googleusercontent.com",
        ),
        ("public: Auth0 client id", "AUTH0_CLIENT_ID=" + _pick(r, ALNUM, 32)),
        (
            "public: Azure tenant and client ids",
            f'tenant_id = "{_uuid(r)}"\nclient_id = "{_uuid(r)}"\nsubscription_id = "{_uuid(r)}"',
        ),
        ("public: Twilio account SID", "TWILIO_ACCOUNT_SID=AC" + _pick(r, HEX, 32)),
        (
            "public: AWS account id and ARN",
            "role_arn = arn:aws:iam::" + str(r.randrange(10**11, 10**12)) + ":role/ci-deployer",
        ),
        (
            "public: Sentry DSN",
            "SENTRY_DSN=https://"
            + _pick(r, HEX, 32)
            + "@o"
            + str(r.randrange(10**5, 10**6))
            + ".ingest.sentry.io/"
            + str(r.randrange(10**6, 10**7)),
        ),
        (
            "public: Mapbox public token",
            "mapboxgl.accessToken = 'p"
            + "k.eyJ1IjoiYWNtZSIsImEiOiJ"
            + _pick(r, B64URL, 30)
            + "."
            + _pick(r, B64URL, 22)
            + "';",
        ),
        ("public: Okta client id", "OKTA_CLIENT_ID=0oa" + _pick(r, ALNUM, 17)),
        ("public: Discord application id", "DISCORD_APPLICATION_ID=" + str(r.randrange(10**17, 10**18))),
        (
            "public: Slack ids",
            "channel C"
            + _pick(r, UPPER_DIGITS, 10)
            + ", user U"
            + _pick(r, UPPER_DIGITS, 10)
            + ", team T"
            + _pick(r, UPPER_DIGITS, 8),
        ),
        ("public: Telegram chat id", "TELEGRAM_CHAT_ID=-100" + str(r.randrange(10**9, 10**10))),
        ("public: GA measurement id", "gtag('config', 'G-" + _pick(r, UPPER_DIGITS, 10) + "');"),
        ("public: Algolia app id", "ALGOLIA_APP_ID=" + _pick(r, UPPER_DIGITS, 10)),
        ("public: PayPal client id", "PAYPAL_CLIENT_ID=A" + _pick(r, B64URL, 79)),
        (
            "public: Firebase project config",
            '{"projectId": "acme-prod", "messagingSenderId": "'
            + str(r.randrange(10**11, 10**12))
            + '", "appId": "1:'
            + str(r.randrange(10**11, 10**12))
            + ":web:"
            + _pick(r, HEX, 22)
            + '"}',
        ),
        (
            "public: Keycloak realm public key",
            '"public_key": "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA' + _pick(r, B64, 300) + 'IDAQAB"',
        ),
        (
            "public: JWKS modulus",
            '{"kty": "RSA", "kid": "'
            + _pick(r, B64URL, 20)
            + '", "use": "sig", "n": "'
            + _pick(r, B64URL, 342)
            + '", "e": "AQAB"}',
        ),
        ("public: SSH public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _pick(r, B64, 43) + " ops@acme"),
        (
            "public: certificate",
            "-----BEGIN CERTIFICATE-----\n"
            + "\n".join(_pick(r, B64, 64) for _ in range(6))
            + "\n-----END CERTIFICATE-----",
        ),
        (
            "public: kubeconfig CA data",
            "clusters:\n- cluster:\n    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"
            + _pick(r, B64, 200)
            + "\n    server: https://10.0.0.10:6443",
        ),
        ("public: HubSpot portal id", "HUBSPOT_PORTAL_ID=" + str(r.randrange(10**7, 10**8))),
        ("public: Mailchimp list id", "MAILCHIMP_AUDIENCE_ID=" + _pick(r, HEX, 10)),
        ("public: Klaviyo site id", "klaviyo.js?company_id=" + _pick(r, UPPER_DIGITS, 6)),
        ("public: Square application id", "SQUARE_APPLICATION_ID=sq0idp-" + _pick(r, B64URL, 22)),
        (
            "public: Adyen merchant account",
            "ADYEN_MERCHANT_ACCOUNT=AcmeECOM\nADYEN_CLIENT_KEY=live_" + _pick(r, UPPER_DIGITS, 32),
        ),
        ("public: Vault accessor and paths", "accessor: " + _pick(r, ALNUM, 24) + "\npath: secret/data/billing/db"),
        ("public: Doppler project config", "doppler setup --project billing --config prd"),
        ("public: Infisical workspace id", "INFISICAL_PROJECT_ID=" + _uuid(r)),
        ("public: Quay robot name", 'docker login -u="acme+deployer" quay.io   # asks for the token'),
        (
            "public: HF model id and revision",
            'model = AutoModel.from_pretrained("mistralai/Mistral-7B-v0.3", revision="' + _pick(r, HEX, 40) + '")',
        ),
        ("public: commit and tree SHAs", "commit " + _pick(r, HEX, 40) + "\ntree " + _pick(r, HEX, 40)),
        # placeholders and references
        ("placeholder: Groq", "GROQ_API_KEY=gsk_your_key_here"),
        ("placeholder: HF", "HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        ("placeholder: OpenRouter", 'OPENROUTER_API_KEY="sk-or-v1-..."'),
        ("placeholder: Telegram", "TELEGRAM_BOT_TOKEN=<your-bot-token>"),
        (
            "placeholder: Azure conn",
            "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=<account>;AccountKey=<key>;EndpointSuffix=core.windows.net",
        ),
        (
            "placeholder: Slack webhook",
            "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/XXXXXXXXX/XXXXXXXXX/XXXXXXXXXXXXXXXXXXXXXXXX",
        ),
        ("placeholder: Django", "DJANGO_SECRET_KEY='replace-me-with-a-long-random-string'"),
        ("placeholder: Django env ref", 'export DJANGO_SECRET_KEY="$(openssl rand -base64 48)"'),
        ("placeholder: password in runbook", "the password for the staging db is in 1Password under 'staging-db'"),
        ("placeholder: password prose", "Ask Dana for the root password; never write it here."),
        ("placeholder: password rule", "The password must be at least 12 characters and include a symbol."),
        ("placeholder: helm values", "password: {{ .Values.postgresql.auth.password | quote }}"),
        (
            "placeholder: terraform var",
            "password = var.db_password\nsecret    = data.aws_secretsmanager_secret_version.db.secret_string",
        ),
        ("placeholder: compose env ref", "environment:\n  - POSTGRES_PASSWORD=${POSTGRES_PASSWORD:?set it in .env}"),
        (
            "placeholder: k8s secretKeyRef",
            "env:\n- name: API_TOKEN\n  valueFrom:\n    secretKeyRef:\n      name: api\n      key: token",
        ),
        ("placeholder: op reference", 'DB_PASSWORD="op://Production/billing-db/password"'),
        ("placeholder: vault reference", "DATABASE_PASSWORD=vault:secret/data/billing#password"),
        (
            "placeholder: docker login prompt",
            "docker login harbor.acme.io -u 'robot$ci+pusher'   # paste the secret when asked",
        ),
        ("placeholder: stars", "XAI_API_KEY=xai-****************************************"),
        ("placeholder: angle", "Authorization: SSWS <okta-api-token>"),
        ("placeholder: kubeconfig", "users:\n- name: admin\n  user:\n    token: <paste token here>"),
        ("placeholder: env example", "MISTRAL_API_KEY=\nCOHERE_API_KEY=\nTOGETHER_API_KEY="),
        (
            "placeholder: python getenv",
            'api_key = os.getenv("PERPLEXITY_API_KEY")\nclient = OpenAI(api_key=api_key, base_url="https://api.perplexity.ai")',
        ),
        ("placeholder: masked", "The key ends in ...a1b2 (shown as sk-...a1b2 in the dashboard)."),
        # prose and config that names credentials
        (
            "prose: rotation note",
            "Rotated the Stripe restricted key and the SendGrid key on 2025-05-01; both live in Doppler now.",
        ),
        ("prose: token ttl config", "ACCESS_TOKEN_TTL=900\nREFRESH_TOKEN_TTL=2592000\nTOKEN_AUDIENCE=api.acme.io"),
        (
            "prose: password policy yaml",
            "password_policy:\n  min_length: 14\n  require_symbols: true\n  max_age_days: 90",
        ),
        ("prose: secret names", "secrets:\n  - DB_PASSWORD\n  - STRIPE_SECRET_KEY\n  - SENTRY_AUTH_TOKEN"),
        (
            "prose: token format doc",
            "Groq keys start with gsk_, Replicate tokens with r8_, Hugging Face tokens with hf_.",
        ),
        (
            "prose: presigned explanation",
            "A presigned URL carries X-Amz-Signature and expires after X-Amz-Expires seconds.",
        ),
        ("prose: SAS explanation", "A SAS token has sv, se, sp and sig parameters; never commit one."),
        ("prose: signature field", 'X-Hub-Signature-256 is "sha256=" plus the HMAC hex of the body.'),
        ("prose: webhook id", "GitHub webhook delivery " + _uuid(r) + " returned 200."),
        ("prose: CSRF field name", '<input type="hidden" name="csrf_token" value="{{ csrf_token() }}">'),
        # random-looking data
        (
            "data: request ids",
            "x-request-id: " + _uuid(r) + "\nx-amzn-trace-id: Root=1-" + _pick(r, HEX, 8) + "-" + _pick(r, HEX, 24),
        ),
        ("data: S3 ETag", 'ETag: "' + _pick(r, HEX, 32) + '-12"'),
        ("data: base64 thumbnail", "thumb: data:image/webp;base64," + _b64(r, 240)),
        (
            "data: Mongo ObjectIds",
            "_id: ObjectId('" + _pick(r, HEX, 24) + "'), owner: ObjectId('" + _pick(r, HEX, 24) + "')",
        ),
        ("data: nanoid", "short id V1StGXR8_Z5jdHi6B-myT and " + _pick(r, B64URL, 21)),
        (
            "data: public URL with query",
            "https://www.google.com/search?q=memagent&oq=memagent&sourceid=chrome&ie=UTF-8&ei=" + _pick(r, B64URL, 22),
        ),
        (
            "data: unsigned GCS URL",
            "https://storage.googleapis.com/acme-public/assets/logo-" + _pick(r, HEX, 12) + ".svg",
        ),
        (
            "data: public S3 URL",
            "https://acme-public.s3.amazonaws.com/downloads/memagent-1.4.2.tar.gz?versionId=" + _pick(r, B64URL, 32),
        ),
        ("data: blob URL without SAS", "https://acmeexports.blob.core.windows.net/public/readme.txt"),
        ("data: Bitcoin address", "tips: bc1q" + _pick(r, "023456789acdefghjklmnpqrstuvwxyz", 38)),
        (
            "data: license key id",
            "License id LIC-"
            + _pick(r, UPPER_DIGITS, 4)
            + "-"
            + _pick(r, UPPER_DIGITS, 4)
            + " (public; the key file is on the server)",
        ),
    ]


def lookalikes() -> list[Sample]:
    return [Sample(kind, text, "") for kind, text in _lookalike_texts()]
