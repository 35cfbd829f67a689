"""A SIXTH held-out corpus for the secret scanner, drawn at random from gitleaks' rule list.

``bench/secrets_heldout.py`` .. ``secrets_heldout5.py`` have all been measured once and then
tuned on, so none of them is held out any more. Sets 2-5 deliberately chased obscure providers
and odd contexts; this one tries to be REPRESENTATIVE of what people paste into a note instead.
It was written by someone who never opened the scanner's rules or tests and never ran a
scanner on it before it was committed, so its first measurement says how the rules generalise.

How it was built:
- Providers: a seeded random draw of 70 of the 222 rule ids in gitleaks' ``config/gitleaks.toml``
  (gitleaks/gitleaks at b58d3f1), ``random.Random(zlib.crc32(b"heldout6/gitleaks-draw"))``
  (seed 423452316) ``.sample(sorted(ids), 70)``. The rule ids drawn:
  adafruit-api-key, adobe-client-id, airtable-api-key, airtable-personnal-access-token,
  artifactory-api-key, artifactory-reference-token, authress-service-client-access-key,
  aws-access-token, beamer-api-token, bittrex-secret-key, clickhouse-cloud-api-secret-key,
  clojars-api-token, cloudflare-global-api-key, cloudflare-origin-ca-key,
  contentful-delivery-api-token, databricks-api-token, digitalocean-refresh-token,
  discord-client-secret, doppler-api-token, droneci-access-token, dropbox-long-lived-api-token,
  dropbox-short-lived-api-token, duffel-api-token, facebook-secret, finicity-api-token,
  finicity-client-secret, flutterwave-encryption-key, flutterwave-public-key, flyio-access-token,
  freshbooks-access-token, gcp-api-key, gitlab-runner-authentication-token,
  grafana-service-account-token, heroku-api-key-v2, huggingface-access-token,
  kucoin-access-token, kucoin-secret-key, linear-api-key, linkedin-client-id, mailchimp-api-key,
  mailgun-private-api-token, new-relic-insert-key, new-relic-user-api-id, nytimes-access-token,
  perplexity-api-key, plaid-client-id, planetscale-oauth-token, planetscale-password,
  postman-api-token, privateai-api-token, pulumi-api-token, pypi-upload-token,
  readme-api-token, rubygems-api-token, sentry-user-token, settlemint-personal-access-token,
  shopify-access-token, shopify-shared-secret, sidekiq-sensitive-url, slack-app-token,
  slack-bot-token, slack-config-refresh-token, slack-legacy-token, slack-webhook-url,
  sourcegraph-access-token, square-access-token, stripe-access-token, twilio-api-key,
  vault-service-token, yandex-api-key.
- Drawn rules that name an identifier which is public by design (adobe-client-id for the PDF
  Embed API, flutterwave-public-key, linkedin-client-id, plaid-client-id) became look-alikes, and
  the provider's secret that goes with the id (the Adobe OAuth client secret, Flutterwave secret
  key, LinkedIn client secret, Plaid secret) became the credential. For twilio-api-key and
  kucoin-access-token the key id sits in the text next to the secret it is paired with (the API
  key secret, the KuCoin API secret); for new-relic-user-api-id the New Relic user API key is
  written, since that is what a user pastes.
- Token formats from the providers' published documentation where I knew it, else from the
  gitleaks regex (cross-checked with trufflehog's detectors at 3ab759f and Yelp detect-secrets'
  plugins at 5e14193); each provider in 1-4 contexts people paste into a note: a ``.env`` line,
  a YAML/JSON/TOML config, a shell command (``curl -H``, ``export``, a CLI login), a chat
  sentence, a code snippet.
- Plus the generic cases every set has: passwords in URLs, connection strings, ``.env``, YAML,
  JSON and shell history; PEM and OpenSSH private keys; JWTs used as bearer tokens; basic-auth
  headers; AWS, GCP and Azure keys.
- Look-alikes: what sits next to credentials in the same notes and must not be refused:
  placeholders and documentation examples, identifiers and keys that are public by design,
  hashes and digests, UUIDs and other random ids, base64 of ordinary data, encrypted blobs,
  public keys and certificates, redacted tokens, references and variable names without values.

Same rules as before: published formats, synthetic values, data only; change a sample only to
correct a misstated format, never to make a rule pass.

Invariants:
- Data only and deterministic (a ``random.Random`` seeded per sample with
  ``zlib.crc32(f"heldout6/{name}")``).
- No real credential, and no provider prefix written out whole in this file.
- Every credential sample carries the credential (``secret``), verbatim in its text;
  look-alikes carry "".

Measured once, never tuned on (the scanner of commit 22e3911, `validate` of
``/knowledge/notes.md``): 212 of 224 credentials caught (94.6 %), 3 of 159 look-alikes
refused. From then on it is a tuning set, like the five before it
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
LETTERS = string.ascii_letters
LOWER = string.ascii_lowercase
LOWER_DIGITS = string.ascii_lowercase + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
UPPER_HEX = "0123456789ABCDEF"
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
DIGITS = string.digits
BASE32_UP = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

Make = Callable[[random.Random], str]


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(f"heldout6/{name}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    """``n`` characters of ``alphabet``; from 8 characters on, at least one digit and one letter if it has them."""
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        digits_ok = n < 8 or not (set(alphabet) & set(DIGITS)) or any(c.isdigit() for c in out)
        if digits_ok and (not any(c.isalpha() for c in alphabet) or any(c.isalpha() for c in out)):
            return out


def _digits(rng: random.Random, n: int) -> str:
    return str(rng.randrange(10 ** (n - 1), 10**n))


def _pw(rng: random.Random, n: int = 16) -> str:
    """A generated password with punctuation that needs no escaping in YAML, INI, JSON or a URL."""
    while True:
        out = _pick(rng, ALNUM + "!*-_.~", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(not c.isalnum() for c in out):
            return out


def _human_pw(rng: random.Random) -> str:
    """A password a person chose: a word, a number and a symbol."""
    words = ["Summer", "Falcon", "Orchid", "Bluebird", "Granite", "Tango", "Monsoon", "Juniper", "Harbor", "Quartz"]
    return rng.choice(words) + rng.choice(words).lower() + _digits(rng, rng.choice((2, 4))) + rng.choice("!#$?")


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


def _jwt(rng: random.Random, header: dict[str, object], claims: dict[str, object], sig_len: int = 43) -> str:
    def part(obj: dict[str, object]) -> str:
        return _b64u(json.dumps(obj, separators=(",", ":")).encode())

    return part(header) + "." + part(claims) + "." + _pick(rng, B64URL, sig_len)


def _basic(user: str, secret: str) -> str:
    return base64.b64encode(f"{user}:{secret}".encode()).decode()


_BEGIN = "-----BEGIN "
_END = "-----END "
_PRIV = "PRIV" + "ATE KEY"

# DER openings, so the base64 bodies start the way real ones do.
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


def _openssh_ed25519(r: random.Random, comment: bytes = b"dana@laptop") -> str:
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


def _ssh_pub(algo: bytes, *parts: bytes) -> str:
    return base64.b64encode(_ssh_str(algo) + b"".join(_ssh_str(p) for p in parts)).decode()


# --- token makers, one per provider, from the published format ---


def _adafruit(r: random.Random) -> str:
    return "ai" + "o_" + _pick(r, ALNUM, 28)


def _adobe_secret(r: random.Random) -> str:
    return "p8" + "e-" + _pick(r, ALNUM, 32)


def _airtable_key(r: random.Random) -> str:
    return "ke" + "y" + _pick(r, ALNUM, 14)


def _airtable_pat(r: random.Random) -> str:
    return "pa" + "t" + _pick(r, ALNUM, 14) + "." + _pick(r, HEX, 64)


def _artifactory_key(r: random.Random) -> str:
    return "AK" + "Cp8" + _pick(r, ALNUM, 68)


def _artifactory_ref(r: random.Random) -> str:
    while True:
        raw = "reftkn:01:" + _digits(r, 10) + ":" + _pick(r, ALNUM, 27)
        out = base64.b64encode(raw.encode()).decode()
        if out.isalnum():
            return out


def _authress(r: random.Random) -> str:
    key = base64.b64encode(_PKCS8_ED25519 + r.randbytes(32)).decode()
    return (
        "s"
        + "c_"
        + _pick(r, ALNUM, 22)
        + "."
        + _pick(r, ALNUM, 4)
        + ".a"
        + "cc_"
        + _pick(r, LOWER_DIGITS, 14)
        + "."
        + key
    )


def _aws_secret(r: random.Random) -> str:
    return _pick(r, B64, 40)


def _beamer(r: random.Random) -> str:
    return "b" + "_" + _pick(r, B64URL, 43) + "="


def _clickhouse(r: random.Random) -> str:
    return "4b" + "1d" + _pick(r, ALNUM, 38)


def _clojars(r: random.Random) -> str:
    return "CLOJ" + "ARS_" + _pick(r, HEX, 60)


def _cf_origin(r: random.Random) -> str:
    return "v1" + ".0-" + _pick(r, HEX, 24) + "-" + _pick(r, HEX, 146)


def _databricks(r: random.Random) -> str:
    return "da" + "pi" + _pick(r, HEX, 32)


def _do_refresh(r: random.Random) -> str:
    return "do" + "r_v1_" + _pick(r, HEX, 64)


def _doppler(r: random.Random) -> str:
    return "dp" + ".pt." + _pick(r, ALNUM, 43)


def _dropbox_long(r: random.Random) -> str:
    return _pick(r, ALNUM, 11) + "AAAAA" + "AAAAA" + _pick(r, B64URL, 43)


def _dropbox_short(r: random.Random) -> str:
    return "s" + "l." + _pick(r, B64URL, 135)


def _duffel(r: random.Random) -> str:
    return "duf" + "fel_test_" + _pick(r, B64URL, 43)


def _flw_enc(r: random.Random) -> str:
    return "FLWS" + "ECK_TEST" + _pick(r, HEX, 12)


def _flw_secret(r: random.Random) -> str:
    return "FLWS" + "ECK-" + _pick(r, HEX, 32) + "-X"


def _flw_secret_test(r: random.Random) -> str:
    return "FLWS" + "ECK_TEST-" + _pick(r, HEX, 32) + "-X"


def _fly_app(r: random.Random) -> str:
    return "fo" + "1_" + _pick(r, B64URL, 43)


def _fly_macaroon(r: random.Random) -> str:
    return "Fly" + "V1 fm" + "2_" + _b64(r, 306) + ",fm" + "2_" + _b64(r, 120)


def _gcp_key(r: random.Random) -> str:
    return "AI" + "za" + "Sy" + _pick(r, B64URL, 33)


def _glrt(r: random.Random) -> str:
    return "gl" + "rt-" + _pick(r, B64URL, 20)


def _glsa(r: random.Random) -> str:
    return "gl" + "sa_" + _pick(r, ALNUM, 32) + "_" + _pick(r, HEX, 8)


def _heroku(r: random.Random) -> str:
    return "HR" + "KU-AA" + _pick(r, B64URL, 58)


def _hf(r: random.Random) -> str:
    return "h" + "f_" + _pick(r, LETTERS, 34)


def _linear(r: random.Random) -> str:
    return "lin" + "_api_" + _pick(r, ALNUM, 40)


def _mailchimp(r: random.Random) -> str:
    return _pick(r, HEX, 32) + "-us" + str(r.randrange(10, 22))


def _mailgun_old(r: random.Random) -> str:
    return "ke" + "y-" + _pick(r, HEX, 32)


def _mailgun_new(r: random.Random) -> str:
    return _pick(r, HEX, 32) + "-" + _pick(r, HEX, 8) + "-" + _pick(r, HEX, 8)


def _nrii(r: random.Random) -> str:
    return "NR" + "II-" + _pick(r, ALNUM + "-", 32)


def _nrak(r: random.Random) -> str:
    return "NR" + "AK-" + _pick(r, UPPER_DIGITS, 27)


def _pplx(r: random.Random) -> str:
    return "pp" + "lx-" + _pick(r, ALNUM, 48)


def _planetscale_pw(r: random.Random) -> str:
    return "psc" + "ale_pw_" + _pick(r, B64URL, 43)


def _planetscale_oauth(r: random.Random) -> str:
    return "psc" + "ale_oauth_" + _pick(r, B64URL, 43)


def _postman(r: random.Random) -> str:
    return "PM" + "AK-" + _pick(r, HEX, 24) + "-" + _pick(r, HEX, 34)


def _pulumi(r: random.Random) -> str:
    return "pu" + "l-" + _pick(r, HEX, 40)


def _pypi(r: random.Random) -> str:
    """A PyPI API token: the prefix and a base64url macaroon whose location is pypi.org."""
    ident = json.dumps({"version": 1, "uuid": _uuid(r)}).encode()
    caveat = json.dumps([1, ["acme-utils"]] if r.random() < 0.5 else [0, r.randrange(10**9, 2 * 10**9)]).encode()
    mac = (
        b"\x02\x01\x08pypi.org\x02"
        + bytes([len(ident)])
        + ident
        + b"\x00\x02"
        + bytes([len(caveat)])
        + caveat
        + b"\x00\x00\x06\x20"
        + r.randbytes(32)
    )
    return "py" + "pi-" + _b64u(mac)


def _readme(r: random.Random) -> str:
    return "rd" + "me_" + _pick(r, LOWER_DIGITS, 70)


def _rubygems(r: random.Random) -> str:
    return "ruby" + "gems_" + _pick(r, HEX, 48)


def _sentry_user(r: random.Random) -> str:
    return "snt" + "ryu_" + _pick(r, HEX, 64)


def _settlemint(r: random.Random) -> str:
    return "sm" + "_pat_" + _pick(r, ALNUM, 16)


def _shopify_admin(r: random.Random) -> str:
    return "sh" + "pat_" + _pick(r, HEX, 32)


def _shopify_secret(r: random.Random) -> str:
    return "sh" + "pss_" + _pick(r, HEX, 32)


def _sidekiq(r: random.Random) -> str:
    return _pick(r, HEX, 8) + ":" + _pick(r, HEX, 8)


def _xapp(r: random.Random) -> str:
    return "xa" + "pp-1-A0" + _pick(r, UPPER_DIGITS, 9) + "-" + _digits(r, 13) + "-" + _pick(r, HEX, 64)


def _slack_bot(r: random.Random) -> str:
    return "xo" + "xb-" + _digits(r, r.choice((10, 11, 12))) + "-" + _digits(r, 13) + "-" + _pick(r, ALNUM, 24)


def _slack_config_refresh(r: random.Random) -> str:
    return "xo" + "xe-1-" + _pick(r, ALNUM, 146)


def _slack_legacy_user(r: random.Random) -> str:
    return "xo" + "xs-" + _digits(r, 10) + "-" + _digits(r, 11) + "-" + _digits(r, 13) + "-" + _pick(r, HEX, 64)


def _slack_legacy_oauth(r: random.Random) -> str:
    return "xo" + "xo-" + _digits(r, 10) + "-" + _digits(r, 11) + "-" + _digits(r, 12) + "-" + _pick(r, HEX, 32)


def _slack_hook(r: random.Random) -> str:
    return (
        "https://hooks.sl"
        + "ack.com/services/T"
        + _pick(r, UPPER_DIGITS, 10)
        + "/B"
        + _pick(r, UPPER_DIGITS, 10)
        + "/"
        + _pick(r, ALNUM, 24)
    )


def _sgp(r: random.Random) -> str:
    return "sg" + "p_" + _pick(r, HEX, 16) + "_" + _pick(r, HEX, 40)


def _square(r: random.Random) -> str:
    return "EA" + "AA" + _pick(r, B64URL, 60)


def _stripe(r: random.Random) -> str:
    return "s" + "k_li" + "ve_51" + _pick(r, ALNUM, 97)


def _stripe_restricted(r: random.Random) -> str:
    return "r" + "k_li" + "ve_51" + _pick(r, ALNUM, 97)


def _vault_service(r: random.Random) -> str:
    return "hv" + "s.CAESI" + _pick(r, B64URL, 86)


def _vault_legacy(r: random.Random) -> str:
    return "s" + "." + _pick(r, ALNUM, 24)


def _yandex(r: random.Random) -> str:
    return "AQ" + "VN" + _pick(r, B64URL, 36)


def _azure_secret(r: random.Random) -> str:
    return _pick(r, ALNUM, 3) + str(r.randrange(10)) + "Q~" + _pick(r, ALNUM + "_~.-", 34)


def _hex(n: int) -> Make:
    return lambda r: _pick(r, HEX, n)


def _alnum(n: int) -> Make:
    return lambda r: _pick(r, ALNUM, n)


def _lower_alnum(n: int) -> Make:
    return lambda r: _pick(r, LOWER_DIGITS, n)


def _b64url(n: int) -> Make:
    return lambda r: _pick(r, B64URL, n)


def _gcp_sa_key(r: random.Random) -> str:
    return _pkcs8_rsa_pem(r).replace("\n", "\\n") + "\\n"


def _bearer_jwt(r: random.Random) -> str:
    iat = 1764000000 + r.randrange(10**6)
    claims = {
        "iss": "https://auth.acme.io/",
        "sub": "auth0|" + _pick(r, HEX, 24),
        "aud": ["https://api.acme.io", "https://acme.eu.auth0.com/userinfo"],
        "iat": iat,
        "exp": iat + 86400,
        "scope": "openid profile email read:orders write:orders",
    }
    return _jwt(r, {"alg": "RS256", "typ": "JWT", "kid": _pick(r, B64URL, 22)}, claims, 342)


def _session_jwt(r: random.Random) -> str:
    claims = {"sub": str(r.randrange(10**4, 10**6)), "role": "admin", "iat": 1764100000, "exp": 1764186400}
    return _jwt(r, {"alg": "HS256", "typ": "JWT"}, claims)


def _azure_ad_jwt(r: random.Random) -> str:
    tid = _uuid(r)
    claims = {
        "aud": "https://management.azure.com/",
        "iss": "https://sts.windows.net/" + tid + "/",
        "iat": 1764200000,
        "nbf": 1764200000,
        "exp": 1764204788,
        "appid": _uuid(r),
        "oid": _uuid(r),
        "tid": tid,
        "ver": "1.0",
    }
    return _jwt(
        r, {"typ": "JWT", "alg": "RS256", "x5t": _pick(r, B64URL, 27), "kid": _pick(r, B64URL, 27)}, claims, 342
    )


# Public parts that sit next to a credential (ids, account numbers, key ids): not the secret.
_IDS = _rng("public ids")
_AWS_KEY_ID = "AK" + "IA" + _pick(_IDS, BASE32_UP, 16)
_AWS_KEY_ID2 = "AK" + "IA" + _pick(_IDS, BASE32_UP, 16)
_AWS_KEY_ID3 = "AK" + "IA" + _pick(_IDS, BASE32_UP, 16)
_AWS_KEY_ID4 = "AK" + "IA" + _pick(_IDS, BASE32_UP, 16)
_ADOBE_CLIENT = _pick(_IDS, HEX, 32)
_ADOBE_ORG = _pick(_IDS, UPPER_HEX, 24) + "@AdobeOrg"
_AIRTABLE_BASE = "app" + _pick(_IDS, ALNUM, 14)
_CH_KEY_ID = _pick(_IDS, ALNUM, 20)
_CH_ORG = _uuid(_IDS)
_BITTREX_KEY = _pick(_IDS, HEX, 32)
_CF_EMAIL = "ops@acme-retail.com"
_CF_ZONE = _pick(_IDS, HEX, 32)
_CONTENTFUL_SPACE = _pick(_IDS, LOWER_DIGITS, 12)
_DISCORD_ID = _digits(_IDS, 19)
_FB_APP_ID = _digits(_IDS, 16)
_FINICITY_PARTNER = _digits(_IDS, 13)
_KUCOIN_KEY = _pick(_IDS, HEX, 24)
_KUCOIN_KEY2 = _pick(_IDS, HEX, 24)
_LINKEDIN_ID = _pick(_IDS, LOWER_DIGITS, 14)
_PLAID_CLIENT = _pick(_IDS, HEX, 24)
_NR_ACCOUNT = _digits(_IDS, 7)
_TWILIO_ACCOUNT = "AC" + _pick(_IDS, HEX, 32)
_TWILIO_SK = "SK" + _pick(_IDS, HEX, 32)
_TWILIO_SK2 = "SK" + _pick(_IDS, HEX, 32)
_DBX_APP_KEY = _pick(_IDS, LOWER_DIGITS, 15)
_AZ_TENANT = _uuid(_IDS)
_AZ_CLIENT = _uuid(_IDS)
_AZ_CLIENT2 = _uuid(_IDS)
_GCP_KEY_ID = _pick(_IDS, HEX, 40)
_GCP_CLIENT_ID = _digits(_IDS, 21)
_SHOP_KEY = _pick(_IDS, HEX, 32)
_DO_ACCESS = "do" + "o_v1_" + _pick(_IDS, HEX, 64)
_YC_FOLDER = "b1g" + _pick(_IDS, LOWER_DIGITS, 17)
_GCP_OAUTH_CLIENT = _digits(_IDS, 12) + "-" + _pick(_IDS, LOWER_DIGITS, 32) + ".apps.googleusercontent.com"
_GCP_OAUTH_SECRET = "GOC" + "SPX-" + _pick(_IDS, B64URL, 28)
_SLACK_CONFIG_ACCESS = "xo" + "xe.xo" + "xp-1-" + _pick(_IDS, ALNUM, 140)


def _group(provider: str, make: Make, contexts: list[tuple[str, str]]) -> list[tuple[str, str, Make]]:
    return [(f"{provider}: {label}", template, make) for label, template in contexts]


# (kind, template with {s}, how to build the secret)
_CREDENTIALS: list[tuple[str, str, Make]] = [
    # ------------------------------------------------------------------ drawn from gitleaks
    *_group(
        "Adafruit IO key",
        _adafruit,
        [
            (
                "Arduino config.h",
                '#define IO_USERNAME "dana_makes"\n#define IO_KEY      "{s}"\n#define WIFI_SSID   "workshop"',
            ),
            ("curl header", "curl -H 'X-AIO-Key: {s}' https://io.adafruit.com/api/v2/dana_makes/feeds/temp/data"),
            ("chat", "adafruit io key for the greenhouse sensors is {s} - feed is dana_makes/greenhouse"),
        ],
    ),
    *_group(
        "Adobe client secret",
        _adobe_secret,
        [
            (
                ".env",
                "ADOBE_CLIENT_ID=" + _ADOBE_CLIENT + "\nADOBE_CLIENT_SECRET={s}\nADOBE_ORG_ID=" + _ADOBE_ORG,
            ),
            (
                "IMS token request",
                "curl -X POST 'https://ims-na1.adobelogin.com/ims/token/v3' \\\n"
                "  -d 'grant_type=client_credentials' \\\n  -d 'client_id="
                + _ADOBE_CLIENT
                + "' \\\n  -d 'client_secret={s}' \\\n  -d 'scope=openid,AdobeID,firefly_api'",
            ),
        ],
    ),
    *_group(
        "Airtable API key (legacy)",
        _airtable_key,
        [
            (
                "pyairtable snippet",
                "from pyairtable import Table\ntable = Table('{s}', '" + _AIRTABLE_BASE + "', 'Leads')",
            ),
            (".env", "AIRTABLE_API_KEY={s}\nAIRTABLE_BASE_ID=" + _AIRTABLE_BASE),
        ],
    ),
    *_group(
        "Airtable personal access token",
        _airtable_pat,
        [
            (
                "curl",
                'curl "https://api.airtable.com/v0/' + _AIRTABLE_BASE + '/Leads?maxRecords=3" \\\n'
                '  -H "Authorization: Bearer {s}"',
            ),
            (".env", "AIRTABLE_TOKEN={s}\nAIRTABLE_BASE=" + _AIRTABLE_BASE),
            ("chat", "New airtable PAT with data.records:write on the CRM base: {s}"),
        ],
    ),
    *_group(
        "Artifactory API key",
        _artifactory_key,
        [
            (
                "curl header",
                "curl -H 'X-JFrog-Art-Api:{s}' -T build/app-1.4.2.tgz "
                "https://acme.jfrog.io/artifactory/generic-local/app/app-1.4.2.tgz",
            ),
            (
                "pip.conf",
                "[global]\nindex-url = https://ci-bot:{s}@acme.jfrog.io/artifactory/api/pypi/py" + "pi-virtual/simple",
            ),
            ("gradle.properties", "artifactory_user=ci-bot\nartifactory_password={s}\norg.gradle.jvmargs=-Xmx2g"),
        ],
    ),
    *_group(
        "Artifactory reference token",
        _artifactory_ref,
        [
            ("docker login", "docker login acme.jfrog.io -u ci-bot -p {s}"),
            (
                ".npmrc",
                "registry=https://acme.jfrog.io/artifactory/api/npm/npm-virtual/\n//acme.jfrog.io/:_authToken={s}",
            ),
            ("curl bearer", 'curl -H "Authorization: Bearer {s}" https://acme.jfrog.io/artifactory/api/repositories'),
        ],
    ),
    *_group(
        "Authress service client access key",
        _authress,
        [
            (
                "node snippet",
                "const { AuthressClient, ServiceClientTokenProvider } = require('@authress/sdk');\n"
                "const provider = new ServiceClientTokenProvider('{s}', 'https://login.acme.io');",
            ),
            (".env", "AUTHRESS_API_HOST=https://acme.api-eu-west.authress.io\nAUTHRESS_SERVICE_CLIENT_KEY={s}"),
        ],
    ),
    *_group(
        "AWS secret access key",
        _aws_secret,
        [
            (
                "~/.aws/credentials",
                "[default]\naws_access_key_id = "
                + _AWS_KEY_ID
                + "\naws_secret_access_key = {s}\nregion = eu-central-1",
            ),
            (
                "export lines",
                "export AWS_ACCESS_KEY_ID=" + _AWS_KEY_ID2 + "\nexport AWS_SECRET_ACCESS_KEY={s}\n"
                "export AWS_DEFAULT_REGION=us-east-1",
            ),
            (
                "docker run",
                "docker run --rm -e AWS_ACCESS_KEY_ID=" + _AWS_KEY_ID3 + " -e AWS_SECRET_ACCESS_KEY={s} "
                "amazon/aws-cli s3 ls s3://acme-exports",
            ),
            (
                "chat",
                "here are the keys for the backup IAM user: access key " + _AWS_KEY_ID4 + ", secret {s} (rotate after)",
            ),
        ],
    ),
    *_group(
        "Beamer API key",
        _beamer,
        [
            (
                "curl",
                "curl -X POST https://api.getbeamer.com/v0/posts -H 'Beamer-Api-Key: {s}' "
                "-H 'Content-Type: application/json' -d @post.json",
            ),
            (".env", "BEAMER_PRODUCT_ID=" + _pick(_IDS, ALNUM, 8) + "\nBEAMER_API_KEY={s}"),
        ],
    ),
    *_group(
        "Bittrex API secret",
        _hex(32),
        [
            (
                "ccxt snippet",
                "exchange = ccxt.bittrex({\n    'apiKey': '" + _BITTREX_KEY + "',\n    'secret': '{s}',\n})",
            ),
            (".env", "BITTREX_API_KEY=" + _BITTREX_KEY + "\nBITTREX_API_SECRET={s}"),
        ],
    ),
    *_group(
        "ClickHouse Cloud API key secret",
        _clickhouse,
        [
            (
                "curl",
                "curl --user '" + _CH_KEY_ID + ":{s}' https://api.clickhouse.cloud/v1/organizations/" + _CH_ORG,
            ),
            (
                "terraform provider",
                'provider "clickhouse" {\n  organization_id = "'
                + _CH_ORG
                + '"\n  token_key       = "'
                + _CH_KEY_ID
                + '"\n  token_secret    = "{s}"\n}',
            ),
        ],
    ),
    *_group(
        "Clojars deploy token",
        _clojars,
        [
            (
                "env for deps-deploy",
                "export CLOJ" + "ARS_USERNAME=dana\nexport CLOJ" + "ARS_PASSWORD={s}\nclj -T:build deploy",
            ),
            (
                "~/.lein/profiles.clj",
                '{:auth {:repository-auth {#"clojars" {:username "dana" :password "{s}"}}}}',
            ),
        ],
    ),
    *_group(
        "Cloudflare global API key",
        _hex(37),
        [
            (
                "curl",
                'curl "https://api.cloudflare.com/client/v4/zones/' + _CF_ZONE + '/dns_records" \\\n'
                '  -H "X-Auth-Email: ' + _CF_EMAIL + '" \\\n  -H "X-Auth-Key: {s}"',
            ),
            (
                "certbot cloudflare.ini",
                "# /etc/letsencrypt/cloudflare.ini\ndns_cloudflare_email = "
                + _CF_EMAIL
                + "\ndns_cloudflare_api_key = {s}",
            ),
            ("traefik env", "CF_API_EMAIL=" + _CF_EMAIL + "\nCF_API_KEY={s}"),
        ],
    ),
    *_group(
        "Cloudflare Origin CA key",
        _cf_origin,
        [
            (
                "curl",
                "curl -X POST https://api.cloudflare.com/client/v4/certificates \\\n"
                '  -H "X-Auth-User-Service-Key: {s}" \\\n  --data @csr.json',
            ),
            ("terraform provider", 'provider "cloudflare" {\n  api_user_service_key = "{s}"\n}'),
        ],
    ),
    *_group(
        "Contentful delivery API token",
        _b64url(43),
        [
            (
                "server-side config",
                "const client = contentful.createClient({\n  space: '"
                + _CONTENTFUL_SPACE
                + "',\n  environment: 'master',\n  accessToken: '{s}',\n});",
            ),
            (".env", "CONTENTFUL_SPACE_ID=" + _CONTENTFUL_SPACE + "\nCONTENTFUL_DELIVERY_TOKEN={s}"),
        ],
    ),
    *_group(
        "Databricks personal access token",
        _databricks,
        [
            ("~/.databrickscfg", "[DEFAULT]\nhost  = https://adb-4821937465120934.14.azuredatabricks.net\ntoken = {s}"),
            (
                "curl",
                'curl -H "Authorization: Bearer {s}" https://dbc-a1b2c3d4-e5f6.cloud.databricks.com/api/2.1/jobs/list',
            ),
            (
                "export",
                "export DATABRICKS_HOST=https://dbc-a1b2c3d4-e5f6.cloud.databricks.com\nexport DATABRICKS_TOKEN={s}",
            ),
        ],
    ),
    *_group(
        "DigitalOcean OAuth refresh token",
        _do_refresh,
        [
            (
                "token response",
                '{"access_token":"' + _DO_ACCESS + '","token_type":"bearer","expires_in":2592000,"refresh_token":"{s}",'
                '"scope":"read write","info":{"name":"Dana","email":"dana@acme.io"}}',
            ),
            (
                "refresh call",
                "curl -X POST "
                '"https://cloud.digitalocean.com/v1/oauth/token?grant_type=refresh_token&refresh_token={s}"',
            ),
        ],
    ),
    *_group(
        "Discord client secret",
        _b64url(32),
        [
            (
                ".env",
                "DISCORD_CLIENT_ID="
                + _DISCORD_ID
                + "\nDISCORD_CLIENT_SECRET={s}\nDISCORD_REDIRECT_URI=https://acme.gg/auth/cb",
            ),
            (
                "passport config",
                "passport.use(new DiscordStrategy({\n  clientID: '"
                + _DISCORD_ID
                + "',\n  clientSecret: '{s}',\n  callbackURL: '/auth/discord/callback',\n  scope: ['identify'],\n}));",
            ),
        ],
    ),
    *_group(
        "Doppler personal token",
        _doppler,
        [
            ("doppler cli", "doppler configure set token {s} --scope /home/dana/src/api"),
            ("export", "export DOPPLER_TOKEN={s}\ndoppler run -- npm start"),
            ("chat", "my doppler token (personal, read/write) is {s} if you need to pull the dev config"),
        ],
    ),
    *_group(
        "Drone CI token",
        _alnum(32),
        [
            ("drone cli env", "export DRONE_SERVER=https://drone.acme.io\nexport DRONE_TOKEN={s}\ndrone info"),
            (".env", "DRONE_SERVER=https://drone.acme.io\nDRONE_TOKEN={s}"),
        ],
    ),
    *_group(
        "Dropbox long-lived token",
        _dropbox_long,
        [
            (
                "python snippet",
                "import dropbox\ndbx = dropbox.Dropbox('{s}')\ndbx.files_upload(data, '/backups/db.sql.gz')",
            ),
            (".env", "DROPBOX_APP_KEY=" + _DBX_APP_KEY + "\nDROPBOX_ACCESS_TOKEN={s}"),
        ],
    ),
    *_group(
        "Dropbox short-lived token",
        _dropbox_short,
        [
            (
                "curl",
                "curl -X POST https://api.dropboxapi.com/2/files/list_folder \\\n"
                '  --header "Authorization: Bearer {s}" \\\n  --data \'{"path": "/invoices"}\'',
            ),
            ("yaml", "dropbox:\n  app_key: " + _DBX_APP_KEY + "\n  access_token: {s}"),
        ],
    ),
    *_group(
        "Duffel test token",
        _duffel,
        [
            (
                "curl",
                'curl -X GET "https://api.duffel.com/air/airlines" \\\n  -H "Duffel-Version: v2" \\\n'
                '  -H "Authorization: Bearer {s}"',
            ),
            (".env", "DUFFEL_ACCESS_TOKEN={s}"),
        ],
    ),
    *_group(
        "Facebook app secret",
        _hex(32),
        [
            (".env", "FACEBOOK_APP_ID=" + _FB_APP_ID + "\nFACEBOOK_APP_SECRET={s}"),
            (
                "app token url",
                "https://graph.facebook.com/oauth/access_token?client_id="
                + _FB_APP_ID
                + "&client_secret={s}&grant_type=client_credentials",
            ),
            ("php config", "return [\n    'app_id' => '" + _FB_APP_ID + "',\n    'app_secret' => '{s}',\n];"),
        ],
    ),
    *_group(
        "Finicity app key",
        _hex(32),
        [
            (
                "curl",
                "curl -X POST https://api.finicity.com/aggregation/v2/partners/authentication \\\n"
                "  -H 'Finicity-App-Key: {s}' -H 'Content-Type: application/json' \\\n"
                '  -d \'{"partnerId": "' + _FINICITY_PARTNER + '", "partnerSecret": "<from vault>"}\'',
            ),
            (".env", "FINICITY_PARTNER_ID=" + _FINICITY_PARTNER + "\nFINICITY_APP_KEY={s}"),
        ],
    ),
    *_group(
        "Finicity partner secret",
        _alnum(20),
        [
            ("json body", '{"partnerId": "' + _FINICITY_PARTNER + '", "partnerSecret": "{s}"}'),
            ("yaml", "finicity:\n  partner_id: '" + _FINICITY_PARTNER + "'\n  partner_secret: {s}"),
        ],
    ),
    *_group(
        "Flutterwave encryption key",
        _flw_enc,
        [
            (".env", "FLW_ENCRYPTION_KEY={s}"),
            ("node snippet", "const payload = encrypt('{s}', JSON.stringify(cardDetails));"),
        ],
    ),
    *_group(
        "Flutterwave secret key",
        _flw_secret,
        [
            (
                "curl",
                'curl https://api.flutterwave.com/v3/transactions/4975325/verify -H "Authorization: Bearer {s}"',
            ),
            (".env", "FLW_SECRET_KEY={s}"),
        ],
    ),
    *_group(
        "Flutterwave test secret key",
        _flw_secret_test,
        [("python snippet", 'rave = Rave(os.environ["FLW_PUBLIC_KEY"], "{s}", usingEnv=False)')],
    ),
    *_group(
        "Fly.io deploy token",
        _fly_macaroon,
        [
            ("export", 'export FLY_API_TOKEN="{s}"\nflyctl deploy --remote-only'),
            ("chat", "deploy token for the staging app (expires in 20y lol): {s}"),
        ],
    ),
    *_group(
        "Fly.io app token",
        _fly_app,
        [("flyctl flag", "flyctl secrets list -a acme-api --access-token {s}")],
    ),
    *_group(
        "FreshBooks access token",
        _hex(64),
        [
            (
                "curl",
                'curl -H "Authorization: Bearer {s}" -H "Api-Version: alpha" '
                "https://api.freshbooks.com/auth/api/v1/users/me",
            ),
            (".env", "FRESHBOOKS_ACCOUNT_ID=xz8Qr\nFRESHBOOKS_ACCESS_TOKEN={s}"),
        ],
    ),
    *_group(
        "Google Cloud API key",
        _gcp_key,
        [
            (".env (Gemini)", "GEMINI_API_KEY={s}"),
            (
                "curl query string",
                "curl "
                '"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent?key={s}" '
                "-H 'Content-Type: application/json' -d @prompt.json",
            ),
            ("server yaml", "geocoding:\n  provider: google\n  api_key: {s}\n  timeout_s: 5"),
        ],
    ),
    *_group(
        "GitLab runner authentication token",
        _glrt,
        [
            (
                "register",
                "gitlab-runner register --non-interactive --url https://gitlab.acme.io "
                '--token {s} --executor docker --docker-image alpine:3.20 --description "build-02"',
            ),
            (
                "config.toml",
                '[[runners]]\n  name = "build-02"\n  url = "https://gitlab.acme.io"\n  token = "{s}"\n'
                '  executor = "docker"',
            ),
            ("helm values", "gitlabUrl: https://gitlab.acme.io/\nrunnerToken: {s}\nconcurrent: 4"),
        ],
    ),
    *_group(
        "Grafana service account token",
        _glsa,
        [
            ("curl", 'curl -H "Authorization: Bearer {s}" https://grafana.acme.io/api/dashboards/uid/k8s-nodes'),
            ("terraform", 'provider "grafana" {\n  url  = "https://grafana.acme.io"\n  auth = "{s}"\n}'),
        ],
    ),
    *_group(
        "Heroku API key",
        _heroku,
        [
            ("~/.netrc", "machine api.heroku.com\n  login dana@acme.io\n  password {s}"),
            ("export", "export HEROKU_API_KEY={s}\nheroku releases -a acme-web"),
        ],
    ),
    *_group(
        "Hugging Face token",
        _hf,
        [
            ("cli login", "huggingface-cli login --token {s} --add-to-git-credential"),
            (".env", "HF_TOKEN={s}"),
            ("python", 'from huggingface_hub import login\nlogin(token="{s}")'),
            ("git remote", "git clone https://dana:{s}@huggingface.co/acme/intent-classifier"),
        ],
    ),
    *_group(
        "KuCoin API secret",
        _uuid,
        [
            (
                "ccxt snippet",
                "kucoin = ccxt.kucoin({\n    'apiKey': '"
                + _KUCOIN_KEY
                + "',\n    'secret': '{s}',\n    'password': 'trading-bot-2025',\n})",
            ),
            (
                ".env",
                "KUCOIN_API_KEY=" + _KUCOIN_KEY2 + "\nKUCOIN_API_SECRET={s}\nKUCOIN_API_PASSPHRASE=grid-bot-passphrase",
            ),
        ],
    ),
    *_group(
        "Linear API key",
        _linear,
        [
            (
                "curl",
                "curl -X POST https://api.linear.app/graphql -H 'Content-Type: application/json' "
                "-H 'Authorization: {s}' --data '{ \"query\": \"{ viewer { id name } }\" }'",
            ),
            (".env", "LINEAR_API_KEY={s}"),
            (
                "MCP config",
                '{\n  "mcpServers": {\n    "linear": {\n      "command": "npx",\n      "args": ["-y", "linear-mcp"],\n'
                '      "env": { "LINEAR_API_KEY": "{s}" }\n    }\n  }\n}',
            ),
        ],
    ),
    *_group(
        "LinkedIn client secret",
        _alnum(16),
        [
            (".env", "LINKEDIN_CLIENT_ID=" + _LINKEDIN_ID + "\nLINKEDIN_CLIENT_SECRET={s}"),
            (
                "next-auth",
                "LinkedInProvider({\n  clientId: '" + _LINKEDIN_ID + "',\n  clientSecret: '{s}',\n})",
            ),
        ],
    ),
    *_group(
        "Mailchimp API key",
        _mailchimp,
        [
            (".env", "MAILCHIMP_API_KEY={s}\nMAILCHIMP_AUDIENCE_ID=" + _pick(_IDS, HEX, 10)),
            ("curl", "curl -sS --user 'anystring:{s}' https://us14.api.mailchimp.com/3.0/lists"),
            (
                "python",
                'client = MailchimpMarketing.Client()\nclient.set_config({"api_key": "{s}", "server": "us14"})',
            ),
        ],
    ),
    *_group(
        "Mailgun API key",
        _mailgun_old,
        [
            (
                "curl",
                "curl -s --user 'api:{s}' https://api.mailgun.net/v3/mg.acme.io/messages \\\n"
                "  -F from='Acme <noreply@mg.acme.io>' -F to=dana@acme.io -F subject='test'",
            ),
            (
                "django settings",
                'ANYMAIL = {\n    "MAILGUN_API_KEY": "{s}",\n    "MAILGUN_SENDER_DOMAIN": "mg.acme.io",\n}',
            ),
        ],
    ),
    *_group(
        "Mailgun API key (current format)",
        _mailgun_new,
        [(".env", "MAILGUN_DOMAIN=mg.acme.io\nMAILGUN_API_KEY={s}")],
    ),
    *_group(
        "New Relic insert key",
        _nrii,
        [
            (
                "curl",
                "gzip -c events.json | curl -X POST -H 'Content-Type: application/json' "
                "-H 'X-Insert-Key: {s}' -H 'Content-Encoding: gzip' "
                "https://insights-collector.eu01.nr-data.net/v1/accounts/" + _NR_ACCOUNT + "/events --data-binary @-",
            ),
            (".env", "NEW_RELIC_ACCOUNT_ID=" + _NR_ACCOUNT + "\nNEW_RELIC_INSERT_KEY={s}"),
        ],
    ),
    *_group(
        "New Relic user API key",
        _nrak,
        [
            (
                "NerdGraph curl",
                "curl https://api.newrelic.com/graphql -H 'Content-Type: application/json' "
                "-H 'API-Key: {s}' -d '{\"query\": \"{ actor { user { name } } }\"}'",
            ),
            (
                "terraform",
                'provider "newrelic" {\n  account_id = '
                + _NR_ACCOUNT
                + '\n  api_key    = "{s}"\n  region     = "EU"\n}',
            ),
        ],
    ),
    *_group(
        "New York Times API key",
        _alnum(32),
        [
            ("url", "https://api.nytimes.com/svc/topstories/v2/technology.json?api-key={s}"),
            (".env", "NYT_API_KEY={s}"),
        ],
    ),
    *_group(
        "Perplexity API key",
        _pplx,
        [
            (".env", "PERPLEXITY_API_KEY={s}"),
            (
                "curl",
                "curl https://api.perplexity.ai/chat/completions -H 'Authorization: Bearer {s}' "
                '-H \'Content-Type: application/json\' -d \'{"model": "sonar", "messages": []}\'',
            ),
            ("chat", "use my perplexity key for the research agent: {s}"),
        ],
    ),
    *_group(
        "Plaid secret",
        _hex(30),
        [
            (".env", "PLAID_CLIENT_ID=" + _PLAID_CLIENT + "\nPLAID_SECRET={s}\nPLAID_ENV=production"),
            (
                "curl",
                "curl -X POST https://production.plaid.com/accounts/balance/get -H 'Content-Type: application/json' "
                '-d \'{"client_id": "' + _PLAID_CLIENT + '", "secret": "{s}", "access_token": "$ACCESS_TOKEN"}\'',
            ),
        ],
    ),
    *_group(
        "PlanetScale OAuth token",
        _planetscale_oauth,
        [
            (
                "token response",
                '{"access_token": "{s}", "token_type": "Bearer", "expires_in": 86400, "scope": "read_databases"}',
            ),
            ("chat", "planetscale oauth token for the integration test org: {s}"),
        ],
    ),
    *_group(
        "PlanetScale database password",
        _planetscale_pw,
        [
            (
                "prisma .env",
                'DATABASE_URL="mysql://k2mw8x1abc9d:{s}@aws.connect.psdb.cloud/acme-prod?sslaccept=strict"',
            ),
            (
                "yaml",
                "database:\n  host: aws.connect.psdb.cloud\n  username: k2mw8x1abc9d\n  password: {s}\n"
                "  database: acme",
            ),
            ("mysql cli", "mysql -h aws.connect.psdb.cloud -u k2mw8x1abc9d -p{s} --ssl-mode=VERIFY_IDENTITY acme"),
        ],
    ),
    *_group(
        "Postman API key",
        _postman,
        [
            (
                "newman",
                "newman run https://api.getpostman.com/collections/12345-abcd?apikey={s} -e staging.json",
            ),
            ("curl", "curl -H 'X-Api-Key: {s}' https://api.getpostman.com/workspaces"),
        ],
    ),
    *_group(
        "Private AI API key",
        _lower_alnum(32),
        [
            (".env", "PRIVATE_AI_API_KEY={s}"),
            (
                "curl",
                "curl -X POST https://api.private-ai.com/community/v4/process/text -H 'x-api-key: {s}' "
                "-H 'Content-Type: application/json' -d '{\"text\": [\"My name is Dana\"]}'",
            ),
        ],
    ),
    *_group(
        "Pulumi access token",
        _pulumi,
        [
            ("export", "export PULUMI_ACCESS_TOKEN={s}\npulumi stack select acme/infra/prod"),
            (
                "GitHub Actions step",
                "- uses: pulumi/actions@v6\n  with:\n    command: up\n    stack-name: acme/infra/prod\n"
                "  env:\n    PULUMI_ACCESS_TOKEN: {s}",
            ),
        ],
    ),
    *_group(
        "PyPI API token",
        _pypi,
        [
            ("~/.pypirc", "[pypi]\n  username = __token__\n  password = {s}"),
            ("twine", "twine upload -u __token__ -p {s} dist/*"),
            ("uv publish env", "UV_PUBLISH_TOKEN={s} uv publish"),
        ],
    ),
    *_group(
        "ReadMe API key",
        _readme,
        [
            ("rdme cli", "npx rdme openapi openapi.yaml --key={s} --id=65f1c2d3e4b5a6978899aabb"),
            (".env", "README_API_KEY={s}"),
        ],
    ),
    *_group(
        "RubyGems API key",
        _rubygems,
        [
            ("~/.gem/credentials", "---\n:ruby" + "gems_api_key: {s}"),
            ("export", "export GEM_HOST_API_KEY={s}\ngem push acme-client-2.3.0.gem"),
        ],
    ),
    *_group(
        "Sentry user auth token",
        _sentry_user,
        [
            ("~/.sentryclirc", "[auth]\ntoken={s}\n\n[defaults]\norg=acme\nproject=web"),
            ("export", 'export SENTRY_AUTH_TOKEN={s}\nsentry-cli releases new "$VERSION"'),
            ("curl", "curl -H 'Authorization: Bearer {s}' https://sentry.io/api/0/projects/"),
        ],
    ),
    *_group(
        "SettleMint personal access token",
        _settlemint,
        [
            (".env", "SETTLEMINT_ACCESS_TOKEN={s}\nSETTLEMINT_INSTANCE=https://console.settlemint.com"),
            ("chat", "settlemint PAT for the demo workspace: {s}"),
        ],
    ),
    *_group(
        "Shopify Admin API access token",
        _shopify_admin,
        [
            (
                "curl",
                "curl -X GET https://acme-store.myshopify.com/admin/api/2025-01/orders.json?status=any \\\n"
                '  -H "X-Shopify-Access-Token: {s}"',
            ),
            (".env", "SHOPIFY_STORE=acme-store.myshopify.com\nSHOPIFY_ADMIN_TOKEN={s}"),
            ("chat", "custom app installed, admin token is {s}, scopes read_orders,write_products"),
        ],
    ),
    *_group(
        "Shopify app shared secret",
        _shopify_secret,
        [
            (".env", "SHOPIFY_API_KEY=" + _SHOP_KEY + "\nSHOPIFY_API_SECRET={s}\nSCOPES=read_products"),
            (
                "app config",
                "const shopify = shopifyApi({\n  apiKey: '"
                + _SHOP_KEY
                + "',\n  apiSecretKey: '{s}',\n  scopes: ['read_products'],\n  hostName: 'app.acme.io',\n});",
            ),
        ],
    ),
    *_group(
        "Sidekiq Pro/Enterprise credentials",
        _sidekiq,
        [
            ("bundle config", "bundle config --global gems.contribsys.com {s}"),
            ("env", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM={s}"),
            ("Gemfile", 'source "https://{s}@enterprise.contribsys.com/" do\n  gem "sidekiq-ent"\nend'),
        ],
    ),
    *_group(
        "Slack app-level token",
        _xapp,
        [
            (".env", "SLACK_APP_TOKEN={s}\nSLACK_SOCKET_MODE=true"),
            ("bolt snippet", 'handler = SocketModeHandler(app, "{s}")\nhandler.start()'),
        ],
    ),
    *_group(
        "Slack bot token",
        _slack_bot,
        [
            (
                "curl",
                "curl -X POST https://slack.com/api/chat.postMessage -H 'Authorization: Bearer {s}' "
                '-H \'Content-type: application/json\' --data \'{"channel":"C0123ABCD","text":"deploy done"}\'',
            ),
            (".env", "SLACK_BOT_TOKEN={s}\nSLACK_SIGNING_SECRET=see-1password"),
            ("helm values", "slack:\n  enabled: true\n  botToken: {s}\n  channel: '#alerts'"),
            ("chat", "the bot token for #deploys is {s}, just invite @shipit to the channel"),
        ],
    ),
    *_group(
        "Slack configuration refresh token",
        _slack_config_refresh,
        [
            (
                "rotate response",
                '{"ok": true, "token": "' + _SLACK_CONFIG_ACCESS + '", "refresh_token": "{s}", '
                '"team_id": "T0AB12CD3", "user_id": "U0AB12CD3", "iat": 1764300000, "exp": 1764343200}',
            ),
            (".env", "SLACK_CONFIG_REFRESH_TOKEN={s}"),
        ],
    ),
    *_group(
        "Slack legacy token",
        _slack_legacy_user,
        [
            (
                "old script",
                '# legacy_export.sh (2019)\nTOKEN={s}\ncurl "https://slack.com/api/channels.history?token=$TOKEN"',
            )
        ],
    ),
    *_group(
        "Slack legacy OAuth token",
        _slack_legacy_oauth,
        [("chat", "found the old workspace token in the wiki: {s} - is it still live?")],
    ),
    *_group(
        "Slack incoming webhook",
        _slack_hook,
        [
            (
                "curl",
                "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"Backup finished\"}' {s}",
            ),
            (
                "alertmanager.yml",
                "receivers:\n  - name: slack-oncall\n    slack_configs:\n      - api_url: {s}\n"
                "        channel: '#oncall'",
            ),
            (".env", "SLACK_WEBHOOK_URL={s}"),
        ],
    ),
    *_group(
        "Sourcegraph access token",
        _sgp,
        [
            ("src cli env", "export SRC_ENDPOINT=https://sourcegraph.acme.io\nexport SRC_ACCESS_TOKEN={s}"),
            (
                "curl",
                "curl -H 'Authorization: token {s}' -d '{\"query\":\"{currentUser{username}}\"}' "
                "https://sourcegraph.acme.io/.api/graphql",
            ),
        ],
    ),
    *_group(
        "Square access token",
        _square,
        [
            (
                "curl",
                "curl https://connect.squareup.com/v2/locations -H 'Square-Version: 2025-01-23' "
                "-H 'Authorization: Bearer {s}'",
            ),
            (".env", "SQUARE_ENVIRONMENT=production\nSQUARE_ACCESS_TOKEN={s}"),
        ],
    ),
    *_group(
        "Stripe secret key",
        _stripe,
        [
            (".env", "STRIPE_SECRET_KEY={s}\nSTRIPE_WEBHOOK_ENDPOINT=/webhooks/stripe"),
            ("curl", "curl https://api.stripe.com/v1/charges?limit=3 -u {s}:"),
            ("python", 'import stripe\nstripe.api_key = "{s}"'),
            ("chat", "prod stripe key is {s} -- don't put it in the repo pls"),
        ],
    ),
    *_group(
        "Stripe restricted key",
        _stripe_restricted,
        [("yaml", "billing:\n  stripe:\n    restricted_key: {s}\n    webhook_tolerance_s: 300")],
    ),
    *_group(
        "Twilio API key secret",
        _alnum(32),
        [
            (
                ".env",
                "TWILIO_ACCOUNT_SID=" + _TWILIO_ACCOUNT + "\nTWILIO_API_KEY=" + _TWILIO_SK + "\nTWILIO_API_SECRET={s}",
            ),
            (
                "curl",
                "curl -X POST https://api.twilio.com/2010-04-01/Accounts/" + _TWILIO_ACCOUNT + "/Messages.json \\\n"
                "  --data-urlencode 'To=+15558675310' --data-urlencode 'From=+15017122661' "
                "--data-urlencode 'Body=hi' \\\n  -u " + _TWILIO_SK2 + ":{s}",
            ),
        ],
    ),
    *_group(
        "Twilio auth token",
        _hex(32),
        [("python", "from twilio.rest import Client\nclient = Client('" + _TWILIO_ACCOUNT + "', '{s}')")],
    ),
    *_group(
        "Vault service token",
        _vault_service,
        [
            ("export", "export VAULT_ADDR=https://vault.acme.io:8200\nexport VAULT_TOKEN={s}\nvault kv get secret/app"),
            ("curl", "curl -H 'X-Vault-Token: {s}' https://vault.acme.io:8200/v1/secret/data/app"),
            ("~/.vault-token", "$ cat ~/.vault-token\n{s}"),
        ],
    ),
    *_group(
        "Vault legacy service token",
        _vault_legacy,
        [("terraform", 'provider "vault" {\n  address = "https://vault.acme.io:8200"\n  token   = "{s}"\n}')],
    ),
    *_group(
        "Yandex Cloud API key",
        _yandex,
        [
            (
                "curl",
                "curl -X POST https://llm.api.cloud.yandex.net/foundationModels/v1/completion "
                "-H 'Authorization: Api-Key {s}' -H 'x-folder-id: " + _YC_FOLDER + "' -d @req.json",
            ),
            (".env", "YC_FOLDER_ID=" + _YC_FOLDER + "\nYANDEX_API_KEY={s}"),
        ],
    ),
    # ------------------------------------------------------------------ generic: passwords in URLs
    ("url: postgres DATABASE_URL", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app_prod?sslmode=require", _pw),
    (
        "url: MongoDB Atlas SRV string",
        'MONGODB_URI="mongodb+srv://orders-svc:{s}@cluster0.ab1cd.mongodb.net/orders?retryWrites=true&w=majority"',
        _pw,
    ),
    (
        "url: redis with TLS",
        "REDIS_URL=rediss://default:{s}@redis-12345.c1.eu-west-1-2.ec2.cloud.redislabs.com:12345",
        _pw,
    ),
    ("url: AMQP broker in celery config", "CELERY_BROKER_URL = 'amqp://celery:{s}@rabbit.internal:5672/prod'", _pw),
    (
        "url: SQLAlchemy engine in code",
        'engine = create_engine("mysql+pymysql://report:{s}@10.0.4.12:3306/analytics")',
        _human_pw,
    ),
    (
        "url: git remote with a password",
        "git remote set-url origin https://dana:{s}@git.acme.io/platform/infra.git",
        _pw,
    ),
    (
        "url: ftp in a backup script",
        "lftp -e 'mirror -R /var/backups /' ftp://backup:{s}@ftp.hosting.example.net",
        _human_pw,
    ),
    (
        "url: JDBC with password parameter",
        "spring.datasource.url=jdbc:postgresql://pg.internal:5432/erp?user=erp&password={s}&ssl=true",
        _pw,
    ),
    # ------------------------------------------------------------------ generic: connection strings
    (
        "connstr: SQL Server in appsettings.json",
        '{\n  "ConnectionStrings": {\n'
        '    "Default": "Server=tcp:acme-sql.database.windows.net,1433;Initial Catalog=shop;'
        'User ID=shopadmin;Password={s};Encrypt=True;"\n  }\n}',
        _pw,
    ),
    (
        "connstr: libpq keyword string",
        'psql "host=pg.internal port=5432 dbname=billing user=billing password={s} sslmode=verify-full"',
        _pw,
    ),
    (
        "connstr: Azure Storage connection string",
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmeassets;AccountKey={s};"
        "EndpointSuffix=core.windows.net",
        lambda r: _b64(r, 64),
    ),
    (
        "connstr: Azure Service Bus",
        '"ServiceBusConnection": '
        '"Endpoint=sb://acme-bus.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;'
        'SharedAccessKey={s}"',
        lambda r: _b64(r, 32),
    ),
    # ------------------------------------------------------------------ generic: .env, YAML, JSON
    (
        ".env: Django SECRET_KEY",
        "DEBUG=False\nSECRET_KEY={s}\nALLOWED_HOSTS=acme.io",
        lambda r: _pick(r, ALNUM + "!@#%^*(-_=+)", 50),
    ),
    (".env: JWT signing secret", "JWT_SECRET={s}\nJWT_EXPIRES_IN=7d", _hex(64)),
    (".env: SMTP password", "SMTP_HOST=smtp.office365.com\nSMTP_USER=noreply@acme.io\nSMTP_PASSWORD={s}", _human_pw),
    (".env: admin password", "ADMIN_EMAIL=dana@acme.io\nADMIN_PASSWORD={s}", _pw),
    (".env: session secret", "SESSION_SECRET={s}\nCOOKIE_DOMAIN=.acme.io", lambda r: _b64(r, 32)),
    (
        "yaml: docker-compose postgres",
        "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_USER: app\n"
        "      POSTGRES_PASSWORD: {s}\n      POSTGRES_DB: app",
        _pw,
    ),
    (
        "yaml: Kubernetes Secret stringData",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-db\ntype: Opaque\nstringData:\n  username: api\n"
        "  password: {s}",
        _pw,
    ),
    (
        "yaml: Kubernetes Secret data (base64)",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: smtp\ndata:\n  password: {s}",
        lambda r: base64.b64encode(_pw(r).encode()).decode(),
    ),
    (
        "yaml: Spring datasource",
        "spring:\n  datasource:\n    url: jdbc:mysql://mysql.internal:3306/orders\n    username: orders\n"
        "    password: {s}",
        _pw,
    ),
    (
        "yaml: Ansible group vars",
        "mysql_root_password: {s}\nmysql_databases:\n  - name: wordpress",
        _human_pw,
    ),
    (
        "json: app config",
        '{\n  "db": {\n    "host": "10.1.2.3",\n    "user": "svc",\n    "password": "{s}"\n  }\n}',
        _pw,
    ),
    (
        "hcl: terraform.tfvars",
        'db_username = "admin"\ndb_password = "{s}"\ninstance_class = "db.t4g.medium"',
        _pw,
    ),
    ("ini: php.ini style", "[mail function]\nSMTP = smtp.acme.io\nsmtp_user = alerts\nsmtp_pass = {s}", _human_pw),
    # ------------------------------------------------------------------ generic: shell history
    ("shell: mysql -p", "  412  mysql -u root -p'{s}' -h 127.0.0.1 shop < dump.sql", _human_pw),
    ("shell: PGPASSWORD", "  988  PGPASSWORD={s} pg_dump -h pg.internal -U billing billing > billing.sql", _pw),
    ("shell: sshpass", "sshpass -p '{s}' ssh -o StrictHostKeyChecking=no admin@192.168.10.20", _human_pw),
    ("shell: docker login -p", "docker login registry.acme.io -u deploy -p {s}", _pw),
    ("shell: redis-cli -a", "redis-cli -h 10.0.0.7 -a {s} --no-auth-warning INFO keyspace", _pw),
    ("shell: mongosh --password", 'mongosh "mongodb://10.0.0.9:27017/admin" --username root --password {s}', _pw),
    (
        "shell: curl -u user:password",
        "curl -u admin:{s} https://jenkins.acme.io/job/deploy/buildWithParameters",
        _human_pw,
    ),
    ("shell: htpasswd -b", "htpasswd -b -c /etc/nginx/.htpasswd grafana {s}", _human_pw),
    # ------------------------------------------------------------------ generic: private keys
    ("key: RSA private key (PKCS#1)", "{s}", _rsa_pem),
    ("key: PKCS#8 private key pasted in a note", "deploy key for the build box:\n{s}\n", _pkcs8_rsa_pem),
    ("key: EC private key", "# tls/server.key\n{s}", _ec_pem),
    ("key: OpenSSH ed25519 private key", "cat ~/.ssh/id_ed25519\n{s}", _openssh_ed25519),
    (
        "key: SSH key in a CI variable dump",
        "SSH_PRIVATE_KEY: |\n  " + "{s}",
        lambda r: _openssh_ed25519(r, b"gitlab-ci").replace("\n", "\n  "),
    ),
    # ------------------------------------------------------------------ generic: JWT bearer, basic auth
    ("jwt: bearer in curl", "curl -H 'Authorization: Bearer {s}' https://api.acme.io/v1/orders?limit=20", _bearer_jwt),
    (
        "jwt: bearer in an HTTP request dump",
        "GET /api/admin/users HTTP/1.1\nHost: admin.acme.io\nAuthorization: Bearer {s}\nAccept: application/json",
        _session_jwt,
    ),
    (
        "jwt: Azure management token in chat",
        "token from `az account get-access-token` if you want to try the ARM call: {s}",
        _azure_ad_jwt,
    ),
    (
        "jwt: Postman environment",
        '{\n  "name": "staging",\n  "values": [\n'
        '    {"key": "baseUrl", "value": "https://staging.acme.io", "enabled": true},\n'
        '    {"key": "token", "value": "{s}", "enabled": true}\n  ]\n}',
        _bearer_jwt,
    ),
    (
        "basic: curl header",
        "curl -H 'Authorization: Basic {s}' https://registry.acme.io/v2/_catalog",
        lambda r: _basic("deploy", _pw(r)),
    ),
    (
        "basic: nginx proxy header",
        "location /metrics/ {\n    proxy_pass http://10.0.0.5:9090/;\n"
        '    proxy_set_header Authorization "Basic {s}";\n}',
        lambda r: _basic("prometheus", _human_pw(r)),
    ),
    (
        "basic: HTTP request dump",
        "POST /api/v1/push HTTP/1.1\nHost: loki.acme.io\nAuthorization: Basic {s}\n"
        "Content-Type: application/x-protobuf",
        lambda r: _basic(_digits(r, 6), "gl" + "c_" + _b64(r, 90)),
    ),
    (
        "basic: .npmrc _auth",
        "registry=https://nexus.acme.io/repository/npm-group/\n_auth={s}\nalways-auth=true",
        lambda r: _basic("ci", _pw(r)),
    ),
    # ------------------------------------------------------------------ generic: GCP and Azure
    (
        "gcp: service account key JSON",
        '{\n  "type": "service_account",\n  "project_id": "acme-prod",\n  "private_key_id": "'
        + _GCP_KEY_ID
        + '",\n  "private_key": "{s}",\n  "client_email": "deployer@acme-prod.iam.gserviceaccount.com",\n'
        '  "client_id": "' + _GCP_CLIENT_ID + '",\n  "token_uri": "https://oauth2.googleapis.com/token"\n}',
        _gcp_sa_key,
    ),
    (
        "gcp: OAuth refresh token in a gcloud-style file",
        '{\n  "client_id": "' + _GCP_OAUTH_CLIENT + '",\n'
        '  "client_secret": "' + _GCP_OAUTH_SECRET + '",\n  "refresh_token": "{s}",\n  "type": "authorized_user"\n}',
        lambda r: "1//0" + _pick(r, B64URL, 99),
    ),
    (
        "azure: client secret in .env",
        "AZURE_TENANT_ID=" + _AZ_TENANT + "\nAZURE_CLIENT_ID=" + _AZ_CLIENT + "\nAZURE_CLIENT_SECRET={s}",
        _azure_secret,
    ),
    (
        "azure: az login with a service principal",
        "az login --service-principal -u " + _AZ_CLIENT2 + " -p '{s}' --tenant " + _AZ_TENANT,
        _azure_secret,
    ),
    (
        "azure: storage account key in az cli",
        "az storage blob upload --account-name acmeassets --account-key {s} -c public -f logo.svg -n logo.svg",
        lambda r: _b64(r, 64),
    ),
    (
        "azure: SAS token in a URL",
        "azcopy copy ./dist 'https://acmeassets.blob.core.windows.net/web?sv=2022-11-02&ss=b&srt=co&sp=rwdlac"
        "&se=2026-12-31T23:59:59Z&st=2025-01-01T00:00:00Z&spr=https&sig={s}' --recursive",
        lambda r: _b64(r, 32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D"),
    ),
]


def credentials() -> list[Sample]:
    out: list[Sample] = []
    for kind, template, make in _CREDENTIALS:
        secret = make(_rng(kind))
        out.append(Sample(kind, template.replace("{s}", secret), secret))
    return out


def _lookalike_texts() -> list[tuple[str, str]]:
    r = _rng("lookalikes")
    b64 = lambda n: base64.b64encode(r.randbytes(n)).decode()  # noqa: E731 - data helper
    sha1 = lambda: _pick(r, HEX, 40)  # noqa: E731 - data helper
    sha256 = lambda: _pick(r, HEX, 64)  # noqa: E731 - data helper
    short = lambda: _pick(r, HEX, 7)  # noqa: E731 - data helper
    uid = lambda: _uuid(r)  # noqa: E731 - data helper
    sops = lambda n: "ENC[AES256_GCM,data:" + b64(n) + ",iv:" + b64(32) + ",tag:" + b64(16) + ",type:str]"  # noqa: E731
    ed_pub = lambda: _ssh_pub(b"ssh-ed25519", r.randbytes(32))  # noqa: E731 - data helper
    rsa_pub = lambda: _ssh_pub(b"ssh-rsa", b"\x01\x00\x01", b"\x00\xc3" + r.randbytes(383))  # noqa: E731
    cert = lambda: _pem("CERTIFICATE", _CERT_HEAD + r.randbytes(900))  # noqa: E731 - data helper
    sri = lambda: "sha512-" + b64(64)  # noqa: E731 - data helper
    aws_doc_id = "AK" + "IA" + "IOSFODNN7" + "EXAMPLE"
    aws_doc_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfi" + "CYEXAMPLEKEY"
    pk_live = "p" + "k_li" + "ve_51" + _pick(r, ALNUM, 97)
    pk_test = "p" + "k_te" + "st_51" + _pick(r, ALNUM, 97)
    flw_pub = "FLWP" + "UBK-" + _pick(r, HEX, 32) + "-X"
    flw_pub_test = "FLWP" + "UBK_TEST-" + _pick(r, HEX, 32) + "-X"
    mapbox_pk = (
        "p"
        + "k."
        + _b64u(json.dumps({"u": "acme-maps", "a": _pick(r, LOWER_DIGITS, 25)}).encode())
        + "."
        + _pick(r, B64URL, 22)
    )
    anon_ref = _pick(r, LOWER, 20)
    anon_claims: dict[str, object] = {
        "iss": "supabase",
        "ref": anon_ref,
        "role": "anon",
        "iat": 1735000000,
        "exp": 2050576000,
    }
    supabase_anon = _jwt(r, {"alg": "HS256", "typ": "JWT"}, anon_claims)
    jwks = json.dumps(
        {
            "keys": [
                {
                    "kty": "RSA",
                    "use": "sig",
                    "alg": "RS256",
                    "kid": _pick(r, B64URL, 22),
                    "n": _b64u(b"\xb7" + r.randbytes(255)),
                    "e": "AQAB",
                }
            ]
        },
        indent=2,
    )
    gh_redacted = "gh" + "p_" + "*" * 36
    return [
        # ------------------------------------------------------------------ placeholders and doc examples
        (
            "placeholder: angle-bracket token in a README",
            'curl -H "Authorization: Bearer <your-token>" https://api.acme.io/v1/me',
        ),
        (
            "placeholder: .env.example with empty values",
            "STRIPE_SECRET_KEY=\nSLACK_BOT_TOKEN=\nDATABASE_URL=\nSENTRY_AUTH_TOKEN=",
        ),
        (
            "placeholder: .env.example with descriptive values",
            "OPENAI_API_KEY=your-openai-api-key\nPERPLEXITY_API_KEY=your_perplexity_key_here\n"
            "HF_TOKEN=your-hugging-face-token\nLINEAR_API_KEY=your_linear_api_key",
        ),
        (
            "placeholder: Flutterwave .env.example",
            "FLW_PUBLIC_KEY=FLWP" + "UBK_TEST-xxxxxxxxxxxxxxxx-X\nFLW_SECRET_KEY=FLWS" + "ECK_TEST-xxxxxxxxxxxxxxxx-X\n"
            "FLW_ENCRYPTION_KEY=FLWS" + "ECK_TESTxxxxxxxxxxxx",
        ),
        ("placeholder: xxxx in docs", "export DATABRICKS_TOKEN=da" + "pi" + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
        ("placeholder: shell variable", 'curl -H "Authorization: Bearer ${GITHUB_TOKEN}" https://api.github.com/user'),
        (
            "placeholder: shell variable in basic auth",
            'curl -u "$JENKINS_USER:$JENKINS_API_TOKEN" https://jenkins.acme.io/api/json',
        ),
        (
            "placeholder: changeme in docs",
            "# Default admin login is admin / changeme - change it on first login.\nADMIN_PASSWORD=changeme",
        ),
        (
            "placeholder: docker-compose with env substitution",
            "services:\n  db:\n    image: postgres:16\n    environment:\n"
            "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD:?set it in .env}",
        ),
        ("placeholder: connection string with a placeholder", "DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/DBNAME"),
        (
            "placeholder: Mongo template",
            'MONGODB_URI="mongodb+srv://<username>:<password>@cluster0.example.mongodb.net/"',
        ),
        ("placeholder: YOUR_API_KEY in code", 'client = Perplexity(api_key="YOUR_API_KEY")'),
        (
            "placeholder: Helm template",
            "slack:\n  botToken: {{ .Values.slack.botToken | quote }}\n  channel: {{ .Values.slack.channel }}",
        ),
        (
            "placeholder: GitHub Actions secret reference",
            "env:\n  PULUMI_ACCESS_TOKEN: ${{ secrets.PULUMI_ACCESS_TOKEN }}\n  AWS_REGION: eu-west-1",
        ),
        (
            "placeholder: AWS documentation example keys",
            "aws_access_key_id = " + aws_doc_id + "\naws_secret_access_key = " + aws_doc_secret,
        ),
        ("placeholder: asterisks in a form description", "Password: ********\nConfirm password: ********"),
        ("placeholder: TODO value", 'SHOPIFY_API_SECRET="TODO: ask Priya for the partner dashboard secret"'),
        (
            "placeholder: stripe docs key shape",
            "Your secret key looks like sk_" + "live_... and must never be sent to the browser.",
        ),
        (
            "placeholder: password prompt in a runbook",
            "Run `mysql -u root -p` and enter the root password from 1Password when prompted.",
        ),
        ("placeholder: python format string", 'dsn = f"postgresql://{user}:{password}@{host}:{port}/{db}"'),
        ("placeholder: Jinja template in Ansible", 'mysql_root_password: "{{ vault_mysql_root_password }}"'),
        (
            "placeholder: Spring property reference",
            "spring.datasource.password=${DB_PASSWORD}\nspring.datasource.username=${DB_USER:app}",
        ),
        (
            "placeholder: op:// reference",
            "STRIPE_SECRET_KEY=op://Engineering/Stripe prod/secret key\n"
            "SLACK_BOT_TOKEN=op://Engineering/Slack bot/credential",
        ),
        (
            "placeholder: terraform variable",
            'variable "db_password" {\n  type      = string\n  sensitive = true\n}\n\npassword = var.db_password',
        ),
        (
            "placeholder: k8s secretKeyRef",
            "env:\n  - name: SENTRY_AUTH_TOKEN\n    valueFrom:\n      secretKeyRef:\n        name: sentry\n"
            "        key: token",
        ),
        (
            "placeholder: compose secrets file",
            "secrets:\n  db_password:\n    file: ./secrets/db_password.txt\nservices:\n  api:\n"
            "    secrets: [db_password]",
        ),
        ("placeholder: password_file", "POSTGRES_PASSWORD_FILE=/run/secrets/postgres_password"),
        (
            "placeholder: getenv in code",
            'token = os.environ["HF_TOKEN"]\nheaders = {"Authorization": f"Bearer {token}"}',
        ),
        ("placeholder: Vault path", "vault kv get -field=password secret/prod/postgres"),
        (
            "placeholder: AWS Secrets Manager ARN",
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/api/db-AbCdEf",
        ),
        ("placeholder: GCP Secret Manager name", "projects/481523987654/secrets/stripe-secret-key/versions/latest"),
        (
            "placeholder: Azure Key Vault reference",
            "@Microsoft.KeyVault(SecretUri=https://acme-kv.vault.azure.net/secrets/SqlPassword/)",
        ),
        (
            "placeholder: export without value",
            "export SLACK_BOT_TOKEN\nexport STRIPE_SECRET_KEY\nunset AWS_SESSION_TOKEN",
        ),
        ("placeholder: printenv names", "$ env | cut -d= -f1 | grep -i token\nGITHUB_TOKEN\nHF_TOKEN\nVAULT_TOKEN"),
        (
            "placeholder: example.com creds in a test",
            'login(client, "test@example.com", "password")\nassert resp.status_code == 200',
        ),
        (
            "placeholder: password policy config",
            "password_min_length: 12\npassword_require_symbols: true\npassword_max_age_days: 90",
        ),
        (
            "placeholder: password field names",
            '<input type="password" name="password" autocomplete="current-password">',
        ),
        ("placeholder: docker --password-stdin", 'echo "$CR_PAT" | docker login ghcr.io -u dana --password-stdin'),
        (
            "placeholder: chat about rotation",
            "I rotated the stripe key and the slack bot token this morning, new ones are in 1Password.",
        ),
        (
            "placeholder: gitleaks allowlist",
            '[allowlist]\ndescription = "test fixtures"\npaths = ["""tests/fixtures/"""]\nregexTarget = "match"',
        ),
        # ------------------------------------------------------------------ redacted
        ("redacted: GitHub token with stars", "GITHUB_TOKEN=" + gh_redacted),
        (
            "redacted: Stripe dashboard last four",
            "Secret key  s" + "k_live_..." + _pick(r, ALNUM, 4) + "   Created Jan 3   Last used 2 min ago",
        ),
        (
            "redacted: CI log masking",
            "Run pulumi up --yes\n  env:\n    PULUMI_ACCESS_TOKEN: ***\n    AWS_REGION: eu-west-1",
        ),
        ("redacted: REDACTED marker", 'password: "[REDACTED]"\napi_key: "<redacted>"'),
        ("redacted: bullets", "Shopify admin token: shp" + "at_••••••••••••••••••••••••" + _pick(r, HEX, 4)),
        (
            "redacted: heroku config masked",
            "=== acme-web Config Vars\nDATABASE_URL: postgres://u***:***@ec2-1-2-3-4.compute-1.amazonaws.com:5432/d***",
        ),
        (
            "redacted: AWS key id partly masked",
            "Access key ID: AK" + "IA****************  Status: Active  Last used: 2025-11-20",
        ),
        (
            "redacted: vault token in a log",
            "2025-11-27T10:12:03Z [INFO] auth: token=hv" + "s.********** policies=[default app-read]",
        ),
        (
            "redacted: slack token prefix only",
            "the bot token starts with xo" + "xb- (the user one starts with xo" + "xp-), use the bot one",
        ),
        ("redacted: X-ed out", "SQUARE_ACCESS_TOKEN=XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"),
        # ------------------------------------------------------------------ public by design
        ("public: Stripe publishable key", "<script>const stripe = Stripe('" + pk_live + "');</script>"),
        ("public: Stripe publishable test key", "NEXT_PUBLIC_STRIPE_PUBLISHABLE_KEY=" + pk_test),
        (
            "public: Flutterwave public key in inline checkout",
            'FlutterwaveCheckout({\n  public_key: "' + flw_pub + '",\n  tx_ref: "order-1042",\n  amount: 5400,\n});',
        ),
        ("public: Flutterwave test public key", "NEXT_PUBLIC_FLW_PUBLIC_KEY=" + flw_pub_test),
        (
            "public: Plaid client id",
            "PLAID_CLIENT_ID=" + _pick(r, HEX, 24) + "\nPLAID_ENV=sandbox\nPLAID_PRODUCTS=transactions",
        ),
        (
            "public: Plaid link token",
            '{"link_token": "link-sandbox-' + uid() + '", "expiration": "2025-11-28T14:00:00Z"}',
        ),
        (
            "public: LinkedIn client id",
            "LINKEDIN_CLIENT_ID="
            + _pick(r, LOWER_DIGITS, 14)
            + "\nLINKEDIN_REDIRECT_URI=https://acme.io/auth/linkedin/callback",
        ),
        (
            "public: Adobe PDF Embed client id",
            '<script src="https://acrobatservices.adobe.com/view-sdk/viewer.js"></script>\n<script>\n'
            '  const adobeDCView = new AdobeDC.View({clientId: "' + _pick(r, HEX, 32) + '", divId: "pdf"});\n</script>',
        ),
        (
            "public: Discord application id",
            "https://discord.com/oauth2/authorize?client_id=" + _digits(r, 19) + "&permissions=2048&scope=bot",
        ),
        (
            "public: Facebook app id in JS SDK",
            "FB.init({ appId: '" + _digits(r, 16) + "', cookie: true, xfbml: true, version: 'v21.0' });",
        ),
        (
            "public: Google OAuth client id",
            "GOOGLE_CLIENT_ID=" + _digits(r, 12) + "-" + _pick(r, LOWER_DIGITS, 32) + ".apps.googleusercontent.com",
        ),
        (
            "public: Sentry DSN",
            'Sentry.init({ dsn: "https://'
            + _pick(r, HEX, 32)
            + "@o"
            + _digits(r, 6)
            + ".ingest.us.sentry.io/"
            + _digits(r, 7)
            + '" });',
        ),
        (
            "public: Algolia search-only key",
            "const client = algoliasearch('"
            + _pick(r, UPPER_DIGITS, 10)
            + "', '"
            + _pick(r, HEX, 32)
            + "'); // search-only key",
        ),
        ("public: Mapbox public token", "mapboxgl.accessToken = '" + mapbox_pk + "';"),
        ("public: reCAPTCHA site key", '<div class="g-recaptcha" data-sitekey="6L' + _pick(r, B64URL, 38) + '"></div>'),
        (
            "public: PostHog project key",
            "posthog.init('ph" + "c_" + _pick(r, ALNUM, 43) + "', { api_host: 'https://eu.i.posthog.com' })",
        ),
        (
            "public: Datadog RUM client token",
            "datadogRum.init({\n  applicationId: '"
            + uid()
            + "',\n  clientToken: 'pub"
            + _pick(r, HEX, 32)
            + "',\n  site: 'datadoghq.eu',\n});",
        ),
        (
            "public: New Relic browser snippet",
            ';NREUM.loader_config={accountID:"'
            + _digits(r, 7)
            + '",trustKey:"'
            + _digits(r, 7)
            + '",agentID:"'
            + _digits(r, 9)
            + '",licenseKey:"NR'
            + "JS-"
            + _pick(r, HEX, 19)
            + '",applicationID:"'
            + _digits(r, 9)
            + '"};',
        ),
        (
            "public: Supabase anon key",
            "NEXT_PUBLIC_SUPABASE_URL=https://"
            + anon_ref
            + ".supabase.co\nNEXT_PUBLIC_SUPABASE_ANON_KEY="
            + supabase_anon,
        ),
        (
            "public: Clerk publishable key",
            "NEXT_PUBLIC_CLERK_PUBLISHABLE_KEY=p"
            + "k_live_"
            + base64.b64encode(b"clerk.acme.io$").decode().rstrip("="),
        ),
        (
            "public: GitHub App client id",
            "GitHub App: acme-ci-bot\nApp ID: " + _digits(r, 6) + "\nClient ID: Iv23li" + _pick(r, ALNUM, 14),
        ),
        (
            "public: Auth0 SPA config",
            "createAuth0Client({ domain: 'acme.eu.auth0.com', clientId: '" + _pick(r, ALNUM, 32) + "' })",
        ),
        (
            "public: LaunchDarkly client-side id",
            "const ldclient = LDClient.initialize('" + _pick(r, HEX, 24) + "', context);",
        ),
        (
            "public: Shopify storefront API key",
            "const client = createStorefrontApiClient({\n  storeDomain: 'acme-store.myshopify.com',\n"
            "  apiVersion: '2025-01',\n  publicAccessToken: '" + _pick(r, HEX, 32) + "',\n});",
        ),
        (
            "public: Twilio account SID alone",
            "Messages sent from account " + "AC" + _pick(r, HEX, 32) + " in November: 18,204",
        ),
        (
            "public: Cloudflare zone and account ids",
            'zone_id    = "' + _pick(r, HEX, 32) + '"\naccount_id = "' + _pick(r, HEX, 32) + '"',
        ),
        ("public: Azure tenant and subscription ids", "az account set --subscription " + uid() + "\n# tenant " + uid()),
        (
            "public: AWS account id and role ARN",
            "role_arn = arn:aws:iam::" + _digits(r, 12) + ":role/github-actions-deploy\nsource_profile = default",
        ),
        ("public: Web Push VAPID public key", "const applicationServerKey = 'B" + _pick(r, B64URL, 86) + "';"),
        (
            "public: Contentful space id only",
            "CONTENTFUL_SPACE_ID=" + _pick(r, LOWER_DIGITS, 12) + "\nCONTENTFUL_ENVIRONMENT=master",
        ),
        ("public: Yandex Cloud folder id", "yc config set folder-id b1g" + _pick(r, LOWER_DIGITS, 17)),
        (
            "public: Slack ids",
            "channel C0"
            + _pick(r, UPPER_DIGITS, 9)
            + ", team T0"
            + _pick(r, UPPER_DIGITS, 9)
            + ", user U0"
            + _pick(r, UPPER_DIGITS, 9),
        ),
        (
            "public: Airtable base and table ids",
            "https://airtable.com/app"
            + _pick(r, ALNUM, 14)
            + "/tbl"
            + _pick(r, ALNUM, 14)
            + "/viw"
            + _pick(r, ALNUM, 14),
        ),
        # ------------------------------------------------------------------ hashes and digests
        (
            "hash: git log --oneline",
            "\n".join(
                short() + " " + m for m in ("fix flaky test", "bump deps", "add retry to uploader", "docs: readme")
            ),
        ),
        ("hash: full commit SHA in a URL", "https://github.com/acme/api/commit/" + sha1()),
        ("hash: git rev-parse", "$ git rev-parse HEAD\n" + sha1()),
        (
            "hash: sha256sum output",
            sha256() + "  acme-cli_2.4.1_linux_amd64.tar.gz\n" + sha256() + "  acme-cli_2.4.1_darwin_arm64.tar.gz",
        ),
        ("hash: docker image digest", "image: ghcr.io/acme/api@sha256:" + sha256()),
        (
            "hash: package-lock integrity",
            '"node_modules/lodash": {\n  "version": "4.17.21",\n'
            '  "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",\n  "integrity": "'
            + sri()
            + '"\n}',
        ),
        (
            "hash: yarn.lock entry",
            'react@^18.3.1:\n  version "18.3.1"\n  resolved "https://registry.yarnpkg.com/react/-/react-18.3.1.tgz#'
            + sha1()
            + '"\n  integrity '
            + sri(),
        ),
        (
            "hash: pip requirements with hashes",
            "requests==2.32.3 \\\n    --hash=sha256:" + sha256() + " \\\n    --hash=sha256:" + sha256(),
        ),
        (
            "hash: go.sum lines",
            "github.com/google/uuid v1.6.0 h1:" + b64(32) + "\ngithub.com/google/uuid v1.6.0/go.mod h1:" + b64(32),
        ),
        (
            "hash: Cargo.lock checksum",
            '[[package]]\nname = "serde"\nversion = "1.0.215"\n'
            'source = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "' + sha256() + '"',
        ),
        (
            "hash: terraform lock file",
            'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.80.0"\n  hashes = [\n    "h1:'
            + b64(32)
            + '",\n    "zh:'
            + sha256()
            + '",\n  ]\n}',
        ),
        (
            "hash: SRI script tag",
            '<script src="https://cdn.jsdelivr.net/npm/alpinejs@3.14.1/dist/cdn.min.js" integrity="sha384-'
            + b64(48)
            + '" crossorigin="anonymous"></script>',
        ),
        ("hash: webhook signature header", "X-Hub-Signature-256: sha256=" + sha256() + "\nX-GitHub-Delivery: " + uid()),
        ("hash: Stripe-Signature header", "Stripe-Signature: t=1764300000,v1=" + sha256() + ",v0=" + sha256()),
        ("hash: SSH key fingerprint", "256 SHA256:" + b64(32).rstrip("=") + " dana@laptop (ED25519)"),
        (
            "hash: TLS certificate fingerprint",
            "SHA-256 Fingerprint=" + ":".join(_pick(r, UPPER_HEX, 2) for _ in range(32)),
        ),
        (
            "hash: GPG key fingerprint",
            "pub   ed25519 2024-03-01 [SC]\n      " + _pick(r, UPPER_HEX, 40) + "\nuid   Dana Ops <dana@acme.io>",
        ),
        (
            "hash: S3 ETag",
            '{"Key": "exports/2025-11-27.csv.gz", "ETag": "\\"' + _pick(r, HEX, 32) + '\\"", "Size": 48213377}',
        ),
        ("hash: md5 of a file", "MD5 (backup-2025-11-27.tar.zst) = " + _pick(r, HEX, 32)),
        (
            "hash: content-hashed asset names",
            "dist/assets/index-"
            + _pick(r, B64URL, 8)
            + ".js  182.4 kB\ndist/assets/index-"
            + _pick(r, B64URL, 8)
            + ".css  21.0 kB",
        ),
        (
            "hash: Gemfile.lock checksums",
            "CHECKSUMS\n  rack (3.1.8) sha256=" + sha256() + "\n  rails (8.0.0) sha256=" + sha256(),
        ),
        ("hash: bitcoin transaction id", "tx " + sha256() + " confirmed in block 871204"),
        # ------------------------------------------------------------------ ids and other random-looking values
        ("id: request id in a log", "2025-11-27T09:14:22Z ERROR request_id=" + uid() + " path=/v1/charge status=502"),
        (
            "id: Kubernetes object uid",
            "metadata:\n  name: api-7d9f8b6c5d-x2k4p\n  uid: " + uid() + '\n  resourceVersion: "' + _digits(r, 8) + '"',
        ),
        ("id: W3C traceparent", "traceparent: 00-" + _pick(r, HEX, 32) + "-" + _pick(r, HEX, 16) + "-01"),
        (
            "id: Stripe object ids",
            "customer cus_"
            + _pick(r, ALNUM, 14)
            + " paid invoice in_"
            + _pick(r, ALNUM, 24)
            + " via pi_"
            + _pick(r, ALNUM, 24),
        ),
        (
            "id: idempotency key",
            'curl https://api.stripe.com/v1/refunds -u "$STRIPE_SECRET_KEY:" -H "Idempotency-Key: '
            + uid()
            + '" -d charge=ch_'
            + _pick(r, ALNUM, 24),
        ),
        (
            "id: Docker container ids",
            "CONTAINER ID   IMAGE          STATUS\n"
            + _pick(r, HEX, 12)
            + "   postgres:16    Up 3 days\n"
            + _pick(r, HEX, 12)
            + "   redis:7        Up 3 days",
        ),
        (
            "id: MongoDB ObjectIds",
            '{"_id": {"$oid": "' + _pick(r, HEX, 24) + '"}, "userId": {"$oid": "' + _pick(r, HEX, 24) + '"}}',
        ),
        ("id: ULIDs", "order 01J" + _pick(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 23) + " shipped"),
        ("id: Twilio message SID", "Message SM" + _pick(r, HEX, 32) + " delivered"),
        ("id: Sentry event id", "Sentry event " + _pick(r, HEX, 32) + " (issue ACME-WEB-4KJ)"),
        ("id: AWS request id", "An error occurred (AccessDenied) ... RequestId: " + uid().upper()),
        (
            "id: CloudFront distribution and request id",
            "Distribution E" + _pick(r, UPPER_DIGITS, 13) + "  X-Amz-Cf-Id: " + _pick(r, B64URL, 54) + "==",
        ),
        ("id: S3 version id", '"VersionId": "' + _pick(r, B64URL + ".", 32) + '"'),
        ("id: Ethereum address", "send the refund to 0x" + _pick(r, HEX, 40) + " (the ops wallet, public)"),
        (
            "id: YouTube video and playlist",
            "https://www.youtube.com/watch?v=" + _pick(r, B64URL, 11) + "&list=PL" + _pick(r, B64URL, 32),
        ),
        ("id: Google Docs link", "https://docs.google.com/document/d/1" + _pick(r, B64URL, 43) + "/edit?usp=sharing"),
        ("id: Jupyter kernel id", "Kernel started: " + uid() + ", name: python3"),
        (
            "id: Terraform state resource ids",
            "aws_instance.web: id=i-0" + _pick(r, HEX, 16) + "\naws_security_group.web: id=sg-0" + _pick(r, HEX, 16),
        ),
        ("id: CSP nonce", "Content-Security-Policy: script-src 'self' 'nonce-" + b64(16) + "'"),
        (
            "id: pagination cursor",
            '{"data": [], "next_cursor": "'
            + base64.b64encode(json.dumps({"id": 80412, "ts": "2025-11-27T10:00:00Z"}).encode()).decode()
            + '"}',
        ),
        ("id: PyPI project upload listing", "acme_utils-2.3.0-py3-none-any.whl  sha256 " + sha256()),
        (
            "id: OTP secret field name only",
            "Scan the QR code, then enter the 6-digit code. If you can't scan, click 'Show secret key'.",
        ),
        # ------------------------------------------------------------------ base64 of ordinary data
        (
            "base64: data URI image",
            '<img alt="dot" src="data:image/png;base64,'
            + base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + r.randbytes(60)).decode()
            + '">',
        ),
        (
            "base64: GitHub contents API README",
            '{"name": "README.md", "encoding": "base64", "content": "'
            + base64.b64encode(
                b"# acme-api\n\nInternal API for orders and billing.\n\n## Running locally\n\n    make dev\n"
            ).decode()
            + '"}',
        ),
        (
            "base64: MIME email part",
            "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n"
            + _wrap(
                base64.b64encode(
                    "Hallo Dana,\nanbei die Rechnung für November.\nViele Grüße\nBuchhaltung\n".encode()
                ).decode(),
                76,
            ),
        ),
        (
            "base64: kubernetes ConfigMap binaryData",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nginx-conf\nbinaryData:\n  favicon.ico: " + b64(120),
        ),
        (
            "base64: Pub/Sub push message",
            '{"message": {"data": "'
            + base64.b64encode(json.dumps({"orderId": 1042, "status": "shipped"}).encode()).decode()
            + '", "messageId": "'
            + _digits(r, 16)
            + '"}}',
        ),
        (
            "base64: SAML request in a URL",
            "https://idp.acme.io/sso?SAMLRequest="
            + b64(180).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
            + "&RelayState=%2Fdashboard",
        ),
        (
            "base64: kubeconfig CA data",
            "clusters:\n- cluster:\n    certificate-authority-data: "
            + base64.b64encode((cert() + "\n").encode()).decode()
            + "\n    server: https://10.0.0.1:6443\n  name: prod",
        ),
        (
            "base64: encoded JSON header of a JWT alone",
            "The header eyJ" + 'hbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9 decodes to {"alg":"RS256","typ":"JWT"}.',
        ),
        # ------------------------------------------------------------------ encrypted
        (
            "encrypted: sops yaml",
            "stripe:\n    secret_key: "
            + sops(40)
            + "\nsops:\n    age:\n        - recipient: age1"
            + _pick(r, BECH32, 58)
            + '\n    lastmodified: "2025-11-20T10:00:00Z"\n    mac: '
            + sops(32)
            + "\n    version: 3.9.1",
        ),
        (
            "encrypted: ansible-vault file",
            "$ANSIBLE_VAULT;1.1;AES256\n" + "\n".join(_pick(r, HEX, 80) for _ in range(6)),
        ),
        (
            "encrypted: ansible inline vault",
            "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  " + "\n  ".join(_pick(r, HEX, 80) for _ in range(5)),
        ),
        (
            "encrypted: SealedSecret",
            "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata:\n  name: api-db\nspec:\n"
            "  encryptedData:\n    password: Ag" + _pick(r, B64, 600),
        ),
        (
            "encrypted: age armored file",
            "-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSB"
            + _pick(r, B64, 21)
            + "\n"
            + _pick(r, B64, 64)
            + "\n"
            + _pick(r, B64, 30)
            + "\n-----END AGE ENCRYPTED FILE-----",
        ),
        (
            "encrypted: PGP message",
            "-----BEGIN PGP MESSAGE-----\n\nhQIMA"
            + _wrap(_pick(r, B64, 420))
            + "\n="
            + b64(3)
            + "\n-----END PGP MESSAGE-----",
        ),
        ("encrypted: Vault transit ciphertext", '{"ciphertext": "vault:v1:' + b64(48) + '"}'),
        ("encrypted: Travis secure variable", 'env:\n  global:\n    - secure: "' + b64(256) + '"'),
        ("encrypted: Rails credentials.yml.enc", b64(240) + "--" + b64(12) + "--" + b64(16)),
        (
            "encrypted: AWS KMS ciphertext blob",
            '{"CiphertextBlob": "AQICAH'
            + _pick(r, B64, 250)
            + '==", "KeyId": "arn:aws:kms:eu-west-1:123456789012:key/'
            + uid()
            + '"}',
        ),
        # ------------------------------------------------------------------ public keys and certificates
        ("pubkey: authorized_keys", "ssh-ed25519 " + ed_pub() + " dana@laptop\nssh-rsa " + rsa_pub() + " ci@build-02"),
        ("pubkey: known_hosts line", "github.com ssh-ed25519 " + ed_pub()),
        ("pubkey: PEM public key", _pem("PUBLIC KEY", _SPKI_EC_P256 + r.randbytes(64))),
        (
            "pubkey: RSA public key for JWT verification",
            'JWT_PUBLIC_KEY="'
            + _pem("PUBLIC KEY", _SPKI_RSA + r.randbytes(256) + bytes.fromhex("0203010001")).replace("\n", "\\n")
            + '"',
        ),
        ("pubkey: TLS certificate", "# /etc/nginx/tls/acme.io.crt\n" + cert()),
        ("pubkey: certificate chain", cert() + "\n" + cert()),
        ("pubkey: JWKS document", jwks),
        (
            "pubkey: PGP public key block",
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmDMEZ"
            + _wrap(_pick(r, B64, 300))
            + "\n="
            + b64(3)
            + "\n-----END PGP PUBLIC KEY BLOCK-----",
        ),
        (
            "pubkey: age recipients",
            "# .sops.yaml\ncreation_rules:\n  - path_regex: secrets/.*\n    age: age1"
            + _pick(r, BECH32, 58)
            + ",age1"
            + _pick(r, BECH32, 58),
        ),
        (
            "pubkey: WireGuard peer public key",
            "[Peer]\nPublicKey = " + b64(32) + "\nAllowedIPs = 10.8.0.2/32\nEndpoint = vpn.acme.io:51820",
        ),
        (
            "pubkey: cosign public key",
            "cosign verify --key cosign.pub ghcr.io/acme/api:1.9.0\n"
            + _pem("PUBLIC KEY", _SPKI_EC_P256 + r.randbytes(64)),
        ),
        ("pubkey: minisign public key", "minisign -Vm acme-cli.tar.gz -P RW" + _pick(r, B64, 54)),
        (
            "pubkey: DKIM TXT record",
            'default._domainkey.acme.io. 3600 IN TXT "v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA'
            + _pick(r, B64, 300)
            + 'IDAQAB"',
        ),
        ("pubkey: Nostr public key", "follow me: npub1" + _pick(r, BECH32, 58)),
    ]


def lookalikes() -> list[Sample]:
    return [Sample(kind, text, "") for kind, text in _lookalike_texts()]
