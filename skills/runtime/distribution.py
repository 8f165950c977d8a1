"""The installed distribution Baton ships as: `pip install baton-sessions`, imported as `baton`."""

from __future__ import annotations

NAME = "baton-sessions"


def version() -> str:
    """The installed distribution's version (what `baton --version` and the MCP server report);
    `unknown` when Baton runs from a tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version as installed

    try:
        return installed(NAME)
    except PackageNotFoundError:
        return "unknown"
