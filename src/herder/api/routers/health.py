"""/healthz (the process answers) and /readyz (and it can reach the store)."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from herder import __version__
from herder.api.auth import StoreDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok", "version": __version__}


@router.get("/readyz")
def readyz(store: StoreDep) -> dict[str, str]:
    with store.database.read() as connection:
        connection.execute(text("SELECT 1"))
    return {"status": "ready", "database": store.database.dialect}
