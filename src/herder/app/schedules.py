"""Schedules: their first fire on create, change and resume, a fire by hand, and previews of
their fires.

The domain computes fires (``herder.domain.cron``, ``herder.domain.schedules``); here they are
asked for at the right moment — a change or a resume decides its first fire inside the store's
writing transaction, from the spec as it is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import NamedTuple
from zoneinfo import ZoneInfo

from herder.domain.cron import (
    SEARCH_HORIZON_YEARS,
    CronError,
    CronExpression,
    next_fire,
    parse_timezone,
    preview,
)
from herder.domain.errors import Invalid, StaleVersion
from herder.domain.models import Schedule
from herder.domain.patches import check_fields, patched
from herder.domain.schedules import ScheduleSpec, definition_tag, first_fire
from herder.store.store import Store


class Fires(NamedTuple):
    """Upcoming fires of an expression in its zone (each an aware UTC time)."""

    cron: str
    timezone: str  # as the schedule (or the preview) gave it
    zone: ZoneInfo
    moments: list[datetime]


def _compile(cron: str, timezone: str, *, allow_seconds: bool) -> tuple[CronExpression, ZoneInfo]:
    """The expression and zone, or ``Invalid`` naming the field (``cron`` or ``timezone``)."""
    try:
        zone = parse_timezone(timezone)
    except CronError as error:
        raise Invalid(str(error), field="timezone") from error
    try:
        expression = CronExpression.parse(cron, allow_seconds=allow_seconds)
    except CronError as error:
        raise Invalid(f"cron: {error}", field=f"cron.{error.field}") from error
    return expression, zone


def create(
    store: Store,
    tenant_id: str,
    job_id: str | None,
    spec: ScheduleSpec,
    *,
    name: str | None = None,
    paused: bool,
    allow_seconds: bool,
    workflow_id: str | None = None,
    created_by: str | None = None,
) -> Schedule:
    first = _first_from_now(spec, store.clock.now(), allow_seconds=allow_seconds)
    return store.schedules.create(
        tenant_id, job_id, spec, first, name=name, paused=paused, workflow_id=workflow_id,
        created_by=created_by,
    )  # fmt: skip


def update(
    store: Store,
    tenant_id: str,
    schedule_id: str,
    changes: Mapping[str, object],
    *,
    allow_seconds: bool,
    if_tag: frozenset[int] | None = None,
) -> Schedule:
    """Change some fields; the next fire is computed afresh from now. With ``if_tag``, only
    if its definition is still one of those (``definition_tag``; else ``StaleVersion``),
    decided on the row as it is inside the writing transaction."""
    check_fields(changes, ScheduleSpec.model_fields)
    now = store.clock.now()

    def change(current: Schedule) -> tuple[ScheduleSpec, datetime]:
        tag = definition_tag(current.spec)
        if if_tag is not None and tag not in if_tag:
            raise StaleVersion(
                f"schedule {schedule_id} was changed since the ETag this change was made "
                "against: read it again (GET) and apply the change to what it is now",
                current_version=tag,
            )
        spec = patched(ScheduleSpec, current.spec.model_dump(mode="json"), changes)
        return spec, _first_from_now(spec, now, allow_seconds=allow_seconds)

    return store.schedules.replace(tenant_id, schedule_id, change)


def resume(store: Store, tenant_id: str, schedule_id: str, *, allow_seconds: bool) -> Schedule:
    """Fires resume from now; what would have fired while paused is not caught up."""
    now = store.clock.now()
    return store.schedules.resume(
        tenant_id,
        schedule_id,
        lambda spec: _first_from_now(spec, now, allow_seconds=allow_seconds),
    )


def _first_from_now(spec: ScheduleSpec, now: datetime, *, allow_seconds: bool) -> datetime:
    """The first fire of a schedule being created, changed or resumed; ``Invalid`` if it has
    none: the cron never fires, the window ended already, or no fire falls inside it."""
    expression, zone = _compile(spec.cron, spec.timezone, allow_seconds=allow_seconds)
    if next_fire(expression, zone, now) is None:
        raise _never_fires(spec.cron)
    if spec.end_at is not None and spec.end_at <= now:
        raise Invalid(f"end_at {spec.end_at.isoformat()} has already passed", field="end_at")
    first = first_fire(expression, zone, spec, now)
    if first is None:
        raise Invalid(f"cron {spec.cron!r} does not fire before end_at", field="end_at")
    return first


def upcoming(
    store: Store, tenant_id: str, schedule_id: str, count: int, *, allow_seconds: bool
) -> Fires:
    """The schedule's next ``count`` fires inside its window (from now, or its start)."""
    spec = store.schedules.get(tenant_id, schedule_id).spec
    expression, zone = _compile(spec.cron, spec.timezone, allow_seconds=allow_seconds)
    after = store.clock.now()
    if spec.start_at is not None and spec.start_at > after:
        after = spec.start_at
    moments = preview(expression, zone, after, count)
    if spec.end_at is not None:
        moments = [moment for moment in moments if moment <= spec.end_at]
    return Fires(spec.cron, spec.timezone, zone, moments)


def preview_cron(
    store: Store,
    cron: str,
    timezone: str,
    after: datetime | None,
    count: int,
    *,
    allow_seconds: bool,
) -> Fires:
    """The next fires of an expression saved nowhere, after ``after`` (default: now);
    ``Invalid`` if it has none (the same refusal as creating a schedule with it)."""
    expression, zone = _compile(cron, timezone, allow_seconds=allow_seconds)
    moments = preview(expression, zone, after or store.clock.now(), count)
    if not moments:
        raise _never_fires(cron)
    return Fires(cron, timezone, zone, moments)


def _never_fires(cron: str) -> Invalid:
    """The one refusal of an expression with no fire, for schedules and previews alike."""
    return Invalid(
        f"cron {cron!r} never fires (no time matches it within {SEARCH_HORIZON_YEARS} years)",
        field="cron",
    )
