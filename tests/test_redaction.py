"""The redactor: secrets of every kind found and replaced, prose left alone, the rules
compiled only when a text may hold their secret (tests/test_redaction_corpus.py drives
the whole corpus)."""

from __future__ import annotations

import random
import string

import pytest

from baton.redaction import redactor
from baton.secret_rules import RULES
from tests.secret_corpus import BARE_SHAPES, drawn

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAn1x\nq8Zt0Yw==\n-----END RSA PRIVATE KEY-----"
SECRETS = {  # kind: (text holding a secret, the secret)
    "aws-access-key": ("bucket reads with AKIAIOSFODNN7EXAMPLE now", "AKIAIOSFODNN7EXAMPLE"),
    "aws-secret": ('aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
                   "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    "github-token": ("pushed with ghp_1234567890abcdefghijklmnopqrstuvwxyz",
                     "ghp_1234567890abcdefghijklmnopqrstuvwxyz"),
    "gitlab-token": ("CI uses glpat-xY7kL9mN2pQ4rS6tU8vW", "glpat-xY7kL9mN2pQ4rS6tU8vW"),
    "slack-token": ("bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    "stripe-access-key": ("charge with sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    "basic-auth-credentials": ("postgresql://admin:hunter2@db.example.com:5432/app", "hunter2"),
    "json-web-token": (("Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
                        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"), "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    "private-key": (f"the deploy key:\n{PEM}\nis rotated", "MIIEowIBAAKCAQEAn1x"),
    "sendgrid-api-key": ("mail via 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",
                         "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr"),
    "npm-token": ("//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
                   "npm_abcdefghijklmnopqrstuvwxyz0123456789"),
    "pypi-token": ("upload with pypi-AgEIcHlwaS5vcmc" + "Ab1" * 24, "Ab1" * 24),
    "secret-keyword": ("the staging password: Sup3rS3cret!x expires", "Sup3rS3cret!x"),
    "high-entropy-string": ("the webhook signs with xJ8kLm2Qp9RtVw3Yz5Ab7Cd1EfGh", "xJ8kLm2Qp9RtVw3Yz5Ab7Cd1EfGh"),
}
PROSE = [
    "use SQLite in WAL mode for the registry; PostgreSQL on the servers",
    "fixed in 3f9c2e1b4d5a3f9c2e1b4d5a3f9c2e1b4d5a3f9a, see test_concurrent_writers_on_servers",
    "ImportLinterContractFailure raised; event 550e8400-e29b-41d4-a716-446655440000",
    "the token: expires daily; password=correct-horse is a placeholder",
    "src/baton/skills/frontends/cli.py:42 and BATON_BACKGROUND_INDEXING=off",
]


@pytest.fixture(scope="module")
def redact(tmp_path_factory):
    return redactor(tmp_path_factory.mktemp("home")).redact


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_of_secret_is_replaced_by_its_marker(redact, kind):
    text, secret = SECRETS[kind]
    result = redact(text)
    assert secret not in result.text
    expected = "secret-keyword" if kind == "aws-secret" else kind
    assert result.kinds == (expected,)
    assert f"[REDACTED:{expected}]" in result.text


def test_context_around_a_secret_stays(redact):
    assert redact(SECRETS["basic-auth-credentials"][0]).text == \
        "postgresql://admin:[REDACTED:basic-auth-credentials]@db.example.com:5432/app"
    assert redact(SECRETS["private-key"][0]).text == "the deploy key:\n[REDACTED:private-key]\nis rotated"


@pytest.mark.parametrize("text", PROSE)
def test_prose_identifiers_and_digests_are_left_alone(redact, text):
    assert redact(text).text == text
    assert redact(text).kinds == ()


def test_several_secrets_in_one_text(redact):
    text = " and ".join(text for text, _ in SECRETS.values())
    result = redact(text)
    assert not [secret for _, secret in SECRETS.values() if secret in result.text]
    assert len(result.kinds) >= len(SECRETS)


def test_an_allowlisted_match_is_kept(tmp_path):
    text = "the docs' example key AKIAIOSFODNN7EXAMPLE"
    assert redactor(tmp_path, allow=[r"EXAMPLE$"]).redact(text).text == text
    assert "[REDACTED:aws-access-key]" in redactor(tmp_path).redact(text).text


def test_building_the_redactor_compiles_only_the_rules_a_text_may_need(tmp_path):
    """A hook builds the redactor for one text: a rule is compiled when the text holds one of
    its anchors, and the data home is left as it was."""
    built = redactor(tmp_path)
    assert built._compiled == {}
    built.redact(PROSE[0])
    always = [index for index, rule in enumerate(RULES) if not rule[1]]
    assert sorted(built._compiled) == always and len(always) < 5
    assert built.redact(SECRETS["github-token"][0]).kinds == ("github-token",)
    assert len(built._compiled) < len(always) + 3
    assert list(tmp_path.iterdir()) == []


def test_a_resident_compiles_every_rule_once():
    built = redactor(None)
    built.warm()
    assert len(built._compiled) == len(RULES)
    assert built.redact(SECRETS["aws-access-key"][0]).kinds == ("aws-access-key",)


@pytest.mark.parametrize("length", [24, 40, 64, 100, 200, 512])
def test_random_tokens_of_any_length_are_found_by_their_entropy(redact, length):
    """A token of no known format: 24 to 512 characters of base62 or base64, bare in a sentence."""
    rng = random.Random(length)
    found = 0
    for n in range(200):
        alphabet = string.ascii_letters + string.digits + ("+/" if n % 2 else "")
        token = "".join(rng.choice(alphabet) for _ in range(length - 3)) + "aZ7"
        found += redact(f"the upstream answered {token} once").kinds == ("high-entropy-string",)
    assert found >= 0.97 * 200, found


@pytest.mark.parametrize("shape", sorted(BARE_SHAPES))
def test_a_bare_random_token_is_found_whatever_its_alphabet(redact, shape):
    """Random tokens of 32 and 48 characters with nothing that names them: 95% found
    (24 characters: 85% and more, tests/test_redaction.py's measure in bench/redaction.py)."""
    rng = random.Random(shape)
    for length, share in ((32, 0.9), (48, 0.95)):
        tokens = [BARE_SHAPES[shape](rng, length) for _ in range(200)]
        found = sum(redact(f"the upstream answered {token} once").kinds == ("high-entropy-string",) for token in tokens)
        assert found >= share * len(tokens), (length, found)


@pytest.mark.parametrize("shape", ["hex in groups of 4", "base64 with = inside"])
def test_short_hex_groups_and_base64_joined_by_equals_are_weighed(redact, shape):
    """Hex in groups shorter than a file name's parts (a key printed as `a1b2-c3d4-...`) and
    base64 runs joined by `=` (no side is a name, so the token is weighed whole): 85% found."""
    rng = random.Random(shape)
    base64 = string.ascii_letters + string.digits + "+/"
    for length in (32, 48):
        if shape == "hex in groups of 4":
            tokens = ["-".join(drawn(rng, "0123456789abcdef", 4) for _ in range(length // 4)) for _ in range(200)]
        else:
            tokens = [drawn(rng, base64, length // 2) + "=" + drawn(rng, base64, length // 2) for _ in range(200)]
        found = sum(bool(redact(f"the upstream answered {token} once").kinds) for token in tokens)
        assert found >= 0.85 * len(tokens), (length, found)


KEPT = [
    "git show 3f9c2e1 and 3f9c2e1b4d5a3f9c2e1b4d5a3f9c2e1b4d5a3f9a",
    "git diff 3f9c2e1b4d5a3f9c2e1b4d5a3f9c2e1b4d5a3f9a..4d5a3f9c2e1b4d5a3f9c2e1b4d5a3f9c2e1b4d5a",
    "tree 0f6c3a9e2b7d4c1e8a5f0b3d6c9e2a7f4b1d8c5e0a3f6b9d2c7e4a1f8b5d0c3e",
    "ULID 01ARZ3NDEKTSV4RRFFQ69G5FAV and 01HGW2N7EHJ6X3Q8YV9K4M5T0R",
    "event 550e8400-e29b-41d4-a716-446655440000 and urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "pydantic_core-2.18.2-cp311-cp311-musllinux_1_1_aarch64.whl",
    "version 2.4.0-rc.1+build.20260112 of node-v20.11.1-linux-x64, golang.org/toolchain v0.0.1-go1.22.9.linux-amd64",
    "case ssa.OpARM64MVNshiftLL, ssa.OpLOONG64LoweredRound32F: return Neo4jError._hydrate_neo4j(x)",
    "test_concurrent_writers_on_servers_with_kafka_sasl_v2 and TestKafka3SaslScram256Authentication",
    "AbstractSingletonProxyFactoryBean2Configuration, HTTP11ConnectionByteStream, useQuery2WithSuspense",
    "x86_64-unknown-linux-gnu/release/deps/libserde_json-4f0c1e3b2a.rlib",
    "https://cdn.example.com/assets/app.3f9c2e1b4d5a.js?v=a8Kd93jfLq02mZx7Pq4r and http://localhost:8080",
    "https://docs.google.com/document/d/1aBcD3fGhIjKlMn0pQrStUvWxYz_4567890AbCdEf/edit",
    "the key is in ${SERVICE_TOKEN_2026_PROD} and $GITHUB_TOKEN_V2",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ana@laptop",
    'mask_token: Union[str, AddedToken] = "[MASK]" and log.info("token", "expired")',
    '<property name="token_url" value="https://auth.example.com/oauth/token"/> GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxx',
    "_SEND_MESSAGE_TOKEN = 'send_message', NO_CREDENTIALS = 'NoCredentials', npm_config_registry_url",
    "credential: DefaultAzureCredential, sort_key: userprofilesettings, token: internationalization",
    "https://github.com/acme/shop/blob/3f9c2e1b4d5a3f9c2e1b4d5a3f9c2e1b4d5a3f9a/docs/webhooks.md#signing-keys",
    "https://github.com/acme/token-service/commit/3f9c2e1 and https://api.example.com/v1/keys/1234/rotate-v2",
    "password_length: 12, token_type: bearer, password_hash_algorithm = argon2id, TOKEN_TTL_2=3600",
    "password:\n  - required\n  - min_length: 12\ntoken:\n  type: jwt\n  ttl: 3600\n",
    # a credential's word inside a name that is not the credential's, a tuple of names
    'token_type = "bearer", password_hint = "your first pet", tokenizer_name = "cl100k_base", token_budget = 4096',
    'secret_name: "db-credentials", token_endpoint = "https://auth.example.com/oauth2/token", secrets = "/run/s/db2"',
    'heavy = ("tokenizers", "sqlite3", "HTTPPasswordMgr", "urllib2"); reset all passwords "now"',
    '"js-tokens": "^4.0.0", "@csstools/css-tokenizer": "^2.1.1", Token.Name.Builtin.Context: "bold #038B8B"',
    # references: a command's output, Ruby's interpolation, an AWS resource's name; a selector
    # naming its field, a route under a path's segment, code between two strings
    "DB_PASSWORD=$(vault kv get -field=pw db) and conn = \"Pwd=#{config['db_password']};\"",
    'ROLE_POLICY_PASSWORD = "arn:aws:iam::aws:policy/IAMUserChangePassword"',
    'this.resetPassword = "#reset-password"; "/account/change-password": "/settings/security@2.0/auth"',
    'labels = {loginLabel:"Login:",passwordLabel:"Password:",hintLabel:"Forgot it?"}',
]


@pytest.mark.parametrize("text", KEPT)
def test_what_only_looks_random_is_kept_byte_for_byte(redact, text):
    assert redact(text).text == text


def test_the_bare_token_detector_finds_nothing_in_the_projects_own_text():
    """False positives on real text that holds no secret: the docs, the tests (those that
    plant secrets left out) and the lock files of the repository and this machine."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    planted = ("secret", "redact", "credential", "masking", "trust")
    files = [*root.glob("docs/*.md"), *root.glob("*.md"), *root.glob("*.lock"),
             *(p for p in root.glob("tests/*.py") if not any(word in p.name for word in planted))]
    files += [p for p in map(Path, ("/usr/local/go/src/go.sum", "/usr/local/go/src/cmd/go.sum")) if p.is_file()]
    built = redactor(None)
    found = [line for path in files for line in path.read_text(errors="replace").splitlines()
             if "high-entropy-string" in built.redact(line).kinds]
    assert len(files) > 100 and not found, found


NAMED = [  # (text, the secret): a credential's name or a provider's prefix decides, whatever the body
    ('<add key="Password" value="Winter2026!x"/>', "Winter2026!x"),
    ("<add key='ApiKey' value='EXAMPLEEXAMPLEEXAMPLE'/>", "EXAMPLEEXAMPLEEXAMPLE"),
    ('<setting name="client_secret" value="abc123def456ghi789"/>', "abc123def456ghi789"),
    ("<password>Sup3rS3cret</password>", "Sup3rS3cret"),
    ('<entry key="api.token">t0k3nValue99</entry>', "t0k3nValue99"),
    ('$config = ["secret_key" => "dq8Kz2LmPq"];', "dq8Kz2LmPq"),
    ("{ :password => 'opensaysme' }", "opensaysme"),
    ("PASSWORD = 'opensaysme'", "opensaysme"),
    ('secret_key = "EXAMPLEKEYEXAMPLEKEY"', "EXAMPLEKEYEXAMPLEKEY"),
    ("[database]\npassword = \"changeme-prod\"\n", "changeme-prod"),
    ("curl --user 'api:key-3ax6xnjp29jd6fds4gc373sgvjxteol0' https://api.mailgun.net", "3ax6xnjp29jd6fds4gc373sgvj"),
    ('curl -u ":d2LkV78zLx!t" https://localhost:9200', "d2LkV78zLx!t"),
    ("curl --user kevin:'pRf7vG2h1L8nQkW9' -X PATCH", "pRf7vG2h1L8nQkW9"),
    ("mysql -u root -pS3cretPass shop", "S3cretPass"),
    ("sonar.login=sqp_1234567890123456789012345678901234567890", "1234567890123456789012345678901234567890"),
    ("the key is sk_live_EXAMPLEEXAMPLEEXAMPLEEXAMPLE", "EXAMPLEEXAMPLEEXAMPLEEXAMPLE"),
    # the pair's two fields in either order: XML attributes and elements, JSON, a Kubernetes env entry
    ('<add value="Zq7rLm2Wx" key="Password"/>', "Zq7rLm2Wx"),
    ("<add value='k3yV4lue99x' name='db.password' />", "k3yV4lue99x"),
    ('<property name="api_token" value="opensesame"/>', "opensesame"),
    ('<Password value="Tr0ub4dor3"/>', "Tr0ub4dor3"),
    ("<entry><key>password</key><value>Hunter2Hunter</value></entry>", "Hunter2Hunter"),
    ('{"name": "password", "value": "jsonP4ss"}', "jsonP4ss"),
    ('env:\n  - name: API_TOKEN\n    value: tokV4lue99\n', "tokV4lue99"),
    # PHP and Ruby hashes and calls, Python and JS subscripts
    ("$db = array('db_password' => 'Pr0dPass');", "Pr0dPass"),
    ("define('DB_PASSWORD', 'wp_Sup3rPass');", "wp_Sup3rPass"),
    ("set :password, 'Capistran0'", "Capistran0"),
    ('aUser.send("password=", "s3cret123")', "s3cret123"),
    ('creds.set("password", "Pa55word!")', "Pa55word!"),
    ('d["secret"] = "s3cr3tValue"', "s3cr3tValue"),
    ('os.environ["OPENAI_API_KEY"] = "abc123xyz789qwe"', "abc123xyz789qwe"),
    ("headers['X-Api-Key'] = 'f9d8c7b6a5e4d3c2b1a0'", "f9d8c7b6a5e4d3c2b1a0"),
    ('settings[:api_token] = "Zx9Yw8Vu7T"', "Zx9Yw8Vu7T"),
    # command lines and shells, quoted or not
    ("mytool --password 'hunter 2x' --verbose", "hunter 2x"),
    ("mytool --client-secret=abcdefghijklmnop", "abcdefghijklmnop"),
    ("api_key: abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    ("signing_key = 'qwxkzmhtrvbnplsdfgjk'", "qwxkzmhtrvbnplsdfgjk"),
    ('password = """Tr1pleQu0ted"""', "Tr1pleQu0ted"),
    ("docker login -u bob -p dckrPass99 registry.example.com", "dckrPass99"),
    ("sshpass -p 'r00tPassw' ssh root@host", "r00tPassw"),
    ("docker run -e POSTGRES_PASSWORD=pgS3cret9 postgres", "pgS3cret9"),
    ("$env:API_KEY = 'Ps7KeyVal12345678'", "Ps7KeyVal12345678"),
    ("setx GITHUB_TOKEN Gh7TokenValue123", "Gh7TokenValue123"),
    ("set -x AWS_SECRET_ACCESS_KEY fishS3cretValue9", "fishS3cretValue9"),
    # a placeholder or a default under a credential's name, a prefix with a placeholder's body
    ("POSTGRES_PASSWORD = 'postgres'", "postgres"),
    ("ADMIN_PASSWORD=administrator", "administrator"),
    ("npm_EXAMPLEEXAMPLEEXAMPLE", "EXAMPLEEXAMPLEEXAMPLE"),
    ("api key sqp_12345678901234567890", "12345678901234567890"),
    # a URL that says it carries a credential: its path's random segments
    ("https://hooks.example.com/v1/T0A1B2C3/Xy9Kq2Lm8Np4Rs7Tu1Vw/send", "Xy9Kq2Lm8Np4Rs7Tu1Vw"),
    # ... however short, after a segment that names it
    ("posted to https://hooks.zapier.com/hooks/catch/1234567/ab9de1x/ at noon", "ab9de1x"),
    ("https://example.com/api/token/aB3dE5gH7jK9?x=1", "aB3dE5gH7jK9"),
    # a qualifier after the credential's word: an environment, a number, a version
    ("password_prod = 'Xk9#mQ2v!pL7'", "Xk9#mQ2v!pL7"),
    ("db-password-2: hunter2Secret!", "hunter2Secret!"),
    ("DB_PASSWORD_2=s3cr3tP4ss", "s3cr3tP4ss"),
    ('apiKeyProd = "Zk83jd9Q2mvL0p"', "Zk83jd9Q2mvL0p"),
    ("prod_api_key: a8f3kd92jf83kdm2", "a8f3kd92jf83kdm2"),
    # a credential's word run into other words (quoted, with a digit or a symbol), or the value's
    # form after it (whatever the body); a letters-only placeholder's repeated run under a key's name
    ('password_value = "Winter2026x"', "Winter2026x"),
    ('myapikeyholder "Zk8!pQ2wLm";', "Zk8!pQ2wLm"),
    ("tokenSecretValue: 'q8Z!k2LmPw'", "q8Z!k2LmPw"),
    ("<db_password_field>Xy7!kLm2</db_password_field>", "Xy7!kLm2"),
    ("password_value = 'opensesame'", "opensesame"),
    ('SECRET_B64 = "opensesame"', "opensesame"),
    ('cloud_key = "zyxwvutsrqzyxwvutsrq"', "zyxwvutsrqzyxwvutsrq"),
    # YAML's value on the next line: a plain scalar, a block scalar (its every line)
    ("db:\n  password:\n    Xk9mQ2vpL7zzA\n  user: app\n", "Xk9mQ2vpL7zzA"),
    ("api_key: >-\n  a8f3kd92jf83kdm2zz\nnext: 1\n", "a8f3kd92jf83kdm2zz"),
    ("deploy_key: |\n  first9line8of7key\n  second9line8of7key\n", "second9line8of7key"),
    # a quoted value holds any character but its own quote; a connection string's password
    # whatever its body (a leading `#` too); ` ---- ` between a name and its value; a crumb
    ("db_password = '`7Gh!x' + \"it's\"", "`7Gh!x"),
    ('secret: "it\'s-9-lives"', "it's-9-lives"),
    ("Server=db;Uid=app;Pwd=correcthorse;Database=shop", "correcthorse"),
    ('connectionString="Server=db,1433;User ID=app;Password=#n0tes;Encrypt=True"', "#n0tes"),
    ("smtp password  ----  Wq7#r2!mZ", "Wq7#r2!mZ"),
    ("curl -H 'Jenkins-Crumb:5d41402abc4b2a76b9719d911017c592' http://ci/job/x/build",
     "5d41402abc4b2a76b9719d911017c592"),
]


@pytest.mark.parametrize("text,secret", NAMED)
def test_a_name_or_a_prefix_decides_in_any_syntax(redact, text, secret):
    assert secret not in redact(text).text


@pytest.mark.parametrize("text,secret", [
    ("REPLICATE_API_TOKEN=r8_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5kL7nP9", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5kL7nP9"),
    ("the key AIzaSyBUPHAjZl3n8Eza66ka6B78iVyPteC5MgMxYz9 leaked", "AIzaSyBUPHAjZl3n8Eza66ka6B78iVyPteC5MgMxYz9"),
    ("password=Pa55-word_with.more~parts, then", "Pa55-word_with.more~parts"),
])
def test_the_marker_replaces_the_whole_token(redact, text, secret):
    """A rule that stops at a fixed length or an odd character leaves no head or tail."""
    shown = redact(text).text
    assert "[REDACTED:" in shown and not any(secret[i:i + 8] in shown for i in range(len(secret) - 7))


def test_multi_line_secrets_in_a_checks_output_are_redacted_as_blocks(redact):
    """What a check prints: a PEM key, a Kubernetes Secret and a service account's JSON key."""
    pem = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAAC3NzaC1lZDI1NTE5AAAAIM\n"
           "-----END OPENSSH PRIVATE KEY-----")
    secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: cGFzc3dvcmQxMjM0\n"
    account = ('{\n  "type": "service_account",\n  "project_id": "acme-prod",\n  "private_key_id": '
               '"4f0c1e3b2a7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f",\n'
               '  "client_email": "ci@acme-prod.iam.gserviceaccount.com"\n}')
    output = f"$ cat deploy/*\n{pem}\n---\n{secret}---\n{account}\nexit 0\n"
    shown = redact(output).text
    for part in ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "cGFzc3dvcmQxMjM0", "4f0c1e3b2a7d9e8f6a5b4c3d2e1f0a9b8c7d6e5f"):
        assert part not in shown
    assert shown.startswith("$ cat deploy/*\n[REDACTED:private-key]\n") and shown.endswith("exit 0\n")


@pytest.mark.parametrize("run", ["key=" + "=" * 50_000, "password" + " " * 50_000, "token: " + " " * 50_000 + "x",
                                 "a: " * 20_000 + 'secret = "s3cr3tValue99"'],
                         ids=["equals", "blanks", "blanks-after-name", "separators"])
def test_hostile_runs_cost_linear_time(redact, run):
    """A text the CLI or a scan hands over whole (a check's output, a file in history): runs of
    separators or blanks once took quadratic time (3 s at 8,000 `=`; minutes at 50,000)."""
    import time

    started = time.process_time()
    redact(run)
    assert time.process_time() - started < 5
