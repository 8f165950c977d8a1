"""Secrets redacted from free text before it is stored, embedded or shown.

The rules are Baton's table of secret formats (baton.secret_rules: providers' token
formats, private keys, JSON web tokens, credentials in URLs, connection strings, HTTP
headers and commands, and values assigned to a secret's name however it is prefixed or
cased), the values of a Kubernetes Secret's `data:` and `stringData:`, and long random
tokens found by their entropy. A match is replaced by a marker such as
`[REDACTED:aws-access-key]`; an allowlist of regular expressions (from baton.toml) keeps a
false positive as written.

What is never redacted: commit SHAs, UUIDs and content digests (`sha256:<hex>`, SRI
`sha512-<base64>`, go.sum `h1:<base64>=`), references to a variable (`${X}`, `$X`, `%X%`,
`os.environ[...]`, `{{ secrets.X }}`, `<your-api-key>`), identifiers, paths, versions and
base64 of prose: tests/secret_corpus.py holds both sides.

A hook builds the redactor for one text: each rule's pattern is compiled only when the
text holds one of the rule's anchors (a literal every match contains), so a text with no
secret costs a few substring searches and three compiled patterns.
"""

from __future__ import annotations

import binascii
import math
import re
import string
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from baton.secret_rules import NAME_ENDINGS, NAMED, QUALIFIER, RULES, RUN_IN, Rule

# Bare random tokens (measured in tests/test_redaction.py and bench/redaction.py): a run of
# at least MIN_TOKEN letters and digits (`-_.+/=~` allowed inside, `-_` first too, MIN_PART or
# more between them on average) holding a digit, that is
#   - not a git object name, digest, UUID or ULID (hex of 7 to 40 characters or of a
#     digest's length, the 8-4-4-4-12 form, 26 characters of Crockford base32);
#   - mixed the way random text is: its class (lower, upper, digit) switches between
#     neighbours at least MIN_SWITCHES of the time (an upper-case letter before a lower-case
#     one is a word's start: CamelCase switches about one time in six);
#   - not made of words: at most MAX_WORDS of its letters in pronounceable pieces (_pronounceable);
#   - of an entropy within ENTROPY_SLACK bits of a random string of its alphabet and length.
# Of random tokens of 32 characters 93% (lower or upper case and digits) to 100% (base64url)
# pass, of 24 characters 85% to 99%; of the 3,354 identifiers of 20 characters or more with
# a digit in the installed packages' code, 19 (0.6%, six of them base64 or a JWT), and none
# of the project's docs, tests, lock files and go.sum (tests/test_redaction.py, bench/redaction.py).
_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-+/.=~%$])[A-Za-z0-9_-][A-Za-z0-9_\-+/.=~]{18,}[A-Za-z0-9=]")
MIN_TOKEN = 20
MIN_PART = 6  # characters between separators, on average
MIN_SWITCHES = 0.22
MAX_WORDS = 0.45
ENTROPY_SLACK = 0.5
_SEPARATORS = re.compile(r"[-_+/.=~]+")
NAME_REACH = 256  # characters a name, its quotes and blanks may take before its separator
_NAME_SEPARATORS = re.compile(r"[-_.]+")  # a version's, a file name's (base64 has `+/` too)
_PIECE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_NOT_PRONOUNCEABLE = re.compile(r"[^aeiou]{4}|[aeiou]{3}")
_HEX_ONLY = re.compile(r"[0-9a-f]+|[0-9A-F]+")
_KEPT_HEX = frozenset({56, 64, 96, 128})  # digests' lengths beyond a commit's 40
_UUID_OR_ULID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                           r"|[0-7][0-9A-HJKMNP-TV-Z]{25}")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s@\"'<>]+(?=[\s\"'<>]|$)", re.I)
_URL_SAYS_SECRET = re.compile(r"(?i)hook|token|key|secret|auth|sig|pass|cred|bot")
_URL_PART = re.compile(r"(?<=[/?&=#;])(?<!//)[A-Za-z0-9_\-+.~]{20,}")
# A webhook's or a key's path (hooks.zapier.com/hooks/catch/<id>/<token>/, /with/key/<key>):
# after a segment that names it, a segment of letters and digits is its token, however short.
_URL_KEY_SEGMENT = re.compile(r"(?i)/(?:(?:web)?hooks?|catch|triggers?|tokens?|keys?|secrets?)(?=/)")
_URL_SHORT_PART = re.compile(r"(?<=/)(?=[A-Za-z_-]*\d)(?=[0-9_-]*[A-Za-z])[A-Za-z0-9_-]{6,}(?=[/?#]|$)")
_JOINS = frozenset(string.ascii_letters + string.digits + "_-+")  # inside a token (_whole)
# Blanks are tried from the first of a run only, so that a long run costs linear time.
_SEPARATOR_AT = re.compile(r"[=:]|[ \t]is[ \t]|(?<![ \t])[ \t]+(?=[\"']|-{2,}[ \t])|,[ \t]*(?=[\"'])")
_ASSIGNED = re.compile(r"=(?=[^=])")
# A dotted name in code (ssa.OpARM64ADDshiftLL, self.py2str): each name weighed apart.
_DOTTED_CODE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_CODE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,15}")
_PATH_WORD = re.compile(r"[a-z]{2,}[a-z0-9._-]*")
# What looks random but is not a secret: digests (SRI, go.sum, OCI), public keys (SSH, PEM
# public keys and certificates) and base64 runs that decode to prose.
_DIGEST = re.compile(r"(?<![A-Za-z0-9])(?:(?:sha(?:1|224|256|384|512)|md5)-[A-Za-z0-9+/]+=*"
                     r"|h1:[A-Za-z0-9+/]+=*|sha(?:256|512):[a-f0-9]{64,128}"
                     r"|(?:(?:ssh|ecdsa|sk)-[\w@.-]+ )?AAAA(?:[BC]3NzaC1|E2VjZHNh)[A-Za-z0-9+/]+=*"
                     r"|-----BEGIN (?:[A-Z0-9]+ )*(?:PUBLIC KEY|CERTIFICATE)-----.*?-----END[A-Z0-9 ]*-----)", re.S)
_DIGEST_ANCHORS = ("sha", "md5-", "h1:", "AAAA", "-----BEGIN")  # a text holds one of them for _DIGEST to match
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
# A Kubernetes Secret's values: every `key: value` under its data: or stringData: block.
_KUBERNETES_SECRET = re.compile(r"(?m)^kind:[ \t]*Secret[ \t]*$")
_SECRET_BLOCK = re.compile(r"(?m)^(?P<indent>[ \t]*)(?:data|stringData):[ \t]*\n"
                           r"(?P<block>(?:(?P=indent)[ \t]+\S.*\n?)+)")
_BLOCK_VALUE = re.compile(r"(?m)^[ \t]+[\w.-]+:[ \t]*[\"']?([^\s\"'#][^\"'\n]*?)[\"']?[ \t]*$")
_QUALIFIED = re.compile(f"(?i){QUALIFIER}$")  # a name's tail after its credential word: _prod, -2
_RUN_IN = re.compile(RUN_IN)  # in a lower-cased name: password_value, fooapikeyfoo
_QUALIFIABLE = ("pass", "pw", "secret", "token", "credential", "key", "sas", "string")  # in every strong word
_MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
# How much a finding says about what the secret is: a provider's rule (2) more than its
# name or header (1), which says more than its entropy (0).
_SAYS = {"high-entropy-string": 0, "url-token": 0, "secret-keyword": 1, "http-authorization": 1, "http-cookie": 1}


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    kinds: tuple[str, ...] = ()  # what was redacted, in order, for a report


@dataclass
class Redactor:
    rules: Sequence[Rule]
    allow: Sequence[re.Pattern] = field(default_factory=tuple)
    _compiled: dict[int, re.Pattern] = field(default_factory=dict, repr=False)
    # Each rule's anchors with the characters each holds: an anchor with a character the text
    # lacks is not searched for (most hold `_`, `-` or `.`; 236 searches of a long text cost ~1 ms).
    _anchors: list[tuple[tuple[str, frozenset[str]], ...]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._anchors = [tuple((anchor, frozenset(anchor)) for anchor in rule[1]) for rule in self.rules]

    def redact(self, text: str) -> Redacted:
        """text with every secret found replaced by its marker. Overlapping findings are
        one secret, named by the most specific rule that found it."""
        merged: list[list] = []
        markers = [match.span() for match in _MARKER.finditer(text)] if "[REDACTED:" in text else []
        for start, end, kind in sorted(_whole(text, *found) for found in self._secrets(text)):
            if markers and _inside((start, end), markers):  # redacted before: a scan redacts again
                continue
            if merged and start <= merged[-1][1]:  # overlapping, or adjacent parts of one token
                last = merged[-1]
                last[1] = max(last[1], end)
                if _SAYS.get(kind, 2) > _SAYS.get(last[2], 2):
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

    def warm(self) -> None:
        """Compile every rule now (a resident process, so that no command compiles one)."""
        for index in range(len(self.rules)):
            self._pattern(index)

    def _pattern(self, index: int) -> re.Pattern:
        pattern = self._compiled.get(index)
        if pattern is None:
            _, _, source, flags, _, _ = self.rules[index]
            pattern = self._compiled[index] = re.compile(source, flags)
        return pattern

    def _secrets(self, text: str) -> Iterable[tuple[int, int, str]]:
        folded = text.lower()
        held = {False: frozenset(text), True: frozenset(folded)}
        names: list[int] | None = None
        for index, (kind, anchors, source, _, group, check) in enumerate(self.rules):
            if anchors is NAMED:
                names = _name_starts(text, folded) if names is None else names
                pattern = self._pattern(index) if names else None
                matches: Iterable[re.Match | None] = (pattern.match(text, at) for at in names) if pattern else ()
            else:
                ignores_case = source.startswith("(?i")
                haystack, chars = folded if ignores_case else text, held[ignores_case]
                if anchors and not any(anchor in haystack for anchor, needs in self._anchors[index] if needs <= chars):
                    continue
                matches = self._pattern(index).finditer(text)
            for match in matches:
                if match is None:
                    continue
                start, end = match.span(group)
                if start < 0:  # the group did not take part in this match
                    start, end = match.span(0)
                if end > start and (not check or CHECKS[check](match, text[start:end])) \
                        and not self._allowed(match.group(0)):
                    yield start, end, kind
        if _KUBERNETES_SECRET.search(text):
            for start, end in _kubernetes_secret_values(text):
                if not self._allowed(text[start:end]):
                    yield start, end, "kubernetes-secret"
        urls = _urls(text)
        digests = _DIGEST.finditer(text) if any(map(text.__contains__, _DIGEST_ANCHORS)) else ()
        kept = _disjoint([*(match.span() for match in digests),
                          *(match.span() for match in _BASE64_RUN.finditer(text) if _prose(match.group(0)))])
        # A URL is kept (a document's id, a cache-buster), but in one that says it carries a
        # credential (a webhook, a token) each segment of its path and query after the host is weighed.
        parts = [match.span() for start, end in urls if _URL_SAYS_SECRET.search(text, start, end)
                 for match in _URL_PART.finditer(text, start, end)]
        for start, end in urls:
            named = _URL_KEY_SEGMENT.search(text, start, end)
            for match in _URL_SHORT_PART.finditer(text, named.end() if named else end, end):
                if not _words(match.group(0)) and not self._allowed(match.group(0)):
                    yield *match.span(), "url-token"
        for start, end in [*(span for span in _tokens(text) if not _inside(span, urls)), *parts]:
            token = text[start:end]
            if _random_looking(token) and not _inside((start, end), kept) and not self._allowed(token):
                yield start, end, "high-entropy-string"

    def _allowed(self, found: str) -> bool:
        return any(pattern.search(found) for pattern in self.allow)


def _whole(text: str, start: int, end: int, kind: str) -> tuple[int, int, str]:
    """The finding widened to the whole token around it, so that no head or tail of a
    secret stays beside its marker (a rule that stops at a fixed length, a value cut at an
    odd character). `.` and `~` join only letters and digits; `/`, `=` on the left, blanks
    and quotes end a token (a path, a name before its value)."""
    while start and (text[start - 1] in _JOINS
                     or (text[start - 1] in ".~" and start > 1 and text[start - 2].isalnum())):
        start -= 1
    while end < len(text) and (text[end] in _JOINS or text[end] == "=" or
                               (text[end] in ".~" and end + 1 < len(text) and text[end + 1].isalnum())):
        end += 1
    return start, end, kind


def _name_starts(text: str, folded: str) -> list[int]:
    """Where a name that ends like a credential's (NAME_ENDINGS) or holds one's word (RUN_IN) starts before `=`, `:`,
    ` is ` or blanks and a quote, an optional quote and blanks between: where the NAMED rules
    are tried."""
    starts, after = [], 0
    for separator in _SEPARATOR_AT.finditer(text):
        end = separator.start()
        # Not past the separator before, nor far: a run of separators (`=====`) costs linear time.
        floor, after = max(after, end - NAME_REACH), separator.end()
        while end > floor and text[end - 1] in " \t":
            end -= 1
        skipped = end
        while end > floor and text[end - 1] in "\"']=":  # a quoted name, a subscript's, a setter's: d["secret"] =
            end -= 1
        start = end
        while start > floor and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
            start -= 1
        if "]" in text[end:skipped] and not (start and text[start - 1] in "\"':"):
            continue  # a subscript's name is a string or a symbol: not Union[str, AddedToken] =
        if start < end and (folded.endswith(NAME_ENDINGS, start, end) or _RUN_IN.search(folded, start, end) or (
                any(word in folded[start:end] for word in _QUALIFIABLE)  # or before a qualifier: db_password_2
                and _QUALIFIED.sub("", folded[start:end]).endswith(NAME_ENDINGS))):
            starts.append(start)
    return starts


def _urls(text: str) -> list[tuple[int, int]]:
    """The spans of the URLs in text, looked for only before each `://` (a scheme is short):
    a search of every word for a scheme costs a long text a quarter of its redaction."""
    spans: list[tuple[int, int]] = []
    at = text.find("://")
    while at >= 0 and (match := _URL.search(text, max(at - 64, spans[-1][1] if spans else 0))):
        spans.append(match.span())
        at = text.find("://", match.end())
    return spans


def _kubernetes_secret_values(text: str) -> Iterable[tuple[int, int]]:
    for block in _SECRET_BLOCK.finditer(text):
        for value in _BLOCK_VALUE.finditer(block.group("block")):
            offset = block.start("block")
            yield offset + value.start(1), offset + value.end(1)


def _tokens(text: str) -> Iterable[tuple[int, int]]:
    """The spans of the tokens the entropy fallback weighs: each side of an `=` inside one
    (request_id=<uuid>), a path's segments one by one (/var/lib/docker/overlay2/l/<id>/diff)
    and a dotted name's names, any other token whole (a base64 key holds `/` and ends in `=`)."""
    for match in _TOKEN.finditer(text):
        at, sides = match.start(), _ASSIGNED.split(match.group(0))
        if len(sides) > 1 and all(len(side) >= 8 and not _words(side) and any(c.isdigit() for c in side)
                                  for side in sides[:-1]):
            yield match.span()  # no side is a name: base64 with `=` inside is weighed whole too
        for side in sides:
            if _DOTTED_CODE.fullmatch(side) and any(_CODE_NAME.fullmatch(name) for name in side.split(".")):
                segments = side.split(".")
            else:
                segments = side.split("/")
                if sum(bool(_PATH_WORD.fullmatch(segment)) for segment in segments) < 2:
                    segments = [side]
            for segment in segments:
                if len(segment) >= MIN_TOKEN:
                    yield at, at + len(segment)
                at += len(segment) + 1


def _inside(span: tuple[int, int], spans: Sequence[tuple[int, int]]) -> bool:
    """Whether span lies within one of spans (sorted and disjoint: a binary search)."""
    at = bisect_right(spans, (span[0], math.inf)) - 1
    return at >= 0 and span[1] <= spans[at][1]


def _disjoint(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _random_looking(token: str) -> bool:
    parts = [part for part in _SEPARATORS.split(token) if part]
    letters_and_digits = "".join(parts)
    size = len(letters_and_digits)
    hex_groups = size >= 24 and _HEX_ONLY.fullmatch(letters_and_digits) and _SEPARATORS.sub("-", token) == token
    if len(token) < MIN_TOKEN or not any(c.isdigit() for c in letters_and_digits) or _UUID_OR_ULID.fullmatch(token) \
            or (size < MIN_PART * (1 + len(_NAME_SEPARATORS.findall(token))) and not hex_groups):
        return False  # short parts: a version, a file name (v0.0.1-go1.22.9.linux-amd64), not a key's hex groups
    if _HEX_ONLY.fullmatch(letters_and_digits) and (
            size <= 40 or size in _KEPT_HEX if len(parts) == 1 else size < 24 or _SEPARATORS.sub("-", token) != token):
        return False  # a commit, a digest, commits of a range; groups of hex joined by `-` are a key
    pairs = switches = 0
    for part in parts:
        for a, b in pairwise(part):
            pairs += 1
            switches += _class(a) != _class(b) and not (a.isupper() and b.islower())
    if switches < MIN_SWITCHES * pairs or _words(token):
        return False
    alphabet = 16 if _HEX_ONLY.fullmatch(letters_and_digits) else \
        10 + 26 * (any(c.islower() for c in letters_and_digits) + any(c.isupper() for c in letters_and_digits))
    counts = Counter(letters_and_digits)
    entropy = -sum(n / size * math.log2(n / size) for n in counts.values())
    # The expected entropy of a random string of this alphabet and length (Miller-Madow).
    expected = min(math.log2(alphabet) - (alphabet - 1) / (2 * size * math.log(2)), math.log2(size))
    return entropy >= expected - ENTROPY_SLACK


def _words(token: str) -> bool:
    """Whether more than MAX_WORDS of a token's letters and digits are in pronounceable pieces
    (UPPER_SNAKE's capitals are words too)."""
    letters_and_digits = _SEPARATORS.sub("", token)
    upper_only = not any(c.islower() for c in letters_and_digits)
    return sum(len(piece) for piece in _PIECE.findall(token)
               if _pronounceable(piece) and (upper_only or not piece.isupper())) > MAX_WORDS * len(letters_and_digits)


def _class(char: str) -> int:
    return 2 if char.isdigit() else char.isupper()


def _pronounceable(piece: str) -> bool:
    """A word: 4 letters or more, or a capitalised 3 (CamelCase: GetItem), with vowels
    where words have them."""
    if len(piece) < (3 if piece[0].isupper() and piece[1:].islower() else 4):
        return False
    letters = piece.lower()
    vowels = sum(c in "aeiou" for c in letters)
    return 0.25 * len(letters) <= vowels <= 0.6 * len(letters) and not _NOT_PRONOUNCEABLE.search(letters)


def _prose(run: str) -> bool:
    """Whether a base64 run decodes to text with words and blanks (a message, not a key)."""
    try:
        decoded = binascii.a2b_base64(run + "=" * (-len(run) % 4), strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    printable = sum(32 <= byte < 127 or byte in (9, 10, 13) for byte in decoded)
    return printable == len(decoded) and decoded.count(b" ") * 12 >= len(decoded)


# References to a value kept elsewhere (a variable, an f-string's field, code, a path) and
# placeholders: not the secret itself.
_REFERENCE = re.compile(r"(?<![A-Za-z0-9])\$[A-Za-z_(]|\$\{\{?[ \t]*[A-Za-z_][\w.]*[ \t]*(?:[:?+=-][^{}]*)?(?:\}|$)"
                        r"|^#\{|^arn:aws[\w-]*:"  # Ruby's interpolation, an AWS resource's name
                        r"|%[A-Za-z_]\w*%|^\{|<[^>]*>$|^(?:os\.environ|process\.env)"
                        r"|^[A-Za-z_][\w.]*[(\[]|^[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+[)\]},;]*$"
                        r"|^~?\.{0,2}/[\w./-]*$|^#[0-9a-fA-F]{3,8}$"
                        r"|(?i:^(?:password|passwd|pass|secret|token|pwd|none|null|nil|true|false|undefined)$)"
                        r"|x{4}|X{4}|\*{3}|\.\.\.|^(.)\1*$")
_SYMBOL_OR_DIGIT = re.compile(r"[0-9!@#$%^&*+=~?]")
_CREDENTIAL_FREE_URL = re.compile(r"^[a-z][a-z0-9+.-]*://[^@\s]*$", re.I)
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_.~+/=-]+")
_SNAKE_CASE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")  # code: v4auth_header
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")  # code: win32api.RegEnumKey
# A literal however it is written: a shell's DB_PASSWORD=value, an option's --client-secret=value
_LITERAL_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+=|--[\w-]+=")
_SEPARATED = re.compile(r"[=:>,]|\sis\s")
_COMPOUND_NAME = re.compile(r"^--|\w[_.-]\w|(?-i:[a-z][A-Z])|^pass(?:word|wd|phrase)\b", re.I)  # code, an option
MIN_SECRET = 6  # a shorter value is told from ordinary text by nothing
MIN_WEAK_SECRET = 16


def _not_reference(match: re.Match, value: str) -> bool:
    return len(value) >= MIN_SECRET and not _REFERENCE.search(value)


def _squashed(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalnum())


def _credential(match: re.Match, value: str) -> bool:
    """An HTTP credential: not a reference or a variable, and with a digit (`Authorization:
    Bearer TOKEN` in a document names one)."""
    return (len(value) >= 8 and _not_reference(match, value) and any(c.isdigit() for c in value)
            and not _SNAKE_CASE.fullmatch(value))


def _assigned_secret(match: re.Match, value: str) -> bool:
    """A value assigned to a secret's name: not a reference or a placeholder, and with a
    digit or a symbol (a name ending in `key` or `auth`: random-looking, 16 characters)."""
    if not _not_reference(match, value) or _CREDENTIAL_FREE_URL.match(value):
        return False
    if value != value.strip() or value[0] in ",;)":  # code between two strings: ' + access_key + ', "Password:",x:"
        return False
    name = match.string[match.start(0):match.start("value")]
    groups = match.groupdict()
    if groups.get("run_in"):  # fooapikeyfoo "...": quoted, not a word, a name or a version ("js-tokens": "^4.0.0")
        return bool(groups.get("quote") and _SYMBOL_OR_DIGIT.search(value)) and not _SNAKE_CASE.fullmatch(value) \
            and any(c.isalpha() for c in value)
    if not _SEPARATED.search(name) and not _COMPOUND_NAME.search(name):
        return False  # `NAME "value"` with no `=` or `:`: prose (`cannot pass 'x=1'`) unless the name is code's
    strong = groups.get("strong")
    if strong:  # quoted, a placeholder is redacted too (`PASSWORD = 'changeme'`), not a stage's `pass = "DONE"`
        # a connection string's or a query's `;Pwd=...;` decides whatever the value (`Password=myPassword;`)
        at = match.start(0)
        if _SYMBOL_OR_DIGIT.search(value.removeprefix("#")) or (at and match.string[at - 1] in "?&;"):
            return True
        # nor a constant's label: _SEND_MESSAGE_TOKEN = "send_message", NO_CREDENTIALS = "NoCredentials",
        # a selector's: addPassword = "#add-password"
        # but a lone word is a default password (POSTGRES_PASSWORD = 'postgres'), not a label
        label = _squashed(value) in _squashed(name) and (
            _squashed(value) != value.lower() or _squashed(strong) in _squashed(value))
        return ((bool(groups.get("quote")) or bool(_LITERAL_NAME.fullmatch(name)))
                and strong.lower() != "pass" and not label) or _random_letters(value)
    if "\n" in value:  # a block scalar's lines: one value wrapped (base64 at 64 or 76 characters)
        value = "".join(value.split())
    return (len(value) >= MIN_WEAK_SECRET and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and bool(_TOKEN_LIKE.fullmatch(value)) and not _DOTTED_NAME.fullmatch(value)) or _random_letters(value)


def _random_letters(value: str) -> bool:
    """Letters alone, 16 or more, not made of words (api_key: qwxkzmhtrvbnplsdfgjk, not DefaultAzureCredential)
    or repeating a run of 6 as a placeholder does (abcdefghijabcdefghij): a letters-only key, not prose."""
    runs = len(value) - 5
    return len(value) >= MIN_WEAK_SECRET and value.isalpha() and value.isascii() and (
        len({value[at:at + 6].lower() for at in range(runs)}) < runs
        or sum(len(piece) for piece in _PIECE.findall(value) if _pronounceable(piece)) <= MAX_WORDS * len(value))


CHECKS: dict[str, Callable[[re.Match, str], bool]] = {"reference": _not_reference, "credential": _credential,
                                                      "keyword": _assigned_secret}


def redactor(home: Path | None, allow: Sequence[str] = ()) -> Redactor:
    """The redactor, with allow: regular expressions of text that is never redacted.
    Raises re.error for an allow entry that does not compile. home: the data home (the
    rules are Baton's own table, so nothing is cached there)."""
    return Redactor(RULES, tuple(re.compile(entry) for entry in allow))
