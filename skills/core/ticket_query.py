"""What a ticket is about, as the query a resume finds its related decisions with: its goal,
its next action and the words of the files it touched. Its vector is embedded by the indexer,
never by a resume (baton.recall.ticket_queries): a resume searches with the stored vector and
wants the current text embedded when the stored one embeds another text, or there is none.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from baton.errors import StoreUnavailable

if TYPE_CHECKING:
    from baton.registry.model import Session
    from baton.skills.runtime.stores import Stores

PATH_WORD = re.compile(r"[^\W_]+")  # `redis_cache` is two words
# Folder and file names every project has say nothing of what a ticket is about.
GENERIC_PATH_WORDS = frozenset({"src", "lib", "pkg", "internal", "init", "index", "main", "mod"})
MAX_FILE_WORDS = 20  # beside the goal and the next action, and within the keyword leg's query


def ticket_query_text(session: Session) -> str:
    """The ticket's goal, next action and its files' words (each once, by path), on one line each;
    empty when it has none of them."""
    words: dict[str, None] = {}
    for path in sorted(touch.path for touch in session.files.values()):
        if len(words) >= MAX_FILE_WORDS:  # the first paths' words are the ones kept
            break
        posix = PurePosixPath(path)
        for part in (*posix.parent.parts, posix.stem):
            words.update(dict.fromkeys(w for w in PATH_WORD.findall(part.lower()) if w not in GENERIC_PATH_WORDS))
    files = " ".join(list(words)[:MAX_FILE_WORDS])
    return "\n".join(part for part in (session.goal or "", session.next_action or "", files) if part.strip())


def ticket_query_vector(stores: Stores, task_id: str, text: str) -> list[float] | None:
    """The ticket's stored query vector (of text, or of an older text while the indexer has
    not embedded this one), or None; wants text embedded, and starts the indexer, when it is
    not wanted yet (once: any later indexer run embeds it). Quiet on a store that fails: the
    next resume asks again."""
    from baton.skills.core.indexing import start_background_indexer

    queries = stores.ticket_queries
    try:
        stored = queries.stored(stores.project, task_id, text)
        if not stored.wanted:
            queries.want(stores.project, task_id, text)
    except StoreUnavailable:
        return None
    if not stored.wanted:
        start_background_indexer(stores.settings)
    return stored.vector
