"""The provider reference of each run: the agent's own session id and transcript path, as its
hooks receive them, so that a resume on the same machine can offer the agent's native
continuation (`claude --resume SESSION_ID`).

Kept in the data home only, never in a repository, handoff, checkpoint, signal or event:
`provider-refs.json` maps each run id to a Fernet token of the reference, and `provider.key`
(mode 0600, made on first use) holds the key. An entry is
rewritten only when its reference changed, which an HMAC under the same key tells without
importing the cipher: a hook that finds it unchanged pays two small file reads.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from baton.files import write_whole
from baton.home import make_directory
from baton.locks import held
from baton.trust import read_private

KEY_FILE = "provider.key"
REFS_FILE = "provider-refs.json"
LOCK_FILE = "provider-refs.lock"
MAX_TEXT = 4096
LOCK_WAIT = 1.0


@dataclass(frozen=True, slots=True)
class ProviderRef:
    agent: str  # "claude": whose native continuation this is (baton.skills.core.interrupted.NATIVE_RESUME)
    session_id: str
    transcript_path: str | None
    host: str  # the machine the agent ran on


def _key(home: Path, *, create: bool) -> bytes | None:
    path = home / KEY_FILE
    try:
        return read_private(path).strip()
    except FileNotFoundError:
        if not create:
            return None
    from cryptography.fernet import Fernet

    make_directory(home)
    # The first writer wins; a racing one reads what it wrote.
    with suppress(FileExistsError), os.fdopen(
            os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as out:
        out.write(Fernet.generate_key())
    return read_private(path).strip()


def _read_refs(home: Path) -> dict:
    try:
        held_refs = json.loads(read_private(home / REFS_FILE))
    except (OSError, ValueError):
        return {}
    return held_refs if isinstance(held_refs, dict) else {}


def _plain(ref: ProviderRef) -> bytes:
    return json.dumps({"agent": ref.agent, "session_id": ref.session_id, "transcript_path": ref.transcript_path,
                       "host": ref.host}, sort_keys=True).encode()


def record(home: Path, task_id: str, run_id: str, session_id: str, transcript_path: str | None, *,
           agent: str = "claude") -> bool:
    """Keep the run's provider reference, encrypted; answers whether it was written (False:
    unchanged, or nothing to keep). Raises OSError when the data home cannot hold it."""
    if not session_id or len(session_id) > MAX_TEXT or (transcript_path and len(transcript_path) > MAX_TEXT):
        return False
    ref = ProviderRef(agent, session_id, transcript_path or None, socket.gethostname())
    key = _key(home, create=True)
    assert key is not None
    mark = hmac.new(key, _plain(ref), hashlib.sha256).hexdigest()
    if _read_refs(home).get(run_id, {}).get("mark") == mark:
        return False
    from cryptography.fernet import Fernet

    token = Fernet(key).encrypt(_plain(ref)).decode()
    with held(home / LOCK_FILE, within=LOCK_WAIT) as locked:
        if not locked:
            return False  # another hook is writing: the next one records it
        refs = _read_refs(home)
        refs[run_id] = {"task_id": task_id, "mark": mark, "token": token}
        write_whole(home / REFS_FILE, json.dumps(refs))  # 0600
    return True


def read(home: Path, run_id: str) -> ProviderRef | None:
    """The run's provider reference as this data home's key opens it; None when none was
    kept here or it does not open (another key, a damaged file)."""
    entry = _read_refs(home).get(run_id)
    key = _key(home, create=False)
    if not isinstance(entry, dict) or not isinstance(entry.get("token"), str) or key is None:
        return None
    from cryptography.fernet import Fernet, InvalidToken

    try:
        held_ref = json.loads(Fernet(key).decrypt(entry["token"].encode()))
        return ProviderRef(held_ref["agent"], held_ref["session_id"], held_ref["transcript_path"], held_ref["host"])
    except (InvalidToken, ValueError, KeyError, TypeError):
        return None
