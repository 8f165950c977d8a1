"""The table of secret formats that baton.redaction finds: each provider's documented token
format (prefix, alphabet, length), private keys, JSON web tokens, credentials in URLs and
connection strings, and secrets by the name they are assigned to or the header they
travel in.

A rule is (kind, anchors, pattern, flags, group, check):
  kind     the marker's name: `[REDACTED:kind]`;
  anchors  literal strings one of which the text must hold for the pattern to be tried
           (lower-case and looked up in the lower-cased text when the pattern ignores
           case); empty: always tried; NAMED: tried only where a name ending in one of
           NAME_ENDINGS stands before `=`, `:` or ` is ` (a search for the name itself at
           every word costs 8 ms on a decision of 4,000 characters). They keep the cost of a text that holds no secret
           to a few substring searches, and let a pattern be compiled only when a text
           may hold its secret;
  group    the group holding the secret (0: the whole match);
  check    the name of a test the secret must pass (baton.redaction.CHECKS), or "".

Why a table of Baton's own rather than a scanner's: bench/redaction.py measures the
candidates on tests/secret_corpus.py (docs/security.md, "Secrets").
"""

from __future__ import annotations

import re

# Before a token: no letter or digit (a token is not the tail of a longer word).
_B = r"(?<![A-Za-z0-9])"
# After a token: not more of the token's alphabet.
_E = r"(?![A-Za-z0-9])"

Rule = tuple[str, tuple[str, ...], str, int, int | str, str]
NAMED = ("\0name",)  # the anchors of a rule tried at a credential's name (below)


def _token(kind: str, prefixes: str, body: str) -> Rule:
    """A token that starts with one of prefixes (separated by blanks; they are its anchors),
    not preceded by a letter or digit, followed by body. The pattern starts with the prefix
    itself, its boundary checked behind it, so that re searches for the prefix's letters (a
    pattern that starts with a look-behind is tried at every position: 30 times slower on a
    long output)."""
    anchors = tuple(prefixes.split())
    alternatives, loose = ("|".join(f"{re.escape(prefix)}(?<![A-Za-z0-9]{re.escape(prefix)})" for prefix in chosen)
                           for chosen in (anchors, [prefix for prefix in anchors if _distinctive(prefix)]))
    # A distinctive prefix decides whatever its body (a placeholder, a shorter or older format),
    # but for x's (ghp_xxxx...: a document's example, as in baton.redaction's references).
    loose = f"|(?:{loose})(?!x{{4}}|X{{4}})[A-Za-z0-9]{{16,}}" if loose else ""
    return kind, anchors, f"(?:{alternatives}){body}{loose}", 0, 0, ""


def _distinctive(prefix: str) -> bool:
    """A prefix no word or identifier starts with: 4 characters or more ending in `_`, `-` or
    `.`, not a word (`live_`, `test_`, `key-`, `secret_` start identifiers)."""
    return len(prefix) >= 4 and prefix[-1] in "_-." and not re.fullmatch(
        r"(?i:api|ext|key|live|mob|pat|sat|pubkey|sdk|secret|test|authress|scauth|access-\w+)[_.-]", prefix)


_W = r"[A-Za-z0-9_-]"  # base64url
_HEX = r"[a-f0-9]"
_UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"

PROVIDER_TOKENS: tuple[Rule, ...] = (
    # AI providers
    _token("openai-key", "sk-proj- sk-svcacct- sk-admin- sk-None-", f"{_W}{{40,}}"),
    _token("anthropic-key", "sk-ant-", rf"(?:api|admin|sid|oat|ort)\d\d-{_W}{{80,}}"),
    _token("google-api-key", "AIza", f"{_W}{{35}}{_E}"),
    _token("gcp-oauth-client-secret", "GOCSPX-", f"{_W}{{28}}"),
    _token("gcp-access-token", "ya29.", f"{_W}{{30,}}"),
    _token("groq-api-key", "gsk_", r"[A-Za-z0-9]{52}"),
    _token("xai-api-key", "xai-", r"[A-Za-z0-9]{70,}"),
    _token("perplexity-api-key", "pplx-", r"[A-Za-z0-9]{40,}"),
    _token("replicate-api-token", "r8_", r"[A-Za-z0-9]{37}"),
    _token("huggingface-token", "hf_ api_org_", r"[A-Za-z]{34}"),
    _token("openrouter-api-key", "sk-or-v1-", f"{_HEX}{{64}}"),
    _token("deepseek-api-key", "sk-", f"{_HEX}{{32}}{_E}"),
    _token("langsmith-api-key", "lsv2_pt_ lsv2_sk_", f"{_HEX}{{32}}_{_HEX}{{10}}"),
    _token("fireworks-api-key", "fw_", r"[A-Za-z0-9]{24,}"),
    _token("tavily-api-key", "tvly-", r"(?:dev-|prod-)?[A-Za-z0-9]{32}"),
    _token("pinecone-api-key", "pcsk_", r"[A-Za-z0-9_]{50,}"),
    _token("cerebras-api-key", "csk-", r"[a-z0-9]{48}"),
    _token("elevenlabs-api-key", "sk_", f"{_HEX}{{48}}{_E}"),
    # cloud
    _token("aws-access-key", "AKIA ASIA ABIA ACCA A3T", r"[A-Z0-9]{16,17}(?![A-Z0-9])"),
    _token("alibaba-access-key", "LTAI", r"[A-Za-z0-9]{12,20}"),
    _token("digitalocean-token", "dop_v1_ doo_v1_ dor_v1_", f"{_HEX}{{64}}"),
    _token("heroku-api-key", "HRKU-", f"{_W}{{50,}}"),
    _token("cloudflare-origin-ca-key", "v1.0-", f"{_HEX}{{24}}-{_HEX}{{146}}"),
    _token("flyio-token", "fo1_", f"{_W}{{43}}"),
    _token("flyio-token", "fm1r_ fm1a_ fm2_", r"[A-Za-z0-9+/=_-]{40,}"),
    _token("yandex-api-key", "AQVN", f"{_W}{{35,38}}"),
    _token("gcp-refresh-token", "1//0", f"{_W}{{40,}}"),
    _token("openshift-token", "sha256~", f"{_W}{{43}}"),
    _token("clickhouse-cloud-key", "4b1d", r"[A-Za-z0-9]{38}"),
    # source hosting and CI
    _token("github-token", "ghp_ gho_ ghu_ ghs_ ghr_", r"[A-Za-z0-9]{36,255}"),
    _token("github-token", "github_pat_", r"[A-Za-z0-9_]{60,255}"),
    _token("gitlab-token", "glpat- gldt- glrt- glptt- glsoat- glft- gloas- glcbt- glimt- glagent- glffct- glwt- "
                           "GR1348941", r"[A-Za-z0-9_.-]{20,}"),
    _token("bitbucket-app-password", "ATBB", r"[A-Za-z0-9_=.-]{32,}"),
    _token("circleci-token", "CCIPAT_ CCIPRJ_", r"[A-Za-z0-9]{22}_[a-f0-9]{40}"),
    _token("buildkite-token", "bkua_", f"{_HEX}{{40}}"),
    _token("atlassian-api-token", "ATATT3 ATCTT3", r"[A-Za-z0-9_=-]{150,}"),
    _token("sonarqube-token", "squ_ sqp_ sqa_", f"{_HEX}{{40}}"),
    _token("sourcegraph-token", "sgp_", f"(?:{_HEX}{{16}}_)?{_HEX}{{40}}"),
    _token("octopus-deploy-api-key", "API-", r"[A-Z0-9]{26}(?![A-Z0-9])"),
    _token("harness-token", "pat. sat.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    # package registries
    _token("npm-token", "npm_", r"[A-Za-z0-9]{36}"),
    _token("pypi-token", "pypi-AgEIcHlwaS5vcmc pypi-AgENdGVzdC5weXBpLm9yZw", f"{_W}{{50,}}"),
    _token("rubygems-api-key", "rubygems_", f"{_HEX}{{48}}"),
    _token("nuget-api-key", "oy2", r"[a-z0-9]{43}"),
    _token("docker-token", "dckr_pat_ dckr_oat_", f"{_W}{{27,}}"),
    _token("clojars-token", "CLOJARS_", r"[a-z0-9]{60}"),
    _token("crates-io-token", "cio", f"[A-Za-z0-9]{{32}}{_E}"),
    _token("jfrog-token", "AKCp", r"[A-Za-z0-9]{69}"),
    _token("jfrog-token", "cmVmdGtuOjAxOj", r"[A-Za-z0-9]{40,}"),
    _token("pulumi-token", "pul-", f"{_HEX}{{40}}"),
    # chat and webhooks
    _token("slack-token", "xoxb- xoxp- xoxa- xoxo- xoxs- xoxr- xoxe- xoxe. xapp-", r"[A-Za-z0-9.-]{10,}"),
    _token("twilio-api-key", "SK", f"{_HEX}{{32}}{_E}"),
    # payments
    _token("stripe-access-key", "sk_live_ sk_test_ rk_live_ rk_test_", r"[A-Za-z0-9]{20,247}"),
    _token("stripe-publishable-key", "pk_live_ pk_test_", r"[A-Za-z0-9]{20,247}"),
    _token("stripe-webhook-secret", "whsec_", r"[A-Za-z0-9+/=]{32,}"),
    _token("square-token", "EAAA", f"{_W}{{60}}"),
    _token("square-token", "sq0atp- sq0idp-", f"{_W}{{22}}"),
    _token("square-token", "sq0csp-", f"{_W}{{43}}"),
    _token("braintree-access-token", "access_token$", r"(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}"),
    _token("shopify-token", "shpat_ shpss_ shpca_ shppa_", r"[a-fA-F0-9]{32}"),
    _token("flutterwave-secret-key", "FLWSECK", r"(?:_TEST)?-[a-f0-9]{32}-X"),
    _token("shippo-token", "shippo_live_ shippo_test_", f"{_HEX}{{40}}"),
    _token("easypost-api-key", "EZAK EZTK", r"[A-Za-z0-9]{54}"),
    _token("duffel-token", "duffel_test_ duffel_live_", f"{_W}{{43}}"),
    _token("gocardless-token", "live_", r"(?=[A-Za-z_=-]{0,39}\d)[A-Za-z0-9_=-]{40}"),  # not live_holder_...
    _token("lob-api-key", "live_ test_", f"{_HEX}{{35}}{_E}"),
    _token("facebook-access-token", "EAAB EAAC EAAG EAAM EAAJ EAAI", r"[A-Za-z0-9]{100,}"),
    _token("twitter-bearer-token", "AAAAAAAAAAAAAAAAAAAAA", r"[A-Za-z0-9%]{80,}"),
    # email and messaging
    _token("sendgrid-api-key", "SG.", f"{_W}{{22}}\\.{_W}{{43}}"),
    _token("mailgun-api-key", "key- pubkey-", f"{_HEX}{{32}}{_E}"),
    _token("brevo-api-key", "xkeysib- xsmtpsib-", f"{_HEX}{{64}}-[A-Za-z0-9]{{16}}"),
    _token("resend-api-key", "re_", r"[A-Za-z0-9]{8}_[A-Za-z0-9]{24}"),
    # observability
    _token("newrelic-key", "NRAK- NRII- NRJS- NRAA- NRIQ- NRSP-", f"{_W}{{19,32}}"),
    _token("sentry-token", "sntrys_", r"[A-Za-z0-9+/=_]{50,}"),
    _token("sentry-token", "sntryu_", f"{_HEX}{{64}}"),
    _token("grafana-token", "glc_", r"[A-Za-z0-9+/=_]{32,}"),
    _token("grafana-token", "glsa_", r"[A-Za-z0-9]{32}_[a-fA-F0-9]{8}"),
    _token("dynatrace-token", "dt0c01.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    # databases and platforms
    _token("supabase-token", "sbp_", f"{_HEX}{{40}}"),
    _token("supabase-token", "sb_secret_", f"{_W}{{30,}}"),
    _token("planetscale-token", "pscale_tkn_ pscale_pw_ pscale_oauth_", r"[A-Za-z0-9_.=-]{32,64}"),
    _token("databricks-token", "dapi", f"{_HEX}{{32}}(?:-\\d)?"),
    _token("vault-token", "hvs. hvb.", f"{_W}{{90,}}"),
    _token("linear-api-key", "lin_api_", r"[A-Za-z0-9]{40}"),
    _token("notion-token", "ntn_", r"\d{11}[A-Za-z0-9]{35}"),
    _token("notion-token", "secret_", f"[A-Za-z0-9]{{43}}{_E}"),
    _token("airtable-token", "pat", f"[A-Za-z0-9]{{14}}\\.{_HEX}{{64}}"),
    _token("figma-token", "figd_", f"{_W}{{40}}"),
    _token("postman-api-key", "PMAK-", f"{_HEX}{{24}}-{_HEX}{{34}}"),
    _token("netlify-token", "nfp_", r"[A-Za-z0-9]{36}"),
    _token("age-secret-key", "AGE-SECRET-KEY-1", r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _token("1password-token", "ops_eyJ", r"[A-Za-z0-9+/=_-]{100,}"),
    _token("tailscale-key", "tskey-", r"(?:api|auth|client|scim|webhook)-[A-Za-z0-9]+-[A-Za-z0-9]+"),
    _token("doppler-token", "dp.pt. dp.st. dp.sa. dp.ct. dp.scim. dp.audit.", r"[A-Za-z0-9_.-]{40,}"),
    _token("infracost-api-key", "ico-", r"[A-Za-z0-9]{32}"),
    _token("contentful-token", "CFPAT-", f"{_W}{{43}}"),
    _token("dropbox-token", "sl.", r"[A-Za-z0-9_=.-]{130,}"),
    _token("mapbox-secret-token", "sk.eyJ", r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}"),
    _token("frameio-token", "fio-u-", r"[A-Za-z0-9_=-]{64}"),
    _token("typeform-token", "tfp_", f"{_W}{{44}}_{_W}{{14}}"),
    _token("prefect-api-key", "pnu_", r"[A-Za-z0-9]{36}"),
    _token("readme-api-key", "rdme_", r"[a-z0-9]{70}"),
    _token("scalingo-token", "tk-us-", f"{_W}{{48}}"),
    _token("adobe-client-secret", "p8e-", r"[A-Za-z0-9]{32}"),
    _token("defined-networking-key", "dnkey-", r"[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}"),
    _token("settlemint-token", "sm_pat_ sm_aat_ sm_sat_", r"[A-Za-z0-9]{16}"),
    _token("authress-key", "sc_ ext_ scauth_ authress_",
           r"[a-z0-9]{5,30}\.[a-z0-9]{4,6}\.acc[_-][a-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}"),
    _token("onfido-api-token", "api_live. api_live_ca. api_live_us. api_sandbox.",
           r"[A-Za-z0-9_-]{11}\.[A-Za-z0-9_-]{32}"),
    # a prefix and a UUID (payments, platforms)
    _token("plaid-access-token", "access-sandbox- access-development- access-production-", _UUID),
    _token("launchdarkly-key", "api- sdk- mob-", _UUID),
)

# Providers' formats that are not a prefix and a body (_token): their anchor stands inside
# or around the secret, or they have none.
PROVIDER_PATTERNS: tuple[Rule, ...] = (
    # AI providers
    ("openai-key", ("T3BlbkFJ",), rf"{_B}sk-[A-Za-z0-9_-]{{20,}}T3BlbkFJ[A-Za-z0-9_-]{{20,}}", 0, 0, ""),
    # cloud
    ("azure-container-registry-password", ("+ACR",),
     r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{42}\+ACR[A-Za-z0-9]{6}", 0, 0, ""),
    ("azure-client-secret", ("Q~",), r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", 0, 0, ""),
    ("azure-storage-key", ("accountkey", "sharedaccesskey"),
     r"(?i)\b(?:Account|SharedAccess)Key\s*=\s*([A-Za-z0-9+/]{20,}={0,2})", 0, 1, ""),
    ("azure-sas-signature", ("sig=",), r"[?&]sig=([A-Za-z0-9%+/=_-]{20,})", 0, 1, ""),
    # package registries
    ("terraform-cloud-token", (".atlasv1.",), rf"{_B}[A-Za-z0-9]{{14}}\.atlasv1\.[A-Za-z0-9_=-]{{60,70}}", 0, 0, ""),
    # chat and webhooks
    ("slack-webhook", ("hooks.slack.com/",),
     r"\bhooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}", 0, 0, ""),
    ("discord-webhook", ("discord",),
     r"\bdiscord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+", 0, 0, ""),
    ("discord-bot-token", (),
     r"(?<![A-Za-z0-9_-])[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}", 0, 0, ""),
    ("telegram-bot-token", (":AA",), r"(?<![0-9])\d{8,10}:AA[A-Za-z0-9_-]{33}", 0, 0, ""),
    ("teams-webhook", ("webhook.office.com", "outlook.office.com/webhook"),
     r"(?<![\w.-])[\w-]+\.(?:webhook\.office\.com/webhookb2|office\.com/webhook)/[^\s\"'<>]+", 0, 0, ""),
    # email and messaging
    ("mailchimp-api-key", ("-us",), rf"{_B}{_HEX}{{32}}-us\d{{1,2}}{_E}", 0, 0, ""),
    # databases and platforms
    ("asana-token", ("0/", "1/", "2/"), rf"{_B}[012]/\d{{16}}(?:/\d{{16}})?:{_HEX}{{32}}{_E}", 0, 0, ""),
)

STRUCTURED: tuple[Rule, ...] = (
    # A service account's JSON key file, whole: its private key, key id, client and project.
    ("gcp-service-account-key", ('"service_account"',),
     r"\{[^{}]*\\?\"type\\?\"\s*:\s*\\?\"service_account\\?\"[^{}]*\}", 0, 0, ""),
    ("private-key", ("-----BEGIN",),
     r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
     re.S, 0, ""),
    ("private-key", ("PuTTY-User-Key-File",), r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:\s*[0-9a-fA-F]+|\Z)",
     re.S, 0, ""),
    # Signed (3 parts), unsigned (an empty third) and encrypted (5 parts) tokens.
    ("json-web-token", ("eyJ",), (r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*"
                                  r"(?:\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)?"), 0, 0, ""),
    # scheme://user:password@host, the user possibly empty (redis://:password@cache).
    ("basic-auth-credentials", ("://",),
     r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@\"'<>]*:([^\s@/\"'<>]+)@", 0, 1, "reference"),
)

# Names a secret is assigned to: one of these words ends the name, however it is
# prefixed or cased (OPENAI_API_KEY, stripe_api_token, DB_PASSWORD, client-secret,
# apiKey). A value assigned to one needs a digit or a symbol (`token: expires daily` is prose).
_STRONG = (r"pass(?:word|wd|phrase)?|pwd?|secret|token|credentials?|api[_-]?key|auth[_-]?key|access[_-]?key"
           r"|private[_-]?key|secret[_-]?key|sas|connection[_-]?string|crumb")
# A name that ends in `key`, `auth`, `private` or `pat` (a personal access token, or a
# regular expression's pattern) is a secret's only when its value looks like a token (16
# characters or more of letters, digits and `-_.~+/=`, with both): `sort_key: created_at`,
# `_HEX_PAT = "[0-9A-Fa-f]{1,4}"`. (A signature is not a secret: `signature: hmac-sha256:...`.)
_WEAK = r"key|auth|private|[_-]pat|(?-i:Pat)"
# How the names above end, lower-cased: where baton.redaction tries the NAMED rules.
NAME_ENDINGS = ("pass", "passwd", "password", "passphrase", "pwd", "pw", "secret", "token", "credential", "credentials",
                "key", "auth", "private", "pat", "sas", "string", "crumb")
# A stage, a number, a version or the value's form after a strong word (DB_PASSWORD_PROD, password_value):
# possessive, longer words first, as a run of digits must not backtrack (`(\d+)*` is exponential).
QUALIFIER = (r"(?:[_.-]?(?:\d++|v\d++|production|prod|development|dev|staging|stage|stg|testing|test|qa|uat|live"
             r"|local|sandbox|primary|secondary|backup|old|new|current|next|previous|prev|default|main|root|admin"
             r"|value|val|string|str|plaintext|plain|raw|bytes|base64|b64|hex|encoded|enc|literal))*+")
# A credential's word run into other words (fooapikeyfoo, tokenSecretValue), tried after every ending above,
# not before an attribute (Token.Name.Builtin: an object's); 40 characters each side: linear on a long run.
RUN_IN = r"pass(?:word|wd|phrase)|secret|token|credential|(?:api|auth|access|private)[_-]?key"
_NAMED_LIKE = (rf"(?:[\w.-]*?(?:(?P<strong>{_STRONG}){QUALIFIER}|(?P<weak>{_WEAK}))"
               rf"|(?P<run_in>[\w.-]{{0,40}}?(?:{RUN_IN})[\w-]{{0,40}}?))")
_NAME = rf"(?<![\w./-]){_NAMED_LIKE}"
# `=`, `:`, `:=`, `=>`, in prose ` is ` or ` ---- `, or blanks before a quoted value (a DSL's call
# without parentheses: Groovy's `password 'x'`, Ruby's, nginx's).
_SEPARATOR = r"[ \t]*(?::=|=>|=|:)[ \t]*|[ \t]+(?:is|-{2,})[ \t]+|[ \t]+(?=[\"'])"
# YAML's value on the next line, more indented: a plain scalar alone on its line (not a
# list's `- item` or a mapping's `key:`), or a block scalar's (`key: |`, `key: >-`) lines.
_NEXT_LINE = r"[ \t]*:[ \t]*\n[ \t]+(?=[^\s#-]\S*(?<!:)[ \t]*(?:\n|$))"
_BLOCK_SCALAR = (r"[ \t]*:[ \t]*[|>][+-]?[1-9]?[ \t]*\n"
                 r"(?P<indent>[ \t]+)(?P<value>\S[^\n]*(?:\n(?P=indent)[^\n]*\S)*)")
# A value: quoted (up to its quote) or bare (up to a blank or a quote, without the comma
# or bracket that closes the code around it).
_VALUE = r"(?P<quote>[\"'`])?(?P<value>(?(quote)(?:(?!(?P=quote))[^\n])+|[^\s\"'`]*[^\s\"'`,;)\]}]))"
# A field's name, its separator and an opening quote (key="..., "name": "..., <key>...), what
# may stand between a pair's two fields, the name's field and the value's.
_FIELD = r"[\"']?[ \t]*(?:[:=][ \t]*|>)"
_BETWEEN = r"[^\n]{0,40}?(?:\n[ \t-]*)?"
_PAIRED_NAME = rf"(?:\b(?:key|name){_FIELD}[\"']?|<){_NAMED_LIKE}(?=[\"'\s<,}}])"
_PAIRED_VALUE = rf"\bvalue{_FIELD}(?P<quote>[\"'])?(?P<value>(?(quote)[^\"'\n]+|[^\s\"'<>,}}]+))"

ASSIGNMENTS: tuple[Rule, ...] = (
    # NAME=value, NAME: value, "name": "value", name := value, export NAME='value', --name=value,
    # name @"value" (Objective-C, C#), name = """value"""
    ("secret-keyword", NAMED, rf"(?i){_NAME}[\"']?{_BLOCK_SCALAR}", 0, "value", "keyword"),
    ("secret-keyword", NAMED,
     (rf"(?i)(?<![?&;]){_NAME}[\"']?\]?(?:{_NEXT_LINE}|{_SEPARATOR})"
      rf"(?:new[ \t]+String\(|@(?=[\"'])|\"\"(?=\")|''(?='))?{_VALUE}"), 0, "value", "keyword"),
    # a call's pair of a quoted name or a symbol and a quoted value: define('DB_PASSWORD', '...'),
    # .set("password", "..."), set :password, '...', send("password=", "...")
    ("secret-keyword", NAMED, rf"(?i)(?<=[\"':]){_NAME}=?[\"']?[ \t]*,[ \t]*(?P<q>[\"'])(?P<value>[^\"'\n]+)(?P=q)", 0,
     "value", "keyword"),
    # name=value inside a URL's query or a connection string (`?password=...&`, `;Pwd=...;`)
    ("secret-keyword", NAMED, rf"(?i)(?<=[?&;]){_NAME}=(?P<value>[^&;\s\"']+)", 0, "value", "keyword"),
    # A name and a value as a pair of fields, either first, in XML attributes or elements, JSON
    # or YAML: <add key="Password" value="..."/>, <add value="..." name="db.password"/>,
    # <Password value="..."/>, <key>password</key><value>...</value>, {"name": "password",
    # "value": "..."}, a Kubernetes env entry `- name: DB_PASSWORD` and `value: ...` below it.
    ("secret-keyword", ("value",), rf"(?i){_PAIRED_NAME}{_BETWEEN}{_PAIRED_VALUE}", 0, "value", "keyword"),
    ("secret-keyword", ("value",), rf"(?i){_PAIRED_VALUE}{_BETWEEN}{_PAIRED_NAME}", 0, "value", "keyword"),
    ("secret-keyword", ("</",), (rf"(?i)<(?:[\w.-]+[ \t]+(?:key|name)=[\"'])?{_NAMED_LIKE}[\"']?"
                                 rf"(?P<quote>>)(?P<value>[^<\n]+)</"), 0, "value", "keyword"),
    # mysql -pSECRET, mysql -p 'SECRET' (its password follows -p with no blank)
    ("secret-keyword", ("mysql",), r"\bmysql\w*\b[^\n]*?[ \t]-p[\"']?([^\s\"']+)", 0, 1, "reference"),
    # docker login -u USER -p SECRET, sshpass -p SECRET
    ("secret-keyword", ("login", "sshpass"), r"\b(?:login|sshpass)\b[^\n]*?[ \t]-p[ \t]+[\"']?([^\s\"']+)", 0, 1,
     "reference"),
    # Windows' setx NAME VALUE, fish's set -x NAME VALUE
    ("secret-keyword", ("set",), rf"(?i)\bset(?:x|[ \t]+-[a-z]*x[a-z]*)[ \t]+{_NAME}[ \t]+{_VALUE}", 0, "value",
     "keyword"),
    # a command's option: --password VALUE, --token VALUE
    ("secret-keyword", ("--",), rf"(?i)(?<![\w-])--[\w-]*?(?P<strong>{_STRONG})[ \t]+{_VALUE}", 0, "value", "keyword"),
    # ~/.netrc: machine HOST login USER password SECRET
    ("secret-keyword", ("machine",), r"(?s)\bmachine\s+\S+.*?\bpassword[ \t]+([^\s\"']+)", 0, 1, "reference"),
    # .npmrc's credentials per registry (//host/path/:_authToken=...), SonarQube's sonar.login
    ("secret-keyword", (":_",), r"//[^\s:]+:_(?:auth|authToken|password)[ \t]*=[ \t]*([^\s\"']+)", 0, 1, "reference"),
    ("secret-keyword", ("sonar.login",), r"\bsonar\.login[ \t]*[=:][ \t]*[\"']?([^\s\"']+)", 0, 1, "reference"),
    # curl -u user:password
    ("basic-auth-credentials", ("-u", "--user"),
     r"(?<![\w-])(?:-u|--user)[ \t=]+[\"']?[^\s\"':]*:[\"']?([^\s\"']+)", 0, 1, "reference"),
    # Authorization: [scheme] credential (Bearer, Basic, token, SSWS, Bot ...)
    ("http-authorization", ("authorization",),
     (r"(?i)(?<![\w-])(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:[a-z][a-z0-9-]*[ \t]+)?"
      r"([^\s\"',;]*[^\s\"',;)\]}])"), 0, 1, "credential"),
    ("http-authorization", ("bearer",), r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/=-]{16,})", 0, 1, "credential"),
    # Cookie: a=1; b=2 (a header line, or one quoted in a sentence: each pair up to the next blank)
    ("http-cookie", ("cookie",),
     r"(?i)(?<![\w-])(?:set-)?cookie[ \t]*:[ \t]*([\w.-]+=[^\s\"';]*(?:;[ \t]*[\w.-]+=[^\s\"';]*)*;?)", 0, 1, ""),
    ("http-cookie", ("curl",), r"\bcurl\b[^\n]*?\s(?:-b|--cookie)[ \t=]+[\"']?([^\s\"']+)", 0, 1, "reference"),
)

RULES: tuple[Rule, ...] = STRUCTURED + PROVIDER_TOKENS + PROVIDER_PATTERNS + ASSIGNMENTS
