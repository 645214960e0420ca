"""/v1/queue: queued runs in dispatch order, with why each is not placed yet."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from herder.api.auth import Caller, StoreDep
from herder.api.queries import CursorPaging
from herder.app import access
from herder.domain.limits import check_printable
from herder.domain.models import Page, QueueEntry

router = APIRouter(prefix="/v1/queue", tags=["runs"])


@router.get("")
def list_queue(
    caller: Caller,
    store: StoreDep,
    page: CursorPaging,
    job_id: str | None = None,
    limit_id: Annotated[
        str | None, Query(max_length=40, description="only runs counted against this limit")
    ] = None,
    key: Annotated[
        str | None, Query(max_length=128, description="with limit_id: only under this key")
    ] = None,
) -> Page[QueueEntry]:
    """The caller's tenant's queued runs; the system tenant's admins see every tenant's. A
    ``key`` that is not printable text is a 422 naming it, as a run's key would be."""
    if key is not None:
        check_printable(key, "key")
    return access.list_queue(store, caller, job_id=job_id, limit_id=limit_id, key=key, page=page)
