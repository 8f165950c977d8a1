"""Redaction: what it catches of tests/secret_corpus.py, what it leaves alone, what it costs
a hook, and the rule sources it was chosen against.

Prints, each measured in the same run:
  - per kind of the corpus: the secrets, how many the redactor kept out (no 16 characters of
    one left: tests.secret_corpus.leaks), overall coverage and the negatives altered;
  - the candidates' comparison, each rule source alone on the same corpus: detect-secrets
    (when installed: Baton no longer depends on it) and the unpacked wheels found under
    --candidates (bc-detect-secrets and detect-secrets-plus: their regular-expression
    plugins; CredSweeper: its rules/config.yaml compiled as its own code does, keyword
    templates included, without its filters and ML model, which need onnxruntime, pandas
    and lxml), Baton's table alone, Baton's redactor
    (table, Kubernetes Secrets and the entropy fallback), Baton's redactor with detect-secrets'
    plugins added (what they would add), and Baton before this table (`--before`, a git
    revision): coverage, kinds wholly caught, negatives altered, rules, the time to load the
    rules (import) and to compile them all;
  - the cost on a hook's decide path: `python -c pass`, a fresh process that imports
    baton.redaction, and one that also redacts a decision; in-process, the build of the
    redactor and the redaction of a decision and of a text holding a secret, cold (re's cache
    emptied first, as in a fresh process) and warm.

    .venv/bin/python -m bench.redaction [--repeat 30] [--candidates /tmp/cands] [--before ca53b0f]
    .venv/bin/python -m bench.redaction --scan .venv/lib [--files 800]

--scan redacts every line of a sample of a tree's text files (seeded) instead, and prints
how many it altered, by kind, with examples: false positives on text with no secret.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from baton.redaction import Redactor, redactor
from baton.secret_rules import RULES
from bench.common import ROOT, spread, timed_calls
from tests.secret_corpus import NEGATIVES, SECRETS, leaks

DECISION = ("Keep carts in PostgreSQL, not Redis: totals need transactions. Context: checkout-service "
            "v2.4.0 reads cart rows under optimistic locking (SHOP-101, commit 3f9c2e1b); "
            "see src/shop/carts/repository.py and https://wiki.example.com/carts.")
WITH_SECRET = DECISION + " Deploy with GITHUB_TOKEN=ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"
# A detect-secrets package's regular-expression plugins, printed as JSON by a fresh
# process (the import is what loading them costs).
EXTRACT = """
import json, re, sys, time
started = time.perf_counter()
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
rules = []
for name, plugin in sorted(get_mapping_from_secret_type_to_class().items()):
    if name != "Public IP (ipv4)" and issubclass(plugin, RegexBasedDetector):
        rules += [[name, p.pattern, p.flags & ~re.UNICODE] for p in plugin().denylist]
print(json.dumps({"load_ms": (time.perf_counter() - started) * 1000, "rules": rules}))
"""
Spans = Callable[[str], list[tuple[int, int]]]


def fresh(code: str, repeat: int) -> list[float]:
    return timed_calls(lambda: subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True), repeat)


def replaced(text: str, spans: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in sorted(spans):
        if end <= at:
            continue
        out += [text[at:max(start, at)], "[REDACTED]"]
        at = end
    return "".join(out) + text[at:]


def pattern_spans(patterns: list[tuple[re.Pattern, int | str]]) -> Spans:
    """A rule source as spans: each pattern's secret group (its whole match without one)."""
    def spans(text: str) -> list[tuple[int, int]]:
        found = []
        for pattern, group in patterns:
            for match in pattern.finditer(text):
                start, end = match.span(group) if group in (pattern.groupindex or {}) or isinstance(group, int) \
                    else match.span(0)
                found.append(match.span(0) if start < 0 else (start, end))
        return found
    return spans


def score(redact: Callable[[str], str]) -> tuple[Counter, Counter, int]:
    total, caught = Counter(), Counter()
    for secret in SECRETS:
        total[secret.kind] += 1
        caught[secret.kind] += not leaks(secret.value, redact(secret.text).encode())
    altered = sum(redact(text) != text for text in NEGATIVES)
    return total, caught, altered


def detect_secrets_rules(path: Path | None) -> tuple[float, list[tuple[str, str, int]]] | None:
    """The plugins' patterns and their import time; None when that package is not there."""
    # An unpacked wheel is found first on the child's path, before the installed package.
    env = {**os.environ, "PYTHONPATH": str(path)} if path else None
    run = subprocess.run([sys.executable, "-c", EXTRACT], cwd=tempfile.gettempdir(), env=env, capture_output=True,
                         text=True)
    if run.returncode:
        return None
    document = json.loads(run.stdout)
    return document["load_ms"], [tuple(rule) for rule in document["rules"]]


def credsweeper_rules(path: Path) -> tuple[float, list[tuple[str, str, int, str]]]:
    """CredSweeper's rules as its Rule class compiles them: keyword rules through its
    KeywordPattern template (loaded alone: the package's import pulls its ML stack)."""
    import yaml

    started = time.perf_counter()
    spec = importlib.util.spec_from_file_location("keyword_pattern", path / "credsweeper/common/keyword_pattern.py")
    module = importlib.util.module_from_spec(spec) if spec else types.ModuleType("none")
    spec.loader.exec_module(module) if spec and spec.loader else None
    config = yaml.safe_load((path / "credsweeper/rules/config.yaml").read_text())
    rules = []
    for rule in config:
        for value in rule["values"]:
            if rule["type"] == "keyword":
                compiled = module.KeywordPattern.get_keyword_pattern(value)
                rules.append((rule["name"], compiled.pattern, compiled.flags & ~re.UNICODE, "value"))
            else:
                rules.append((rule["name"], value, 0, "value"))
    return (time.perf_counter() - started) * 1000, rules


def compiled(rules: list[tuple[str, int, int | str]], repeat: int) -> tuple[list[tuple[re.Pattern, int | str]], float]:
    """The rules' patterns (one Python's re does not take is left out, as it would be) and
    the median time to compile them all, re's cache emptied first."""
    taken = [(source, flags, group) for source, flags, group in rules if _compiles(source, flags)]
    compile_ms = statistics.median(timed_calls(lambda: [re.compile(source, flags) for source, flags, _ in taken],
                                         repeat, re.purge))
    return [(re.compile(source, flags), group) for source, flags, group in taken], compile_ms


def _compiles(source: str, flags: int) -> bool:
    try:
        re.compile(source, flags)
    except re.error:
        return False
    return True


def older_redactor(revision: str, home: Path) -> tuple[Callable[[], Redactor], float] | None:
    """baton.redaction as it was at revision, with its rules' cache in home."""
    shown = subprocess.run(["git", "show", f"{revision}:baton/redaction.py"], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode:
        return None
    module = sys.modules["baton_redaction_before"] = types.ModuleType("baton_redaction_before")
    exec(compile(shown.stdout, "baton_redaction_before.py", "exec"), module.__dict__)  # noqa: S102
    started = time.perf_counter()
    module.redactor(home)  # extracts detect-secrets' plugins into the cache
    return (lambda: module.redactor(home)), (time.perf_counter() - started) * 1000


def scan(root: Path, files: int) -> None:
    ours = redactor(None)
    suffixes = {".py", ".md", ".txt", ".rst", ".cfg", ".toml", ".json", ".yaml", ".yml"}
    found = sorted(p for p in root.rglob("*") if p.suffix in suffixes and p.is_file() and "test" not in str(p).lower())
    random.Random(7).shuffle(found)
    lines, kinds, examples = 0, Counter(), []
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
                examples.append(f"{path.relative_to(root)}: {line.strip()[:100]}")
    altered = sum(kinds.values())
    print(f"{lines} lines of {min(files, len(found))} files under {root}: {altered} findings {dict(kinds)}")
    print("\n".join(examples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--candidates", type=Path, default=Path("/tmp/cands"),
                        help="unpacked wheels: bc_detect_secrets/, detect_secrets_plus/, credsweeper/")
    parser.add_argument("--before", default="ca53b0f", help="the git revision of Baton's redaction to compare with")
    parser.add_argument("--scan", type=Path, help="count the findings in a tree's text files instead")
    parser.add_argument("--files", type=int, default=800)
    args = parser.parse_args()
    if args.scan:
        scan(args.scan, args.files)
        return

    ours = redactor(None)
    total, caught, altered = score(lambda text: ours.redact(text).text)
    print(f"{'kind':36} {'secrets':>7} {'caught':>6}")
    for kind in sorted(total):
        mark = "" if caught[kind] == total[kind] else "  MISSED"
        print(f"{kind:36} {total[kind]:7} {caught[kind]:6}{mark}")
    print(f"\ncoverage: {sum(caught.values())}/{len(SECRETS)} secrets "
          f"({100 * sum(caught.values()) / len(SECRETS):.1f}%), {len(total)} kinds, "
          f"{sum(caught[k] == total[k] for k in total)} wholly caught; "
          f"negatives altered: {altered}/{len(NEGATIVES)}")

    rows = []  # (source, caught, kinds wholly caught, altered, rules, load ms, compile ms)

    def add(name: str, redact: Callable[[str], str], rules: int, load_ms: float | None,
            compile_ms: float | None) -> None:
        t, c, a = score(redact)
        rows.append((name, sum(c.values()), sum(c[k] == t[k] for k in t), a, rules, load_ms, compile_ms))

    sources: list[tuple[str, Path | None]] = [("detect-secrets 1.5.0 (installed)", None)]
    sources += [(name, args.candidates / folder) for name, folder in
                (("bc-detect-secrets 1.5.52", "bc_detect_secrets"),
                 ("detect-secrets-plus 1.5.2", "detect_secrets_plus"))
                if (args.candidates / folder / "detect_secrets").is_dir()]
    installed: list[tuple[str, str, int]] = []
    for name, path in sources:
        extracted = detect_secrets_rules(path)
        if extracted is None:
            continue
        load_ms, rules = extracted
        installed = installed or rules
        patterns, compile_ms = compiled([(source, flags, 0) for _, source, flags in rules], args.repeat)
        add(name, lambda text, p=patterns: replaced(text, pattern_spans(p)(text)), len(rules), load_ms, compile_ms)
    config = args.candidates / "credsweeper/credsweeper/rules/config.yaml"
    if config.is_file() and importlib.util.find_spec("yaml"):  # PyYAML came with detect-secrets
        load_ms, rules = credsweeper_rules(args.candidates / "credsweeper")
        patterns, compile_ms = compiled([(source, flags, group) for _, source, flags, group in rules], args.repeat)
        add("CredSweeper 1.19.5 rules, no filters/ML", lambda text: replaced(text, pattern_spans(patterns)(text)),
            len(rules), load_ms, compile_ms)
    table, compile_ms = compiled([(source, flags, group) for _, _, source, flags, group, _ in RULES], args.repeat)
    add("Baton's table alone (no checks)", lambda text: replaced(text, pattern_spans(table)(text)), len(RULES), 0,
        compile_ms)
    add("Baton's redactor", lambda text: ours.redact(text).text, len(RULES), 0, compile_ms)
    plugins, _ = compiled([(source, flags, 0) for _, source, flags in installed], args.repeat)
    both = lambda text: replaced(ours.redact(text).text, pattern_spans(plugins)(ours.redact(text).text))  # noqa: E731
    add("Baton's redactor + detect-secrets", both, len(RULES) + len(installed), None, None)
    with tempfile.TemporaryDirectory() as scratch:
        before = older_redactor(args.before, Path(scratch)) if installed else None
        if before is not None:
            build_before, first_ms = before
            add(f"Baton before ({args.before})", lambda text: build_before().redact(text).text,
                len(build_before().rules), first_ms,
                statistics.median(timed_calls(build_before, args.repeat, re.purge)))

    print(f"\n{'rule source':42} {'caught':>14} {'kinds':>7} {'negatives':>9} {'rules':>5} "
          f"{'load ms':>8} {'compile ms':>10}")
    for name, got, kinds, negatives, count, load_ms, compile_ms in rows:
        load = f"{load_ms:.0f}" if load_ms is not None else "-"
        build = f"{compile_ms:.1f}" if compile_ms is not None else "-"
        print(f"{name:42} {got:5}/{len(SECRETS)} {100 * got / len(SECRETS):5.1f}% {kinds:4}/{len(total)} "
              f"{negatives:4}/{len(NEGATIVES)} {count:5} {load:>8} {build:>10}")
    print("(caught: secrets of the corpus with no 16 characters left; kinds: wholly caught; negatives: altered;\n"
          " load: importing the rules in a fresh process; compile: every pattern, re's cache emptied)")

    print(f"\n{'cost on the decide path':58} {'median ms':>10} {'p10-p90 ms':>14}")
    costs = [
        ("python -c pass (floor)", fresh("pass", args.repeat)),
        ("fresh: import baton.redaction", fresh("import baton.redaction", args.repeat)),
        ("fresh: import, build, redact a decision",
         fresh(f"from baton.redaction import redactor; redactor(None).redact({DECISION!r})", args.repeat)),
        ("build the redactor (in-process)", timed_calls(lambda: redactor(None), args.repeat, re.purge)),
        ("redact a decision, cold (re's cache emptied)",
         timed_calls(lambda: redactor(None).redact(DECISION), args.repeat, re.purge)),
        ("redact a decision holding a token, cold",
         timed_calls(lambda: redactor(None).redact(WITH_SECRET), args.repeat, re.purge)),
        ("redact a decision, warm", timed_calls(lambda: ours.redact(DECISION), args.repeat)),
        ("compile every rule (a resident's warm-up)",
         timed_calls(lambda: redactor(None).warm(), args.repeat, re.purge)),
    ]
    for name, samples in costs:
        median, low, high = spread(samples)
        print(f"{name:58} {median:10.2f} {f'{low:.2f}-{high:.2f}':>14}")


if __name__ == "__main__":
    main()
