"""The redactor: secrets of every kind found and replaced, prose left alone, the rules
compiled only when a text may hold their secret (tests/test_redaction_corpus.py drives
the whole corpus)."""

from __future__ import annotations

import random
import string

import pytest

from baton.redaction import redactor
from baton.secret_rules import RULES

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
