"""Credentials masked in everything Baton prints, logs or returns: one function, `mask`.

Server settings may carry credentials: a password in a URL's user information
(`postgresql://app:s3cret@db/baton`), in a query parameter or a libpq keyword
(`password=...`), or as a setting of its own (a Qdrant API key, a Bolt password, a Kafka
SASL password). Every URL, bootstrap list and error message goes through `mask` at the
edge before anyone sees it; the settings that are secrets themselves are registered with
`known_secret` when a command loads its settings (load_settings), and masked wherever they appear.
"""

from __future__ import annotations

import re

MASK = "***"
# What stands where a credential would but is none: a reference to a variable (${X}, $X,
# %X%, {{ x }}, an f-string's {field}), a redaction's marker, a placeholder word (<password>,
# `password` itself) or a number (`token=11098` in a model's output). Users' text shows
# them as written.
_NOT_A_CREDENTIAL = (r"(?!\$\{?[A-Za-z_]|%[A-Za-z_]\w*%|\{|\[REDACTED:|<[\w -]+>"
                     r"|(?:password|passwd|secret|changeme|x{3,}|\*{3,}|[0-9]+)(?:[@\s&'\";,)\]]|$))")
_USERINFO = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s]*):" + _NOT_A_CREDENTIAL
                       + r"(?P<secret>[^@\s/]*)@")
_KEYWORD = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd|sslpassword|api[_-]?key|apikey|token|secret|sasl\.password)=)"
    + _NOT_A_CREDENTIAL + r"(?:(?P<quote>['\"])(?P<quoted>.*?)(?P=quote)|(?P<bare>[^\s&'\";,]+))", re.IGNORECASE)
_known: set[str] = set()
MIN_KNOWN = 4  # a shorter setting would mask ordinary words; it is refused as a secret anyway


def known_secret(value: str | None) -> None:
    """Mask this setting's value wherever it appears from now on in this process."""
    if value and len(value) >= MIN_KNOWN:
        _known.add(value)


def mask(text: str) -> str:
    """text with every credential it holds replaced by ***."""
    # Both patterns need their literal ("://", "="): most text (a path, a name) has neither,
    # and a listing of thousands of sessions masks each of its strings.
    if "://" in text:
        text = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    if "=" in text:
        text = _KEYWORD.sub(lambda m: f"{m.group('head')}{m.group('quote')}{MASK}{m.group('quote')}"
                            if m.group("quote") else f"{m.group('head')}{MASK}", text)
    for secret in sorted(_known, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def mask_all(value: object) -> object:
    """A JSON-able answer with every string in it masked (keys stay as they are)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {key: mask_all(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_all(item) for item in value]
    return value
