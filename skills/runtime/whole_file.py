"""A file written whole or not at all: a private temporary file beside it (mkstemp's mode 0600), renamed over it."""

from __future__ import annotations

import os
from pathlib import Path


def write_whole(path: Path, text: str, *, mode: int | None = None) -> None:
    """path holds text, or on a failure (raised as it comes) what it held before. mode: the file's, else 0600."""
    import tempfile  # here, not at the top: the hooks' reads need none of it (tempfile imports shutil)

    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
