"""A resume reads the worktree's binding once and asks the registry for the ticket once,
then writes from what it read (the binding, the handoff's verification): its bind reads
neither again. Counted on a real embedded home: the registry is wrapped in a proxy that
counts and passes every call on, and the binding file's reads are counted as they happen."""

from pathlib import Path

import pytest


class CountingRegistry:
    """The stores' own registry, counting `get` by ticket; everything is passed on."""

    def __init__(self, registry) -> None:
        self._registry = registry
        self.gets: list[str] = []

    def get(self, task_id):
        self.gets.append(task_id)
        return self._registry.get(task_id)

    def __getattr__(self, name):
        return getattr(self._registry, name)


@pytest.fixture
def binding_reads(monkeypatch) -> list[Path]:
    """Every read of a binding file (`.baton/active_session.yaml`), by path."""
    reads: list[Path] = []
    read_text = Path.read_text

    def counted(self, *args, **kwargs):
        if self.name == "active_session.yaml":
            reads.append(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    return reads


@pytest.mark.parametrize("bound_before", [True, False], ids=["rebind", "first bind"])
def test_a_resume_reads_the_binding_and_the_session_once(home, worktrees, cli, binding_reads, bound_before):
    from baton.files import WorktreeLocator
    from baton.ids import parse_ticket_id
    from baton.skills.core.binding import place_of, read_binding
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services.resume import resume_session

    main, second = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    assert cli(main, "decide", "keep the schema flat", "--task", "OMN-1")[0] == 0
    worktree = main if bound_before else second
    place = place_of(worktree, WorktreeLocator())
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        registry = stores._registry = CountingRegistry(stores.registry)
        binding_reads.clear()
        # In the other worktree main's run is live: the resume takes the ticket over, reading nothing again.
        result = resume_session(stores, parse_ticket_id("OMN-1"), place, take_over=True)
    finally:
        stores.close()
    assert result.status == "found" and result.bound, result.warnings
    assert registry.gets.count("OMN-1") == 1, registry.gets
    assert binding_reads == [place.binding_path], binding_reads
    binding = read_binding(place)
    assert binding is not None and binding.task_id == "OMN-1"
