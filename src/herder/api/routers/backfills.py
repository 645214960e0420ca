"""/v1/schedules/{id}/backfills and /v1/backfills: a schedule's past nominal times run a
few at a time, each once, at low priority."""

from __future__ import annotations

from fastapi import APIRouter, status

from herder.api.auth import Caller, Operator, StoreDep
from herder.api.openapi import problems
from herder.api.queries import CursorPaging
from herder.api.ratelimit import Submitter
from herder.app import backfills
from herder.domain.backfills import Backfill, BackfillRequest
from herder.domain.models import Page

router = APIRouter(tags=["schedules"])


@router.post(
    "/v1/schedules/{schedule_id}/backfills",
    status_code=status.HTTP_201_CREATED,
    responses=problems(404, 429),
)
def create_backfill(
    schedule_id: str, body: BackfillRequest, caller: Submitter, store: StoreDep
) -> Backfill:
    """Run the schedule's nominal times in ``(start, end]`` as if each had fired: at most
    ``max_active`` at once, each once (a time that already has a run is counted, not run
    again), queued at low priority. The first runs start now; the next when one ends. One
    submission, however many times it runs, counted against the tenant's rate (429)."""
    return backfills.create(store, caller.tenant_id, schedule_id, body)


@router.get("/v1/schedules/{schedule_id}/backfills")
def list_backfills(
    schedule_id: str,
    caller: Caller,
    store: StoreDep,
    page: CursorPaging,
) -> Page[Backfill]:
    return store.backfills.list(caller.tenant_id, schedule_id, page=page)


@router.get("/v1/backfills/{backfill_id}")
def get_backfill(backfill_id: str, caller: Caller, store: StoreDep) -> Backfill:
    return store.backfills.get(caller.tenant_id, backfill_id)


@router.post("/v1/backfills/{backfill_id}/cancel", responses=problems(409))
def cancel_backfill(backfill_id: str, caller: Operator, store: StoreDep) -> Backfill:
    """No more starts; runs already started go on."""
    return backfills.cancel(store, caller.tenant_id, backfill_id)
