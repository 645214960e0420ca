"""The edge's ASGI app: its own routes (health, the cells' administration), and every other
request forwarded to the cell ``routing.destination`` and the directory say.

    request ─► destination (key's or hook's tenant; else the default cell) ─► its home,
    from the cache (≤ cache_seconds stale; a miss reads the directory once; the cells
    named, from theirs) ─► forwarded, both bodies streamed ─► the cell's answer, or 404
    (tenant not in the directory), 401 (a tenant part no tenant has), 503 naming a cell
    that is down, or naming the cell a tenant is moving to (its writes, while it moves:
    ``edge/moves.py``) ─► named (``Herder-Cell``, ``Herder-Region``) and counted
    (``edge/metrics.py``)

The cache holds each tenant's home by cell name (``Residence``) and every cell once, by
name: a tenant costs its key and a few names, never a copy of its cell's record.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import assert_never

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from herder.api.errors import herder_problem, problem
from herder.directory.repository import Directory
from herder.domain import moves
from herder.domain.cells import Cell, CellStatus, Residence
from herder.domain.errors import Forbidden, HerderError, NotFound, TenantMoving, Unauthorized
from herder.edge import admin
from herder.edge.expiring import ExpiringCache
from herder.edge.forwarding import Forwarded, Unavailability, forward, forward_reading, naming
from herder.edge.metrics import MEDIA_TYPE, EdgeMetrics
from herder.edge.moves import Mover
from herder.edge.routing import (
    TENANT_ID,
    Destination,
    Malformed,
    ToDefault,
    ToTenant,
    destination,
    key_destination,
)
from herder.edge.settings import SCRAPED_CELLS_SECONDS, EdgeSettings
from herder.telemetry import tracing

log = logging.getLogger("herder.edge")
Endpoint = Callable[[Request], Awaitable[Response]]
EVERY_CELL = "cells"  # the one key of the cells' cache, and of their health's
CELL_ROUTE = re.compile(r"^/v1/cells/(?P<cell>[a-z][a-z0-9-]{0,62})/(?P<action>tenants|adopt)$")
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
MAX_CONNECTIONS = 1000  # to all cells together, kept open between requests


class Edge:
    def __init__(self, settings: EdgeSettings, directory: Directory) -> None:
        self.settings = settings
        self.directory = directory
        self.homes: ExpiringCache[Residence] = ExpiringCache(
            self._residence_of,
            ttl_seconds=settings.cache_seconds,
            absent_ttl_seconds=settings.unknown_cache_seconds,
        )
        self.cells: ExpiringCache[Mapping[str, Cell]] = ExpiringCache(
            self._cells_by_name,
            ttl_seconds=settings.cache_seconds,
            absent_ttl_seconds=settings.unknown_cache_seconds,
        )
        # what a scrape shows of each cell: probed at most this often, however often scraped
        self.health: ExpiringCache[list[CellStatus]] = ExpiringCache(
            self._cell_statuses,
            ttl_seconds=SCRAPED_CELLS_SECONDS,
            absent_ttl_seconds=SCRAPED_CELLS_SECONDS,
        )
        self.metrics = EdgeMetrics()
        self._http: httpx.AsyncClient | None = None

    async def _residence_of(self, tenant_id: str) -> Residence | None:
        return await run_in_threadpool(self.directory.residence_of, tenant_id)

    async def _cells_by_name(self, _key: str) -> Mapping[str, Cell]:
        return {cell.name: cell for cell in await run_in_threadpool(self.directory.cells)}

    async def _cell_statuses(self, _key: str) -> list[CellStatus]:
        return await admin.cell_statuses(self.http, self.directory)

    @property
    def http(self) -> httpx.AsyncClient:
        assert self._http is not None, "the edge's app was not started"
        return self._http

    @asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        timeout = httpx.Timeout(
            self.settings.timeout_seconds, connect=self.settings.connect_seconds
        )
        limits = httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
        )
        async with httpx.AsyncClient(
            timeout=timeout,
            limits=limits,
            trust_env=False,
            follow_redirects=False,
        ) as self._http:
            yield

    async def cell_for(self, request: Request) -> Cell:
        """The cell a request goes to (``HerderError`` for none)."""
        routed = destination(
            request.method, request.scope["path"], request.headers.get("authorization")
        )
        return await self._cell_of(routed)

    async def _cell_of(self, routed: Destination) -> Cell:
        match routed:
            case ToTenant(tenant_id):
                return await self.cell_named((await self._home(tenant_id)).cell)
            case ToDefault():
                return await self.default()
            case Malformed():
                raise Unauthorized("unknown or revoked API key")
            case _:
                assert_never(routed)

    async def _home(self, tenant_id: str) -> Residence:
        home = await self.homes.get(tenant_id)
        if home is None:
            raise NotFound(f"tenant {tenant_id} is in no cell the directory knows")
        return home

    async def _every_cell(self) -> Mapping[str, Cell]:
        return await self.cells.get(EVERY_CELL) or {}

    async def cell_named(self, name: str) -> Cell:
        """The cell a home names; the cells read again for one made since they were."""
        cell = (await self._every_cell()).get(name)
        if cell is None:
            self.cells.forget(EVERY_CELL)
            cell = (await self._every_cell()).get(name)
        if cell is None:
            raise NotFound(f"cell {name[:64]} not found")
        return cell

    async def default(self) -> Cell:
        for cell in (await self._every_cell()).values():
            if cell.is_default:
                return cell
        raise admin.Refused(admin.no_default_cell())

    async def proxy(self, request: Request) -> Response:
        """The request sent to its cell, its answer named and counted. A tenant moving
        between cells has its writes answered 503 here; a read of its history by id the new
        cell lacks is asked of the cells it lived in before, newest first."""
        started = time.perf_counter()
        path = request.scope["path"]
        routed = destination(request.method, path, request.headers.get("authorization"))
        if not isinstance(routed, ToTenant):
            forwarded = await forward(self.http, request, await self._cell_of(routed))
        else:
            home = await self._home(routed.tenant_id)
            cell = await self.cell_named(home.cell)
            if home.moving_to is not None and request.method not in moves.READS:
                refused = _moving(routed.tenant_id, home.moving_to, cell)
                self.metrics.answered(refused, waited_seconds=None)
                request.state.cell = cell
                return refused.response
            if request.method == "GET" and home.previous and moves.is_history(path):
                earlier = [await self.cell_named(name) for name in home.previous]
                forwarded = await forward_reading(self.http, request, [cell, *earlier])
            else:
                forwarded = await forward(self.http, request, cell)
        self.metrics.answered(forwarded, waited_seconds=time.perf_counter() - started)
        request.state.cell = forwarded.cell  # its span's (edge/span_names.py)
        return forwarded.response

    async def check_key_for(self, request: Request, cell: Cell) -> None:
        """Refuse to send a key to a cell its tenant does not live in (a key made before
        cells lives in the default cell), so that no cell is shown another cell's keys. A
        tenant the directory does not place (a new cell's own system tenant, before it is
        adopted) may go to any cell, which alone knows whether the key is its own."""
        authorization = request.headers.get("authorization")
        if authorization is None:
            return  # nothing to show: the cell answers 401
        routed = key_destination(authorization)
        if isinstance(routed, ToTenant):
            placed = await self.homes.get(routed.tenant_id)
            if placed is None:
                return
            home = placed.cell
        else:
            home = (await self._cell_of(routed)).name
        if home != cell.name:
            raise Forbidden(
                f"this key's tenant lives in cell {home}: a key of cell {cell.name}'s "
                "system admins is needed"
            )

    async def _check_default_admin(self, request: Request) -> None:
        """That the caller is a system admin of the default cell, as that cell says."""
        default = await self.default()
        await self.check_key_for(request, default)
        await admin.check_system_admin(self.http, request, default)

    async def cells_route(self, request: Request) -> Response:
        await self._check_default_admin(request)
        if request.method == "GET":
            return await admin.list_cells(self.http, self.directory)
        return await admin.create_cell(request, self.directory)

    async def scrape(self, request: Request) -> Response:
        """``GET /metrics``: for the default cell's system admins, as a cell's /metrics is
        for its own; each cell's health as probed at most ``SCRAPED_CELLS_SECONDS`` ago."""
        await self._check_default_admin(request)
        cells = await self.health.get(EVERY_CELL) or []
        return Response(self.metrics.exposition(cells), media_type=MEDIA_TYPE)

    async def cell_action(self, request: Request) -> Response:
        """``POST /v1/cells/{cell}/tenants`` and ``…/adopt``; ``POST /v1/tenants``: in the
        default cell."""
        path = request.scope["path"]
        matched = CELL_ROUTE.match(path)
        if path == "/v1/tenants":
            cell, action = await self.default(), "tenants"
        elif matched is None:
            raise NotFound(f"no route {path[:200]} at the edge")
        else:
            cell = await run_in_threadpool(self.directory.cell, matched["cell"])
            action = matched["action"]
        await self.check_key_for(request, cell)
        if action == "tenants":
            response, tenant_id = await admin.create_tenant(
                self.http, request, self.directory, cell
            )
            placed = [tenant_id] if tenant_id else []
        else:
            response, placed = await admin.adopt(self.http, request, self.directory, cell)
        for tenant in placed:  # an unknown tenant's 404, cached, ends now
            self.homes.forget(tenant)
        return response

    async def move(self, request: Request) -> Response:
        """``POST /v1/cells/{to}/tenants/{tenant_id}/move`` (``edge/moves.py``)."""
        to, tenant_id = request.path_params["cell"], request.path_params["tenant_id"]
        if not TENANT_ID.match(tenant_id):
            raise NotFound(f"tenant {tenant_id[:64]} is in no cell the directory knows")
        self.homes.forget(tenant_id)
        try:
            return await self.mover.move(request, to, tenant_id)
        finally:
            self.homes.forget(tenant_id)

    @property
    def mover(self) -> Mover:
        return Mover(self.http, self.directory)

    async def readiness(self, _request: Request) -> Response:
        await run_in_threadpool(self.directory.default_cell)
        return JSONResponse({"status": "ready"})


def _moving(tenant_id: str, to: str, cell: Cell) -> Forwarded:
    """A moving tenant's write, refused here: named by the cell it lives in until it has
    moved (the problem's ``cell`` names the one it goes to)."""
    moving = TenantMoving(
        f"tenant {tenant_id} is moving to cell {to}: try again once it has moved",
        cell=to,
        retry_after_seconds=moves.FROZEN_RETRY_SECONDS,
    )
    return Forwarded(naming(herder_problem(moving), cell), cell, Unavailability.MOVING)


def answering(handler: Endpoint) -> Endpoint:
    """``handler`` with our errors and a refusal it raises answered as problems."""

    async def answered(request: Request) -> Response:
        try:
            return await handler(request)
        except HerderError as error:
            return herder_problem(error)
        except admin.Refused as refused:
            return refused.response

    return answered


async def _alive(_request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _unexpected(_request: Request, error: Exception) -> Response:
    log.exception("unexpected error", exc_info=error)
    return problem(500, "Internal error", "the edge hit an unexpected error; it was logged")


def create_edge_app(settings: EdgeSettings, directory: Directory) -> Starlette:
    edge = Edge(settings, directory)
    routes = [
        Route("/healthz", _alive, methods=["GET"]),
        Route("/readyz", answering(edge.readiness), methods=["GET"]),
        Route("/metrics", answering(edge.scrape), methods=["GET"]),
        Route("/v1/cells", answering(edge.cells_route), methods=["GET", "POST"]),
        Route("/v1/cells/{cell}/{action}", answering(edge.cell_action), methods=["POST"]),
        Route("/v1/cells/{cell}/tenants/{tenant_id}/move", answering(edge.move), methods=["POST"]),
        Route("/v1/tenants", answering(edge.cell_action), methods=["POST"]),
        Route("/{path:path}", answering(edge.proxy), methods=METHODS),
    ]
    middleware = []
    if tracing.enabled():  # off, not even imported (docs/traces.md)
        from herder.edge.span_names import SpanNames
        from herder.telemetry.request_spans import RequestSpans

        middleware.append(Middleware(RequestSpans, described=SpanNames.of_the_api().described))
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=edge.lifespan,
        exception_handlers={Exception: _unexpected},
    )
