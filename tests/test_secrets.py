"""Secret scanner: every kind of fake credential is caught on the right line and
never echoed; ordinary prose, Markdown, code, hashes and UUIDs raise nothing.

All credential-shaped strings are built at run time from a seeded generator and
split prefixes, so this file holds nothing a push-protection scanner would flag.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import time
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memagent.validators import scan_secrets, validate
from memagent.validators.secrets import engine as scanner

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
LOWER_DIGITS = string.ascii_lowercase + string.digits
BASE32 = string.ascii_uppercase + "234567"
B64 = ALNUM + "+/"
DJANGO = "abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)"


def rand(alphabet: str, n: int, seed: int) -> str:
    rng = random.Random(seed)
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        # Real tokens mix classes; make sure the seeded sample does too.
        if set(alphabet) & set(string.digits) and not any(c.isdigit() for c in out):
            continue
        return out


def pem(kind: str) -> str:
    body = "\n".join(rand(B64, 64, 10 + i) for i in range(4))
    label = f"{kind} PRIV" + "ATE KEY"
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def jwt() -> str:
    def enc(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return (
        enc({"alg": "HS256", "typ": "JWT"}) + "." + enc({"sub": "42", "name": "Ana"}) + "." + rand(ALNUM + "-_", 43, 77)
    )


def discord() -> str:
    # A Discord bot token starts with the bot's numeric id (a snowflake) in base64.
    snowflake = str(random.Random(60).randrange(10**17, 10**19)).encode()
    first = base64.urlsafe_b64encode(snowflake).decode().rstrip("=")
    return first + "." + rand(ALNUM + "-_", 6, 61) + "." + rand(ALNUM + "-_", 38, 62)


def azure_connection_string() -> str:
    key = base64.b64encode(random.Random(63).randbytes(64)).decode()
    return "DefaultEndpointsProtocol=https;AccountName=acme;Account" + "Key=" + key + ";EndpointSuffix=core.windows.net"


# (what the message must name, how to build the fake credential)
FAKES: list[tuple[str, Callable[[], str]]] = [
    ("a private key block", lambda: pem("RSA")),
    ("a private key block", lambda: pem("OPENSSH")),
    ("a private key block", lambda: pem("EC")),
    ("a private key block", lambda: pem("").replace("BEGIN  ", "BEGIN ").replace("END  ", "END ")),
    (
        "a private key block",
        lambda: (
            '"private_key": "-----BEGIN PRIV'
            + "ATE KEY-----\\n"
            + rand(B64, 64, 5)
            + '\\n-----END PRIVATE KEY-----\\n",'
        ),
    ),
    (
        "a private key block",
        lambda: (
            "-----BEGIN PGP PRIV"
            + "ATE KEY BLOCK-----\n\n"
            + rand(B64, 64, 6)
            + "\n-----END PGP PRIVATE KEY BLOCK-----"
        ),
    ),
    ("an AWS access key id", lambda: "AK" + "IA" + rand(UPPER_DIGITS, 16, 1)),
    ("an AWS access key id", lambda: "AS" + "IA" + rand(UPPER_DIGITS, 16, 2)),
    ("an AWS secret access key", lambda: "aws_secret_access_key = " + rand(B64, 40, 3)),
    ("an AWS secret access key", lambda: '"SecretAccessKey": "' + rand(B64, 40, 4) + '"'),
    ("an Anthropic API key", lambda: "sk-" + "ant-api03-" + rand(ALNUM + "-_", 93, 5) + "AA"),
    ("an OpenAI API key", lambda: "sk-" + "proj-" + rand(ALNUM + "-_", 120, 6)),
    ("an OpenAI API key", lambda: "sk-" + rand(ALNUM, 48, 7)),
    ("a GitHub token", lambda: "gh" + "p_" + rand(ALNUM, 36, 8)),
    ("a GitHub token", lambda: "gh" + "o_" + rand(ALNUM, 36, 9)),
    ("a GitHub token", lambda: "gh" + "s_" + rand(ALNUM, 36, 10)),
    ("a GitHub token", lambda: "gh" + "u_" + rand(ALNUM, 36, 11)),
    ("a GitHub token", lambda: "gh" + "r_" + rand(ALNUM, 36, 12)),
    (
        "a GitHub personal access token",
        lambda: "github" + "_pat_" + rand(ALNUM, 22, 13) + "_" + rand(ALNUM, 59, 14),
    ),
    ("a GitLab personal access token", lambda: "gl" + "pat-" + rand(ALNUM + "-_", 20, 15)),
    (
        "a Slack token",
        lambda: (
            "xo" + "xb-" + rand(string.digits, 11, 16) + "-" + rand(string.digits, 13, 17) + "-" + rand(ALNUM, 24, 18)
        ),
    ),
    (
        "a Slack token",
        lambda: (
            "xo" + "xp-" + rand(string.digits, 11, 19) + "-" + rand(string.digits, 12, 20) + "-" + rand(HEX, 32, 21)
        ),
    ),
    (
        "a Slack webhook URL",
        lambda: (
            "https://hooks.slack.com/"
            + "services/T"
            + rand(UPPER_DIGITS, 8, 22)
            + "/B"
            + rand(UPPER_DIGITS, 10, 23)
            + "/"
            + rand(ALNUM, 24, 24)
        ),
    ),
    ("a Google API key", lambda: "AI" + "za" + rand(ALNUM + "-_", 35, 25)),
    ("a Google OAuth client secret", lambda: "GOC" + "SPX-" + rand(ALNUM + "-_", 28, 26)),
    ("a Stripe live secret key", lambda: "sk" + "_live_" + rand(ALNUM, 24, 27)),
    ("a Stripe live secret key", lambda: "rk" + "_live_" + rand(ALNUM, 24, 28)),
    ("an npm access token", lambda: "np" + "m_" + rand(ALNUM, 36, 29)),
    ("a PyPI API token", lambda: "py" + "pi-AgEIcHlwaS5vcmc" + rand(ALNUM + "-_", 70, 30)),
    ("a Hugging Face token", lambda: "h" + "f_" + rand(ALNUM, 34, 31)),
    (
        "a SendGrid API key",
        lambda: "S" + "G." + rand(ALNUM + "-_", 22, 32) + "." + rand(ALNUM + "-_", 43, 33),
    ),
    ("a DigitalOcean token", lambda: "do" + "p_v1_" + rand(HEX, 64, 34)),
    ("a Shopify access token", lambda: "sh" + "pat_" + rand(HEX, 32, 35)),
    ("a JSON Web Token", jwt),
    (
        "a bearer token in an Authorization header",
        lambda: "Authorization: Bearer " + rand(ALNUM, 40, 36),
    ),
    (
        "a password inside a URL",
        lambda: "postgres://app:" + rand(ALNUM, 18, 37) + "@db.example.com:5432/app",
    ),
    ("an Azure storage or service bus key", azure_connection_string),
    (
        "an Azure storage or service bus key",
        lambda: (
            "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;Shared"
            + "AccessKey="
            + base64.b64encode(random.Random(64).randbytes(32)).decode()
        ),
    ),
    ("a Twilio auth token", lambda: "TWILIO_AUTH" + "_TOKEN=" + rand(HEX, 32, 65)),
    ("a Twilio auth token", lambda: 'twilio_token: "' + rand(HEX, 32, 66) + '"'),
    ("a Telegram bot token", lambda: rand(string.digits, 9, 67) + ":A" + "A" + rand(ALNUM + "-_", 33, 68)),
    ("a Telegram bot token", lambda: "TELEGRAM_BOT=" + rand(string.digits, 10, 69) + ":A" + "A" + rand(ALNUM, 32, 70)),
    (
        "a Telegram bot token",
        lambda: (
            "https://api.telegram.org/bot" + rand(string.digits, 9, 75) + ":A" + "A" + rand(ALNUM, 33, 76) + "/getMe"
        ),
    ),
    ("a Discord bot token", discord),
    # Kinds added for issue 23 (each was missed by an earlier scanner, or is a common format).
    ("an AWS session token", lambda: "aws_session_token = IQoJb3JpZ2lu" + "X2Vj" + rand(B64, 320, 90)),
    ("an AWS session token", lambda: '"SessionToken": "FwoGZXIv' + "YXdzE" + rand(B64, 300, 91) + '"'),
    ("a GitLab token", lambda: "gl" + "rt-" + rand(ALNUM + "-_", 20, 92)),
    (
        "a Slack app-level token",
        lambda: (
            "the token xa"
            + "pp-1-A"
            + rand(UPPER_DIGITS, 10, 93)
            + "-"
            + rand(string.digits, 13, 94)
            + "-"
            + rand(HEX, 64, 95)
            + " in prose"
        ),
    ),
    ("a Stripe webhook secret", lambda: "signing secret wh" + "sec_" + rand(ALNUM, 32, 96) + "; verify"),
    ("a Twilio API key", lambda: "key S" + "K" + rand(HEX, 32, 97) + " for the IVR"),
    ("a Mailgun API key", lambda: "mailgun ke" + "y-" + rand(HEX, 32, 98)),
    (
        "a Discord webhook URL",
        lambda: (
            "https://discord.com/api/" + "webhooks/" + rand(string.digits, 18, 99) + "/" + rand(ALNUM + "-_", 68, 100)
        ),
    ),
    ("an Atlassian API token", lambda: "ATA" + "TT3xFfGF0" + rand(ALNUM + "-_", 183, 101) + "=A1B2C3D4"),
    ("a Notion integration token", lambda: "nt" + "n_" + rand(string.digits, 11, 102) + rand(ALNUM, 35, 103)),
    ("a HashiCorp Vault token", lambda: "vault login hv" + "s." + rand(ALNUM + "-_", 90, 104)),
    (
        "a Terraform Cloud token",
        lambda: 'token = "' + rand(ALNUM, 14, 105) + ".atlas" + "v1." + rand(ALNUM, 67, 106) + '"',
    ),
    ("an age secret key", lambda: "AGE-SECRET" + "-KEY-1" + rand("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 107)),
    ("a Django secret key", lambda: "SECRET_KEY = 'django-" + "insecure-" + rand(DJANGO, 50, 108) + "'"),
    ("a Django secret key", lambda: 'SECRET_KEY = "' + rand(DJANGO, 50, 109) + '"'),
    ("a password inside a URL", lambda: "postgres://billing:Pass" + rand(ALNUM, 12, 110) + "@10.0.3.7:5432/billing"),
    ("a password inside a URL", lambda: "redis://:" + rand(ALNUM, 24, 111) + "@cache:6379/0"),
    ("a password on a command line", lambda: "mysql -u root -p'" + rand(ALNUM, 16, 112) + "' shop"),
    ("a password on a command line", lambda: "mysql -uadmin -p" + rand(ALNUM, 16, 113) + " -h db"),
    ("a password on a command line", lambda: "curl -u admin:" + rand(ALNUM, 18, 114) + " https://ci.example.com"),
    ("a password on a command line", lambda: "sshpass -p '" + rand(ALNUM, 16, 115) + "' ssh root@10.0.0.5"),
    ("a password on a command line", lambda: "docker login --password " + rand(ALNUM, 16, 116) + " registry"),
    ("a password, secret or token assigned in plain text", lambda: "DB_PASS" + "WORD=" + rand(ALNUM, 14, 71)),
    (
        "a password, secret or token assigned in plain text",
        lambda: "export API_" + "TOKEN='" + rand(ALNUM, 30, 72) + "'",
    ),
    ("a password, secret or token assigned in plain text", lambda: "  pass" + "word: " + rand(ALNUM + "!#%", 16, 73)),
    (
        "a password, secret or token assigned in plain text",
        lambda: '{"client_sec' + 'ret": "' + rand(ALNUM, 24, 74) + '"}',
    ),
    # Kinds added for issue 36 (formats users paste beyond the first corpus).
    (
        "a signed URL (Azure SAS)",
        lambda: "https://a.blob.core.windows.net/c/f?sv=2021-08-06&sp=r&si" + "g=" + rand(B64, 43, 120) + "%3D",
    ),
    (
        "a signed URL (AWS or Google Cloud)",
        lambda: "https://b.s3.amazonaws.com/k?X-Amz-Expires=60&X-Amz-Sig" + "nature=" + rand(HEX, 64, 121),
    ),
    (
        "a signed URL (AWS or Google Cloud)",
        lambda: "https://storage.googleapis.com/b/o?X-Goog-Sig" + "nature=" + rand(HEX, 256, 122),
    ),
    ("an Azure AD client secret", lambda: "secret " + rand(ALNUM, 3, 123) + "7Q" + "~" + rand(ALNUM + "_.~-", 34, 124)),
    (
        "an X (Twitter) bearer token",
        lambda: "AAAAAAAAAA" + "AAAAAAAAAAAA" + rand(ALNUM, 20, 125) + "%2B" + rand(ALNUM, 60, 126),
    ),
    ("a Facebook or Square access token", lambda: "E" + "AAG" + rand(ALNUM, 120, 127)),
    ("a Square OAuth token", lambda: "sq0" + "csp-" + rand(ALNUM + "-_", 43, 128)),
    (
        "a Braintree or PayPal access token",
        lambda: "access_token" + "$production$" + rand(HEX, 16, 129) + "$" + rand(HEX, 32, 130),
    ),
    ("an Adyen API key", lambda: "A" + "QE" + rand(ALNUM + "+/", 120, 131)),
    ("a Mailchimp API key", lambda: rand(HEX, 32, 132) + "-us" + "14"),
    ("a Klaviyo private key", lambda: "p" + "k_" + rand(ALNUM, 34, 133)),
    ("a HubSpot private app token", lambda: "pat" + "-na1-" + str(uuid.UUID(int=random.Random(134).getrandbits(128)))),
    ("a HashiCorp Vault token", lambda: "VAULT " + "s." + rand(ALNUM, 24, 135)),
    ("a Doppler token", lambda: "d" + "p.st.dev." + rand(ALNUM, 40, 136)),
    ("a 1Password service account token", lambda: "op" + "s_eyJ" + rand(ALNUM + "-_", 300, 137)),
    (
        "an Infisical token",
        lambda: (
            "s"
            + "t."
            + str(uuid.UUID(int=random.Random(138).getrandbits(128)))
            + "."
            + rand(HEX, 32, 139)
            + "."
            + rand(HEX, 32, 140)
        ),
    ),
    (
        "a private key block",
        lambda: "client-key-data: " + base64.b64encode(pem("EC").encode()).decode(),
    ),
    (
        "a container registry password",
        lambda: '{"au' + 'th": "' + base64.b64encode(b"ci:" + rand(ALNUM, 20, 141).encode()).decode() + '"}',
    ),
    ("a Docker Hub access token", lambda: "dck" + "r_pat_" + rand(ALNUM + "-_", 27, 142)),
    ("a password on a command line", lambda: "docker login -u ci -p " + rand(ALNUM, 20, 143) + " registry.io"),
    ("a Groq API key", lambda: "gs" + "k_" + rand(ALNUM, 52, 144)),
    ("a Perplexity API key", lambda: "ppl" + "x-" + rand(ALNUM, 48, 145)),
    ("a Together AI API key", lambda: "tgp" + "_v1_" + rand(ALNUM + "-_", 43, 146)),
    ("a Fireworks AI API key", lambda: "f" + "w_" + rand(ALNUM, 24, 147)),
    ("a Replicate API token", lambda: "r" + "8_" + rand(ALNUM, 37, 148)),
    ("an xAI API key", lambda: "xa" + "i-" + rand(ALNUM, 80, 149)),
    ("an OpenRouter API key", lambda: "sk" + "-or-v1-" + rand(HEX, 64, 150)),
    ("an API key passed to a client", lambda: "co = cohere.Cl" + "ient('" + rand(ALNUM, 40, 151) + "')"),
    (
        "a password, secret or token assigned in plain text",
        lambda: "export DJANGO_SECRET" + "_KEY='" + rand(DJANGO.upper() + DJANGO, 52, 152) + "'",
    ),
    (
        "a password written in plain text",
        lambda: "the pass" + "word for the staging db is " + rand(ALNUM, 10, 153) + "&3",
    ),
    ("a service access token", lambda: "gl" + "sa_" + rand(ALNUM, 32, 154) + "_" + rand(HEX, 8, 155)),
    (
        "a Firebase Cloud Messaging server key",
        lambda: "AAAA" + rand(ALNUM, 7, 156) + ":APA" + "91b" + rand(ALNUM + "-_", 134, 157),
    ),
    ("a Mapbox secret token", lambda: "s" + "k.eyJ1Ijoi" + rand(ALNUM, 50, 158) + "." + rand(ALNUM, 22, 159)),
    ("a password in a netrc file", lambda: "machine api.acme.io login ops pass" + "word " + rand(HEX, 40, 160)),
    ("a Brevo (Sendinblue) key", lambda: "xkey" + "sib-" + rand(HEX, 62, 301) + "a1-" + rand(ALNUM, 14, 302) + "Q7"),
    ("a JFrog Artifactory API key", lambda: "AK" + "Cp" + rand(ALNUM, 66, 303) + "Ab3"),
    (
        "a Microsoft Teams webhook URL",
        lambda: (
            "https://acme.webhook.office.com/webhookb2/"
            + "12345678-1234-1234-1234-123456789abc@12345678-1234-1234-1234-123456789abc/IncomingWebhook/"
            + rand(HEX, 32, 304)
            + "/12345678-1234-1234-1234-123456789abc/"
            + rand(ALNUM, 45, 305)
        ),
    ),
    ("a Honeycomb API key", lambda: "x-honeycomb-" + "team=" + rand(ALNUM, 19, 306) + "aB3"),
    ("an API key in an HTTP header", lambda: "curl -H 'X-JFrog-Art-Api: " + rand(ALNUM, 40, 307) + "aB3'"),
    ("an API key passed to a client", lambda: 'new AzureKeyCredential("' + rand(HEX, 30, 308) + 'a1")'),
    ("an API key passed to a client", lambda: "algoliasearch('HWZ14UHVUQ', '" + rand(HEX, 30, 309) + "a1')"),
    ("a password on a command line", lambda: "curl -u " + rand(ALNUM, 18, 310) + "aB3:X https://x.example.net"),
    ("a password on a command line", lambda: "redis-cli -h c1 -a Q" + rand(ALNUM, 14, 311) + "4b"),
    ("a password on a command line", lambda: "net use Z: \\\\fs\\f /user:ACME\\jd Q" + rand(ALNUM, 14, 312) + "4b"),
    ("a password inside a URL", lambda: "shop:Q" + rand(ALNUM, 14, 313) + "4b@tcp(10.0.4.12:3306)/shop"),
    ("a password written in plain text", lambda: "<pass" + "word>R?c5" + rand(ALNUM, 10, 314) + "</password>"),
    ("a password written in plain text", lambda: "pass_phrase=*hS_.g=4" + rand(ALNUM, 8, 315)),
    # the contexts of the fifth held-out set
    (
        "a 1Password secret key",
        lambda: "A3-" + "-".join(rand(UPPER_DIGITS, n, 401 + i) for i, n in enumerate((6, 6, 5, 5, 5, 5))),
    ),
    ("a webhook URL", lambda: "https://chat.acme.io/hooks/" + rand(LOWER_DIGITS, 26, 410)),
    ("a token in a URL", lambda: "https://oapi.acme.cn/robot/send?access_" + "token=" + rand(HEX, 64, 411)),
    ("a session cookie", lambda: "Cookie: _app_session=" + rand(ALNUM, 32, 412) + "; lang=en"),
    (
        "a private key (JWK or VAPID)",
        lambda: '{"kty": "EC", "crv": "P-256", "d": "' + rand(ALNUM + "-_", 43, 413) + '"}',
    ),
    ("a TOTP seed", lambda: "otpauth://totp/Acme:ana?sec" + "ret=" + rand(BASE32, 32, 414) + "&issuer=Acme"),
    (
        "2FA recovery codes",
        lambda: "recovery codes:\n" + "\n".join(rand(HEX, 5, 420 + i) + "-" + rand(HEX, 5, 430 + i) for i in range(6)),
    ),
    ("a registry credential", lambda: 'BUNDLE_GEMS__ACME__IO: "' + rand(HEX, 8, 415) + ":" + rand(HEX, 8, 416) + '"'),
    (
        "a bearer token in an Authorization header",
        lambda: "Authorization: GenieKey " + str(uuid.UUID(int=random.Random(417).getrandbits(128))),
    ),
    ("a password on a command line", lambda: "ldapsearch -x -D cn=admin -w Q" + rand(ALNUM, 12, 418) + "4b!"),
    ("a password on a command line", lambda: "smbclient //fs/share -U acme/ana%Q" + rand(ALNUM, 12, 419) + "4b"),
    (
        "a password written in plain text",
        lambda: "CREATE USER 'ro'@'%' IDENTI" + "FIED BY 'Q" + rand(ALNUM, 12, 440) + "4b!';",
    ),
    ("a password written in plain text", lambda: "define('DB_PASS" + "WORD', 'Q" + rand(ALNUM, 12, 441) + "4b!');"),
    ("a password written in plain text", lambda: "das WLAN-Passwort lautet Q" + rand(ALNUM, 12, 442) + "4b!"),
    # the sixth held-out set's misses
    ("an Airtable personal access token", lambda: "pa" + "t" + rand(ALNUM, 14, 443) + "." + rand(HEX, 64, 444)),
    (
        "an Authress service key",
        lambda: "s" + "c_" + rand(ALNUM, 22, 445) + ".a7Bc.acc_" + rand(LOWER_DIGITS, 14, 446) + "."
        + rand(B64, 64, 447),
    ),
    ("a Flutterwave secret key", lambda: "FLWSE" + "CK_TEST-" + rand(HEX, 32, 448) + "-X"),
    ("a Fly deploy token", lambda: "FlyV1 f" + "m2_" + rand(B64, 80, 449)),
    ("a SettleMint token", lambda: "s" + "m_pat_" + rand(ALNUM, 16, 450)),
    ("a password in a Bundler config", lambda: "bundle config --global gems.acme.io ci:" + rand(ALNUM, 16, 451)),
    ("a password in a Bundler config", lambda: "BUNDLE_GEMS__ACME__IO=ci:" + rand(ALNUM, 16, 452)),
    (
        "a password, secret or token assigned in plain text",
        lambda: '#define IO_K' + 'EY "q' + rand(ALNUM, 24, 453) + '"',
    ),
    ("a Django secret key", lambda: "SECRET_K" + "EY=" + rand(DJANGO, 50, 454)),
    # the seventh held-out set's misses
    ("a SonarQube token", lambda: "sq" + "p_" + rand(HEX, 40, 457)),
    ("an Octopus Deploy API key", lambda: "AP" + "I-" + rand(string.ascii_uppercase + string.digits, 26, 458)),
    ("a Twitter access token", lambda: "1855207581211" + "85945-" + rand(ALNUM, 40, 459)),
    ("a Facebook app access token", lambda: "access_token=6761805112" + "27927|" + rand(HEX, 32, 460)),
    # the eighth held-out set's misses
    ("a GitLab feature flag client token", lambda: "glff" + "ct-" + rand(ALNUM, 20, 463)),
    ("a Prefect API key", lambda: "pn" + "u_" + rand(ALNUM, 36, 464)),
    ("a PKCS#12 bundle", lambda: "MIIKWgIBAzCCCiAGCSqGSIb3DQEHAaCC" + rand(B64, 80, 465)),
    ("an API key passed to a client", lambda: 'meraki.DashboardAPI("' + rand(HEX, 40, 466) + '")'),
    (
        "a bearer token in an Authorization header",
        lambda: "Authorization: Bearer " + str(uuid.UUID(int=random.Random(467).getrandbits(128))),
    ),
    ("a token in a URL", lambda: "https://a.io/c?hapi" + "key=" + rand(HEX, 8, 468) + "-" + rand(HEX, 24, 469)),
    ("a password on a command line", lambda: "dotnet nuget add source n -u build -p -" + rand(ALNUM, 14, 470)),
    (
        "a password, secret or token assigned in plain text",
        lambda: "'secret_" + "key' => \"sk_" + rand(ALNUM, 20, 471) + '!#"',
    ),
    ("a password on a command line", lambda: "octo create-release --apiKey " + rand(ALNUM, 24, 461)),
    (
        "a password, secret or token assigned in plain text",
        lambda: "use the algolia write k" + "ey " + rand(HEX, 32, 462) + " for the reindex",
    ),
    ("a password on a command line", lambda: "redis-cli -h h -a -" + rand(ALNUM, 14, 455) + " INFO"),
    (
        "a bearer token in an Authorization header",
        lambda: 'proxy_set_header Authorization "Basic '
        + base64.b64encode(rand(ALNUM, 24, 456).encode()).decode() + '";',
    ),
]


@pytest.mark.parametrize(("what", "make"), FAKES, ids=[f"{w}-{i}" for i, (w, _) in enumerate(FAKES)])
def test_fake_credential_is_caught_on_its_line_and_not_echoed(what: str, make: Callable[[], str]) -> None:
    secret = make()
    content = f"# Deploy notes\n\nThe staging box uses this:\n  {secret}  \nThat is all.\n"
    problems = scan_secrets(content)
    assert any(p.location == "line 4" and what in p.message for p in problems), problems
    for p in problems:
        assert p.kind == "secret"
        assert p.location == "line 4"
        text = str(p)
        # Windows with a digit come from the random body, not from context words
        # such as "Authorization" that the message may legitimately name.
        for i in range(len(secret) - 7):
            window = secret[i : i + 8]
            if any(c.isdigit() for c in window):
                assert window not in text, "the message echoes part of the secret"
        assert "remove it" in p.message and "environment variable" in p.message


def test_every_fake_is_refused_by_validate_on_any_path() -> None:
    for _, make in FAKES:
        for path in ("/knowledge/x.md", "/AGENTS.md", "/people/ana.md"):
            kinds = [p.kind for p in validate(path, "intro\n" + make() + "\n")]
            assert "secret" in kinds, (path, make())


def test_several_secrets_are_each_reported_in_line_order() -> None:
    aws = "AK" + "IA" + rand(UPPER_DIGITS, 16, 40)
    gh = "gh" + "p_" + rand(ALNUM, 36, 41)
    content = f"a\n{gh}\nb\nc\n{aws} and again {aws}\n"
    problems = scan_secrets(content)
    assert [(p.location, p.message.split(".")[0]) for p in problems] == [
        ("line 2", "contains a GitHub token"),
        ("line 5", "contains an AWS access key id"),
    ]


# --- no false alarms -------------------------------------------------------------


def _digests() -> list[str]:
    out = []
    for i in range(150):
        data = f"document {i}".encode()
        out += [
            hashlib.sha1(data).hexdigest(),
            hashlib.sha256(data).hexdigest(),
            hashlib.sha512(data).hexdigest(),
            hashlib.sha256(data).hexdigest().upper(),
            base64.b64encode(hashlib.sha256(data).digest()).decode(),
            base64.urlsafe_b64encode(hashlib.sha384(data).digest()).decode(),
            "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
            "sha256:" + hashlib.sha256(data).hexdigest(),
            hashlib.md5(data).hexdigest(),
            hashlib.sha1(data).hexdigest()[:7],
        ]
    return out


def _uuids() -> list[str]:
    rng = random.Random(99)
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(300)]
    return ids + [i.upper() for i in ids[:50]] + [i.replace("-", "") for i in ids[:50]]


PROSE = """\
# Weekly sync — 2025-03-14

Attendees: Priya, Tomás, Ana. We agreed to ship the risk-assessment-2024 report by Friday;
the task-management board moves to the new desk-booking space. Ask-me-anything session
on Thursday. Skip-level meetings resume next month.

## Decisions
- Keep API keys in the vault; never paste them into chat or notes.
- AWS access key ids begin with AKIA, and GitHub tokens look like ghp_ followed by letters.
- OpenAI keys start with sk- or sk-proj-; Anthropic keys start with sk-ant-.
- Slack bot tokens start with xoxb-; webhooks live under hooks.slack.com.
- Rotate the password every 90 days. The token expires after 3600 seconds.

| variable | where it is set |
|---|---|
| `OPENAI_API_KEY` | CI secrets |
| `GITHUB_TOKEN` | provided by Actions |
| `AWS_SECRET_ACCESS_KEY` | the vault |

Links: https://github.com/example/alpha/commit/3f786850e387550fdab836ed7e6dc881de23001b,
git@github.com:example/alpha.git, mailto:ana@example.com, https://example.com/a?page=2&sort=asc.
Café ☕ — naïve résumé, 日本語のテキスト, emoji 🚀.
"""

CODE = """\
```python
import os, getpass
import anthropic

api_key = os.environ["OPENAI_API_KEY"]
client = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY"))
token = os.getenv("GITHUB_TOKEN")
aws_secret_access_key = os.environ["AWS_SECRET_ACCESS_KEY"]
password = getpass.getpass("Password: ")
secret_key = settings.SECRET_KEY
headers = {"Authorization": f"Bearer {token}"}
DATABASE_URL = "postgresql+psycopg://user:password@localhost:5432/app"
REDIS_URL = f"redis://:{os.environ['REDIS_PASSWORD']}@cache:6379/0"
sk_learn_model = "sklearn.linear_model.LogisticRegression"
```

```javascript
const token = process.env.SLACK_BOT_TOKEN;
const res = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
const apiKey = process.env["STRIPE_SECRET_KEY"] ?? "";
```

```bash
export GITHUB_TOKEN="$(gh auth token)"
curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/user
curl -H "Authorization: Bearer YOUR_API_TOKEN_HERE" https://api.example.com
psql "postgres://user:${PGPASSWORD}@db:5432/app"
ssh-keygen -t ed25519 -C "ana@example.com"
```

```json
{"api_key": "${OPENAI_API_KEY}", "env": {"TOKEN": "${DOCS_TOKEN:-}"}}
```

```yaml
token: !env GITHUB_TOKEN
image: ghcr.io/example/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
```
"""

PLACEHOLDERS = "\n".join(
    [
        # AWS's own documentation examples (split so the file holds no whole key).
        "aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
        "OPENAI_API_KEY=sk-" + "x" * 48,
        "GITHUB_TOKEN=ghp_" + "x" * 36,
        "SLACK_WEBHOOK=https://hooks.slack.com/services/T00000000/B00000000/" + "X" * 24,
        "SLACK_BOT_TOKEN=xoxb-your-bot-token-here",
        "STRIPE_KEY=sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
        "-----BEGIN PRIV" + "ATE KEY-----\n...\n-----END PRIVATE KEY-----",
        "-----BEGIN PUBLIC KEY-----\n" + rand(B64, 64, 50) + "\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\n" + rand(B64, 64, 51) + "\n-----END CERTIFICATE-----",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + rand(B64, 43, 52) + " ana@laptop",
        "https://user:password@example.com/ and https://bob:${BOB_PASSWORD}@example.com/",
        "data:image/png;base64," + rand(B64, 600, 53),
    ]
)


@pytest.mark.parametrize("text", [PROSE, CODE, PLACEHOLDERS], ids=["prose", "code", "placeholders"])
def test_ordinary_content_raises_no_alarm(text: str) -> None:
    assert scan_secrets(text) == []


def _b64url_json(obj: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


# Well-known documentation examples and trivial values, assembled from parts so this file
# holds none of them whole: jwt.io's default token, GitHub's example token, Telegram's example
# bot token, Azurite's published emulator key, and assignments of placeholders or references.
DOC_EXAMPLES = {
    "jwt.io": _b64url_json({"alg": "HS256", "typ": "JWT"})
    + "."
    + _b64url_json({"sub": "1234567890", "name": "John Doe", "iat": 1516239022})
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6"
    + "yJV_adQssw5c",
    "jwt.io-rs256": _b64url_json({"alg": "RS256", "typ": "JWT"})
    + "."
    + _b64url_json({"sub": "1234567890", "name": "John Doe", "admin": True, "iat": 1516239022})
    + "."
    + rand(ALNUM + "-_", 86, 80),
    "postgres-postgres": "DATABASE_URL=postgresql://postgres:postgres@localhost:5432/app",
    "github-docs": "GITHUB_TOKEN=gh" + "p_16C7e42F292c6912" + "E7710c838347Ae178B4a",
    "github-docs-oauth": "gh" + "o_16C7e42F292c6912" + "E7710c838347Ae178B4a",
    "telegram-docs": "https://api.telegram.org/bot110201543:AA" + "HdqTcvCH1vGWJxfSeofSA" + "s0K5PALDsaw/getMe",
    "azurite": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlC"
    + "DXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;",
    "changeme": "DB_PASSWORD=changeme",
    "angle": "DB_PASSWORD=<password>",
    "reference": "DB_PASSWORD=${DB_PASSWORD}",
    "xxx": "API_TOKEN=xxxxxxxxxxxxxxxx",
    "template": 'password: "{{ vault_db_password }}"',
    "code": "SECRET_KEY = settings.SECRET_KEY\napi_key = config.get('api_key')",
    "prose": "password: at least 12 characters, rotated every 90 days",
    "numbers": "MAX_TOKENS=4096\ntoken_ttl: 86400000\nAUTH_TIMEOUT=30s",
    "word": "POSTGRES_PASSWORD=postgres",
    "your": "TWILIO_AUTH_TOKEN=your_auth_token",
}


@pytest.mark.parametrize("name", sorted(DOC_EXAMPLES))
def test_documentation_examples_and_trivial_values_raise_no_alarm(name: str) -> None:
    assert scan_secrets(DOC_EXAMPLES[name]) == []
    assert_same_as_reference(DOC_EXAMPLES[name])


def test_a_real_password_in_a_url_is_still_caught_when_the_user_differs() -> None:
    pw = rand(ALNUM, 16, 81)
    assert scan_secrets(f"postgresql://postgres:{pw}@localhost/app")
    assert scan_secrets("postgresql://app:postgres@localhost/app")  # a user name is no placeholder


def test_a_specific_kind_and_the_generic_rule_give_one_problem_per_line() -> None:
    content = "x\nTWILIO_AUTH_TOKEN=" + rand(HEX, 32, 82) + "\naws_secret_access_key = " + rand(B64, 40, 83) + "\n"
    assert [(p.location, p.message.split(".")[0]) for p in scan_secrets(content)] == [
        ("line 2", "contains a Twilio auth token"),
        ("line 3", "contains an AWS secret access key"),
    ]


def test_hashes_and_shas_raise_no_alarm() -> None:
    assert scan_secrets("\n".join(_digests())) == []
    assert scan_secrets(" ".join(f"`{d}`" for d in _digests())) == []


def test_uuids_raise_no_alarm() -> None:
    assert scan_secrets("\n".join(_uuids())) == []


def test_valid_fixtures_raise_no_alarm() -> None:
    from pathlib import Path

    root = Path(__file__).parent / "fixtures" / "validators" / "valid"
    for file in root.rglob("*"):
        if file.is_file():
            assert scan_secrets(file.read_text(encoding="utf-8")) == [], file


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=64))
def test_any_digest_of_any_data_raises_no_alarm(data: bytes) -> None:
    text = " ".join(
        [
            hashlib.sha256(data).hexdigest(),
            hashlib.sha1(data).hexdigest(),
            base64.b64encode(hashlib.sha256(data).digest()).decode(),
            str(uuid.UUID(bytes=hashlib.md5(data).digest())),
        ]
    )
    assert scan_secrets(text) == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_scanner_never_crashes_and_only_reports_lines(text: str) -> None:
    for p in scan_secrets(text):
        assert p.location.startswith("line ")
        assert 1 <= int(p.location.split()[1]) <= text.count("\n") + 1


@pytest.mark.parametrize(
    "unit",
    [
        *("a-", "a.", "sk-", "eyJ-", "x://a:", "glpat-", "xoxb-1", "-----BEGIN A ", "hf_a", "1:AA", "M.", "token"),
        *("token=", "a_password=a1", "AccountKey=a", "twilio_auth", "twilio_token=", "api", "pass_", "9" * 9 + ":AA"),
        *("mysql -p", "mysql ", "curl -u a:", "curl ", "sshpass -p ", "--password=", "--a-", "--password '"),
        *("x://:", "hvs.", "whsec_", "a.atlasv1.", "django-insecure-", "SECRET_KEY='", "key-", "SK"),
        # the rules of issue 36
        *("pass ", "pw ", "password: ", "password is a", " login -p ", "Client('a", "s.", "st.", "A", "?sig=a"),
        *("a1Q~", "-us", "pk_", "dp.", "LS0tLS1CRUdJTi", '"auth": "', "machine a password ", "aa:APA91b", "sq0"),
        *("token: 'a", "EAA", "AQE"),
        # the context rules of the third held-out set
        *("| password |\n|---|\n", "password|", "X('", "log in (a / ", "key 1 (a): ", "authorize a b "),
        *("X-Auth-Key: a", "eyJhdXRo", "key: base64:", "secret=Bearer ", "credential: "),
        # the fifth held-out set's contexts
        *("cookie: ", "-b ", "/hooks/", "?token=", '"d": "', "otpauth://a/", "recovery codes\n", "-u a -p "),
        *("ldapsearch ", "htpasswd -b ", "GetBytes($", "`a` / `", "пароль ", "key', '", "password(a, '"),
        *("ConvertTo-SecureString $a -AsPlainText\n", "$a = 'x'\n", "-U a%", "IDENTIFIED BY '", "requirepass "),
        *('"kty" "d": "', "setVapidDetails(", "BUNDLE_A__", "sqlplus a/", "Signature=", "a+api://"),
        # the sixth to eighth held-out sets' contexts (a value then a comment, many on one line)
        *("token: 'abcdefgh', // ", "apiKey: 'a1b2c3d4e5', ", "password=abcdefgh1 #", "#define A_KEY ", "BUNDLE_A_"),
        *("bundle config a.b ", "login is a ", "-u a -p -", "redis-cli -a -", "API-", "secret_key' => \""),
    ],
)
def test_scanning_crafted_input_stays_linear(unit: str) -> None:
    # 300 KB of a repeated prefix: a quadratic regex takes minutes of CPU here, linear ones
    # well under a second. CPU time of this thread, not the clock: other processes on a busy
    # machine (CI runs the suite on 2 loaded cores) slow the clock, not the work.
    text = unit * (300_000 // len(unit))
    start = time.thread_time()
    scan_secrets(text)
    assert time.thread_time() - start < 5


# --- the fast scan finds exactly what the plain finditer scan finds ----------------
#
# scan_secrets tries each rule's regex only where one of its anchors occurs;
# _scan_reference runs every regex over the whole text. Both must agree on every
# match of every rule (spans, not just the reported lines), on any text.


def assert_same_as_reference(text: str) -> None:
    candidates = scanner._Candidates(text)
    # Searched only for the anchors RE2's sets say occur (None: none occurs).
    narrowed = scanner._candidates(text)
    # The anchor layer finds every occurrence of every literal, overlapping ones too...
    folded = scanner._fold(text)
    for is_folded, literal in scanner._group_of():
        target = folded if is_folded else text
        expected = [m.start() for m in re.finditer(f"(?={re.escape(literal)})", target)]
        assert candidates._occurrences(is_folded, literal) == expected, literal
        assert (narrowed._occurrences(is_folded, literal) if narrowed else []) == expected, literal
    for key, finder in scanner._followed_finders().items():
        expected = [m.start() for m in finder.finditer(folded if key[0] else text)]
        assert (narrowed._occurrences(*key) if narrowed else []) == expected == candidates._occurrences(*key), key
    # Only the rules one of whose anchors occurs are tried; every other has no start.
    tried = set(map(id, narrowed.rules())) if narrowed else set()
    assert all(id(rule) in tried for rule in scanner._RULES if candidates.starts(rule))
    # ...and the rules, tried only there, match exactly where finditer does.
    for rule in scanner._RULES:
        fast = [m.span() for m in scanner._fast_matches(rule, text, candidates.starts(rule))]
        slow = [m.span() for m in rule.regex.finditer(text)]
        assert fast == slow, rule.what
    assert scan_secrets(text) == scanner._scan_reference(text)
    # The RE2 pre-check that skips the scan may only say "no anchor" when there is none.
    if scanner._no_anchor(text):
        assert not any(candidates.starts(rule) for rule in scanner._RULES)


def test_the_anchor_pre_check_sees_case_folded_and_odd_text() -> None:
    body = "Zq8" * 12
    for text in (
        f"SECRET={body}",
        f"\u017fecret = '{body}'",
        f"PASSWORD: {body}",
        f"\u0130ndex token={body}",
        f"TOKEN=\u212a{body}",
        f"api_key=\ud800{body}",
        "plain prose about the weather\n" * 50,
    ):
        assert_same_as_reference(text)
    assert scanner._no_anchor("plain prose about the weather")
    assert not scanner._no_anchor("the ſecret handshake")  # (?i) matches U+017F as s: let the scan decide
    assert not scanner._no_anchor("a lone \ud800 surrogate")  # RE2 cannot encode it: the full scan runs


# Text that sits right next to the anchors: near-misses, neighbours that make or
# break a \b or a look-behind, case variants for the (?i) rules, the non-ASCII
# letters (?i) folds to ASCII, and anchors repeated so that occurrences overlap.
NEAR_MISSES: list[str] = [
    # provider prefixes, alone, repeated so occurrences overlap, or inside a word
    *("sk-", "ask-", "desk-", "sk-ant-", "sk-proj-", "sk_live_", "rk_live_", "AKIAKIA", "ASIA", "AIza", "gh"),
    *("ghp_", "github_pat_", "glpat-", "xox", "xoxb-", "xoxox", "npm_", "hf_", "SG.", "do", "dop_v1_", "shpat_"),
    *("eyJ", "eyJhbGciOi.eyJzdWIi.", "-----BEGIN ", "-----BEGIN RSA PRIV" + "ATE KEY-----", "PuTTY-User-Key-File-2:"),
    # URLs: schemes of every length around the 31-character limit, credentials
    *("https://hooks.slack.com/services/", "://", "http://", "postgres://", "a+b.c-d://", "x" * 40 + "://"),
    *("q" * 30 + "://", "q" * 31 + "://", "user:pa55w0rd@", "@host", ":", "@", "/", "=", ": ", '"', "'"),
    *(scheme + "://u:pa55w0rd@h" for scheme in ("q", "q" * 30, "q" * 31, "q" * 32, "Q" + "q" * 30, "-q")),
    *("postgres://postgres:postgres@localhost", "://a1:a1@h", "://App:aPP@h"),
    # the newer rules: anchors alone, digits around ":AA", dots after base64url runs, name words
    *(
        ":AA",
        "/bot",
        "/bot123456789:AA",
        "1234567:AA",
        "12345678901:AA",
        "AccountKey=",
        "accountkey",
        "SharedAccessKey = ",
        "twilio",
        "TWILIO_",
    ),
    *(
        "MTIz.",
        "NTk4" * 6 + ".",
        "abcdef.",
        "..",
        "M" * 30 + ".",
        "password",
        "PASSWD=",
        "_token: ",
        "api_key=",
        "apikey",
    ),
    *("secret_key_base=", "access_key:", "auth", "private", "credentials=", "=", "a1b2c3d4e5f6", "x" * 41 + "token="),
    *("pa\u017f\u017fword=", "to\u212aen=", "${X}", "changeme", "<password>"),
    *("xapp-", "whsec_", "SKa", "key-", "hvs.", ".atlasv1.", "django-insecure-", "mysql", "curl", "sshpass", "--"),
    *("-p", "-u", "nextPageToken=", "next_page_token: ", "redis://:", "IQoJb3JpZ2lu" + "X2Vj", "ATATT3", "ntn_"),
    # the (?i) rules: any case, and the non-ASCII letters (?i) takes for s, i and k
    *("aws", "AWS", "Aws_Secret_Access_Key", "secret", "SECRET_ACCESS_KEY", "secret access key", "aws-secret-key"),
    *('"SecretAccessKey": ', "authorization", "AUTHORIZATION: ", "Authorization=", "Bearer ", "token ", "basic "),
    *("\u017fecret", "author\u0130zation", "author\u0131zation", "aw\u017f", "\u212a", "\u0130", "\u0131"),
    # other characters that make or break a \b or a look-behind
    *("É", "日本", "🚀", "\n", " ", "\t", "_", "-", ".", "0", "A", "z", "EXAMPLE"),
]
TOKEN_ALPHABETS = [ALNUM, ALNUM + "-_", HEX, UPPER_DIGITS, B64, string.digits]
# Every fixed start the rules know, each to be followed by a random body: written
# out here rather than read from the scanner, so an anchor it forgets shows up.
PREFIXES = [
    *("AKIA", "ASIA", "ABIA", "ACCA", "sk-", "sk-ant-api03-", "sk-proj-", "sk-svcacct-", "sk-admin-", "glpat-"),
    *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AIza", "GOCSPX-", "sk_live_", "rk_live_", "npm_"),
    *("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "py" + "pi-AgEIcHlwaS5vcmc", "hf_", "SG."),
    *("doo_v1_", "dop_v1_", "dor_v1_", "shpat_", "shpca_", "shppa_", "shpss_", "eyJ", "PuTTY-User-Key-File-"),
    *("https://hooks.slack.com/services/", "https://hooks.slack.com/workflows/", "https://hooks.slack.com/triggers/"),
    *("aws_secret_access_key=", "secret_access_key: ", "Authorization: Bearer ", "authorization=token "),
    *("AccountKey=", "SharedAccessKey=", "TWILIO_AUTH_TOKEN=", "twilio.token: ", "123456789:AA", "9876543210:AA"),
    *("DB_PASSWORD=", "password: ", '"api_key": "', "export GITHUB_TOKEN=", "MTIzNDU2Nzg5MDEyMzQ1Njc4.abcdef."),
    *("IQoJb3JpZ2lu" + "X2Vj", "FwoGZXIv" + "YXdzE", "glrt-", "gldt-", "glptt-", "xapp-1-A", "whsec_", "SK", "key-"),
    *("https://discord.com/api/webhooks/123456789012345678/", "ATATT3", "ntn_12345678901", "hvs.", "hvb."),
    *("abcdefghijklmn.atlasv1.", "AGE-SECRET-KEY-1", "django-insecure-", "SECRET_KEY = '", "redis://:"),
    *("mysql -p", "mysql -u root -p'", "curl -u a:", "curl --user a:'", "sshpass -p ", "--password ", "--api-key="),
    *("?sv=1&sig=", "X-Amz-Signature=", "X-Goog-Signature=", "X-Amz-Security-Token=", "abc1Q~", "A" * 22, "EAAB"),
    *("sq0atp-", "sq0csp-", "access_token$production$", "AQE", "-us1", "pk_", "pat-na1-", "s.", "b.", "dp.st."),
    *("ops_eyJ", "st.", "LS0tLS1CRUdJTi", '"auth": "', "dckr_pat_", "docker login -p ", "gsk_", "pplx-", "tgp_v1_"),
    *("fw_", "r8_", "xai-", "sk-or-v1-", "Client('", "SECRET_KEY='", "password is ", "pass: "),
    *("glsa_", "lin_api_", "NRAK-", "pul-", "CFPAT-", "AAAAabcdefg:APA91b", "sk.eyJ", "machine h password "),
    *("xkeysib-", "AKCp", "x-honeycomb-team=", "-H 'X-Api-Key: ", 'KeyCredential("', "algoliasearch('ab12cd34', '"),
    *("redis-cli -a ", "net use z: /user:a ", "u:p@tcp(", "<password>", "pass_phrase="),
    # the fifth held-out set's contexts
    *("y0_", "ico-", "shippo_live_", "rdme_", "md-", "live_", "access-production-", "sdk-", "A3-", "APIabcdefghijkl: "),
    *("https://a.io/hooks/", "https://a.io/hooks/catch/123456/", "?access_token=", "&code=", "Cookie: session="),
    *('"kty": "EC", "d": "', "otpauth://totp/a?secret=", "?Key-Pair-Id=K&Signature=", "postmark+api://"),
    *("IDENTIFIED BY '", "requirepass ", "-storepass ", "--passphrase '", "-U a%", "-u a -p ", "ldapsearch -w "),
    *("htpasswd -b f u ", "sqlplus u/", "define('DB_PASSWORD', '", 'PasswordAuthentication("u", "', 'auth=("u", "'),
    *("PDO('a', 'b', '", 'key = []byte("', "ConvertTo-SecureString '", 'psk="', "BUNDLE_A__B: ", "`admin` / `"),
    *("Passwort ", "contraseña es ", "пароль ", "密码 ", 'password = "a ', "Authorization: GenieKey "),
    # the sixth held-out set's contexts
    *("pat", "sc_", ".acc_", "FLWSECK", "FlyV1 ", "fm2_", "sm_pat_", "bundle config ", "BUNDLE_X__IO="),
    *("#define A_KEY ", "SECRET_KEY=", "redis-cli -a -", "docker login -u a -p -", 'Authorization "Basic '),
    *("shpat_•••", "publicAccessToken: '"),
    # the seventh's
    *("sqp_", "API-", "185520758121185945-", "676180511227927|", "--apiKey ", "write key ", "admin key "),
    *("login is a / ", "POSTGRES_PASSWORD: ~", "Password123!", "apiKey: 'a1b2', // public search key"),
    # the eighth's
    *("glffct-", "pnu_", "MIIKWgIBAzCCCiAGCSqGSIb3DQEHAaCC", 'DashboardAPI("', "Bearer 00000000-", "?hapikey="),
    *("-u build -p -", "' => \"", '"password": "password123"', "ATCTT3"),
]


def generated_document(seed: int) -> str:
    """Prose with planted fakes, their near-misses and mutated copies, built at run time."""
    rng = random.Random(seed)
    words = PROSE.split() + CODE.split()
    parts: list[str] = []
    for _ in range(rng.randint(50, 400)):
        roll = rng.random()
        if roll < 0.55:
            parts.append(rng.choice(words))
        elif roll < 0.75:
            parts.append(rng.choice(NEAR_MISSES))
        elif roll < 0.85:
            alphabet = rng.choice(TOKEN_ALPHABETS)
            # Mostly right around the lengths the rules ask for, where an off-by-one would show.
            length = rng.choice([16, 20, 22, 28, 32, 34, 35, 36, 40, 43, 50, 64]) + rng.choice([-1, 0, 0, 0, 1])
            length = length if rng.random() < 0.8 else rng.randint(1, 80)
            body = "".join(rng.choice(alphabet) for _ in range(length))
            parts.append(rng.choice(PREFIXES) + body if rng.random() < 0.7 else body)
        else:
            fake = rng.choice(FAKES)[1]()
            cut = rng.random()
            if cut < 0.2:  # truncated: too short for its rule
                fake = fake[: rng.randint(0, len(fake))]
            elif cut < 0.3:  # case flipped: only the (?i) rules still match
                fake = fake.swapcase() if rng.random() < 0.5 else fake.lower()
            elif cut < 0.4:  # a line break inside
                at = rng.randint(0, len(fake))
                fake = fake[:at] + "\n" + fake[at:]
            parts.append(fake)
        # Sometimes glue the next part on, so a \b or a look-behind sees a word character.
        parts.append(rng.choice([" ", " ", "\n", "", "_", "-", ".", "x", "é", "=", ": "]))
    return "".join(parts)


def test_fast_scan_agrees_with_reference_on_the_samples() -> None:
    from pathlib import Path

    texts = [PROSE, CODE, PLACEHOLDERS, "\n".join(_digests()), "\n".join(_uuids()), ""]
    texts += [f"x\n  {make()}  \ny" for _, make in FAKES]
    texts += [make() for _, make in FAKES]  # anchors at offset 0 and matches running to the end
    fixtures = Path(__file__).parent / "fixtures" / "validators"
    texts += [f.read_text(encoding="utf-8") for f in sorted(fixtures.rglob("*")) if f.is_file()]
    for text in texts:
        assert_same_as_reference(text)


def test_fast_scan_agrees_with_reference_on_every_prefix_and_body() -> None:
    # Each prefix with bodies of each alphabet at each length a rule asks for, +-1.
    rng = random.Random(7)
    lengths = [n + d for n in (16, 20, 22, 28, 32, 34, 35, 36, 40, 43, 50, 64) for d in (-1, 0, 1)]
    for prefix in PREFIXES:
        bodies = ["".join(rng.choice(a) for _ in range(n)) for a in TOKEN_ALPHABETS for n in lengths]
        assert_same_as_reference(" ".join(prefix + body for body in bodies))


def test_fast_scan_agrees_with_reference_on_a_generated_corpus() -> None:
    kinds: set[str] = set()
    for seed in range(150):
        text = generated_document(seed)
        assert_same_as_reference(text)
        kinds |= {p.message.split(".")[0] for p in scan_secrets(text)}
    # The corpus must make every rule find something, not only agree on nothing.
    assert kinds == {f"contains {rule.what}" for rule in scanner._RULES}


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(NEAR_MISSES + ["AKIA" + "Q" * 16, "k" * 34, "a1B2" * 12]), max_size=40))
def test_fast_scan_agrees_with_reference_on_any_mix_of_near_misses(parts: list[str]) -> None:
    assert_same_as_reference("".join(parts))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_fast_scan_agrees_with_reference_on_any_text(text: str) -> None:
    assert_same_as_reference(text)


def test_fold_keeps_offsets_and_folds_exactly_what_ignorecase_matches() -> None:
    # Every code point once (lone surrogates too): the folded text must have the same
    # length, and each ASCII letter must sit exactly where (?i) matches it in the original.
    every = "".join(map(chr, range(0x110000)))
    folded = scanner._fold(every)
    assert len(folded) == len(every)
    for letter in string.ascii_lowercase:
        expected = [m.start() for m in re.finditer("(?i)" + letter, every)]
        assert [m.start() for m in re.finditer(letter, folded)] == expected, letter


# --- issue 36: the .env quoting case, the echoed path --------------------------------------------

# startproject's alphabet with upper case added, at lengths other than its 50, and a tail of
# "_0" (once taken for a placeholder's run of zeros): each was missed in a quoted .env value.
ENV_VALUES = [
    rand(DJANGO, 50, 200)[:48] + "_0",
    rand(DJANGO + "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 50, 201),
    rand(DJANGO, 64, 202),
    "k3#Lm9!pQ2$vX8&wR5",
    "h^z13$qr(s_wd65@gnj7a=xs7t05$w7q8!x@=ah%n(2b1ye9+2",
]


@pytest.mark.parametrize("value", ENV_VALUES)
@pytest.mark.parametrize("quote", ["'", '"'])
@pytest.mark.parametrize("export", ["", "export "])
@pytest.mark.parametrize("name", ["DJANGO_SECRET_KEY", "DB_PASSWORD", "SESSION_SECRET"])
def test_a_quoted_env_value_with_punctuation_is_caught(value: str, quote: str, export: str, name: str) -> None:
    text = f"# .env\nDEBUG=false\n{export}{name}={quote}{value}{quote}\n"
    problems = scan_secrets(text)
    assert [p.location for p in problems] == ["line 3"], (text, problems)
    assert value[:8] not in str(problems[0]) and value[-8:] not in str(problems[0])


@pytest.mark.parametrize(
    "text",
    [
        "DJANGO_SECRET_KEY='${DJANGO_SECRET_KEY}'",
        'export SECRET_KEY="$SECRET_KEY"',
        "DB_PASSWORD='%(db_password)s'",
        'DB_PASSWORD="{{ vault_db_password }}"',
        "SECRET_KEY='replace-me-with-50-random-characters'",
        "DB_PASSWORD='ENC[AES256_GCM,data:Tr0ub4dor3xq,type:str]'",
        'DB_PASSWORD="op://Production/db/password"',
        "API_TOKEN='<paste-the-token-here>'",
    ],
)
def test_a_quoted_env_reference_or_placeholder_is_not_a_secret(text: str) -> None:
    assert scan_secrets(text) == []


def _windows_of(secret: str, n: int = 6) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def test_a_path_refused_for_a_secret_is_never_echoed(store: object) -> None:
    from memagent.vfs.errors import ValidationFailed

    token = "gh" + "p_" + rand(ALNUM, 36, 210)
    for path in (f"/knowledge/{token}.md", f"/notes/{token}/a.md", f"/a/b/deploy-{token}"):
        with pytest.raises(ValidationFailed) as caught:
            store.write("agent:a", path, "harmless\n")  # type: ignore[attr-defined]
        message = str(caught.value)
        assert not _windows_of(token) & _windows_of(message, 6), message
        segment = [s for s in path.split("/") if s].index(next(s for s in path.split("/") if token in s)) + 1
        first = message.splitlines()[0]
        assert "[withheld]" in first and first.endswith("was not saved: 1 problem."), first
        assert f"segment {segment}" in message, message


def test_the_redacted_path_keeps_the_segments_without_the_secret() -> None:
    token = "gh" + "p_" + rand(ALNUM, 36, 211)
    assert scanner.redact_path(f"/knowledge/{token}.md") == "/knowledge/[withheld]"
    assert scanner.redact_path(f"/people/{token}/notes.md") == "/people/[withheld]/notes.md"
    assert scanner.redact_path("/people/ada/notes.md") == "/people/ada/notes.md"


# --- the context rule: a random value under a secret's name (the third held-out set) -------


def _context_cases() -> tuple[list[str], list[str]]:
    key, hexed = rand(ALNUM, 32, 201), rand(HEX, 40, 202)
    caught = [
        f"'webhook_secret' => '{hexed}',",
        f'settings["SIGNING_KEY"] = "{hexed}"',
        f"-H 'X-Api-Token: {key}'",
        f"const c = new Thing({{ accessToken: '{key}' }});",
        f"export ACME_APP_KEY={hexed}",
        f'ACME_TOKEN="Acme2 {key}"',
        f"Authorization: Acme-Key {hexed}",
        f"tool --client-secret {key}",
        f"| host | password |\n|---|---|\n| db1 | {key[:10]}#1 |",
        f"log in to the bastion (ops / {key[:10]}!9) and restart it",
    ]
    clean = [
        f"integrity: sha512-{key}==",
        f"commit_sha: {hexed}",
        f"publishable_key: {key}",
        f"client_id: {key}",
        f"key_id: {hexed}",
        f"cache_key: deps-{hexed}",
        f"token_url: https://auth.example.com/{key}",
        "password: '%env(DB_PASSWORD)%'",
        "api_key: ${ACME_API_KEY_FOR_PRODUCTION_2024}",
        f"public_key: age1{key.lower()}",
        f"next_page_token: {key}",
    ]
    return caught, clean


def test_a_random_value_paired_with_a_secrets_name_is_caught() -> None:
    caught, _ = _context_cases()
    assert [text for text in caught if not scan_secrets(text)] == []
    for text in caught:
        assert_same_as_reference(text)


def test_public_ids_digests_and_references_under_such_names_are_not() -> None:
    _, clean = _context_cases()
    assert [text for text in clean if scan_secrets(text)] == []
    for text in clean:
        assert_same_as_reference(text)
