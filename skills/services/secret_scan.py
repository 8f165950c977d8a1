"""`baton redact --scan`: secrets already stored, found with today's rules.

Redaction runs when a write is committed, so what was stored before it (or before a rule
that finds it now) may still hold a secret. The scan reads every ticket's event log in the
registry, the signal log and this worktree's handoff documents, and reports where each
secret is and of which kind; never the secret itself. A decision found here is also in
recall's payload and vector, which are derived from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from baton.outcome import Unavailable
from baton.skills.core.binding import Place
from baton.skills.runtime.stores import Stores
from baton.store_names import Store

# The fields of events that hold free text (what a write redacts: baton.skills.core.commit).
_TEXT_FIELDS = ("text", "context", "summary", "command", "blocker", "resolution", "label")
ALL_SIGNALS = 1_000_000


@dataclass(frozen=True, slots=True)
class Finding:
    store: str
    where: str  # the ticket, event or signal, and the field; or the file
    kinds: tuple[str, ...]

    def to_json(self) -> dict:
        return {"store": self.store, "where": self.where, "kinds": list(self.kinds)}


@dataclass
class Scan:
    findings: list[Finding] = field(default_factory=list)
    scanned: dict[str, int] = field(default_factory=dict)  # what was read, per store
    unavailable: dict[str, str] = field(default_factory=dict)  # store -> why it was not read

    def to_json(self) -> dict:
        return {"findings": [f.to_json() for f in self.findings], "scanned": self.scanned,
                "unavailable": self.unavailable}


def scan_stored(stores: Stores, place: Place) -> Scan:
    """Every secret the current rules find in what is stored; never raises for a store that
    is down (it is named in `unavailable`)."""
    scan = Scan()
    redactor = stores.redactor

    def check(store: str, where: str, text: object) -> None:
        if isinstance(text, str) and text:
            kinds = redactor.redact(text).kinds
            if kinds:
                scan.findings.append(Finding(store, where, kinds))

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
                    check("registry", f"{event.task_id} {event.type} {str(event.event_id)[:8]} {name}",
                          getattr(event, name, None))
        scan.scanned["registry events"] = events_read
    signals = stores.signals.recent(task_id=None, after=None, limit=ALL_SIGNALS)
    if isinstance(signals, Unavailable):
        scan.unavailable[Store.SIGNAL_LOG] = signals.reason
    else:
        for signal in signals.value:
            check("signals", f"{signal.task_id} {signal.signal_type} {str(signal.signal_id)[:8]} reason",
                  signal.payload.reason)
        scan.scanned["signals"] = len(signals.value)
    _scan_handoffs(place, check, scan)
    return scan


def _scan_handoffs(place: Place, check, scan: Scan) -> None:
    from baton.skills.handoff.files import UnreadableHandoff, candidates, read_handoff, shown_path

    documents = list(dict.fromkeys(candidates(place.root)))
    for path in documents:
        try:
            text = read_handoff(path, place.root)
        except UnreadableHandoff as exc:
            scan.unavailable[shown_path(path, place.root)] = str(exc)
            continue
        check("handoff", shown_path(path, place.root), text)
    scan.scanned["handoff documents"] = len(documents)
