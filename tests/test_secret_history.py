"""A handoff document is committed to git: what its probes print is redacted before it is
digested or signed, and `baton redact --scan` names the commits that hold a secret already
committed (Baton never rewrites history)."""

import json
import re

from baton.skills.handoff.probes import output_digest
from tests.workspace import git

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_1234567890abcdefghijklmnopqrstuvwxyz"


def test_a_probes_digest_is_of_its_redacted_output_and_still_verifies(home, worktrees, cli):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    printed = f"deploy key {AWS_KEY}\n"
    (main / "settings.txt").write_text(printed)
    code, _, err = cli(main, "handoff", "--probe", "Settings=cat settings.txt")
    assert code == 0, err
    document = (main / "docs" / "handoffs" / "LATEST.md").read_text()
    digests = re.findall(r"sha256=([0-9a-f]{16})", document)
    assert digests and output_digest(printed) not in digests, digests  # nothing derived from the secret
    assert AWS_KEY not in document
    code, verified, err = cli(main, "handoff", "verify", "--json")
    assert code == 0, err
    assert {c["section"]: c["status"] for c in json.loads(verified)["live_state"]}["Settings"] == "verified"
    # What is compared is the output as redacted: a change around the secret shows (one only
    # inside it cannot, as nothing derived from the secret is kept).
    (main / "settings.txt").write_text(f"deploy key {AWS_KEY} in eu-west-1\n")
    code, verified, err = cli(main, "handoff", "verify", "--json")
    assert {c["section"]: c["status"] for c in json.loads(verified)["live_state"]}["Settings"] == "changed"


def test_redact_scan_names_the_commits_that_hold_a_committed_secret(home, worktrees, cli):
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    handoffs = main / "docs" / "handoffs"
    handoffs.mkdir(parents=True)
    (handoffs / "LATEST.md").write_text("# Handoff\nnothing secret yet\n")
    git(main, "add", "docs")
    git(main, "commit", "-qm", "clean handoff")
    (handoffs / "LATEST.md").write_text(f"# Handoff\npushed with {GITHUB_TOKEN}\n")
    git(main, "commit", "-qam", "handoff with a token")
    leaking = git(main, "rev-parse", "HEAD").strip()
    (main / "other.txt").write_text("x\n")
    git(main, "add", "other.txt")
    git(main, "commit", "-qm", "unrelated")
    code, out, err = cli(main, "redact", "--scan", "--dry-run", "--json")
    assert code == 1, err
    found = [f for f in json.loads(out)["findings"] if f["store"] == "handoff"]
    assert found == [{"store": "handoff", "where": "docs/handoffs/LATEST.md", "kinds": ["github-token"],
                      "commits": [leaking]}], found
    code, text, err = cli(main, "redact", "--scan")
    assert code == 1 and f"the newest {leaking[:12]}" in text, text
    assert GITHUB_TOKEN not in out + text + err
