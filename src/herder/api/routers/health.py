"""/healthz (the process answers) and /readyz (and it can reach the store, and is not
stopping: a load balancer sends it nothing more once it drains)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from herder import __version__
from herder.api.auth import StoreDep
from herder.api.openapi import problems
from herder.app import health
from herder.domain.errors import Unavailable

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/readyz", responses=problems(503))
def readyz(request: Request, store: StoreDep) -> dict[str, str]:
    """503 while the database cannot be reached, or while this process drains before it
    stops (``--drain-seconds``): it still serves what reaches it."""
    if request.app.state.draining.is_set():
        raise Unavailable("this API process is stopping: send requests to another")
    return {"status": "ready", "database": health.ready(store)}
