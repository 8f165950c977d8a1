"""`baton redact --scan`: secrets already stored, found with today's rules, and rewritten.

What was stored before a rule that finds it now may still hold a secret. The scan reads the
registry's event logs, the signal log and this worktree's handoff documents, and reports
where each secret is and of which kind, never the secret itself. Unless it only reports, it
then rewrites, never by removing or reordering history: a ticket with a secret in its events
gets a SecretsRedacted event (its id derived from its content, so a second scan changes
nothing), committed as every write is; the registry rewrites those fields and folds the
ticket again, recall embeds its decisions again (baton.skills.core.projection). A signal's
reason is replaced in the signal log. Handoff documents are only reported: they are in the
repository, under signatures. Last, every SQLite file of the data home is rebuilt, so no free
page or WAL frame keeps a byte of what was rewritten.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from baton.errors import GitFailed, StoreUnavailable
from baton.outcome import Unavailable
from baton.skills.core.binding import Place
from baton.skills.runtime.stores import TEXT_LIMIT, Stores
from baton.store_names import Store

if TYPE_CHECKING:
    from collections.abc import Callable

    from baton.redaction import Redactor
    from baton.registry.model import Event, SecretsRedacted
    from baton.signals.model import Signal

# The fields of events that hold free text (what a write redacts: baton.skills.core.commit).
_TEXT_FIELDS = ("text", "context", "summary", "command", "blocker", "resolution", "label")
ALL_SIGNALS = 1_000_000
_REDACTION_IDS = uuid.UUID("6f1d2c0e-5b1a-4d8e-9a47-3c2b1e0f7a55")  # namespace of SecretsRedacted ids


@dataclass(frozen=True, slots=True)
class Finding:
    store: str
    where: str  # the ticket, event or signal, and the field; or the file
    kinds: tuple[str, ...]
    rewritable: bool = True  # a handoff document is reported only
    # A handoff document's commits whose version of it holds a secret, newest first.
    commits: tuple[str, ...] = ()

    def to_json(self) -> dict:
        found = {"store": self.store, "where": self.where, "kinds": list(self.kinds)}
        return found | ({"commits": list(self.commits)} if self.commits else {})


@dataclass
class Scan:
    findings: list[Finding] = field(default_factory=list)
    scanned: dict[str, int] = field(default_factory=dict)  # what was read, per store
    unavailable: dict[str, str] = field(default_factory=dict)  # store -> why it was not read (or rewritten)
    rewritten: dict[str, int] = field(default_factory=dict)  # what was rewritten, per store
    warnings: list[str] = field(default_factory=list)
    dry_run: bool = True
    # What a rewrite needs: the ticket's events with a secret, and the signals.
    _events: dict[str, list[tuple[Event, str, str, tuple[str, ...]]]] = field(default_factory=dict)
    _signals: list[Signal] = field(default_factory=list)

    @property
    def left(self) -> list[Finding]:
        """The findings still stored as they were."""
        return [f for f in self.findings if self.dry_run or not f.rewritable]

    def to_json(self) -> dict:
        return {"findings": [f.to_json() for f in self.findings], "scanned": self.scanned,
                "unavailable": self.unavailable, "dry_run": self.dry_run, "rewritten": self.rewritten,
                "left": [f.to_json() for f in self.left], "warnings": self.warnings}


def scan_stored(stores: Stores, place: Place) -> Scan:
    """Every secret the current rules find in what is stored; never raises for a store that
    is down (it is named in `unavailable`)."""
    scan = Scan()
    redactor = stores.redactor

    def check(store: str, where: str, text: object) -> tuple[str, tuple[str, ...]] | None:
        if isinstance(text, str) and text:
            redacted = redactor.redact(text)
            if redacted.kinds:
                scan.findings.append(Finding(store, where, redacted.kinds, rewritable=store != "handoff"))
                return redacted.text, redacted.kinds
        return None

    sessions = stores.registry.list_sessions(include_inactive=True)
    if isinstance(sessions, Unavailable):
        scan.unavailable[Store.SESSION_REGISTRY] = sessions.reason
    else:
        events_read = 0
        for session in sessions.value:
            events = stores.registry.events(session.task_id)
            if isinstance(events, Unavailable):
                scan.unavailable[Store.SESSION_REGISTRY] = events.reason
                break
            for event in events.value:
                events_read += 1
                for name in _TEXT_FIELDS:
                    found = check("registry", f"{event.task_id} {event.type} {str(event.event_id)[:8]} {name}",
                                  getattr(event, name, None))
                    if found:
                        scan._events.setdefault(event.task_id, []).append((event, name, *found))
        scan.scanned["registry events"] = events_read
    signals = stores.signals.recent(task_id=None, after=None, limit=ALL_SIGNALS)
    if isinstance(signals, Unavailable):
        scan.unavailable[Store.SIGNAL_LOG] = signals.reason
    else:
        for signal in signals.value:
            found = check("signals", f"{signal.task_id} {signal.signal_type} {str(signal.signal_id)[:8]} reason",
                          signal.payload.reason)
            if found:
                payload = signal.payload.model_copy(update={"reason": found[0]})
                scan._signals.append(signal.model_copy(update={"payload": payload}))
        scan.scanned["signals"] = len(signals.value)
    _scan_handoffs(place, check, scan, redactor)
    return scan


def redact_stored(stores: Stores, place: Place) -> Scan:
    """scan_stored, then rewrite what it found in the registry (a SecretsRedacted event per
    ticket), recall (through that event's projection) and the signal log, and scrub the data
    home's SQLite files. Raises StoreUnavailable when the registry cannot take the events."""
    from baton.skills.core.commit import record_events

    scan = scan_stored(stores, place)
    scan.dry_run = False
    events = [redaction_event(task_id, found) for task_id, found in sorted(scan._events.items())]
    if events:
        scan.warnings += record_events(stores, events)
        scan.rewritten["registry events"] = sum(len(e.rewrites) for e in events)
    if scan._signals:
        try:
            scan.rewritten["signals"] = stores.signals.rewrite(scan._signals)
        except StoreUnavailable as exc:
            scan.unavailable[Store.SIGNAL_LOG] = exc.reason
            scan.findings = [f if f.store != "signals" else replace(f, rewritable=False) for f in scan.findings]
    if any(r.event_type == "decision_recorded" for e in events for r in e.rewrites) and stores.event_log is None:
        # Applied here (no projector): embed the redacted decisions now, before the scrub.
        from baton.skills.core.indexing import index_decisions

        try:
            index_decisions(stores)
        except (StoreUnavailable, ImportError) as exc:
            scan.warnings.append(f"{Store.RECALL_INDEX} unavailable: {exc}; the redacted decisions stay queued")
    if events and stores.event_log is not None:
        # The copies kept for reading one's own writes hold the text as it was written; the
        # registry holds them, or will once the projector runs: forgotten before the scrub.
        stores.event_log.forget_delivered([message_id for message_id, _, _ in stores.event_log.unconfirmed()])
    if events or scan._signals:
        scan.warnings += _scrub_home(stores)
    return scan


def redaction_event(task_id: str, found: list[tuple[Event, str, str, tuple[str, ...]]]) -> SecretsRedacted:
    """The ticket's SecretsRedacted event: stamped with the latest rewritten event's time and
    session (it moves no time of the session), its id derived from what it rewrites."""
    from baton.registry.model import Rewrite, SecretsRedacted

    rewrites = [Rewrite(event_id=event.event_id, event_type=event.type, field=name, text=text[:TEXT_LIMIT],
                        kinds=list(kinds)) for event, name, text, kinds in found]
    latest = max((event for event, *_ in found), key=lambda e: (e.at, str(e.event_id)))
    content = json.dumps([r.model_dump(mode="json") for r in rewrites], sort_keys=True)
    return SecretsRedacted(event_id=uuid.uuid5(_REDACTION_IDS, f"{task_id}\n{content}"), task_id=task_id,
                           session_id=latest.session_id, at=latest.at, rewrites=rewrites)


def _scrub_home(stores: Stores) -> list[str]:
    """Rebuild every SQLite file of the data home (baton.sqlite.scrub); a warning for each
    that could not be (another process holding it)."""
    from baton.sqlite import scrub

    warnings = []
    for path in sorted(stores.settings.home.rglob("*.db")):
        try:
            scrub(path, timeout=stores.settings.store_timeout)
        except StoreUnavailable as exc:
            warnings.append(f"{exc}; run `baton redact --scan` again when it is free")
    return warnings


def _scan_handoffs(place: Place, check: Callable[[str, str, object], tuple[str, tuple[str, ...]] | None], scan: Scan,
                   redactor: Redactor) -> None:
    from baton.skills.handoff.files import UnreadableHandoff, candidates, read_handoff, shown_path

    documents = list(dict.fromkeys(candidates(place.root)))
    for path in documents:
        try:
            text = read_handoff(path, place.root)
        except UnreadableHandoff as exc:
            scan.unavailable[shown_path(path, place.root)] = str(exc)
            continue
        if check("handoff", shown_path(path, place.root), text):
            commits = _commits_holding(place, shown_path(path, place.root), redactor)
            if commits:
                scan.findings[-1] = replace(scan.findings[-1], commits=commits)
    scan.scanned["handoff documents"] = len(documents)


HISTORY_VERSIONS = 200  # versions of one document read at the most


def _commits_holding(place: Place, relative: str, redactor: Redactor) -> tuple[str, ...]:
    """The commits (newest first) whose version of the document holds a secret: where it is
    committed. Baton never rewrites history; the user learns what to rewrite or revoke. The
    versions are read through `git cat-file --batch` and checked here, so no secret is ever
    put on a command line. Nothing when the worktree is not in git or git does not answer."""
    from baton.git import run_git
    from baton.skills.core.checkpoints import parse_batch

    if place.worktree is None:
        return ()
    try:
        listed = run_git(place.root, "log", f"--max-count={HISTORY_VERSIONS}", "--format=%H", "--", relative)
        shas = listed.stdout.decode().split()
        if not shas:
            return ()
        read = run_git(place.root, "cat-file", "--batch",
                       input="".join(f"{sha}:{relative}\n" for sha in shas).encode())
    except GitFailed:
        return ()
    versions = parse_batch(read.stdout, len(shas))  # None: the document is absent from that commit
    return tuple(sha for sha, version in zip(shas, versions, strict=True)
                 if version is not None and redactor.redact(version[1].decode(errors="replace")).kinds)
