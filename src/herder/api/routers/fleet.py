"""/v1/workers/{id}/drain and /undrain: taking a worker out of placement and back, for the
system tenant's admins (the fleet is shared by every tenant)."""

from __future__ import annotations

from fastapi import APIRouter

from herder.api.auth import StoreDep, SystemAdmin
from herder.api.openapi import problems
from herder.domain.models import Worker
from herder.services import fleet

router = APIRouter(prefix="/v1/workers", tags=["administration"])


@router.post("/{worker_id}/drain", responses=problems(409))
def drain(worker_id: str, _admin: SystemAdmin, store: StoreDep) -> Worker:
    """Place nothing new on the worker; what it runs finishes. 409 if it is lost."""
    return fleet.drain(store, worker_id)


@router.post("/{worker_id}/undrain", responses=problems(409))
def undrain(worker_id: str, _admin: SystemAdmin, store: StoreDep) -> Worker:
    """Give a draining worker new work again. 409 if it is lost."""
    return fleet.undrain(store, worker_id)
