"""The edge's ASGI app: its own routes (health, the cells' administration), and every other
request forwarded to the cell ``routing.destination`` and the directory say.

    request ─► destination (key's or hook's tenant; else the default cell) ─► its home,
    from the cache (≤ cache_seconds stale; a miss reads the directory once) ─► forwarded,
    both bodies streamed ─► the cell's answer, or 404 (tenant not in the directory),
    401 (a tenant part no tenant has), 503 naming a cell that is down, or naming the cell a
    tenant is moving to (its writes, while it moves: ``edge/moves.py``)
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import assert_never

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from herder.api.errors import herder_problem, problem
from herder.directory.repository import Directory
from herder.domain import moves
from herder.domain.cells import Cell, Home
from herder.domain.errors import Forbidden, HerderError, NotFound, TenantMoving, Unauthorized
from herder.edge import admin
from herder.edge.expiring import ExpiringCache
from herder.edge.forwarding import forward, forward_reading
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
from herder.edge.settings import EdgeSettings

log = logging.getLogger("herder.edge")
Endpoint = Callable[[Request], Awaitable[Response]]
DEFAULT = "default"  # the default cell's key in its cache
CELL_ROUTE = re.compile(r"^/v1/cells/(?P<cell>[a-z][a-z0-9-]{0,62})/(?P<action>tenants|adopt)$")
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
MAX_CONNECTIONS = 1000  # to all cells together, kept open between requests


class Edge:
    def __init__(self, settings: EdgeSettings, directory: Directory) -> None:
        self.settings = settings
        self.directory = directory
        self.homes: ExpiringCache[Home] = ExpiringCache(
            self._home_of,
            ttl_seconds=settings.cache_seconds,
            absent_ttl_seconds=settings.unknown_cache_seconds,
        )
        self.defaults: ExpiringCache[Cell] = ExpiringCache(
            self._default_cell,
            ttl_seconds=settings.cache_seconds,
            absent_ttl_seconds=settings.unknown_cache_seconds,
        )
        self._http: httpx.AsyncClient | None = None

    async def _home_of(self, tenant_id: str) -> Home | None:
        return await run_in_threadpool(self.directory.home_of, tenant_id)

    async def _default_cell(self, _key: str) -> Cell | None:
        return await run_in_threadpool(self.directory.default_cell)

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
                return (await self._home(tenant_id)).cell
            case ToDefault():
                return await self.default()
            case Malformed():
                raise Unauthorized("unknown or revoked API key")
            case _:
                assert_never(routed)

    async def _home(self, tenant_id: str) -> Home:
        home = await self.homes.get(tenant_id)
        if home is None:
            raise NotFound(f"tenant {tenant_id} is in no cell the directory knows")
        return home

    async def default(self) -> Cell:
        cell = await self.defaults.get(DEFAULT)
        if cell is None:
            raise admin.Refused(admin.no_default_cell())
        return cell

    async def proxy(self, request: Request) -> Response:
        """The request sent to its cell. A tenant moving between cells has its writes
        answered 503 here; a read of its history by id the new cell lacks is asked of the
        cells it lived in before, newest first."""
        path = request.scope["path"]
        routed = destination(request.method, path, request.headers.get("authorization"))
        if not isinstance(routed, ToTenant):
            return await forward(self.http, request, await self._cell_of(routed))
        home = await self._home(routed.tenant_id)
        if home.moving_to is not None and request.method not in moves.READS:
            raise TenantMoving(
                f"tenant {routed.tenant_id} is moving to cell {home.moving_to}: try again "
                "once it has moved",
                cell=home.moving_to,
                retry_after_seconds=moves.FROZEN_RETRY_SECONDS,
            )
        if request.method == "GET" and home.previous and moves.is_history(path):
            return await forward_reading(self.http, request, [home.cell, *home.previous])
        return await forward(self.http, request, home.cell)

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
            home = await self._cell_of(routed)
        if home.name != cell.name:
            raise Forbidden(
                f"this key's tenant lives in cell {home.name}: a key of cell {cell.name}'s "
                "system admins is needed"
            )

    async def cells(self, request: Request) -> Response:
        default = await self.default()
        await self.check_key_for(request, default)
        await admin.check_system_admin(self.http, request, default)
        if request.method == "GET":
            return await admin.list_cells(self.http, self.directory)
        return await admin.create_cell(request, self.directory)

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
        return Mover(self.http, self.directory, self.settings.move_settle_seconds)

    async def readiness(self, _request: Request) -> Response:
        await run_in_threadpool(self.directory.default_cell)
        return JSONResponse({"status": "ready"})


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
        Route("/v1/cells", answering(edge.cells), methods=["GET", "POST"]),
        Route("/v1/cells/{cell}/{action}", answering(edge.cell_action), methods=["POST"]),
        Route("/v1/cells/{cell}/tenants/{tenant_id}/move", answering(edge.move), methods=["POST"]),
        Route("/v1/tenants", answering(edge.cell_action), methods=["POST"]),
        Route("/{path:path}", answering(edge.proxy), methods=METHODS),
    ]
    return Starlette(
        routes=routes, lifespan=edge.lifespan, exception_handlers={Exception: _unexpected}
    )
