"""The data home: one directory shared by every agent process of a user on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def data_home() -> Path:
    """BATON_HOME, else $XDG_DATA_HOME/baton, else ~/.local/share/baton. Not created here."""
    explicit = os.environ.get("BATON_HOME")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "baton"
