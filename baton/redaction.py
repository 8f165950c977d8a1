"""Secrets redacted from free text before it is stored, embedded or shown.

The rules are detect-secrets' regular-expression plugins (a maintained rule set: cloud
keys, tokens, private keys, URLs with passwords, JWTs and more), plus three of Baton's own
where those plugins see too little for redaction: the whole PEM block of a private key
(the plugin matches its first line only), a secret assigned to a keyword (`password=...`,
`token: ...`) and long random tokens found by their entropy. A match is replaced by a
marker such as `[REDACTED:aws-access-key]`; an allowlist of regular expressions (from
baton.toml) keeps a false positive as written.

Importing detect-secrets costs about 250 ms, far over a hook's budget, so its patterns are
extracted once into `redaction-rules.json` in the data home (derived data: rebuilt when
missing, unreadable or from another detect-secrets version) and compiled from there: about
10 ms.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from baton.trust import read_private

RULES_FILE = "redaction-rules.json"
FORMAT = 1
# Plugins whose matches are not secrets (a public IP address is not a credential).
_NOT_SECRETS = {"Public IP (ipv4)"}

# Baton's own rules: (kind, pattern, flags, group holding the secret; 0 for the whole match).
# A keyword's value must hold a digit or a symbol, so prose ("token: expires daily") stays.
_OWN_RULES: tuple[tuple[str, str, int, int], ...] = (
    ("private-key",
     r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
     re.S, 0),
    ("secret-keyword",
     (r"(?i)\b(?:pass(?:word|wd)?|pwd|secret|client[_-]?secret|token|api[_-]?key|access[_-]?key|auth[_-]?token)"
      r"\b[\"']?\s*[:=]\s*[\"']?((?=[^\s\"',;]*[0-9!@#$%^&*+=~?])[^\s\"',;]{6,})"),
     0, 1),
)
# Long random tokens: at least MIN_TOKEN characters of the base64url alphabet holding a
# digit, a lower- and an upper-case letter, with an entropy near that of random text of
# its length (measured: 99% of random base62 strings of 24 to 40 characters pass, while
# identifiers, hex digests and UUIDs do not).
_TOKEN = re.compile(r"[A-Za-z0-9_\-+=]{24,}")
MIN_TOKEN = 24
ENTROPY_SLACK = 0.85
_BLANK = re.compile(r"\s")
# Findings that say less than a plugin's about what the secret is.
_GENERIC = {"high-entropy-string", "secret-keyword"}


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    kinds: tuple[str, ...] = ()  # what was redacted, in order, for a report


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    pattern: re.Pattern
    group: int


@dataclass
class Redactor:
    rules: Sequence[Rule]
    allow: Sequence[re.Pattern] = field(default_factory=tuple)

    def redact(self, text: str) -> Redacted:
        """text with every secret found replaced by its marker. Overlapping findings are
        one secret, named by the most specific rule that found it."""
        merged: list[list] = []
        for start, end, kind in sorted(self._secrets(text)):
            if merged and start <= merged[-1][1]:  # overlapping, or adjacent parts of one token
                last = merged[-1]
                last[1] = max(last[1], end)
                if last[2] in _GENERIC and kind not in _GENERIC:
                    last[2] = kind
            else:
                merged.append([start, end, kind])
        if not merged:
            return Redacted(text)
        out, at = [], 0
        for start, end, kind in merged:
            out += [text[at:start], f"[REDACTED:{kind}]"]
            at = end
        out.append(text[at:])
        return Redacted("".join(out), tuple(kind for _, _, kind in merged))

    def _secrets(self, text: str) -> Iterable[tuple[int, int, str]]:
        for rule in self.rules:
            for match in rule.pattern.finditer(text):
                start, end = match.span(rule.group)
                if start < 0:  # the group did not take part in this match
                    start, end = match.span(0)
                if rule.kind != "private-key":  # a secret is one token (`npm_.+` would take the line)
                    blank = _BLANK.search(text, start, end)
                    end = blank.start() if blank else end
                if end > start and not self._allowed(match.group(0)):
                    yield start, end, rule.kind
        for match in _TOKEN.finditer(text):
            token = match.group(0)
            if _random_looking(token) and not self._allowed(token):
                yield match.start(), match.end(), "high-entropy-string"

    def _allowed(self, found: str) -> bool:
        return any(pattern.search(found) for pattern in self.allow)


def _random_looking(token: str) -> bool:
    if not (any(c.isdigit() for c in token) and any(c.islower() for c in token)
            and any(c.isupper() for c in token)):
        return False
    counts = Counter(token)
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return entropy >= math.log2(len(token)) - ENTROPY_SLACK


def kind_name(secret_type: str) -> str:
    """detect-secrets' secret type as a marker's kind: 'AWS Access Key' -> 'aws-access-key'."""
    return re.sub(r"[^a-z0-9]+", "-", secret_type.lower()).strip("-")


def redactor(home: Path | None, allow: Sequence[str] = ()) -> Redactor:
    """The redactor with the rules cached in `home` (built there when missing or stale;
    built in memory when `home` cannot hold them). allow: regular expressions of text
    that is never redacted. Raises re.error for an allow entry that does not compile."""
    rules = [Rule(kind, re.compile(pattern, flags), group) for kind, pattern, flags, group in _OWN_RULES]
    rules += [Rule(kind, re.compile(pattern, flags), group) for kind, pattern, flags, group in _plugin_rules(home)]
    return Redactor(rules, tuple(re.compile(entry) for entry in allow))


def _plugin_rules(home: Path | None) -> list[tuple[str, str, int, int]]:
    path = home / RULES_FILE if home is not None else None
    version = _detect_secrets_version()
    if path is not None:
        try:
            cached = json.loads(read_private(path))  # the user's own, or Untrusted: it decides what is kept
            if cached.get("format") == FORMAT and cached.get("detect_secrets") == version:
                return [tuple(rule) for rule in cached["rules"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing, unreadable or garbled: derived, so rebuilt below
    rules = _extract_plugin_rules()
    if path is not None:
        _write_quietly(path, {"format": FORMAT, "detect_secrets": version, "rules": rules})
    return rules


def _detect_secrets_version() -> str:
    """The installed detect-secrets' version file and its time: what the cache was built
    from (importlib.metadata would cost a hook about 30 ms; this costs one stat)."""
    from importlib.util import find_spec

    spec = find_spec("detect_secrets")
    if spec is None or spec.origin is None:
        return "none"
    version_file = Path(spec.origin).with_name("__version__.py")
    try:
        return f"{version_file.read_text().strip()} {version_file.stat().st_mtime_ns}"
    except OSError:
        return f"{spec.origin} unversioned"


def _extract_plugin_rules() -> list[tuple[str, str, int, int]]:
    """detect-secrets' regular-expression plugins as (kind, pattern, flags, group)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector

    # The library annotates its mapping with an unbound type variable; this is what it holds.
    plugins: Mapping[str, type[BasePlugin]] = get_mapping_from_secret_type_to_class()
    rules: list[tuple[str, str, int, int]] = []
    for secret_type, plugin in sorted(plugins.items()):
        if secret_type in _NOT_SECRETS or not issubclass(plugin, RegexBasedDetector):
            continue
        for pattern in plugin().denylist:
            kind = kind_name(secret_type)
            rules.append((kind, pattern.pattern, pattern.flags & ~re.UNICODE, _secret_group(kind, pattern)))
    return rules


# The plugins whose first group is the secret after its context (`://user:(password)@`,
# `aws_secret_key = "(...)"`); in the others a group names the token's kind (`(ghp|gho)_`)
# or an optional part of it, so the whole match goes.
_SECRET_IN_GROUP = {"aws-access-key", "basic-auth-credentials", "cloudant-credentials", "ibm-cloud-iam-key",
                    "ibm-cos-hmac-credentials", "npm-tokens", "softlayer-credentials"}


def _secret_group(kind: str, pattern: re.Pattern) -> int:
    return 1 if pattern.groups and kind in _SECRET_IN_GROUP else 0


def _write_quietly(path: Path, document: dict) -> None:
    """Write the cache by rename, readable by its owner only; a data home that cannot take
    it costs the next command another extraction, nothing else."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(document, handle)
        os.replace(temporary, path)
    except OSError:
        with suppress(OSError):
            temporary.unlink()
