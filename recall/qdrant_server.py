"""The production decision index: a Qdrant server through qdrant-client.

Same collection (`decisions`), point ids and payloads as the embedded shard, so moving a
data set between them is a copy of points (`baton migrate`). Every request but a lookup by
point id filters on the payload's `project` (baton.projects), inside the search: a keyword
payload index marked as the tenant field (Qdrant then keeps each project's points together
and searches a project without the others'), made when the collection is and on a
collection made before projects. A payload index on task_id serves the per-task scroll
and the must-not filter of related search.

The keyword leg is a sparse vector `keywords` of each point (baton.recall.keywords.term_vector,
words hashed; Qdrant weighs them by IDF), written in the same upsert as the dense vector:
the same points, the same project filter and one store that is up or down, and a keyword
query needs no model. A collection made before it has no sparse vector (Qdrant cannot add
one to a collection): its keyword leg is unavailable and the vector leg answers alone.
Each payload notes the RECIPE of its embedded text (baton.recall.base).

`BATON_QDRANT_URL` is an http(s) URL of a server. A `file:` URL opens qdrant-client's
local mode on that folder instead: the same client code path, which is what the tests
use, since no Qdrant server can be installed on the build machines.

A server is reached through its gate in the command's budget (baton.budget): each call
waits what the budget has left (qdrant-client's own timeout counts whole seconds, so the
call runs on a thread the caller stops waiting for at the budget), and the client skips its
version check, an extra request on a thread of its own. Each request is built inside its
call, past the gate: a server the command already found down answers at once, without
importing the client (seconds on a loaded machine).
"""

from __future__ import annotations

import ipaddress
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, TypeVar, cast
from urllib.parse import urlsplit
from uuid import UUID

from baton.budget import AnyGate, OpenGate, within
from baton.errors import ServerUnreachable, StoreUnavailable
from baton.masking import mask
from baton.recall.base import (
    COLLECTION,
    PROJECT_FIELD,
    RECIPE,
    RECIPE_FIELD,
    DecisionIndex,
    DecisionRecord,
    ScoredDecision,
    Vectors,
    best_per_point,
    embedding_text_before,
    record_of,
)
from baton.recall.embedding import DIMENSIONS
from baton.recall.keywords import term_vector
from baton.store_names import Store

if TYPE_CHECKING:
    from qdrant_client import QdrantClient, models
    from qdrant_client.conversions.common_types import PointId, QueryResponse, Record

STORE = Store.RECALL_INDEX
KEYWORDS = "keywords"  # the sparse vector of each point's words
T = TypeVar("T")


def plain_key_refusal(url: str, api_key: str | None, *, allow: bool) -> str | None:
    """Why api_key must not go to url, or None: a key sent over plain http can be read on
    the way, which is acceptable on loopback only, unless the user allowed it."""
    parts = urlsplit(url)
    if api_key is None or allow or parts.scheme != "http":
        return None
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return None
    return ("refused to send the API key over plain http off loopback; use https, or allow it with "
            "[stores] qdrant_allow_insecure = true (BATON_QDRANT_ALLOW_INSECURE=on)")


class QdrantServerIndex(DecisionIndex):
    def __init__(self, url: str, *, timeout: float, api_key: str | None = None, allow_insecure: bool = False,
                 gate: AnyGate | None = None) -> None:
        """gate: the server's gate in the command's budget (baton.budget); without one,
        each call may wait `timeout` seconds. allow_insecure: send api_key over plain http
        to a host off loopback (refused otherwise, before any connection)."""
        self.url = url
        self.where = mask(url)  # what messages name: the URL without credentials
        self.timeout = timeout
        self._api_key = api_key
        self._refusal = plain_key_refusal(url, api_key, allow=allow_insecure)  # the same for every call
        self._gate = gate or OpenGate(timeout)
        self._client: QdrantClient | None = None
        self._sparse = False  # whether the collection has the keywords vector

    def _get_client(self, left: float) -> QdrantClient:
        if self._client is None:
            from qdrant_client import QdrantClient, models
            from qdrant_client.http.exceptions import UnexpectedResponse

            if self.url.startswith("file:"):
                client = QdrantClient(path=self.url.removeprefix("file://").removeprefix("file:"))
            else:
                with warnings.catch_warnings():
                    # The policy above decided: the client's own warning would print its source path.
                    warnings.filterwarnings("ignore", "Api key is used with an insecure connection", UserWarning)
                    client = QdrantClient(url=self.url, api_key=self._api_key, timeout=math.ceil(left),
                                          check_compatibility=False)
            local = self.url.startswith("file:")  # local mode has no payload indexes
            if not client.collection_exists(COLLECTION):
                try:
                    client.create_collection(
                        COLLECTION, vectors_config=models.VectorParams(size=DIMENSIONS,
                                                                       distance=models.Distance.COSINE),
                        sparse_vectors_config={KEYWORDS: models.SparseVectorParams(modifier=models.Modifier.IDF)})
                except UnexpectedResponse as exc:  # made by another process since: read as it made it, below
                    if "already exists" not in str(exc):
                        raise
                if not local:  # payload indexes are made again as they are: whoever made the collection may have died
                    client.create_payload_index(COLLECTION, "task_id", models.PayloadSchemaType.KEYWORD)
                    _index_projects(client)
            elif not local and PROJECT_FIELD not in (client.get_collection(COLLECTION).payload_schema or {}):
                _index_projects(client)  # a collection made before projects
            self._sparse = KEYWORDS in (client.get_collection(COLLECTION).config.params.sparse_vectors or {})
            self._client = client
        return self._client

    def _call(self, work: Callable[[QdrantClient], T]) -> T:
        if self._refusal is not None:  # before the gate, which may connect to see whether the server is there
            raise StoreUnavailable(STORE, f"Qdrant at {self.where}: {self._refusal}")
        with self._gate.call(STORE) as left:
            try:
                if self.url.startswith("file:"):
                    return work(self._get_client(left))
                return within(left, lambda: work(self._get_client(left)))
            except StoreUnavailable:
                raise
            except TimeoutError as exc:
                raise ServerUnreachable(STORE, f"Qdrant at {self.where}: {self._gate.no_answer()}") from exc
            except Exception as exc:  # qdrant-client raises transport, HTTP and gRPC errors of many kinds
                reason = f"Qdrant at {self.where}: {type(exc).__name__}: {' '.join(str(exc).split())}"
                raise (ServerUnreachable if _unreachable(exc) else StoreUnavailable)(STORE, reason) from exc

    @staticmethod
    def _scope(project: str | None, *, task_ids: Sequence[str] = (),
               exclude_task_id: str | None = None) -> models.Filter:
        """The project's points (of those tickets; but that one); None: the points without a project."""
        from qdrant_client import models

        if project is None:
            return models.Filter(must=[models.IsEmptyCondition(is_empty=models.PayloadField(key=PROJECT_FIELD))])
        must: list[models.Condition] = [models.FieldCondition(key=PROJECT_FIELD,
                                                              match=models.MatchValue(value=project))]
        if task_ids:
            must.append(models.FieldCondition(key="task_id", match=models.MatchAny(any=list(task_ids))))
        must_not: list[models.Condition] = [] if exclude_task_id is None else [
            models.FieldCondition(key="task_id", match=models.MatchValue(value=exclude_task_id))]
        return models.Filter(must=must, must_not=must_not or None)

    def upsert(self, records: Sequence[DecisionRecord], vectors: Vectors) -> None:
        if not records:
            return

        def work(client: QdrantClient) -> None:
            from qdrant_client import models

            points = [models.PointStruct(id=str(r.point_id), vector=self._vectors(r, v),
                                         payload={**r.model_dump(), RECIPE_FIELD: RECIPE})
                      for r, v in zip(records, vectors, strict=True)]
            client.upsert(COLLECTION, points=points, wait=True)

        self._call(work)

    def _vectors(self, record: DecisionRecord, vector: Sequence[float]) -> models.VectorStruct:
        """A point's vectors: the dense one, and its words when the collection has the keywords vector."""
        from qdrant_client import models

        dense = [float(x) for x in vector]
        if not self._sparse:
            return dense
        indices, values = term_vector(record.embedding_text())
        return {"": dense, KEYWORDS: models.SparseVector(indices=indices, values=values)}

    reembed = upsert  # a point's vector is replaced as it is written

    def renew_recipe(self, records: Sequence[DecisionRecord]) -> None:
        if records:
            self._call(lambda client: client.set_payload(COLLECTION, payload={RECIPE_FIELD: RECIPE},
                                                         points=[str(r.point_id) for r in records], wait=True))

    def outdated(self, limit: int) -> list[tuple[DecisionRecord, int]]:
        def work(client: QdrantClient) -> list[Record]:
            from qdrant_client import models

            selector = models.Filter(
                must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=PROJECT_FIELD)),
                          models.FieldCondition(key=RECIPE_FIELD, match=models.MatchValue(value=RECIPE))])
            return client.scroll(COLLECTION, scroll_filter=selector, limit=limit, with_vectors=False,
                                 with_payload=True)[0]

        page = self._call(work)
        # A point stored before recipes were noted has none: recipe 1.
        return [(record_of(point.payload), int((point.payload or {}).get(RECIPE_FIELD, 1))) for point in page]

    def search_keywords(self, text: str, *, project: str, limit: int,
                        exclude_task_id: str | None) -> list[ScoredDecision]:
        indices, values = term_vector(text, query=True)
        if not indices or limit <= 0:
            return []

        def work(client: QdrantClient) -> list[ScoredDecision]:
            from qdrant_client import models

            if not self._sparse:
                raise StoreUnavailable(STORE, f"Qdrant at {self.where}: the collection predates keyword search "
                                              "(a collection made anew has it)")
            condition = self._scope(project, exclude_task_id=exclude_task_id)
            found = client.query_points(COLLECTION, query=models.SparseVector(indices=indices, values=values),
                                        using=KEYWORDS, query_filter=condition, limit=limit, with_payload=True)
            return best_per_point(((hit.id, hit.score, hit.payload) for hit in found.points), limit)

        return self._call(work)

    def delete_tasks(self, project: str, task_ids: Sequence[str]) -> int:
        if not task_ids:
            return 0
        return self._delete(lambda: self._scope(project, task_ids=task_ids))

    def delete_unscoped(self) -> int:
        return self._delete(lambda: self._scope(None))

    def _delete(self, select: Callable[[], models.Filter]) -> int:
        def work(client: QdrantClient) -> int:
            from qdrant_client import models

            selector = select()
            removed = client.count(COLLECTION, count_filter=selector, exact=True).count
            client.delete(COLLECTION, points_selector=models.FilterSelector(filter=selector), wait=True)
            return removed

        return self._call(work)

    def search(self, vectors: Sequence[Sequence[float]], *, project: str, limit: int,
               exclude_task_id: str | None) -> list[ScoredDecision]:
        if not vectors:
            return []

        def work(client: QdrantClient) -> list[QueryResponse]:
            from qdrant_client import models

            condition = self._scope(project, exclude_task_id=exclude_task_id)
            return client.query_batch_points(COLLECTION, requests=[
                models.QueryRequest(query=[float(x) for x in v], filter=condition, limit=limit, with_payload=True)
                for v in vectors])

        batches = self._call(work)
        return best_per_point(((hit.id, hit.score, hit.payload) for batch in batches for hit in batch.points), limit)

    def describe(self) -> dict[str, str]:
        version = self._call(lambda client: "qdrant-client local mode" if self.url.startswith("file:")
                             else f"Qdrant {client.info().version}")
        return {"backend": "qdrant", "location": self.where, "version": version, "size": f"{self.count()} decisions"}

    def count(self, project: str | None = None) -> int:
        return self._call(lambda client: client.count(
            COLLECTION, count_filter=None if project is None else self._scope(project), exact=True).count)

    def unscoped_count(self) -> int:
        return self._call(lambda client: client.count(COLLECTION, count_filter=self._scope(None), exact=True).count)

    def unscoped_points(self, point_ids: Sequence[UUID]) -> dict[UUID, tuple[str, list[float]]]:
        points = self._retrieve(point_ids, vectors=True, payloads=True)
        return {UUID(str(p.id)): (embedding_text_before(str(p.payload.get("text", "")),
                                                        str(p.payload.get("context") or ""), 1), _dense(p.vector))
                for p in points if p.payload is not None and PROJECT_FIELD not in p.payload}

    def points(self, project: str, batch: int = 1000) -> Iterator[tuple[DecisionRecord, list[float]]]:
        offset: PointId | None = None
        while True:
            page, offset = self._call(partial(_page, project=project, limit=batch, offset=offset))
            for point in page:
                yield record_of(point.payload), _dense(point.vector)
            if offset is None:
                return

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def vectors_of(self, point_ids: Sequence[UUID]) -> dict[UUID, list[float]]:
        return {UUID(str(p.id)): _dense(p.vector) for p in self._retrieve(point_ids, vectors=True)}

    def stored(self, point_ids: Sequence[UUID]) -> set[UUID]:
        return {UUID(str(p.id)) for p in self._retrieve(point_ids)}

    def _retrieve(self, point_ids: Sequence[UUID], *, vectors: bool = False, payloads: bool = False) -> list[Record]:
        """The points of point_ids that are stored (none asked: no request)."""
        if not point_ids:
            return []
        return self._call(lambda client: client.retrieve(COLLECTION, [str(p) for p in point_ids],
                                                         with_vectors=vectors, with_payload=payloads))


def _unreachable(exc: BaseException) -> bool:
    """Whether the server could not be reached or heard from: a transport error or a
    timeout anywhere in the exception's chain (qdrant-client wraps httpx's)."""
    import httpx

    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, (httpx.TransportError, TimeoutError, ConnectionError)):
            return True
        seen = getattr(seen, "source", None) or seen.__cause__ or seen.__context__
    return False


def _page(client: QdrantClient, *, project: str, limit: int,
          offset: PointId | None) -> tuple[list[Record], PointId | None]:
    """One page of the project's points with their payloads and vectors, and the offset of
    the next (None at the end)."""
    return client.scroll(COLLECTION, scroll_filter=QdrantServerIndex._scope(project), limit=limit, offset=offset,
                         with_vectors=True, with_payload=True)


def _index_projects(client: QdrantClient) -> None:
    from qdrant_client import models

    client.create_payload_index(COLLECTION, PROJECT_FIELD,
                                models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True))


def _dense(vector: object) -> list[float]:
    """A point's dense vector: the unnamed one, alone or beside the keywords (see _get_client)."""
    if isinstance(vector, dict):
        vector = vector[""]
    return list(cast("list[float]", vector))
