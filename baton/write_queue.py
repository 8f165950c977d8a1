"""The write queue: writes an embedded store could not take at once, because another process
held its SQLite write lock past a short wait, kept in the data home until a process that
holds the lock applies them (baton.registry.sqlite).

Appending takes no lock at all, so a writer never waits on the lock it is queueing around:
each write is one file, written under a temporary name, flushed to the disk (fsync) and then
renamed into the queue's directory, so a record is in the queue complete or not at all. A
process killed at any point leaves at most a temporary file, never read and removed once it
is old; a full disk fails the append before anything is acknowledged. Each record carries
the CRC-32 of its JSON: a record that does not match it (a disk that lied) is set aside,
never applied and never deleted. The directory itself is not flushed after the rename, as
SQLite's synchronous=NORMAL does not flush the last commits either: only an OS crash can
lose the last records. One file per write measured 3-5 ms with its fsync, like an append
with fsync to a file of its own, and needs no lock to be read or emptied.

Names sort in the order the writes were made (nanoseconds, process, a counter), so records
are taken oldest first; whoever applies them removes them after its commit, and one applied
twice (a crash between the two) is stored once, as the events it holds carry their ids.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from contextlib import suppress
from itertools import count
from pathlib import Path

from baton.home import make_directory, write_synced

SUFFIX = ".write"
UNREADABLE = ".unreadable"
STALE_TEMPORARY = 600.0  # seconds: a temporary file this old belongs to a writer that died
_sequence = count()


class WriteQueue:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def append(self, entries: Sequence[dict]) -> None:
        """Keep one write (its entries, applied together); durable when this returns.
        Raises OSError (a full disk, an unusable directory), having kept nothing."""
        import zlib

        text = json.dumps(list(entries), separators=(",", ":"), ensure_ascii=False)
        data = f"{zlib.crc32(text.encode()):08x}\n{text}".encode()
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(_sequence)}{SUFFIX}"
        make_directory(self.directory)
        temporary = self.directory / f".{name}.tmp"
        write_synced(temporary, data)
        try:
            os.rename(temporary, self.directory / name)
        except BaseException:
            with suppress(OSError):
                os.unlink(temporary)
            raise

    def names(self) -> list[str]:
        """The records waiting, oldest first (no file is read); none without a directory that
        can be listed: the store's own file, beside it, then says what is wrong, and appending
        fails, so no write is acknowledged there."""
        try:
            return sorted(n for n in os.listdir(self.directory) if n.endswith(SUFFIX) and not n.startswith("."))
        except OSError:
            return []

    def read(self) -> list[tuple[str, list[dict]]]:
        """Each waiting record's name and entries, oldest first. A record that fails its
        checksum is set aside (renamed *.unreadable) and left out; one removed meanwhile (by a
        process that applied it) is left out too."""
        import zlib

        records = []
        for name in self.names():
            try:
                data = (self.directory / name).read_bytes()
            except FileNotFoundError:
                continue
            checksum, _, text = data.partition(b"\n")
            try:
                if int(checksum, 16) != zlib.crc32(text):
                    raise ValueError("checksum mismatch")
                entries = json.loads(text)
            except ValueError:
                with suppress(OSError):
                    os.rename(self.directory / name, self.directory / f"{name}{UNREADABLE}")
                continue
            records.append((name, entries))
        return records

    def remove(self, names: Iterable[str]) -> None:
        """Forget records that were applied, and temporary files their writers left long ago."""
        for name in names:
            with suppress(FileNotFoundError):
                os.unlink(self.directory / name)
        try:
            leftovers = [n for n in os.listdir(self.directory) if n.startswith(".") and n.endswith(".tmp")]
        except OSError:
            return
        now = time.time()
        for name in leftovers:
            with suppress(OSError):
                if now - (self.directory / name).stat().st_mtime > STALE_TEMPORARY:
                    os.unlink(self.directory / name)
