"""An EIGHTH held-out corpus for the secret scanner, drawn at random from gitleaks' rule list.

``bench/secrets_heldout.py`` .. ``secrets_heldout7.py`` have all been measured once and then
tuned on, so none of them is held out any more. Like the sixth and seventh, this one tries to be
REPRESENTATIVE of what people paste into a note rather than to chase obscure providers. It was
written by someone who never opened the scanner's rules or tests and never ran a scanner on it
before it was committed, so its first measurement says how the rules generalise.

How it was built:
- Providers: a seeded random draw of 70 of the 82 rule ids in gitleaks' ``config/gitleaks.toml``
  (gitleaks/gitleaks at b58d3f1, 222 ids) that neither the sixth nor the seventh set drew (their
  140 ids, as listed in their docstrings, were removed first):
  ``random.Random(zlib.crc32(b"heldout8/gitleaks-draw"))`` (seed 4098770665)
  ``.sample(sorted(remaining_ids), 70)``. The rule ids drawn:
  1password-secret-key, 1password-service-account-token, adobe-client-secret, age-secret-key,
  alibaba-secret-key, atlassian-api-token, aws-amazon-bedrock-api-key-long-lived,
  aws-amazon-bedrock-api-key-short-lived, bitbucket-client-secret, bittrex-access-key,
  cisco-meraki-api-key, codecov-access-token, confluent-secret-key, curl-auth-header,
  defined-networking-api-token, digitalocean-access-token, digitalocean-pat, easypost-api-token,
  easypost-test-api-token, flickr-access-token, frameio-api-token, freemius-secret-key,
  github-fine-grained-pat, github-pat, gitlab-feature-flag-client-token, gitlab-oauth-app-secret,
  gitlab-pat, gitlab-ptt, gitlab-rrt, gitlab-runner-authentication-token-routable,
  gitlab-scim-token, gitlab-session-cookie, gitter-access-token, gocardless-api-token,
  grafana-cloud-api-token, hashicorp-tf-api-token, hashicorp-tf-password, hubspot-api-key,
  infracost-api-token, intercom-api-key, jfrog-api-key, jfrog-identity-token,
  kraken-access-token, linear-client-secret, linkedin-client-secret, lob-api-key,
  looker-client-id, messagebird-api-token, netlify-access-token, new-relic-browser-api-token,
  new-relic-user-api-key, notion-api-token, nuget-config-password, openai-api-key,
  openshift-user-token, pkcs12-file, plaid-api-token, prefect-api-token, sendbird-access-token,
  settlemint-service-access-token, slack-config-access-token, slack-legacy-bot-token,
  squarespace-access-token, telegram-bot-api-token, twitter-access-token, twitter-api-key,
  twitter-bearer-token, typeform-api-token, yandex-access-token, yandex-aws-access-token.
  (Left undrawn: azure-ad-client-secret, datadog-access-token, discord-client-id, harness-api-key,
  huggingface-organization-api-token, okta-access-token, planetscale-api-token,
  scalingo-api-token, sendbird-access-id, snyk-api-token, sumologic-access-token,
  vault-batch-token.)
- Drawn rules that name something public by design, or that are not a token format, became
  what they guard: looker-client-id (the API3 client id sits in the text next to its client
  secret, and the secret is the credential; a bare client id is a look-alike);
  new-relic-browser-api-token (the browser key ships in every page's JavaScript, so
  it is a look-alike, and the New Relic license key beside it is the credential); pkcs12-file
  (gitleaks matches a ``.p12``/``.pfx`` file NAME; what a person pastes is the base64 of the
  bundle and its import password, both credentials); curl-auth-header and
  hashicorp-tf-password are contexts (a ``curl -H`` with a secret, a Terraform ``password =``),
  written with ordinary secrets; easypost-test-api-token and ``test_`` Lob keys are still
  credentials (test keys read and write the account's test data).
- Token formats from the providers' published documentation where I knew it (prefix, alphabet,
  length; the CRC32/base62 checksum GitHub published for its ``gh?_`` tokens), else from the
  gitleaks regex at b58d3f1 (trufflehog's detectors and Yelp detect-secrets' plugins were NOT
  re-read for this set); for some drawn providers a second current format is written too
  (HubSpot private-app, Linear personal, Netlify ``nfp``, Notion's older integration token,
  Bitbucket repository access token, Codecov API token, Yandex OAuth token);
  each provider in 2-3 contexts people paste into a note: a ``.env`` line, a YAML/JSON/TOML
  config, a shell command (``curl -H``, ``export``, a CLI login), a chat sentence, a code
  snippet.
- Plus the generic cases every set has: passwords in URLs, connection strings, ``.env``, YAML,
  JSON and shell history; PEM and OpenSSH private keys; JWTs used as bearer tokens; basic-auth
  headers; AWS, GCP and Azure keys; and a handful each of the tokens people paste most (GitHub,
  OpenAI, Anthropic, Slack, AWS, Google).
- Look-alikes: what sits next to credentials in the same notes and must not be refused:
  placeholders and documentation examples, identifiers and keys that are public by design,
  hashes and digests, UUIDs and other random ids, base64 of ordinary data, encrypted blobs,
  public keys and certificates, redacted tokens, references and variable names without values.

Size: 234 credentials (169 for the drawn rules, 65 generic), 161 look-alikes.

Same rules as before: published formats, synthetic values, data only; change a sample only to
correct a misstated format, never to make a rule pass.

Invariants:
- Data only and deterministic (a ``random.Random`` seeded per sample with
  ``zlib.crc32(f"heldout8/{name}")``, ``name`` being the sample's kind).
- No real credential, and no provider prefix written out whole in this file.
- Every credential sample carries the credential (``secret``), verbatim in its text;
  look-alikes carry "".

Measured once, never tuned on (the scanner of commit fe88c17, `validate` of
``/knowledge/notes.md``): 219 of 234 credentials caught (93.6 %), 1 of 161 look-alikes
refused. From then on it is a tuning set, like the seven before it
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
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
DIGITS = string.digits
BECH32_UP = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
BASE32_UP = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

Maker = Callable[[random.Random], str]


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(f"heldout8/{name}".encode()))


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        digits_ok = n < 8 or not (set(alphabet) & set(DIGITS)) or any(c.isdigit() for c in out)
        if digits_ok and (not any(c.isalpha() for c in alphabet) or any(c.isalpha() for c in out)):
            return out


def _pw(rng: random.Random, n: int = 16) -> str:
    """A generated password with punctuation that needs no escaping in YAML, INI or a quoted string."""
    while True:
        out = _pick(rng, ALNUM + "!#%*?+=-_.@^~", n)
        if any(c.isdigit() for c in out) and any(c.isupper() for c in out) and any(not c.isalnum() for c in out):
            return out


def _shell_pw(rng: random.Random, n: int = 18) -> str:
    """A password that needs no quoting on a shell command line."""
    while True:
        out = _pick(rng, ALNUM + "_-.%+,", n)
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
        out = (DIGITS + UPPER + LOWER)[d] + out
    return out.rjust(width, "0")


def _jwt(rng: random.Random, header: dict[str, object], claims: dict[str, object], sig_len: int = 43) -> str:
    def part(obj: dict[str, object]) -> str:
        return _b64u(json.dumps(obj, separators=(",", ":")).encode())

    return part(header) + "." + part(claims) + "." + _pick(rng, B64URL, sig_len)


_BEGIN = "-----BEGIN "
_END = "-----END "
_PRIV = "PRIV" + "ATE KEY-----"
_RSA_PKCS1 = bytes.fromhex("308204a40201000282010100")
_PKCS8_RSA = bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8") + _RSA_PKCS1
_PKCS8_EC_P256 = bytes.fromhex("308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420")
_EC_P256_HEAD = bytes.fromhex("30770201010420")
_EC_P256_MID = bytes.fromhex("a00a06082a8648ce3d030107a144034200") + b"\x04"
_SPKI_RSA = bytes.fromhex("30820122300d06092a864886f70d01010105000382010f003082010a0282010100")
_CERT_HEAD = bytes.fromhex("308203c7308202afa003020102")
_PFX_HEAD = bytes.fromhex("30820a5a02010330820a2006092a864886f70d010701a0820a11")


def _pem(label: str, der: bytes) -> str:
    return _BEGIN + label + "-----\n" + _wrap(base64.b64encode(der).decode()) + "\n" + _END + label + "-----"


def _rsa_pem(r: random.Random) -> str:
    return _pem("RSA " + _PRIV[:-5], _RSA_PKCS1 + r.randbytes(1180))


def _pkcs8_rsa_pem(r: random.Random) -> str:
    return _pem(_PRIV[:-5], _PKCS8_RSA + r.randbytes(1180))


def _pkcs8_ec_pem(r: random.Random) -> str:
    der = _PKCS8_EC_P256 + r.randbytes(32) + bytes.fromhex("a144034200") + b"\x04" + r.randbytes(64)
    return _pem(_PRIV[:-5], der)


def _ec_pem(r: random.Random) -> str:
    return _pem("EC " + _PRIV[:-5], _EC_P256_HEAD + r.randbytes(32) + _EC_P256_MID + r.randbytes(64))


def _openssh_ed25519(r: random.Random) -> str:
    seed, pub = r.randbytes(32), r.randbytes(32)
    blob = _ssh_str(b"ssh-ed25519") + _ssh_str(pub)
    check = r.randbytes(4)
    priv = check + check + _ssh_str(b"ssh-ed25519") + _ssh_str(pub) + _ssh_str(seed + pub) + _ssh_str(b"ana@laptop")
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
    label = "OPENSSH " + _PRIV[:-5]
    return _BEGIN + label + "-----\n" + _wrap(base64.b64encode(data).decode(), 70) + "\n" + _END + label + "-----"


# --- token makers, from the providers' published formats (prefixes assembled from pieces) ---


def _gh_classic(r: random.Random, kind: str = "p") -> str:
    body = _pick(r, ALNUM, 30)
    return "gh" + kind + "_" + body + _base62(zlib.crc32(body.encode()), 6)


def _gh_fine(r: random.Random) -> str:
    return "github" + "_pat_" + "11" + _pick(r, UPPER_DIGITS, 20) + "_" + _pick(r, ALNUM, 59)


def _openai(r: random.Random) -> str:
    marker = base64.b64encode(b"OpenAI").decode()
    kind = r.choice(("proj", "svcacct", "admin")) if r.random() < 0.4 else "proj"
    return "sk-" + kind + "-" + _pick(r, B64URL, 74) + marker + _pick(r, B64URL, 74)


def _openai_legacy(r: random.Random) -> str:
    return "sk-" + _pick(r, ALNUM, 20) + base64.b64encode(b"OpenAI").decode() + _pick(r, ALNUM, 20)


def _anthropic(r: random.Random) -> str:
    return "sk-" + "ant-" + "api03-" + _pick(r, B64URL, 93) + "AA"


def _slack_bot(r: random.Random) -> str:
    return "xo" + "xb-" + _pick(r, DIGITS, 12) + "-" + _pick(r, DIGITS, 13) + "-" + _pick(r, ALNUM, 24)


def _slack_bot_legacy(r: random.Random) -> str:
    return "xo" + "xb-" + _pick(r, DIGITS, 11) + "-" + _pick(r, ALNUM, 24)


def _slack_user(r: random.Random) -> str:
    return "xo" + "xp-" + "-".join(_pick(r, DIGITS, n) for n in (12, 12, 13)) + "-" + _pick(r, HEX, 32)


def _slack_webhook(r: random.Random) -> str:
    return (
        ("https://hooks." + "slack.com/services/T" + _pick(r, UPPER_DIGITS, 10) + "/B" + _pick(r, UPPER_DIGITS, 10))
        + "/"
        + _pick(r, ALNUM, 24)
    )


def _slack_config(r: random.Random) -> str:
    return "xo" + "xe.xo" + "x" + r.choice("bp") + "-1-" + _pick(r, UPPER_DIGITS, 164)


def _aws_id(r: random.Random) -> str:
    return "AK" + "IA" + _pick(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)


def _aws_secret(r: random.Random) -> str:
    return _pick(r, B64, 40)


def _google_key(r: random.Random) -> str:
    return "AI" + "za" + "Sy" + _pick(r, B64URL, 33)


def _azure_storage_key(r: random.Random) -> str:
    return _b64(r, 64)


def _azure_client_secret(r: random.Random) -> str:
    return _pick(r, ALNUM, 3) + _pick(r, DIGITS, 1) + "Q~" + _pick(r, ALNUM + "_-.~", 34)


def _op_secret_key(r: random.Random) -> str:
    return "-".join(
        (
            "A" + "3",
            _pick(r, UPPER_DIGITS, 6),
            _pick(r, UPPER_DIGITS, 6),
            *(_pick(r, UPPER_DIGITS, 5) for _ in range(4)),
        )
    )


def _op_service_account(r: random.Random) -> str:
    doc = {
        "signInAddress": "my.1password.com",
        "userAuth": {
            "method": "SRPg-4096",
            "alg": "PBES2g-HS256",
            "iterations": 650000,
            "salt": _b64u(r.randbytes(16)),
        },
        "email": _pick(r, LOWER_DIGITS, 13) + "@1passwordserviceaccounts.com",
        "srpX": _pick(r, HEX, 64),
        "muk": {
            "alg": "A256GCM",
            "ext": True,
            "k": _b64u(r.randbytes(32)),
            "key_ops": ["encrypt", "decrypt"],
            "kty": "oct",
            "kid": "mp",
        },
        "secretKey": _op_secret_key(r),
        "throttleSecret": {"seed": _pick(r, HEX, 64), "uuid": _pick(r, UPPER_DIGITS, 26)},
        "deviceUuid": _pick(r, LOWER_DIGITS, 26),
    }
    return "op" + "s_" + base64.b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode().rstrip("=")


def _bedrock_long(r: random.Random) -> str:
    inner = "BedrockAPIKey-" + _pick(r, LOWER_DIGITS, 4) + "-at-" + _pick(r, DIGITS, 12) + ":" + _b64(r, 42)
    return "AB" + "SK" + base64.b64encode(inner.encode()).decode()


def _bedrock_short(r: random.Random) -> str:
    url = (
        "bedrock.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Algorithm=AWS4-HMAC-SHA256"
        + "&X-Amz-Credential=ASIA"
        + _pick(r, UPPER_DIGITS, 16)
        + "%2F20261128%2Fus-east-1%2Fbedrock%2Faws4_request&X-Amz-Date=20261128T101500Z&X-Amz-Expires=43200"
        + "&X-Amz-Security-Token="
        + _pick(r, B64URL, 120)
        + "&X-Amz-Signature="
        + _pick(r, HEX, 64)
        + "&Version=1"
    )
    return "bedrock" + "-api-key-" + base64.b64encode(url.encode()).decode()


def _atlassian(r: random.Random) -> str:
    return "ATA" + "TT3" + "xFfGF0" + _pick(r, B64URL, 171) + "=" + _pick(r, "0123456789ABCDEF", 8)


def _tf_token(r: random.Random) -> str:
    return _pick(r, ALNUM, 14) + ".atlas" + "v1." + _pick(r, ALNUM, 67)


def _gitlab(prefix: str, n: int = 20) -> Maker:
    return lambda r: "gl" + prefix + "-" + _pick(r, B64URL, n)


def _glrt(r: random.Random) -> str:
    return (
        "gl"
        + "rt-t"
        + str(r.randint(1, 3))
        + "_"
        + _pick(r, B64URL, 27)
        + "."
        + _pick(r, LOWER_DIGITS, 2)
        + _pick(r, LOWER_DIGITS, 7)
    )


def _glc(r: random.Random) -> str:
    inner = json.dumps(
        {
            "o": str(r.randrange(10**5, 10**7)),
            "n": "stack-" + str(r.randrange(10**5, 10**6)) + "-hm-read-alloy",
            "k": _pick(r, ALNUM, 24),
            "m": {"r": "prod-eu-west-2"},
        },
        separators=(",", ":"),
    )
    return "gl" + "c_" + base64.b64encode(inner.encode()).decode().rstrip("=")


def _dnkey(r: random.Random) -> str:
    return "dn" + "key-" + _pick(r, UPPER_DIGITS, 26) + "-" + _pick(r, UPPER_DIGITS, 52)


def _telegram(r: random.Random) -> str:
    return str(r.randint(1, 7)) + _pick(r, DIGITS, 9) + ":AA" + _pick(r, B64URL, 33)


def _twitter_bearer(r: random.Random) -> str:
    return "A" * 22 + _pick(r, ALNUM, 20) + "%2B" + _pick(r, ALNUM, 10) + "%3D" + _pick(r, ALNUM, 54)


def _yandex_iam(r: random.Random) -> str:
    return "t1" + "." + _pick(r, B64URL, 70) + "." + _pick(r, B64URL, 86)


def _age(r: random.Random) -> str:
    return "AGE" + "-SECRET-KEY-1" + _pick(r, BECH32_UP, 58)


def _pfx(r: random.Random) -> str:
    return base64.b64encode(_PFX_HEAD + r.randbytes(700)).decode()


def _pat(prefix: str, alphabet: str, n: int) -> Maker:
    """A token that is ``prefix`` (passed in pieces) then ``n`` characters of ``alphabet``."""
    return lambda r: prefix + _pick(r, alphabet, n)


def _plain(alphabet: str, n: int) -> Maker:
    return lambda r: _pick(r, alphabet, n)


# (provider, maker, [(context, template with {s})]); every context becomes one credential sample.
_PROVIDERS: list[tuple[str, Maker, list[tuple[str, str]]]] = [
    (
        "1Password account secret key",
        _op_secret_key,
        [
            ("emergency kit note", "1Password emergency kit (family)\nemail: dana@familie-ost.de\nSecret Key: {s}"),
            ("chat", "for the new laptop sign-in you'll need my secret key {s} plus the master password I told you"),
        ],
    ),
    (
        "1Password service account token",
        _op_service_account,
        [
            ("export", "export OP_SERVICE_ACCOUNT_TOKEN={s}\nop read op://ci/deploy/password"),
            (
                "GitHub Actions yaml",
                "- uses: 1password/load-secrets-action@v2\n  env:\n    OP_SERVICE_ACCOUNT_TOKEN: {s}",
            ),
        ],
    ),
    (
        "Adobe OAuth client secret",
        _pat("p8" + "e-", ALNUM, 32),
        [
            ("env", "ADOBE_CLIENT_ID=" + "{cid}" + "\nADOBE_CLIENT_SECRET={s}"),
            ("json", '{"client_id": "{cid}", "client_secret": "{s}", "scopes": "openid,AdobeID,read_organizations"}'),
        ],
    ),
    (
        "age secret key",
        _age,
        [
            ("key file", "# created: 2026-11-02T09:14:55+01:00\n# public key: age1{pub}\n{s}"),
            ("export", "export SOPS_AGE_KEY={s}\nsops -d secrets.enc.yaml"),
        ],
    ),
    (
        "Alibaba Cloud AccessKey secret",
        _plain(ALNUM, 30),
        [
            (
                "aliyun cli",
                (
                    "aliyun configure set --profile prod --mode AK --access-key-id {ltai} --access-ke"
                    "y-secret {s} --region cn-hangzhou"
                ),
            ),
            ("env", "ALIBABA_CLOUD_ACCESS_KEY_ID={ltai}\nALIBABA_CLOUD_ACCESS_KEY_SECRET={s}"),
            ("yaml", "alibaba:\n  access_key_id: {ltai}\n  access_key_secret: {s}"),
        ],
    ),
    (
        "Atlassian API token",
        _atlassian,
        [
            ("curl basic", "curl -u ana@acme.io:{s} https://acme.atlassian.net/rest/api/3/myself"),
            ("env", "JIRA_URL=https://acme.atlassian.net\nJIRA_USER=ana@acme.io\nJIRA_API_TOKEN={s}"),
            ("chat", "new confluence token for the docs bot: {s}"),
        ],
    ),
    (
        "Amazon Bedrock long-term API key",
        _bedrock_long,
        [
            ("export", "export AWS_BEARER_TOKEN_BEDROCK={s}"),
            (
                "python",
                (
                    'os.environ["AWS_BEARER_TOKEN_BEDROCK"] = "{s}"\nclient = boto3.client("bedrock-r'
                    'untime", region_name="us-east-1")'
                ),
            ),
        ],
    ),
    (
        "Amazon Bedrock short-term API key",
        _bedrock_short,
        [
            ("export", "export AWS_BEARER_TOKEN_BEDROCK={s}"),
            (
                "curl",
                (
                    "curl -X POST https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.cla"
                    'ude-v2/converse -H "Authorization: Bearer {s}" -d @req.json'
                ),
            ),
        ],
    ),
    (
        "Bitbucket OAuth consumer secret",
        _plain(ALNUM, 32),
        [
            ("env", "BITBUCKET_CLIENT_ID=" + "{kid}" + "\nBITBUCKET_CLIENT_SECRET={s}"),
            (
                "curl",
                (
                    'curl -X POST -u "{kid}:{s}" https://bitbucket.org/site/oauth2/access_token -d gr'
                    "ant_type=client_credentials"
                ),
            ),
        ],
    ),
    (
        "Bitbucket repository access token",
        _pat("ATC" + "TT3xFfGF0", B64URL, 180),
        [
            ("git remote", "git remote set-url origin https://x-token-auth:{s}@bitbucket.org/acme/infra.git"),
            ("env", "BITBUCKET_ACCESS_TOKEN={s}"),
        ],
    ),
    (
        "Bittrex API key and secret",
        _plain(HEX, 32),
        [
            ("env", "BITTREX_API_KEY=" + "{hexid}" + "\nBITTREX_API_SECRET={s}"),
            ("python", 'bittrex = Bittrex(api_key="{hexid}", api_secret="{s}")'),
        ],
    ),
    (
        "Cisco Meraki API key",
        _plain(HEX, 40),
        [
            ("curl", 'curl -H "X-Cisco-Meraki-API-Key: {s}" https://api.meraki.com/api/v1/organizations'),
            ("env", "MERAKI_DASHBOARD_API_KEY={s}"),
            ("python", 'dashboard = meraki.DashboardAPI("{s}", suppress_logging=True)'),
        ],
    ),
    (
        "Codecov upload token",
        _uuid,
        [
            (
                "GitHub Actions yaml",
                "- uses: codecov/codecov-action@v4\n  with:\n    token: {s}\n    files: coverage.xml",
            ),
            ("cli", "codecovcli upload-process -t {s} -f coverage.xml"),
        ],
    ),
    (
        "Codecov API access token",
        _plain(HEX, 40),
        [
            ("curl", 'curl -H "Authorization: Bearer {s}" https://api.codecov.io/api/v2/github/acme/repos/'),
        ],
    ),
    (
        "Confluent Cloud API secret",
        _plain(ALNUM + "+/", 64),
        [
            (
                "client properties",
                "bootstrap.servers=pkc-41wq6.eu-west-2.aws.confluent.cloud:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\nsasl.username={ckey}\nsasl.password={s}",
            ),
            (
                "jaas",
                (
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule require"
                    "d username='{ckey}' password='{s}';"
                ),
            ),
            ("env", "CONFLUENT_CLOUD_API_KEY={ckey}\nCONFLUENT_CLOUD_API_SECRET={s}"),
        ],
    ),
    (
        "secret in a curl header",
        _plain(ALNUM, 40),
        [
            ("X-Api-Key", "curl -s -H 'X-Api-Key: {s}' https://api.internal.acme.io/v2/reports?month=11"),
            ("Token", 'curl -H "Authorization: Token {s}" https://netbox.acme.lan/api/dcim/devices/'),
            (
                "multi-line",
                (
                    "curl https://metrics.acme.io/api/v1/query \\\n  -H 'Content-Type: application/js"
                    "on' \\\n  -H 'Authorization: Bearer {s}' \\\n  -d '{\"q\": \"up\"}'"
                ),
            ),
        ],
    ),
    (
        "Defined Networking API key",
        _dnkey,
        [
            ("curl", 'curl -H "Authorization: Bearer {s}" https://api.defined.net/v1/hosts'),
            ("env", "DN_API_KEY={s}"),
        ],
    ),
    (
        "DigitalOcean OAuth access token",
        _pat("do" + "o_v1_", HEX, 64),
        [
            ("curl", 'curl -H "Authorization: Bearer {s}" https://api.digitalocean.com/v2/droplets'),
            ("chat", "the oauth app gave me this access token, valid 30 days: {s}"),
        ],
    ),
    (
        "DigitalOcean personal access token",
        _pat("do" + "p_v1_", HEX, 64),
        [
            ("doctl", "doctl auth init --context work -t {s}"),
            ("terraform tfvars", 'do_token = "{s}"\nregion   = "fra1"'),
            ("env", "DIGITALOCEAN_TOKEN={s}"),
        ],
    ),
    (
        "EasyPost production API key",
        _pat("EZ" + "AK", ALNUM, 54),
        [
            ("env", "EASYPOST_API_KEY={s}"),
            ("python", 'client = easypost.EasyPostClient("{s}")'),
        ],
    ),
    (
        "EasyPost test API key",
        _pat("EZ" + "TK", ALNUM, 54),
        [
            ("env", "EASYPOST_TEST_API_KEY={s}"),
            ("curl", "curl -X POST https://api.easypost.com/v2/addresses -u {s}: -d 'address[zip]=94107'"),
        ],
    ),
    (
        "Flickr API secret",
        _plain(HEX, 16),
        [
            ("env", "FLICKR_API_KEY={hexid}\nFLICKR_API_SECRET={s}"),
            ("python", 'flickr = flickrapi.FlickrAPI("{hexid}", "{s}", format="parsed-json")'),
        ],
    ),
    (
        "Frame.io developer token",
        _pat("fi" + "o-u-", B64URL, 64),
        [
            ("curl", 'curl -H "Authorization: Bearer {s}" https://api.frame.io/v2/me'),
            ("env", "FRAMEIO_TOKEN={s}"),
        ],
    ),
    (
        "Freemius secret key",
        _pat("s" + "k_", ALNUM + "<>;*#!", 29),
        [
            (
                "php init",
                "$acme_fs = fs_dynamic_init( array(\n    'id'         => '{num}',\n    'slug'       => 'acme-forms',\n"
                + "    'public_key' => '{pk}',\n    'secret_key' => '{s}',\n) );",
            ),
            ("php config array", "'freemius' => [\n    'public_key' => '{pk}',\n    'secret_key' => \"{s}\",\n],"),
        ],
    ),
    (
        "GitHub fine-grained personal access token",
        _gh_fine,
        [
            ("export", "export GITHUB_TOKEN={s}\ngh repo list acme --limit 200"),
            ("git clone", "git clone https://oauth2:{s}@github.com/acme/payments.git"),
            ("chat", "here's the fine-grained PAT for the release bot (contents:write on acme/site only): {s}"),
        ],
    ),
    (
        "GitHub classic personal access token",
        _gh_classic,
        [
            ("env", "GITHUB_TOKEN={s}"),
            ("curl", 'curl -H "Authorization: token {s}" https://api.github.com/user/repos?per_page=100'),
            ("npmrc", "//npm.pkg.github.com/:_authToken={s}\n@acme:registry=https://npm.pkg.github.com"),
            ("docker login", "echo {s} | docker login ghcr.io -u ana-acme --password-stdin"),
        ],
    ),
    (
        "GitLab feature flag client token",
        _gitlab("ffct"),
        [
            (
                "unleash js",
                (
                    "const unleash = initialize({\n  url: 'https://gitlab.com/api/v4/feature_flags/un"
                    "leash/4021',\n  appName: 'production',\n  instanceId: '{s}',\n});"
                ),
            ),
            ("env", "UNLEASH_URL=https://gitlab.com/api/v4/feature_flags/unleash/4021\nUNLEASH_INSTANCE_ID={s}"),
        ],
    ),
    (
        "GitLab OAuth application secret",
        _gitlab("oas", 64),
        [
            (
                "gitlab.rb",
                "gitlab_rails['omniauth_providers'] = [{ name: 'gitlab', app_id: '{hex64}', app_secret: '{s}' }]",
            ),
            ("env", "GITLAB_APP_SECRET={s}"),
        ],
    ),
    (
        "GitLab personal access token",
        _gitlab("pat"),
        [
            ("curl", 'curl --header "PRIVATE-TOKEN: {s}" "https://gitlab.com/api/v4/projects?owned=true"'),
            ("glab", "glab auth login --hostname gitlab.acme.io --token {s}"),
            ("yaml", "gitlab:\n  url: https://gitlab.acme.io\n  token: {s}"),
        ],
    ),
    (
        "GitLab pipeline trigger token",
        _pat("gl" + "ptt-", HEX, 40),
        [
            (
                "curl",
                "curl -X POST --fail -F token={s} -F ref=main https://gitlab.com/api/v4/projects/4021/trigger/pipeline",
            ),
            ("chat", "trigger token for the docs pipeline: {s}"),
        ],
    ),
    (
        "GitLab runner registration token",
        _pat("GR" + "1348941", B64URL, 20),
        [
            (
                "gitlab-runner register",
                (
                    "gitlab-runner register --non-interactive --url https://gitlab.acme.io --registra"
                    "tion-token {s} --executor docker"
                ),
            ),
            ("helm values", 'gitlabUrl: https://gitlab.acme.io/\nrunnerRegistrationToken: "{s}"'),
        ],
    ),
    (
        "GitLab runner authentication token",
        _glrt,
        [
            (
                "config.toml",
                (
                    '[[runners]]\n  name = "docker-amd64"\n  url = "https://gitlab.com"\n  token = "{'
                    's}"\n  executor = "docker"'
                ),
            ),
            ("register", "gitlab-runner register --url https://gitlab.com --token {s}"),
        ],
    ),
    (
        "GitLab SCIM token",
        _gitlab("soat"),
        [
            ("chat", "SCIM token for the Okta provisioning setup: {s} (group acme-corp)"),
            ("curl", 'curl -H "Authorization: Bearer {s}" https://gitlab.com/api/scim/v2/groups/acme-corp/Users'),
        ],
    ),
    (
        "GitLab session cookie",
        _plain(LOWER_DIGITS, 32),
        [
            ("curl", "curl -b '_gitlab_session={s}' https://gitlab.acme.io/admin/users"),
            ("devtools", "Cookie: preferred_language=en; _gitlab_session={s}; event_filter=all"),
        ],
    ),
    (
        "Gitter access token",
        _plain(HEX, 40),
        [
            ("env", "GITTER_TOKEN={s}"),
            ("curl", 'curl -H "Authorization: Bearer {s}" https://api.gitter.im/v1/rooms'),
        ],
    ),
    (
        "GoCardless live access token",
        _pat("live" + "_", B64URL, 40),
        [
            ("env", "GOCARDLESS_ACCESS_TOKEN={s}\nGOCARDLESS_ENVIRONMENT=live"),
            ("ruby", "client = GoCardlessPro::Client.new(access_token: '{s}', environment: :live)"),
        ],
    ),
    (
        "Grafana Cloud access policy token",
        _glc,
        [
            (
                "alloy",
                (
                    'prometheus.remote_write "cloud" {\n  endpoint {\n    url = "https://prometheus-p'
                    'rod-24-prod-eu-west-2.grafana.net/api/prom/push"\n    basic_auth {\n      userna'
                    'me = "1187234"\n      password = "{s}"\n    }\n  }\n}'
                ),
            ),
            ("env", "GRAFANA_CLOUD_TOKEN={s}"),
        ],
    ),
    (
        "Terraform Cloud API token",
        _tf_token,
        [
            (
                "credentials.tfrc.json",
                '{\n  "credentials": {\n    "app.terraform.io": {\n      "token": "{s}"\n    }\n  }\n}',
            ),
            ("export", "export TF_TOKEN_app_terraform_io={s}"),
        ],
    ),
    (
        "Terraform hard-coded password",
        _plain(ALNUM, 16),
        [
            (
                "azurerm sql",
                (
                    'resource "azurerm_mssql_server" "main" {\n  administrator_login          = "sqla'
                    'dmin"\n  administrator_login_password = "{s}"\n}'
                ),
            ),
            (
                "aws rds",
                (
                    'resource "aws_db_instance" "app" {\n  engine   = "postgres"\n  username = "app"\n'
                    '  password = "{s}"\n}'
                ),
            ),
        ],
    ),
    (
        "HubSpot legacy API key",
        _uuid,
        [
            ("env", "HUBSPOT_API_KEY={s}"),
            ("curl", "curl 'https://api.hubapi.com/contacts/v1/lists/all/contacts/all?hapikey={s}'"),
        ],
    ),
    (
        "HubSpot private app token",
        lambda r: "pa" + "t-" + r.choice(("na1", "eu1")) + "-" + _uuid(r),
        [
            ("curl", 'curl -H "Authorization: Bearer {s}" https://api.hubapi.com/crm/v3/objects/contacts'),
            ("env", "HUBSPOT_ACCESS_TOKEN={s}"),
        ],
    ),
    (
        "Infracost API key",
        _pat("ic" + "o-", ALNUM, 32),
        [
            ("configure", "infracost configure set api_key {s}"),
            ("GitHub Actions yaml", "- uses: infracost/actions/setup@v3\n  with:\n    api-key: {s}"),
        ],
    ),
    (
        "Intercom access token",
        lambda r: base64.b64encode(b"tok:" + _uuid(r).encode() + b":1:0").decode(),
        [
            ("env", "INTERCOM_ACCESS_TOKEN={s}"),
            (
                "curl",
                'curl https://api.intercom.io/contacts -H "Authorization: Bearer {s}" -H "Intercom-Version: 2.11"',
            ),
        ],
    ),
    (
        "JFrog API key",
        _pat("AKC" + "p", ALNUM, 69),
        [
            (
                "curl",
                'curl -H "X-JFrog-Art-Api: {s}" -T app.tar.gz https://acme.jfrog.io/artifactory/generic-local/app.tar.gz',
            ),
            (
                "pip.conf",
                "[global]\nindex-url = https://ana@acme.io:{s}@acme.jfrog.io/artifactory/api/pypi/pypi/simple",
            ),
        ],
    ),
    (
        "JFrog identity token",
        _plain(LOWER_DIGITS, 64),
        [
            ("jf config", "jf config add acme --url https://acme.jfrog.io --access-token {s} --interactive=false"),
            ("env", "ARTIFACTORY_ACCESS_TOKEN={s}"),
        ],
    ),
    (
        "Kraken API private key",
        lambda r: _b64(r, 64),
        [
            ("env", "KRAKEN_API_KEY={kkey}\nKRAKEN_API_SECRET={s}"),
            ("python", 'kraken = krakenex.API(key="{kkey}", secret="{s}")'),
        ],
    ),
    (
        "Linear OAuth client secret",
        _plain(HEX, 32),
        [
            ("env", "LINEAR_CLIENT_ID={hexid}\nLINEAR_CLIENT_SECRET={s}"),
        ],
    ),
    (
        "Linear personal API key",
        _pat("lin" + "_api_", ALNUM, 40),
        [
            (
                "curl",
                (
                    "curl -X POST https://api.linear.app/graphql -H 'Authorization: {s}' -d '{\"query"
                    '": "{ viewer { id } }"}\''
                ),
            ),
            ("env", "LINEAR_API_KEY={s}"),
        ],
    ),
    (
        "LinkedIn client secret",
        lambda r: "WPL" + "_AP1." + _pick(r, ALNUM, 16) + "." + _b64(r, 6).rstrip("=") + "==",
        [
            ("env", "LINKEDIN_CLIENT_ID={lid}\nLINKEDIN_CLIENT_SECRET={s}"),
            ("yaml", "linkedin:\n  client_id: {lid}\n  client_secret: {s}"),
        ],
    ),
    (
        "LinkedIn client secret (older 16-char)",
        _plain(ALNUM, 16),
        [
            ("python", 'LINKEDIN_OAUTH = {"client_id": "{lid}", "client_secret": "{s}"}'),
        ],
    ),
    (
        "Lob secret API key",
        lambda r: r.choice(("live", "test")) + "_" + _pick(r, HEX, 35),
        [
            ("env", "LOB_API_KEY={s}"),
            ("curl", "curl https://api.lob.com/v1/addresses -u {s}:"),
        ],
    ),
    (
        "Looker API3 client secret",
        _plain(ALNUM, 24),
        [
            (
                "looker.ini",
                "[Looker]\nbase_url=https://acme.cloud.looker.com\nclient_id={lkid}\nclient_secret={s}\nverify_ssl=True",
            ),
            ("env", "LOOKERSDK_CLIENT_ID={lkid}\nLOOKERSDK_CLIENT_SECRET={s}"),
        ],
    ),
    (
        "MessageBird live access key",
        _plain(ALNUM, 25),
        [
            ("env", "MESSAGEBIRD_ACCESS_KEY={s}"),
            (
                "curl",
                (
                    "curl -X POST https://rest.messagebird.com/messages -H 'Authorization: AccessKey "
                    "{s}' -d recipients=31612345678"
                ),
            ),
        ],
    ),
    (
        "Netlify personal access token",
        lambda r: "nf" + "p_" + _pick(r, ALNUM, 36) + _pick(r, HEX, 4),
        [
            ("env", "NETLIFY_AUTH_TOKEN={s}\nNETLIFY_SITE_ID={uuid}"),
            ("deploy", "netlify deploy --prod --dir dist --auth {s}"),
        ],
    ),
    (
        "Netlify legacy token",
        _plain(B64URL, 43),
        [
            ("GitHub Actions yaml", "env:\n  NETLIFY_AUTH_TOKEN: {s}\n  NETLIFY_SITE_ID: {uuid}"),
        ],
    ),
    (
        "New Relic license key",
        lambda r: _pick(r, HEX, 36) + "NRAL",
        [
            (
                "newrelic.yml",
                (
                    "common: &default_settings\n  license_key: {s}\n  app_name: checkout (prod)\n  # "
                    "browser key below is public, the license key is not\n  browser_key: NRJS-{nrjs}"
                ),
            ),
            ("env", "NEW_RELIC_LICENSE_KEY={s}"),
        ],
    ),
    (
        "New Relic user API key",
        lambda r: "NR" + "AK-" + _pick(r, UPPER_DIGITS, 27),
        [
            (
                "curl",
                (
                    "curl https://api.newrelic.com/graphql -H 'API-Key: {s}' -d '{\"query\": \"{ acto"
                    "r { user { name } } }\"}'"
                ),
            ),
            ("env", "NEW_RELIC_API_KEY={s}\nNEW_RELIC_ACCOUNT_ID=3317045"),
            (
                "terraform",
                'provider "newrelic" {\n  account_id = 3317045\n  api_key    = "{s}"\n  region     = "EU"\n}',
            ),
        ],
    ),
    (
        "Notion integration token",
        lambda r: "nt" + "n_" + _pick(r, DIGITS, 11) + _pick(r, ALNUM, 35),
        [
            ("env", "NOTION_TOKEN={s}\nNOTION_DATABASE_ID={hex32}"),
            ("python", 'notion = Client(auth="{s}")'),
            ("chat", "internal integration secret for the wiki sync: {s}"),
        ],
    ),
    (
        "Notion legacy integration token",
        lambda r: "sec" + "ret_" + _pick(r, ALNUM, 43),
        [
            (
                "curl",
                (
                    "curl https://api.notion.com/v1/users/me -H 'Authorization: Bearer {s}' -H 'Notio"
                    "n-Version: 2022-06-28'"
                ),
            ),
        ],
    ),
    (
        "NuGet.Config feed password",
        _pw,
        [
            (
                "NuGet.Config",
                (
                    '<packageSourceCredentials>\n  <acme>\n    <add key="Username" value="build" />\n'
                    '    <add key="ClearTextPassword" value="{s}" />\n  </acme>\n</packageSourceCredentials>'
                ),
            ),
            (
                "dotnet cli",
                (
                    "dotnet nuget add source https://nuget.acme.io/v3/index.json -n acme -u build -p "
                    "{s} --store-password-in-clear-text"
                ),
            ),
        ],
    ),
    (
        "OpenAI project API key",
        _openai,
        [
            ("env", "OPENAI_API_KEY={s}"),
            ("curl", 'curl https://api.openai.com/v1/models -H "Authorization: Bearer {s}"'),
            ("python", 'client = OpenAI(api_key="{s}")'),
            ("chat", "use my key for the hackathon, it has a $20 cap: {s}"),
        ],
    ),
    (
        "OpenAI legacy API key",
        _openai_legacy,
        [
            ("export", "export OPENAI_API_KEY={s}"),
            ("json", '{"openai": {"api_key": "{s}", "model": "gpt-4o-mini"}}'),
        ],
    ),
    (
        "OpenShift user token",
        lambda r: "sha" + "256~" + _pick(r, B64URL, 43),
        [
            ("oc login", "oc login --token={s} --server=https://api.ocp4.acme.lan:6443"),
            (
                "curl",
                'curl -k -H "Authorization: Bearer {s}" https://api.ocp4.acme.lan:6443/apis/user.openshift.io/v1/users/~',
            ),
        ],
    ),
    (
        "PKCS#12 bundle import password",
        _shell_pw,
        [
            ("openssl", "openssl pkcs12 -in client.p12 -nodes -passin pass:{s} -out client.pem"),
            (
                "Kestrel appsettings",
                (
                    '"Kestrel": {\n  "Certificates": {\n    "Default": { "Path": "certs/api.pfx", "Pa'
                    'ssword": "{s}" }\n  }\n}'
                ),
            ),
        ],
    ),
    (
        "PKCS#12 bundle in base64",
        _pfx,
        [
            ("GitHub secret note", "SIGNING_CERT_P12_BASE64 (from `base64 -i dist.p12`):\n{s}"),
            (
                "k8s secret yaml",
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: client-cert\ntype: Opaque\ndata:\n  client.pfx: {s}",
            ),
        ],
    ),
    (
        "Plaid access token",
        lambda r: "access-" + r.choice(("sandbox", "production")) + "-" + _uuid(r),
        [
            ("env", "PLAID_CLIENT_ID={hex24}\nPLAID_ACCESS_TOKEN={s}"),
            (
                "json",
                '{"client_id": "{hex24}", "access_token": "{s}", "start_date": "2026-10-01", "end_date": "2026-10-31"}',
            ),
        ],
    ),
    (
        "Prefect Cloud API key",
        _pat("pn" + "u_", ALNUM, 36),
        [
            ("prefect cli", "prefect cloud login -k {s} --workspace acme/prod"),
            (
                "env",
                "PREFECT_API_KEY={s}\nPREFECT_API_URL=https://api.prefect.cloud/api/accounts/{uuid}/workspaces/{uuid}",
            ),
        ],
    ),
    (
        "Sendbird API token",
        _plain(HEX, 40),
        [
            ("curl", 'curl -H "Api-Token: {s}" https://api-{uuid}.sendbird.com/v3/users'),
            ("env", "SENDBIRD_APP_ID={uuid}\nSENDBIRD_API_TOKEN={s}"),
        ],
    ),
    (
        "SettleMint service access token",
        _pat("sm" + "_sat_", ALNUM, 16),
        [
            ("env", "SETTLEMINT_ACCESS_TOKEN={s}"),
            ("cli", "settlemint login --accessToken {s}"),
        ],
    ),
    (
        "Slack configuration access token",
        _slack_config,
        [
            (
                "curl",
                (
                    "curl -X POST https://slack.com/api/apps.manifest.update -H 'Authorization: Beare"
                    "r {s}' -d @manifest.json"
                ),
            ),
            ("env", "SLACK_CONFIG_TOKEN={s}"),
        ],
    ),
    (
        "Slack legacy bot token",
        _slack_bot_legacy,
        [
            ("hubot", "HUBOT_SLACK_TOKEN={s} ./bin/hubot --adapter slack"),
            ("yaml", "slack:\n  token: {s}\n  channel: '#deploys'"),
        ],
    ),
    (
        "Squarespace API key",
        _uuid,
        [
            (
                "curl",
                (
                    "curl https://api.squarespace.com/1.0/commerce/orders -H 'Authorization: Bearer {"
                    "s}' -H 'User-Agent: acme-sync'"
                ),
            ),
            ("env", "SQUARESPACE_API_KEY={s}"),
        ],
    ),
    (
        "Telegram bot token",
        _telegram,
        [
            ("curl", "curl 'https://api.telegram.org/bot{s}/sendMessage?chat_id=-100123456&text=deployed'"),
            ("env", "TELEGRAM_BOT_TOKEN={s}\nTELEGRAM_CHAT_ID=-1001234567890"),
            ("chat", "BotFather gave me this: {s} -- it's for @acme_alerts_bot"),
        ],
    ),
    (
        "Twitter/X access token",
        lambda r: "1" + _pick(r, DIGITS, 18) + "-" + _pick(r, ALNUM, 31),
        [
            ("env", "TWITTER_ACCESS_TOKEN={s}\nTWITTER_ACCESS_TOKEN_SECRET={tsec}"),
            ("python", 'auth = tweepy.OAuth1UserHandler(CONSUMER_KEY, CONSUMER_SECRET, "{s}", "{tsec}")'),
        ],
    ),
    (
        "Twitter/X API key and secret",
        _plain(ALNUM, 50),
        [
            ("env", "TWITTER_API_KEY={tkey}\nTWITTER_API_SECRET={s}"),
            ("yaml", "twitter:\n  consumer_key: {tkey}\n  consumer_secret: {s}"),
        ],
    ),
    (
        "Twitter/X bearer token",
        _twitter_bearer,
        [
            ("curl", "curl 'https://api.twitter.com/2/tweets/search/recent?query=acme' -H 'Authorization: Bearer {s}'"),
            ("env", "TWITTER_BEARER_TOKEN={s}"),
        ],
    ),
    (
        "Typeform personal access token",
        lambda r: "tf" + "p_" + _pick(r, ALNUM, 44) + "_" + _pick(r, ALNUM, 14),
        [
            ("curl", "curl https://api.typeform.com/forms -H 'Authorization: Bearer {s}'"),
            ("env", "TYPEFORM_TOKEN={s}"),
        ],
    ),
    (
        "Yandex Cloud IAM token",
        _yandex_iam,
        [
            (
                "curl",
                'curl -H "Authorization: Bearer {s}" https://resource-manager.api.cloud.yandex.net/resource-manager/v1/clouds',
            ),
            ("export", "export YC_TOKEN={s}"),
        ],
    ),
    (
        "Yandex Cloud OAuth token",
        lambda r: "y0" + "_" + _pick(r, B64URL, 55),
        [
            ("yc config", "yc config set token {s}"),
        ],
    ),
    (
        "Yandex Cloud static access key secret",
        lambda r: "YC" + _pick(r, B64URL, 38),
        [
            ("aws credentials", "[yandex]\naws_access_key_id = {ycid}\naws_secret_access_key = {s}"),
            ("env", "YANDEX_S3_KEY_ID={ycid}\nYANDEX_S3_SECRET={s}"),
        ],
    ),
]


def _aws_pair(r: random.Random) -> str:
    return _aws_secret(r)


def _gcp_sa_key(r: random.Random) -> str:
    return _pkcs8_rsa_pem(r).replace("\n", "\\n") + "\\n"


def _session_jwt(r: random.Random) -> str:
    return _jwt(
        r,
        {"alg": "RS256", "typ": "JWT", "kid": _pick(r, B64URL, 22)},
        {
            "iss": "https://auth.acme.io/",
            "sub": "auth0|" + _pick(r, HEX, 24),
            "aud": ["https://api.acme.io", "https://acme.eu.auth0.com/userinfo"],
            "iat": 1795860000,
            "exp": 1795946400,
            "scope": "openid profile email read:orders write:orders",
        },
        342,
    )


def _hs_jwt(r: random.Random) -> str:
    return _jwt(
        r,
        {"alg": "HS256", "typ": "JWT"},
        {
            "sub": str(r.randrange(1000, 99999)),
            "role": "service_role",
            "iss": "supabase",
            "iat": 1795000000,
            "exp": 2110576000,
        },
    )


def _basic(r: random.Random) -> str:
    return base64.b64encode(("deploy:" + _pw(r)).encode()).decode()


_GENERIC: list[tuple[str, Maker, list[tuple[str, str]]]] = [
    (
        "password in a URL",
        _shell_pw,
        [
            (
                "postgres DATABASE_URL",
                "DATABASE_URL=postgres://app_rw:{s}@db-prod.internal:5432/orders?sslmode=require",
            ),
            (
                "redis URL in yaml",
                "cache:\n  url: redis://default:{s}@redis-14021.c250.eu-central-1-1.ec2.cloud.redislabs.com:14021/0",
            ),
            (
                "mongodb+srv in chat",
                "prod mongo is mongodb+srv://analytics:{s}@cluster0.x7kq2.mongodb.net/events?retryWrites=true",
            ),
            ("amqp in docker-compose", "environment:\n  - CELERY_BROKER_URL=amqp://celery:{s}@rabbitmq:5672/prod"),
            ("https git remote", "git remote add backup https://ana:{s}@git.acme.lan/infra/ansible.git"),
            ("mysql in python", 'engine = create_engine("mysql+pymysql://report:{s}@10.20.0.15:3306/billing")'),
        ],
    ),
    (
        "password in a connection string",
        _pw,
        [
            (
                "ADO.NET appsettings",
                (
                    '"ConnectionStrings": {\n  "Default": "Server=tcp:acme-sql.database.windows.net,1'
                    '433;Database=crm;User ID=crmapp;Password={s};Encrypt=True;"\n}'
                ),
            ),
            (
                "JDBC properties",
                "spring.datasource.url=jdbc:postgresql://db.acme.lan:5432/shop\nspring.datasource.username=shop\nspring.datasource.password={s}",
            ),
            (
                "libpq keyword string",
                "psql \"host=10.0.3.7 port=5432 dbname=ledger user=ledger password='{s}' sslmode=verify-full\"",
            ),
        ],
    ),
    (
        "password in a .env",
        _pw,
        [
            (
                "DB_PASSWORD",
                "DB_HOST=127.0.0.1\nDB_PORT=3306\nDB_DATABASE=laravel\nDB_USERNAME=laravel\nDB_PASSWORD={s}",
            ),
            ("SMTP_PASSWORD", "SMTP_HOST=smtp.mailgun.org\nSMTP_USER=postmaster@mg.acme.io\nSMTP_PASSWORD={s}"),
            ("ADMIN_PASSWORD quoted", 'ADMIN_EMAIL=ops@acme.io\nADMIN_PASSWORD="{s}"'),
        ],
    ),
    (
        "password in YAML",
        _pw,
        [
            (
                "spring",
                'spring:\n  datasource:\n    url: jdbc:mysql://db:3306/app\n    username: app\n    password: "{s}"',
            ),
            ("ansible vars", "mysql_root_password: '{s}'\nmysql_databases:\n  - name: wordpress"),
            (
                "docker-compose",
                'services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: "{s}"',
            ),
        ],
    ),
    (
        "password in JSON",
        _pw,
        [
            ("config.json", '{"db": {"host": "db.acme.lan", "user": "etl", "password": "{s}"}}'),
            (
                "vscode sftp.json",
                (
                    '{\n  "name": "staging",\n  "host": "203.0.113.40",\n  "protocol": "sftp",\n  "us'
                    'ername": "deploy",\n  "password": "{s}",\n  "remotePath": "/var/www"\n}'
                ),
            ),
        ],
    ),
    (
        "password in shell history",
        _shell_pw,
        [
            ("mysql -p", "  512  mysql -h db.acme.lan -u root -p{s} billing < dump.sql"),
            ("sshpass", "sshpass -p {s} ssh -o StrictHostKeyChecking=no admin@10.0.0.12"),
            ("htpasswd -b", "htpasswd -b -c /etc/nginx/.htpasswd grafana {s}"),
            ("PGPASSWORD", "PGPASSWORD={s} pg_dump -h db.acme.lan -U backup shop > shop.sql"),
        ],
    ),
    (
        "private key",
        _rsa_pem,
        [("RSA PEM in a note", "deploy key for the old box (id_rsa):\n{s}")],
    ),
    (
        "private key PKCS8",
        _pkcs8_rsa_pem,
        [("in a k8s tls secret note", "tls.key for api.acme.io:\n{s}")],
    ),
    (
        "private key EC",
        _ec_pem,
        [("EC PEM", "Apple push key converted to PEM:\n{s}")],
    ),
    (
        "private key PKCS8 EC",
        _pkcs8_ec_pem,
        [("p8 key", "AuthKey_7X2KQ94BNM.p8 for App Store Connect:\n{s}")],
    ),
    (
        "private key OpenSSH",
        _openssh_ed25519,
        [
            ("id_ed25519", "~/.ssh/id_ed25519 from the build VM:\n{s}"),
            ("GitHub Actions secret", "SSH_PRIVATE_KEY (paste into repo secrets):\n{s}"),
        ],
    ),
    (
        "GCP service account key",
        _gcp_sa_key,
        [
            (
                "json",
                (
                    '{\n  "type": "service_account",\n  "project_id": "acme-analytics-prod",\n  "priv'
                    'ate_key_id": "{hex40}",\n'
                )
                + (
                    '  "private_key": "{s}",\n  "client_email": "bq-loader@acme-analytics-prod.iam.gs'
                    'erviceaccount.com",\n'
                )
                + '  "client_id": "{num21}",\n  "token_uri": "https://oauth2.googleapis.com/token"\n}',
            ),
        ],
    ),
    (
        "JWT as a bearer token",
        _session_jwt,
        [
            ("curl", 'curl -H "Authorization: Bearer {s}" https://api.acme.io/v1/orders?status=open'),
            ("HTTP request", "GET /v1/me HTTP/1.1\nHost: api.acme.io\nAuthorization: Bearer {s}"),
            ("chat", "this is the access token from my session, it expires tomorrow: {s}"),
        ],
    ),
    (
        "JWT service-role key",
        _hs_jwt,
        [
            ("env", "SUPABASE_URL=https://xyzcompanyabc.supabase.co\nSUPABASE_SERVICE_ROLE_KEY={s}"),
            ("python", 'supabase = create_client(url, "{s}")'),
        ],
    ),
    (
        "basic-auth header",
        _basic,
        [
            ("curl", 'curl -H "Authorization: Basic {s}" https://registry.acme.io/v2/_catalog'),
            ("HTTP request", "POST /api/v1/import HTTP/1.1\nHost: jenkins.acme.lan\nAuthorization: Basic {s}"),
            ("nginx proxy", 'proxy_set_header Authorization "Basic {s}";'),
        ],
    ),
    (
        "AWS secret access key",
        _aws_pair,
        [
            (
                "credentials file",
                "[default]\naws_access_key_id = {akia}\naws_secret_access_key = {s}\nregion = eu-west-1",
            ),
            ("export", "export AWS_ACCESS_KEY_ID={akia}\nexport AWS_SECRET_ACCESS_KEY={s}"),
            (
                "terraform provider",
                'provider "aws" {\n  region     = "us-east-1"\n  access_key = "{akia}"\n  secret_key = "{s}"\n}',
            ),
            ("chat", "temporary creds for the migration bucket: key {akia} secret {s}"),
        ],
    ),
    (
        "AWS access key id",
        _aws_id,
        [
            ("boto3", 'session = boto3.Session(aws_access_key_id="{s}", aws_secret_access_key="{b40}")'),
            ("docker run", "docker run -e AWS_ACCESS_KEY_ID={s} -e AWS_SECRET_ACCESS_KEY={b40} amazon/aws-cli s3 ls"),
        ],
    ),
    (
        "Google API key",
        _google_key,
        [
            ("maps url", "https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={s}"),
            ("env", "GOOGLE_API_KEY={s}"),
            (
                "gemini curl",
                (
                    "curl 'https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-flash:g"
                    "enerateContent?key={s}' -H 'Content-Type: application/json' -d @prompt.json"
                ),
            ),
        ],
    ),
    (
        "Google OAuth client secret",
        lambda r: "GOC" + "SPX-" + _pick(r, B64URL, 28),
        [
            (
                "client_secret.json",
                (
                    '{"installed": {"client_id": "{num12}-{gid}.apps.googleusercontent.com", "client_'
                    'secret": "{s}", "redirect_uris": ["http://localhost"]}}'
                ),
            ),
            ("env", "GOOGLE_CLIENT_ID={num12}-{gid}.apps.googleusercontent.com\nGOOGLE_CLIENT_SECRET={s}"),
        ],
    ),
    (
        "Azure storage account key",
        _azure_storage_key,
        [
            (
                "connection string",
                "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmebackups;AccountKey={s};EndpointSuffix=core.windows.net",
            ),
            (
                "az cli",
                "az storage blob upload --account-name acmebackups --account-key {s} -c db -f dump.gz -n dump.gz",
            ),
        ],
    ),
    (
        "Azure AD client secret",
        _azure_client_secret,
        [
            ("env", "AZURE_TENANT_ID={uuid}\nAZURE_CLIENT_ID={uuid}\nAZURE_CLIENT_SECRET={s}"),
            ("az login", "az login --service-principal -u {uuid} -p {s} --tenant acme.onmicrosoft.com"),
        ],
    ),
    (
        "GitHub token (most pasted)",
        lambda r: _gh_classic(r, r.choice("opsu")),
        [
            ("gh auth", "echo {s} | gh auth login --with-token"),
            ("chat", "can you try with my token? {s}"),
            ("actions yaml", "env:\n  GH_TOKEN: {s}"),
        ],
    ),
    (
        "OpenAI key (most pasted)",
        _openai,
        [
            ("continue config", "models:\n  - name: gpt-4o\n    provider: openai\n    apiKey: {s}"),
            ("node", "const openai = new OpenAI({ apiKey: '{s}' });"),
        ],
    ),
    (
        "Anthropic API key",
        _anthropic,
        [
            ("env", "ANTHROPIC_API_KEY={s}"),
            (
                "curl",
                (
                    "curl https://api.anthropic.com/v1/messages -H 'x-api-key: {s}' -H 'anthropic-ver"
                    "sion: 2023-06-01' -d @msg.json"
                ),
            ),
            ("python", 'client = anthropic.Anthropic(api_key="{s}")'),
            ("chat", "my claude key for the eval run: {s}"),
        ],
    ),
    (
        "Slack bot token",
        _slack_bot,
        [
            ("env", "SLACK_BOT_TOKEN={s}\nSLACK_SIGNING_SECRET={hex32}"),
            (
                "curl",
                (
                    "curl -X POST https://slack.com/api/chat.postMessage -H 'Authorization: Bearer {s"
                    "}' -d channel=C0123 -d text=hi"
                ),
            ),
        ],
    ),
    (
        "Slack user token",
        _slack_user,
        [("chat", "the user token from the oauth page: {s}")],
    ),
    (
        "Slack incoming webhook",
        _slack_webhook,
        [
            ("curl", "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"deploy done\"}' {s}"),
            ("yaml", "alertmanager:\n  slack_configs:\n    - api_url: {s}\n      channel: '#alerts'"),
        ],
    ),
]


def _fill(template: str, r: random.Random) -> str:
    """The context's other values (ids that sit next to the secret), drawn from the sample's own rng."""
    fields: dict[str, Callable[[], str]] = {
        "{cid}": lambda: _pick(r, HEX, 32),
        "{kid}": lambda: _pick(r, ALNUM, 20),
        "{hexid}": lambda: _pick(r, HEX, 32),
        "{pub}": lambda: _pick(r, BECH32_UP.lower(), 58),
        "{ckey}": lambda: _pick(r, UPPER_DIGITS, 16),
        "{num}": lambda: str(r.randrange(1000, 99999)),
        "{pk}": lambda: "p" + "k_" + _pick(r, HEX, 29),
        "{hex64}": lambda: _pick(r, HEX, 64),
        "{hex40}": lambda: _pick(r, HEX, 40),
        "{hex32}": lambda: _pick(r, HEX, 32),
        "{hex24}": lambda: _pick(r, HEX, 24),
        "{lid}": lambda: _pick(r, LOWER_DIGITS, 14),
        "{kkey}": lambda: _b64(r, 42),
        "{lkid}": lambda: _pick(r, ALNUM, 20),
        "{uuid}": lambda: _uuid(r),
        "{nrjs}": lambda: _pick(r, HEX, 19),
        "{tsec}": lambda: _pick(r, ALNUM, 45),
        "{tkey}": lambda: _pick(r, ALNUM, 25),
        "{ycid}": lambda: "YC" + "AJE" + _pick(r, B64URL, 20),
        "{ltai}": lambda: "LT" + "AI" + _pick(r, ALNUM, 20),
        "{akia}": lambda: _aws_id(r),
        "{b40}": lambda: _aws_secret(r),
        "{num21}": lambda: _pick(r, DIGITS, 21),
        "{num12}": lambda: _pick(r, DIGITS, 12),
        "{gid}": lambda: _pick(r, LOWER_DIGITS, 32),
    }
    for key, make in fields.items():
        while key in template:
            template = template.replace(key, make(), 1)
    return template


def credentials() -> list[Sample]:
    out: list[Sample] = []
    for provider, make, contexts in _PROVIDERS + _GENERIC:
        for context, template in contexts:
            kind = f"{provider}: {context}"
            r = _rng(kind)
            secret = make(r)
            out.append(Sample(kind, _fill(template, r).replace("{s}", secret), secret))
    return out


def _sha(r: random.Random, n: int = 40) -> str:
    return _pick(r, HEX, n)


def _cert(r: random.Random) -> str:
    return _pem("CERTIFICATE", _CERT_HEAD + r.randbytes(940))


def _spki(r: random.Random) -> str:
    return _pem("PUBLIC KEY", _SPKI_RSA + r.randbytes(256) + bytes.fromhex("0203010001"))


def _ssh_pub(r: random.Random) -> str:
    return "ssh-ed25519 " + base64.b64encode(_ssh_str(b"ssh-ed25519") + _ssh_str(r.randbytes(32))).decode()


def _anon_jwt(r: random.Random) -> str:
    return _jwt(
        r,
        {"alg": "HS256", "typ": "JWT"},
        {"iss": "supabase", "ref": _pick(r, LOWER, 20), "role": "anon", "iat": 1795000000, "exp": 2110576000},
    )


def _vault_lines(r: random.Random) -> str:
    return "\n".join(_pick(r, HEX, 80) for _ in range(5)) + "\n" + _pick(r, HEX, 32)


_PLACEHOLDER_VARS = [
    ("GITHUB_TOKEN", "gh" + "p_"),
    ("OPENAI_API_KEY", "sk-"),
    ("ANTHROPIC_API_KEY", "sk-" + "ant-"),
    ("SLACK_BOT_TOKEN", "xo" + "xb-"),
    ("GITLAB_TOKEN", "gl" + "pat-"),
    ("NOTION_TOKEN", "nt" + "n_"),
    ("DIGITALOCEAN_TOKEN", "do" + "p_v1_"),
    ("PREFECT_API_KEY", "pn" + "u_"),
    ("INFRACOST_API_KEY", "ic" + "o-"),
    ("NEW_RELIC_API_KEY", "NR" + "AK-"),
    ("TELEGRAM_BOT_TOKEN", ""),
    ("LINEAR_API_KEY", "lin" + "_api_"),
]

Texts = list[tuple[str, Callable[[random.Random], str]]]


def _per_variable(var: str, prefix: str, x_ed: bool) -> Texts:
    """The ways a token's variable shows up without its value: in a README, from the environment, masked."""

    def angle(r: random.Random) -> str:
        return f"# set your token\n{var}=<your-token-here>"

    def from_env(r: random.Random) -> str:
        return f'export {var}="${{{var}}}"  # taken from the CI secret store'

    def masked(r: random.Random) -> str:
        return f"[config] {var}={prefix}" + "*" * 12 + _pick(r, ALNUM, 4) + " (loaded from .env)"

    def xed(r: random.Random) -> str:
        return f"{var}={prefix}" + "x" * 24 + "   # example only"

    out: Texts = [
        (f"placeholder: {var} angle brackets in a README", angle),
        (f"placeholder: {var} from the environment", from_env),
        (f"redacted: {var} masked in a log", masked),
    ]
    if x_ed:
        out.append((f"placeholder: {var} x-ed out example", xed))
    return out


_LOOKALIKES: Texts = [
    text for i, (var, prefix) in enumerate(_PLACEHOLDER_VARS) for text in _per_variable(var, prefix, i < 8)
]

_LOOKALIKES += [
    # --- placeholders and documentation examples ---
    (
        "placeholder: changeme in docker-compose docs",
        lambda r: "environment:\n  POSTGRES_PASSWORD: changeme  # change this before going live",
    ),
    (
        "placeholder: YOUR_API_KEY in a curl example",
        lambda r: 'curl -H "Authorization: Bearer YOUR_API_KEY" https://api.example.com/v1/items',
    ),
    ("placeholder: connection string template", lambda r: "DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/DBNAME"),
    (
        "placeholder: helm values with empty password",
        lambda r: 'postgresql:\n  auth:\n    username: app\n    password: ""  # set via --set or existingSecret',
    ),
    (
        "placeholder: AWS documentation example key id",
        lambda r: "aws_access_key_id = AKIA" + "IOSFODNN7" + "EXAMPLE  # the example from the AWS docs",
    ),
    (
        "placeholder: env.example file",
        lambda r: "# copy to .env and fill in\nSTRIPE_SECRET_KEY=\nSTRIPE_WEBHOOK_SECRET=\nSENTRY_DSN=",
    ),
    (
        "placeholder: terraform variable without default",
        lambda r: 'variable "db_password" {\n  type      = string\n  sensitive = true\n}',
    ),
    (
        "placeholder: ellipsis key in prose",
        lambda r: "Paste your key (it starts with sk-...) into Settings > API and press Save.",
    ),
    (
        "placeholder: curl with shell variable",
        lambda r: 'curl -H "Authorization: Bearer $GITLAB_TOKEN" "$CI_API_V4_URL/projects/$CI_PROJECT_ID/jobs"',
    ),
    ("placeholder: password prompt", lambda r: "psql -h db.acme.lan -U app -W shop   # -W prompts for the password"),
    (
        "placeholder: dummy password in test fixture",
        lambda r: (
            'def test_login(client):\n    resp = client.post("/login", data={"user": "alice",'
            ' "password": "password123"})'
        ),
    ),
    (
        "placeholder: localhost dev default",
        lambda r: "REDIS_URL=redis://localhost:6379/0\nDATABASE_URL=sqlite:///dev.db",
    ),
    ("placeholder: Jinja template value", lambda r: "password: {{ vault_mysql_password }}\nuser: {{ mysql_user }}"),
    (
        "placeholder: k8s secretKeyRef",
        lambda r: (
            "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: "
            "db-creds\n        key: password"
        ),
    ),
    (
        "placeholder: GitHub Actions secrets expression",
        lambda r: "env:\n  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}\n  GH_TOKEN: ${{ github.token }}",
    ),
    (
        "placeholder: 1Password secret reference",
        lambda r: "DB_PASSWORD=op://Production/postgres/password\nAPI_KEY=op://Production/stripe/credential",
    ),
    ("placeholder: vault kv command", lambda r: "export DB_PASSWORD=$(vault kv get -field=password secret/prod/db)"),
    ("placeholder: docker secret file", lambda r: "POSTGRES_PASSWORD_FILE=/run/secrets/postgres_password"),
    (
        "placeholder: python getenv",
        lambda r: 'api_key = os.environ["OPENAI_API_KEY"]\ntoken = os.getenv("SLACK_BOT_TOKEN", "")',
    ),
    (
        "placeholder: node process.env",
        lambda r: "const stripe = new Stripe(process.env.STRIPE_SECRET_KEY!, { apiVersion: '2024-06-20' });",
    ),
    (
        "placeholder: aws-vault usage",
        lambda r: "aws-vault exec prod -- terraform plan\naws sso login --profile acme-dev",
    ),
    (
        "placeholder: gh auth status",
        lambda r: (
            "github.com\n  ✓ Logged in to github.com account ana-acme (keyring)\n  - Token: gh"
            + "o_************************************"
        ),
    ),
    (
        "placeholder: secret rotation checklist",
        lambda r: (
            "TODO: rotate the Telegram bot token, the Notion integration secret and the Confl"
            "uent API secret before Friday"
        ),
    ),
    (
        "placeholder: variable names only",
        lambda r: (
            "required env: AWS_SECRET_ACCESS_KEY, AZURE_CLIENT_SECRET, GOOGLE_APPLICATION_CRE"
            "DENTIALS, TWITTER_BEARER_TOKEN"
        ),
    ),
    (
        "placeholder: password policy prose",
        lambda r: (
            "Passwords must be 14+ characters; the admin password is stored in the team vault under 'router-admin'."
        ),
    ),
    # --- public by design ---
    (
        "public: Stripe publishable key",
        lambda r: "<script>const stripe = Stripe('p" + "k_live_" + _pick(r, ALNUM, 99) + "');</script>",
    ),
    (
        "public: Sentry DSN in frontend config",
        lambda r: (
            "Sentry.init({ dsn: 'https://"
            + _sha(r, 32)
            + "@o"
            + _pick(r, DIGITS, 6)
            + ".ingest.sentry.io/"
            + _pick(r, DIGITS, 7)
            + "' });"
        ),
    ),
    (
        "public: Google OAuth client id",
        lambda r: (
            "GOOGLE_CLIENT_ID="
            + _pick(r, DIGITS, 12)
            + "-"
            + _pick(r, LOWER_DIGITS, 32)
            + ".apps.googleusercontent.com"
        ),
    ),
    (
        "public: New Relic browser key",
        lambda r: (
            'window.NREUM.loader_config = {accountID: "3317045", licenseKey: "NR'
            + "JS-"
            + _sha(r, 19)
            + '", applicationID: "'
            + _pick(r, DIGITS, 9)
            + '"};'
        ),
    ),
    (
        "public: Looker client id alone",
        lambda r: (
            "Looker API3 client id for the BI service user: " + _pick(r, ALNUM, 20) + " (the secret is in the vault)"
        ),
    ),
    (
        "public: Mapbox public token",
        lambda r: (
            "mapboxgl.accessToken = 'p"
            + "k.eyJ1IjoiYWNtZSIsImEiOiJ"
            + _pick(r, ALNUM, 20)
            + "In0."
            + _pick(r, B64URL, 22)
            + "';"
        ),
    ),
    (
        "public: Algolia search-only key",
        lambda r: (
            "const search = algoliasearch('"
            + _pick(r, UPPER_DIGITS, 10)
            + "', '"
            + _sha(r, 32)
            + "'); // search-only key"
        ),
    ),
    (
        "public: PostHog project key",
        lambda r: "posthog.init('ph" + "c_" + _pick(r, ALNUM, 43) + "', { api_host: 'https://eu.i.posthog.com' })",
    ),
    (
        "public: reCAPTCHA site key",
        lambda r: '<div class="g-recaptcha" data-sitekey="6L' + _pick(r, B64URL, 38) + '"></div>',
    ),
    (
        "public: Supabase anon key",
        lambda r: (
            "NEXT_PUBLIC_SUPABASE_URL=https://abcdefghijklmnop.supabase.co\nNEXT_PUBLIC_SUPABASE_ANON_KEY="
            + _anon_jwt(r)
        ),
    ),
    (
        "public: GitHub App client id",
        lambda r: "GitHub App 'acme-ci' client ID: Iv23li" + _pick(r, ALNUM, 14) + ", app id 912345",
    ),
    (
        "public: Azure tenant and client ids",
        lambda r: "tenant: " + _uuid(r) + "\nclient_id: " + _uuid(r) + "\nsubscription: " + _uuid(r),
    ),
    (
        "public: Firebase project config without key",
        lambda r: (
            (
                "const firebaseConfig = {\n  authDomain: 'acme-app.firebaseapp.com',\n  projectId"
                ": 'acme-app',\n  messagingSenderId: '"
            )
            + _pick(r, DIGITS, 12)
            + "',\n  appId: '1:"
            + _pick(r, DIGITS, 12)
            + ":web:"
            + _sha(r, 22)
            + "'\n};"
        ),
    ),
    (
        "public: Clerk publishable key",
        lambda r: "NEXT_PUBLIC_CLERK_PUBLISHABLE_KEY=p" + "k_test_" + base64.b64encode(b"clerk.acme-app.dev$").decode(),
    ),
    ("public: Plaid client id", lambda r: "Plaid client_id (not secret, shown on the dashboard): " + _sha(r, 24)),
    ("public: Segment write key in browser snippet", lambda r: 'analytics.load("' + _pick(r, ALNUM, 32) + '");'),
    # --- hashes and digests ---
    (
        "hash: git log",
        lambda r: "\n".join(
            "commit " + _sha(r) + "\nAuthor: Ana <ana@acme.io>\n\n    fix flaky test\n" for _ in range(2)
        ),
    ),
    ("hash: short SHAs in a changelog", lambda r: "\n".join(f"- {_sha(r, 7)} bump deps" for _ in range(5))),
    ("hash: sha256sum output", lambda r: _sha(r, 64) + "  terraform_1.9.8_linux_amd64.zip"),
    (
        "hash: npm integrity",
        lambda r: '"node_modules/lodash": {\n  "version": "4.17.21",\n  "integrity": "sha512-' + _b64(r, 64) + '"\n}',
    ),
    (
        "hash: yarn.lock entry",
        lambda r: (
            'react@^18.3.1:\n  version "18.3.1"\n  resolved "https://registry.yarnpkg.com/react/-/react-18.3.1.tgz#'
            + _sha(r)
            + '"'
        ),
    ),
    (
        "hash: Cargo.lock checksum",
        lambda r: '[[package]]\nname = "serde"\nversion = "1.0.215"\nchecksum = "' + _sha(r, 64) + '"',
    ),
    (
        "hash: go.sum",
        lambda r: (
            "golang.org/x/crypto v0.28.0 h1:" + _b64(r, 32) + "\ngolang.org/x/crypto v0.28.0/go.mod h1:" + _b64(r, 32)
        ),
    ),
    ("hash: docker image digest", lambda r: "image: ghcr.io/acme/api@sha256:" + _sha(r, 64)),
    (
        "hash: pip requirements hashes",
        lambda r: "requests==2.32.3 \\\n    --hash=sha256:" + _sha(r, 64) + " \\\n    --hash=sha256:" + _sha(r, 64),
    ),
    (
        "hash: SRI script tag",
        lambda r: (
            '<script src="https://cdn.jsdelivr.net/npm/alpinejs@3.14.1/dist/cdn.min.js" integrity="sha384-'
            + _b64(r, 48)
            + '" crossorigin="anonymous"></script>'
        ),
    ),
    ("hash: md5 of a download", lambda r: "MD5 (ubuntu-24.04.1-live-server-amd64.iso) = " + _sha(r, 32)),
    (
        "hash: poetry.lock",
        lambda r: 'files = [\n    {file = "pydantic-2.9.2-py3-none-any.whl", hash = "sha256:' + _sha(r, 64) + '"},\n]',
    ),
    ("hash: GitHub Actions pinned by SHA", lambda r: "- uses: actions/checkout@" + _sha(r) + " # v4.2.2"),
    (
        "hash: git rev-parse",
        lambda r: "$ git rev-parse HEAD\n" + _sha(r) + "\n$ git describe --tags\nv2.14.0-3-g" + _sha(r, 7),
    ),
    (
        "hash: webhook signature header",
        lambda r: "X-Hub-Signature-256: sha256=" + _sha(r, 64) + "\nX-GitHub-Delivery: " + _uuid(r),
    ),
    ("hash: ETag", lambda r: 'ETag: "' + _sha(r, 32) + '"\nLast-Modified: Tue, 24 Nov 2026 08:12:44 GMT'),
    ("hash: SSH host key fingerprint", lambda r: "ED25519 key fingerprint is SHA256:" + _b64(r, 32).rstrip("=") + "."),
    (
        "hash: GPG key fingerprint",
        lambda r: "pub   ed25519 2024-03-02 [SC]\n      " + _sha(r).upper() + "\nuid   Ana Ost <ana@acme.io>",
    ),
    # --- ids ---
    (
        "id: request ids in a log",
        lambda r: "\n".join(f"2026-11-28T10:{i:02d}:00Z INFO request_id={_uuid(r)} status=200" for i in range(4)),
    ),
    ("id: trace id", lambda r: "traceparent: 00-" + _sha(r, 32) + "-" + _sha(r, 16) + "-01"),
    (
        "id: Stripe object ids",
        lambda r: (
            "refund issued for cus_"
            + _pick(r, ALNUM, 14)
            + ", payment pi_"
            + _pick(r, ALNUM, 24)
            + ", invoice in_"
            + _pick(r, ALNUM, 24)
        ),
    ),
    (
        "id: docker ps",
        lambda r: (
            "CONTAINER ID   IMAGE          STATUS\n"
            + _sha(r, 12)
            + "   postgres:16    Up 3 days\n"
            + _sha(r, 12)
            + "   redis:7        Up 3 days"
        ),
    ),
    (
        "id: MongoDB ObjectIds",
        lambda r: '{"_id": {"$oid": "' + _sha(r, 24) + '"}, "user": {"$oid": "' + _sha(r, 24) + '"}}',
    ),
    (
        "id: ULIDs",
        lambda r: "order ids: " + ", ".join("01J" + _pick(r, "0123456789ABCDEFGHJKMNPQRSTVWXYZ", 23) for _ in range(3)),
    ),
    ("id: Notion database id", lambda r: "NOTION_DATABASE_ID=" + _sha(r, 32) + "  # from the page URL, not a secret"),
    (
        "id: Slack channel and user ids",
        lambda r: "post to C0" + _pick(r, UPPER_DIGITS, 9) + ", mention U0" + _pick(r, UPPER_DIGITS, 9),
    ),
    (
        "id: AWS ARNs",
        lambda r: (
            "arn:aws:iam::"
            + _pick(r, DIGITS, 12)
            + ":role/github-deploy\narn:aws:s3:::acme-backups-"
            + _pick(r, LOWER_DIGITS, 6)
        ),
    ),
    (
        "id: Kubernetes pod names",
        lambda r: "\n".join(
            f"api-{_pick(r, LOWER_DIGITS, 10)}-{_pick(r, LOWER_DIGITS, 5)}   1/1   Running   0   2d" for _ in range(3)
        ),
    ),
    ("id: Google Analytics measurement id", lambda r: "gtag('config', 'G-" + _pick(r, UPPER_DIGITS, 10) + "');"),
    (
        "id: Terraform state serial and lineage",
        lambda r: '{"version": 4, "terraform_version": "1.9.8", "serial": 112, "lineage": "' + _uuid(r) + '"}',
    ),
    (
        "id: YouTube video ids",
        lambda r: (
            "watch later: https://youtu.be/"
            + _pick(r, B64URL, 11)
            + " and https://www.youtube.com/watch?v="
            + _pick(r, B64URL, 11)
        ),
    ),
    (
        "id: Jira issue keys and Confluence page id",
        lambda r: (
            "see PAY-"
            + _pick(r, DIGITS, 4)
            + " and https://acme.atlassian.net/wiki/spaces/ENG/pages/"
            + _pick(r, DIGITS, 10)
        ),
    ),
    (
        "id: DigitalOcean droplet and volume ids",
        lambda r: "droplet " + _pick(r, DIGITS, 9) + " volume " + _uuid(r) + " region fra1",
    ),
    # --- base64 of ordinary data ---
    (
        "base64: ConfigMap binaryData of a text file",
        lambda r: "binaryData:\n  motd: " + base64.b64encode(b"Welcome to the acme build host. Be nice.\n").decode(),
    ),
    (
        "base64: small PNG data URI",
        lambda r: '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQ' + _b64(r, 60) + '" />',
    ),
    (
        "base64: encoded JSON config",
        lambda r: (
            "FEATURE_FLAGS_B64="
            + base64.b64encode(json.dumps({"newCheckout": True, "darkMode": False, "maxItems": 50}).encode()).decode()
        ),
    ),
    (
        "base64: decode command",
        lambda r: (
            "$ echo "
            + base64.b64encode(b"hello from the night shift").decode()
            + " | base64 -d\nhello from the night shift"
        ),
    ),
    (
        "base64: MIME attachment",
        lambda r: (
            'Content-Type: text/csv; name="report.csv"\nContent-Transfer-Encoding: base64\n\n'
            + _wrap(
                base64.b64encode(b"date,orders,revenue\n2026-11-27,412,18234.50\n2026-11-28,398,17710.20\n").decode(),
                76,
            )
        ),
    ),
    (
        "base64: k8s Secret with username only",
        lambda r: (
            "data:\n  username: "
            + base64.b64encode(b"app_readonly").decode()
            + "\n  database: "
            + base64.b64encode(b"analytics").decode()
        ),
    ),
    (
        "base64: font woff2 snippet",
        lambda r: "src: url(data:font/woff2;base64,d09GMgABAAAAA" + _b64(r, 90) + ") format('woff2');",
    ),
    ("base64: protobuf in a log", lambda r: "decoded event payload (base64 protobuf): " + _b64(r, 27)),
    # --- encrypted blobs ---
    (
        "encrypted: sops yaml",
        lambda r: (
            "db:\n    password: ENC[AES256_GCM,data:"
            + _b64(r, 18)
            + ",iv:"
            + _b64(r, 32)
            + ",tag:"
            + _b64(r, 16)
            + ",type:str]\nsops:\n    age:\n        - recipient: age1"
            + _pick(r, BECH32_UP.lower(), 58)
        ),
    ),
    ("encrypted: ansible-vault file", lambda r: "$ANSIBLE_VAULT;1.1;AES256\n" + _vault_lines(r)),
    (
        "encrypted: ansible inline vault",
        lambda r: (
            "mysql_root_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  " + _vault_lines(r).replace("\n", "\n  ")
        ),
    ),
    (
        "encrypted: SealedSecret",
        lambda r: (
            "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nspec:\n  encryptedData:\n    password: "
            + _b64(r, 300)
        ),
    ),
    ("encrypted: Vault transit ciphertext", lambda r: '{"ciphertext": "vault:v1:' + _b64(r, 45) + '"}'),
    (
        "encrypted: PGP message",
        lambda r: (
            "-----BEGIN PGP MESSAGE-----\n\n"
            + _wrap(_b64(r, 240))
            + "\n="
            + _pick(r, B64, 4)
            + "\n-----END PGP MESSAGE-----"
        ),
    ),
    (
        "encrypted: age armored file",
        lambda r: "-----BEGIN AGE ENCRYPTED FILE-----\n" + _wrap(_b64(r, 180)) + "\n-----END AGE ENCRYPTED FILE-----",
    ),
    ("encrypted: Rails credentials.yml.enc", lambda r: _b64(r, 90) + "--" + _b64(r, 12) + "--" + _b64(r, 16)),
    (
        "encrypted: git-crypt note",
        lambda r: "GITCRYPT binary file, 1.2 KB (encrypted with git-crypt; key held by ops)\nsha: " + _sha(r),
    ),
    # --- public keys and certificates ---
    ("public key: SSH authorized_keys", lambda r: _ssh_pub(r) + " ana@laptop\n" + _ssh_pub(r) + " ci@runner"),
    ("public key: PEM public key", lambda r: "JWT verification key:\n" + _spki(r)),
    ("public key: X.509 certificate", lambda r: "ca.crt:\n" + _cert(r)),
    ("public key: certificate chain in nginx note", lambda r: "fullchain.pem =\n" + _cert(r) + "\n" + _cert(r)),
    ("public key: age recipient", lambda r: "sops recipients: age1" + _pick(r, BECH32_UP.lower(), 58)),
    (
        "public key: JWKS",
        lambda r: (
            '{"keys": [{"kty": "RSA", "kid": "'
            + _pick(r, B64URL, 22)
            + '", "use": "sig", "alg": "RS256", "n": "'
            + _b64u(r.randbytes(256))
            + '", "e": "AQAB"}]}'
        ),
    ),
    (
        "public key: WireGuard peer public key",
        lambda r: "[Peer]\nPublicKey = " + _b64(r, 32) + "\nAllowedIPs = 10.8.0.2/32\nEndpoint = vpn.acme.io:51820",
    ),
    (
        "public key: PGP public key block",
        lambda r: (
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
            + _wrap(_b64(r, 300))
            + "\n="
            + _pick(r, B64, 4)
            + "\n-----END PGP PUBLIC KEY BLOCK-----"
        ),
    ),
    (
        "public key: known_hosts",
        lambda r: (
            "github.com ssh-ed25519 " + base64.b64encode(_ssh_str(b"ssh-ed25519") + _ssh_str(r.randbytes(32))).decode()
        ),
    ),
    (
        "public key: certificate fingerprint",
        lambda r: "SHA256 Fingerprint=" + ":".join(_pick(r, "0123456789ABCDEF", 2) for _ in range(32)),
    ),
    # --- redacted tokens ---
    (
        "redacted: GitHub token in an audit log",
        lambda r: "token gh" + "p_****" + _pick(r, ALNUM, 4) + " last used 2026-11-27 from 203.0.113.8",
    ),
    (
        "redacted: OpenAI dashboard listing",
        lambda r: "Name: hackathon   Key: sk-...." + _pick(r, ALNUM, 4) + "   Created: Nov 2, 2026   Last used: Nov 27",
    ),
    (
        "redacted: Slack token in an error",
        lambda r: "slack_sdk.errors.SlackApiError: invalid_auth (token xo" + "xb-****-****-" + "*" * 20 + ")",
    ),
    (
        "redacted: password stars in a config dump",
        lambda r: "db.user=app\ndb.password=********\ndb.url=jdbc:postgresql://db:5432/app",
    ),
    ("redacted: REDACTED bearer in a HAR", lambda r: '{"name": "Authorization", "value": "Bearer [REDACTED]"}'),
    (
        "redacted: GitHub Actions masked output",
        lambda r: (
            'Run curl -H "Authorization: Bearer ***" https://api.acme.io/deploy\n  ***\n  deployment 4821 created'
        ),
    ),
    (
        "redacted: AWS key id suffix",
        lambda r: "Access key ending in " + _pick(r, UPPER_DIGITS, 4) + " was deactivated by ana on 2026-11-20.",
    ),
    (
        "redacted: connection string with masked password",
        lambda r: "DATABASE_URL=postgres://app_rw:*****@db-prod.internal:5432/orders",
    ),
    (
        "redacted: Stripe key last4",
        lambda r: "rotated the restricted key r" + "k_live_..." + _pick(r, ALNUM, 4) + " used by the reporting job",
    ),
    (
        "redacted: Anthropic console key hint",
        lambda r: "key 'eval-runner' sk-" + "ant-api03-" + "..." + _pick(r, B64URL, 4) + "AA, workspace Default",
    ),
    # --- prose and references around credentials ---
    (
        "prose: how-to about tokens",
        lambda r: (
            "To create a GitLab personal access token go to Preferences > Access tokens, pick"
            " the read_api scope, and store it in 1Password."
        ),
    ),
    (
        "prose: incident note without values",
        lambda r: (
            "2026-11-27 the Telegram bot token leaked in a screenshot; revoked via BotFather "
            "at 14:02, new token in vault path secret/bots/alerts."
        ),
    ),
    (
        "prose: token format description",
        lambda r: (
            "Fine-grained PATs start with github_"
            + "pat_ followed by 82 word characters; classic ones are 40 characters long."
        ),
    ),
    (
        "prose: env var list in a PR",
        lambda r: (
            "This PR reads OPENAI_API_KEY, ANTHROPIC_API_KEY and SLACK_BOT_TOKEN from the env"
            "ironment instead of settings.py."
        ),
    ),
    (
        "prose: password manager entry name",
        lambda r: "The Meraki dashboard login is under 'Network / Meraki admin' in Bitwarden; ask Jonas for access.",
    ),
    (
        "prose: command to create a token",
        lambda r: "doctl auth init --context work   # paste the token when prompted\ngh auth login --web",
    ),
]


def lookalikes() -> list[Sample]:
    return [Sample(kind, make(_rng("lookalike/" + kind)), "") for kind, make in _LOOKALIKES]
