"""A THIRD held-out corpus for the secret scanner, written while the second one was being measured.

``bench/secrets_heldout.py`` and ``bench/secrets_heldout2.py`` have each been measured and
their misses looked at, so neither is held out any more. This set was written from the
providers' published formats alone, by someone who never opened the scanner's rules and
never ran a scanner on it, so its first measurement says how the rules generalise. It
leans on providers and formats the first two sets leave out, and on the places a
credential is really pasted: a ``.env`` line, a YAML or JSON config, a shell ``export``, a
``curl`` header, a connection string, a kubeconfig or docker config, a runbook sentence, a
Python or JS snippet, a Markdown note. Same rules as before: published formats, synthetic
values, data only; change a sample only to correct a misstated format, never to make a
rule pass.

Invariants:
- Data only and deterministic (a ``random.Random`` seeded per sample).
- No real credential, and no provider prefix written out whole in this file.
- Every credential sample carries the credential (``secret``); look-alikes carry "".

Measured once, never tuned on (the scanner of commit 365fb67, `validate` of
``/knowledge/notes.md``): 122 of 139 credentials caught (87.8 %), 3 of 100 look-alikes
refused. From then on it is a tuning set, like the two before it.
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
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(f"heldout3/{name}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        digits_ok = n < 8 or not (set(alphabet) & set(string.digits)) or any(c.isdigit() for c in out)
        if digits_ok and (not any(c.isalpha() for c in alphabet) or any(c.isalpha() for c in out)):
            return out


def _pw(rng: random.Random, n: int = 14) -> str:
    while True:
        out = _pick(rng, ALNUM + "!#%&*?+=-_.", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(not c.isalnum() for c in out):
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


# DER openings, so the base64 bodies start the way real ones do.
_RSA_PKCS1 = bytes.fromhex("308204a40201000282010100")
_PKCS8_RSA = bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8") + _RSA_PKCS1
_EC_P256_HEAD = bytes.fromhex("30770201010420")
_EC_P256_MID = bytes.fromhex("a00a06082a8648ce3d030107a144034200") + b"\x04"
_SPKI_RSA = bytes.fromhex("30820122300d06092a864886f70d01010105000382010f003082010a0282010100")


def _rsa_body(r: random.Random) -> str:
    return _wrap(base64.b64encode(_RSA_PKCS1 + r.randbytes(1180)).decode())


def _pkcs8_body(r: random.Random) -> str:
    return _wrap(base64.b64encode(_PKCS8_RSA + r.randbytes(1180)).decode())


def _ec_body(r: random.Random) -> str:
    return _wrap(base64.b64encode(_EC_P256_HEAD + r.randbytes(32) + _EC_P256_MID + r.randbytes(64)).decode())


def _openssh_body(r: random.Random) -> str:
    pub = r.randbytes(32)
    blob = _ssh_str(b"ssh-ed25519") + _ssh_str(pub)
    check = r.randbytes(4)
    priv = check + check + blob + _ssh_str(r.randbytes(32) + pub) + _ssh_str(b"deploy@ci")
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


def _ssh_pub(r: random.Random, algo: bytes, *parts: bytes) -> str:
    return base64.b64encode(_ssh_str(algo) + b"".join(_ssh_str(p) for p in parts)).decode()


def _discord_token(r: random.Random) -> str:
    user_id = str(r.randrange(10**17, 10**19)).encode()
    return _b64u(user_id) + "." + _pick(r, B64URL, 6) + "." + _pick(r, B64URL, 38)


def _basic(user: str, secret: str) -> str:
    return base64.b64encode(f"{user}:{secret}".encode()).decode()


# Public parts that sit next to a credential (ids, account numbers): not the secret.
_IDS = _rng("public ids")
_AWS_KEY_ID = "AK" + "IA" + _pick(_IDS, UPPER_DIGITS, 16)
_AWS_ACCOUNT = str(_IDS.randrange(10**11, 10**12))
_GCS_ACCESS_ID = "GO" + "OG1E" + _pick(_IDS, UPPER_DIGITS, 55)
_R2_ACCOUNT = _pick(_IDS, HEX, 32)
_R2_KEY_ID = _pick(_IDS, HEX, 32)
_SPACES_KEY = "DO" + "00" + _pick(_IDS, UPPER_DIGITS, 16)
_B2_KEY_ID = "005" + _pick(_IDS, HEX, 22)
_TWILIO_SID = "A" + "C" + _pick(_IDS, HEX, 32)
_PAYPAL_CLIENT = "A" + _pick(_IDS, B64URL, 79)
_AZ_APP = _uuid(_IDS)
_AZ_TENANT = _uuid(_IDS)
_OKTA_CLIENT = "0o" + "a" + _pick(_IDS, ALNUM, 17)
_INFISICAL_CLIENT = _uuid(_IDS)
_APPROLE_ID = _uuid(_IDS)
_DD_SITE_KEY = _pick(_IDS, HEX, 32)


def _supabase_service(r: random.Random) -> str:
    claims = {"iss": "supabase", "ref": _pick(r, LOWER, 20), "role": "service_role", "iat": 1718000000}
    claims["exp"] = 2033576000
    return _jwt(r, {"alg": "HS256", "typ": "JWT"}, claims)


def _k8s_sa_jwt(r: random.Random) -> str:
    claims = {
        "iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": "ci",
        "kubernetes.io/serviceaccount/secret.name": "deployer-token-" + _pick(r, LOWER_DIGITS, 5),
        "kubernetes.io/serviceaccount/service-account.name": "deployer",
        "kubernetes.io/serviceaccount/service-account.uid": _uuid(r),
        "sub": "system:serviceaccount:ci:deployer",
    }
    return _jwt(r, {"alg": "RS256", "kid": _pick(r, B64URL, 43)}, claims, sig_len=342)


def _kube_client_key(r: random.Random) -> str:
    pem = "-----BEGIN RSA PRIV" + "ATE KEY-----\n" + _rsa_body(r) + "\n-----END RSA PRIVATE KEY-----\n"
    return base64.b64encode(pem.encode()).decode()


def _dockerconfigjson(r: random.Random) -> str:
    auth = _basic("acme+deployer", _pick(r, UPPER_DIGITS, 64))
    return base64.b64encode(json.dumps({"auths": {"quay.io": {"auth": auth}}}).encode()).decode()


def _sentry_org(r: random.Random) -> str:
    claims = {"iat": 1718000000.1, "url": "https://sentry.io", "region_url": "https://us.sentry.io", "org": "acme"}
    return "sntry" + "s_" + _b64u(json.dumps(claims).encode()) + "_" + _pick(r, B64URL, 43)


def _adyen(r: random.Random) -> str:
    return "AQ" + "E" + _pick(r, B64, 93) + "==-" + _b64(r, 32) + "-" + _pick(r, ALNUM + "+;}%=<>", 16)


_PPK_HEAD = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ops@jump\nPublic-Lines: 1\n"


# (kind, template with {s}, how to build the secret)
_CREDENTIALS: list[tuple[str, str, object]] = [
    # --- cloud storage and cloud accounts ---
    (
        "cloud: AWS shared credentials file",
        "[prod]\naws_access_key_id = " + _AWS_KEY_ID + "\naws_secret_access_key = {s}\nregion = eu-central-1",
        lambda r: _pick(r, B64, 40),
    ),
    (
        "cloud: AWS session token export",
        "export AWS_SESSION_TOKEN={s}",
        lambda r: "IQoJb3JpZ2luX2Vj" + _pick(r, B64, 600),
    ),
    (
        "cloud: Azure storage connection string in appsettings.json",
        '{\n  "ConnectionStrings": {\n    "Blob": "DefaultEndpointsProtocol=https;AccountName=acmeexports;'
        'AccountKey={s};EndpointSuffix=core.windows.net"\n  }\n}',
        lambda r: _b64(r, 64),
    ),
    (
        "cloud: Azure blob SAS link in Markdown",
        "Grab the dump [here](https://acmebackups.blob.core.windows.net/pg/2025-06-01.dump?sv=2022-11-02&ss=b"
        "&srt=o&sp=r&se=2025-07-01T00:00:00Z&st=2025-06-01T00:00:00Z&spr=https&sig={s}), valid for a month.",
        lambda r: _pct(_b64(r, 32)),
    ),
    (
        "cloud: Azure Service Bus connection string in C#",
        'var client = new ServiceBusClient("Endpoint=sb://acme-orders.servicebus.windows.net/;'
        'SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}");',
        lambda r: _b64(r, 32),
    ),
    (
        "cloud: GCS V4 signed URL in curl",
        "curl -o q2.csv 'https://storage.googleapis.com/acme-reports/q2.csv?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        "&X-Goog-Credential=signer%40acme-prod.iam.gserviceaccount.com%2F20250601%2Fauto%2Fstorage%2Fgoog4_request"
        "&X-Goog-Date=20250601T120000Z&X-Goog-Expires=3600&X-Goog-SignedHeaders=host&X-Goog-Signature={s}'",
        lambda r: _pick(r, HEX, 512),
    ),
    (
        "cloud: GCS HMAC secret in .boto",
        "[Credentials]\ngs_access_key_id = " + _GCS_ACCESS_ID + "\ngs_secret_access_key = {s}",
        lambda r: _pick(r, B64, 40),
    ),
    (
        "cloud: Cloudflare R2 secret in rclone.conf",
        "[r2]\ntype = s3\nprovider = Cloudflare\naccess_key_id = "
        + _R2_KEY_ID
        + "\nsecret_access_key = {s}\nendpoint = https://"
        + _R2_ACCOUNT
        + ".r2.cloudflarestorage.com",
        lambda r: _pick(r, HEX, 64),
    ),
    (
        "cloud: DigitalOcean Spaces secret in .s3cfg",
        "[default]\naccess_key = " + _SPACES_KEY + "\nsecret_key = {s}\nhost_base = fra1.digitaloceanspaces.com",
        lambda r: _pick(r, B64, 43),
    ),
    (
        "cloud: Backblaze B2 application key on the command line",
        "b2 account authorize " + _B2_KEY_ID + " {s}",
        lambda r: "K0" + "05" + _pick(r, ALNUM + "/+", 27),
    ),
    (
        "cloud: DigitalOcean token in doctl config",
        "access-token: {s}\ncontext: default\noutput: text",
        lambda r: "do" + "p_v1_" + _pick(r, HEX, 64),
    ),
    ("cloud: Linode token in Terraform", 'provider "linode" {\n  token = "{s}"\n}', lambda r: _pick(r, HEX, 64)),
    # --- chat bots and social networks ---
    (
        "chat: Telegram token in a setWebhook curl",
        "curl -F url=https://bots.acme.io/tg https://api.telegram.org/bot{s}/setWebhook",
        lambda r: str(r.randrange(10**9, 10**10)) + ":AA" + _pick(r, B64URL, 33),
    ),
    (
        "chat: Telegram token in docker-compose",
        "services:\n  bot:\n    image: acme/tgbot\n    environment:\n      - TELEGRAM_BOT_TOKEN={s}",
        lambda r: str(r.randrange(10**8, 10**9)) + ":AA" + _pick(r, B64URL, 33),
    ),
    ("chat: Discord bot token in discord.js", "client.login('{s}');", _discord_token),
    ("chat: Discord bot token in config.json", '{\n  "prefix": "!",\n  "token": "{s}"\n}', _discord_token),
    (
        "chat: Slack bot token in Bolt",
        'app = App(token="{s}", signing_secret=os.environ["SLACK_SIGNING_SECRET"])',
        lambda r: (
            "xo"
            + "xb-"
            + str(r.randrange(10**10, 10**12))
            + "-"
            + str(r.randrange(10**12, 10**13))
            + "-"
            + _pick(r, ALNUM, 24)
        ),
    ),
    ("chat: Slack signing secret in YAML", "slack:\n  signing_secret: {s}", lambda r: _pick(r, HEX, 32)),
    (
        "chat: Slack configuration token export",
        "export SLACK_CONFIG_TOKEN={s}",
        lambda r: "xo" + "xe.xo" + "xp-1-" + _pick(r, ALNUM, 150),
    ),
    (
        "chat: Twitch chat OAuth password",
        "PASS {s}\nNICK acme_bot\nJOIN #acme",
        lambda r: "oau" + "th:" + _pick(r, LOWER_DIGITS, 30),
    ),
    (
        "social: X bearer token in tweepy",
        'client = tweepy.Client(bearer_token="{s}")',
        lambda r: "A" * 22 + _pick(r, ALNUM, 20) + "%2B" + _pick(r, ALNUM, 18) + "%3D" + _pick(r, ALNUM, 50),
    ),
    (
        "social: X user access token in .env",
        "X_ACCESS_TOKEN={s}",
        lambda r: str(r.randrange(10**18, 10**19)) + "-" + _pick(r, ALNUM, 40),
    ),
    (
        "social: Facebook page token in a Graph curl",
        "curl -G -d 'access_token={s}' https://graph.facebook.com/v19.0/me/accounts",
        lambda r: "EA" + "A" + r.choice("BGIJ") + _pick(r, ALNUM, 180),
    ),
    ("social: Facebook app secret in PHP", "'app_secret' => '{s}',", lambda r: _pick(r, HEX, 32)),
    (
        "social: Instagram login token in JSON",
        '{"instagram": {"user_id": "17841400000000000", "access_token": "{s}"}}',
        lambda r: "IG" + "AA" + _pick(r, B64URL, 180),
    ),
    (
        "social: LinkedIn access token in a header",
        'curl https://api.linkedin.com/v2/userinfo -H "Authorization: Bearer {s}"',
        lambda r: "A" + "Q" + r.choice("UVWX") + _pick(r, B64URL, 340),
    ),
    (
        "social: Reddit client secret in praw.ini",
        "[modbot]\nclient_id=" + _pick(_IDS, B64URL, 22) + "\nclient_secret={s}\nuser_agent=modbot/1.0",
        lambda r: _pick(r, B64URL, 30),
    ),
    (
        "social: Mastodon access token in Python",
        'm = Mastodon(access_token="{s}", api_base_url="https://fosstodon.org")',
        lambda r: _pick(r, B64URL, 43),
    ),
    # --- payment and marketing ---
    (
        "payment: Stripe webhook secret in .env",
        "STRIPE_WEBHOOK_SECRET={s}",
        lambda r: "wh" + "sec_" + _pick(r, ALNUM, 32),
    ),
    ("payment: Stripe key in Ruby", "Stripe.api_key = '{s}'", lambda r: "sk" + "_live_" + _pick(r, ALNUM, 24)),
    (
        "payment: Stripe restricted key in curl -u",
        "curl https://api.stripe.com/v1/charges -u {s}:",
        lambda r: "rk" + "_live_" + _pick(r, ALNUM, 99),
    ),
    (
        "payment: Square token in the Node client",
        "const client = new Client({ accessToken: '{s}', environment: Environment.Production });",
        lambda r: "EA" + "AA" + _pick(r, B64URL, 60),
    ),
    (
        "payment: Square application secret in YAML",
        "square:\n  application_secret: {s}",
        lambda r: "sq0" + "csp-" + _pick(r, B64URL, 43),
    ),
    (
        "payment: PayPal secret in an OAuth curl",
        'curl -u "'
        + _PAYPAL_CLIENT
        + ':{s}" -d grant_type=client_credentials https://api-m.paypal.com/v1/oauth2/token',
        lambda r: "E" + _pick(r, B64URL, 79),
    ),
    (
        "payment: Adyen API key in Java",
        'Client client = new Client("{s}", Environment.LIVE, "acme-live");',
        _adyen,
    ),
    (
        "marketing: Mandrill key in Python",
        'mailchimp = MailchimpTransactional.Client("{s}")',
        lambda r: "m" + "d-" + _pick(r, B64URL, 22),
    ),
    (
        "marketing: Mailchimp key in JS",
        "client.setConfig({ apiKey: '{s}', server: 'us21' });",
        lambda r: _pick(r, HEX, 32) + "-us21",
    ),
    (
        "marketing: SendGrid key in Node",
        "sgMail.setApiKey('{s}');",
        lambda r: "S" + "G." + _pick(r, B64URL, 22) + "." + _pick(r, B64URL, 43),
    ),
    (
        "marketing: SendGrid key in Postfix sasl_passwd",
        "[smtp.sendgrid.net]:587 apikey:{s}",
        lambda r: "S" + "G." + _pick(r, B64URL, 22) + "." + _pick(r, B64URL, 43),
    ),
    (
        "marketing: Twilio auth token in curl -u",
        "curl -X POST https://api.twilio.com/2010-04-01/Accounts/"
        + _TWILIO_SID
        + "/Messages.json -u "
        + _TWILIO_SID
        + ":{s}",
        lambda r: _pick(r, HEX, 32),
    ),
    ("marketing: Twilio API key secret", "TWILIO_API_SECRET={s}", lambda r: _pick(r, ALNUM, 32)),
    (
        "marketing: Mailgun key in curl --user",
        "curl -s --user 'api:{s}' https://api.eu.mailgun.net/v3/mg.acme.io/messages -F to=ops@acme.io",
        lambda r: _pick(r, HEX, 32) + "-" + _pick(r, HEX, 8) + "-" + _pick(r, HEX, 8),
    ),
    (
        "marketing: Postmark account token in Python",
        'headers = {"Accept": "application/json", "X-Postmark-Account-Token": "{s}"}',
        _uuid,
    ),
    (
        "marketing: Klaviyo key in a header",
        "-H 'Authorization: Klaviyo-API-Key {s}' -H 'revision: 2024-10-15'",
        lambda r: "p" + "k_" + _pick(r, HEX, 34),
    ),
    (
        "marketing: HubSpot token in Python",
        'api_client = HubSpot(access_token="{s}")',
        lambda r: "pat" + "-eu1-" + _uuid(r),
    ),
    (
        "marketing: Shopify admin token in curl",
        "curl -H 'X-Shopify-Access-Token: {s}' https://acme.myshopify.com/admin/api/2024-10/shop.json",
        lambda r: "shp" + "at_" + _pick(r, HEX, 32),
    ),
    ("marketing: Shopify app secret in .env", "SHOPIFY_API_SECRET={s}", lambda r: "shp" + "ss_" + _pick(r, HEX, 32)),
    # --- identity providers ---
    (
        "identity: Okta token in the Terraform provider",
        'provider "okta" {\n  org_name  = "acme"\n  base_url  = "okta.com"\n  api_token = "{s}"\n}',
        lambda r: "00" + _pick(r, B64URL, 40),
    ),
    (
        "identity: Okta client secret in Spring YAML",
        "spring:\n  security:\n    oauth2:\n      client:\n        registration:\n          okta:\n"
        "            client-id: " + _OKTA_CLIENT + "\n            client-secret: {s}",
        lambda r: _pick(r, B64URL, 64),
    ),
    (
        "identity: Auth0 secret in ManagementClient",
        "new ManagementClient({ domain: 'acme.eu.auth0.com', clientId: '"
        + _pick(_IDS, ALNUM, 32)
        + "', clientSecret: '{s}' });",
        lambda r: _pick(r, B64URL, 64),
    ),
    (
        "identity: Azure AD secret in az login",
        "az login --service-principal -u " + _AZ_APP + " -p '{s}' --tenant " + _AZ_TENANT,
        lambda r: _pick(r, ALNUM, 3) + "8Q~" + _pick(r, ALNUM + "_~.-", 34),
    ),
    (
        "identity: Azure AD secret in terraform.tfvars",
        'client_id     = "' + _AZ_APP + '"\nclient_secret = "{s}"',
        lambda r: _pick(r, ALNUM, 3) + "7Q~" + _pick(r, ALNUM + "_~.-", 34),
    ),
    (
        "identity: Keycloak secret in a token request",
        "curl -d grant_type=client_credentials -d client_id=billing -d client_secret={s} "
        "https://sso.acme.io/realms/acme/protocol/openid-connect/token",
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "identity: Clerk secret key in .env.local",
        "CLERK_SECRET_KEY={s}",
        lambda r: "sk" + "_live_" + _pick(r, ALNUM, 42),
    ),
    ("identity: Supabase service role key", "SUPABASE_SERVICE_ROLE_KEY={s}", _supabase_service),
    # --- secret managers ---
    (
        "vault: Vault token in hvac",
        'client = hvac.Client(url="https://vault.acme.io:8200", token="{s}")',
        lambda r: "hv" + "s." + _pick(r, B64URL, 91),
    ),
    (
        "vault: Vault unseal key in a runbook",
        "Unseal: run `vault operator unseal` three times. Key 1 (Maria): {s}",
        lambda r: _b64(r, 33),
    ),
    (
        "vault: Vault AppRole secret_id",
        "vault write auth/approle/login role_id=" + _APPROLE_ID + " secret_id={s}",
        _uuid,
    ),
    (
        "vault: Doppler service account token in Actions",
        "    env:\n      DOPPLER_TOKEN: {s}\n    run: doppler run -- make deploy",
        lambda r: "dp" + ".sa." + _pick(r, ALNUM, 43),
    ),
    (
        "vault: 1Password service account token in Actions",
        "      - uses: 1password/load-secrets-action@v2\n        env:\n          OP_SERVICE_ACCOUNT_TOKEN: {s}",
        lambda r: "op" + "s_eyJ" + _pick(r, B64URL, 600),
    ),
    (
        "vault: Infisical client secret in docker run",
        "docker run -e INFISICAL_CLIENT_ID=" + _INFISICAL_CLIENT + " -e INFISICAL_CLIENT_SECRET={s} acme/api",
        lambda r: _pick(r, HEX, 64),
    ),
    (
        "vault: AWS Secrets Manager get-secret-value output",
        '{\n    "ARN": "arn:aws:secretsmanager:us-east-1:' + _AWS_ACCOUNT + ':secret:prod/billing/db-Ab12Cd",\n'
        '    "Name": "prod/billing/db",\n'
        '    "SecretString": "{\\"username\\":\\"billing\\",\\"password\\":\\"{s}\\",\\"engine\\":\\"postgres\\"}"\n}',
        lambda r: _pw(r, 20),
    ),
    # --- clusters and container registries ---
    (
        "cluster: kubeconfig with a service-account token",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: https://10.0.0.1:6443\n"
        "users:\n- name: ci\n  user:\n    token: {s}\ncontexts:\n- name: ci@prod\n  context: {cluster: prod, user: ci}",
        _k8s_sa_jwt,
    ),
    (
        "cluster: kubeconfig client-key-data",
        "users:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"
        + _pick(_IDS, B64, 60)
        + "\n    client-key-data: {s}",
        _kube_client_key,
    ),
    (
        "cluster: kubeconfig basic-auth password",
        "users:\n- name: admin\n  user:\n    username: admin\n    password: {s}",
        lambda r: _pw(r, 18),
    ),
    (
        "cluster: Kubernetes Secret with a base64 password",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  username: YXBw\n  password: {s}",
        lambda r: base64.b64encode(_pw(r, 18).encode()).decode(),
    ),
    (
        "registry: dockerconfigjson pull secret",
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {s}",
        _dockerconfigjson,
    ),
    (
        "registry: podman auth.json for Quay",
        '{"auths": {"quay.io": {"auth": "{s}"}}}',
        lambda r: _basic("acme+deployer", _pick(r, UPPER_DIGITS, 64)),
    ),
    (
        "registry: Docker Hub PAT inlined in a workflow",
        "      - uses: docker/login-action@v3\n        with:\n          username: acmebot\n          password: {s}",
        lambda r: "dckr" + "_pat_" + _pick(r, B64URL, 27),
    ),
    (
        "registry: GHCR login with a fine-grained PAT",
        "docker login ghcr.io -u acme-ci -p {s}",
        lambda r: "github" + "_pat_" + _pick(r, ALNUM, 22) + "_" + _pick(r, ALNUM, 59),
    ),
    (
        "registry: GitLab deploy token in a clone URL",
        "git clone https://gitlab+deploy-token-42:{s}@gitlab.com/acme/infra.git",
        lambda r: "gl" + "dt-" + _pick(r, B64URL, 20),
    ),
    (
        "registry: GitLab runner token in config.toml",
        '[[runners]]\n  name = "docker-1"\n  url = "https://gitlab.com"\n  token = "{s}"\n  executor = "docker"',
        lambda r: "gl" + "rt-" + _pick(r, B64URL, 20),
    ),
    (
        "registry: GitLab trigger token in curl",
        "curl -X POST -F token={s} -F ref=main https://gitlab.com/api/v4/projects/42/trigger/pipeline",
        lambda r: "gl" + "ptt-" + _pick(r, HEX, 40),
    ),
    # --- developer platforms ---
    (
        "dev: gh CLI hosts.yml",
        "github.com:\n    user: acme-ci\n    oauth_token: {s}\n    git_protocol: https",
        lambda r: "gh" + "o_" + _pick(r, ALNUM, 36),
    ),
    (
        "dev: GitHub installation token in Python",
        'gh = Github(auth=Auth.Token("{s}"))',
        lambda r: "gh" + "s_" + _pick(r, ALNUM, 36),
    ),
    ("dev: npm token in .yarnrc.yml", 'npmAuthToken: "{s}"', lambda r: "np" + "m_" + _pick(r, ALNUM, 36)),
    (
        "dev: PyPI token in .pypirc",
        "[pypi]\n  username = __token__\n  password = {s}",
        lambda r: "py" + "pi-AgEIcHlwaS5vcmc" + _pick(r, B64URL, 140),
    ),
    (
        "dev: Atlassian token in a Jira curl",
        "curl -u ops@acme.io:{s} https://acme.atlassian.net/rest/api/3/myself",
        lambda r: "ATA" + "TT3xFfGF0" + _pick(r, B64URL, 171) + "=" + _pick(r, HEX, 8).upper(),
    ),
    (
        "dev: Linear key in JS",
        'const linear = new LinearClient({ apiKey: "{s}" });',
        lambda r: "lin" + "_api_" + _pick(r, ALNUM, 40),
    ),
    ("dev: Sentry org token in .sentryclirc", "[auth]\ntoken={s}", _sentry_org),
    ("dev: Datadog API key in datadog.yaml", "api_key: {s}\nsite: datadoghq.eu", lambda r: _pick(r, HEX, 32)),
    ("dev: Datadog application key export", "export DD_APP_KEY={s}", lambda r: _pick(r, HEX, 40)),
    (
        "dev: New Relic user key in a NerdGraph curl",
        "curl https://api.newrelic.com/graphql -H 'API-Key: {s}' -d '{ \"query\": \"{ actor { user { name } } }\" }'",
        lambda r: "NR" + "AK-" + _pick(r, UPPER_DIGITS, 27),
    ),
    (
        "dev: New Relic license key in newrelic.yml",
        "common: &default_settings\n  license_key: '{s}'\n  app_name: billing",
        lambda r: _pick(r, HEX, 36) + "NR" + "AL",
    ),
    (
        "dev: Grafana Cloud token in Alloy",
        'prometheus.remote_write "cloud" {\n  endpoint {\n    basic_auth {\n      username = "1234567"\n'
        '      password = "{s}"\n    }\n  }\n}',
        lambda r: "gl" + "c_eyJ" + _pick(r, B64, 150) + "==",
    ),
    ("dev: Vercel token on the command line", "vercel deploy --prod --token {s}", lambda r: _pick(r, ALNUM, 24)),
    (
        "dev: Netlify token on the command line",
        "netlify deploy --prod --auth {s}",
        lambda r: "nf" + "p_" + _pick(r, ALNUM, 36),
    ),
    ("dev: Heroku API key export", "export HEROKU_API_KEY={s}", _uuid),
    (
        "dev: Fly.io token in .env",
        'FLY_API_TOKEN="{s}"',
        lambda r: "Fly" + "V1 fm2_lJPE" + _pick(r, B64, 300),
    ),
    (
        "dev: Cloudflare API token in a verify curl",
        'curl https://api.cloudflare.com/client/v4/user/tokens/verify -H "Authorization: Bearer {s}"',
        lambda r: _pick(r, B64URL, 40),
    ),
    (
        "dev: Cloudflare global API key in headers",
        "-H 'X-Auth-Email: ops@acme.io' -H 'X-Auth-Key: {s}'",
        lambda r: _pick(r, HEX, 37),
    ),
    (
        "dev: Terraform Cloud token in .terraformrc",
        'credentials "app.terraform.io" {\n  token = "{s}"\n}',
        lambda r: _pick(r, ALNUM, 14) + ".atlas" + "v1." + _pick(r, ALNUM, 67),
    ),
    (
        "dev: Postman key in a header",
        "curl https://api.getpostman.com/collections -H 'X-Api-Key: {s}'",
        lambda r: "PM" + "AK-" + _pick(r, HEX, 24) + "-" + _pick(r, HEX, 34),
    ),
    (
        "dev: Airtable token in JS",
        "const base = new Airtable({ apiKey: '{s}' }).base('app" + _pick(_IDS, ALNUM, 14) + "');",
        lambda r: "pa" + "t" + _pick(r, ALNUM, 14) + "." + _pick(r, HEX, 64),
    ),
    (
        "dev: Notion integration secret in Python",
        'notion = Client(auth="{s}")',
        lambda r: "sec" + "ret_" + _pick(r, ALNUM, 43),
    ),
    (
        "dev: Databricks token in .databrickscfg",
        "[DEFAULT]\nhost = https://adb-1234567890123456.7.azuredatabricks.net\ntoken = {s}",
        lambda r: "da" + "pi" + _pick(r, HEX, 32),
    ),
    ("dev: Supabase access token for the CLI", "supabase login --token {s}", lambda r: "sb" + "p_" + _pick(r, HEX, 40)),
    (
        "dev: Buildkite token in curl",
        'curl -H "Authorization: Bearer {s}" https://api.buildkite.com/v2/user',
        lambda r: "bk" + "ua_" + _pick(r, HEX, 40),
    ),
    (
        "dev: Contentful management token",
        "CONTENTFUL_MANAGEMENT_TOKEN={s}",
        lambda r: "CF" + "PAT-" + _pick(r, B64URL, 43),
    ),
    (
        "dev: Dropbox access token in Python",
        "dbx = dropbox.Dropbox('{s}')",
        lambda r: "s" + "l." + _pick(r, B64URL, 138),
    ),
    # --- model providers ---
    (
        "model: Anthropic admin key in curl",
        "curl https://api.anthropic.com/v1/organizations/users -H 'x-api-key: {s}' -H 'anthropic-version: 2023-06-01'",
        lambda r: "sk" + "-ant-admin01-" + _pick(r, B64URL, 93) + "AA",
    ),
    (
        "model: Anthropic key in Python",
        'client = anthropic.Anthropic(api_key="{s}")',
        lambda r: "sk" + "-ant-api03-" + _pick(r, B64URL, 93) + "AA",
    ),
    ("model: OpenAI project key in .env", "OPENAI_API_KEY={s}", lambda r: "sk" + "-proj-" + _pick(r, B64URL, 156)),
    (
        "model: OpenAI service account key in LiteLLM YAML",
        "model_list:\n  - model_name: gpt-4o\n    litellm_params:\n      model: openai/gpt-4o\n      api_key: {s}",
        lambda r: "sk" + "-svcacct-" + _pick(r, B64URL, 156),
    ),
    (
        "model: Groq key in a header",
        'curl https://api.groq.com/openai/v1/models -H "Authorization: Bearer {s}"',
        lambda r: "gs" + "k_" + _pick(r, ALNUM, 52),
    ),
    (
        "model: Mistral key in Continue config",
        '{"models": [{"title": "Codestral", "provider": "mistral", "apiKey": "{s}"}]}',
        lambda r: _pick(r, ALNUM, 32),
    ),
    ("model: Cohere key export", "export CO_API_KEY={s}", lambda r: _pick(r, ALNUM, 40)),
    (
        "model: Perplexity key in a header",
        "-H 'Authorization: Bearer {s}' https://api.perplexity.ai/chat/completions",
        lambda r: "ppl" + "x-" + _pick(r, ALNUM, 48),
    ),
    (
        "model: Together key in JS",
        "const together = new Together({ apiKey: '{s}' });",
        lambda r: "tgp" + "_v1_" + _pick(r, B64URL, 43),
    ),
    (
        "model: Fireworks key in curl",
        'curl https://api.fireworks.ai/inference/v1/models -H "Authorization: Bearer {s}"',
        lambda r: "f" + "w_" + _pick(r, ALNUM, 24),
    ),
    (
        "model: Replicate token set in Python",
        'os.environ["REPLICATE_API_TOKEN"] = "{s}"',
        lambda r: "r" + "8_" + _pick(r, ALNUM, 37),
    ),
    (
        "model: Hugging Face token in a git remote",
        "git remote add hf https://acme:{s}@huggingface.co/acme/reranker",
        lambda r: "h" + "f_" + _pick(r, ALNUM, 34),
    ),
    (
        "model: xAI key in JS",
        'const xai = new OpenAI({ apiKey: "{s}", baseURL: "https://api.x.ai/v1" });',
        lambda r: "xa" + "i-" + _pick(r, ALNUM, 80),
    ),
    ("model: DeepSeek key in .env", "DEEPSEEK_API_KEY={s}", lambda r: "s" + "k-" + _pick(r, HEX, 32)),
    (
        "model: OpenRouter key in curl",
        'curl https://openrouter.ai/api/v1/chat/completions -H "Authorization: Bearer {s}"',
        lambda r: "sk" + "-or-v1-" + _pick(r, HEX, 64),
    ),
    (
        "model: ElevenLabs key in a header",
        "curl https://api.elevenlabs.io/v1/voices -H 'xi-api-key: {s}'",
        lambda r: "s" + "k_" + _pick(r, HEX, 48),
    ),
    # --- database URLs ---
    (
        "db: Postgres URL in docker-compose",
        "  api:\n    environment:\n      DATABASE_URL: postgres://orders:{s}@db:5432/orders?sslmode=disable",
        lambda r: _pick(r, ALNUM, 24),
    ),
    (
        "db: MySQL URL in SQLAlchemy",
        'engine = create_engine("mysql+pymysql://root:{s}@10.0.3.7:3306/shop")',
        lambda r: _pick(r, ALNUM + "_-", 18),
    ),
    (
        "db: MongoDB SRV in mongoose",
        "await mongoose.connect('mongodb+srv://svc-api:{s}@prod.x7k2p.mongodb.net/app?retryWrites=true&w=majority');",
        lambda r: _pick(r, ALNUM, 20),
    ),
    (
        "db: Redis URL in node-redis",
        "const redis = createClient({ url: 'redis://:{s}@redis.internal:6379/0' });",
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "db: AMQP broker URL in Celery",
        "broker_url = 'amqp://worker:{s}@rabbitmq.internal:5672/prod'",
        lambda r: _pick(r, ALNUM, 20),
    ),
    (
        "db: Snowflake password in Python",
        'conn = snowflake.connector.connect(user="ETL", password="{s}", account="acme-xy12345")',
        _pw,
    ),
    (
        "db: PGPASSWORD in a runbook",
        "To restore: `PGPASSWORD={s} pg_restore -h db-prod -U postgres -d app dump.bin`",
        lambda r: _pick(r, ALNUM, 22),
    ),
    # --- private keys ---
    (
        "key: RSA private key in a Markdown fence",
        "Deploy key for the mirror:\n\n```\n-----BEGIN RSA PRIV"
        + "ATE KEY-----\n{s}\n-----END RSA PRIVATE KEY-----\n```",
        _rsa_body,
    ),
    (
        "key: OpenSSH private key",
        "-----BEGIN OPENSSH PRIV" + "ATE KEY-----\n{s}\n-----END OPENSSH PRIVATE KEY-----",
        _openssh_body,
    ),
    (
        "key: EC private key in a TLS Secret",
        "kind: Secret\ntype: kubernetes.io/tls\nstringData:\n  tls.key: |\n    -----BEGIN EC PRIV"
        + "ATE KEY-----\n{s}\n    -----END EC PRIVATE KEY-----",
        lambda r: "\n".join("    " + line for line in _ec_body(r).split("\n")),
    ),
    (
        "key: PKCS#8 key in a Python string",
        'SIGNING_KEY = """-----BEGIN PRIV' + 'ATE KEY-----\n{s}\n-----END PRIVATE KEY-----"""',
        _pkcs8_body,
    ),
    (
        "key: PuTTY private key",
        _PPK_HEAD
        + "AAAAC3NzaC1lZDI1NTE5AAAAI"
        + _pick(_IDS, B64, 43)
        + "\nPrivate-Lines: 1\n{s}\nPrivate-MAC: "
        + _pick(_IDS, HEX, 64),
        lambda r: "AAAAI" + _pick(r, B64, 43),
    ),
    (
        "key: WireGuard interface private key",
        "[Interface]\nPrivateKey = {s}\nAddress = 10.8.0.1/24\nListenPort = 51820",
        lambda r: _b64(r, 32),
    ),
    # --- framework secrets ---
    ("env: Laravel APP_KEY", "APP_KEY={s}", lambda r: "base64:" + _b64(r, 32)),
    ("env: Rails secret_key_base", "SECRET_KEY_BASE={s}", lambda r: _pick(r, HEX, 128)),
    ("env: NextAuth secret", "NEXTAUTH_SECRET={s}", lambda r: _b64(r, 32)),
    ("env: Flask secret key in code", 'app.config["SECRET_KEY"] = "{s}"', lambda r: _pick(r, HEX, 64)),
    # --- passwords in prose and runbooks ---
    ("prose: guest wifi", "Guest wifi is ACME-Guest and the password is {s} (printed on the fridge).", _pw),
    ("prose: iDRAC login", "If the node hangs, log in to the iDRAC at 10.0.9.12 (root / {s}) and power-cycle.", _pw),
    ("prose: chat message with creds", "new staging admin creds -> admin@acme.io pw: {s} pls dont share", _pw),
    (
        "prose: Markdown credentials table",
        "| env | user | password |\n|---|---|---|\n| staging | admin | {s} |",
        _pw,
    ),
    ("prose: zip password", "The export is encrypted; unzip it with password {s}.", _pw),
    ("prose: sudo password", "Runbook 4.2: sudo on build-01 asks for a password — it's {s}.", _pw),
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
    anon = _jwt(
        r,
        {"alg": "HS256", "typ": "JWT"},
        {"iss": "supabase", "ref": _pick(r, LOWER, 20), "role": "anon", "iat": 1718000000, "exp": 2033576000},
    )
    jwt_io = (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    )
    return [
        # --- encrypted values ---
        (
            "encrypted: sops JSON file",
            '{\n  "stripe_key": "ENC[AES256_GCM,data:'
            + b64(40)
            + ",iv:"
            + b64(32)
            + ",tag:"
            + b64(16)
            + ',type:str]",\n  "sops": {"lastmodified": "2025-06-01T10:00:00Z", "version": "3.9.1"}\n}',
        ),
        (
            "encrypted: sops dotenv",
            "DB_PASSWORD=ENC[AES256_GCM,data:" + b64(18) + ",iv:" + b64(32) + ",tag:" + b64(16) + ",type:str]\n"
            "sops_version=3.9.1",
        ),
        (
            "encrypted: sops age stanza",
            "sops:\n  age:\n    - recipient: age1"
            + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)
            + "\n      enc: |\n        -----BEGIN AGE ENCRYPTED FILE-----\n"
            + "        YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSB"
            + _pick(r, B64, 40)
            + "\n        -----END AGE ENCRYPTED FILE-----",
        ),
        (
            "encrypted: ansible-vault file",
            "$ANSIBLE_VAULT;1.2;AES256;prod\n" + "\n".join(_pick(r, HEX, 80) for _ in range(4)),
        ),
        (
            "encrypted: age armored file",
            "-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSB"
            + _pick(r, B64, 21)
            + "\n"
            + _wrap(b64(120))
            + "\n-----END AGE ENCRYPTED FILE-----",
        ),
        (
            "encrypted: PGP message",
            "-----BEGIN PGP MESSAGE-----\n\nhQIMA" + _wrap(b64(200)) + "\n-----END PGP MESSAGE-----",
        ),
        (
            "encrypted: SealedSecret YAML",
            "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nspec:\n  encryptedData:\n    password: AgB"
            + _pick(r, B64, 360)
            + "==",
        ),
        ("encrypted: Rails credentials.yml.enc", b64(180) + "--" + b64(12) + "--" + b64(16)),
        ("encrypted: Vault transit ciphertext", '{"ciphertext": "vault:v1:' + b64(48) + '"}'),
        ("encrypted: OpenSSL salted blob", "openssl enc output stored as: U2FsdGVkX1" + _pick(r, B64, 86) + "=="),
        # --- lock files and integrity hashes ---
        ("lock: package-lock sha1 integrity", '"integrity": "sha1-' + b64(20) + '"'),
        (
            "lock: pnpm-lock resolution",
            "  /ms@2.1.3:\n    resolution: {integrity: sha512-" + b64(64) + "}\n    dev: false",
        ),
        ("lock: yarn v1 integrity", 'lodash@^4.17.21:\n  version "4.17.21"\n  integrity sha512-' + b64(64)),
        (
            "lock: Cargo.lock checksum",
            '[[package]]\nname = "serde"\nversion = "1.0.210"\nchecksum = "' + _pick(r, HEX, 64) + '"',
        ),
        ("lock: requirements --hash", "requests==2.32.3 \\\n    --hash=sha256:" + _pick(r, HEX, 64)),
        (
            "lock: composer.lock dist",
            '"dist": {"type": "zip", "reference": "' + sha() + '", "shasum": ""}',
        ),
        ("lock: flake.lock narHash", '"narHash": "sha256-' + b64(32) + '",\n"rev": "' + sha() + '"'),
        (
            "lock: HTML subresource integrity",
            '<script src="https://cdn.jsdelivr.net/npm/htmx.org@2.0.3" integrity="sha384-'
            + b64(48)
            + '" crossorigin="anonymous"></script>',
        ),
        ("lock: Gemfile.lock checksums", "CHECKSUMS\n  rack (3.1.8) sha256=" + _pick(r, HEX, 64)),
        (
            "lock: .terraform.lock.hcl",
            'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.70.0"\n  hashes = [\n    "h1:'
            + b64(32)
            + '",\n    "zh:'
            + _pick(r, HEX, 64)
            + '",\n  ]\n}',
        ),
        (
            "lock: uv.lock sdist",
            'sdist = { url = "https://files.pythonhosted.org/packages/x/httpx-0.27.2.tar.gz", hash = "sha256:'
            + _pick(r, HEX, 64)
            + '", size = 141311 }',
        ),
        ("lock: Package.resolved revision", '"state": {"revision": "' + sha() + '", "version": "1.5.0"}'),
        # --- git ---
        (
            "git: log --oneline",
            "\n".join(_pick(r, HEX, 7) + " " + m for m in ("fix flaky test", "bump deps", "release 2.4.0")),
        ),
        ("git: pinned action", "      - uses: actions/checkout@" + sha() + " # v4.2.2"),
        ("git: revert command", "git revert --no-edit " + sha()),
        ("git: show header", "commit " + sha() + "\nMerge: " + _pick(r, HEX, 7) + " " + _pick(r, HEX, 7)),
        ("git: submodule status", "+" + sha() + " vendor/libgit2 (v1.8.1-12-g" + _pick(r, HEX, 7) + ")"),
        ("git: ls-remote", sha() + "\tHEAD\n" + sha() + "\trefs/heads/main"),
        ("git: CI log line", "Building commit " + sha() + " on runner ubuntu-24.04"),
        # --- UUIDs as public ids ---
        ("uuid: request id in JSON", '{"request_id": "' + _uuid(r) + '", "status": 404}'),
        (
            "uuid: Azure resource id",
            "/subscriptions/" + _uuid(r) + "/resourceGroups/prod-rg/providers/Microsoft.Web/sites/acme-api",
        ),
        ("uuid: Terraform state id", '"instances": [{"attributes": {"id": "' + _uuid(r) + '", "name": "web"}}]'),
        ("uuid: idempotency header", "-H 'Idempotency-Key: " + _uuid(r) + "'"),
        ("uuid: SQL lookup", "SELECT * FROM orders WHERE id = '" + _uuid(r) + "';"),
        # --- OAuth client ids ---
        ("client id: GitHub App", "GITHUB_CLIENT_ID=Iv1." + _pick(r, HEX, 16)),
        (
            "client id: MSAL config",
            "const msalConfig = { auth: { clientId: '"
            + _uuid(r)
            + "', authority: 'https://login.microsoftonline.com/"
            + _uuid(r)
            + "' } };",
        ),
        (
            "client id: Google in .env",
            "GOOGLE_CLIENT_ID="
            + str(r.randrange(10**11, 10**12))
            + "-"
            + _pick(r, LOWER_DIGITS, 32)
            + ".apps.googleusercontent.com",
        ),
        (
            "client id: Slack app",
            "Slack client ID: " + str(r.randrange(10**10, 10**11)) + "." + str(r.randrange(10**12, 10**13)),
        ),
        ("client id: Spotify", "SPOTIFY_CLIENT_ID=" + _pick(r, HEX, 32)),
        ("client id: X OAuth 2.0", "X_CLIENT_ID=" + _pick(r, B64URL, 34)),
        ("client id: Keycloak public client", '{"realm": "acme", "resource": "web-app", "public-client": true}'),
        # --- publishable keys ---
        (
            "publishable: Stripe key in HTML",
            '<form data-stripe-key="p' + "k_test_" + _pick(r, ALNUM, 99) + '" id="checkout"></form>',
        ),
        (
            "publishable: Supabase anon key",
            "// anon (public) key: safe in the browser, RLS protects the data\n"
            "const supabase = createClient('https://acme.supabase.co', '" + anon + "');",
        ),
        (
            "publishable: Clerk key",
            "NEXT_PUBLIC_CLERK_PUBLISHABLE_KEY=p" + "k_live_" + base64.b64encode(b"clerk.acme.io$").decode(),
        ),
        (
            "publishable: PostHog project key",
            "posthog.init('ph" + "c_" + _pick(r, ALNUM, 43) + "', { api_host: '/ph' })",
        ),
        (
            "publishable: Adyen client key",
            "const checkout = await AdyenCheckout({ environment: 'live', clientKey: 'live_"
            + _pick(r, UPPER_DIGITS, 32)
            + "' });",
        ),
        ("publishable: LaunchDarkly client-side id", "LDClient.initialize('" + _pick(r, HEX, 24) + "', context);"),
        (
            "publishable: Mixpanel project token",
            "mixpanel.init('" + _pick(r, HEX, 32) + "', { track_pageview: true });",
        ),
        # --- placeholders and references ---
        ("placeholder: README curl", 'curl https://api.acme.io/v1/me -H "Authorization: Bearer <your-api-key>"'),
        ("placeholder: .env.example xxxx", "OPENAI_API_KEY=s" + "k-proj-" + "x" * 48 + "\nANTHROPIC_API_KEY="),
        (
            "placeholder: compose variables",
            "environment:\n  API_KEY: ${API_KEY}\n  POSTGRES_PASSWORD: ${POSTGRES_PASSWORD:?set it}",
        ),
        (
            "placeholder: changeme in a docs example",
            "Example (replace before use):\n\n```yaml\nPOSTGRES_USER: app\nPOSTGRES_PASSWORD: changeme\n```",
        ),
        ("placeholder: YOUR_TOKEN_HERE", 'bot = Bot(token="YOUR_TOKEN_HERE")'),
        ("placeholder: docker secret file", 'export DB_PASSWORD="$(cat /run/secrets/db_password)"'),
        ("placeholder: os.environ", 'client = OpenAI(api_key=os.environ["OPENAI_API_KEY"])'),
        ("placeholder: process.env", "const stripe = new Stripe(process.env.STRIPE_SECRET_KEY!);"),
        ("placeholder: Helm template", "  password: {{ .Values.db.password | b64enc | quote }}"),
        ("placeholder: Symfony env", "doctrine:\n  dbal:\n    password: '%env(DATABASE_PASSWORD)%'"),
        (
            "placeholder: secretKeyRef",
            "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef: {name: db, key: password}",
        ),
        ("placeholder: 1Password reference", "STRIPE_KEY=op://prod/stripe/credential"),
        (
            "placeholder: CloudFormation dynamic reference",
            "MasterUserPassword: '{{resolve:secretsmanager:prod/db:SecretString:password}}'",
        ),
        (
            "placeholder: ECS valueFrom",
            '"secrets": [{"name": "DB_PASSWORD", "valueFrom": "arn:aws:secretsmanager:us-east-1:'
            + str(r.randrange(10**11, 10**12))
            + ':secret:prod/db-AbC123"}]',
        ),
        (
            "placeholder: Key Vault reference",
            "@Microsoft.KeyVault(SecretUri=https://acme-kv.vault.azure.net/secrets/db-pass/" + _pick(r, HEX, 32) + ")",
        ),
        ("placeholder: GHCR docs login", "echo $CR_PAT | docker login ghcr.io -u USERNAME --password-stdin"),
        (
            "placeholder: docker credsStore",
            '{\n  "auths": {\n    "https://index.docker.io/v1/": {}\n  },\n  "credsStore": "desktop"\n}',
        ),
        (
            "placeholder: kubeconfig with key files",
            "users:\n- name: admin\n  user:\n    client-certificate: /etc/kubernetes/pki/admin.crt\n"
            "    client-key: /etc/kubernetes/pki/admin.key",
        ),
        ("placeholder: Atlas URI template", "mongodb+srv://<username>:<password>@cluster0.example.mongodb.net/"),
        ("placeholder: URL with env var", "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app"),
        ("placeholder: masked key in dashboard", "Secret key: s" + "k_live_••••••••••••4242 (created 2025-06-01)"),
        (
            "example: Slack docs token",
            "Pass the token as a header, e.g. `Authorization: Bearer xo" + "xb-not-a-real-token-this-will-not-work`.",
        ),
        (
            "example: AWS docs example keys",
            "# Example values from the AWS docs\naws_access_key_id = AK" + "IAIOSFODNN7EXAMPLE\n"
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
        ),
        ("example: jwt.io sample token", "The sample token from jwt.io (signed with `your-256-bit-secret`): " + jwt_io),
        # --- public keys and certificates ---
        (
            "public: authorized_keys with options",
            'from="10.0.0.0/8",no-agent-forwarding ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ'
            + _pick(r, B64, 540)
            + " deploy@ci",
        ),
        (
            "public: known_hosts ECDSA",
            "|1|"
            + b64(20)
            + "|"
            + b64(20)
            + " ecdsa-sha2-nistp256 "
            + _ssh_pub(r, b"ecdsa-sha2-nistp256", b"nistp256", b"\x04" + r.randbytes(64)),
        ),
        (
            "public: security-key SSH public key",
            "sk-ssh-ed25519@openssh.com "
            + _ssh_pub(r, b"sk-ssh-ed25519@openssh.com", r.randbytes(32), b"ssh:")
            + " yubikey",
        ),
        (
            "public: JWKS",
            '{"keys": [{"kty": "RSA", "kid": "'
            + _pick(r, B64URL, 43)
            + '", "use": "sig", "n": "'
            + _b64u(r.randbytes(256))
            + '", "e": "AQAB"}]}',
        ),
        (
            "public: certificate PEM",
            "-----BEGIN CERTIFICATE-----\n"
            + _wrap(base64.b64encode(bytes.fromhex("3082035a30820242a003020102") + r.randbytes(850)).decode())
            + "\n-----END CERTIFICATE-----",
        ),
        (
            "public: RSA public key PEM",
            "-----BEGIN PUBLIC KEY-----\n"
            + _wrap(base64.b64encode(_SPKI_RSA + r.randbytes(256) + bytes.fromhex("0203010001")).decode())
            + "\n-----END PUBLIC KEY-----",
        ),
        ("public: ssh-keygen fingerprint", "256 SHA256:" + b64(32).rstrip("=") + " ci@acme (ED25519)"),
        (
            "public: WireGuard peer",
            "[Peer]\nPublicKey = " + b64(32) + "\nAllowedIPs = 10.8.0.2/32\nEndpoint = vpn.acme.io:51820",
        ),
        # --- checksums ---
        ("checksum: SHA256SUMS", "\n".join(_pick(r, HEX, 64) + "  acme-" + a + ".tar.gz" for a in ("linux", "darwin"))),
        ("checksum: md5sum", _pick(r, HEX, 32) + "  backup-2025-06-01.sql.gz"),
        ("checksum: S3 ETag", '"ETag": "\\"' + _pick(r, HEX, 32) + '\\""'),
        ("checksum: docker images --digests", "acme/api   2.4.0   sha256:" + _pick(r, HEX, 64) + "   3 days ago"),
        (
            "checksum: Git LFS pointer",
            "version https://git-lfs.github.com/spec/v1\noid sha256:" + _pick(r, HEX, 64) + "\nsize 48213",
        ),
        ("checksum: Helm index digest", "  - name: acme\n    version: 1.2.0\n    digest: " + _pick(r, HEX, 64)),
        (
            "checksum: Get-FileHash",
            "Algorithm : SHA256\nHash      : " + _pick(r, HEX, 64).upper() + "\nPath      : C:\\setup.exe",
        ),
        # --- other data ---
        ("data: base64 GIF in CSS", ".spinner { background: url(data:image/gif;base64,R0lGODlh" + b64(210) + "); }"),
        (
            "data: base64 SVG in HTML",
            '<img alt="logo" src="data:image/svg+xml;base64,PHN2ZyB4bWxucz0i' + b64(240) + '">',
        ),
        ("data: base64 font", "@font-face { src: url(data:font/woff2;base64,d09GMgABAAAA" + b64(300) + ") }"),
        (
            "data: Stripe object ids",
            '{"id": "evt_' + _pick(r, ALNUM, 24) + '", "data": {"customer": "cus_' + _pick(r, ALNUM, 14) + '"}}',
        ),
        (
            "data: Anthropic response ids",
            "request-id: req_011C" + _pick(r, ALNUM, 20) + '  {"id": "msg_01' + _pick(r, ALNUM, 22) + '"}',
        ),
        ("data: OpenAI completion id", '{"id": "chatcmpl-' + _pick(r, ALNUM, 29) + '", "object": "chat.completion"}'),
        ("data: Twilio message SID", "Message queued: SM" + _pick(r, HEX, 32)),
        ("data: Ethereum tx", "tx 0x" + _pick(r, HEX, 64) + " from 0x" + _pick(r, HEX, 40)),
        ("data: IPFS CID", "ipfs://bafybei" + _pick(r, "abcdefghijklmnopqrstuvwxyz234567", 52)),
        (
            "data: pagination cursor",
            '{"next_cursor": "' + base64.b64encode(b'{"id":81234,"ts":1718000000}').decode() + '"}',
        ),
        ("data: container ids", "docker ps --no-trunc -q\n" + _pick(r, HEX, 64)),
        ("data: CSP nonce", "Content-Security-Policy: script-src 'self' 'nonce-" + b64(16) + "'"),
        (
            "data: argon2 hash",
            "$argon2id$v=19$m=65536,t=3,p=4$" + b64(16).rstrip("=") + "$" + b64(32).rstrip("="),
        ),
    ]


def lookalikes() -> list[Sample]:
    return [Sample(kind, text, "") for kind, text in _lookalike_texts()]
