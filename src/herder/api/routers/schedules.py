"""/v1/schedules and /v1/cron/preview: recurring runs of a job, and their next fires."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Body, Query, Request, Response, status
from pydantic import BaseModel, Field

from herder.api.auth import Caller, StoreDep, Writer
from herder.api.errors import client_input
from herder.api.openapi import patch_body, problems
from herder.api.schemas import IsoTime
from herder.domain.cron import (
    SEARCH_HORIZON_YEARS,
    CronError,
    CronExpression,
    next_fire,
    parse_timezone,
    preview,
)
from herder.domain.errors import Invalid
from herder.domain.models import Page, Schedule, ScheduleEvent
from herder.domain.schedules import ScheduleSpec, first_fire
from herder.store.store import Store

router = APIRouter(tags=["schedules"])

MAX_PREVIEW = 100


class ScheduleCreate(ScheduleSpec):
    job_id: str
    paused: bool = False

    def spec(self) -> ScheduleSpec:
        return ScheduleSpec.model_validate(self.model_dump(exclude={"job_id", "paused"}))


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


def compile_cron(request: Request, cron: str, timezone: str) -> tuple[CronExpression, ZoneInfo]:
    """The expression and zone, or 422 naming the field (``cron`` or ``timezone``)."""
    allow_seconds = request.app.state.settings.allow_cron_seconds
    try:
        zone = parse_timezone(timezone)
    except CronError as error:
        raise Invalid(str(error), field="timezone") from error
    try:
        expression = CronExpression.parse(cron, allow_seconds=allow_seconds)
    except CronError as error:
        raise Invalid(f"cron: {error}", field=f"cron.{error.field}") from error
    return expression, zone


def _fires(expression: CronExpression, zone: ZoneInfo, after: datetime, count: int) -> list[Fire]:
    return [
        Fire(utc=moment, local=moment.astimezone(zone).isoformat())
        for moment in preview(expression, zone, after, count)
    ]


def _never_fires(cron: str) -> Invalid:
    """The one refusal of an expression with no fire, for schedules and previews alike."""
    return Invalid(
        f"cron {cron!r} never fires (no time matches it within {SEARCH_HORIZON_YEARS} years)",
        field="cron",
    )


def _first(request: Request, spec: ScheduleSpec, store: Store) -> datetime:
    """The first fire of a schedule being created, changed or resumed; 422 if it has none:
    the cron never fires, the window ended already, or no fire falls inside it."""
    expression, zone = compile_cron(request, spec.cron, spec.timezone)
    now = store.clock.now()
    if next_fire(expression, zone, now) is None:
        raise _never_fires(spec.cron)
    if spec.end_at is not None and spec.end_at <= now:
        raise Invalid(f"end_at {spec.end_at.isoformat()} has already passed", field="end_at")
    first = first_fire(expression, zone, spec, now)
    if first is None:
        raise Invalid(f"cron {spec.cron!r} does not fire before end_at", field="end_at")
    return first


@router.post("/v1/schedules", status_code=status.HTTP_201_CREATED, responses=problems(404))
def create_schedule(
    body: ScheduleCreate, caller: Writer, store: StoreDep, request: Request
) -> Schedule:
    spec = body.spec()
    first = _first(request, spec, store)
    return store.schedules.create(caller.tenant_id, body.job_id, spec, first, paused=body.paused)


@router.get("/v1/schedules")
def list_schedules(
    caller: Caller,
    store: StoreDep,
    job_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> Page[Schedule]:
    return store.schedules.list(caller.tenant_id, job_id=job_id, limit=limit, cursor=cursor)


@router.get("/v1/schedules/{schedule_id}")
def get_schedule(schedule_id: str, caller: Caller, store: StoreDep) -> Schedule:
    return store.schedules.get(caller.tenant_id, schedule_id)


@router.patch("/v1/schedules/{schedule_id}", openapi_extra=patch_body(ScheduleSpec))
def update_schedule(
    schedule_id: str,
    caller: Writer,
    store: StoreDep,
    request: Request,
    changes: Annotated[dict[str, Any], Body(examples=[{"cron": "*/5 * * * *"}])],
) -> Schedule:
    """Change some fields; the next fire is computed afresh from now."""
    unknown = set(changes) - set(ScheduleSpec.model_fields)
    if unknown:
        raise Invalid(f"unknown field(s): {', '.join(sorted(unknown))}", field=min(unknown))
    current = store.schedules.get(caller.tenant_id, schedule_id)
    spec = client_input(ScheduleSpec, {**current.spec.model_dump(mode="json"), **changes})
    return store.schedules.replace(
        caller.tenant_id, schedule_id, spec, _first(request, spec, store)
    )


@router.delete("/v1/schedules/{schedule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_schedule(schedule_id: str, caller: Writer, store: StoreDep) -> Response:
    store.schedules.delete(caller.tenant_id, schedule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/v1/schedules/{schedule_id}/pause")
def pause_schedule(schedule_id: str, caller: Writer, store: StoreDep) -> Schedule:
    return store.schedules.set_paused(caller.tenant_id, schedule_id, True, None)


@router.post("/v1/schedules/{schedule_id}/resume")
def resume_schedule(
    schedule_id: str, caller: Writer, store: StoreDep, request: Request
) -> Schedule:
    """Fires resume from now; what would have fired while paused is not caught up."""
    current = store.schedules.get(caller.tenant_id, schedule_id)
    first = _first(request, current.spec, store)
    return store.schedules.set_paused(caller.tenant_id, schedule_id, False, first)


@router.get("/v1/schedules/{schedule_id}/next")
def next_fires(
    schedule_id: str,
    caller: Caller,
    store: StoreDep,
    request: Request,
    count: Annotated[int, Query(ge=1, le=MAX_PREVIEW)] = 10,
) -> Preview:
    schedule = store.schedules.get(caller.tenant_id, schedule_id)
    spec = schedule.spec
    expression, zone = compile_cron(request, spec.cron, spec.timezone)
    after = store.clock.now()
    if spec.start_at is not None and spec.start_at > after:
        after = spec.start_at
    fires = _fires(expression, zone, after, count)
    if spec.end_at is not None:
        fires = [fire for fire in fires if fire.utc <= spec.end_at]
    return Preview(cron=spec.cron, timezone=spec.timezone, fires=fires)


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
    expression, zone = compile_cron(request, body.cron, body.timezone)
    fires = _fires(expression, zone, body.after or store.clock.now(), body.count)
    if not fires:
        raise _never_fires(body.cron)
    return Preview(cron=body.cron, timezone=body.timezone, fires=fires)
