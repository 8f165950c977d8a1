"""Whether the recorded state of a ticket can be trusted here, checked before a resume
relies on it: the run's base commit is present and an ancestor of the branch, the
lockfiles and toolchains match the run's environment manifest, the latest checkpoint is
readable (fetched first from the git remote its record names when this clone lacks it:
another clone took it). Each check answers ok, changed (with the difference) or missing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from baton.errors import GitFailed
from baton.git import run_git
from baton.outcome import Found, NotFound, Unavailable
from baton.registry.model import Session
from baton.skills.core.binding import Place
from baton.skills.services.checkpoint import capture_environment, local_run

if TYPE_CHECKING:
    from baton.deadline import Deadline
    from baton.skills.core.checkpoints import Checkpoint


@dataclass(frozen=True, slots=True)
class Check:
    check: str
    status: str  # ok | changed | missing
    detail: str = ""


def _base(place: Place, base: str, deadline: Deadline | None) -> Check:
    try:
        present = run_git(place.root, "rev-parse", "-q", "--verify", f"{base}^{{commit}}", deadline=deadline,
                          check=False)
        if present.returncode != 0:
            return Check("base commit", "missing", f"{base[:12]} is not in this repository")
        ancestor = run_git(place.root, "merge-base", "--is-ancestor", base, "HEAD", deadline=deadline, check=False)
    except GitFailed as exc:
        return Check("base commit", "missing", f"{base[:12]}: {exc}")
    if ancestor.returncode != 0:
        return Check("base commit", "changed", f"{base[:12]} is not an ancestor of HEAD (the branch was rewritten "
                                               "or another one is checked out)")
    return Check("base commit", "ok", base[:12])


def _recorded_manifest(place: Place, session: Session, environment: str, deadline: Deadline | None) -> dict | None:
    """The run's manifest: from this worktree's run file, else from a checkpoint holding it."""
    run = local_run(place, session.task_id)
    if run is not None and run.environment and run.environment[0] == environment:
        return json.loads(run.environment[1])
    if session.checkpoint is not None and session.checkpoint.environment == environment:
        try:
            shown = run_git(place.root, "cat-file", "blob",
                            f"refs/baton/checkpoints/{session.checkpoint.id}:environment.json", deadline=deadline,
                            check=False)
        except GitFailed:
            return None
        if shown.returncode == 0:
            return json.loads(shown.stdout)
    return None


def _differences(recorded: dict, now: dict, key: str) -> list[str]:
    before, after = recorded.get(key, {}), now.get(key, {})
    out = []
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            was = before.get(name, "absent")
            new = after.get(name, "absent")
            if key == "toolchains":
                was = was.get("version", was.get("status")) if isinstance(was, dict) else was
                new = new.get("version", new.get("status")) if isinstance(new, dict) else new
            else:
                was, new = str(was)[:12], str(new)[:12]
            out.append(f"{name}: {was} -> {new}")
    return out


def compatibility(session: Session, place: Place, lockfiles: Sequence[str] = (),
                  deadline: Deadline | None = None, *, fetch_from: str | None = None,
                  fetch: bool = False) -> list[Check]:
    """The checks for the ticket's current run, in this worktree (lockfiles: the globs of
    `[environment] lockfiles`, as the manifest was recorded with), each wait within the
    command's deadline. fetch: a latest checkpoint this clone lacks is fetched first (from
    the remote its record names, else fetch_from, `[checkpoints] remote`), which brings its
    base commit and manifest too."""
    if place.worktree is None:
        return []
    run = session.current_run
    # The latest checkpoint names the manifest recorded last (`baton env record` after the bind).
    environment = (session.checkpoint.environment if session.checkpoint else None) or (
        run.environment if run else None)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The toolchains answer in about as long as the slowest program takes to start (a
        # version manager's shim, a JVM): asked beside the git reads, not after them.
        captured = pool.submit(capture_environment, place, lockfiles, deadline) if environment else None
        latest, fetched, not_fetched = _latest(session, place, fetch_from, deadline, fetch=fetch)
        checks = []
        base = (run.base if run else None) or (session.checkpoint.base if session.checkpoint else None)
        if base:
            checks.append(_base(place, base, deadline))
        if environment and captured is not None:
            recorded = _recorded_manifest(place, session, environment, deadline)
            now = captured.result()  # None only outside git
            if recorded is None or now is None:
                checks.append(Check("environment", "missing", f"manifest {environment[:12]} is not readable here"))
            else:
                for key in ("lockfiles", "toolchains"):
                    changed = _differences(recorded, now.body, key)
                    checks.append(Check(key, "changed", "; ".join(changed)) if changed else Check(key, "ok"))
    if session.checkpoint is not None and latest is not None:
        short = session.checkpoint.id[:12]
        if isinstance(latest, Found):
            checks.append(Check("checkpoint", "ok", short + (f" (fetched from {fetched})" if fetched else "")))
        elif isinstance(latest, NotFound):
            checks.append(Check("checkpoint", "missing", f"{short}: " + (
                f"not in this clone and not fetched: {not_fetched}" if not_fetched else "its ref is gone")))
        else:
            checks.append(Check("checkpoint", "missing", f"{short}: {latest.reason}"))
    return checks


def _latest(session: Session, place: Place, fetch_from: str | None, deadline: Deadline | None, *, fetch: bool
            ) -> tuple[Found[Checkpoint] | NotFound | Unavailable | None, str | None, str | None]:
    """The ticket's latest checkpoint read here (None: it has none), fetched first when
    fetch is asked and this clone lacks it: (what the read answers, the remote it was
    fetched from, why it could not be fetched)."""
    from baton.skills.core.checkpoints import read

    latest = session.checkpoint
    if latest is None:
        return None, None, None
    found = read(place.root, latest.id, deadline=deadline)
    if not fetch or not isinstance(found, NotFound):
        return found, None, None
    from baton.skills.core.checkpoint_remote import Remote, fetch as fetch_checkpoint

    outcome = fetch_checkpoint(place.root, latest.id, latest.remote, fetch_from, deadline)
    if not isinstance(outcome, Remote):
        return found, None, outcome.reason
    return read(place.root, latest.id, deadline=deadline), outcome.name, None
