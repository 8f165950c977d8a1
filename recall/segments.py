"""The derived search index of the embedded recall store: immutable segment files of
vectors, listed by a manifest, always rebuildable from the vector store.

Why files beside the vector store: a search at 100,000 decisions reads 150 MB of float32;
from SQLite blobs that costs hundreds of milliseconds, from a file mapped into memory a few.
Why immutable segments and a manifest: a writer never changes a file that another process
may have mapped (no torn reads, no SIGBUS from a file shrinking under a mapping); it writes
a new segment in full, syncs it, and replaces the manifest by a rename, as log-structured
stores do. Readers need no lock.

Why nothing here is trusted: every segment names the vector store it was built from and the
sequence range it holds, the opener checks both against the store, and a segment whose size
or modification time differs from what the manifest recorded is checksummed before use.
Anything that does not check out is reported as Stale, and the caller rebuilds from the
vector store, which never needs the embedding model.

Why lists: scoring every vector costs a pass over all of them (about 10 ms at 100,000 on
this machine class, 100 at a million). A segment of IVF_MIN_ROWS rows or more is split into
lists around k-means centroids (an inverted file, as in FAISS's IVF-Flat), and a query
scores only the rows of its nearest lists; the bench prints the recall this keeps against
an exact search. Only a writer (the indexer, in the background) trains centroids; a reader
that must rebuild searches every row instead. A search of several query vectors (a resume
asks with a ticket's decisions) scores the union of their lists once, by every query in one
product: the rows are read once however many queries probe them.

Why a project key per row: every search is of one project (baton.projects), and the filter
is applied inside the search, before the top k are chosen, so a project's best rows are
found however few of the rows are its own. A project with fewer rows than a list search
would score (and at most EXACT_MAX_ROWS) is searched exactly, over its rows only; a bigger
one through its lists, the other projects' rows left out of each list. A segment of at most
EXACT_SEGMENT_ROWS rows that holds a good share of the rows searched is scored whole.

Segment layout (little-endian): a 64-byte header, then the rows' sequence numbers (int64),
their ticket keys (uint64, see task_key), their project keys (uint64, see project_key; 0
for a row stored before projects), the vectors (float32, rows x dimensions) and, for
a segment with lists, the centroids (float32, lists x dimensions) and each list's first row
(int64, lists + 1); the rows of a list are contiguous.
"""

from __future__ import annotations

import functools
import hashlib
import json
import mmap
import os
import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from baton.home import write_synced

MANIFEST = "MANIFEST"
MAGIC = b"BATONVEC"
FORMAT = 2  # 2: project keys (a segment of format 1 is Stale, rebuilt from the vector store)
# magic, format, dims, count, first seq, last seq, store id, body crc, lists
_HEADER = struct.Struct("<8sIIQQQ16sII")
HEADER_SIZE = 64
# Below this a pass over every row is about what choosing lists costs. At 20,000, a
# 100,000-row index kept 22,000 rows in segments scanned whole: a search of 5 query
# vectors took 8.4 ms, 3.1 ms with 5,000, at the same recall@5 (0.996; bench/run.py).
IVF_MIN_ROWS = 5_000
# Our own lists, not faiss's IVF-Flat: as fast and exact, quicker to build, no heavy import
# (bench/recall_lists.py; docs/performance.md, "Recall's lists against faiss").
POINTS_PER_LIST = 32  # k-means sample size per centroid
KMEANS_ROUNDS = 8
GATHER_SHARE = 1 / 8  # up to this share of a segment's rows, a project's are gathered and scored alone
# A project with lists to search is searched exactly, over its own rows gathered, when it has
# no more rows than a list search scores and no more than this: gathering costs about
# 0.3 us a row, and at 1,000,000 decisions a project of 50,000 rows took 14.5 ms that way
# against 3.4 ms for one ten times its size through its lists (bench/run.py).
EXACT_MAX_ROWS = 8_000
# A segment of at most EXACT_SEGMENT_ROWS rows that holds at least WHOLE_SHARE of the rows
# searched is scored whole, lists or not. Its lists (built from IVF_MIN_ROWS, so that merges
# carry them on) hold a few dozen rows each, and probing 16 of them lost neighbours: at
# 8,000 decisions the bench's project found 0.676 of the exact top 5, 1.000 scored whole,
# in 0.81 against 0.43 ms (bench/run.py --recall-only). A smaller share holds few of the
# best rows, and scoring it whole cost more than it found: the newest 8,000 rows of a
# million made resume's related search 1.4 ms slower (18.4 against 17.0 ms), at the same
# recall@5 (1.000).
EXACT_SEGMENT_ROWS = 10_000
WHOLE_SHARE = 1 / 4
# A project holding less than this share of a segment probes twice the lists: its nearest
# rows lie farther out. At 1,000,000 decisions, for a project of a twentieth of them,
# recall@5 went from 0.972 to 0.992 and a 5-vector search from 4.0 to 7.4 ms.
SMALL_PROJECT_SHARE = 1 / 8
SCOPES_KEPT = 64  # projects whose scope a part keeps (a store holds a few)
# NumPy's BLAS (OpenBLAS) computes a product of at most 64**3 multiply-adds with its kernel
# for small matrices, twice as fast for 5 query vectors as its general one on the same rows
# (0.76 against 1.41 ms for 7,344 rows, warm): rows are scored in blocks that small.
SMALL_PRODUCT = 64 ** 3


class Stale(Exception):
    """The derived index does not match the vector store (missing, corrupt or out of date)."""


def task_key(task_id: str) -> int:
    """A 64-bit key of a ticket id, compared in NumPy to leave a ticket out of a search."""
    return int.from_bytes(hashlib.blake2b(task_id.encode("utf-8"), digest_size=8).digest(), "little")


UNSCOPED = 0  # the project key of a row stored before projects: no search asks for it


@functools.lru_cache(maxsize=256)  # a store holds a few projects, each of many rows
def project_key(project: str | None) -> int:
    """A 64-bit key of a project (never UNSCOPED), compared in NumPy to keep a search to it."""
    if project is None:
        return UNSCOPED
    digest = hashlib.blake2b(project.encode("utf-8"), digest_size=8, person=b"project").digest()
    return int.from_bytes(digest, "little") or 1


@dataclass(frozen=True)
class Scope:
    """Which rows of a part a search of one project scores. probes 0: its rows, exactly
    (chosen: their indices, their vectors gathered, or copied once into gathered; mask:
    every row scored, the others' masked; neither: every row is the project's); otherwise
    that many lists per query, list i's rows of the project being starts[i]:ends[i]."""

    size: int  # the project's rows in the part
    probes: int = 0
    chosen: np.ndarray | None = None
    gathered: np.ndarray | None = None
    mask: np.ndarray | None = None
    starts: np.ndarray | None = None
    ends: np.ndarray | None = None


@dataclass(frozen=True)
class Rows:
    """Rows of the vector store: seqs int64, keys and projects uint64, vectors float32; with
    lists, the rows are grouped by list: list i is rows offsets[i]:offsets[i + 1], around
    centroids[i]."""

    seqs: np.ndarray
    keys: np.ndarray
    projects: np.ndarray
    vectors: np.ndarray
    centroids: np.ndarray | None = None
    offsets: np.ndarray | None = None
    # Each project's Scope (and whether the segment was scored whole), found on its first
    # search: the rows never change (a segment is immutable), and finding a project's rows is
    # a pass over all of them.
    _scopes: dict[tuple[int | None, bool], Scope] = field(default_factory=dict, init=False, repr=False,
                                                          compare=False)

    @classmethod
    def empty(cls, dims: int) -> Rows:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.uint64),
                   np.zeros((0, dims), np.float32))

    @classmethod
    def concat(cls, parts: Sequence[Rows], dims: int) -> Rows:
        """The rows of parts, without lists (ordered by sequence number)."""
        if not parts:
            return cls.empty(dims)
        seqs = np.concatenate([p.seqs for p in parts])
        order = np.argsort(seqs, kind="stable")
        return cls(seqs[order], np.concatenate([p.keys for p in parts])[order],
                   np.concatenate([p.projects for p in parts])[order],
                   np.concatenate([p.vectors for p in parts])[order])

    def __len__(self) -> int:
        return len(self.seqs)

    @property
    def lists(self) -> int:
        return 0 if self.centroids is None else len(self.centroids)

    def with_lists(self, centroids: np.ndarray) -> Rows:
        """These rows grouped into the lists of the nearest of centroids."""
        assignment = nearest_lists(self.vectors, centroids)
        # Within a list, a project's rows are contiguous (ordered by project key): a search
        # of one project scores its span of each list, as Qdrant keeps a tenant's points together.
        order = np.lexsort((self.projects, assignment))
        counts = np.bincount(assignment, minlength=len(centroids))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return Rows(self.seqs[order], self.keys[order], self.projects[order], np.ascontiguousarray(self.vectors[order]),
                    np.ascontiguousarray(centroids, np.float32), offsets)

    def extended(self, newer: Rows) -> Rows:
        """These rows (with lists) and newer's (all of higher sequence numbers) as one, in
        these lists: only newer's rows are assigned, and each goes after this segment's rows
        of its list and project, so the result is what with_lists gives for the rows of both
        (a merge into a big segment costs its newer rows' products, not all of them again)."""
        centroids, offsets = self.centroids, self.offsets
        if centroids is None or offsets is None:
            raise ValueError("only rows with lists are extended")
        newer = newer.in_sequence()
        added = nearest_lists(newer.vectors, centroids)
        # (list, project) as one sortable number: the projects ranked among both sets' keys.
        known = np.unique(np.concatenate([np.unique(self.projects), newer.projects]))
        held = np.repeat(np.arange(len(centroids), dtype=np.int64), np.diff(offsets)) * len(known) \
            + np.searchsorted(known, self.projects)
        wanted = added.astype(np.int64) * len(known) + np.searchsorted(known, newer.projects)
        order = np.argsort(wanted, kind="stable")  # newer is in sequence: a group keeps that order
        at = np.searchsorted(held, wanted[order], side="right")
        counts = np.diff(offsets) + np.bincount(added, minlength=len(centroids))
        return Rows(np.insert(self.seqs, at, newer.seqs[order]), np.insert(self.keys, at, newer.keys[order]),
                    np.insert(self.projects, at, newer.projects[order]),
                    np.insert(self.vectors, at, newer.vectors[order], axis=0), centroids,
                    np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))

    def in_sequence(self) -> Rows:
        """These rows ordered by sequence number, without lists."""
        if self.centroids is None and (len(self) < 2 or bool((np.diff(self.seqs) > 0).all())):
            return self
        order = np.argsort(self.seqs, kind="stable")
        return Rows(self.seqs[order], self.keys[order], self.projects[order], self.vectors[order])

    def probes(self) -> int:
        """How many lists a query scores: about a sixteenth of the rows, at least 16 lists."""
        return min(self.lists, max(16, self.lists // 16))

    def scanned(self) -> int:
        """About how many rows a query of a segment with lists scores: a project with no more
        rows than that (and at most EXACT_MAX_ROWS) is searched exactly, over its own rows."""
        return len(self) * self.probes() // max(1, self.lists)

    def scope(self, project: int | None, *, of_rows: int | None = None) -> Scope:
        """Which of these rows a search of project (its project_key; None: every row) scores,
        when it searches of_rows rows in all (None: these alone)."""
        whole = self.offsets is not None and WHOLE_SHARE * (of_rows or len(self)) <= len(self) <= EXACT_SEGMENT_ROWS
        known = self._scopes.get((project, whole))
        if known is None:
            known = self._scope_of(project, whole)
            if len(self._scopes) >= SCOPES_KEPT:
                self._scopes.clear()
            self._scopes[project, whole] = known
        return known

    def _scope_of(self, project: int | None, whole: bool) -> Scope:
        mine = None if project is None else self.projects == np.uint64(project)
        size = len(self) if mine is None else int(np.count_nonzero(mine))
        if not size:
            return Scope(0)
        if self.offsets is not None and not whole and size > min(self.scanned(), EXACT_MAX_ROWS):
            probes = self.probes()
            if size < SMALL_PROJECT_SHARE * len(self):
                probes = min(self.lists, 2 * probes)
            starts, ends = _spans(self.offsets, mine)
            return Scope(size, probes, starts=starts, ends=ends)
        # Scored exactly. A project of at most GATHER_SHARE of the rows is scored over its
        # rows alone; a bigger one over every row, the others' scores then masked: gathering
        # rows costs several times what scoring them in place does (bench/run.py). In a part
        # too small for lists (the newest rows), the project's rows are copied together
        # once: every later search reads them alone, at half the cost of the part's in place
        # for a project of half the rows, and the copies of every project add up to the part.
        if mine is None or size == len(self):
            return Scope(size)
        if len(self) < IVF_MIN_ROWS:
            chosen = np.flatnonzero(mine)
            return Scope(size, chosen=chosen, gathered=self.vectors[chosen])
        if size <= GATHER_SHARE * len(self):
            return Scope(size, chosen=np.flatnonzero(mine))
        return Scope(size, mask=mine)


def nearest_lists(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The list (index of the nearest of centroids) of each vector, in BLAS blocks."""
    if not len(vectors):
        return np.zeros(0, np.int64)
    return np.concatenate([np.argmax(vectors[start:start + 20_000] @ centroids.T, axis=1)
                           for start in range(0, len(vectors), 20_000)])


def train_centroids(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """Spherical k-means centroids (unit length) for about 2 x sqrt(rows) lists, trained on
    a sample: the indexer's cost, once per segment of IVF_MIN_ROWS rows or more."""
    rng = np.random.default_rng(seed)
    count = max(1, 2 * int(np.sqrt(len(vectors))))
    sample = vectors[rng.choice(len(vectors), min(len(vectors), count * POINTS_PER_LIST), replace=False)]
    centroids = sample[rng.choice(len(sample), count, replace=False)].copy()
    for _ in range(KMEANS_ROUNDS):
        assignment = np.argmax(sample @ centroids.T, axis=1)
        order = np.argsort(assignment, kind="stable")
        counts = np.bincount(assignment, minlength=count)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sums = np.add.reduceat(sample[order], np.minimum(starts, len(sample) - 1), axis=0)
        empty = counts == 0
        sums[empty] = sample[rng.choice(len(sample), int(empty.sum()))]  # reseed a list nobody chose
        centroids = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    return centroids.astype(np.float32)


@dataclass(frozen=True)
class SegmentEntry:
    name: str
    count: int
    first_seq: int
    last_seq: int
    crc: int
    size: int
    mtime_ns: int
    lists: int = 0


@dataclass
class View:
    """What one process searches: the mapped segments plus the rows written after them."""

    store_id: str
    last_seq: int  # the highest sequence number the segments hold
    parts: list[Rows]
    manifest_stamp: tuple[int, int, int] | None  # the manifest file's (inode, size, mtime) when read

    @property
    def count(self) -> int:
        return sum(len(p) for p in self.parts)

    def with_rows(self, rows: Rows) -> View:
        if not len(rows):
            return self  # a process searching again and again would otherwise gather empty parts
        return View(self.store_id, max(self.last_seq, int(rows.seqs[-1])), [*self.parts, rows], self.manifest_stamp)

    def search(self, queries: np.ndarray, limit: int, project: int | None,
               exclude_key: int | None) -> dict[int, float]:
        """{seq: best score over the queries} of the top `limit` rows by that score (ties
        included) among the rows of the project (its project_key; None: every row, which only
        the bench's baseline asks for), the excluded ticket's left out. In a segment with
        lists, among the rows of the lists that any of the queries probes (exactly so in
        segments without lists, in a small one scored whole, and for a project searched over
        its own rows); the score is the one the vector store's row gives (what the caller
        checks)."""
        found: list[tuple[np.ndarray, np.ndarray]] = []
        searched = self.count
        for part in self.parts:
            scope = part.scope(project, of_rows=searched) if len(part) else Scope(0)
            if not scope.size:
                continue
            with np.errstate(invalid="ignore", over="ignore"):
                rows, scores = _probed(part, scope, queries) if scope.probes else _exact(part, scope, queries)
            if exclude_key is not None:
                keys = part.keys if rows is None else part.keys[rows]
                scores = np.where(keys == np.uint64(exclude_key), np.float32(-np.inf), scores)
            chosen = _top(scores, limit)
            found.append((part.seqs[chosen] if rows is None else part.seqs[rows[chosen]], scores[chosen]))
        if not found:
            return {}
        seqs, scores = (np.concatenate(column) for column in zip(*found, strict=True))
        chosen = _top(scores, limit)
        return dict(zip(seqs[chosen].tolist(), scores[chosen].tolist(), strict=True))


def _spans(offsets: np.ndarray, mine: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends): the rows of each list that are the project's (mine: its rows; None:
    every row), found for all the lists at once. Within a list they are contiguous."""
    if mine is None:
        return offsets[:-1], offsets[1:]
    rows = np.flatnonzero(mine)
    bounds = np.searchsorted(rows, offsets)  # list i holds rows[bounds[i]:bounds[i + 1]]
    counts = np.diff(bounds)
    starts = rows[np.minimum(bounds[:-1], len(rows) - 1)]
    return starts, starts + counts


def _exact(part: Rows, scope: Scope, queries: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(rows, scores): the project's rows of part (None: every row), each with its best
    score over the queries (-inf: another project's)."""
    if scope.chosen is not None:
        vectors = part.vectors[scope.chosen] if scope.gathered is None else scope.gathered
        return scope.chosen, _best(_products(vectors, queries))
    scores = _best(_products(part.vectors, queries))
    return None, scores if scope.mask is None else np.where(scope.mask, scores, np.float32(-np.inf))


def _probed(part: Rows, scope: Scope, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores): the project's rows of the lists any query probes, each with its best
    score over the queries: each list's span of them read once for every query, the spans of
    lists next to each other joined into one."""
    assert part.centroids is not None and scope.starts is not None and scope.ends is not None, "a part with lists"
    # The lists a search scores, in order: each query's `probes` nearest.
    lists = np.unique(np.argpartition(-_products(part.centroids, queries), scope.probes - 1, axis=0)[:scope.probes])
    starts, ends = scope.starts[lists], scope.ends[lists]
    held = ends > starts
    starts, ends = starts[held], ends[held]
    if not len(starts):
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    joined = starts[1:] == ends[:-1]  # a span that starts where the one before it ends
    starts, ends = starts[np.r_[True, ~joined]], ends[np.r_[~joined, True]]
    lengths = ends - starts
    rows = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
    return rows, _best(_products(part.vectors, queries, starts, ends))


def _products(vectors: np.ndarray, queries: np.ndarray, starts: np.ndarray | None = None,
              ends: np.ndarray | None = None) -> np.ndarray:
    """The scores (rows x queries) of the rows of the spans starts[i]:ends[i] of vectors (no
    spans: every row), in order; each block of rows scored by every query in one product."""
    if starts is None or ends is None:
        starts, ends = np.zeros(1, np.int64), np.array([len(vectors)])
    scores = np.empty((int((ends - starts).sum()), len(queries)), np.float32)
    block, across, at = max(16, SMALL_PRODUCT // queries.size), queries.T, 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        for first in range(start, end, block):
            last = min(end, first + block)
            np.matmul(vectors[first:last], across, out=scores[at:at + last - first])
            at += last - first
    return scores


def _best(scores: np.ndarray) -> np.ndarray:
    """Each row's best score over the columns of scores (rows x queries), column by column:
    a reduction along each row of a few values costs eight times more (0.5 against 0.06 ms
    for 7,344 rows of 5 queries)."""
    return functools.reduce(np.maximum, (scores[:, column] for column in range(1, scores.shape[1])), scores[:, 0])


def _top(scores: np.ndarray, limit: int) -> np.ndarray:
    """The indices of the top `limit` of scores, ties with the last included, those scored
    -inf (another project's, the excluded ticket's) left out."""
    if np.isnan(scores).any():
        raise Stale("the index holds vectors that are not numbers")
    if limit < len(scores):
        last = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        chosen = np.flatnonzero(scores >= last)
    else:
        chosen = np.arange(len(scores))
    return chosen[scores[chosen] > -np.inf]


def manifest_stamp(folder: Path) -> tuple[int, int, int] | None:
    try:
        st = (folder / MANIFEST).stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def read_view(folder: Path, store_id: str | None, dims: int, *, populate: bool = True) -> View:
    """Map the segments the manifest lists; raises Stale if anything does not check out.
    store_id: the vector store's (None: the one the manifest names, checked against the store
    when opened). populate: map every page now, as a searcher wants; a writer, which reads
    only the segments it merges, maps them lazily (populating 1.5 GB for each batch of 2,000
    rows it adds would fault in pages it never reads)."""
    stamp = manifest_stamp(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        store_id = store_id or str(manifest["store_id"])
        if manifest.get("format") != FORMAT or manifest.get("store_id") != store_id or manifest.get("dims") != dims:
            raise Stale("the index was built for another vector store or format")
        entries = [SegmentEntry(**entry) for entry in manifest["segments"]]
    except FileNotFoundError:
        raise Stale("no index yet") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Stale(f"unreadable manifest ({exc})") from None
    parts, last = [], 0
    for entry in entries:
        if entry.first_seq <= last or entry.last_seq < entry.first_seq:
            raise Stale("segments overlap or are out of order")
        parts.append(_map_segment(folder / entry.name, entry, store_id, dims, populate))
        last = entry.last_seq
    return View(store_id, last, parts, stamp)


def segment_size(count: int, lists: int, dims: int) -> int:
    return HEADER_SIZE + count * (24 + 4 * dims) + (lists * 4 * dims + (lists + 1) * 8 if lists else 0)


def _map_segment(path: Path, entry: SegmentEntry, store_id: str, dims: int, populate: bool) -> Rows:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise Stale(f"segment {path.name}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_size != entry.size or entry.size != segment_size(entry.count, entry.lists, dims):
            raise Stale(f"segment {path.name} has {st.st_size} bytes, the manifest says {entry.size}")
        if not entry.count:
            return Rows.empty(dims)
        # MAP_POPULATE: one call maps every page instead of a fault per page on first search.
        flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        mapped = mmap.mmap(fd, entry.size, flags=flags, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    magic, fmt, header_dims, count, first, last, raw_store, crc, lists = _HEADER.unpack_from(mapped, 0)
    if (magic, fmt, header_dims, count, first, last, crc, lists) != \
            (MAGIC, FORMAT, dims, entry.count, entry.first_seq, entry.last_seq, entry.crc, entry.lists) \
            or str(uuid.UUID(bytes=raw_store)) != store_id:
        raise Stale(f"segment {path.name}: header does not match the manifest")
    if st.st_mtime_ns != entry.mtime_ns and zlib.crc32(memoryview(mapped)[HEADER_SIZE:]) != entry.crc:
        # Changed since it was written: checksum it (a rewrite in place, or a damaged disk).
        raise Stale(f"segment {path.name}: checksum mismatch")
    n, at = entry.count, HEADER_SIZE
    seqs = np.frombuffer(mapped, np.int64, n, at)
    keys = np.frombuffer(mapped, np.uint64, n, at + 8 * n)
    projects = np.frombuffer(mapped, np.uint64, n, at + 16 * n)
    vectors = np.frombuffer(mapped, np.float32, n * dims, at + 24 * n).reshape(n, dims)
    centroids = offsets = None
    if lists:
        at += n * (24 + 4 * dims)
        centroids = np.frombuffer(mapped, np.float32, lists * dims, at).reshape(lists, dims)
        offsets = np.frombuffer(mapped, np.int64, lists + 1, at + lists * 4 * dims)
        if offsets[0] != 0 or offsets[-1] != n or (np.diff(offsets) < 0).any():
            raise Stale(f"segment {path.name}: its lists do not add up")
        # A search of a project trusts each list's rows to be ordered by project key.
        falls = np.flatnonzero(projects[1:] < projects[:-1]) + 1
        if not np.isin(falls, offsets).all():
            raise Stale(f"segment {path.name}: a list's rows are not ordered by project")
    if int(seqs.min()) != entry.first_seq or int(seqs.max()) != entry.last_seq:
        raise Stale(f"segment {path.name}: rows do not match its header")
    return Rows(seqs, keys, projects, vectors, centroids, offsets)


def write_segment(folder: Path, rows: Rows, store_id: str, dims: int) -> SegmentEntry:
    """Write rows as a new segment file, synced; returns its manifest entry. The arrays are
    checksummed and written as they lie in memory (a segment of a million rows is 1.5 GB)."""
    first, last = int(rows.seqs.min()), int(rows.seqs.max())
    parts = [np.ascontiguousarray(rows.seqs, "<i8"), np.ascontiguousarray(rows.keys, "<u8"),
             np.ascontiguousarray(rows.projects, "<u8"), np.ascontiguousarray(rows.vectors, "<f4")]
    if rows.lists:
        parts += [np.ascontiguousarray(rows.centroids, "<f4"), np.ascontiguousarray(rows.offsets, "<i8")]
    body = [part.data.cast("B") for part in parts if part.size]
    crc = 0
    for chunk in body:
        crc = zlib.crc32(chunk, crc)
    header = _HEADER.pack(MAGIC, FORMAT, dims, len(rows), first, last, uuid.UUID(store_id).bytes, crc, rows.lists)
    name = f"seg-{first:012d}-{last:012d}-{uuid.uuid4().hex[:8]}.vec"
    path = folder / name
    write_synced(path, header.ljust(HEADER_SIZE, b"\0"), *body)
    st = path.stat()
    return SegmentEntry(name, len(rows), first, last, crc, st.st_size, st.st_mtime_ns, rows.lists)


def write_manifest(folder: Path, entries: Sequence[SegmentEntry], store_id: str, dims: int) -> None:
    """Replace the manifest atomically, then remove segment files it no longer lists."""
    text = json.dumps({"format": FORMAT, "store_id": store_id, "dims": dims,
                       "segments": [entry.__dict__ for entry in entries]})
    scratch = folder / f".{MANIFEST}.{uuid.uuid4().hex[:8]}"
    try:
        write_synced(scratch, text.encode("utf-8"))
        os.replace(scratch, folder / MANIFEST)
    finally:
        scratch.unlink(missing_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)  # the rename, kept through a crash
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    listed = {entry.name for entry in entries}
    for path in folder.glob("seg-*.vec"):
        if path.name not in listed:
            # A reader that mapped it keeps its pages; one that is about to open it re-reads the manifest.
            path.unlink(missing_ok=True)


def read_entries(folder: Path) -> list[SegmentEntry]:
    """The manifest's entries as they are (for a writer extending it); [] when unreadable."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        return [SegmentEntry(**entry) for entry in manifest["segments"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []
