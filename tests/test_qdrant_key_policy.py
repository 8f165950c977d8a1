"""A Qdrant API key goes over plain http on loopback only, unless the user allows it: off
loopback the command says so in Baton's one line, before any connection, and exits 3 as
for any unavailable main store; qdrant-client's own warning (with its source path) is never
printed."""

import pytest

from baton.recall.qdrant_server import plain_key_refusal
from tests.servers.common import free_port
from tests.workspace import run_process

KEY = "qk-5e1f0b7a"


@pytest.mark.parametrize("url, key, allow, refused", [
    ("http://192.0.2.1:6333", KEY, False, True),  # TEST-NET-1: off loopback
    ("http://qdrant.internal:6333", KEY, False, True),
    ("http://192.0.2.1:6333", KEY, True, False),
    ("http://192.0.2.1:6333", None, False, False),  # no key, nothing to read on the way
    ("https://192.0.2.1:6333", KEY, False, False),
    ("http://127.0.0.1:6333", KEY, False, False),
    ("http://localhost:6333", KEY, False, False),
    ("http://[::1]:6333", KEY, False, False),
])
def test_a_key_over_plain_http_is_refused_off_loopback_unless_allowed(url, key, allow, refused):
    assert (plain_key_refusal(url, key, allow=allow) is not None) is refused


def test_recall_refuses_the_key_off_loopback_in_one_line_and_exits_3(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    done = run_process(main, "recall", "carts", env={"BATON_QDRANT_URL": "http://192.0.2.1:6333",
                                                     "BATON_QDRANT_API_KEY": KEY})
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if "data home" not in line]
    assert len(lines) == 1 and "qdrant_allow_insecure" in lines[0], done.stderr
    assert KEY not in done.stdout + done.stderr and "Warning" not in done.stderr


def test_on_loopback_the_key_goes_without_a_word_and_an_unavailable_recall_exits_3(home, worktrees, cli):
    main, _ = worktrees
    cli(main, "bind", "OMN-1")
    done = run_process(main, "recall", "carts", env={"BATON_QDRANT_URL": f"http://127.0.0.1:{free_port()}",
                                                     "BATON_QDRANT_API_KEY": KEY})
    assert done.returncode == 3, done.stderr
    assert "recall index unavailable" in done.stderr and "qdrant_allow_insecure" not in done.stderr
    assert KEY not in done.stdout + done.stderr and "Warning" not in done.stderr
