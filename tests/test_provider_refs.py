"""The provider layer: the hooks keep the agent's own session id and transcript path per run,
encrypted in the data home; resume offers `claude --resume SESSION_ID` when the same agent
resumes on the same machine and the transcript exists, and says why not otherwise."""

import json
import stat
import subprocess
import zlib
from pathlib import Path

from tests.test_checkpoints import write
from tests.test_claude_hooks import hook, payload, runtime_dir  # noqa: F401
from tests.workspace import git, make_repo

AGENT_SESSION = "5f0c7a52-1d4e-4b8e-9a51-0c3f2d7e9b11"


def agent_event(name: str, cwd: Path, transcript: Path) -> dict:
    event = payload(name, cwd, session=AGENT_SESSION)
    event["transcript_path"] = str(transcript)
    return event


def every_byte_baton_wrote_into(repo: Path) -> bytes:
    """The worktree's files, and every object and file in its git directory (loose objects
    inflated), as one blob to search."""
    held = []
    for path in repo.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if "objects" in path.parts and len(path.parent.name) == 2:
                data = zlib.decompress(data)
            held.append(data)
    packs = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True,
                           check=True).stdout
    return b"\0".join([*held, packs])


def test_the_reference_is_kept_encrypted_never_in_the_repository_and_resume_offers_it(home, tmp_path, cli, capsys):
    from cryptography.fernet import Fernet, InvalidToken

    repo = make_repo(tmp_path / "shop", None)
    transcript = tmp_path / "claude" / f"{AGENT_SESSION}.jsonl"
    write(transcript, '{"type": "user"}\n')
    assert cli(repo, "bind", "OMN-1", "--agent", "claude")[0] == 0
    assert hook("session-start", agent_event("session_start_startup", repo, transcript), capsys)[0] == 0
    write(repo / "app.py", "print('work')\n")
    assert hook("user-prompt-submit", agent_event("user_prompt_submit", repo, transcript), capsys)[0] == 0
    code, _, err = hook("stop", agent_event("stop", repo, transcript), capsys)
    assert code == 0 and err == ""
    assert cli(repo, "checkpoint", "--label", "half done")[0] == 0
    assert cli(repo, "handoff")[0] == 0
    assert cli(repo, "update", "--check", "true")[0] == 0

    written = every_byte_baton_wrote_into(repo)
    for secret in (AGENT_SESSION, str(transcript), transcript.name):
        assert secret.encode() not in written, f"{secret} is in a file Baton wrote into the repository"
    signals = json.loads(cli(repo, "signals", "--json")[1])
    assert AGENT_SESSION not in json.dumps(signals)

    key_file, refs_file = home / "provider.key", home / "provider-refs.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(refs_file.stat().st_mode) == 0o600
    kept = refs_file.read_bytes()
    assert AGENT_SESSION.encode() not in kept and str(transcript).encode() not in kept
    run_id = json.loads(cli(repo, "resume", "OMN-1", "--json")[1])["run"]["run_id"]
    token = json.loads(refs_file.read_text())[run_id]["token"].encode()
    assert json.loads(Fernet(key_file.read_bytes().strip()).decrypt(token))["session_id"] == AGENT_SESSION
    try:
        Fernet(Fernet.generate_key()).decrypt(token)
        raise AssertionError("the reference opened with another key")
    except InvalidToken:
        pass

    resumed = json.loads(cli(repo, "resume", "OMN-1", "--json")[1])
    assert resumed["continuation"] == {"command": f"claude --resume {AGENT_SESSION}", "worktree": str(repo),
                                       "reason": None}
    text = cli(repo, "resume", "OMN-1")[1]
    assert f"`claude --resume {AGENT_SESSION}`, run in {repo}" in text and "not the previous model's hidden" in text
    other = json.loads(cli(repo, "resume", "OMN-1", "--json", "--agent", "codex")[1])["continuation"]
    assert other["command"] is None and "(codex) is not the one that worked (claude)" in other["reason"]

    transcript.unlink()
    gone = json.loads(cli(repo, "resume", "OMN-1", "--json", "--agent", "claude")[1])["continuation"]
    assert gone["command"] is None and "transcript no longer exists" in gone["reason"]
    key_file.write_bytes(Fernet.generate_key())
    write(transcript, "{}\n")
    rekeyed = json.loads(cli(repo, "resume", "OMN-1", "--json", "--agent", "claude")[1])["continuation"]
    assert rekeyed["command"] is None and "no agent session of run" in rekeyed["reason"], \
        "without its key, the reference is not there"


def test_a_fork_does_not_offer_its_parents_conversation(home, tmp_path, cli, capsys):
    repo = make_repo(tmp_path / "shop", None)
    transcript = tmp_path / f"{AGENT_SESSION}.jsonl"
    write(transcript, "{}\n")
    write(repo / "app.py", "v1\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-qm", "v1")
    assert cli(repo, "bind", "OMN-1")[0] == 0
    assert hook("stop", agent_event("stop", repo, transcript), capsys)[0] == 0
    fork = tmp_path / "fork"
    assert cli(repo, "fork", "OMN-1", "--as", "OMN-2", "--into", str(fork))[0] == 0
    reason = json.loads(cli(fork, "resume", "OMN-2", "--json")[1])["continuation"]["reason"]
    assert "a restore, fork or fresh start begins a new conversation" in reason


def test_a_codex_session_is_continued_by_codex_resume(home, tmp_path, cli, capsys):
    """Codex sends Claude Code's payload; its transcript is `sessions/.../rollout-*.jsonl`."""
    repo = make_repo(tmp_path / "shop", None)
    transcript = tmp_path / "codex" / "sessions" / f"rollout-2026-12-01T15-05-40-{AGENT_SESSION}.jsonl"
    write(transcript, '{"type": "session_meta"}\n')
    assert cli(repo, "bind", "OMN-1", "--agent", "codex")[0] == 0
    assert hook("session-start", agent_event("session_start_startup", repo, transcript), capsys)[0] == 0
    resumed = json.loads(cli(repo, "resume", "OMN-1", "--json")[1])
    assert resumed["continuation"]["command"] == f"codex resume {AGENT_SESSION}"
    other = json.loads(cli(repo, "resume", "OMN-1", "--json", "--agent", "claude")[1])["continuation"]
    assert other["command"] is None and "(claude) is not the one that worked (codex)" in other["reason"]
