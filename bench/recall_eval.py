"""How well `baton recall` finds a decision, on public Architecture Decision Records that
nobody here wrote (bench/recall_eval/records.jsonl, sources in bench/recall_eval/SOURCES.md).

The records are split, by project, into a tuning part and an untouched part (UNTOUCHED, fixed
before any tuning of recall's ranking and never read while tuning): every change of ranking
is tried on the tuning part (`--part tuning`), and the untouched part says what it is worth.
Each part is recorded in its own scratch data home, so neither part's decisions are in the
other's index.

One ticket per record, bound in a scratch git repository of the part's scratch data home
(through its resident, to be quick), `baton decide --context=CONTEXT -- DECISION` as a user
would, then `baton index`. CONTEXT is the record's title by default, as issue 26's evaluation
recorded it (a one-line why, as users write it); `--stored-context context` records the
record's whole Context section instead, which makes every context query a copy of stored
text. A record that supersedes others is recorded after them, with one `--supersedes TICKET`
per link (`--links off`: without them, as before supersede links existed). The queries are
mechanical: each record's title and each record's context (its problem statement); the
relevant item is that record's decision, found by its ticket id. Two more kinds are written
as an agent would ask (bench/recall_eval/agent_queries.jsonl, how in SOURCES.md): a paraphrase
of the question the decision answers, and a resume: the text a resume searches its related
decisions with (baton.skills.core.ticket_query.ticket_query_text) for a later ticket of the
project, from its goal, next action and files. Each query runs as `baton recall --json
--limit 10 QUERY`, a fresh process through the resident (a resume's related search asks the
same index with that text and its vector, and has no decisions of its own to add: the ticket
is new).

Four lists are scored on the same queries:
  - baton recall: the list `baton recall` answered (its vector and keyword legs fused inside
    Baton, baton.recall.fusion, and a superseded decision shown with its replacement as one
    result: both are at that result's position, as a client counting the results sees them),
  - BM25 alone: SQLite FTS5 (its default weights, every word) over the same "decision.
    context" texts, in this process,
  - exact cosine alone: the same MiniLM vectors (each record's and query's embedded by
    Baton's encoder in this process), every record scored,
  - plain RRF: reciprocal-rank fusion (k=60) of those two lists, the simplest hybrid.
Printed per part, per leg, overall ("all": title and context queries, as before the other
kinds existed) and per query kind (paraphrase and resume on their own rows): recall@1, recall@5, MRR@10, nDCG@10, a
query answered by its record's decision or (links recorded) by one that replaced it; the
same strictly (the record's own only); then the stale-awareness count (for each record that
supersedes another, and each of the replacement's queries: is the superseded decision ranked
above its replacement?); the cosine scores the relevant decision and the others listed got,
and for each threshold what share of each would be shown (what BATON_RECALL_MIN_SCORE is set
from); and the median recall latency beside `python -c pass` measured in the same run. These
last four are over title and context queries, comparable with runs before the other kinds.

    .venv/bin/python -m bench.recall_eval [--part tuning|untouched|both] [--limit-records N]
                                          [--stored-context title|context] [--links on|off]
                                          [--floor-repeat 15]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import BATON, fresh_runs, git, scratch_worktree, spread, start_resident

RECORDS = Path(__file__).resolve().parent / "recall_eval" / "records.jsonl"
AGENT_QUERIES = RECORDS.with_name("agent_queries.jsonl")
DEPTH = 10  # what every leg answers and every metric reads
Ranking = list[tuple[str, ...]]  # the tickets at each position, best first: a leg's one each
RRF_K = 60
WORD = re.compile(r"\w+")
# The untouched part: these projects' records, chosen before any tuning (a third of the
# records and of the supersede links); every other project's records are the tuning part.
# The second line is the projects added for issue 42, assigned by the same rule when they
# were committed, before any run read them; the third, the projects added after the fusion
# was last chosen, untouched whole; the lines after it, the projects added later still,
# untouched whole as well (SOURCES.md), the last line with agent queries written with them.
UNTOUCHED = frozenset({"gardenlinux/gardenlinux", "backstage/backstage", "DEFRA/epr-re-ex-service",
                       "cloudfoundry/bosh-bootloader",
                       "mozilla/fxa", "guardian/dotcom-rendering", "npryce/adr-tools",
                       "DFE-Digital/register-trainee-teachers",
                       "DFE-Digital/buy-for-your-school", "UKHomeOffice/drt-v2", "LBHackney-IT/report-a-defect",
                       "UKGovernmentBEIS/regulated-professions-register", "bitzesty/qae",
                       "SmartBear/git-en-boite", "ONSdigital/eq-survey-runner",
                       "Accenture/reactive-interaction-gateway", "buildit/bookit-infrastructure",
                       "dasch-swiss/dsp-api", "citizensadvice/local-office-search-api",
                       "dxw/whippet", "cozy/cozy-stack", "atlassian/github-for-jira", "ONSdigital/sdc",
                       "OHS-Hosting-Infrastructure/complaint-tracker", "ahitrin/SiebenApp",
                       "MITLibraries/slingshot", "DEFRA/ffc-ahwr-frontend", "Adyen/adyen-commercetools",
                       "CDCgov/phdi", "Newarkandsherwood/housing-repairs-online",
                       "LBHackney-IT/social-care-architecture", "AI-SDC/SACRO-Viewer",
                       "DFE-Digital/apply-for-teacher-training", "ViewComponent/view_component",
                       "AlfrescoArchive/alfresco-anaxes-shipyard",
                       "nationalarchives/tdr-dev-documentation", "wmde/wikibase-release-pipeline",
                       "island-is/island.is", "digitalservicebund/digitalcheck-dito", "CMS-Enterprise/easi-app"})
PARTS = ("tuning", "untouched")
RECORD_KINDS = ("title", "context")  # "all" is these, as it was before the agents' kinds
AGENT_KINDS = ("paraphrase", "resume")


@dataclass(frozen=True)
class Record:
    key: str  # repo:path, what supersedes links name
    ticket: str
    title: str
    context: str
    decision: str
    supersedes: tuple[str, ...]
    paraphrase: str
    resume: str  # what a resume of a later ticket searches with

    def stored_context(self, source: str) -> str:
        """What `baton decide --context` records: the title or the Context section."""
        return self.title if source == "title" else self.context


@dataclass(frozen=True)
class Query:
    kind: str  # one of RECORD_KINDS or AGENT_KINDS
    text: str
    relevant: str  # the ticket whose decision answers it
    # relevant, and (links recorded) the tickets whose decisions replaced it, directly or not:
    # Baton ranks a superseded decision below current ones by design, and its replacement
    # answers the question for an agent.
    answers: frozenset[str] = frozenset()


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def resume_text(ticket: str, written: dict) -> str:
    """What a resume of a ticket with this goal, next action and files searches with: the
    product's own text, from a session holding only those."""
    from datetime import UTC, datetime

    from baton.registry.model import Session, Touch
    from baton.skills.core.ticket_query import ticket_query_text

    now = datetime.now(UTC)
    files = {path: Touch(repo="eval", path=path, last_at=now) for path in written["files"]}
    return ticket_query_text(Session(task_id=ticket, goal=written["goal"], next_action=written["next_action"],
                                     files=files, created_at=now, last_activity=now))


def load(limit: int | None, part: str) -> list[Record]:
    """The part's records (the first limit of them, if given), each with its agent queries."""
    rows = [row for row in jsonl(RECORDS) if (row["repo"] in UNTOUCHED) == (part == "untouched")]
    rows = rows[:limit] if limit else rows
    written = {(row["repo"], row["path"]): row for row in jsonl(AGENT_QUERIES)}
    return [Record(f"{row['repo']}:{row['path']}", f"EVAL-{n}", row["title"], row["context"], row["decision"],
                   tuple(f"{row['repo']}:{path}" for path in row.get("supersedes", [])),
                   agent["paraphrase"], resume_text(f"LATER-{n}", agent))
            for n, row in enumerate(rows, start=1) for agent in [written[(row["repo"], row["path"])]]]


def queries(records: list[Record], links: bool) -> list[Query]:
    ticket_of = {record.key: record.ticket for record in records}
    replaced_by: dict[str, set[str]] = {}
    for record in records:
        for key in record.supersedes:
            if key in ticket_of:
                replaced_by.setdefault(ticket_of[key], set()).add(record.ticket)

    def answering(ticket: str) -> frozenset[str]:
        found, todo = {ticket}, [ticket]
        while links and todo:
            for newer in replaced_by.get(todo.pop(), ()):
                if newer not in found:
                    found.add(newer)
                    todo.append(newer)
        return frozenset(found)

    return [Query(kind, text, record.ticket, answering(record.ticket)) for record in records
            for kind, text in (("title", record.title), ("context", record.context),
                               ("paraphrase", record.paraphrase), ("resume", record.resume))]


def environment(home: Path) -> dict[str, str]:
    """The scratch home's, with a store budget that a busy machine cannot exhaust: this bench
    scores what recall finds, and a recall cut short by the budget would score as a miss."""
    return {**os.environ, "BATON_HOME": str(home), "BATON_RESIDENT": "on", "BATON_BACKGROUND_DELIVERY": "off",
            "BATON_STORE_TIMEOUT": "30"}


def baton(cwd: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run([str(BATON), *args], cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"baton {args[0]} failed ({result.returncode}): {result.stderr[-500:]}")
    return result.stdout


def superseded_first(records: list[Record]) -> list[Record]:
    """records, each after those it supersedes (a link names an existing decision)."""
    by_key = {record.key: record for record in records}
    ordered: dict[str, Record] = {}
    visiting: set[str] = set()  # a cycle of links ends where it started

    def visit(record: Record) -> None:
        if record.key in ordered or record.key in visiting:
            return
        visiting.add(record.key)
        for key in record.supersedes:
            if key in by_key:
                visit(by_key[key])
        ordered[record.key] = record

    for record in records:
        visit(record)
    return list(ordered.values())


def record_decisions(worktree: Path, env: dict[str, str], records: list[Record], source: str, links: bool) -> str:
    """Each record's decision on its own ticket (with its supersede links when links), then
    the index built (bounded wait for what the background indexer still holds); index's last line."""
    git(worktree, "commit", "-q", "--allow-empty", "-m", "init")
    ticket_of = {record.key: record.ticket for record in records}
    for record in superseded_first(records) if links else records:
        baton(worktree, env, "bind", record.ticket, "--agent", "claude")
        replaced = [f"--supersedes={ticket_of[key]}" for key in record.supersedes if key in ticket_of] if links else []
        baton(worktree, env, "decide", f"--context={record.stored_context(source)}", *replaced, "--",
              record.decision)
    deadline = time.monotonic() + 600
    while True:
        last = baton(worktree, env, "index").strip().splitlines()[-1]
        if last.endswith(" 0 wait.") or time.monotonic() > deadline:
            return last
        time.sleep(1)


def exact_cosine(records: list[Record], asked: list[Query], source: str
                 ) -> tuple[dict[Query, list[str]], list[tuple[Query, dict[str, float]]]]:
    """Each query's tickets by the cosine of its vector with every record's (as Baton embeds
    both, baton.recall.base.embedding_text), best first, and the top DEPTH's scores (what
    BATON_RECALL_MIN_SCORE bounds)."""
    from baton.recall.base import embedding_text
    from baton.recall.embedding import MiniLMEncoder

    encoder = MiniLMEncoder.load()
    documents = encoder.encode([embedding_text(r.decision, r.stored_context(source)) for r in records])
    cosines = encoder.encode([query.text for query in asked]) @ documents.T
    rankings: dict[Query, list[str]] = {}
    scored: list[tuple[Query, dict[str, float]]] = []
    for query, row in zip(asked, cosines, strict=True):
        best = row.argsort()[::-1][:DEPTH]
        rankings[query] = [records[i].ticket for i in best]
        scored.append((query, {records[i].ticket: float(row[i]) for i in best}))
    return rankings, scored


def baton_recall(worktree: Path, env: dict[str, str], query: Query) -> tuple[Ranking, float]:
    """The tickets `baton recall` ranks for the query, best first (a result's replaced decisions
    at its position), and its milliseconds."""
    started = time.perf_counter()
    answer = json.loads(baton(worktree, env, "recall", "--json", "--limit", str(DEPTH), query.text))
    elapsed = (time.perf_counter() - started) * 1000
    return [(hit["task_id"], *(old["task_id"] for old in hit["replaces"])) for hit in answer][:DEPTH], elapsed


THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6)


def score_lines(scored: list[tuple[Query, dict[str, float]]]) -> list[str]:
    """The scores of the relevant decision and of the others listed, and what each threshold
    keeps of each: the share of queries whose relevant decision it shows, the share of the
    other hits it shows, and the share of queries where it shows some other decision above
    the relevant one's score or without it (an unrelated decision in the agent's context)."""
    relevant = [scores[query.relevant] for query, scores in scored if query.relevant in scores]
    others = [score for query, scores in scored for ticket, score in scores.items() if ticket != query.relevant]
    quartiles = lambda values: " / ".join(f"{v:.3f}" for v in statistics.quantiles(values, n=4))  # noqa: E731
    lines = [(f"  relevant decision found in top {DEPTH}: {len(relevant)} of {len(scored)} queries, "
              f"score quartiles {quartiles(relevant)}"),
             f"  other decisions listed: {len(others)}, score quartiles {quartiles(others)}",
             f"  {'threshold':>9} {'relevant shown':>15} {'others shown':>13} {'queries with only others':>25}"]
    for threshold in THRESHOLDS:
        kept = statistics.fmean([scores.get(query.relevant, -1.0) >= threshold for query, scores in scored])
        shown = statistics.fmean([score >= threshold for score in others])
        only_others = statistics.fmean([scores.get(query.relevant, -1.0) < threshold
                                        and any(s >= threshold for t, s in scores.items() if t != query.relevant)
                                        for query, scores in scored])
        lines.append(f"  {threshold:9.2f} {kept:15.3f} {shown:13.3f} {only_others:25.3f}")
    return lines


class KeywordLeg:
    """BM25 (SQLite FTS5, its default weights) over each record's "decision. context"."""

    def __init__(self, records: list[Record], source: str) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(ticket UNINDEXED, body)")
        self.db.executemany("INSERT INTO docs (ticket, body) VALUES (?, ?)",
                            [(record.ticket, f"{record.decision}. {record.stored_context(source)}")
                             for record in records])

    def rank(self, text: str) -> list[str]:
        # Each word quoted, joined by OR: a query's punctuation never reaches FTS5's syntax.
        words = [f'"{word}"' for word in dict.fromkeys(WORD.findall(text.lower()))]
        if not words:
            return []
        rows = self.db.execute("SELECT ticket FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                               (" OR ".join(words), DEPTH)).fetchall()
        return [ticket for (ticket,) in rows]


def fused(*rankings: list[str]) -> list[str]:
    """Reciprocal-rank fusion: each list adds 1 / (k + rank) to the tickets it ranks."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, ticket in enumerate(ranking, start=1):
            scores[ticket] = scores.get(ticket, 0.0) + 1 / (RRF_K + rank)
    return sorted(scores, key=lambda ticket: -scores[ticket])[:DEPTH]


def metrics(rankings: list[tuple[Query, Ranking]], *, strict: bool = False) -> tuple[float, float, float, float]:
    """(recall@1, recall@5, MRR@10, nDCG@10), at the first position holding a ticket that answers
    each query (strict: only its own record's)."""
    ranks = [next((rank for rank, tickets in enumerate(ranking[:DEPTH], start=1)
                   if query.relevant in tickets or (not strict and not query.answers.isdisjoint(tickets))), None)
             for query, ranking in rankings]
    mean = lambda values: statistics.fmean(values) if values else float("nan")  # noqa: E731
    return (mean([rank == 1 for rank in ranks]), mean([rank is not None and rank <= 5 for rank in ranks]),
            mean([1 / rank if rank else 0.0 for rank in ranks]),
            mean([1 / math.log2(rank + 1) if rank else 0.0 for rank in ranks]))


def stale_wins(records: list[Record], rankings: dict[Query, Ranking]) -> tuple[int, int]:
    """(cases where a superseded decision outranks its replacement, cases): one case per
    supersedes link and query of the replacement. At one position, the first ticket is the one
    shown first: a replacement's replaced decisions come after it."""
    ticket_of = {record.key: record.ticket for record in records}
    wins = cases = 0
    for record in records:
        for old in (ticket_of[key] for key in record.supersedes if key in ticket_of):
            for query, ranking in rankings.items():
                if query.relevant != record.ticket:
                    continue
                cases += 1
                position: dict[str, tuple[int, int]] = {}
                for rank, tickets in enumerate(ranking):
                    for order, ticket in enumerate(tickets):
                        position.setdefault(ticket, (rank, order))
                wins += old in position and position[old] < position.get(record.ticket, (DEPTH, 0))
    return wins, cases


def evaluate(part: str, args: argparse.Namespace) -> None:
    """Record the part's decisions in a scratch home, ask every query, print the part's tables."""
    records = load(args.limit_records, part)
    asked = queries(records, args.links == "on")
    keyword = KeywordLeg(records, args.stored_context)
    with tempfile.TemporaryDirectory(prefix="baton-bench-recall-") as scratch_name:
        scratch = Path(scratch_name)
        env = environment(scratch / "home")
        worktree = scratch_worktree(scratch)
        resident = start_resident(scratch / "home", env)
        try:
            indexed = record_decisions(worktree, env, records, args.stored_context, args.links == "on")
            answered: dict[Query, Ranking] = {}
            latencies = []
            for query in asked:
                answered[query], ms = baton_recall(worktree, env, query)
                if query.kind in RECORD_KINDS:  # comparable with runs before the agents' kinds
                    latencies.append(ms)
            floor = fresh_runs([sys.executable, "-c", "pass"], scratch, args.floor_repeat)
        finally:
            resident.terminate()
            resident.wait(timeout=60)
    cosine, scored = exact_cosine(records, asked, args.stored_context)
    scored = [(query, scores) for query, scores in scored if query.kind in RECORD_KINDS]
    words = {query: keyword.rank(query.text) for query in asked}
    one_each = {"BM25 alone (FTS5)": words, "exact cosine alone": cosine,
                f"plain RRF (k={RRF_K})": {query: fused(cosine[query], words[query]) for query in asked}}
    legs = {"baton recall": answered,
            **{leg: {query: [(t,) for t in ranking[query]] for query in asked} for leg, ranking in one_each.items()}}

    projects = len({record.key.split(":")[0] for record in records})
    links = sum(len(record.supersedes) for record in records)
    print(f"\n== {part} part: {len(records)} records from {projects} projects, {len(asked)} queries, {links} "
          f"supersedes links; --context records the {args.stored_context}; supersede links recorded: "
          f"{args.links}; baton index: {indexed}")
    print(f"\n\"all\" is the {' and '.join(RECORD_KINDS)} queries (as before the agents' kinds); "
          f"{' and '.join(AGENT_KINDS)} are on their own rows, not in it.")
    print(f"\n{'leg':24} {'queries':10} {'recall@1':>9} {'recall@5':>9} {'MRR@10':>8} {'nDCG@10':>8}")
    for leg, rankings in legs.items():
        for kind in ("all", *RECORD_KINDS, *AGENT_KINDS):
            chosen = [(query, ranking) for query, ranking in rankings.items()
                      if query.kind == kind or (kind == "all" and query.kind in RECORD_KINDS)]
            r1, r5, mrr, ndcg = metrics(chosen)
            print(f"{leg if kind == 'all' else '':24} {kind:10} {r1:9.3f} {r5:9.3f} {mrr:8.3f} {ndcg:8.3f}")
    # What follows is over the records' own kinds, comparable with runs before the agents' kinds.
    legs = {leg: {query: ranking for query, ranking in rankings.items() if query.kind in RECORD_KINDS}
            for leg, rankings in legs.items()}
    replaced = sum(len(query.answers) > 1 for query in asked if query.kind in RECORD_KINDS)
    if replaced:
        print(f"\n{replaced} queries ask for a decision that another replaced; above, the replacement answers "
              f"them too. Strict (only the record's own decision answers; title and context queries):")
        for leg, rankings in legs.items():
            r1, r5, mrr, ndcg = metrics(list(rankings.items()), strict=True)
            print(f"{leg:24} {'all':10} {r1:9.3f} {r5:9.3f} {mrr:8.3f} {ndcg:8.3f}")
    print("\nsuperseded decision ranked above its replacement, per (link, replacement's title or context query):")
    for leg, rankings in legs.items():
        wins, cases = stale_wins(records, rankings)
        print(f"  {leg:24} {wins} of {cases}")
    print("\nexact cosine scores, the relevant decision against the others in the top 10:")
    print("\n".join(score_lines(scored)))
    median, low, high = spread(latencies)
    floor_median, _, _ = spread(floor)
    print(f"\nbaton recall --json --limit {DEPTH}, fresh process through the resident: median {median:.1f} ms "
          f"(p10-p90 {low:.1f}-{high:.1f}) beside python -c pass {floor_median:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=(*PARTS, "both"), default="both",
                        help="which part of the records to evaluate (default both, each apart)")
    parser.add_argument("--limit-records", type=int, default=None, metavar="N", help="only the first N records")
    parser.add_argument("--stored-context", choices=("title", "context"), default="title",
                        help="what `baton decide --context` records (default: the title)")
    parser.add_argument("--links", choices=("on", "off"), default="on",
                        help="record the records' supersede links with `baton decide --supersedes` (default on)")
    parser.add_argument("--floor-repeat", type=int, default=15, help="runs of `python -c pass` (default 15)")
    args = parser.parse_args()
    for part in PARTS if args.part == "both" else (args.part,):
        evaluate(part, args)


if __name__ == "__main__":
    main()
