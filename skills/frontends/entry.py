"""The `baton` console script: the resident process runs the command when one answers
(baton.skills.runtime.resident_client, which imports nothing heavy), else it runs here, as it
always can; a command that found no resident starts one after its own work."""

from __future__ import annotations

import sys


def run() -> None:
    from baton.skills.runtime import resident_client

    code = resident_client.forwarded(sys.argv)
    if code is not None:
        sys.exit(code)
    if resident_client.command_word(sys.argv) == "resident":
        from baton.skills.frontends.resident import main as resident

        sys.exit(resident(sys.argv[2:]))
    from baton.budget import leave
    from baton.skills.frontends.cli import main
    from baton.skills.frontends.invocation import of_process

    code = main(invocation=of_process())
    if resident_client.absent:
        _start_resident()
    leave(code)


def _start_resident() -> None:
    """Start the resident process in the background, when the settings and the system allow
    it (a bad setting was told by the command; `baton doctor` says why it is off)."""
    from contextlib import suppress

    from baton.errors import BatonError
    from baton.skills.runtime.resident_client import unsupported
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.spawn import spawn_resident

    try:
        settings = Settings.from_env()
    except BatonError:
        return
    if settings.resident and unsupported() is None:
        with suppress(OSError):  # an optimisation only: the next command tries again
            spawn_resident(settings.home)


if __name__ == "__main__":  # `python -m baton.skills.frontends.entry ARGS`: the console script, as a module
    run()
