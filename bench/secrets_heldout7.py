"""A SEVENTH held-out corpus for the secret scanner, drawn at random from gitleaks' rule list.

``bench/secrets_heldout.py`` .. ``secrets_heldout6.py`` have all been measured once and then
tuned on, so none of them is held out any more. Like the sixth, this one tries to be
REPRESENTATIVE of what people paste into a note rather than to chase obscure providers. It was
written by someone who never opened the scanner's rules or tests and never ran a scanner on it
before it was committed, so its first measurement says how the rules generalise.

How it was built:
- Providers: a seeded random draw of 70 of the 152 rule ids in gitleaks' ``config/gitleaks.toml``
  (gitleaks/gitleaks at b58d3f1, 222 ids) that the sixth set did NOT draw (its 70 ids were
  re-derived with its published seed and removed first):
  ``random.Random(zlib.crc32(b"heldout7/gitleaks-draw"))`` (seed 2697364852)
  ``.sample(sorted(remaining_ids), 70)``. The rule ids drawn:
  algolia-api-key, alibaba-access-key-id, anthropic-admin-api-key, anthropic-api-key,
  asana-client-id, asana-client-secret, bitbucket-client-id, cloudflare-api-key,
  cohere-api-token, coinbase-access-token, confluent-access-token, curl-auth-user,
  discord-api-token, dropbox-api-token, dynatrace-api-token, etsy-access-token,
  facebook-access-token, facebook-page-access-token, fastly-api-token, finnhub-access-token,
  flutterwave-secret-key, generic-api-key, github-app-token, github-oauth, github-refresh-token,
  gitlab-cicd-job-token, gitlab-deploy-token, gitlab-feed-token, gitlab-incoming-mail-token,
  gitlab-kubernetes-agent-token, gitlab-pat-routable, grafana-api-key, heroku-api-key,
  intra42-client-secret, jwt, jwt-base64, kubernetes-secret-yaml, launchdarkly-access-token,
  lob-pub-api-key, looker-client-secret, mailgun-pub-key, mailgun-signing-key, mapbox-api-token,
  mattermost-access-token, maxmind-license-key, messagebird-client-id, microsoft-teams-webhook,
  npm-access-token, octopus-deploy-api-key, plaid-secret-key, private-key,
  rapidapi-access-token, sendgrid-api-token, sendinblue-api-token, sentry-access-token,
  sentry-org-token, settlemint-application-access-token, shippo-api-token,
  shopify-custom-access-token, shopify-private-app-access-token, sidekiq-secret,
  slack-legacy-workspace-token, slack-user-token, sonar-api-token, sumologic-access-id,
  travisci-access-token, twitch-api-token, twitter-access-secret, twitter-api-secret,
  zendesk-secret-key.
- Drawn rules that name an identifier which is public by design became look-alikes, and the
  provider's secret that goes with it became the credential: lob-pub-api-key (the publishable
  key is meant for browsers; the Lob secret API key is the credential), mailgun-pub-key (the
  public validation key; the Mailgun private API key and webhook signing key are credentials),
  mapbox-api-token (``pk.`` tokens are public by design; the ``sk.`` secret token is the
  credential), asana-client-id, bitbucket-client-id, messagebird-client-id,
  sumologic-access-id, alibaba-access-key-id (the id sits in the text next to the secret it is
  paired with, and the secret is the credential). Discord's 64-hex application PUBLIC key and
  Algolia's search-only key are look-alikes too; the Discord bot token / client secret and the
  Algolia admin key are the credentials.
- Token formats from the providers' published documentation where I knew it (prefix, alphabet,
  length; the CRC32/base62 checksum GitHub published for its ``gh?_`` tokens and npm adopted),
  else from the gitleaks regex (cross-checked with trufflehog's detectors at 3ab759f and Yelp
  detect-secrets' plugins at 5e14193); each provider in 2-3 contexts people paste into a note:
  a ``.env`` line, a YAML/JSON/TOML config, a shell command (``curl -H``, ``export``, a CLI
  login), a chat sentence, a code snippet.
- Plus the generic cases every set has: passwords in URLs, connection strings, ``.env``, YAML,
  JSON and shell history; PEM and OpenSSH private keys; JWTs used as bearer tokens; basic-auth
  headers; AWS, GCP and Azure keys; and a handful each of the tokens people paste most (GitHub,
  OpenAI, Anthropic, Slack, AWS, Google).
- Look-alikes: what sits next to credentials in the same notes and must not be refused:
  placeholders and documentation examples, identifiers and keys that are public by design,
  hashes and digests, UUIDs and other random ids, base64 of ordinary data, encrypted blobs,
  public keys and certificates, redacted tokens, references and variable names without values.

Same rules as before: published formats, synthetic values, data only; change a sample only to
correct a misstated format, never to make a rule pass.

Invariants:
- Data only and deterministic (a ``random.Random`` seeded per sample with
  ``zlib.crc32(f"heldout7/{name}")``, ``name`` being the sample's kind).
- No real credential, and no provider prefix written out whole in this file.
- Every credential sample carries the credential (``secret``), verbatim in its text;
  look-alikes carry "".

Measured once, never tuned on (the scanner of commit 7030ce7, `validate` of
``/knowledge/notes.md``): 206 of 215 credentials caught (95.8 %), 2 of 157 look-alikes
refused. From then on it is a tuning set, like the six before it
"""

from __future__ import annotations

import base64
import json
import random
import string
import struct
import uuid
import zlib
from collections.abc import Callable

from bench.secrets_corpus import Sample

ALNUM = string.ascii_letters + string.digits
LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
LOWER_DIGITS = string.ascii_lowercase + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
UPPER_HEX = "0123456789ABCDEF"
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
DIGITS = string.digits
BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase

Gen = Callable[[random.Random], str]


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(f"heldout7/{name}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        digits_ok = n < 8 or not (set(alphabet) & set(DIGITS)) or any(c.isdigit() for c in out)
        if digits_ok and (not any(c.isalpha() for c in alphabet) or any(c.isalpha() for c in out)):
            return out


def _pw(rng: random.Random, n: int = 16) -> str:
    """A generated password with punctuation that needs no escaping in YAML, .env or a quoted string."""
    while True:
        out = _pick(rng, ALNUM + "!#%*?+=-_.^~", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(not c.isalnum() for c in out):
            return out


def _url_pw(rng: random.Random, n: int = 18) -> str:
    """A password that can sit in a URL's userinfo without percent-encoding."""
    while True:
        out = _pick(rng, ALNUM + "-_.~", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(c.islower() for c in out):
            return out


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _b64(rng: random.Random, n_bytes: int) -> str:
    return base64.b64encode(rng.randbytes(n_bytes)).decode()


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _wrap(body: str, width: int = 64) -> str:
    return "\n".join(body[i : i + width] for i in range(0, len(body), width))


def _ssh_str(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _base62(n: int, width: int) -> str:
    out = ""
    while n:
        n, d = divmod(n, 62)
        out = BASE62[d] + out
    return out.rjust(width, "0")


def _checksummed(prefix: str, n: int = 30) -> Gen:
    """GitHub's published token shape (and npm's): prefix, ``n`` base62 chars, a 6-char base62 CRC32 of them."""

    def make(r: random.Random) -> str:
        body = _pick(r, ALNUM, n)
        return prefix + body + _base62(zlib.crc32(body.encode()), 6)

    return make


def _jwt(r: random.Random, header: dict[str, object], claims: dict[str, object], sig_len: int = 43) -> str:
    def part(obj: dict[str, object]) -> str:
        return _b64u(json.dumps(obj, separators=(",", ":")).encode())

    return part(header) + "." + part(claims) + "." + _pick(r, B64URL, sig_len)


_BEGIN = "-----BEGIN "
_END = "-----END "
_PRIV = "PRIV" + "ATE KEY"

_RSA_PKCS1 = bytes.fromhex("308204a40201000282010100")
_PKCS8_RSA = bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8") + _RSA_PKCS1
_EC_P256_HEAD = bytes.fromhex("30770201010420")
_EC_P256_MID = bytes.fromhex("a00a06082a8648ce3d030107a144034200") + b"\x04"
_PKCS8_ED25519 = bytes.fromhex("302e020100300506032b657004220420")
_SPKI_EC_P256 = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d03010703420004")
_SPKI_RSA = bytes.fromhex("30820122300d06092a864886f70d01010105000382010f003082010a0282010100")
_CERT_HEAD = bytes.fromhex("308203c7308202afa003020102")


def _pem(label: str, der: bytes) -> str:
    return _BEGIN + label + "-----\n" + _wrap(base64.b64encode(der).decode()) + "\n" + _END + label + "-----"


def _rsa_pem(r: random.Random) -> str:
    return _pem("RSA " + _PRIV, _RSA_PKCS1 + r.randbytes(1180))


def _pkcs8_rsa_pem(r: random.Random) -> str:
    return _pem(_PRIV, _PKCS8_RSA + r.randbytes(1180))


def _ec_pem(r: random.Random) -> str:
    return _pem("EC " + _PRIV, _EC_P256_HEAD + r.randbytes(32) + _EC_P256_MID + r.randbytes(64))


def _ed25519_pkcs8_pem(r: random.Random) -> str:
    return _pem(_PRIV, _PKCS8_ED25519 + r.randbytes(32))


def _openssh(r: random.Random, comment: bytes = b"dev@laptop") -> str:
    seed, pub = r.randbytes(32), r.randbytes(32)
    blob = _ssh_str(b"ssh-ed25519") + _ssh_str(pub)
    check = r.randbytes(4)
    priv = check + check + _ssh_str(b"ssh-ed25519") + _ssh_str(pub) + _ssh_str(seed + pub) + _ssh_str(comment)
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
    label = "OPENSSH " + _PRIV
    return _BEGIN + label + "-----\n" + _wrap(base64.b64encode(data).decode(), 70) + "\n" + _END + label + "-----"


def _ssh_pub(r: random.Random) -> str:
    return base64.b64encode(_ssh_str(b"ssh-ed25519") + _ssh_str(r.randbytes(32))).decode()


def _basic(user: str, secret: str) -> str:
    return base64.b64encode(f"{user}:{secret}".encode()).decode()


# --- token generators, from the published formats (or the gitleaks regex) ---


def _anthropic(kind: str) -> Gen:
    return lambda r: "sk" + "-ant-" + kind + "-" + _pick(r, B64URL, 93) + "AA"


def _openai_proj(r: random.Random) -> str:
    return "sk" + "-proj-" + _pick(r, B64URL, 74) + "T3Blbk" + "FJ" + _pick(r, B64URL, 74)


def _openai_legacy(r: random.Random) -> str:
    return "sk" + "-" + _pick(r, ALNUM, 20) + "T3Blbk" + "FJ" + _pick(r, ALNUM, 20)


def _aws_key_id(r: random.Random) -> str:
    return "AK" + "IA" + _pick(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)


def _aws_secret(r: random.Random) -> str:
    return _pick(r, B64, 40)


def _gh_pat_fine(r: random.Random) -> str:
    return "github" + "_pat_11" + _pick(r, UPPER_DIGITS, 20) + "_" + _pick(r, ALNUM, 59)


def _slack(kind: str) -> Gen:
    def make(r: random.Random) -> str:
        ids = "-".join(str(r.randrange(10**11, 10**13)) for _ in range(2))
        return "xo" + "x" + kind + "-" + ids + "-" + _pick(r, ALNUM, 24)

    return make


def _slack_user(r: random.Random) -> str:
    ids = "-".join(str(r.randrange(10**11, 10**13)) for _ in range(3))
    return "xo" + "xp-" + ids + "-" + _pick(r, HEX, 32)


def _slack_legacy_ws(kind: str) -> Gen:
    return lambda r: "xo" + "x" + kind + "-2-" + str(r.randrange(10**11, 10**12)) + "-" + _pick(r, ALNUM, 32)


def _google_api_key(r: random.Random) -> str:
    return "AI" + "za" + "Sy" + _pick(r, B64URL, 33)


def _gcp_sa_json(r: random.Random) -> str:
    project = "acme-data-" + str(r.randrange(100000, 999999))
    pem = _pkcs8_rsa_pem(r).replace("\n", "\\n") + "\\n"
    doc = {
        "type": "service_account",
        "project_id": project,
        "private_key_id": _pick(r, HEX, 40),
        "private_key": "@@PEM@@",
        "client_email": f"etl-runner@{project}.iam.gserviceaccount.com",
        "client_id": str(r.randrange(10**20, 10**21)),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    return json.dumps(doc, indent=2).replace("@@PEM@@", pem)


def _azure_secret(r: random.Random) -> str:
    return _pick(r, ALNUM, 3) + r.choice(DIGITS) + "Q~" + _pick(r, ALNUM + "_~.-", 34)


def _azure_storage_key(r: random.Random) -> str:
    return _b64(r, 64)


def _gitlab(prefix: str, n: int) -> Gen:
    return lambda r: prefix + _pick(r, B64URL, n)


def _glpat_routable(r: random.Random) -> str:
    return "gl" + "pat-" + _pick(r, B64URL, 27) + "." + "01" + _pick(r, LOWER_DIGITS, 7)


def _glcbt(r: random.Random) -> str:
    return "gl" + "cbt-" + str(r.randrange(1, 99)) + "_" + _pick(r, B64URL, 20)


def _grafana_key(r: random.Random) -> str:
    doc = {"k": _pick(r, ALNUM, 32), "n": "ci-dashboards", "id": r.randrange(1, 9)}
    return base64.b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode()


def _mapbox(kind: str) -> Gen:
    def make(r: random.Random) -> str:
        mid = _b64u(json.dumps({"u": "acme-maps", "a": _pick(r, LOWER_DIGITS, 25)}, separators=(",", ":")).encode())
        return kind + "." + mid + "." + _pick(r, B64URL, 22)

    return make


def _fb_page(r: random.Random) -> str:
    return "EA" + "AC" + _pick(r, ALNUM, 170)


def _fb_app_token(r: random.Random) -> str:
    """An app access token as Facebook documents it: ``{app-id}|{app-secret}``."""
    return str(r.randrange(10**14, 10**15)) + "|" + _pick(r, HEX, 32)


def _dynatrace(r: random.Random) -> str:
    return "dt0" + "c01." + _pick(r, UPPER_DIGITS, 24) + "." + _pick(r, UPPER_DIGITS, 64)


def _flw_secret(test: bool) -> Gen:
    return lambda r: "FLW" + "SECK" + ("_TEST" if test else "") + "-" + _pick(r, HEX, 32) + "-X"


def _sendgrid(r: random.Random) -> str:
    return "S" + "G." + _pick(r, B64URL, 22) + "." + _pick(r, B64URL, 43)


def _brevo(kind: str) -> Gen:
    return lambda r: kind + "-" + _pick(r, HEX, 64) + "-" + _pick(r, ALNUM, 16)


def _sentry_org(r: random.Random) -> str:
    claims = {
        "iat": 1761000000.5,
        "url": "https://sentry.io",
        "region_url": "https://us.sentry.io",
        "org": "acme",
    }
    body = base64.b64encode(json.dumps(claims, separators=(",", ":")).encode()).decode().rstrip("=")
    return "sntry" + "s_" + body + "_" + _pick(r, B64, 43)


def _rapidapi(r: random.Random) -> str:
    return _pick(r, HEX, 10) + "msh" + _pick(r, HEX, 14) + "p1" + _pick(r, HEX, 6) + "jsn" + _pick(r, HEX, 12)


def _teams_webhook(r: random.Random) -> str:
    return (
        "https://acmecorp.webhook.office.com/webhookb2/"
        + _uuid(r)
        + "@"
        + _uuid(r)
        + "/IncomingWebhook/"
        + _pick(r, HEX, 32)
        + "/"
        + _uuid(r)
    )


def _discord_bot(r: random.Random) -> str:
    uid = str(r.randrange(10**17, 10**18 + 2 * 10**17))
    return _b64u(uid.encode()) + "." + _pick(r, B64URL, 6) + "." + _pick(r, B64URL, 38)


def _twitter_bearer(r: random.Random) -> str:
    return "A" * 22 + _pick(r, ALNUM, 18) + "%3D" + _pick(r, ALNUM, 50)


def _bitbucket_app_pw(r: random.Random) -> str:
    return "AT" + "BB" + _pick(r, ALNUM, 28) + _pick(r, UPPER_HEX, 8)


def _asana_pat(r: random.Random) -> str:
    return "2/" + str(r.randrange(10**15, 10**16)) + "/" + str(r.randrange(10**15, 10**16)) + ":" + _pick(r, HEX, 32)


def _k8s_secret_b64(r: random.Random) -> str:
    return base64.b64encode(_url_pw(r, 20).encode()).decode()


def _b64_jwt(r: random.Random) -> str:
    tok = _jwt(r, {"alg": "HS256", "typ": "JWT"}, {"sub": "svc-reporting", "role": "admin", "exp": 1798761600})
    return base64.b64encode(tok.encode()).decode()


def _bearer_jwt(r: random.Random) -> str:
    claims = {
        "iss": "https://auth.acme.io/",
        "sub": "auth0|" + _pick(r, HEX, 24),
        "aud": ["https://api.acme.io", "https://acme.eu.auth0.com/userinfo"],
        "iat": 1763900000,
        "exp": 1763986400,
        "scope": "openid profile email read:orders",
    }
    return _jwt(r, {"alg": "RS256", "typ": "JWT", "kid": _pick(r, B64URL, 22)}, claims, 342)


def _hs_jwt(r: random.Random) -> str:
    claims = {"user_id": r.randrange(1000, 99999), "email": "ops@acme.io", "is_admin": True, "exp": 1798761600}
    return _jwt(r, {"alg": "HS256", "typ": "JWT"}, claims)


def _supabase_service(r: random.Random) -> str:
    claims = {"iss": "supabase", "ref": _pick(r, LOWER, 20), "role": "service_role", "iat": 1735000000}
    return _jwt(r, {"alg": "HS256", "typ": "JWT"}, claims | {"exp": 2050576000})


# Public parts that sit next to a credential (ids, account names, key ids): not the secret.
_IDS = _rng("public ids")
_ALGOLIA_APP = _pick(_IDS, UPPER_DIGITS, 10)
_ALIBABA_ID = "LT" + "AI" + _pick(_IDS, ALNUM, 20)
_ASANA_CLIENT = str(_IDS.randrange(10**15, 10**16))
_BB_KEY = _pick(_IDS, ALNUM, 18)
_CONFLUENT_KEY = _pick(_IDS, UPPER_DIGITS, 16)
_DROPBOX_KEY = _pick(_IDS, LOWER_DIGITS, 15)
_LOOKER_ID = _pick(_IDS, ALNUM, 20)
_SUMO_ID = "su" + _pick(_IDS, ALNUM, 12)
_TWITCH_ID = _pick(_IDS, LOWER_DIGITS, 30)
_TW_KEY = _pick(_IDS, ALNUM, 25)
_TW_TOKEN = str(_IDS.randrange(10**17, 10**18)) + "-" + _pick(_IDS, ALNUM, 40)
_DISCORD_APP = str(_IDS.randrange(10**17, 10**18))
_PLAID_CLIENT = _pick(_IDS, HEX, 24)
_AWS_ID_1 = _aws_key_id(_IDS)
_AWS_ID_2 = _aws_key_id(_IDS)
_AWS_ID_3 = _aws_key_id(_IDS)
_AZ_TENANT = _uuid(_IDS)
_AZ_APP = _uuid(_IDS)
_ETSY_SHARED = _pick(_IDS, LOWER_DIGITS, 10)
_FB_APP = str(_IDS.randrange(10**14, 10**15))
_INTRA_UID = "u-s4t2" + "ud-" + _pick(_IDS, HEX, 64)
_KUBE_NS = "payments"
_DT_ENV = _pick(_IDS, LOWER_DIGITS, 8)
_LD_CLIENT = _pick(_IDS, HEX, 24)
_GOOGLE_CLIENT = str(_IDS.randrange(10**11, 10**12)) + "-" + _pick(_IDS, LOWER_DIGITS, 32)


_CREDENTIALS: list[tuple[str, str, Gen]] = [
    # === drawn from gitleaks' rule list ===
    # algolia-api-key
    (
        "algolia: admin key in .env",
        "ALGOLIA_APP_ID=" + _ALGOLIA_APP + "\nALGOLIA_ADMIN_API_KEY={s}\nALGOLIA_INDEX=prod_products",
        lambda r: _pick(r, HEX, 32),
    ),
    (
        "algolia: admin key in a Node indexing script",
        "const client = algoliasearch('"
        + _ALGOLIA_APP
        + "', '{s}');\nawait client.initIndex('docs').saveObjects(records);",
        lambda r: _pick(r, HEX, 32),
    ),
    (
        "algolia: admin key in a chat message",
        "for the reindex job use the algolia write key {s} (app " + _ALGOLIA_APP + "), not the search one",
        lambda r: _pick(r, HEX, 32),
    ),
    # alibaba-access-key-id
    (
        "alibaba: AccessKey pair in aliyun CLI config",
        '{\n  "current": "default",\n  "profiles": [\n    {\n      "name": "default",\n      "mode": "AK",\n'
        '      "access_key_id": "' + _ALIBABA_ID + '",\n      "access_key_secret": "{s}",\n'
        '      "region_id": "cn-hangzhou"\n    }\n  ]\n}',
        lambda r: _pick(r, ALNUM, 30),
    ),
    (
        "alibaba: AccessKey pair exported in a shell",
        "export ALIBABA_CLOUD_ACCESS_KEY_ID=" + _ALIBABA_ID + "\nexport ALIBABA_CLOUD_ACCESS_KEY_SECRET={s}\n"
        "ossutil ls oss://acme-assets",
        lambda r: _pick(r, ALNUM, 30),
    ),
    # anthropic-api-key / anthropic-admin-api-key
    (
        "anthropic: API key in .env",
        "ANTHROPIC_API_KEY={s}\nANTHROPIC_MODEL=claude-sonnet-4-5",
        _anthropic("api03"),
    ),
    (
        "anthropic: API key in a curl",
        "curl https://api.anthropic.com/v1/messages \\\n  -H 'x-api-key: {s}' \\\n"
        "  -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' -d @req.json",
        _anthropic("api03"),
    ),
    (
        "anthropic: API key in Python",
        'import anthropic\n\nclient = anthropic.Anthropic(api_key="{s}")',
        _anthropic("api03"),
    ),
    (
        "anthropic: API key in a chat message",
        "here's the key for the eval runner: {s} - please rotate it after friday",
        _anthropic("api03"),
    ),
    (
        "anthropic: admin key in a usage-report curl",
        'curl "https://api.anthropic.com/v1/organizations/usage_report/messages?starting_at=2025-11-01T00:00:00Z" '
        '--header "anthropic-version: 2023-06-01" --header "x-api-key: {s}"',
        _anthropic("admin01"),
    ),
    (
        "anthropic: admin key in a GitHub Actions secret note",
        "Added repo secret ANTHROPIC_ADMIN_KEY = {s} for the nightly cost export workflow.",
        _anthropic("admin01"),
    ),
    # asana-client-id / asana-client-secret
    (
        "asana: OAuth client secret in config.yaml",
        'asana:\n  client_id: "' + _ASANA_CLIENT + '"\n  client_secret: {s}\n'
        "  redirect_uri: https://tools.acme.io/oauth/asana/callback",
        lambda r: _pick(r, LOWER_DIGITS, 32),
    ),
    (
        "asana: OAuth client secret in .env",
        "ASANA_CLIENT_ID=" + _ASANA_CLIENT + "\nASANA_CLIENT_SECRET={s}",
        lambda r: _pick(r, LOWER_DIGITS, 32),
    ),
    (
        "asana: personal access token in a curl",
        'curl https://app.asana.com/api/1.0/users/me -H "Authorization: Bearer {s}"',
        _asana_pat,
    ),
    # bitbucket-client-id
    (
        "bitbucket: OAuth consumer secret in JSON",
        '{\n  "bitbucket": {\n    "key": "' + _BB_KEY + '",\n    "secret": "{s}"\n  }\n}',
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "bitbucket: app password in a git clone",
        "git clone https://ci-bot:{s}@bitbucket.org/acme/payments-api.git",
        _bitbucket_app_pw,
    ),
    (
        "bitbucket: app password in .env",
        "BITBUCKET_USERNAME=ci-bot\nBITBUCKET_APP_PASSWORD={s}",
        _bitbucket_app_pw,
    ),
    # cloudflare-api-key
    (
        "cloudflare: API token in wrangler env",
        "CLOUDFLARE_ACCOUNT_ID=" + _pick(_IDS, HEX, 32) + "\nCLOUDFLARE_API_TOKEN={s}\nnpx wrangler deploy",
        lambda r: _pick(r, B64URL, 40),
    ),
    (
        "cloudflare: API token in a curl",
        'curl "https://api.cloudflare.com/client/v4/user/tokens/verify" -H "Authorization: Bearer {s}"',
        lambda r: _pick(r, B64URL, 40),
    ),
    (
        "cloudflare: API token in Terraform tfvars",
        'cloudflare_api_token = "{s}"\nzone_id = "' + _pick(_IDS, HEX, 32) + '"',
        lambda r: _pick(r, B64URL, 40),
    ),
    # cohere-api-token
    (
        "cohere: API key in .env",
        "CO_API_KEY={s}",
        lambda r: _pick(r, ALNUM, 40),
    ),
    (
        "cohere: API key in Python",
        'import cohere\nco = cohere.ClientV2(api_key="{s}")\nres = co.embed(texts=docs, model="embed-v4.0")',
        lambda r: _pick(r, ALNUM, 40),
    ),
    # coinbase-access-token
    (
        "coinbase: OAuth access token in a curl",
        "curl https://api.coinbase.com/v2/accounts -H 'Authorization: Bearer {s}'",
        lambda r: _pick(r, HEX, 64),
    ),
    (
        "coinbase: access token in YAML",
        "exchanges:\n  coinbase:\n    access_token: {s}\n    sandbox: false",
        lambda r: _pick(r, HEX, 64),
    ),
    # confluent-access-token
    (
        "confluent: cluster API key and secret in client.properties",
        "bootstrap.servers=pkc-" + _pick(_IDS, LOWER_DIGITS, 5) + ".eu-west-1.aws.confluent.cloud:9092\n"
        "security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\nsasl.username=" + _CONFLUENT_KEY + "\nsasl.password={s}",
        lambda r: _pick(r, B64, 64),
    ),
    (
        "confluent: API secret in .env",
        "CONFLUENT_CLOUD_API_KEY=" + _CONFLUENT_KEY + "\nCONFLUENT_CLOUD_API_SECRET={s}",
        lambda r: _pick(r, B64, 64),
    ),
    # curl-auth-user
    (
        "curl -u: user and password on an Elasticsearch call",
        "curl -u elastic:{s} -X GET 'https://es01.internal:9200/_cluster/health?pretty'",
        lambda r: _url_pw(r, 20),
    ),
    (
        "curl --user: quoted credentials to a Jenkins API",
        "curl --user 'deploy:{s}' -X POST https://jenkins.acme.io/job/release/build",
        _pw,
    ),
    # discord-api-token
    (
        "discord: bot token in .env",
        "DISCORD_APP_ID=" + _DISCORD_APP + "\nDISCORD_BOT_TOKEN={s}",
        _discord_bot,
    ),
    (
        "discord: bot token in discord.py",
        "bot = commands.Bot(command_prefix='!', intents=intents)\nbot.run('{s}')",
        _discord_bot,
    ),
    (
        "discord: client secret in config.json",
        '{\n  "discord": {\n    "clientId": "' + _DISCORD_APP + '",\n    "clientSecret": "{s}"\n  }\n}',
        lambda r: _pick(r, B64URL, 32),
    ),
    # dropbox-api-token
    (
        "dropbox: app key and secret in .env",
        "DROPBOX_APP_KEY=" + _DROPBOX_KEY + "\nDROPBOX_APP_SECRET={s}",
        lambda r: _pick(r, LOWER_DIGITS, 15),
    ),
    (
        "dropbox: app secret in rclone config",
        "[dropbox]\ntype = dropbox\nclient_id = " + _DROPBOX_KEY + "\nclient_secret = {s}",
        lambda r: _pick(r, LOWER_DIGITS, 15),
    ),
    # dynatrace-api-token
    (
        "dynatrace: API token in a curl",
        "curl -X GET 'https://" + _DT_ENV + ".live.dynatrace.com/api/v2/problems' -H 'Authorization: Api-Token {s}'",
        _dynatrace,
    ),
    (
        "dynatrace: operator token in Helm values",
        "apiUrl: https://" + _DT_ENV + ".live.dynatrace.com/api\ntokens:\n  apiToken: {s}",
        _dynatrace,
    ),
    # etsy-access-token
    (
        "etsy: keystring in .env",
        "ETSY_API_KEY={s}\nETSY_SHARED_SECRET=" + _ETSY_SHARED,
        lambda r: _pick(r, LOWER_DIGITS, 24),
    ),
    (
        "etsy: keystring in a curl",
        "curl 'https://openapi.etsy.com/v3/application/openapi-ping' -H 'x-api-key: {s}'",
        lambda r: _pick(r, LOWER_DIGITS, 24),
    ),
    # facebook-access-token / facebook-page-access-token
    (
        "facebook: app access token in a Graph API URL",
        "https://graph.facebook.com/debug_token?input_token=USER_TOKEN&access_token={s}",
        _fb_app_token,
    ),
    (
        "facebook: page access token in .env",
        "FB_PAGE_ID=" + str(_IDS.randrange(10**14, 10**15)) + "\nFB_PAGE_ACCESS_TOKEN={s}",
        _fb_page,
    ),
    (
        "facebook: page access token in a curl",
        'curl -X POST "https://graph.facebook.com/v21.0/me/messages?access_token={s}" -d @reply.json',
        _fb_page,
    ),
    (
        "facebook: app secret in settings.py",
        "SOCIAL_AUTH_FACEBOOK_KEY = '" + _FB_APP + "'\nSOCIAL_AUTH_FACEBOOK_SECRET = '{s}'",
        lambda r: _pick(r, HEX, 32),
    ),
    # fastly-api-token
    (
        "fastly: API token in a purge curl",
        'curl -X POST -H "Fastly-Key: {s}" https://api.fastly.com/service/' + _pick(_IDS, ALNUM, 22) + "/purge_all",
        lambda r: _pick(r, B64URL, 32),
    ),
    (
        "fastly: API token exported",
        "export FASTLY_API_TOKEN={s}\nfastly compute publish",
        lambda r: _pick(r, B64URL, 32),
    ),
    # finnhub-access-token
    (
        "finnhub: API key in a quote URL",
        "fetch(`https://finnhub.io/api/v1/quote?symbol=AAPL&token={s}`)",
        lambda r: "c" + _pick(r, LOWER_DIGITS, 19),
    ),
    (
        "finnhub: API key in .env",
        "FINNHUB_API_KEY={s}",
        lambda r: "c" + _pick(r, LOWER_DIGITS, 19),
    ),
    # flutterwave-secret-key
    (
        "flutterwave: test secret key in .env",
        "FLW_PUBLIC_KEY=FLW" + "PUBK_TEST-" + _pick(_IDS, HEX, 32) + "-X\nFLW_SECRET_KEY={s}",
        _flw_secret(True),
    ),
    (
        "flutterwave: live secret key in a Node snippet",
        "const flw = new Flutterwave(process.env.FLW_PUBLIC_KEY, '{s}');",
        _flw_secret(False),
    ),
    # generic-api-key
    (
        "generic: internal API key in application.properties",
        "reporting.api.base-url=https://reports.internal.acme.io\nreporting.api.key={s}",
        lambda r: _pick(r, ALNUM, 40),
    ),
    (
        "generic: service token in a YAML config",
        "upstream:\n  url: https://inventory.acme.io\n  auth_token: {s}\n  timeout: 5s",
        lambda r: _pick(r, B64URL, 48),
    ),
    (
        "generic: API secret in a Python constant",
        'WEBHOOK_SECRET = "{s}"\n\ndef verify(sig, body):\n    return hmac.compare_digest(sig, sign(body))',
        lambda r: _pick(r, HEX, 64),
    ),
    # github-app-token / github-oauth / github-refresh-token
    (
        "github: app installation token in a curl",
        'curl -H "Authorization: token {s}" https://api.github.com/repos/acme/infra/contents/README.md',
        _checksummed("gh" + "s_"),
    ),
    (
        "github: app user-to-server token in .env",
        "GITHUB_USER_TOKEN={s}",
        _checksummed("gh" + "u_"),
    ),
    (
        "github: OAuth token in gh hosts.yml",
        "github.com:\n    user: dana-acme\n    oauth_token: {s}\n    git_protocol: https",
        _checksummed("gh" + "o_"),
    ),
    (
        "github: OAuth token in a chat message",
        "the gh CLI token on the build box is {s}, revoke it when the migration is done",
        _checksummed("gh" + "o_"),
    ),
    (
        "github: refresh token in a JSON response paste",
        '{"access_token": "' + "gh" + "u_" + _pick(_IDS, ALNUM, 36) + '", "expires_in": 28800, '
        '"refresh_token": "{s}", "refresh_token_expires_in": 15811200, "token_type": "bearer"}',
        _checksummed("gh" + "r_", 70),
    ),
    # gitlab-*
    (
        "gitlab: CI job token in a curl",
        'curl --header "JOB-TOKEN: {s}" "https://gitlab.acme.io/api/v4/projects/42/packages/generic/tool/1.0/tool.tgz"',
        _glcbt,
    ),
    (
        "gitlab: deploy token in a docker login",
        "docker login registry.gitlab.com -u gitlab+deploy-token-118 -p {s}",
        _gitlab("gl" + "dt-", 20),
    ),
    (
        "gitlab: deploy token in a git URL",
        "git clone https://gitlab+deploy-token-118:{s}@gitlab.com/acme/charts.git",
        _gitlab("gl" + "dt-", 20),
    ),
    (
        "gitlab: feed token in an RSS URL",
        "subscribe to https://gitlab.com/dashboard/issues.atom?feed_token={s}&state=opened",
        _gitlab("gl" + "ft-", 20),
    ),
    (
        "gitlab: incoming mail token in an address",
        "send replies to incoming+acme-infra-42-{s}-issue@incoming.gitlab.com",
        _gitlab("gl" + "imt-", 25),
    ),
    (
        "gitlab: kubernetes agent token in a helm install",
        "helm upgrade --install prod-agent gitlab/gitlab-agent --namespace gitlab-agent "
        "--set config.token={s} --set config.kasAddress=wss://kas.gitlab.com",
        _gitlab("gl" + "agent-", 50),
    ),
    (
        "gitlab: routable PAT in .env",
        "GITLAB_TOKEN={s}\nGITLAB_URL=https://gitlab.com",
        _glpat_routable,
    ),
    (
        "gitlab: routable PAT in a curl",
        'curl --header "PRIVATE-TOKEN: {s}" "https://gitlab.com/api/v4/projects?owned=true"',
        _glpat_routable,
    ),
    (
        "gitlab: classic PAT in a chat message",
        "token for the renovate bot: {s}",
        _gitlab("gl" + "pat-", 20),
    ),
    # grafana-api-key
    (
        "grafana: legacy API key in a curl",
        'curl -H "Authorization: Bearer {s}" https://grafana.acme.io/api/dashboards/uid/k8s-overview',
        _grafana_key,
    ),
    (
        "grafana: legacy API key in a provisioning YAML",
        "grafana:\n  url: https://grafana.acme.io\n  api_key: {s}",
        _grafana_key,
    ),
    # heroku-api-key
    (
        "heroku: API key in .env",
        "HEROKU_API_KEY={s}",
        _uuid,
    ),
    (
        "heroku: API key in .netrc",
        "machine api.heroku.com\n  login ops@acme.io\n  password {s}\nmachine git.heroku.com\n  login ops@acme.io\n"
        "  password {s}",
        _uuid,
    ),
    # intra42-client-secret
    (
        "intra42: client secret in .env",
        "FT_CLIENT_ID=" + _INTRA_UID + "\nFT_CLIENT_SECRET={s}",
        lambda r: "s-s4t2" + "ud-" + _pick(r, HEX, 64),
    ),
    (
        "intra42: client secret in an OAuth token curl",
        'curl -X POST --data "grant_type=client_credentials&client_id='
        + _INTRA_UID
        + '&client_secret={s}" https://api.intra.42.fr/oauth/token',
        lambda r: "s-s4t2" + "ud-" + _pick(r, HEX, 64),
    ),
    # jwt
    (
        "jwt: bearer token in a curl",
        'curl -H "Authorization: Bearer {s}" https://api.acme.io/v1/orders?status=open',
        _bearer_jwt,
    ),
    (
        "jwt: bearer token in an HTTP request paste",
        "GET /admin/users HTTP/1.1\nHost: api.acme.io\nAuthorization: Bearer {s}\nAccept: application/json",
        _hs_jwt,
    ),
    (
        "jwt: access token in a chat message",
        "if you want to reproduce it, this token still works until tonight: {s}",
        _hs_jwt,
    ),
    (
        "jwt: Supabase service-role key in .env",
        "SUPABASE_URL=https://" + _pick(_IDS, LOWER, 20) + ".supabase.co\nSUPABASE_SERVICE_ROLE_KEY={s}",
        _supabase_service,
    ),
    # jwt-base64
    (
        "jwt-base64: base64 JWT in a Kubernetes secret",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: reporting-token\ntype: Opaque\ndata:\n  token: {s}",
        _b64_jwt,
    ),
    (
        "jwt-base64: base64 JWT in an env var",
        "REPORTING_TOKEN_B64={s}",
        _b64_jwt,
    ),
    # kubernetes-secret-yaml
    (
        "kubernetes: Secret manifest with a base64 password",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: postgres-auth\n  namespace: "
        + _KUBE_NS
        + "\ntype: Opaque\ndata:\n  username: cG9zdGdyZXM=\n  password: {s}",
        _k8s_secret_b64,
    ),
    (
        "kubernetes: Secret manifest with stringData",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: smtp\nstringData:\n  SMTP_USER: mailer@acme.io\n"
        "  SMTP_PASSWORD: {s}",
        _pw,
    ),
    # launchdarkly-access-token
    (
        "launchdarkly: SDK key in .env",
        "LAUNCHDARKLY_SDK_KEY={s}\nLAUNCHDARKLY_CLIENT_SIDE_ID=" + _LD_CLIENT,
        lambda r: "sd" + "k-" + _uuid(r),
    ),
    (
        "launchdarkly: API access token in a curl",
        'curl -H "Authorization: {s}" https://app.launchdarkly.com/api/v2/flags/default',
        lambda r: "ap" + "i-" + _uuid(r),
    ),
    # lob-pub-api-key (publishable key is a look-alike; the secret key is the credential)
    (
        "lob: live secret key in .env",
        "LOB_API_KEY={s}",
        lambda r: "live" + "_" + _pick(r, HEX, 35),
    ),
    (
        "lob: test secret key in a curl -u",
        "curl https://api.lob.com/v1/addresses -u {s}:",
        lambda r: "test" + "_" + _pick(r, HEX, 35),
    ),
    # looker-client-secret
    (
        "looker: API3 credentials in looker.ini",
        "[Looker]\nbase_url=https://acme.cloud.looker.com\nclient_id=" + _LOOKER_ID + "\nclient_secret={s}\n"
        "verify_ssl=True",
        lambda r: _pick(r, ALNUM, 24),
    ),
    (
        "looker: client secret exported",
        "export LOOKERSDK_CLIENT_ID=" + _LOOKER_ID + "\nexport LOOKERSDK_CLIENT_SECRET={s}",
        lambda r: _pick(r, ALNUM, 24),
    ),
    # mailgun-pub-key / mailgun-signing-key
    (
        "mailgun: webhook signing key in .env",
        "MAILGUN_DOMAIN=mg.acme.io\nMAILGUN_WEBHOOK_SIGNING_KEY={s}",
        lambda r: _pick(r, HEX, 32) + "-" + _pick(r, HEX, 8) + "-" + _pick(r, HEX, 8),
    ),
    (
        "mailgun: private API key in a curl",
        "curl -s --user 'api:{s}' https://api.eu.mailgun.net/v3/mg.acme.io/messages "
        "-F from='noreply@acme.io' -F to=dana@acme.io -F subject=test -F text=hi",
        lambda r: "key" + "-" + _pick(r, HEX, 32),
    ),
    (
        "mailgun: sending key in Laravel config",
        "'mailgun' => [\n    'domain' => 'mg.acme.io',\n    'secret' => '{s}',\n    'endpoint' => "
        "'api.eu.mailgun.net',\n],",
        lambda r: _pick(r, HEX, 32) + "-" + _pick(r, HEX, 8) + "-" + _pick(r, HEX, 8),
    ),
    # mapbox-api-token (pk. is public by design; sk. is the credential)
    (
        "mapbox: secret token in .netrc for the iOS SDK download",
        "machine api.mapbox.com\n  login mapbox\n  password {s}",
        _mapbox("sk"),
    ),
    (
        "mapbox: secret token in gradle.properties",
        "MAPBOX_DOWNLOADS_TOKEN={s}",
        _mapbox("sk"),
    ),
    # mattermost-access-token
    (
        "mattermost: bot access token in a curl",
        "curl -H 'Authorization: Bearer {s}' https://chat.acme.io/api/v4/users/me",
        lambda r: _pick(r, LOWER_DIGITS, 26),
    ),
    (
        "mattermost: token in mmctl env",
        "MM_SERVICESETTINGS_SITEURL=https://chat.acme.io\nMATTERMOST_TOKEN={s}",
        lambda r: _pick(r, LOWER_DIGITS, 26),
    ),
    # maxmind-license-key
    (
        "maxmind: license key in GeoIP.conf",
        "AccountID " + str(_IDS.randrange(100000, 999999)) + "\nLicenseKey {s}\n"
        "EditionIDs GeoLite2-ASN GeoLite2-City GeoLite2-Country",
        lambda r: _pick(r, ALNUM, 6) + "_" + _pick(r, ALNUM, 29) + "_m" + "mk",
    ),
    (
        "maxmind: license key in a download URL",
        "wget 'https://download.maxmind.com/app/geoip_download?edition_id=GeoLite2-City&license_key={s}&suffix=tar.gz'",
        lambda r: _pick(r, ALNUM, 6) + "_" + _pick(r, ALNUM, 29) + "_m" + "mk",
    ),
    # messagebird-client-id
    (
        "messagebird: live access key in a curl",
        "curl -X POST https://rest.messagebird.com/messages -H 'Authorization: AccessKey {s}' "
        "-d recipients=31612345678 -d originator=ACME -d body='Your code is 4821'",
        lambda r: _pick(r, ALNUM, 25),
    ),
    (
        "messagebird: access key in .env",
        "MESSAGEBIRD_ACCESS_KEY={s}",
        lambda r: _pick(r, ALNUM, 25),
    ),
    # microsoft-teams-webhook
    (
        "teams: incoming webhook URL in a curl",
        "curl -H 'Content-Type: application/json' -d '{\"text\": \"deploy finished\"}' {s}",
        _teams_webhook,
    ),
    (
        "teams: incoming webhook URL in alertmanager config",
        "receivers:\n  - name: teams\n    msteams_configs:\n      - webhook_url: '{s}'",
        _teams_webhook,
    ),
    # npm-access-token
    (
        "npm: token in .npmrc",
        "//registry.npmjs.org/:_authToken={s}\n@acme:registry=https://registry.npmjs.org/",
        _checksummed("np" + "m_"),
    ),
    (
        "npm: token exported before publish",
        "export NPM_TOKEN={s}\nnpm publish --access public",
        _checksummed("np" + "m_"),
    ),
    # octopus-deploy-api-key
    (
        "octopus: API key on the CLI",
        "octo create-release --project 'Payments API' --server https://deploy.acme.io --apiKey {s}",
        lambda r: "AP" + "I-" + _pick(r, UPPER_DIGITS, 26),
    ),
    (
        "octopus: API key in a PowerShell header",
        '$header = @{ "X-Octopus-ApiKey" = "{s}" }\nInvoke-RestMethod -Uri "$server/api/projects" -Headers $header',
        lambda r: "AP" + "I-" + _pick(r, UPPER_DIGITS, 26),
    ),
    # plaid-secret-key
    (
        "plaid: secret in .env",
        "PLAID_CLIENT_ID=" + _PLAID_CLIENT + "\nPLAID_SECRET={s}\nPLAID_ENV=production",
        lambda r: _pick(r, HEX, 30),
    ),
    (
        "plaid: secret in a JSON request body",
        "curl -X POST https://production.plaid.com/accounts/get -H 'Content-Type: application/json' -d "
        '\'{"client_id": "' + _PLAID_CLIENT + '", "secret": "{s}", "access_token": "ACCESS_TOKEN"}\'',
        lambda r: _pick(r, HEX, 30),
    ),
    # private-key
    (
        "private-key: RSA PEM in a note",
        "deploy key for the old box, keep until decommissioned:\n{s}",
        _rsa_pem,
    ),
    (
        "private-key: PKCS8 PEM in a JSON-escaped env",
        'JWT_SIGNING_KEY="{s}"',
        lambda r: _pkcs8_rsa_pem(r).replace("\n", "\\n"),
    ),
    (
        "private-key: EC PEM pasted into YAML",
        "tls:\n  cert_file: /etc/acme/tls.crt\n  key: |\n    {s}",
        lambda r: _ec_pem(r).replace("\n", "\n    "),
    ),
    # rapidapi-access-token
    (
        "rapidapi: key in a fetch snippet",
        "const res = await fetch(url, {\n  headers: {\n    'x-rapidapi-key': '{s}',\n"
        "    'x-rapidapi-host': 'weatherapi-com.p.rapidapi.com',\n  },\n});",
        _rapidapi,
    ),
    (
        "rapidapi: key in .env",
        "RAPIDAPI_KEY={s}",
        _rapidapi,
    ),
    # sendgrid-api-token
    (
        "sendgrid: API key in .env",
        "SENDGRID_API_KEY={s}\nMAIL_FROM=noreply@acme.io",
        _sendgrid,
    ),
    (
        "sendgrid: API key as SMTP password in Django settings",
        "EMAIL_HOST = 'smtp.sendgrid.net'\nEMAIL_HOST_USER = 'apikey'\nEMAIL_HOST_PASSWORD = '{s}'\nEMAIL_PORT = 587",
        _sendgrid,
    ),
    (
        "sendgrid: API key in a curl",
        'curl --request POST --url https://api.sendgrid.com/v3/mail/send --header "Authorization: Bearer {s}" '
        "--header 'Content-Type: application/json' --data @mail.json",
        _sendgrid,
    ),
    # sendinblue-api-token
    (
        "brevo: API key in a curl",
        "curl --request GET --url https://api.brevo.com/v3/account --header 'api-key: {s}'",
        _brevo("xkey" + "sib"),
    ),
    (
        "brevo: SMTP key in .env",
        "MAIL_HOST=smtp-relay.brevo.com\nMAIL_USERNAME=7f1c2e001@smtp-brevo.com\nMAIL_PASSWORD={s}",
        _brevo("xsmtp" + "sib"),
    ),
    # sentry-access-token / sentry-org-token
    (
        "sentry: auth token (old format) in .sentryclirc",
        "[auth]\ntoken={s}\n\n[defaults]\norg=acme\nproject=web",
        lambda r: _pick(r, HEX, 64),
    ),
    (
        "sentry: auth token (old format) exported",
        'export SENTRY_AUTH_TOKEN={s}\nsentry-cli releases new "$VERSION"',
        lambda r: _pick(r, HEX, 64),
    ),
    (
        "sentry: org token in a GitHub Actions env",
        "      - uses: getsentry/action-release@v1\n        env:\n          SENTRY_AUTH_TOKEN: {s}\n"
        "          SENTRY_ORG: acme",
        _sentry_org,
    ),
    (
        "sentry: org token in a chat message",
        "use this for the sourcemap upload in vite.config.ts: {s}",
        _sentry_org,
    ),
    # settlemint-application-access-token
    (
        "settlemint: application access token in .env",
        "SETTLEMINT_ACCESS_TOKEN={s}\nSETTLEMINT_INSTANCE=https://console.settlemint.com",
        lambda r: "sm" + "_aat_" + _pick(r, ALNUM, 16),
    ),
    (
        "settlemint: application access token in a curl",
        "curl -H 'x-auth-token: {s}' https://acme-node.settlemint.com/",
        lambda r: "sm" + "_aat_" + _pick(r, ALNUM, 16),
    ),
    # shippo-api-token
    (
        "shippo: live token in a curl",
        'curl https://api.goshippo.com/shipments/ -H "Authorization: ShippoToken {s}"',
        lambda r: "ship" + "po_live_" + _pick(r, HEX, 40),
    ),
    (
        "shippo: test token in Python",
        'shippo_sdk = shippo.Shippo(api_key_header="{s}")',
        lambda r: "ship" + "po_test_" + _pick(r, HEX, 40),
    ),
    # shopify-custom-access-token / shopify-private-app-access-token
    (
        "shopify: custom app token in .env",
        "SHOPIFY_STORE=acme-outlet.myshopify.com\nSHOPIFY_ADMIN_TOKEN={s}",
        lambda r: "sh" + "pca_" + _pick(r, HEX, 32),
    ),
    (
        "shopify: custom app token in a GraphQL curl",
        "curl -X POST https://acme-outlet.myshopify.com/admin/api/2025-01/graphql.json "
        "-H 'X-Shopify-Access-Token: {s}' -H 'Content-Type: application/json' -d @query.json",
        lambda r: "sh" + "pca_" + _pick(r, HEX, 32),
    ),
    (
        "shopify: private app password in a theme kit config",
        'development:\n  password: {s}\n  theme_id: "1290"\n  store: acme-outlet.myshopify.com',
        lambda r: "sh" + "ppa_" + _pick(r, HEX, 32),
    ),
    # sidekiq-secret
    (
        "sidekiq: Enterprise credentials in bundle config",
        "bundle config set --global enterprise.contribsys.com {s}",
        lambda r: _pick(r, HEX, 8) + ":" + _pick(r, HEX, 8),
    ),
    (
        "sidekiq: Enterprise credentials in a Dockerfile env",
        "ENV BUNDLE_ENTERPRISE__CONTRIBSYS__COM={s}\nRUN bundle install --jobs 4",
        lambda r: _pick(r, HEX, 8) + ":" + _pick(r, HEX, 8),
    ),
    # slack-legacy-workspace-token / slack-user-token
    (
        "slack: legacy workspace token in a script",
        "SLACK_TOKEN = '{s}'\nclient = WebClient(token=SLACK_TOKEN)",
        _slack_legacy_ws("a"),
    ),
    (
        "slack: legacy refresh token in JSON",
        '{"ok": true, "access_token": "REDACTED", "refresh_token": "{s}", "expires_in": 43200}',
        _slack_legacy_ws("r"),
    ),
    (
        "slack: user token in .env",
        "SLACK_USER_TOKEN={s}",
        _slack_user,
    ),
    (
        "slack: user token in a curl",
        'curl -H "Authorization: Bearer {s}" "https://slack.com/api/search.messages?query=invoice"',
        _slack_user,
    ),
    # sonar-api-token
    (
        "sonar: user token in sonar-project.properties",
        "sonar.projectKey=acme_payments\nsonar.host.url=https://sonar.acme.io\nsonar.token={s}",
        lambda r: "sq" + "u_" + _pick(r, HEX, 40),
    ),
    (
        "sonar: project analysis token on the scanner CLI",
        "sonar-scanner -Dsonar.projectKey=acme_web -Dsonar.login={s}",
        lambda r: "sq" + "p_" + _pick(r, HEX, 40),
    ),
    (
        "sonar: global analysis token in a GitHub Actions env",
        "        env:\n          SONAR_TOKEN: {s}\n          SONAR_HOST_URL: https://sonar.acme.io",
        lambda r: "sq" + "a_" + _pick(r, HEX, 40),
    ),
    # sumologic-access-id
    (
        "sumologic: access key in .env",
        "SUMO_ACCESS_ID=" + _SUMO_ID + "\nSUMO_ACCESS_KEY={s}",
        lambda r: _pick(r, ALNUM, 64),
    ),
    (
        "sumologic: access key in a curl -u",
        "curl -u '" + _SUMO_ID + ":{s}' https://api.sumologic.com/api/v1/collectors",
        lambda r: _pick(r, ALNUM, 64),
    ),
    # travisci-access-token
    (
        "travis: API token in a curl",
        'curl -H "Travis-API-Version: 3" -H "Authorization: token {s}" https://api.travis-ci.com/repos',
        lambda r: _pick(r, ALNUM, 22),
    ),
    (
        "travis: token exported",
        'export TRAVIS_TOKEN={s}\ntravis login --pro --github-token "$GH"',
        lambda r: _pick(r, ALNUM, 22),
    ),
    # twitch-api-token
    (
        "twitch: client secret in .env",
        "TWITCH_CLIENT_ID=" + _TWITCH_ID + "\nTWITCH_CLIENT_SECRET={s}",
        lambda r: _pick(r, LOWER_DIGITS, 30),
    ),
    (
        "twitch: user access token in a curl",
        "curl -X GET 'https://api.twitch.tv/helix/users' -H 'Authorization: Bearer {s}' -H 'Client-Id: "
        + _TWITCH_ID
        + "'",
        lambda r: _pick(r, LOWER_DIGITS, 30),
    ),
    # twitter-access-secret / twitter-api-secret
    (
        "twitter: API key secret in .env",
        "TWITTER_API_KEY=" + _TW_KEY + "\nTWITTER_API_SECRET={s}",
        lambda r: _pick(r, ALNUM, 50),
    ),
    (
        "twitter: access token secret in tweepy",
        "auth = tweepy.OAuth1UserHandler(\n    consumer_key, consumer_secret,\n    '" + _TW_TOKEN + "',\n    '{s}',\n)",
        lambda r: _pick(r, ALNUM, 45),
    ),
    (
        "twitter: access secret in a YAML config",
        "twitter:\n  access_token: " + _TW_TOKEN + "\n  access_secret: {s}",
        lambda r: _pick(r, ALNUM, 45),
    ),
    (
        "twitter: app bearer token in a curl",
        "curl 'https://api.x.com/2/tweets/search/recent?query=acme' -H \"Authorization: Bearer {s}\"",
        _twitter_bearer,
    ),
    # zendesk-secret-key
    (
        "zendesk: API token in a curl -u",
        "curl https://acme.zendesk.com/api/v2/tickets.json -u support@acme.io/token:{s}",
        lambda r: _pick(r, ALNUM, 40),
    ),
    (
        "zendesk: API token in .env",
        "ZENDESK_SUBDOMAIN=acme\nZENDESK_EMAIL=support@acme.io\nZENDESK_API_TOKEN={s}",
        lambda r: _pick(r, ALNUM, 40),
    ),
    # === generic cases every set has ===
    # passwords in URLs and connection strings
    (
        "password: Postgres URL in .env",
        "DATABASE_URL=postgres://app:{s}@db.internal.acme.io:5432/orders?sslmode=require",
        _url_pw,
    ),
    (
        "password: MongoDB SRV URL in a Node config",
        "mongoose.connect('mongodb+srv://api-user:{s}@cluster0.ab12c.mongodb.net/shop?retryWrites=true');",
        _url_pw,
    ),
    (
        "password: Redis URL with a password only",
        "REDIS_URL=rediss://:{s}@cache.acme.io:6380/0",
        _url_pw,
    ),
    (
        "password: AMQP URL in a chat message",
        "rabbit is at amqp://orders:{s}@mq.internal:5672/prod if you need to replay the queue",
        _url_pw,
    ),
    (
        "password: SQL Server connection string in appsettings.json",
        '{\n  "ConnectionStrings": {\n    "Default": "Server=tcp:acme-sql.database.windows.net,1433;'
        'Database=erp;User ID=erp_app;Password={s};Encrypt=True;"\n  }\n}',
        _url_pw,
    ),
    (
        "password: JDBC URL with password parameter",
        "spring.datasource.url=jdbc:mysql://mysql.internal:3306/billing?user=billing&password={s}&useSSL=true",
        _url_pw,
    ),
    (
        "password: SMTP URL in YAML",
        "mailer:\n  dsn: smtp://alerts%40acme.io:{s}@smtp.office365.com:587",
        _url_pw,
    ),
    # passwords in .env / YAML / JSON
    (
        "password: DB password in .env",
        "DB_HOST=10.0.3.12\nDB_USER=wp\nDB_PASSWORD={s}\nDB_NAME=wordpress",
        _pw,
    ),
    (
        "password: docker-compose environment",
        "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_USER: app\n"
        "      POSTGRES_PASSWORD: {s}",
        _pw,
    ),
    (
        "password: Spring application.yml",
        "spring:\n  datasource:\n    url: jdbc:postgresql://db:5432/app\n    username: app\n    password: '{s}'",
        _pw,
    ),
    (
        "password: JSON config",
        '{\n  "ldap": {\n    "url": "ldaps://dc01.corp.acme.io",\n    "bindDn": "cn=svc-wiki,ou=svc,dc=acme,dc=io",\n'
        '    "bindPassword": "{s}"\n  }\n}',
        _pw,
    ),
    (
        "password: Ansible inventory vars",
        "[db]\npg01 ansible_host=10.0.4.11 ansible_user=admin ansible_password={s}",
        _url_pw,
    ),
    (
        "password: chat sentence",
        "the wifi admin login is admin / {s} - change it when you get there",
        _pw,
    ),
    # shell history
    (
        "shell: mysql -p in history",
        "  512  mysql -h db01 -u root -p{s} -e 'show databases'",
        _url_pw,
    ),
    (
        "shell: sshpass in history",
        "sshpass -p '{s}' ssh deploy@10.0.5.20 'sudo systemctl restart api'",
        _pw,
    ),
    (
        "shell: export of a password",
        "export PGPASSWORD={s}\npsql -h db.internal -U reporting -d analytics",
        _url_pw,
    ),
    (
        "shell: docker login with password",
        "docker login registry.acme.io -u ci -p {s}",
        _url_pw,
    ),
    # basic auth
    (
        "basic-auth: header in a curl",
        "curl -H 'Authorization: Basic {s}' https://nexus.acme.io/service/rest/v1/repositories",
        lambda r: _basic("admin", _url_pw(r)),
    ),
    (
        "basic-auth: header in an HTTP request paste",
        "POST /api/v2/deploy HTTP/1.1\nHost: ci.acme.io\nAuthorization: Basic {s}\nContent-Length: 42",
        lambda r: _basic("deployer", _pw(r)),
    ),
    (
        "basic-auth: requests auth tuple",
        'resp = requests.get(f"{BASE}/rest/api/2/search", auth=("jira-bot@acme.io", "{s}"))',
        _pw,
    ),
    # private keys
    (
        "private-key: OpenSSH key in a chat message",
        "here is the bastion key, chmod 600 it:\n{s}",
        _openssh,
    ),
    (
        "private-key: OpenSSH key in a CI variable note",
        "SSH_PRIVATE_KEY (protected, masked):\n{s}",
        lambda r: _openssh(r, b"gitlab-ci@runner"),
    ),
    (
        "private-key: Ed25519 PKCS8 PEM",
        "# signer.pem\n{s}",
        _ed25519_pkcs8_pem,
    ),
    # AWS
    (
        "aws: credentials file",
        "[default]\naws_access_key_id = " + _AWS_ID_1 + "\naws_secret_access_key = {s}\nregion = eu-west-1",
        _aws_secret,
    ),
    (
        "aws: exported keys",
        "export AWS_ACCESS_KEY_ID=" + _AWS_ID_2 + "\nexport AWS_SECRET_ACCESS_KEY={s}\naws s3 ls",
        _aws_secret,
    ),
    (
        "aws: keys in a boto3 snippet",
        "s3 = boto3.client(\n    's3',\n    aws_access_key_id='"
        + _AWS_ID_3
        + "',\n    aws_secret_access_key='{s}',\n)",
        _aws_secret,
    ),
    (
        "aws: key pair in a chat message",
        "for the backfill use " + _aws_key_id(_IDS) + " / {s} (ci-uploader, s3 only)",
        _aws_secret,
    ),
    (
        "aws: session credentials JSON",
        '{\n  "Credentials": {\n    "AccessKeyId": "AS' + "IA" + _pick(_IDS, UPPER_DIGITS, 16) + '",\n'
        '    "SecretAccessKey": "{s}",\n    "SessionToken": "IQoJb3JpZ2luX2VjE' + _pick(_IDS, B64, 120) + '",\n'
        '    "Expiration": "2025-11-28T18:00:00Z"\n  }\n}',
        _aws_secret,
    ),
    # GCP
    (
        "gcp: service-account key JSON",
        "{s}",
        _gcp_sa_json,
    ),
    (
        "gcp: API key in a Maps URL",
        "https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={s}",
        _google_api_key,
    ),
    (
        "gcp: API key in .env",
        "GOOGLE_API_KEY={s}\nGEMINI_MODEL=gemini-2.5-flash",
        _google_api_key,
    ),
    (
        "gcp: Gemini key in a curl",
        'curl "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent" '
        '-H "x-goog-api-key: {s}" -H "Content-Type: application/json" -d @prompt.json',
        _google_api_key,
    ),
    (
        "gcp: OAuth client secret in client_secret.json",
        '{"installed": {"client_id": "' + _GOOGLE_CLIENT + '.apps.googleusercontent.com", '
        '"client_secret": "{s}", "redirect_uris": ["http://localhost"]}}',
        lambda r: "GOC" + "SPX-" + _pick(r, B64URL, 28),
    ),
    (
        "gcp: OAuth access token in a curl",
        'curl -H "Authorization: Bearer {s}" https://www.googleapis.com/drive/v3/files',
        lambda r: "ya" + "29.a0" + _pick(r, B64URL, 180),
    ),
    # Azure
    (
        "azure: storage connection string",
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmeprodlogs;"
        "AccountKey={s};EndpointSuffix=core.windows.net",
        _azure_storage_key,
    ),
    (
        "azure: service principal secret in az login",
        "az login --service-principal -u " + _AZ_APP + " -p '{s}' --tenant " + _AZ_TENANT,
        _azure_secret,
    ),
    (
        "azure: client secret in .env",
        "AZURE_TENANT_ID=" + _AZ_TENANT + "\nAZURE_CLIENT_ID=" + _AZ_APP + "\nAZURE_CLIENT_SECRET={s}",
        _azure_secret,
    ),
    (
        "azure: SAS token in a blob URL",
        "azcopy copy ./backup.tar 'https://acmeprodlogs.blob.core.windows.net/backups/backup.tar?"
        "sv=2022-11-02&ss=b&srt=co&sp=rwdlac&se=2026-01-01T00:00:00Z&st=2025-11-01T00:00:00Z&spr=https&sig={s}'",
        lambda r: _b64(r, 32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D"),
    ),
    (
        "azure: OpenAI key in a curl",
        'curl "https://acme-openai.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21" '
        '-H "api-key: {s}" -H "Content-Type: application/json" -d @chat.json',
        lambda r: _pick(r, ALNUM, 84),
    ),
    # === the tokens people paste most ===
    (
        "github: classic PAT in .env",
        "GITHUB_TOKEN={s}",
        _checksummed("gh" + "p_"),
    ),
    (
        "github: classic PAT in a git remote",
        "git remote set-url origin https://{s}@github.com/acme/website.git",
        _checksummed("gh" + "p_"),
    ),
    (
        "github: classic PAT in a chat message",
        "use my token for now: {s}",
        _checksummed("gh" + "p_"),
    ),
    (
        "github: fine-grained PAT in a curl",
        'curl -L -H "Authorization: Bearer {s}" -H "X-GitHub-Api-Version: 2022-11-28" '
        "https://api.github.com/repos/acme/website/actions/runs",
        _gh_pat_fine,
    ),
    (
        "github: fine-grained PAT in a docker login",
        "echo {s} | docker login ghcr.io -u dana-acme --password-stdin",
        _gh_pat_fine,
    ),
    (
        "openai: project key in .env",
        "OPENAI_API_KEY={s}",
        _openai_proj,
    ),
    (
        "openai: project key in Python",
        'from openai import OpenAI\n\nclient = OpenAI(api_key="{s}")',
        _openai_proj,
    ),
    (
        "openai: project key in a curl",
        'curl https://api.openai.com/v1/chat/completions -H "Authorization: Bearer {s}" '
        '-H "Content-Type: application/json" -d @body.json',
        _openai_proj,
    ),
    (
        "openai: legacy key in a chat message",
        "old key from the prototype, still active I think: {s}",
        _openai_legacy,
    ),
    (
        "anthropic: API key in a Claude Code settings JSON",
        '{\n  "env": {\n    "ANTHROPIC_API_KEY": "{s}"\n  }\n}',
        _anthropic("api03"),
    ),
    (
        "slack: bot token in .env",
        "SLACK_BOT_TOKEN={s}\nSLACK_SIGNING_SECRET=" + _pick(_IDS, HEX, 32),
        _slack("b"),
    ),
    (
        "slack: bot token in a Bolt app",
        "const app = new App({\n  token: '{s}',\n  signingSecret: process.env.SLACK_SIGNING_SECRET,\n});",
        _slack("b"),
    ),
    (
        "slack: signing secret in .env",
        "SLACK_SIGNING_SECRET={s}",
        lambda r: _pick(r, HEX, 32),
    ),
    (
        "slack: incoming webhook in a curl",
        "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"build green\"}' {s}",
        lambda r: (
            "https://hooks.slack.com/services/"
            + "T"
            + _pick(r, UPPER_DIGITS, 8)
            + "/B"
            + _pick(r, UPPER_DIGITS, 10)
            + "/"
            + _pick(r, ALNUM, 24)
        ),
    ),
    (
        "slack: app-level token in a chat message",
        "socket mode token: {s}",
        lambda r: (
            "xa"
            + "pp-1-A"
            + _pick(r, UPPER_DIGITS, 10)
            + "-"
            + str(r.randrange(10**12, 10**13))
            + "-"
            + _pick(r, HEX, 64)
        ),
    ),
    (
        "google: API key in a Places snippet",
        "import googlemaps\n\ngmaps = googlemaps.Client(key='{s}')\nplaces = gmaps.places_nearby(location, radius=500)",
        _google_api_key,
    ),
    (
        "google: refresh token in a token.json",
        '{"token": "ya' + '29.REDACTED", "refresh_token": "{s}", "token_uri": "https://oauth2.googleapis.com/token", '
        '"client_id": "' + _GOOGLE_CLIENT + '.apps.googleusercontent.com", "client_secret": "REDACTED"}',
        lambda r: "1/" + "/0" + r.choice("3456789abcdefg") + _pick(r, B64URL, 99),
    ),
    # a few more contexts for the commonest ones
    (
        "anthropic: API key exported in a shell",
        "export ANTHROPIC_API_KEY={s}\nclaude -p 'summarise CHANGELOG.md'",
        _anthropic("api03"),
    ),
    (
        "openai: project key in a LangChain snippet",
        'llm = ChatOpenAI(model="gpt-4o-mini", temperature=0, api_key="{s}")',
        _openai_proj,
    ),
    (
        "github: classic PAT in git-credentials",
        "https://dana-acme:{s}@github.com",
        _checksummed("gh" + "p_"),
    ),
    (
        "slack: user token in a chat message",
        "I used my own user token for the export script ({s}), so it can read private channels",
        _slack_user,
    ),
    (
        "aws: keys in docker run",
        "docker run --rm -e AWS_ACCESS_KEY_ID=" + _aws_key_id(_IDS) + " -e AWS_SECRET_ACCESS_KEY={s} "
        "-e AWS_REGION=eu-central-1 acme/etl:latest",
        _aws_secret,
    ),
    (
        "gcp: base64 service-account key in an env var",
        "GOOGLE_CREDENTIALS_B64={s}",
        lambda r: base64.b64encode(_gcp_sa_json(r).encode()).decode(),
    ),
    (
        "cohere: API key in a curl",
        "curl --request POST --url https://api.cohere.com/v2/chat --header 'Authorization: bearer {s}' "
        "--header 'content-type: application/json' --data @chat.json",
        lambda r: _pick(r, ALNUM, 40),
    ),
    (
        "npm: token in .yarnrc.yml",
        'npmRegistryServer: "https://registry.npmjs.org"\nnpmAuthToken: "{s}"',
        _checksummed("np" + "m_"),
    ),
    (
        "sendgrid: API key in a chat message",
        "new sendgrid key for the newsletter service is {s} (full access, sorry)",
        _sendgrid,
    ),
    (
        "password: .pgpass line",
        "db.internal.acme.io:5432:analytics:reporting:{s}",
        _url_pw,
    ),
    (
        "password: net use in a PowerShell history",
        "net use Z: \\\\fs01\\finance /user:ACME\\svc-backup {s} /persistent:no",
        _url_pw,
    ),
    (
        "jwt: session cookie in a curl",
        "curl 'https://app.acme.io/api/me' -H 'Cookie: theme=dark; session={s}'",
        _hs_jwt,
    ),
    (
        "generic: API key in a TOML config",
        '[search]\nendpoint = "https://search.internal.acme.io"\napi_key = "{s}"',
        lambda r: _pick(r, ALNUM, 32),
    ),
    (
        "private-key: RSA PEM in an Ansible vars file",
        "nginx_tls_key: |\n  {s}",
        lambda r: _rsa_pem(r).replace("\n", "\n  "),
    ),
]


def credentials() -> list[Sample]:
    out: list[Sample] = []
    for kind, template, make in _CREDENTIALS:
        secret = make(_rng(kind))
        out.append(Sample(kind, template.replace("{s}", secret), secret))
    return out


# --- look-alikes ---


def _sha1(r: random.Random) -> str:
    return _pick(r, HEX, 40)


def _sha256(r: random.Random) -> str:
    return _pick(r, HEX, 64)


def _sops(r: random.Random, n: int) -> str:
    return "ENC[AES256_GCM,data:" + _b64(r, n) + ",iv:" + _b64(r, 32) + ",tag:" + _b64(r, 16) + ",type:str]"


def _cert(r: random.Random) -> str:
    return _pem("CERTIFICATE", _CERT_HEAD + r.randbytes(900))


def _redacted(prefix: str, keep: int = 4) -> Callable[[random.Random], str]:
    return lambda r: prefix + "*" * 8 + _pick(r, ALNUM, keep)


_LOOKALIKES: list[tuple[str, Callable[[random.Random], str]]] = [
    # --- placeholders and documentation examples ---
    ("placeholder: .env.example", lambda r: "OPENAI_API_KEY=<your-openai-key>\nANTHROPIC_API_KEY=<your-anthropic-key>"),
    ("placeholder: xxxx in a README", lambda r: "export GITHUB_TOKEN=" + "gh" + "p_" + "x" * 36),
    (
        "placeholder: shell variable reference",
        lambda r: 'curl -H "Authorization: Bearer ${API_TOKEN}" https://api.acme.io/v1/me',
    ),
    ("placeholder: changeme in docs", lambda r: "POSTGRES_PASSWORD=changeme  # set a real one in production"),
    ("placeholder: YAML with empty values", lambda r: 'sendgrid:\n  api_key: ""\n  from: noreply@acme.io'),
    (
        "placeholder: angle brackets in a curl",
        lambda r: "curl -u <username>:<password> https://nexus.acme.io/service/rest/v1/status",
    ),
    ("placeholder: Helm values template", lambda r: "secrets:\n  dbPassword: {{ .Values.db.password | quote }}"),
    (
        "placeholder: GitHub Actions secret reference",
        lambda r: "env:\n  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}\n  SLACK_WEBHOOK: ${{ secrets.SLACK_WEBHOOK }}",
    ),
    (
        "placeholder: process.env in code",
        lambda r: "const stripe = new Stripe(process.env.STRIPE_SECRET_KEY!, { apiVersion: '2025-01-27' });",
    ),
    (
        "placeholder: os.environ in code",
        lambda r: 'client = anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"])',
    ),
    (
        "placeholder: AWS documentation example keys",
        lambda r: (
            "aws_access_key_id = AK"
            + "IA"
            + "IOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY"
            + "EXAMPLEKEY"
        ),
    ),
    (
        "placeholder: your_api_key_here",
        lambda r: "FINNHUB_API_KEY=your_api_key_here\nRAPIDAPI_KEY=your_rapidapi_key_here",
    ),
    (
        "placeholder: dotted mask in docs",
        lambda r: "Paste the token (it looks like sk" + "-ant-api03-...AA) into Settings > API keys.",
    ),
    (
        "placeholder: password prompt transcript",
        lambda r: "$ psql -h db.internal -U reporting analytics\nPassword for user reporting:\npsql (16.4)",
    ),
    (
        "placeholder: connection string with a variable",
        lambda r: "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
    ),
    (
        "placeholder: Terraform variable",
        lambda r: 'variable "cloudflare_api_token" {\n  type      = string\n  sensitive = true\n}',
    ),
    (
        "placeholder: k8s secretKeyRef",
        lambda r: (
            "env:\n  - name: SENDGRID_API_KEY\n    valueFrom:\n      secretKeyRef:\n        name: mail\n      "
            "  key: api-key"
        ),
    ),
    (
        "placeholder: 1Password reference",
        lambda r: "DATABASE_PASSWORD=op://Production/postgres/password\nSTRIPE_KEY=op://Production/stripe/secret-key",
    ),
    ("placeholder: Vault path", lambda r: "vault kv get -field=password secret/data/prod/postgres"),
    (
        "placeholder: AWS Secrets Manager ARN",
        lambda r: (
            "arn:aws:secretsmanager:eu-west-1:"
            + str(r.randrange(10**11, 10**12))
            + ":secret:prod/api/sendgrid-"
            + _pick(r, ALNUM, 6)
        ),
    ),
    (
        "placeholder: docs curl with TOKEN",
        lambda r: 'curl --header "PRIVATE-TOKEN: <your_access_token>" "https://gitlab.example.com/api/v4/projects"',
    ),
    (
        "placeholder: JSON with REPLACE_ME",
        lambda r: '{"zendesk": {"subdomain": "acme", "email": "support@acme.io", "token": "REPLACE_ME"}}',
    ),
    (
        "placeholder: password policy text",
        lambda r: "Passwords must be at least 14 characters and include a digit; e.g. not Password123!",
    ),
    (
        "placeholder: dummy test password",
        lambda r: (
            "def test_login(client):\n    resp = client.post('/login', data={'user': 'alice', 'password': 'test'})"
        ),
    ),
    ("placeholder: masked CI log", lambda r: "Run npm publish\n  env:\n    NODE_AUTH_TOKEN: ***\n+ acme-ui@3.4.1"),
    (
        "placeholder: jwt.io example token",
        lambda r: (
            "the jwt.io sample eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
            "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
            "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c decodes to John Doe"
        ),
    ),
    (
        "placeholder: example private key header in docs",
        lambda r: "The key file must start with " + _BEGIN + "OPENSSH " + _PRIV + "----- and be mode 0600.",
    ),
    # --- redacted tokens ---
    ("redacted: GitHub PAT", _redacted("gh" + "p_")),
    (
        "redacted: OpenAI key in a usage page",
        lambda r: "Key sk" + "-proj-...." + _pick(r, ALNUM, 4) + " last used 2 hours ago by dana",
    ),
    (
        "redacted: Anthropic key in console",
        lambda r: "sk" + "-ant-api03-" + _pick(r, B64URL, 6) + "...AA  created Nov 3, 2025  Default workspace",
    ),
    ("redacted: Slack token", lambda r: "SLACK_BOT_TOKEN=xo" + "xb-****-****-" + "*" * 24),
    (
        "redacted: AWS key id in IAM console",
        lambda r: (
            "Access key: AK" + "IA" + "*" * 12 + _pick(r, UPPER_DIGITS, 4) + "  Status: Active  Last used: 2025-11-20"
        ),
    ),
    (
        "redacted: GitLab token in an audit log",
        lambda r: "Personal access token gl" + "pat-[REDACTED] created by @dana",
    ),
    ("redacted: connection string", lambda r: "DATABASE_URL=postgres://app:********@db.internal:5432/orders"),
    (
        "redacted: SendGrid key in a ticket",
        lambda r: "we rotated SG." + "xxxxxx...xxxx on 2025-11-02 after the incident",
    ),
    ("redacted: Stripe key in a log", lambda r: "stripe: using key sk" + "_live_" + "*" * 20 + _pick(r, ALNUM, 4)),
    (
        "redacted: vault output",
        lambda r: (
            "Key                Value\n---                -----\npassword           <sensitive>\nusername     "
            "      reporting"
        ),
    ),
    # --- public by design ---
    (
        "public: Algolia search-only key in a frontend",
        lambda r: (
            "const search = algoliasearch('" + _ALGOLIA_APP + "', '" + _pick(r, HEX, 32) + "'); // search-only key"
        ),
    ),
    (
        "public: Algolia DocSearch config",
        lambda r: (
            "docsearch({\n  appId: '"
            + _ALGOLIA_APP
            + "',\n  apiKey: '"
            + _pick(r, HEX, 32)
            + "', // public search key\n  indexName: 'acme-docs',\n});"
        ),
    ),
    ("public: Mapbox public token in a web map", lambda r: "mapboxgl.accessToken = '" + _mapbox("pk")(r) + "';"),
    ("public: Lob publishable key", lambda r: "LOB_PUBLISHABLE_KEY=live" + "_pub_" + _pick(r, HEX, 31)),
    (
        "public: Mailgun public validation key",
        lambda r: "mailgun validation (client side): pub" + "key-" + _pick(r, HEX, 32),
    ),
    ("public: Stripe publishable key", lambda r: "const stripe = Stripe('p" + "k_live_" + _pick(r, ALNUM, 99) + "');"),
    (
        "public: Firebase web config",
        lambda r: (
            "const firebaseConfig = {\n  apiKey: '"
            + _google_api_key(r)
            + "',\n  authDomain: 'acme-app.firebaseapp.com',\n  projectId: 'acme-app',\n  appId: '1:"
            + str(r.randrange(10**11, 10**12))
            + ":web:"
            + _pick(r, HEX, 22)
            + "',\n};"
        ),
    ),
    ("public: Google OAuth client id", lambda r: "GOOGLE_CLIENT_ID=" + _GOOGLE_CLIENT + ".apps.googleusercontent.com"),
    (
        "public: Azure tenant and client ids",
        lambda r: (
            "AZURE_TENANT_ID=" + _AZ_TENANT + "\nAZURE_CLIENT_ID=" + _AZ_APP + "\nAZURE_SUBSCRIPTION_ID=" + _uuid(r)
        ),
    ),
    (
        "public: Discord application public key",
        lambda r: "DISCORD_APPLICATION_ID=" + _DISCORD_APP + "\nDISCORD_PUBLIC_KEY=" + _pick(r, HEX, 64),
    ),
    ("public: Asana client id alone", lambda r: "asana app client_id: " + _ASANA_CLIENT),
    (
        "public: Bitbucket OAuth consumer key alone",
        lambda r: "bitbucket consumer key " + _BB_KEY + " (callback https://ci.acme.io/oauth)",
    ),
    (
        "public: LaunchDarkly client-side id",
        lambda r: "const client = LDClient.initialize('" + _LD_CLIENT + "', context);",
    ),
    (
        "public: Sentry DSN in a browser bundle",
        lambda r: (
            "Sentry.init({ dsn: 'https://"
            + _pick(r, HEX, 32)
            + "@o"
            + str(r.randrange(10**5, 10**6))
            + ".ingest.sentry.io/"
            + str(r.randrange(10**6, 10**7))
            + "' });"
        ),
    ),
    (
        "public: Plaid client id alone",
        lambda r: "Plaid client_id " + _PLAID_CLIENT + " (sandbox & production share it)",
    ),
    ("public: Twitch client id in a header", lambda r: "Client-Id: " + _TWITCH_ID),
    (
        "public: Flutterwave public key",
        lambda r: (
            "FlutterwaveCheckout({ public_key: 'FLW" + "PUBK-" + _pick(r, HEX, 32) + "-X', tx_ref: 'ord-1182' });"
        ),
    ),
    (
        "public: reCAPTCHA site key",
        lambda r: '<div class="g-recaptcha" data-sitekey="6L' + _pick(r, B64URL, 38) + '"></div>',
    ),
    ("public: GA measurement id", lambda r: "gtag('config', 'G-" + _pick(r, UPPER_DIGITS, 10) + "');"),
    (
        "public: PostHog project key",
        lambda r: "posthog.init('ph" + "c_" + _pick(r, ALNUM, 43) + "', { api_host: 'https://eu.i.posthog.com' })",
    ),
    (
        "public: Supabase anon key",
        lambda r: (
            "NEXT_PUBLIC_SUPABASE_ANON_KEY="
            + _jwt(
                r,
                {"alg": "HS256", "typ": "JWT"},
                {"iss": "supabase", "ref": _pick(r, LOWER, 20), "role": "anon", "iat": 1735000000, "exp": 2050576000},
            )
        ),
    ),
    (
        "public: AWS account id and ARN",
        lambda r: "arn:aws:iam::" + str(r.randrange(10**11, 10**12)) + ":role/github-actions-deploy",
    ),
    (
        "public: Alibaba AccessKey id alone in a RAM listing",
        lambda r: "AccessKey ID: " + _ALIBABA_ID + "  Status: Enabled  Created: 2025-10-01",
    ),
    ("public: Sumo Logic access id alone", lambda r: "access id " + _SUMO_ID + " belongs to the log-shipper role"),
    ("public: Twilio account SID", lambda r: "TWILIO_ACCOUNT_SID=AC" + _pick(r, HEX, 32)),
    (
        "public: Stripe object ids",
        lambda r: (
            "refund re_"
            + _pick(r, ALNUM, 24)
            + " for payment pi_"
            + _pick(r, ALNUM, 24)
            + " (customer cus_"
            + _pick(r, ALNUM, 14)
            + ")"
        ),
    ),
    (
        "public: Slack channel and user ids",
        lambda r: (
            "posted in C"
            + _pick(r, UPPER_DIGITS, 10)
            + " by U"
            + _pick(r, UPPER_DIGITS, 10)
            + " at ts 1732790412.004519"
        ),
    ),
    (
        "public: Apple team and key ids",
        lambda r: "APPLE_TEAM_ID=" + _pick(r, UPPER_DIGITS, 10) + "\nAPPLE_KEY_ID=" + _pick(r, UPPER_DIGITS, 10),
    ),
    ("public: Dropbox app key alone", lambda r: "dropbox app key: " + _DROPBOX_KEY),
    # --- hashes and digests ---
    (
        "hash: git log",
        lambda r: "\n".join(_sha1(r) + " " + m for m in ("fix: retry on 429", "chore: bump deps", "feat: export CSV")),
    ),
    (
        "hash: short SHAs in a changelog",
        lambda r: "- fix token refresh (" + _pick(r, HEX, 7) + ")\n- add retries (" + _pick(r, HEX, 7) + ")",
    ),
    ("hash: sha256sum output", lambda r: _sha256(r) + "  memagent-1.4.2-linux-amd64.tar.gz"),
    (
        "hash: npm lockfile integrity",
        lambda r: (
            '"node_modules/lodash": {\n  "version": "4.17.21",\n  "resolved": '
            '"https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",\n  "integrity": "sha512-' + _b64(r, 64) + '"\n}'
        ),
    ),
    (
        "hash: yarn.lock entry",
        lambda r: (
            'react@^18.3.1:\n  version "18.3.1"\n  resolved "https://registry.yarnpkg.com/react/-/react-18.3.1.tgz#'
            + _sha1(r)
            + '"\n  integrity sha512-'
            + _b64(r, 64)
        ),
    ),
    (
        "hash: go.sum lines",
        lambda r: (
            "golang.org/x/crypto v0.31.0 h1:" + _b64(r, 32) + "\ngolang.org/x/crypto v0.31.0/go.mod h1:" + _b64(r, 32)
        ),
    ),
    ("hash: Docker image digest", lambda r: "image: ghcr.io/acme/api@sha256:" + _sha256(r)),
    (
        "hash: pip requirements with hashes",
        lambda r: "requests==2.32.3 \\\n    --hash=sha256:" + _sha256(r) + " \\\n    --hash=sha256:" + _sha256(r),
    ),
    (
        "hash: Cargo.lock checksum",
        lambda r: (
            '[[package]]\nname = "serde"\nversion = "1.0.215"\nsource = '
            '"registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "' + _sha256(r) + '"'
        ),
    ),
    (
        "hash: SRI script tag",
        lambda r: (
            '<script src="https://cdn.jsdelivr.net/npm/htmx.org@2.0.3" integrity="sha384-'
            + _b64(r, 48)
            + '" crossorigin="anonymous"></script>'
        ),
    ),
    ("hash: S3 ETag", lambda r: '"ETag": "\\"' + _pick(r, HEX, 32) + '\\"",\n"LastModified": "2025-11-20T09:14:03Z"'),
    ("hash: GitHub commit URL", lambda r: "see https://github.com/acme/api/commit/" + _sha1(r) + " for the fix"),
    (
        "hash: terraform lock file",
        lambda r: (
            'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.80.0"\n  hashes = [\n    "h1:'
            + _b64(r, 32)
            + '",\n    "zh:'
            + _sha256(r)
            + '",\n  ]\n}'
        ),
    ),
    (
        "hash: bcrypt hash in a fixture",
        lambda r: (
            "INSERT INTO users (email, password_hash) VALUES ('alice@example.com', '$2b$12$"
            + _pick(r, ALNUM + "./", 53)
            + "');"
        ),
    ),
    (
        "hash: Nix store path",
        lambda r: "/nix/store/" + _pick(r, "0123456789abcdfghijklmnpqrsvwxyz", 32) + "-python3-3.12.7",
    ),
    ("hash: Ethereum transaction hash", lambda r: "tx confirmed: https://etherscan.io/tx/0x" + _sha256(r)),
    ("hash: SSH host key fingerprint", lambda r: "ED25519 key fingerprint is SHA256:" + _b64(r, 32).rstrip("=") + "."),
    ("hash: IPFS CID", lambda r: "ipfs://bafybei" + _pick(r, "abcdefghijklmnopqrstuvwxyz234567", 52)),
    ("hash: webhook signature header", lambda r: "X-Hub-Signature-256: sha256=" + _sha256(r)),
    (
        "hash: content-hashed asset",
        lambda r: '<link rel="stylesheet" href="/static/css/main.' + _pick(r, HEX, 8) + '.css">',
    ),
    # --- UUIDs and other ids ---
    ("uuid: request id in a log", lambda r: "2025-11-28T10:12:03Z ERROR request_id=" + _uuid(r) + " upstream timeout"),
    (
        "uuid: kubernetes object uid",
        lambda r: (
            "metadata:\n  name: api-7d9f\n  uid: "
            + _uuid(r)
            + '\n  resourceVersion: "'
            + str(r.randrange(10**7, 10**8))
            + '"'
        ),
    ),
    (
        "uuid: idempotency key",
        lambda r: "curl -H 'Idempotency-Key: " + _uuid(r) + "' -d @charge.json https://api.acme.io/charges",
    ),
    (
        "uuid: Jira-style issue and trace ids",
        lambda r: "PAY-1182 trace_id=" + _pick(r, HEX, 32) + " span_id=" + _pick(r, HEX, 16),
    ),
    ("uuid: MongoDB ObjectId", lambda r: 'db.orders.find({ _id: ObjectId("' + _pick(r, HEX, 24) + '") })'),
    (
        "uuid: Discord snowflake ids",
        lambda r: "channel " + str(r.randrange(10**17, 10**18)) + ", message " + str(r.randrange(10**17, 10**18)),
    ),
    (
        "uuid: YouTube and Google Doc ids",
        lambda r: (
            "https://www.youtube.com/watch?v="
            + _pick(r, B64URL, 11)
            + "\nhttps://docs.google.com/document/d/"
            + _pick(r, B64URL, 44)
            + "/edit"
        ),
    ),
    (
        "uuid: Terraform state lineage",
        lambda r: (
            '{\n  "version": 4,\n  "terraform_version": "1.9.8",\n  "serial": 42,\n  "lineage": "' + _uuid(r) + '"\n}'
        ),
    ),
    ("uuid: Sentry event id", lambda r: "Sentry event " + _pick(r, HEX, 32) + " (issue ACME-WEB-3F2)"),
    ("uuid: Heroku app id", lambda r: 'heroku apps:info acme-api --json | jq .app.id\n"' + _uuid(r) + '"'),
    ("uuid: MessageBird workspace id", lambda r: "messagebird workspace " + _uuid(r) + " (EU region)"),
    (
        "uuid: Azure resource id",
        lambda r: "/subscriptions/" + _uuid(r) + "/resourceGroups/rg-prod/providers/Microsoft.Web/sites/acme-api",
    ),
    (
        "uuid: CloudFront distribution and request ids",
        lambda r: "distribution E" + _pick(r, UPPER_DIGITS, 13) + " x-amz-cf-id: " + _pick(r, B64URL, 56) + "==",
    ),
    ("uuid: Bitcoin address", lambda r: "donations: bc1q" + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 38)),
    (
        "uuid: MAC and IPv6 addresses",
        lambda r: (
            "eth0 "
            + ":".join(_pick(r, HEX, 2) for _ in range(6))
            + " inet6 fe80::"
            + ":".join(_pick(r, HEX, 4) for _ in range(4))
            + "/64"
        ),
    ),
    ("uuid: CSP nonce", lambda r: "Content-Security-Policy: script-src 'self' 'nonce-" + _b64(r, 16) + "'"),
    ("uuid: build id", lambda r: "GITHUB_RUN_ID=" + str(r.randrange(10**10, 10**11)) + " GITHUB_SHA=" + _sha1(r)),
    # --- base64 of ordinary data ---
    (
        "base64: ConfigMap binaryData",
        lambda r: (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nginx-conf\nbinaryData:\n  default.conf: "
            + base64.b64encode(b"server {\n  listen 80;\n  location / { proxy_pass http://api:8080; }\n}\n").decode()
        ),
    ),
    (
        "base64: data URI image",
        lambda r: (
            '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAA'
            + _pick(r, B64, 80)
            + '=" alt="">'
        ),
    ),
    (
        "base64: decoded JSON in a note",
        lambda r: "echo " + base64.b64encode(b'{"feature":"checkout-v2","rollout":25}').decode() + " | base64 -d",
    ),
    (
        "base64: GitHub contents API response",
        lambda r: (
            '{"name": "README.md", "encoding": "base64", "content": "'
            + base64.b64encode(b"# acme-web\n\nMarketing site. `pnpm dev` to run.\n").decode()
            + '"}'
        ),
    ),
    (
        "base64: email MIME part",
        lambda r: (
            "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n"
            + base64.b64encode(b"Hallo Team, das Deployment ist fertig.").decode()
        ),
    ),
    (
        "name: ConfigMap with feature flags",
        lambda r: (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-flags\ndata:\n  flags.json: "
            '\'{"darkMode": true, "beta": false}\''
        ),
    ),
    (
        "base64: protobuf blob in a log",
        lambda r: "decoded event payload=" + base64.b64encode(b"\x08\x96\x01\x12\x07orderId\x1a\x04paid").decode(),
    ),
    (
        "base64: cloud-init user data",
        lambda r: (
            "UserData: "
            + base64.b64encode(b"#!/bin/bash\ndnf install -y nginx\nsystemctl enable --now nginx\n").decode()
        ),
    ),
    ("base64: basic auth of the docs example", lambda r: "Authorization: Basic <base64 of user:password>"),
    # --- encrypted blobs ---
    (
        "encrypted: sops YAML",
        lambda r: (
            "db:\n  password: "
            + _sops(r, 20)
            + "\nsops:\n  age:\n    - recipient: age1"
            + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)
            + '\n  lastmodified: "2025-11-20T10:00:00Z"\n  mac: '
            + _sops(r, 48)
            + "\n  version: 3.9.1"
        ),
    ),
    (
        "encrypted: ansible-vault file",
        lambda r: "$ANSIBLE_VAULT;1.1;AES256\n" + "\n".join(_pick(r, HEX, 80) for _ in range(6)),
    ),
    (
        "encrypted: ansible inline vault",
        lambda r: (
            "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  " + "\n  ".join(_pick(r, HEX, 80) for _ in range(5))
        ),
    ),
    (
        "encrypted: SealedSecret",
        lambda r: (
            "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata:\n  name: mail\nspec:\n  "
            "encryptedData:\n    SMTP_PASSWORD: Ag" + _pick(r, B64, 600) + "=="
        ),
    ),
    ("encrypted: Vault transit ciphertext", lambda r: "ciphertext: vault:v1:" + _b64(r, 60)),
    (
        "encrypted: PGP message",
        lambda r: (
            "-----BEGIN PGP MESSAGE-----\n\nhQGMA"
            + _wrap(_pick(r, B64, 420))
            + "\n="
            + _b64(r, 3)
            + "\n-----END PGP MESSAGE-----"
        ),
    ),
    (
        "encrypted: age armored file",
        lambda r: (
            "-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSB"
            + _pick(r, B64, 21)
            + "\n"
            + _pick(r, B64, 64)
            + "\n-----END AGE ENCRYPTED FILE-----"
        ),
    ),
    ("encrypted: Rails credentials.yml.enc", lambda r: _b64(r, 180) + "--" + _b64(r, 12) + "--" + _b64(r, 16)),
    (
        "encrypted: git-crypt notice",
        lambda r: (
            "$ git-crypt status | head -3\n    encrypted: secrets/prod.env\n    encrypted: "
            "secrets/staging.env\nnot encrypted: README.md"
        ),
    ),
    (
        "encrypted: Jenkins credentials.xml secret",
        lambda r: "<password>{AQAAABAAAAAQ" + _pick(r, B64, 64) + "=}</password>",
    ),
    # --- public keys and certificates ---
    ("pubkey: authorized_keys line", lambda r: "ssh-ed25519 " + _ssh_pub(r) + " dana@laptop"),
    ("pubkey: known_hosts line", lambda r: "github.com ssh-ed25519 " + _ssh_pub(r)),
    ("pubkey: PEM public key", lambda r: _pem("PUBLIC KEY", _SPKI_EC_P256 + r.randbytes(64))),
    (
        "pubkey: RSA PEM public key in a JWT verifier",
        lambda r: (
            'JWT_PUBLIC_KEY="'
            + _pem("PUBLIC KEY", _SPKI_RSA + r.randbytes(256) + bytes.fromhex("0203010001")).replace("\n", "\\n")
            + '"'
        ),
    ),
    ("pubkey: certificate", lambda r: "# ca.crt\n" + _cert(r)),
    (
        "pubkey: certificate chain in nginx config note",
        lambda r: "ssl_certificate /etc/nginx/tls/fullchain.pem;\n# fullchain.pem:\n" + _cert(r) + "\n" + _cert(r),
    ),
    (
        "pubkey: JWKS document",
        lambda r: (
            '{"keys": [{"kty": "RSA", "kid": "'
            + _pick(r, B64URL, 22)
            + '", "use": "sig", "alg": "RS256", "n": "'
            + _b64u(b"\xc1" + r.randbytes(255))
            + '", "e": "AQAB"}]}'
        ),
    ),
    (
        "pubkey: WireGuard peer public key",
        lambda r: "[Peer]\nPublicKey = " + _b64(r, 32) + "\nAllowedIPs = 10.8.0.2/32\nEndpoint = vpn.acme.io:51820",
    ),
    (
        "pubkey: age recipient",
        lambda r: (
            "creation_rules:\n  - path_regex: secrets/.*\\.yaml$\n    age: age1"
            + _pick(r, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)
        ),
    ),
    (
        "pubkey: PGP public key block",
        lambda r: (
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ"
            + _wrap(_pick(r, B64, 300))
            + "\n="
            + _b64(r, 3)
            + "\n-----END PGP PUBLIC KEY BLOCK-----"
        ),
    ),
    ("pubkey: minisign public key", lambda r: "minisign -Vm release.tar.gz -P RW" + _pick(r, B64, 54)),
    ("pubkey: CSR", lambda r: _pem("CERTIFICATE REQUEST", bytes.fromhex("308202a3308201") + r.randbytes(600))),
    (
        "pubkey: GitHub deploy key listing",
        lambda r: "Deploy keys\n  ci-readonly  SHA256:" + _b64(r, 32).rstrip("=") + "  Read-only  Added on Nov 2, 2025",
    ),
    # --- variable names without values ---
    (
        "name: list of env var names",
        lambda r: "Required: ANTHROPIC_API_KEY, OPENAI_API_KEY, SLACK_BOT_TOKEN, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY",
    ),
    (
        "name: Python settings reading env",
        lambda r: "SENDGRID_API_KEY = env('SENDGRID_API_KEY')\nTWILIO_AUTH_TOKEN = env('TWILIO_AUTH_TOKEN')",
    ),
    (
        "name: docker-compose env passthrough",
        lambda r: "environment:\n  - DATABASE_URL\n  - REDIS_URL\n  - SENTRY_AUTH_TOKEN",
    ),
    ("name: gh secret set command", lambda r: "gh secret set NPM_TOKEN --repo acme/ui < /dev/stdin"),
    (
        "name: password field in a form",
        lambda r: '<input type="password" name="password" autocomplete="current-password" required>',
    ),
    (
        "name: TypeScript interface",
        lambda r: "interface Config {\n  apiKey: string;\n  apiSecret: string;\n  accessToken?: string;\n}",
    ),
    (
        "name: SQL schema",
        lambda r: (
            "CREATE TABLE api_tokens (\n  id uuid PRIMARY KEY,\n  token_hash bytea NOT NULL,\n  last_used_at "
            "timestamptz\n);"
        ),
    ),
    (
        "name: chat about rotating",
        lambda r: "reminder: rotate the Mailgun signing key and the Sentry auth token before the audit on Monday",
    ),
    ("name: .gitignore", lambda r: ".env\n.env.local\n*.pem\nid_ed25519\ncredentials.json\n.npmrc"),
    (
        "name: Sidekiq bundle config without value",
        lambda r: "bundle config set --global enterprise.contribsys.com $SIDEKIQ_ENT_CREDS",
    ),
    (
        "name: curl -u with env vars",
        lambda r: 'curl -u "$ES_USER:$ES_PASSWORD" https://es01.internal:9200/_cat/indices',
    ),
    (
        "name: kubectl create secret from env",
        lambda r: 'kubectl create secret generic mail --from-literal=SMTP_PASSWORD="$SMTP_PASSWORD"',
    ),
    # --- random-looking public data ---
    ("random: semver and build metadata", lambda r: "version 2.14.0+build." + _pick(r, HEX, 12)),
    (
        "random: Next.js build id",
        lambda r: '<script src="/_next/static/' + _pick(r, B64URL, 21) + '/_buildManifest.js" defer></script>',
    ),
    (
        "random: license text fingerprint",
        lambda r: "SPDX-License-Identifier: Apache-2.0\nSPDX-FileCopyrightText: 2025 ACME GmbH",
    ),
    (
        "random: ULIDs in a log",
        lambda r: (
            "job 01J"
            + _pick(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 23)
            + " done; next 01J"
            + _pick(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 23)
        ),
    ),
    (
        "random: Intercom app id",
        lambda r: (
            "window.intercomSettings = { app_id: '"
            + _pick(r, LOWER_DIGITS, 8)
            + "', user_id: 'u_"
            + str(r.randrange(10**4, 10**5))
            + "' };"
        ),
    ),
    (
        "random: lorem hex test vector",
        lambda r: "assert sha1(b'abc').hexdigest() == 'a9993e364706816aba3e25717850c26c9cd0d89d'",
    ),
    ("random: Unity/Godot guid", lambda r: "guid: " + _pick(r, HEX, 32) + "\nfileFormatVersion: 2"),
    (
        "random: Excel export ids",
        lambda r: "\n".join(f"{i},SKU-{_pick(r, UPPER_DIGITS, 8)},{r.randrange(1, 99)}" for i in range(1, 5)),
    ),
    (
        "random: Maven artifact coordinates",
        lambda r: (
            "<dependency>\n  <groupId>com.acme</groupId>\n  <artifactId>billing-core</artifactId>\n  "
            "<version>3.2.1</version>\n</dependency>"
        ),
    ),
    (
        "random: Spotify track URIs",
        lambda r: "spotify:track:" + _pick(r, ALNUM, 22) + "\nspotify:track:" + _pick(r, ALNUM, 22),
    ),
]


def lookalikes() -> list[Sample]:
    return [Sample(kind, make(_rng(kind)), "") for kind, make in _LOOKALIKES]
