"""/v1/schedules and /v1/cron/preview: recurring runs of a job, and their next fires.

A schedule's ``ETag`` is a number drawn from its definition (``definition_tag``), sent with
the schedule a GET, POST or PATCH answers; fires leave it as it is. A PATCH with ``If-Match``
applies only if the definition is still the one that tag names, else 412.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Self

from fastapi import APIRouter, Body, Header, Query, Request, Response, status
from pydantic import AfterValidator, BaseModel, Field, model_validator

from herder.api.auth import Caller, Operator, StoreDep, Writer
from herder.api.creators import CreatedBy
from herder.api.etags import versions
from herder.api.openapi import ETAG_HEADER, patch_body, problems
from herder.api.queries import Paging
from herder.api.ratelimit import Submitter
from herder.api.schemas import IsoTime
from herder.app import firing, schedules
from herder.app.actors import page_with_creator_names, with_creator_name
from herder.domain.models import Page, Schedule, ScheduleEvent, TriggeredFire
from herder.domain.schedules import ScheduleSpec, check_schedule_name, definition_tag

router = APIRouter(tags=["schedules"])

MAX_PREVIEW = 100
IF_MATCH = (
    "the ETag of the schedule as last read: change it only if its definition is still that "
    "one (else 412); several, comma-separated, or * for any"
)


def _tagged(schedule: Schedule, response: Response) -> Schedule:
    response.headers["ETag"] = f'"{definition_tag(schedule.spec)}"'
    return schedule


class ScheduleCreate(ScheduleSpec):
    job_id: str | None = Field(default=None, description="the job it runs (or workflow_id)")
    workflow_id: str | None = Field(default=None, description="the workflow it starts")
    name: Annotated[
        str | None,
        AfterValidator(check_schedule_name),
        Field(description="unique per tenant; the job-name alphabet"),
    ] = None
    paused: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.job_id is None) == (self.workflow_id is None):
            raise ValueError("give job_id or workflow_id: what the schedule starts (one)")
        return self

    def spec(self) -> ScheduleSpec:
        return ScheduleSpec.model_validate(
            self.model_dump(exclude={"job_id", "workflow_id", "name", "paused"})
        )


class CronPreviewRequest(BaseModel):
    cron: Annotated[str, Field(min_length=1, max_length=256)]
    timezone: Annotated[str, Field(max_length=64)] = "UTC"
    count: Annotated[int, Field(ge=1, le=MAX_PREVIEW)] = 10
    after: IsoTime | None = None


class Fire(BaseModel):
    utc: datetime
    local: str  # ISO 8601 in the schedule's zone, with its offset


class Preview(BaseModel):
    cron: str
    timezone: str
    fires: list[Fire]


def _allow_seconds(request: Request) -> bool:
    allow: bool = request.app.state.settings.allow_cron_seconds
    return allow


def _preview(fires: schedules.Fires) -> Preview:
    return Preview(
        cron=fires.cron,
        timezone=fires.timezone,
        fires=[
            Fire(utc=moment, local=moment.astimezone(fires.zone).isoformat())
            for moment in fires.moments
        ],
    )


@router.post(
    "/v1/schedules",
    status_code=status.HTTP_201_CREATED,
    responses={201: ETAG_HEADER, **problems(404, 409)},
)
def create_schedule(
    body: ScheduleCreate, caller: Writer, store: StoreDep, request: Request, response: Response
) -> Schedule:
    schedule = schedules.create(
        store,
        caller.tenant_id,
        body.job_id,
        body.spec(),
        workflow_id=body.workflow_id,
        name=body.name,
        paused=body.paused,
        allow_seconds=_allow_seconds(request),
        created_by=caller.actor,
    )
    return _tagged(with_creator_name(store, caller.tenant_id, schedule), response)


@router.get("/v1/schedules")
def list_schedules(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    job_id: str | None = None,
    workflow_id: str | None = None,
    name: Annotated[str | None, Query(max_length=128)] = None,
    created_by: CreatedBy = None,
) -> Page[Schedule]:
    found = store.schedules.list(
        caller.tenant_id,
        job_id=job_id,
        workflow_id=workflow_id,
        name=name,
        page=page,
        created_by=created_by,
    )
    return page_with_creator_names(store, caller.tenant_id, found)


@router.get("/v1/schedules/{schedule_id}", responses={200: ETAG_HEADER})
def get_schedule(schedule_id: str, caller: Caller, store: StoreDep, response: Response) -> Schedule:
    schedule = store.schedules.get(caller.tenant_id, schedule_id)
    return _tagged(with_creator_name(store, caller.tenant_id, schedule), response)


@router.patch(
    "/v1/schedules/{schedule_id}",
    responses={200: ETAG_HEADER, **problems(412)},
    openapi_extra=patch_body(ScheduleSpec),
)
def update_schedule(
    schedule_id: str,
    caller: Writer,
    store: StoreDep,
    request: Request,
    response: Response,
    changes: Annotated[dict[str, Any], Body(examples=[{"cron": "*/5 * * * *"}])],
    if_match: Annotated[str | None, Header(max_length=1024, description=IF_MATCH)] = None,
) -> Schedule:
    """Change some fields; the next fire is computed afresh from now. Without ``If-Match``
    the change applies to the schedule as it is when it is written."""
    schedule = schedules.update(
        store,
        caller.tenant_id,
        schedule_id,
        changes,
        allow_seconds=_allow_seconds(request),
        if_tag=versions(if_match),
    )
    return _tagged(with_creator_name(store, caller.tenant_id, schedule), response)


@router.delete("/v1/schedules/{schedule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_schedule(schedule_id: str, caller: Writer, store: StoreDep) -> Response:
    store.schedules.delete(caller.tenant_id, schedule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/schedules/{schedule_id}/pause")
def pause_schedule(schedule_id: str, caller: Operator, store: StoreDep) -> Schedule:
    schedule = store.schedules.pause(caller.tenant_id, schedule_id)
    return with_creator_name(store, caller.tenant_id, schedule)


@router.post("/v1/schedules/{schedule_id}/resume")
def resume_schedule(
    schedule_id: str, caller: Operator, store: StoreDep, request: Request
) -> Schedule:
    """Fires resume from now; what would have fired while paused is not caught up."""
    schedule = schedules.resume(
        store, caller.tenant_id, schedule_id, allow_seconds=_allow_seconds(request)
    )
    return with_creator_name(store, caller.tenant_id, schedule)


@router.post(
    "/v1/schedules/{schedule_id}/trigger",
    status_code=status.HTTP_201_CREATED,
    responses=problems(404, 409, 429),
)
def trigger_schedule(schedule_id: str, caller: Submitter, store: StoreDep) -> TriggeredFire:
    """Fire it now, as a fire of its own (the run carries ``schedule_id`` and
    ``scheduled_for``): under its concurrency policy (409 where ``forbid`` would skip it),
    paused or not; its next fire stays as it was. A submission of the caller's tenant,
    counted against its submission rate (429)."""
    return firing.trigger(store, caller.tenant_id, schedule_id, actor=caller.actor)


@router.get("/v1/schedules/{schedule_id}/next")
def next_fires(
    schedule_id: str,
    caller: Caller,
    store: StoreDep,
    request: Request,
    count: Annotated[int, Query(ge=1, le=MAX_PREVIEW)] = 10,
) -> Preview:
    fires = schedules.upcoming(
        store, caller.tenant_id, schedule_id, count, allow_seconds=_allow_seconds(request)
    )
    return _preview(fires)


@router.get("/v1/schedules/{schedule_id}/events")
def schedule_events(schedule_id: str, caller: Caller, store: StoreDep) -> list[ScheduleEvent]:
    """Fires, misses, skips and changes, oldest first (the last 1,000)."""
    return store.schedules.events(caller.tenant_id, schedule_id)


@router.post("/v1/cron/preview")
def preview_cron(
    body: CronPreviewRequest, _caller: Caller, store: StoreDep, request: Request
) -> Preview:
    """The next fires of an expression that is not saved anywhere; 422 if it has none after
    ``after`` (the same refusal as creating a schedule with it)."""
    fires = schedules.preview_cron(
        store,
        body.cron,
        body.timezone,
        body.after,
        body.count,
        allow_seconds=_allow_seconds(request),
    )
    return _preview(fires)
