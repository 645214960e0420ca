"""The FastAPI application: routers, auth, errors and the store, wired together."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache

from fastapi import FastAPI
from starlette.routing import BaseRoute

from herder import __version__
from herder.api.audit import AuditTrail
from herder.api.dashboard import router as dashboard
from herder.api.docs_ui import install_docs_ui
from herder.api.errors import install_error_handlers
from herder.api.limits import BodyLimit
from herder.api.nul import NulGuard
from herder.api.openapi import describe_routes, install_openapi
from herder.api.ratelimit import SubmitLimiter
from herder.api.routers import (
    alerts,
    approvals,
    artifacts,
    audit,
    backfills,
    events,
    fleet,
    forecast,
    health,
    hooks,
    jobs,
    keys,
    limits,
    metrics,
    moves,
    notices,
    pools,
    queue,
    runs,
    schedules,
    secrets,
    sessions,
    sign_in,
    stats,
    tenants,
    triggers,
    usage,
    worker_stream,
    workers,
    workflows,
)
from herder.api.wakeups import Wakeups
from herder.app.hooks import HookRates
from herder.settings import Settings
from herder.store.notifications import listener_for
from herder.store.store import Store
from herder.telemetry import tracing
from herder.telemetry.latency import RequestLatency

ROUTERS = (
    health.router,
    artifacts.router,
    jobs.router,
    runs.router,
    schedules.router,
    backfills.router,
    queue.router,
    tenants.router,
    moves.router,
    pools.router,
    limits.router,
    events.router,
    triggers.router,
    hooks.router,
    forecast.router,
    workers.router,
    worker_stream.router,
    fleet.router,
    metrics.router,
    workflows.router,
    approvals.router,
    stats.router,
    alerts.router,
    notices.router,
    keys.router,
    audit.router,
    secrets.router,
    usage.router,
    sessions.router,
    sign_in.router,
)


@cache
def route_table() -> tuple[BaseRoute, ...]:
    """Every route of the API and the dashboard, built once a process and shared by its
    apps: FastAPI analyses a route's parameters on the first request that reaches it
    (~100 ms for all of them), and a route holds nothing of an app's own (that is in
    ``app.state``), so a process that makes many apps (the tests) pays that once."""
    table = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    for router in ROUTERS:
        describe_routes(router)
        table.include_router(router)
    table.include_router(dashboard)
    return tuple(table.router.routes)


def create_app(store: Store, settings: Settings) -> FastAPI:
    wakeups = Wakeups()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        wakeups.bind(asyncio.get_running_loop())
        store.database.subscribe(wakeups.on_notice)
        listener = listener_for(store.database)  # every replica hears every replica's notices
        if listener is not None:
            listener.start()
        try:
            yield
        finally:
            if listener is not None:
                listener.stop()

    app = FastAPI(
        title="Herder",
        version=__version__,
        summary="Run uploaded programs once, on a schedule, or as DAG steps, on a worker fleet.",
        lifespan=lifespan,
        docs_url=None,  # served from local assets: herder.api.docs_ui
        redoc_url=None,
    )
    app.state.store = store
    app.state.settings = settings
    app.state.wakeups = wakeups
    app.state.draining = threading.Event()  # set: stopping; /readyz says so (server.Server)
    app.state.submit_limiter = SubmitLimiter(
        store.submit_buckets, store.access.tenant_quotas, clock=store.clock
    )
    app.state.hook_rates = HookRates(store.clock)
    install_error_handlers(app)
    install_openapi(app)
    install_docs_ui(app)
    app.router.routes.extend(route_table())
    app.add_middleware(AuditTrail)  # innermost: it reads the route the call matched
    app.add_middleware(NulGuard)
    app.add_middleware(BodyLimit)  # added after NulGuard: so NulGuard reads a bounded body
    app.add_middleware(RequestLatency)  # outermost: times every answer, a 413 too
    if tracing.enabled():  # off, not even imported (docs/traces.md)
        from herder.telemetry.request_spans import RequestSpans

        app.add_middleware(RequestSpans)  # around the rest: a request's span is current in it
    return app
