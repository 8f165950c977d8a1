"""Decision recall: decisions embedded with all-MiniLM-L6-v2 and searched by meaning.

Interface: DecisionIndex. Backends: EdgeDecisionIndex (Qdrant's engine in-process, the
embedded default). DecisionSearchClient composes an index with the embedding model.
Nothing here imports NumPy, tokenizers or qdrant-edge until it is used.
"""

import importlib.util

from recall.base import (
    COLLECTION,
    DecisionIndex,
    DecisionRecord,
    ScoredDecision,
    decision_point_id,
)


def missing_dependency(*, embedded: bool = True) -> str | None:
    """Why recall cannot run here, or None when its libraries are installed.

    embedded: the embedded index (qdrant-edge) is wanted, not a Qdrant server.
    """
    needed = [("numpy", "numpy"), ("tokenizers", "tokenizers")]
    needed.append(("qdrant_edge", "qdrant-edge-py") if embedded else ("qdrant_client", "qdrant-client"))
    for module, package in needed:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{package} is not installed (pip install -e '.[recall]')"
    return None


__all__ = ["COLLECTION", "DecisionIndex", "DecisionRecord", "ScoredDecision", "decision_point_id", "missing_dependency"]
