"""Recall's lists beside a library's and beside the exact search, on the same vectors.

For each size (100,000 and 1,000,000 rows by default) the rows are synthetic unit vectors of
384 dimensions around 2,000 cluster centres, spread over projects as bench/run.py spreads its
decisions (half the bench's project, a twentieth a small one, the rest nine others), and cut
into the segments the product's merge rule leaves after upserts of 2,000 (recall/embedded.py:
_extend_index and _merged, each segment's centroids trained on the rows it held when they
were trained). Three systems search them, filtered to a project with one ticket left out, as
resume asks:
  - exact: a NumPy product over every row, the others' scores masked (the baseline);
  - Baton's lists: baton.recall.segments as the product builds and searches them;
  - faiss-cpu IndexIVFFlat (inner product) per segment, with the same number of lists, probes
    and k-means training budget (spherical, the same sample size and rounds), the project
    and the ticket filtered inside the search by an IDSelectorBitmap.
Prints, per system: build time, the query median (p10-p90) with 1 and with 5 query vectors
for the half project and the small one, each over the exact search's median in the same run
(queries interleave the systems, so load weighs on each alike), recall@5 against the exact
search, and the bytes each keeps per segment set (Baton's segment files, faiss's serialised
indexes); then each library's import in a fresh process beside `import numpy`. Both run one
thread, as baton.recall sets for NumPy.

    .venv/bin/python -m bench.recall_lists [--rows 100000 1000000] [--queries 40] [--quick]

faiss-cpu is not one of Baton's dependencies: install it into the venv for this bench
(`.venv/bin/pip install faiss-cpu`); without it, the faiss rows are left out. --quick runs
20,000 rows and 10 queries, to check the bench itself.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from types import ModuleType
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as bench/run.py: one BLAS thread, as the product sets

import numpy as np

from baton.recall import segments
from bench.common import ROOT, fresh_runs, spread

DIMS = 384
CLUSTERS = 2000
BATCH = 2000  # bench/run.py upserts its decisions 2,000 at a time, and each upsert extends the index
PROJECT, SMALL = segments.project_key("github.com/acme/shop"), segments.project_key("github.com/acme/small")
EXCLUDED = segments.task_key("T-0")  # the resumed ticket's own rows are left out of its search
LIMIT = 5


def product_segments(total: int) -> list[tuple[int, int, int]]:
    """(first row, rows, rows its centroids were trained on; 0: no lists) of each segment the
    product holds after `total` rows upserted BATCH at a time (recall/embedded.py's rules)."""
    held: list[tuple[int, int]] = []  # (rows, trained on)
    for start in range(0, total, BATCH):
        held.append((min(BATCH, total - start), 0))
        while len(held) >= 2 and held[-1][0] * 4 >= held[-2][0]:
            (older, trained), (newer, _) = held[-2:]
            rows = older + newer
            lists = 2 * int(np.sqrt(trained)) if trained else 0
            keep = trained if lists and lists * lists * 2 >= rows else rows
            held[-2:] = [(rows, 0 if rows < segments.IVF_MIN_ROWS else keep)]
        held = [(rows, trained or (rows if rows >= segments.IVF_MIN_ROWS else 0)) for rows, trained in held]
    firsts = np.concatenate([[0], np.cumsum([rows for rows, _ in held])[:-1]]).tolist()
    return [(int(first), rows, trained) for first, (rows, trained) in zip(firsts, held, strict=True)]


def project_of(n: np.ndarray) -> np.ndarray:
    """bench/run.py's spread: half PROJECT, a twentieth SMALL, the rest nine other projects."""
    share = n % 20
    others = np.array([segments.project_key(f"github.com/team-{i}/shop") for i in range(9)], np.uint64)
    keys = others[np.clip(share - 10, 0, 8)]
    keys[share < 10] = PROJECT
    keys[share == 19] = SMALL
    return keys


def clustered(rng: np.random.Generator, centres: np.ndarray, count: int) -> np.ndarray:
    """Unit vectors around the centres, as bench/run.py draws its decisions', in chunks."""
    out = np.empty((count, DIMS), np.float32)
    for start in range(0, count, 50_000):
        size = min(50_000, count - start)
        chunk = centres[rng.integers(0, CLUSTERS, size)] + 0.3 * rng.standard_normal((size, DIMS), np.float32)
        out[start:start + size] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
    return out


class Exact:
    """Every row scored, the other projects' and the excluded ticket's masked: the baseline."""

    def __init__(self, vectors: np.ndarray, keys: np.ndarray, projects: np.ndarray) -> None:
        self.vectors, self.keys, self.projects = vectors, keys, projects
        self.bytes = vectors.nbytes

    def search(self, queries: np.ndarray, project: int) -> dict[int, float]:
        allowed = (self.projects == np.uint64(project)) & (self.keys != np.uint64(EXCLUDED))
        scores = np.where(allowed[:, None], self.vectors @ queries.T, -np.inf)
        rows = np.unique(np.argpartition(-scores, LIMIT - 1, axis=0)[:LIMIT])
        return dict(zip(rows.tolist(), scores[rows].max(axis=1).tolist(), strict=True))


class BatonLists:
    """baton.recall.segments' lists, built and searched by its own functions."""

    def __init__(self, layout: list[tuple[int, int, int]], vectors: np.ndarray, keys: np.ndarray,
                 projects: np.ndarray) -> None:
        parts = []
        for first, count, trained in layout:
            rows = segments.Rows(np.arange(first, first + count, dtype=np.int64), keys[first:first + count],
                                 projects[first:first + count], vectors[first:first + count])
            if trained:  # trained on the segment's older rows, as _merged reuses them
                rows = rows.with_lists(segments.train_centroids(rows.vectors[:trained]))
            parts.append(rows)
        self.view = segments.View("bench", len(vectors), parts, None)
        self.bytes = sum(segments.segment_size(len(p), p.lists, DIMS) for p in parts)

    def search(self, queries: np.ndarray, project: int) -> dict[int, float]:
        return self.view.search(queries, LIMIT, project, EXCLUDED)


class FaissLists:
    """faiss IndexIVFFlat per segment (a flat index below IVF_MIN_ROWS, as Baton scans those
    whole), with Baton's list count, probes and training budget."""

    def __init__(self, faiss: ModuleType, layout: list[tuple[int, int, int]], vectors: np.ndarray,
                 keys: np.ndarray, projects: np.ndarray) -> None:
        self.faiss = faiss
        self.parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, Any, int]] = []  # Any: faiss is untyped
        rng = np.random.default_rng(0)
        for first, count, trained in layout:
            rows = vectors[first:first + count]
            if trained:
                lists = 2 * int(np.sqrt(trained))
                index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIMS), DIMS, lists, faiss.METRIC_INNER_PRODUCT)
                index.cp.spherical, index.cp.niter = True, segments.KMEANS_ROUNDS
                index.cp.min_points_per_centroid = 1
                sample = rows[rng.choice(trained, min(trained, lists * segments.POINTS_PER_LIST), replace=False)]
                index.train(sample)
                probes = min(lists, max(16, lists // 16))  # segments.Rows.probes
            else:
                index, lists, probes = faiss.IndexFlatIP(DIMS), 0, 0
            index.add(rows)
            self.parts.append((first, keys[first:first + count], projects[first:first + count], rows, index, probes))
        self.bytes = sum(len(faiss.serialize_index(part[4])) for part in self.parts)

    def search(self, queries: np.ndarray, project: int) -> dict[int, float]:
        faiss = self.faiss
        best: dict[int, float] = {}
        for first, keys, projects, rows, index, probes in self.parts:
            mine = projects == np.uint64(project)
            allowed = mine & (keys != np.uint64(EXCLUDED))
            own = int(np.count_nonzero(mine))
            if probes and own <= min(len(mine) * probes // index.nlist, segments.EXACT_MAX_ROWS):
                # As Baton (segments.Rows.scanned): a project with few rows here is scored exactly.
                chosen = np.flatnonzero(allowed)
                scores = rows[chosen] @ queries.T
                hit = chosen[np.unique(np.argpartition(-scores, min(LIMIT, len(chosen)) - 1, axis=0)[:LIMIT])]
                self._record(best, hit, first, rows, queries)
                continue
            bits = np.packbits(allowed, bitorder="little")
            selector = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bits))
            if probes:
                if own < segments.SMALL_PROJECT_SHARE * len(mine):
                    probes = min(index.nlist, 2 * probes)  # as Baton: a small project probes twice the lists
                params = faiss.SearchParametersIVF(sel=selector, nprobe=probes)
            else:
                params = faiss.SearchParameters(sel=selector)
            _, found = index.search(queries, LIMIT, params=params)
            self._record(best, np.unique(found[found >= 0]), first, rows, queries)
        return best

    @staticmethod
    def _record(best: dict[int, float], hit: np.ndarray, first: int, rows: np.ndarray, queries: np.ndarray) -> None:
        """Each row's best score over every query, as Baton's search gives it."""
        if not len(hit):
            return
        scores = (rows[hit] @ queries.T).max(axis=1)
        for row, score in zip((hit + first).tolist(), scores.tolist(), strict=True):
            best[row] = max(score, best.get(row, -np.inf))


def top(found: dict[int, float]) -> set[int]:
    return set(sorted(found, key=found.__getitem__, reverse=True)[:LIMIT])


def measure(rows: int, queries: int, faiss: ModuleType | None) -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((CLUSTERS, DIMS)).astype(np.float32)
    vectors = clustered(rng, centres, rows)
    projects = project_of(np.arange(rows))
    ticket_keys = np.array([segments.task_key(f"T-{i}") for i in range(1000)], np.uint64)
    keys = ticket_keys[np.arange(rows) % 1000]
    asked = clustered(rng, centres, 5 * queries)  # fresh vectors of the same clusters, stored nowhere
    layout = product_segments(rows)
    print(f"\n{rows:,} rows: segments {[count for _, count, _ in layout]}, "
          f"lists {[2 * int(np.sqrt(t)) if t else 0 for _, _, t in layout]}")

    systems: dict[str, Exact | BatonLists | FaissLists] = {"exact": Exact(vectors, keys, projects)}
    builds: dict[str, float] = {}
    started = time.perf_counter()
    systems["baton"] = BatonLists(layout, vectors, keys, projects)
    builds["baton"] = time.perf_counter() - started
    if faiss is not None:
        started = time.perf_counter()
        systems["faiss"] = FaissLists(faiss, layout, vectors, keys, projects)
        builds["faiss"] = time.perf_counter() - started

    print(f"{'system, query':<42}{'median ms':>10}{'p10-p90 ms':>16}{'x exact':>9}{'recall@5':>10}")
    for count in (1, 5):
        for label, project in (("half project", PROJECT), ("small project", SMALL)):
            samples: dict[str, list[float]] = {name: [] for name in systems}
            recall: dict[str, list[float]] = {name: [] for name in systems}
            for q in range(queries):
                vectors_asked = asked[q * 5:q * 5 + count]
                truth: set[int] = set()
                for name, system in systems.items():  # interleaved: load weighs on each system alike
                    began = time.perf_counter()
                    found = system.search(vectors_asked, project)
                    samples[name].append((time.perf_counter() - began) * 1000)
                    if name == "exact":
                        truth = top(found)
                    recall[name].append(len(truth & top(found)) / LIMIT)
            floor = spread(samples["exact"])[0]
            for name in systems:
                median, p10, p90 = spread(samples[name])
                title = f"{name}, {count} vector{'s' if count > 1 else ''}, {label}"
                print(f"{title:<42}{median:>10.2f}{f'{p10:.2f}-{p90:.2f}':>16}{median / floor:>8.2f}x"
                      f"{float(np.mean(recall[name])):>10.3f}")
    for name, seconds in builds.items():
        kept = systems[name].bytes
        print(f"{name}: build {seconds:.1f} s, kept {kept / 1e6:,.0f} MB "
              f"(the vectors alone {rows * DIMS * 4 / 1e6:,.0f} MB)")


def import_costs(repeat: int) -> None:
    """A fresh process importing NumPy, then NumPy and faiss: what a fresh resume would pay."""
    numpy_ms = spread(fresh_runs([sys.executable, "-c", "import numpy"], ROOT, repeat))[0]
    faiss_ms = spread(fresh_runs([sys.executable, "-c", "import numpy, faiss"], ROOT, repeat))[0]
    print(f"\nfresh process, import numpy: {numpy_ms:.1f} ms; import numpy, faiss: {faiss_ms:.1f} ms "
          f"(+{faiss_ms - numpy_ms:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="20,000 rows, 10 queries: checks the bench runs")
    args = parser.parse_args()
    sizes, queries = ([20_000], 10) if args.quick else (args.rows, args.queries)
    faiss: ModuleType | None = None
    try:
        library = importlib.import_module("faiss")
    except ImportError:
        print("faiss-cpu is not installed in this environment: its rows are left out")
    else:
        library.omp_set_num_threads(1)
        print(f"faiss-cpu {library.__version__}, NumPy {np.__version__}, one thread each")
        faiss = library
    for rows in sizes:
        measure(rows, queries, faiss)
    if faiss is not None:
        import_costs(3 if args.quick else 10)
    print(f"\nmachine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
