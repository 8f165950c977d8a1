"""The dashboard's routes: pages rendered by Jinja2 (autoescaped), their JSON twins, and
the live feed as server-sent events. Every route reads; none writes, binds or probes.

The JSON is what the CLI prints with `--json` (baton.skills.frontends.answers and the
services' to_json), so the dashboard, the CLI and MCP never tell different stories.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from baton import clock
from baton.errors import BadInput, StoreUnavailable
from baton.skills.frontends.web.guard import AccessGuard
from baton.skills.frontends.web.overview import Filters, OverviewSource, Snapshot, changes, conflict_map, reading
from baton.skills.runtime.settings import Settings

if TYPE_CHECKING:
    from baton.skills.services.resume import ResumeResult

HERE = Path(__file__).parent
POLL = 0.25  # seconds between two looks at the stores' change marker, per open page
MAP_LIMIT = 60  # tickets drawn on the conflict map
RECALL_LIMIT = 10


def create_app(settings: Settings, *, token: str | None, loopback: bool) -> AccessGuard:
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    templates.filters.update(hm=_hm, handoff=_handoff_state)
    source = OverviewSource(settings)
    macros: Any = templates.get_template("macros.html").module  # its macros are attributes jinja2 cannot type
    rendered_rows: dict[str, tuple[dict, str]] = {}  # task_id: (row, its HTML), kept while the row is unchanged

    def row_html(row: dict) -> str:
        kept = rendered_rows.get(row["task_id"])
        if kept is None or kept[0] != row:
            kept = rendered_rows[row["task_id"]] = (row, str(macros.row(row)))
        return kept[1]

    def page(name: str, status: int = 200, **values: object) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**values), status_code=status)

    async def overview(request: Request) -> Response:
        filters = Filters.from_query(request.query_params)
        snapshot = await run_in_threadpool(source.current)
        repos, agents = snapshot.choices()
        rows = snapshot.rows_for(filters)
        return page("overview.html", snapshot=snapshot, rows=rows, filters=filters, repos=repos, agents=agents,
                    rows_html=Markup("\n".join(map(row_html, rows))))

    async def overview_json(request: Request) -> Response:
        filters = Filters.from_query(request.query_params)
        snapshot = await run_in_threadpool(source.current)
        return JSONResponse({"version": snapshot.version, "sessions": snapshot.rows_for(filters),
                             "total": snapshot.total,
                             "stores": {"registry": snapshot.registry, "signals": snapshot.signal_log},
                             "warnings": snapshot.warnings, "signals": snapshot.signals})

    async def map_json(request: Request) -> Response:
        snapshot = await run_in_threadpool(source.current)
        return JSONResponse(await run_in_threadpool(
            conflict_map, snapshot, Filters.from_query(request.query_params), MAP_LIMIT, source.shared_among))

    def resume(task_id: str) -> ResumeResult:
        from baton.ids import parse_ticket_id
        from baton.skills.services.resume import read_session

        with closing(reading(settings)) as opened:
            # No bind and no probe: the last recorded verification is shown, never a new one.
            return read_session(opened, parse_ticket_id(task_id))

    async def ticket(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        try:
            result = await run_in_threadpool(resume, task_id)
        except BadInput as exc:
            return page("error.html", 400, message=str(exc))
        from baton.skills.handoff.journal import journal_of
        from baton.skills.services.lease_views import held_view

        journal = journal_of(result.session) if result.session else None
        snapshot = await run_in_threadpool(source.current)
        meeting = [c for c in snapshot.lease_conflicts if result.task_id in (c["holder"], c["other"])]
        return page("ticket.html", result=result, journal=journal, answer=result.to_json(),
                    leases=held_view(result.leases, clock.now(), settings.lease_grace), lease_conflicts=meeting,
                    lease_state=snapshot.leases)

    async def ticket_json(request: Request) -> Response:
        try:
            result = await run_in_threadpool(resume, request.path_params["task_id"])
        except BadInput as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(result.to_json())

    def recall(text: str) -> tuple[list[dict], str | None]:
        from baton.skills.frontends.answers import recall_answer
        from baton.skills.services.queries import recall_decisions

        with closing(reading(settings)) as opened:
            try:
                return recall_answer(recall_decisions(opened, text, RECALL_LIMIT)), None
            except StoreUnavailable as exc:
                return [], f"unavailable: {exc.reason}"

    async def search(request: Request) -> Response:
        text = request.query_params.get("q", "")
        if not text.strip():
            return page("search.html", text=text, hits=[], problem=None, asked=False)
        try:
            hits, problem = await run_in_threadpool(recall, text)
        except BadInput as exc:
            return page("search.html", 400, text=text, hits=[], problem=str(exc), asked=True)
        return page("search.html", text=text, hits=hits, problem=problem, asked=True)

    async def search_json(request: Request) -> Response:
        try:
            hits, problem = await run_in_threadpool(recall, request.query_params.get("q", ""))
        except BadInput as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"hits": hits, "recall": problem or "ok"})

    async def events(request: Request) -> Response:
        """The live feed: every POLL seconds, what changed since the version the page shows."""
        filters = Filters.from_query(request.query_params)
        shown = request.headers.get("last-event-id") or request.query_params.get("v", "")
        async def stream() -> AsyncIterator[dict[str, str]]:
            current = await run_in_threadpool(source.current)
            # None when the page is older than the snapshot: redraw every row
            before: Snapshot | None = current if str(current.version) == shown else None
            while True:
                after = await run_in_threadpool(source.current)
                if before is None or after.version != before.version:
                    found = changes(before, after, filters)
                    yield {"event": "changes", "id": str(after.version), "data": json.dumps({
                        "version": after.version,
                        "rows": {r["task_id"]: row_html(r) for r in found["changed"]},
                        "gone": found["gone"], "order": found["order"],
                        "feed": [str(macros.touch_item(t)) for t in found["touches"]]
                                + [str(macros.signal_item(s)) for s in found["signals"]],
                        "status": str(macros.store_status(after)),
                        "summary": str(macros.summary(after.rows_for(filters))),
                    })}
                    before = after
                await asyncio.sleep(POLL)

        return EventSourceResponse(stream(), ping=15)

    def login_page(*, failed: bool) -> bytes:
        return templates.get_template("login.html").render(failed=failed).encode()

    app = Starlette(routes=[
        Route("/", overview), Route("/api/overview", overview_json), Route("/api/map", map_json),
        Route("/ticket/{task_id}", ticket), Route("/api/ticket/{task_id}", ticket_json),
        Route("/search", search), Route("/api/recall", search_json), Route("/events", events),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ])
    app.add_middleware(GZipMiddleware, minimum_size=1000)
    return AccessGuard(app, token=token, loopback=loopback, login_page=login_page)


def _hm(moment: str | datetime | None) -> str:
    if not moment:
        return ""
    return clock.shown(clock.parse(moment) if isinstance(moment, str) else moment)


def _handoff_state(record: dict | None) -> str:
    """How the handoff fared at its last recorded verification (as `baton list` says it)."""
    if not record:
        return ""
    if record["held"]:
        return "held"
    return ", ".join(f"{record[key]} {key.replace('_', ' ')}" for key in ("changed", "failed", "not_run", "stale")
                     if record[key])
