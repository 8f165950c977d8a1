"""A corpus of secrets and of text that only looks like one, for the redactor's tests and
bench/redaction.py (and for driving the same secrets through every front end).

Every secret is generated here from its provider's documented format (prefix, alphabet,
length), with a fixed seed: nothing is copied from a real credential or another corpus.

SECRETS: each kind of secret in several carriers (a sentence, an env or shell assignment,
YAML, JSON, an HTTP header, a URL, a curl line); NEGATIVES: realistic text that must come
back byte for byte (commit SHAs, UUIDs, digests, variable references, identifiers, paths,
versions, ticket ids, URLs without credentials, base64 of prose); leaks(): whether any
part of a secret is still in some bytes.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

SEED = 22
ALNUM = string.ascii_letters + string.digits
LOWER_DIGITS = string.ascii_lowercase + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
LETTERS = string.ascii_letters
BASE32_LOWER = string.ascii_lowercase + "234567"
BECH32_UPPER = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
# 16 characters of a secret found anywhere is a leak: long enough that no marker or
# surrounding text holds one by chance.
WINDOW = 16


@dataclass(frozen=True, slots=True)
class Secret:
    kind: str
    value: str  # the bytes that must never be stored
    text: str  # a realistic line (or block) that carries it


def _forms(secret_value: str) -> set[bytes]:
    return {form.encode() for form in (secret_value, json.dumps(secret_value)[1:-1])}


def drawn(rng: random.Random, alphabet: str, length: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


BARE_SHAPES = {  # what a token of no known format is made of, bare in a sentence
    "lower-case and digits": lambda rng, n: drawn(rng, string.ascii_lowercase + string.digits, n),
    "upper-case and digits": lambda rng, n: drawn(rng, string.ascii_uppercase + string.digits, n),
    "base62": lambda rng, n: drawn(rng, string.ascii_letters + string.digits, n),
    "base64url": lambda rng, n: drawn(rng, string.ascii_letters + string.digits + "-_", n),
    "hex groups": lambda rng, n: "-".join(drawn(rng, "0123456789abcdef", 8) for _ in range(n // 8)),
    "two parts and a dot": lambda rng, n: drawn(rng, string.ascii_letters + string.digits, n // 2) + "."
    + drawn(rng, string.ascii_letters + string.digits, n // 2),
    "base64 padded": lambda rng, n: drawn(rng, string.ascii_letters + string.digits + "+/", n) + "==",
}


def leaks(secret_value: str, haystack: bytes) -> bool:
    """Whether the secret is in haystack: whole, JSON-escaped, or any WINDOW characters of it."""
    for encoded in _forms(secret_value):
        if encoded in haystack:
            return True
        if any(encoded[i:i + WINDOW] in haystack for i in range(max(len(encoded) - WINDOW + 1, 0))):
            return True
    return False


def leaking(secrets: list[Secret], haystack: bytes) -> list[Secret]:
    """The secrets that leak() into haystack, in one pass over it: each of its WINDOW-byte
    slices is looked up among the secrets' own (a search of the whole haystack per slice of
    every secret took minutes over a store's files on a loaded machine)."""
    windows: dict[bytes, set[int]] = {}
    found: set[int] = set()
    for n, secret in enumerate(secrets):
        for encoded in _forms(secret.value):
            if len(encoded) < WINDOW:
                if encoded in haystack:
                    found.add(n)
                continue
            for i in range(len(encoded) - WINDOW + 1):
                windows.setdefault(encoded[i:i + WINDOW], set()).add(n)
    for i in range(len(haystack) - WINDOW + 1):
        owners = windows.get(haystack[i:i + WINDOW])
        if owners:
            found |= owners
    return [secret for n, secret in enumerate(secrets) if n in found]


_rng = random.Random(SEED)


def r(alphabet: str, length: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(length))


def strong(alphabet: str, length: int) -> str:
    """A random string of the alphabet holding a digit and, where the alphabet has them, a
    lower- and an upper-case letter (as the providers' keys of that length do)."""
    while True:
        value = r(alphabet, length)
        wanted = [set(string.digits), set(string.ascii_lowercase), set(string.ascii_uppercase)]
        if all(not (need & set(alphabet)) or need & set(value) for need in wanted):
            return value


def digits(length: int) -> str:
    return str(_rng.randint(1, 9)) + r(string.digits, length - 1)


def b64(raw_length: int) -> str:
    return base64.b64encode(bytes(_rng.getrandbits(8) for _ in range(raw_length))).decode()


def b64url(raw_length: int) -> str:
    return base64.urlsafe_b64encode(bytes(_rng.getrandbits(8) for _ in range(raw_length))).decode().rstrip("=")


def password() -> str:
    """A password as people and generators pick them: letters, digits and a symbol that
    needs no quoting in a URL."""
    return strong(ALNUM, 12) + _rng.choice("!_.~") + strong(ALNUM, 5)


def a_uuid() -> str:
    return str(uuid.UUID(int=_rng.getrandbits(128), version=4))


def jwt(claims: dict, signed: bool = True) -> str:
    header = {"alg": "RS256" if signed else "none", "typ": "JWT", "kid": r(HEX, 16)}
    part = lambda obj: base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")  # noqa: E731
    return f"{part(header)}.{part(claims)}.{b64url(256) if signed else ''}"


def pem(label: str, lines: int = 12) -> tuple[str, str]:
    body = "\n".join(b64(48) for _ in range(lines))
    return body.split("\n")[0], f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


# kind: (environment variable, generator). Tokens with a documented prefix are found by it;
# the rest (no prefix) only by the name they are assigned to or the header they travel in.
PREFIXED: dict[str, tuple[str, Callable[[], str]]] = {
    # AI providers
    "openai-project-key": ("OPENAI_API_KEY", lambda: f"sk-proj-{strong(B64URL, 74)}T3BlbkFJ{strong(B64URL, 74)}"),
    "openai-service-account-key": ("OPENAI_API_KEY",
                                   lambda: f"sk-svcacct-{strong(B64URL, 74)}T3BlbkFJ{strong(B64URL, 74)}"),
    "openai-admin-key": ("OPENAI_ADMIN_KEY", lambda: f"sk-admin-{strong(B64URL, 74)}T3BlbkFJ{strong(B64URL, 74)}"),
    "openai-user-key": ("OPENAI_API_KEY", lambda: f"sk-{strong(ALNUM, 20)}T3BlbkFJ{strong(ALNUM, 20)}"),
    "anthropic-api-key": ("ANTHROPIC_API_KEY", lambda: f"sk-ant-api03-{strong(B64URL, 93)}AA"),
    "anthropic-admin-key": ("ANTHROPIC_ADMIN_KEY", lambda: f"sk-ant-admin01-{strong(B64URL, 93)}AA"),
    "google-api-key": ("GEMINI_API_KEY", lambda: f"AIza{strong(B64URL, 35)}"),
    "groq-api-key": ("GROQ_API_KEY", lambda: f"gsk_{strong(ALNUM, 52)}"),
    "xai-api-key": ("XAI_API_KEY", lambda: f"xai-{strong(ALNUM, 80)}"),
    "perplexity-api-key": ("PPLX_API_KEY", lambda: f"pplx-{strong(ALNUM, 48)}"),
    "replicate-api-token": ("REPLICATE_API_TOKEN", lambda: f"r8_{strong(ALNUM, 37)}"),
    "huggingface-token": ("HF_TOKEN", lambda: f"hf_{strong(LETTERS, 34)}"),
    "huggingface-org-token": ("HF_ORG_TOKEN", lambda: f"api_org_{strong(LETTERS, 34)}"),
    "openrouter-api-key": ("OPENROUTER_API_KEY", lambda: f"sk-or-v1-{r(HEX, 64)}"),
    "deepseek-api-key": ("DEEPSEEK_API_KEY", lambda: f"sk-{r(HEX, 32)}"),
    "langsmith-api-key": ("LANGSMITH_API_KEY", lambda: f"lsv2_pt_{r(HEX, 32)}_{r(HEX, 10)}"),
    "fireworks-api-key": ("FIREWORKS_API_KEY", lambda: f"fw_{strong(ALNUM, 24)}"),
    "tavily-api-key": ("TAVILY_API_KEY", lambda: f"tvly-dev-{strong(ALNUM, 32)}"),
    "pinecone-api-key": ("PINECONE_API_KEY", lambda: f"pcsk_{strong(ALNUM, 5)}_{strong(ALNUM + '_', 60)}"),
    "cerebras-api-key": ("CEREBRAS_API_KEY", lambda: f"csk-{strong(LOWER_DIGITS, 48)}"),
    "elevenlabs-api-key": ("ELEVENLABS_API_KEY", lambda: f"sk_{r(HEX, 48)}"),
    # cloud
    "aws-access-key-id": ("AWS_ACCESS_KEY_ID", lambda: f"AKIA{strong(UPPER_DIGITS, 16)}"),
    "aws-session-key-id": ("AWS_ACCESS_KEY_ID", lambda: f"ASIA{strong(UPPER_DIGITS, 16)}"),
    "gcp-oauth-client-secret": ("GOOGLE_CLIENT_SECRET", lambda: f"GOCSPX-{strong(B64URL, 28)}"),
    "gcp-access-token": ("GOOGLE_ACCESS_TOKEN", lambda: f"ya29.{strong(B64URL, 150)}"),
    "azure-client-secret": ("AZURE_CLIENT_SECRET",
                            lambda: f"{strong(ALNUM, 3)}{r(string.digits, 1)}Q~{strong(ALNUM + '_~.-', 34)}"),
    "alibaba-access-key-id": ("ALIBABA_CLOUD_ACCESS_KEY_ID", lambda: f"LTAI{strong(ALNUM, 20)}"),
    "digitalocean-pat": ("DIGITALOCEAN_TOKEN", lambda: f"dop_v1_{r(HEX, 64)}"),
    "digitalocean-oauth-token": ("DO_OAUTH_TOKEN", lambda: f"doo_v1_{r(HEX, 64)}"),
    "digitalocean-refresh-token": ("DO_REFRESH_TOKEN", lambda: f"dor_v1_{r(HEX, 64)}"),
    "heroku-api-key": ("HEROKU_API_KEY", lambda: f"HRKU-AA{strong(B64URL, 58)}"),
    "cloudflare-origin-ca-key": ("CF_ORIGIN_CA_KEY", lambda: f"v1.0-{r(HEX, 24)}-{r(HEX, 146)}"),
    "flyio-token": ("FLY_API_TOKEN", lambda: f"fo1_{strong(B64URL, 43)}"),
    "flyio-macaroon": ("FLY_API_TOKEN", lambda: f"FlyV1 fm2_{strong(B64, 200)}"),
    "yandex-api-key": ("YC_API_KEY", lambda: f"AQVN{strong(B64URL, 36)}"),
    "gcp-refresh-token": ("GOOGLE_REFRESH_TOKEN", lambda: f"1//0{strong(B64URL, 100)}"),
    "openshift-token": ("OPENSHIFT_TOKEN", lambda: f"sha256~{strong(B64URL, 43)}"),
    "clickhouse-cloud-key": ("CLICKHOUSE_KEY_SECRET", lambda: f"4b1d{strong(ALNUM, 38)}"),
    # source hosting and CI
    "github-pat": ("GITHUB_TOKEN", lambda: f"ghp_{strong(ALNUM, 36)}"),
    "github-oauth-token": ("GH_OAUTH_TOKEN", lambda: f"gho_{strong(ALNUM, 36)}"),
    "github-user-to-server-token": ("GH_TOKEN", lambda: f"ghu_{strong(ALNUM, 36)}"),
    "github-server-to-server-token": ("GITHUB_TOKEN", lambda: f"ghs_{strong(ALNUM, 36)}"),
    "github-refresh-token": ("GH_REFRESH_TOKEN", lambda: f"ghr_{strong(ALNUM, 76)}"),
    "github-fine-grained-pat": ("GITHUB_TOKEN", lambda: f"github_pat_{strong(ALNUM, 22)}_{strong(ALNUM, 59)}"),
    "gitlab-pat": ("GITLAB_TOKEN", lambda: f"glpat-{strong(B64URL, 20)}"),
    "gitlab-deploy-token": ("CI_DEPLOY_PASSWORD", lambda: f"gldt-{strong(B64URL, 20)}"),
    "gitlab-runner-token": ("RUNNER_TOKEN", lambda: f"glrt-{strong(B64URL, 20)}"),
    "gitlab-runner-registration-token": ("REGISTRATION_TOKEN", lambda: f"GR1348941{strong(B64URL, 20)}"),
    "gitlab-pipeline-trigger-token": ("TRIGGER_TOKEN", lambda: f"glptt-{r(HEX, 40)}"),
    "gitlab-oauth-app-secret": ("GITLAB_APP_SECRET", lambda: f"gloas-{r(HEX, 64)}"),
    "gitlab-scim-token": ("GITLAB_SCIM_TOKEN", lambda: f"glsoat-{strong(B64URL, 20)}"),
    "gitlab-feed-token": ("GITLAB_FEED_TOKEN", lambda: f"glft-{strong(B64URL, 20)}"),
    "gitlab-agent-token": ("GITLAB_AGENT_TOKEN", lambda: f"glagent-{strong(B64URL, 50)}"),
    "bitbucket-app-password": ("BITBUCKET_APP_PASSWORD", lambda: f"ATBB{strong(ALNUM, 32)}"),
    "circleci-personal-token": ("CIRCLE_TOKEN", lambda: f"CCIPAT_{strong(ALNUM, 22)}_{r(HEX, 40)}"),
    "buildkite-token": ("BUILDKITE_API_TOKEN", lambda: f"bkua_{r(HEX, 40)}"),
    "atlassian-api-token": ("JIRA_API_TOKEN", lambda: f"ATATT3{strong(B64URL, 183)}={r(HEX, 8).upper()}"),
    "sonarqube-token": ("SONAR_TOKEN", lambda: f"squ_{r(HEX, 40)}"),
    "sourcegraph-token": ("SRC_ACCESS_TOKEN", lambda: f"sgp_{r(HEX, 16)}_{r(HEX, 40)}"),
    "octopus-deploy-api-key": ("OCTOPUS_API_KEY", lambda: f"API-{strong(UPPER_DIGITS, 26)}"),
    "harness-pat": ("HARNESS_API_KEY", lambda: f"pat.{strong(ALNUM, 22)}.{strong(ALNUM, 24)}.{strong(ALNUM, 20)}"),
    # package registries
    "npm-token": ("NPM_TOKEN", lambda: f"npm_{strong(ALNUM, 36)}"),
    "pypi-token": ("TWINE_PASSWORD", lambda: f"pypi-AgEIcHlwaS5vcmc{strong(B64URL, 140)}"),
    "rubygems-api-key": ("GEM_HOST_API_KEY", lambda: f"rubygems_{r(HEX, 48)}"),
    "nuget-api-key": ("NUGET_API_KEY", lambda: f"oy2{strong(LOWER_DIGITS, 43)}"),
    "docker-pat": ("DOCKER_PASSWORD", lambda: f"dckr_pat_{strong(B64URL, 27)}"),
    "clojars-token": ("CLOJARS_PASSWORD", lambda: f"CLOJARS_{strong(LOWER_DIGITS, 60)}"),
    "crates-io-token": ("CARGO_REGISTRY_TOKEN", lambda: f"cio{strong(ALNUM, 32)}"),
    "jfrog-api-key": ("ARTIFACTORY_API_KEY", lambda: f"AKCp8{strong(ALNUM, 68)}"),
    "terraform-cloud-token": ("TF_TOKEN_app_terraform_io", lambda: f"{strong(ALNUM, 14)}.atlasv1.{strong(B64URL, 67)}"),
    "pulumi-token": ("PULUMI_ACCESS_TOKEN", lambda: f"pul-{r(HEX, 40)}"),
    # chat and webhooks
    "slack-bot-token": ("SLACK_BOT_TOKEN", lambda: f"xoxb-{digits(12)}-{digits(13)}-{strong(ALNUM, 24)}"),
    "slack-user-token": ("SLACK_USER_TOKEN", lambda: f"xoxp-{digits(12)}-{digits(12)}-{digits(13)}-{r(HEX, 32)}"),
    "slack-app-token": ("SLACK_APP_TOKEN", lambda: f"xapp-1-A{strong(UPPER_DIGITS, 10)}-{digits(13)}-{r(HEX, 64)}"),
    "slack-config-token": ("SLACK_CONFIG_TOKEN", lambda: f"xoxe.xoxp-1-{strong(ALNUM, 150)}"),
    "slack-webhook": ("SLACK_WEBHOOK_URL", lambda: "https://hooks.slack.com/services/"
                      f"T{strong(UPPER_DIGITS, 8)}/B{strong(UPPER_DIGITS, 10)}/{strong(ALNUM, 24)}"),
    "discord-webhook": ("DISCORD_WEBHOOK_URL",
                        lambda: f"https://discord.com/api/webhooks/{digits(19)}/{strong(B64URL, 68)}"),
    "discord-bot-token": ("DISCORD_BOT_TOKEN",
                          lambda: f"M{strong(ALNUM, 25)}.{strong(B64URL, 6)}.{strong(B64URL, 38)}"),
    "telegram-bot-token": ("TELEGRAM_BOT_TOKEN", lambda: f"{digits(10)}:AA{strong(B64URL, 33)}"),
    "teams-webhook": ("TEAMS_WEBHOOK_URL", lambda: f"https://acme.webhook.office.com/webhookb2/{a_uuid()}@{a_uuid()}"
                      f"/IncomingWebhook/{r(HEX, 32)}/{a_uuid()}"),
    "twilio-api-key": ("TWILIO_API_KEY", lambda: f"SK{r(HEX, 32)}"),
    # payments
    "stripe-live-secret-key": ("STRIPE_SECRET_KEY", lambda: f"sk_live_{strong(ALNUM, 99)}"),
    "stripe-test-secret-key": ("STRIPE_SECRET_KEY", lambda: f"sk_test_{strong(ALNUM, 99)}"),
    "stripe-live-restricted-key": ("STRIPE_API_KEY", lambda: f"rk_live_{strong(ALNUM, 99)}"),
    "stripe-test-restricted-key": ("STRIPE_API_KEY", lambda: f"rk_test_{strong(ALNUM, 99)}"),
    "stripe-webhook-secret": ("STRIPE_WEBHOOK_SECRET", lambda: f"whsec_{strong(ALNUM, 32)}"),
    "stripe-publishable-key": ("STRIPE_PUBLISHABLE_KEY", lambda: f"pk_live_{strong(ALNUM, 99)}"),
    "square-access-token": ("SQUARE_ACCESS_TOKEN", lambda: f"EAAA{strong(B64URL, 60)}"),
    "square-oauth-token": ("SQUARE_TOKEN", lambda: f"sq0atp-{strong(B64URL, 22)}"),
    "square-oauth-secret": ("SQUARE_APP_SECRET", lambda: f"sq0csp-{strong(B64URL, 43)}"),
    "braintree-access-token": ("BRAINTREE_ACCESS_TOKEN",
                               lambda: f"access_token$production${r(LOWER_DIGITS, 16)}${r(HEX, 32)}"),
    "shopify-access-token": ("SHOPIFY_ACCESS_TOKEN", lambda: f"shpat_{r(HEX, 32)}"),
    "shopify-shared-secret": ("SHOPIFY_API_SECRET", lambda: f"shpss_{r(HEX, 32)}"),
    "shopify-custom-app-token": ("SHOPIFY_TOKEN", lambda: f"shpca_{r(HEX, 32)}"),
    "shopify-private-app-token": ("SHOPIFY_PASSWORD", lambda: f"shppa_{r(HEX, 32)}"),
    "flutterwave-secret-key": ("FLW_SECRET_KEY", lambda: f"FLWSECK_TEST-{r(HEX, 32)}-X"),
    "shippo-token": ("SHIPPO_TOKEN", lambda: f"shippo_live_{r(HEX, 40)}"),
    "easypost-api-key": ("EASYPOST_API_KEY", lambda: f"EZAK{strong(ALNUM, 54)}"),
    "duffel-token": ("DUFFEL_TOKEN", lambda: f"duffel_test_{strong(B64URL, 43)}"),
    "plaid-access-token": ("PLAID_ACCESS_TOKEN", lambda: f"access-production-{a_uuid()}"),
    "gocardless-token": ("GOCARDLESS_ACCESS_TOKEN", lambda: f"live_{strong(B64URL, 40)}"),
    "lob-api-key": ("LOB_API_KEY", lambda: f"live_{r(HEX, 35)}"),
    "facebook-access-token": ("FB_ACCESS_TOKEN", lambda: f"EAAG{strong(ALNUM, 180)}"),
    "twitter-bearer-token": ("TWITTER_BEARER_TOKEN", lambda: "A" * 22 + f"{strong(ALNUM, 26)}%3D{strong(ALNUM, 50)}"),
    # email and messaging
    "sendgrid-api-key": ("SENDGRID_API_KEY", lambda: f"SG.{strong(B64URL, 22)}.{strong(B64URL, 43)}"),
    "mailgun-api-key": ("MAILGUN_API_KEY", lambda: f"key-{r(HEX, 32)}"),
    "mailgun-public-key": ("MAILGUN_PUBLIC_KEY", lambda: f"pubkey-{r(HEX, 32)}"),
    "mailchimp-api-key": ("MAILCHIMP_API_KEY", lambda: f"{r(HEX, 32)}-us{_rng.randint(1, 21)}"),
    "brevo-api-key": ("BREVO_API_KEY", lambda: f"xkeysib-{r(HEX, 64)}-{strong(ALNUM, 16)}"),
    "resend-api-key": ("RESEND_API_KEY", lambda: f"re_{strong(ALNUM, 8)}_{strong(ALNUM, 24)}"),
    # observability
    "newrelic-user-key": ("NEW_RELIC_API_KEY", lambda: f"NRAK-{strong(UPPER_DIGITS, 27)}"),
    "newrelic-insert-key": ("NEW_RELIC_INSERT_KEY", lambda: f"NRII-{strong(B64URL, 32)}"),
    "newrelic-browser-key": ("NEW_RELIC_BROWSER_KEY", lambda: f"NRJS-{r(HEX, 19)}"),
    "sentry-org-token": ("SENTRY_AUTH_TOKEN", lambda: "sntrys_" + b64(60).rstrip("=") + f"_{strong(ALNUM, 43)}"),
    "sentry-user-token": ("SENTRY_AUTH_TOKEN", lambda: f"sntryu_{r(HEX, 64)}"),
    "grafana-cloud-token": ("GRAFANA_CLOUD_TOKEN", lambda: "glc_" + b64(90).rstrip("=")),
    "grafana-service-account-token": ("GRAFANA_TOKEN", lambda: f"glsa_{strong(ALNUM, 32)}_{r(HEX, 8)}"),
    "dynatrace-token": ("DT_API_TOKEN", lambda: f"dt0c01.{strong(UPPER_DIGITS, 24)}.{strong(UPPER_DIGITS, 64)}"),
    # databases and platforms
    "supabase-token": ("SUPABASE_ACCESS_TOKEN", lambda: f"sbp_{r(HEX, 40)}"),
    "supabase-secret-key": ("SUPABASE_SECRET_KEY", lambda: f"sb_secret_{strong(B64URL, 31)}"),
    "planetscale-token": ("PLANETSCALE_SERVICE_TOKEN", lambda: f"pscale_tkn_{strong(B64URL, 43)}"),
    "planetscale-password": ("DATABASE_PASSWORD", lambda: f"pscale_pw_{strong(B64URL, 43)}"),
    "databricks-token": ("DATABRICKS_TOKEN", lambda: f"dapi{r(HEX, 32)}-2"),
    "vault-service-token": ("VAULT_TOKEN", lambda: f"hvs.{strong(B64URL, 90)}"),
    "vault-batch-token": ("VAULT_TOKEN", lambda: f"hvb.{strong(B64URL, 138)}"),
    "linear-api-key": ("LINEAR_API_KEY", lambda: f"lin_api_{strong(ALNUM, 40)}"),
    "notion-token": ("NOTION_TOKEN", lambda: f"ntn_{digits(11)}{strong(ALNUM, 35)}"),
    "notion-integration-secret": ("NOTION_API_KEY", lambda: f"secret_{strong(ALNUM, 43)}"),
    "airtable-pat": ("AIRTABLE_API_KEY", lambda: f"pat{strong(ALNUM, 14)}.{r(HEX, 64)}"),
    "figma-token": ("FIGMA_TOKEN", lambda: f"figd_{strong(B64URL, 40)}"),
    "postman-api-key": ("POSTMAN_API_KEY", lambda: f"PMAK-{r(HEX, 24)}-{r(HEX, 34)}"),
    "netlify-token": ("NETLIFY_AUTH_TOKEN", lambda: f"nfp_{strong(ALNUM, 36)}"),
    "age-secret-key": ("SOPS_AGE_KEY", lambda: f"AGE-SECRET-KEY-1{r(BECH32_UPPER, 58)}"),
    "1password-service-account-token": ("OP_SERVICE_ACCOUNT_TOKEN", lambda: "ops_eyJ" + b64url(200)),
    "tailscale-api-key": ("TS_API_KEY", lambda: f"tskey-api-{strong(ALNUM, 12)}-{strong(ALNUM, 30)}"),
    "tailscale-auth-key": ("TS_AUTHKEY", lambda: f"tskey-auth-{strong(ALNUM, 12)}-{strong(ALNUM, 30)}"),
    "doppler-personal-token": ("DOPPLER_TOKEN", lambda: f"dp.pt.{strong(ALNUM, 43)}"),
    "doppler-service-token": ("DOPPLER_TOKEN", lambda: f"dp.st.prd.{strong(ALNUM, 43)}"),
    "doppler-cli-token": ("DOPPLER_TOKEN", lambda: f"dp.ct.{strong(ALNUM, 43)}"),
    "doppler-service-account-token": ("DOPPLER_TOKEN", lambda: f"dp.sa.{strong(ALNUM, 43)}"),
    "infracost-api-key": ("INFRACOST_API_KEY", lambda: f"ico-{strong(ALNUM, 32)}"),
    "contentful-token": ("CONTENTFUL_MANAGEMENT_TOKEN", lambda: f"CFPAT-{strong(B64URL, 43)}"),
    "dropbox-token": ("DROPBOX_TOKEN", lambda: f"sl.{strong(B64URL, 135)}"),
    "asana-pat": ("ASANA_TOKEN", lambda: f"2/{digits(16)}/{digits(16)}:{r(HEX, 32)}"),
    "mapbox-secret-token": ("MAPBOX_SECRET_TOKEN",
                            lambda: "sk.eyJ1IjoiYWNtZSIsImEiOi" + strong(B64URL, 20) + "." + strong(B64URL, 22)),
    "launchdarkly-key": ("LD_SDK_KEY", lambda: f"sdk-{a_uuid()}"),
    "frameio-token": ("FRAMEIO_TOKEN", lambda: f"fio-u-{strong(B64URL, 64)}"),
    "typeform-token": ("TYPEFORM_TOKEN", lambda: f"tfp_{strong(B64URL, 44)}_{strong(B64URL, 14)}"),
    "prefect-api-key": ("PREFECT_API_KEY", lambda: f"pnu_{strong(ALNUM, 36)}"),
    "readme-api-key": ("README_API_KEY", lambda: f"rdme_{r(HEX, 70)}"),
    "scalingo-token": ("SCALINGO_API_TOKEN", lambda: f"tk-us-{strong(B64URL, 48)}"),
    "adobe-client-secret": ("ADOBE_CLIENT_SECRET", lambda: f"p8e-{strong(ALNUM, 32)}"),
    "defined-networking-key": ("DN_API_KEY", lambda: f"dnkey-{strong(B64URL, 26)}-{strong(B64URL, 52)}"),
    "settlemint-token": ("SETTLEMINT_ACCESS_TOKEN", lambda: f"sm_pat_{strong(ALNUM, 16)}"),
    "authress-key": ("AUTHRESS_KEY", lambda: f"sc_{r(LOWER_DIGITS, 20)}.{r(LOWER_DIGITS, 5)}.acc_{r(LOWER_DIGITS, 20)}"
                     f".{strong(B64URL, 60)}"),
    # JSON web tokens: signed, unsigned and encrypted
    "jwt": ("ID_TOKEN", lambda: jwt({"sub": a_uuid(), "iss": "https://auth.example.com", "exp": 1900000000})),
    "jwt-unsigned": ("SESSION_TOKEN", lambda: jwt({"sub": "42", "role": "admin", "iat": 1700000000}, signed=False)),
    "jwe": ("ENCRYPTED_TOKEN", lambda: base64.urlsafe_b64encode(b'{"alg":"RSA-OAEP","enc":"A256GCM"}').decode()
            .rstrip("=") + f".{b64url(256)}.{b64url(12)}.{b64url(120)}.{b64url(16)}"),
}

# kind: (environment variable, generator): secrets with no prefix of their own.
ASSIGNED: dict[str, tuple[str, Callable[[], str]]] = {
    "aws-secret-access-key": ("AWS_SECRET_ACCESS_KEY", lambda: strong(B64, 40)),
    "azure-storage-key": ("AZURE_STORAGE_KEY", lambda: b64(64)),
    "cloudflare-api-token": ("CLOUDFLARE_API_TOKEN", lambda: strong(B64URL, 40)),
    "linode-token": ("LINODE_TOKEN", lambda: r(HEX, 64)),
    "vultr-api-key": ("VULTR_API_KEY", lambda: strong(UPPER_DIGITS, 36)),
    "azure-devops-pat": ("AZURE_DEVOPS_EXT_PAT", lambda: r(BASE32_LOWER, 52)),
    "travis-token": ("TRAVIS_API_TOKEN", lambda: strong(B64URL, 22)),
    "circleci-legacy-token": ("CIRCLECI_TOKEN", lambda: r(HEX, 40)),
    "twilio-auth-token": ("TWILIO_AUTH_TOKEN", lambda: r(HEX, 32)),
    "cohere-api-key": ("CO_API_KEY", lambda: strong(ALNUM, 40)),
    "mistral-api-key": ("MISTRAL_API_KEY", lambda: strong(ALNUM, 32)),
    "datadog-api-key": ("DD_API_KEY", lambda: r(HEX, 32)),
    "datadog-app-key": ("DD_APP_KEY", lambda: r(HEX, 40)),
    "honeycomb-api-key": ("HONEYCOMB_API_KEY", lambda: strong(ALNUM, 22)),
    "pagerduty-token": ("PAGERDUTY_TOKEN", lambda: "u+" + strong(B64URL, 18)),
    "postmark-server-token": ("POSTMARK_SERVER_TOKEN", a_uuid),
    "mailjet-secret-key": ("MJ_APIKEY_PRIVATE", lambda: r(HEX, 32)),
    "algolia-admin-key": ("ALGOLIA_ADMIN_API_KEY", lambda: r(HEX, 32)),
    "intercom-token": ("INTERCOM_ACCESS_TOKEN", lambda: "dG9rOj" + b64(45).rstrip("=")),
    "zendesk-token": ("ZENDESK_API_TOKEN", lambda: strong(ALNUM, 40)),
    "sumologic-access-key": ("SUMO_ACCESS_KEY", lambda: strong(ALNUM, 64)),
    "okta-api-token": ("OKTA_API_TOKEN", lambda: "00" + strong(B64URL, 40)),
    "auth0-client-secret": ("AUTH0_CLIENT_SECRET", lambda: strong(B64URL, 64)),
    "twitch-client-secret": ("TWITCH_CLIENT_SECRET", lambda: r(LOWER_DIGITS, 30)),
    "vercel-token": ("VERCEL_TOKEN", lambda: strong(ALNUM, 24)),
    "heroku-legacy-api-key": ("HEROKU_API_KEY", a_uuid),
    "snyk-token": ("SNYK_TOKEN", a_uuid),
    "adyen-api-key": ("ADYEN_API_KEY", lambda: "AQE" + strong(ALNUM, 40) + "=-" + b64(32) + "-" + strong(ALNUM, 12)),
    "wandb-api-key": ("WANDB_API_KEY", lambda: r(HEX, 40)),
    "django-secret-key": ("DJANGO_SECRET_KEY", lambda: strong(ALNUM + "!@#%^&*(-_=+)", 50)),
    "database-password": ("DB_PASSWORD", password),
    "generic-password": ("POSTGRES_PASSWORD", password),
    "generic-client-secret": ("OAUTH_CLIENT_SECRET", lambda: strong(B64URL, 48)),
    "generic-api-key": ("PAYMENTS_API_KEY", lambda: strong(LOWER_DIGITS, 40)),
    "generic-bearer-token": ("SERVICE_TOKEN", lambda: r(HEX, 48)),
}


def camel(name: str) -> str:
    head, *rest = name.lower().split("_")
    return head + "".join(word.capitalize() for word in rest)


def _prefixed_texts(kind: str, env: str, value: str) -> list[str]:
    texts = [f"rotated the {kind.replace('-', ' ')} {value} after the incident",
             f'export {env}="{value}"',
             f'{{"{camel(env)}": "{value}", "region": "eu-west-1"}}']
    if "://" in value:
        texts.append(f"curl -X POST -d @payload.json {value}")
    else:
        texts.append(f'curl -sS -H "Authorization: Bearer {value}" https://api.example.com/v1/items')
    return texts


def _assigned_texts(env: str, value: str) -> list[str]:
    return [f"{env}={value}",
            f"export {env}='{value}'",
            f"  {env.lower()}: \"{value}\"",
            f'{{"{camel(env)}": "{value}"}}',
            f"[default]\n{env.lower()} = {value}\nregion = us-east-1"]


def _connection_strings() -> list[Secret]:
    out = []
    for scheme, host in [("postgres", "db:5432/app"), ("postgresql", "db.internal:5432/orders?sslmode=require"),
                         ("mysql", "mysql.internal:3306/shop"), ("mongodb", "mongo-0:27017/admin"),
                         ("mongodb+srv", "cluster0.ab1cd.mongodb.net/prod?retryWrites=true"),
                         ("rediss", "cache.example.com:6380/0"), ("amqps", "mq.example.com:5671/vhost"),
                         ("amqp", "rabbit:5672/"), ("sqlserver", "sql.example.com:1433;database=app"),
                         ("mssql", "sql.example.com:1433/app"), ("ftp", "files.example.com/in"),
                         ("https", "registry.example.com/simple/")]:
        for user in ("app", "svc_orders"):
            secret = password()
            url = f"{scheme}://{user}:{secret}@{host}"
            out += [Secret(f"{scheme}-url", secret, f"DATABASE_URL={url}"),
                    Secret(f"{scheme}-url", secret, f"connecting to {url} failed: timeout")]
    for template in ("redis://:{}@cache:6379/0", "redis://default:{}@redis-12345.c1.cloud.redislabs.com:12345"):
        secret = password()
        out += [Secret("redis-url", secret, f"REDIS_URL={template.format(secret)}"),
                Secret("redis-url", secret, f"cache at {template.format(secret)} refused the command")]
    for _ in range(2):
        secret = password()
        out += [
            Secret("jdbc-url", secret, f"spring.datasource.url=jdbc:postgresql://db:5432/app?user=app&password={secret}"),
            Secret("jdbc-url", secret, f"jdbc:mysql://db:3306/shop?user=root&password={secret}&useSSL=true"),
            Secret("odbc-connection-string", secret,
                   f"Driver={{ODBC Driver 18 for SQL Server}};Server=tcp:sql.example.com,1433;Uid=app;Pwd={secret};"),
            Secret("ado-connection-string", secret,
                   f"Server=tcp:acme.database.windows.net,1433;User ID=app;Password={secret};Encrypt=True;"),
        ]
    key = b64(64)
    out += [Secret("azure-storage-connection-string", key,
                   f"DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={key};EndpointSuffix=core.windows.net"),
            Secret("azure-storage-connection-string", key,
                   f'AZURE_STORAGE_CONNECTION_STRING="AccountName=acme;AccountKey={key}"')]
    for _ in range(2):
        sig = base64.b64encode(bytes(_rng.getrandbits(8) for _ in range(32))).decode()
        quoted = sig.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
        url = (f"https://acme.blob.core.windows.net/backups/db.tar?sv=2022-11-02&ss=b&srt=o&sp=r"
               f"&se=2026-12-01T00:00:00Z&spr=https&sig={quoted}")
        out += [Secret("azure-sas-token", quoted, f"download from {url}"),
                Secret("azure-sas-token", quoted, f'AZCOPY_SAS="{url}"')]
    return out


def _headers_and_commands() -> list[Secret]:
    out = []
    for _ in range(3):
        user, secret = "deploy", password()
        basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
        out += [Secret("http-basic-auth", basic, f"Authorization: Basic {basic}"),
                Secret("http-basic-auth", basic, f"curl -H 'Authorization: Basic {basic}' https://ci.example.com/api"),
                Secret("curl-user-password", secret, f"curl -u {user}:{secret} https://nexus.example.com/repository/"),
                Secret("curl-user-password", secret, f"curl --user '{user}:{secret}' -X PUT https://dav.example.com/f"),
                Secret("cli-password-flag", secret, f"mysqldump --user=root --password={secret} shop > shop.sql"),
                Secret("cli-password-flag", secret, f"docker login -u ci --password {secret} registry.example.com")]
        token = r(LOWER_DIGITS, 40)
        out += [Secret("http-bearer-token", token, f"Authorization: Bearer {token}"),
                Secret("http-bearer-token", token, f'curl -H "Authorization: Bearer {token}" https://api.example.com'),
                Secret("http-api-key-header", token, f'curl -H "X-Api-Key: {token}" https://api.example.com/v2/jobs'),
                Secret("http-api-key-header", token, f"x-api-key: {token}"),
                Secret("http-token-header", token, f"curl --header 'PRIVATE-TOKEN: {token}' https://gitlab.example.com/api/v4"),
                Secret("okta-ssws-header", token, f"Authorization: SSWS {token}"),
                Secret("http-cookie", token, f"Cookie: theme=dark; sessionid={token}; csrftoken={r(ALNUM, 32)}"),
                Secret("http-cookie", token, f'curl -b "session={token}" https://app.example.com/account')]
    return out


def _private_keys() -> list[Secret]:
    out = []
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY",
                  "DSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):
        first, block = pem(label)
        kind = "pem-" + label.lower().replace(" ", "-")
        out += [Secret(kind, first, f"the deploy key is\n{block}\nrotate it monthly"),
                Secret(kind, first, block)]
        escaped = json.dumps(block + "\n")
        out.append(Secret(kind, first, f'{{"type": "service_account", "private_key": {escaped}}}'))
    private = "\n".join(b64(48) for _ in range(6))
    putty = ("PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy@ci\nPublic-Lines: 2\n"
             f"{b64(48)}\n{b64(12)}\nPrivate-Lines: 6\n{private}\nPrivate-MAC: {r(HEX, 64)}")
    out += [Secret("putty-private-key", private.split("\n")[2], putty),
            Secret("putty-private-key", private.split("\n")[5], f"saved to deploy.ppk:\n{putty}\n")]
    gcp_first, gcp_block = pem("PRIVATE KEY")
    account = {"type": "service_account", "project_id": "acme-prod", "private_key_id": r(HEX, 40),
               "private_key": gcp_block + "\n", "client_email": "ci@acme-prod.iam.gserviceaccount.com"}
    service_account = json.dumps(account, indent=2)
    out += [Secret("gcp-service-account-key", gcp_first, service_account),
            Secret("gcp-service-account-key", gcp_first, f"GOOGLE_CREDENTIALS='{json.dumps(account)}'")]
    return out


def _kubernetes_secrets() -> list[Secret]:
    out = []
    for _ in range(3):
        secret = password()
        encoded = base64.b64encode(secret.encode()).decode()
        token = base64.b64encode(strong(ALNUM, 40).encode()).decode()
        manifest = ("apiVersion: v1\nkind: Secret\nmetadata:\n  name: orders-db\n  namespace: shop\ntype: Opaque\n"
                    f"data:\n  username: b3JkZXJz\n  password: {encoded}\n  api-token: {token}\n")
        out += [Secret("kubernetes-secret-data", encoded, manifest),
                Secret("kubernetes-secret-data", token, manifest),
                Secret("kubernetes-secret-string-data", secret,
                       "apiVersion: v1\nkind: Secret\nmetadata:\n  name: orders-db\nstringData:\n"
                       f"  DB_USER: orders\n  DB_PASS: {secret}\n")]
    return out


def _tool_files() -> list[Secret]:
    """Credentials as tools keep them: netrc, pypirc, npmrc, git remotes, the AWS CLI."""
    netrc, pypi, npm, app = password(), PREFIXED["pypi-token"][1](), PREFIXED["npm-token"][1](), PREFIXED[
        "github-server-to-server-token"][1]()
    aws = strong(B64, 40)
    return [Secret("netrc-password", netrc, f"machine api.example.com\n  login ana@example.com\n  password {netrc}\n"),
            Secret("netrc-password", netrc, f"machine git.example.com login ci password {netrc}"),
            Secret("pypi-token", pypi, f"[pypi]\nusername = __token__\npassword = {pypi}\n"),
            Secret("npm-token", npm, f"//registry.npmjs.org/:_authToken={npm}"),
            Secret("github-server-to-server-token", app, f"git clone https://x-access-token:{app}@github.com/acme/shop.git"),
            Secret("aws-secret-access-key", aws, f"aws configure set aws_secret_access_key {aws}"),
            Secret("aws-secret-access-key", aws, f"the key {aws} was pasted in the channel"),
            Secret("generic-password", netrc, f"the staging password is {netrc}, rotate it")]


def _corpus() -> list[Secret]:
    out = []
    for kind, (env, make) in PREFIXED.items():
        for _ in range(2):
            value = make()
            texts = _prefixed_texts(kind, env, value)
            out += [Secret(kind, value.split(" ")[-1], text) for text in texts[:2]]
        value = make()
        out += [Secret(kind, value.split(" ")[-1], text) for text in _prefixed_texts(kind, env, value)[2:]]
    for kind, (env, make) in ASSIGNED.items():
        value = make()
        out += [Secret(kind, value, text) for text in _assigned_texts(env, value)]
    out += _connection_strings() + _headers_and_commands() + _private_keys() + _kubernetes_secrets() + _tool_files()
    return out


SECRETS: list[Secret] = _corpus()


def _negatives() -> list[str]:
    rng = random.Random(SEED + 1)
    hexes = lambda n: "".join(rng.choice(HEX) for _ in range(n))  # noqa: E731
    raw = lambda n: bytes(rng.getrandbits(8) for _ in range(n))  # noqa: E731
    out = []
    for length in (7, 8, 10, 12, 40):
        out += [f"fixed in {hexes(length)}, see the review", f"git cherry-pick {hexes(length)}"]
    out += [f"commit {hexes(40)}\nAuthor: Ana <ana@example.com>", f"object-format sha256 head {hexes(64)}",
            f"reverted {hexes(40)} and {hexes(40)}", f"HEAD is now at {hexes(7)} Keep carts in PostgreSQL"]
    for _ in range(4):
        out += [f"event {uuid.UUID(int=rng.getrandbits(128), version=4)} applied",
                f"request_id={uuid.UUID(int=rng.getrandbits(128), version=4)}",
                f'{{"session_id": "{uuid.UUID(int=rng.getrandbits(128), version=4)}"}}']
    for _ in range(3):
        out += [f"image ghcr.io/acme/shop@sha256:{hexes(64)}", f"sha256:{hexes(64)}  dist/baton.whl",
                f"{hexes(64)}  baton-0.9.0.tar.gz", f"md5 {hexes(32)} for the backup",
                f'"integrity": "sha512-{base64.b64encode(raw(64)).decode()}"',
                f'<script src="app.js" integrity="sha384-{base64.b64encode(raw(48)).decode()}" crossorigin></script>',
                f"integrity sha256-{base64.b64encode(raw(32)).decode()}",
                f"github.com/acme/lib v1.{rng.randint(0, 9)}.0 h1:{base64.b64encode(raw(32)).decode()}",
                f"github.com/acme/lib v1.2.0/go.mod h1:{base64.b64encode(raw(32)).decode()}",
                f"sha1-{base64.b64encode(raw(20)).decode()}"]
    out += ["password=${DB_PASSWORD}", "api_key=$STRIPE_API_KEY", "export OPENAI_API_KEY=$OPENAI_KEY_PROD",
            'password = os.environ["DB_PASSWORD"]', 'token = os.getenv("GITHUB_TOKEN")',
            "const apiKey = process.env.STRIPE_SECRET_KEY;", "api_key: ${{ secrets.OPENAI_API_KEY }}",
            "token: {{ .Values.github.token }}", "SET PASSWORD=%DB_PASSWORD%", "password: <your-password>",
            'ANTHROPIC_API_KEY="<your-api-key>"', "client_secret = settings.OAUTH_CLIENT_SECRET",
            "DB_PASSWORD_FILE=/run/secrets/db_password", 'secret = request.headers["X-Hub-Signature-256"]',
            "api_key = config.get('stripe', 'api_key')", "token = self._token_cache.get(key)",
            "password: ********", "OPENAI_API_KEY=sk-...", "export GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxx",
            "Authorization: Bearer $TOKEN", 'curl -H "Authorization: Bearer ${GITHUB_TOKEN}" https://api.github.com',
            "the token: expires daily; the password field is a placeholder",
            "max_tokens=4096 and temperature=0.2", "tokenizer: bert-base-uncased", "token_type: bearer",
            "password_reset_url: https://shop.example.com/reset", "access_key_id_env: AWS_ACCESS_KEY_ID",
            "secretName: orders-db", "keyRef: orders-db-password", "stripe.api_key = get_secret('stripe')",
            "passwordless login lands in 2.4.0", "the API key rotation runbook is in docs/security.md",
            '"sasl.password": self.scram[1]}', "driver(address, auth=neo4j_server.auth) as driver:",
            'return f"bolt://{self.user}:{self.password}@127.0.0.1:{self.port}"',
            'args = [f"--add-scram=SCRAM-SHA-256=[name={user},password={secret}]"]',
            "shows it as `Authorization: Bearer TOKEN` in the log", "Authorization: Bearer <token>",
            "signature: hmac-sha256:8db4a681:b6c775b335c4e235244880fa81695bfd26bddd233cb340091c57a996a21b8a49",
            'database_url = "postgresql://team_shop@db.internal:5432/baton"  # password: ~/.pgpass',
            "redis://:password@cache:6379/0 is the form the docs use", "curl -u user:pass https://example.com",
            "    cookie: typing.Optional[Cookie] = None", "    Token:                 '#cccccc',",
            "RegEnumKey = win32api.RegEnumKey", "FillMaskOutputElement(score=0.0689, token=11098, token_str=' hope')",
            'DNS_ALPN_H3_JOB_WON_WITHOUT_RACE = "dnsAlpnH3JobWonWithoutRace"',
            'image_url = "https://cdn.example.com/61/93061-050-99147DCE/Statue-of-Liberty-Island-New-York-Bay.jpg"',
            '_HEX_PAT = "[0-9A-Fa-f]{1,4}"', "headers = {'x-amz-date': timestamp, 'Authorization': v4auth_header}",
            "+ 'Credential=' + access_key + '/' + credential_scope + ', '"]
    out += ["OAuth2PasswordRequestForm", "from fastapi.security import OAuth2PasswordRequestForm, OAuth2PasswordBearer",
            "class AbstractSingletonProxyFactoryBean2Configuration:", "HttpClientConnectionManagerFactoryV2Impl",
            "ImportLinterContractFailure raised", "TestConcurrentWritersOnServers2Postgres",
            "KafkaSignalBusConformanceTestSuite3", "test_concurrent_writers_on_servers_with_kafka_sasl_v2",
            "skills.frontends.resident.preload_redaction_rules", "baton.skills.services.secret_scan.find_secrets",
            "useAuthenticatedUserProfileQuery2", "AWSCloudFormationStackSetOperationPreferences2",
            "ReactDOMServerStreamingRenderer18", "SQLAlchemyAsyncSessionMakerFactory2",
            "X509CertificateRevocationListValidator", "getUserAccessTokenExpiryInSeconds",
            "Base64UrlSafeEncoderWithoutPadding", "Sha256HmacSignatureVerifierMiddleware",
            "io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporterBuilder"]
    out += ["src/baton/skills/frontends/cli.py:42", "/home/ana/Projects/Baton2/src/baton/redaction.py",
            "C:\\Users\\Ana\\AppData\\Local\\Baton\\registry.db", "/usr/lib/x86_64-linux-gnu/libssl.so.3",
            "node_modules/@types/react-dom/server.d.ts", "~/.config/baton/baton.toml",
            "/var/lib/docker/overlay2/l/ABCDEFGHIJ2KLMNOPQRST3UVWX/diff", "tests/fixtures/Cargo.lock"]
    out += ["baton 0.9.0", "python 3.11.9", "node v20.11.1", "psycopg[binary]==3.2.1", "numpy>=1.26,<3",
            "go1.22.5 linux/amd64", "version: 2.4.0-rc.1+build.20260112", "ubuntu-22.04", "v1.2.3-alpha.4"]
    out += ["fixed SHOP-101 and OMN-2", "see JIRA-12345 and PROJ-7", "closes #4521", "ACME-9981 blocked on INFRA-12"]
    out += ["https://github.com/acme/shop/pull/4521", "https://docs.example.com/api/v2/auth?lang=en&page=3",
            "postgresql://db.internal:5432/orders", "redis://cache:6379/0", "bolt://127.0.0.1:7687",
            "https://hooks.example.com/services/status", "amqp://rabbit:5672/", "mongodb://mongo-0:27017/admin",
            "git@github.com:acme/shop.git", "http://localhost:8080/healthz",
            "https://www.youtube.com/watch?v=dQw4w9WgXcQ", "https://storage.googleapis.com/acme-public/logo.png"]
    for sentence in ("The quick brown fox jumps over the lazy dog near the river bank.",
                     "Keep carts in PostgreSQL, not Redis, because totals need transactions.",
                     "Use optimistic locking on the cart row and retry twice on conflict.",
                     "Deploys happen on Tuesdays after the standup, never on Fridays.",
                     "Remember to rotate the staging certificates before the end of the quarter."):
        encoded = base64.b64encode(sentence.encode()).decode()
        out += [f"payload {encoded}", f'"message": "{encoded}"']
    out += ["use SQLite in WAL mode for the registry; PostgreSQL on the servers",
            "Keep carts in PostgreSQL, not Redis", "the password field is empty", "token: expires daily",
            "Retry with exponential backoff capped at 30s", "BATON_BACKGROUND_INDEXING=off", "LOG_LEVEL=debug",
            "timeout_ms: 2500", "region = us-east-1", "replicas: 3", "image: postgres:16-alpine",
            "AWS_REGION=eu-west-1", "NODE_ENV=production", "public key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 ana@laptop",
            "-----BEGIN CERTIFICATE----- is public", "10.0.0.12:5432 and 192.168.1.20", "2026-12-01T14:39:36Z",
            "1,000 active sessions of 20 files each", "p50 12.4 ms, p90 18.1 ms", "exit code 137 (OOMKilled)",
            "kind: ConfigMap\ndata:\n  LOG_LEVEL: debug\n  FEATURE_FLAGS: carts,payments\n",
            "the pk_test prefix marks a publishable key"]
    return out


NEGATIVES: list[str] = _negatives()
