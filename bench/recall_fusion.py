"""Fusion candidates for recall, measured on the tuning part of the recall evaluation only
(bench/recall_eval.py; its untouched part is never read here, so nothing chosen with this
bench is chosen on it).

Both legs are computed in this process as Baton's embedded index computes them: the vector
leg is the exact cosine of MiniLM vectors of each record's embedding_text (the decision and
the context `baton decide` recorded, its title by default) and of the query; the keyword leg
is SQLite FTS5 BM25 over embedding_text (context, then decision) asked the query's query_words,
both 10 deep. Each candidate fuses the two lists into one, then every superseded decision is
put with its replacement at one position (the chain followed, the replacement fetched when it
did not score), as `baton recall` shows them. "current" is the product's own fusion (baton.recall.fusion.fuse);
"field-aware" is the same fusion over a keyword leg that weighs the context (title) column
apart from the decision's. Printed per query kind: recall@1 / recall@5 / MRR@10; then the
candidates at or above the plain RRF of the two legs on every kind (recall@5 and MRR@10), and
whether each is also at or above each leg alone on every kind.

    .venv/bin/python -m bench.recall_fusion [--stored-context title|context]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bench.recall_eval import DEPTH, Query, Ranking, Record, load, metrics, queries

if TYPE_CHECKING:
    from baton.recall.embedding import MiniLMEncoder as Encoder

KINDS = ("title", "context", "paraphrase", "resume")
Leg = list[tuple[str, float]]  # (ticket, score), best first
Fusion = Callable[[Query, Leg, Leg], list[str]]


def vector_leg(records: list[Record], asked: list[Query], source: str, encoder: Encoder | None = None,
               prefixes: tuple[str, str] = ("", ""), depth: int = DEPTH) -> dict[Query, Leg]:
    """The exact cosine leg, depth deep, by encoder (Baton's MiniLM by default), each document's
    and each query's text after its prefix (the query and document prefixes a model was
    trained with)."""
    from baton.recall.base import embedding_text
    from baton.recall.embedding import MiniLMEncoder

    encoder = encoder or MiniLMEncoder.load()
    documents = encoder.encode([prefixes[1] + embedding_text(r.decision, r.stored_context(source)) for r in records])
    cosines = encoder.encode([prefixes[0] + query.text for query in asked]) @ documents.T
    return {query: [(records[i].ticket, float(row[i])) for i in row.argsort()[::-1][:depth]]
            for query, row in zip(asked, cosines, strict=True)}


def keyword_legs(records: list[Record], asked: list[Query], source: str,
                 title_weights: tuple[float, ...]) -> tuple[dict[Query, Leg], dict[float, dict[Query, Leg]]]:
    """Baton's keyword leg, and one per weight of the context column against the decision's."""
    from baton.recall.keywords import match_expression, query_words

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE whole USING fts5(ticket UNINDEXED, body)")
    db.execute("CREATE VIRTUAL TABLE fields USING fts5(ticket UNINDEXED, context, decision)")
    db.executemany("INSERT INTO whole VALUES (?, ?)",
                   [(r.ticket, f"{r.stored_context(source)}. {r.decision}") for r in records])
    db.executemany("INSERT INTO fields VALUES (?, ?, ?)", [(r.ticket, r.stored_context(source), r.decision)
                                                          for r in records])

    def ask(sql: str, *parameters: object) -> Leg:
        return [(t, -s) for t, s in db.execute(sql, parameters)]

    whole: dict[Query, Leg] = {}
    fields: dict[float, dict[Query, Leg]] = {weight: {} for weight in title_weights}
    for query in asked:
        expression = match_expression(query_words(query.text))
        if expression is None:
            whole[query] = []
            for weight in title_weights:
                fields[weight][query] = []
            continue
        whole[query] = ask("SELECT ticket, bm25(whole) AS r FROM whole WHERE whole MATCH ? ORDER BY r, rowid LIMIT ?",
                           expression, DEPTH)
        for weight in title_weights:
            fields[weight][query] = ask("SELECT ticket, bm25(fields, 0, ?, 1.0) AS r FROM fields WHERE fields MATCH ? "
                                        "ORDER BY r, rowid LIMIT ?", weight, expression, DEPTH)
    return whole, fields


def product_fusion(records: list[Record], source: str, limit: int = 2 * DEPTH,
                   constants: tuple[float, float] | None = None) -> Fusion:
    """baton.recall.fusion.fuse over the legs, as the search hands it ScoredDecisions, its
    first limit (twice the depth, as `baton recall` asks); with constants, its
    (VECTOR_WEIGHT, UNRANKED) set to them for the call."""
    from baton.recall import fusion
    from baton.recall.base import DecisionRecord, ScoredDecision

    now = datetime.now(UTC).isoformat()
    stored = {r.ticket: DecisionRecord(project="eval", task_id=r.ticket, session_id="s", text=r.decision,
                                       context=r.stored_context(source), recorded_at=now) for r in records}

    def fused(query: Query, vector: Leg, keyword: Leg) -> list[str]:
        legs = [[ScoredDecision(record=stored[t], score=s) for t, s in leg] for leg in (vector, keyword)]
        kept = fusion.VECTOR_WEIGHT, fusion.UNRANKED
        fusion.VECTOR_WEIGHT, fusion.UNRANKED = constants or kept
        try:
            return [hit.record.task_id for hit in fusion.fuse(legs[0], legs[1], limit)]
        finally:
            fusion.VECTOR_WEIGHT, fusion.UNRANKED = kept
    return fused


def rrf(weight: Callable[[Query], float], k: int = 60) -> Fusion:
    """Reciprocal-rank fusion, the keyword leg weighted by weight(query); ties to the vector leg."""
    def fused(query: Query, vector: Leg, keyword: Leg) -> list[str]:
        scores: dict[str, float] = {}
        first: dict[str, tuple[int, int]] = {}
        for number, (leg, w) in enumerate(((vector, 1.0), (keyword, weight(query)))):
            for rank, (ticket, _) in enumerate(leg, start=1):
                scores[ticket] = scores.get(ticket, 0.0) + w / (k + rank)
                first.setdefault(ticket, (number, rank))
        return sorted(scores, key=lambda t: (-scores[t], first[t]))
    return fused


def normalised(alpha: float, how: str) -> Fusion:
    """alpha * the vector score + (1 - alpha) * the keyword score, each normalised over its own
    list (min-max, z-score or by its maximum); a decision one leg did not list gets that
    leg's floor."""
    def scale(leg: Leg) -> tuple[dict[str, float], float]:
        values = [s for _, s in leg]
        if not values:
            return {}, 0.0
        if how == "minmax":
            low, high = min(values), max(values)
            return {t: (s - low) / (high - low) if high > low else 1.0 for t, s in leg}, 0.0
        if how == "max":
            return {t: s / (max(values) or 1.0) for t, s in leg}, 0.0
        mean, spread = statistics.fmean(values), statistics.pstdev(values) or 1.0
        return {t: (s - mean) / spread for t, s in leg}, (min(values) - mean) / spread

    def fused(query: Query, vector: Leg, keyword: Leg) -> list[str]:
        (by_vector, vector_floor), (by_keyword, keyword_floor) = scale(vector), scale(keyword)
        tickets = list(dict.fromkeys([t for t, _ in vector] + [t for t, _ in keyword]))
        score = {t: alpha * by_vector.get(t, vector_floor) + (1 - alpha) * by_keyword.get(t, keyword_floor)
                 for t in tickets}
        return sorted(tickets, key=lambda t: -score[t])
    return fused


def coverage_weighted(records: list[Record], beta: float, source: str) -> Fusion:
    """The cosine plus beta times the share of the query's words that a decision holds: a
    query whose words are in no decision (a paraphrase) leaves the vector order."""
    from baton.recall.keywords import query_words, words

    held = {r.ticket: set(words(f"{r.stored_context(source)}. {r.decision}")) for r in records}

    def fused(query: Query, vector: Leg, keyword: Leg) -> list[str]:
        asked = query_words(query.text)
        tickets = list(dict.fromkeys([t for t, _ in vector] + [t for t, _ in keyword]))
        cosine = dict(vector)
        floor = min(cosine.values(), default=0.0)
        share = {t: sum(w in held[t] for w in asked) / len(asked) if asked else 0.0 for t in tickets}
        return sorted(tickets, key=lambda t: -(cosine.get(t, floor) + beta * share[t]))
    return fused


def under_replacements(records: list[Record]) -> Callable[[list[str]], Ranking]:
    ticket_of = {record.key: record.ticket for record in records}
    replaced_by: dict[str, list[str]] = {}
    for record in records:
        for key in record.supersedes:
            if key in ticket_of:
                replaced_by.setdefault(ticket_of[key], []).append(record.ticket)

    def paired(ranking: list[str]) -> Ranking:
        shown: dict[str, list[str]] = {}  # the newest of a chain, and what it replaced
        placed: set[str] = set()
        for ticket in ranking:
            newest, seen = ticket, {ticket}
            while (later := next((t for t in replaced_by.get(newest, []) if t not in seen), None)):
                newest = later
                seen.add(later)
            shown.setdefault(newest, [])
            if ticket not in placed and ticket != newest:
                shown[newest].append(ticket)
            placed |= {ticket, newest}
        return [(newest, *old) for newest, old in shown.items()][:DEPTH]
    return paired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stored-context", choices=("title", "context"), default="title")
    args = parser.parse_args()
    records = load(None, "tuning")
    asked = queries(records, links=True)
    vector = vector_leg(records, asked, args.stored_context)
    title_weights = (1.5, 2.0, 3.0)
    keyword, fields = keyword_legs(records, asked, args.stored_context, title_weights)
    paired = under_replacements(records)
    from baton.recall.keywords import words

    long = lambda q: len(words(q.text)) > 12  # noqa: E731  (the cut-off baton.recall.fusion has)
    candidates: dict[str, tuple[Fusion, dict[Query, Leg]]] = {
        "exact cosine alone": (lambda q, v, k: [t for t, _ in v], keyword),
        "BM25 alone (Baton's leg)": (lambda q, v, k: [t for t, _ in k], keyword),
        "plain RRF (k=60)": (rrf(lambda q: 1.0), keyword),
        "current (baton.recall.fusion)": (product_fusion(records, args.stored_context), keyword),
    }
    for k in (10, 30, 60):
        for w in (0.5, 0.6, 0.7, 0.8):
            candidates[f"weighted RRF k={k}, long query keywords {w}"] = (
                rrf(lambda q, w=w: w if long(q) else 1.0, k), keyword)
    for alpha in (0.4, 0.5, 0.6, 0.7, 0.8):
        for how in ("minmax", "z", "max"):
            candidates[f"{how}-normalised scores, vector {alpha}"] = (normalised(alpha, how), keyword)
    for beta in (0.1, 0.2, 0.3, 0.5):
        candidates[f"cosine + {beta} x query words held"] = (
            coverage_weighted(records, beta, args.stored_context), keyword)
    for vector_weight in (0.5, 0.55, 0.6, 0.65, 0.7):
        for unranked in (0.0, 0.25, 0.5, 1.0):
            candidates[f"current, vector {vector_weight}, unranked {unranked}"] = (
                product_fusion(records, args.stored_context, (vector_weight, unranked)), keyword)
    for weight in title_weights:
        candidates[f"field-aware BM25 (context x{weight}), current"] = (
            product_fusion(records, args.stored_context), fields[weight])
    table = {}
    for name, (fusion, keywords) in candidates.items():
        table[name] = {kind: metrics([(q, paired(fusion(q, vector[q], keywords[q])))
                                      for q in asked if q.kind == kind])[:3] for kind in KINDS}

    def line(name: str) -> str:
        return f"{name:48} " + "  ".join(f"{' / '.join(f'{v:.3f}' for v in table[name][kind])}" for kind in KINDS)

    def at_or_above(name: str, other: str) -> bool:
        return all(table[name][kind][i] >= table[other][kind][i] - 1e-9 for kind in KINDS for i in (1, 2))

    counts = {kind: sum(q.kind == kind for q in asked) for kind in KINDS}
    print(f"tuning part: {len(records)} records; queries " + ", ".join(f"{k} {n}" for k, n in counts.items()))
    print(f"{'':48} " + "  ".join(f"{kind + ' r@1 / r@5 / MRR@10':24}" for kind in KINDS))
    for name in table:
        print(line(name))
    print("\nat or above plain RRF on every kind (recall@5 and MRR@10):")
    for name in table:
        if name not in list(candidates)[:3] and at_or_above(name, "plain RRF (k=60)"):
            legs = [leg for leg in list(candidates)[:2] if at_or_above(name, leg)]
            print(f"  {name}: at or above {', '.join(legs) if legs else 'neither leg'} on every kind")


if __name__ == "__main__":
    main()
