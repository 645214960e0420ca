"""/healthz (the process answers) and /readyz (and it can reach the store)."""

from __future__ import annotations

from fastapi import APIRouter

from herder import __version__
from herder.api.auth import StoreDep
from herder.app import health

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/readyz")
def readyz(store: StoreDep) -> dict[str, str]:
    return {"status": "ready", "database": health.ready(store)}
