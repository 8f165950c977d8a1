"""The client side of the resident process: hand a `baton` command to it, or say to run it here.

It runs first in every `baton` process, before anything else is imported, so it uses only
os, sys, time, the socket module's C part (_socket: the socket module would import selectors,
enum and array on the way to the agent's edit) and baton.trust. It reads BATON_RESIDENT,
BATON_HOME and XDG_DATA_HOME itself (tests/test_resident.py checks them against the rows); a
bad value is reported by the command run here, as every other bad setting is.

The exchange, over the resident's Unix socket (baton.skills.frontends.resident): the client
sends the request; the resident answers one byte, ACCEPT, or STALE when it is out of date and
leaves; the client says GO with its standard streams as file descriptors (SCM_RIGHTS), and a
child of the resident runs the command on them and answers its exit status as digits. No
ACCEPT within CONNECT_WAIT and the client runs the command itself; a resident that reads a
request after its client gave up sees no GO and runs nothing, so a command never runs twice.

Trust (baton.trust): the client talks only to its own user's resident. A data home another
user could write makes it run the command here, where the settings refuse it; a socket that
is not the user's own, or whose listener (SO_PEERCRED) runs as another user, is refused here
before a byte is sent. The request carries the whole environment, so the command runs in the
resident as it would here.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import time

TYPE_CHECKING = False  # typing's own flag, without importing typing (it costs this path)
if TYPE_CHECKING:
    from _socket import socket
    from collections.abc import Mapping

PROTOCOL = b"baton-resident/1"
SOCKET_NAME = "resident.sock"
LOCK_NAME = "resident.lock"
CONNECT_WAIT = 0.05  # seconds to connect and be accepted: a wedged resident costs no more
ACCEPT, STALE, GO = b"A", b"S", b"G"
# Long-running or interactive commands keep their own process; `baton mcp` runs long too, but
# every agent session waits for its first answer, and a child of the resident has Baton's tools
# built already (the client stays, and a child whose client is gone is stopped).
NOT_FORWARDED = frozenset({"serve", "projector", "resident"})
_OFF = frozenset({"0", "false", "off", "no"})
_MAX_SOCKET_PATH = 107  # sockaddr_un's sun_path, less its terminating NUL

absent = False  # no resident answered: after its own work the command starts one


def install_fingerprint() -> bytes:
    """The interpreter and the Baton installation: a resident serves only its own."""
    return os.fsencode(f"{sys.executable}\n{os.path.dirname(os.path.abspath(__file__))}")


def unsupported() -> str | None:
    """Why this system cannot run the resident process, or None. It waits on each child's
    pidfd (os.pidfd_open) and both sides ask the kernel who the peer is (SO_PEERCRED): Linux
    has both; elsewhere every command runs in its own process, as with BATON_RESIDENT=off."""
    import _socket

    missing = [name for name, found in (("os.pidfd_open", hasattr(os, "pidfd_open")),
                                        ("socket.SO_PEERCRED", hasattr(_socket, "SO_PEERCRED"))) if not found]
    return f"{' and '.join(missing)} missing here (it serves Linux)" if missing else None


def data_home(environ: Mapping[str, str]) -> str:
    """baton.home.data_home, with os.path alone (BATON_HOME, else $XDG_DATA_HOME/baton, else
    ~/.local/share/baton)."""
    if environ.get("BATON_HOME"):
        return os.path.expanduser(environ["BATON_HOME"])
    base = os.path.expanduser(environ.get("XDG_DATA_HOME") or os.path.join("~", ".local", "share"))
    return os.path.join(base, "baton")


def switched_off(environ: Mapping[str, str]) -> bool:
    return (environ.get("BATON_RESIDENT") or "").strip().lower() in _OFF


def command_word(argv: list[str]) -> str | None:
    return next((word for word in argv[1:] if not word.startswith("-")), None)


def forwarded(argv: list[str]) -> int | None:
    """The exit status of the command run by the resident process, or None: run it here."""
    global absent
    if command_word(argv) in NOT_FORWARDED or switched_off(os.environ):
        return None
    home = data_home(os.environ)
    path = os.path.join(home, SOCKET_NAME)
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        return None  # no resident can listen there
    try:
        found = os.lstat(path)
    except OSError:
        absent = True
        return None
    from baton.trust import file_refusal, home_refusal

    if home_refusal(home) is not None:
        return None  # run here, where the settings refuse the data home
    refusal = file_refusal(path, found) or (None if stat.S_ISSOCK(found.st_mode) else f"refusing {path}: not a "
                                            "socket; remove it")
    if refusal is not None:
        return _refuse(argv, refusal)
    import _socket

    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        reply = _offer(conn, path, argv)
        if reply != ACCEPT:
            absent = reply == STALE
            conn.close()
            return None
        # Committed from here: the streams go with GO, and the command is the resident's:
        # their descriptors as an array of C ints (socket.send_fds, without the array module).
        conn.settimeout(None)
        conn.sendmsg([GO], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                             b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2)))])
    except (ConnectionRefusedError, FileNotFoundError):
        absent = True  # a socket left behind by a resident that died
        conn.close()
        return None
    except Impostor as exc:
        conn.close()
        return _refuse(argv, str(exc))
    except Exception:  # noqa: BLE001 -- slow, stopped, not this protocol: nothing ran, run it here
        conn.close()
        return None
    return _answer(conn)


def _offer(conn: socket, path: str, argv: list[str]) -> bytes:
    """Connect, send the request and read the resident's one-byte reply, all within
    CONNECT_WAIT. The standard streams are not sent yet: a resident too slow to reply must
    not hold them (a caller reading our output to its end would wait for it)."""
    deadline = time.monotonic() + CONNECT_WAIT
    conn.settimeout(CONNECT_WAIT)
    conn.connect(path)
    # Whoever listens, from the kernel: the process that called listen(), as it was then.
    if (uid := peer_uid(conn)) != os.geteuid():
        raise Impostor(f"refusing {path}: the process listening there runs as uid {uid}, not you ({os.geteuid()}); "
                       "nothing was sent: remove the socket and find who started that process")
    request = _request(argv)
    conn.settimeout(max(deadline - time.monotonic(), 0.001))
    conn.sendall(len(request).to_bytes(4, "big") + request)
    conn.settimeout(max(deadline - time.monotonic(), 0.001))
    return conn.recv(1)


def peer_uid(conn: socket) -> int:
    """The user of the process at conn's other end, from the kernel (SO_PEERCRED)."""
    import _socket

    peer = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(peer[4:8], sys.byteorder)


class Impostor(Exception):
    """The resident's socket is served by another user's process."""


def _refuse(argv: list[str], refusal: str) -> int:
    """One line, and exit 3; a hook exits 0, as every failing hook does, so that the agent
    goes on (baton.skills.frontends.hooks)."""
    print(f"baton: {refusal}", file=sys.stderr)
    return 0 if command_word(argv) == "hook" else 3


def _request(argv: list[str]) -> bytes:
    umask = os.umask(0o022)
    os.umask(umask)
    # Raises (and the command runs here) when one is not a text stream over its descriptor.
    streams = [f"{s.encoding}:{s.errors}:{int(s.line_buffering)}:{int(s.write_through)}"
               for s in (sys.stdin, sys.stdout, sys.stderr) if isinstance(s, io.TextIOWrapper)]
    if len(streams) != 3:
        raise ValueError("a standard stream is not a text stream")
    fields = [PROTOCOL, install_fingerprint(), os.getcwdb(), b"%d" % umask, b"%d" % os.getppid(),
              *(s.encode() for s in streams), b"%d" % len(argv), *map(os.fsencode, argv),
              *(key + b"=" + value for key, value in os.environb.items())]
    return b"\0".join(fields)


def _answer(conn: socket) -> int:
    """Wait, as long as the command takes, for its exit status; the command is the
    resident's now and is never run again here."""
    conn.settimeout(None)
    received = b""
    try:
        while not received.endswith(b"\n"):
            chunk = conn.recv(16)
            if not chunk:
                break
            received += chunk
    except KeyboardInterrupt:
        return 130  # closing the connection ends the command, as Ctrl-C ends it here
    finally:
        conn.close()
    if received.endswith(b"\n") and received[:-1].isdigit():
        return int(received[:-1])
    print("baton: the resident process ended while running the command (`BATON_RESIDENT=off` runs "
          "commands in their own process)", file=sys.stderr)
    return 3
