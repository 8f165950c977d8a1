"""Signing a handoff's probes, so a resume can tell the probes Baton wrote from edited ones.

HMAC-SHA256 with a key that never leaves the user's machine: `handoff.key` in the Baton
home, created on first use (mode 0600). A team that wants its members to run each other's
probes shares one key file and names it in BATON_HANDOFF_KEY_FILE or `[handoff] key_file`
in baton.toml; Baton then signs with the team key and accepts both.

A signature reads `hmac-sha256:<key id>:<hex digest>`; the key id (a digest of the key,
not the key) says which key made it, so a refusal can say why.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from baton.errors import BadInput, StoreUnavailable
from baton.home import make_directory
from baton.skills.handoff.files import link_new
from baton.store_names import Store
from baton.trust import read_private

PERSONAL_KEY_FILE = "handoff.key"
SCHEME = "hmac-sha256"
MIN_KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class SigningKey:
    secret: bytes

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"baton handoff key id\0" + self.secret).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """holds: the signature was made over exactly this message with a key configured here."""

    holds: bool
    reason: str


def _read_key(path: Path, what: str) -> SigningKey:
    """The key in path, the user's own (root's too, for a team key): else Untrusted, as
    another user could sign with it or swap it."""
    try:
        secret = read_private(path, root_too=what != Store.HANDOFF_KEY).strip()
    except OSError as exc:
        raise BadInput(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if len(secret) < MIN_KEY_BYTES:
        raise BadInput(f"the {what} {path} holds {len(secret)} bytes; a key needs at least {MIN_KEY_BYTES} "
                       "(e.g. `openssl rand -hex 32 > FILE`)")
    return SigningKey(secret)


def _create_personal_key(path: Path) -> None:
    """Write a fresh random key readable by the user only. The key is written in full
    before it appears under its name (a hard link fails if the name exists), so a
    concurrent first handoff either reads the whole key or keeps its own creator's.
    StoreUnavailable when the data home would not take it (full, read-only, not a directory)."""
    try:
        make_directory(path.parent)
        with suppress(FileExistsError):  # another process created it first: theirs is the key
            link_new(path.parent, [path.name], secrets.token_hex(32) + "\n")
    except OSError as exc:
        raise StoreUnavailable(Store.HANDOFF_KEY, f"cannot create {path}: {exc.strerror or exc}") from None


def signing_key(home: Path, team_key_file: Path | None) -> SigningKey:
    """The key new handoffs are signed with: the team key when configured, else the user's
    (created on first use)."""
    if team_key_file is not None:
        return _read_key(team_key_file, "team handoff key")
    path = home / PERSONAL_KEY_FILE
    if not path.exists():
        _create_personal_key(path)
    return _read_key(path, Store.HANDOFF_KEY)


def verifying_keys(home: Path, team_key_file: Path | None) -> list[SigningKey]:
    """Every key a signature may have been made with here; none is created by reading."""
    keys = [_read_key(team_key_file, "team handoff key")] if team_key_file is not None else []
    own = home / PERSONAL_KEY_FILE
    if own.exists():  # the user's own key, from the first handoff on
        keys.append(_read_key(own, Store.HANDOFF_KEY))
    return keys


def sign(key: SigningKey, message: bytes) -> str:
    return f"{SCHEME}:{key.key_id}:{hmac.new(key.secret, message, hashlib.sha256).hexdigest()}"


def check(signature: str | None, message: bytes, keys: list[SigningKey]) -> SignatureCheck:
    if not signature:
        return SignatureCheck(False, "unsigned")
    scheme, _, rest = signature.partition(":")
    key_id, _, digest = rest.partition(":")
    if scheme != SCHEME or not key_id or not digest:
        return SignatureCheck(False, "signature is malformed")
    key = next((k for k in keys if k.key_id == key_id), None)
    if key is None:
        return SignatureCheck(False, f"signed with key {key_id}, which is not configured here")
    expected = hmac.new(key.secret, message, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), digest.encode("utf-8", errors="replace")):
        return SignatureCheck(False,
                              "signature does not match: the probe or its recorded result was edited after signing")
    return SignatureCheck(True, f"signed with key {key_id}")
