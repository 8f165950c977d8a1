"""The redactor against tests/secret_corpus.py: every kind of secret in each of its carriers
is kept out whole (no 16 characters of it left), and no text that only looks random is
altered. bench/redaction.py prints the same per kind, with the rule sources compared."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from baton.redaction import redactor
from tests.secret_corpus import NEGATIVES, SECRETS, Secret, leaks

BY_KIND: dict[str, list[Secret]] = defaultdict(list)
for _secret in SECRETS:
    BY_KIND[_secret.kind].append(_secret)


@pytest.fixture(scope="module")
def redact():
    return redactor(None).redact


def test_the_corpus_holds_many_kinds_in_several_carriers():
    assert len(SECRETS) >= 300 and len(BY_KIND) >= 100 and len(NEGATIVES) >= 150
    assert all(len({secret.text for secret in secrets}) >= 2 for secrets in BY_KIND.values())
    assert all(secret.value in secret.text and len(secret.value) >= 6 for secret in SECRETS)


@pytest.mark.parametrize("kind", sorted(BY_KIND))
def test_each_kind_is_kept_out_in_every_carrier(redact, kind):
    leaked = [secret.text for secret in BY_KIND[kind] if leaks(secret.value, redact(secret.text).text.encode())]
    assert not leaked, leaked


def test_the_whole_corpus_is_kept_out(redact):
    caught = sum(not leaks(secret.value, redact(secret.text).text.encode()) for secret in SECRETS)
    assert caught / len(SECRETS) >= 0.99, f"{caught}/{len(SECRETS)}"


@pytest.mark.parametrize("text", NEGATIVES, ids=range(len(NEGATIVES)))
def test_what_only_looks_like_a_secret_comes_back_byte_for_byte(redact, text):
    result = redact(text)
    assert (result.text, result.kinds) == (text, ())


def test_every_secret_in_one_text_is_kept_out(redact):
    """A handoff document or a check's output: many secrets and non-secrets in one text."""
    text = "\n".join([*NEGATIVES, *(secret.text for secret in SECRETS[::7])])
    shown = redact(text).text.encode()
    assert not [secret.kind for secret in SECRETS[::7] if leaks(secret.value, shown)]
    assert all(line.encode() in shown for line in NEGATIVES if "\n" not in line)


def test_leaks_finds_a_secret_whole_json_escaped_or_in_part():
    value = 'Pa55"word\\with-a-long-tail-0123456789'
    assert leaks(value, f"x {value} y".encode())
    assert leaks(value, json.dumps({"k": value}).encode())
    assert leaks(value, b"...a-long-tail-0123...")  # any 16 characters of it
    assert not leaks(value, b"[REDACTED:secret-keyword] with-a-long-tai")  # 15


def test_a_redacted_text_has_nothing_left_to_redact(redact):
    """`baton redact --scan` redacts what is stored again: a marker is never a finding."""
    again = [secret.kind for secret in SECRETS if redact(redact(secret.text).text).kinds]
    assert not again, again


def test_the_public_corpus_is_kept_out_and_its_untouched_part_reported(redact):
    """Secrets from maintained scanners' rule tests (tests/secret_corpus_public.py), in a
    sentence and as written, and all of them at once in one check's output. The untouched
    part was never tuned on: its floor only guards against a regression."""
    from tests.secret_corpus import leaking
    from tests.secret_corpus_public import (
        NEGATIVES_PUBLIC,
        TUNED,
        UNTOUCHED,
        UNTOUCHED_4TH,
        UNTOUCHED_5TH,
        UNTOUCHED_MORE,
        UNTOUCHED_SEMGREP,
    )

    # (part, floor in a sentence and as written, floor in one output of the whole part): in
    # one output a secret written in several carriers leaks if one of them does.
    for part, floor, printed in ((TUNED, 0.95, 0.9), (UNTOUCHED, 0.85, 0.85), (UNTOUCHED_MORE, 0.8, 0.45),
                                  (UNTOUCHED_SEMGREP, 0.8, 0.8), (UNTOUCHED_4TH, 0.85, 0.85),
                                  (UNTOUCHED_5TH, 0.45, 0.45)):
        # Counts only: a failure never prints an untouched part's items.
        kept = sum(not leaks(s.value, redact(f"we agreed to deploy with {s.text} now").text.encode())
                   and not leaks(s.value, redact(s.text).text.encode()) for s in part)
        leaked = len(leaking(part, redact("\n".join(s.text for s in part)).text.encode()))
        assert kept >= floor * len(part), f"{kept}/{len(part)}"
        assert leaked <= (1 - printed) * len(part), f"{leaked}/{len(part)}"
    assert [n for n in NEGATIVES_PUBLIC if redact(n).text != n] == []


def test_hard_non_secrets_come_back_byte_for_byte(redact):
    """Integrity hashes, digests, git names, UUIDs, ULIDs, versions, paths, URLs, identifiers,
    base64 of prose and references, written from their public formats: at most 3 of them
    altered (the issue's bar; none is today)."""
    from tests.secret_corpus_public import HARD_NEGATIVES

    altered = [(kind, text) for kind, text in HARD_NEGATIVES if redact(text).text != text]
    assert len(HARD_NEGATIVES) >= 21 and len(altered) <= 3, altered


def test_no_window_of_any_secret_survives_one_output_of_the_whole_corpus(redact):
    from tests.secret_corpus import leaking

    assert not leaking(SECRETS, redact("\n".join(secret.text for secret in SECRETS)).text.encode())
