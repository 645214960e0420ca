"""/v1/workers/{id}/drain, /undrain and /forget: taking a worker out of placement and back,
and dropping a lost one from the list, for the system tenant's admins (the fleet is shared by
every tenant)."""

from __future__ import annotations

from fastapi import APIRouter

from herder.api.auth import StoreDep, SystemAdmin
from herder.api.openapi import problems
from herder.domain.models import Worker

router = APIRouter(prefix="/v1/workers", tags=["administration"])


@router.post("/{worker_id}/drain", responses=problems(409))
def drain(worker_id: str, _admin: SystemAdmin, store: StoreDep) -> Worker:
    """Place nothing new on the worker; what it runs finishes. 409 if it is lost."""
    return store.fleet.drain(worker_id)


@router.post("/{worker_id}/undrain", responses=problems(409))
def undrain(worker_id: str, _admin: SystemAdmin, store: StoreDep) -> Worker:
    """Give a draining worker new work again. 409 if it is lost."""
    return store.fleet.undrain(worker_id)


@router.post("/{worker_id}/forget", responses=problems(409))
def forget(worker_id: str, _admin: SystemAdmin, store: StoreDep) -> Worker:
    """Stop listing a lost worker (lost ones are forgotten by themselves after
    ``HERDER_LOST_WORKER_RETENTION_HOURS``); its runs' attempts keep its id. Answers the
    worker as it was. 409 if it is alive or draining: its agent would register anew."""
    return store.fleet.forget(worker_id)
