"""Schedules: their definitions (tenant-scoped), and what a firer reads of them.

A fire inserts a run keyed by (schedule, scheduled_for) under a unique constraint, and
advances the schedule with an update guarded by the schedule as it was read (its nominal time
and its last change) — whoever fires it, and however often they try, a nominal time becomes
one run. Firing is a use case (``app/firing.py``) over ``schedule_fires``' writes. A tenant
away from this cell (moving, moved, or not yet taken in) has no schedule due: its
``next_due_at`` is cleared while it is (``store/moves/states.py``).
"""

from __future__ import annotations

import builtins
import random
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, func, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.ids import new_id
from herder.domain.limits import fielded
from herder.domain.listings import PageRequest
from herder.domain.models import Page, Schedule, ScheduleEvent
from herder.domain.overrides import apply_overrides
from herder.domain.schedules import ScheduleSpec
from herder.store.database import Database
from herder.store.jobs import JobRepository
from herder.store.limits import check_references as check_limits
from herder.store.named import NamedRows
from herder.store.notifications import DUE_CHANNEL
from herder.store.owned import owned_row
from herder.store.pools import check_usable
from herder.store.schedule_events import schedule_event
from herder.store.schedule_fires import DueSchedule, due_schedule, next_fire_values
from herder.store.schema import schedule_events, schedules, workflows
from herder.store.work import Work, unit_of_work

PARTITIONS = 8  # fixed: a schedule's partition is stored when it is created


def partition_of(schedule_id: str) -> int:
    return zlib.crc32(schedule_id.encode()) % PARTITIONS


def _schedule(row: Any) -> Schedule:
    return Schedule.model_validate(dict(row._mapping))


# Found by id: a schedule's name is optional (and unique to its tenant when given).
ROWS = NamedRows(schedules, "schedule", _schedule, found_by=("id",))


class ScheduleRepository:
    def __init__(
        self, database: Database, clock: Clock, rng: random.Random, jobs: JobRepository
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._jobs = jobs

    # --- definitions --------------------------------------------------------------------

    def create(
        self,
        tenant_id: str,
        job_id: str | None,
        spec: ScheduleSpec,
        first: datetime | None,
        *,
        name: str | None = None,
        paused: bool = False,
        workflow_id: str | None = None,
        created_by: str | None = None,
    ) -> Schedule:
        """A schedule of a job's runs, or (``workflow_id``) of a workflow's; ``first`` is the
        first nominal fire (computed by the caller from the cron); a ``name`` another
        schedule of the tenant has is a ``Conflict`` (a unique index)."""
        now = self._clock.now()
        schedule_id = new_id("sch", epoch_ms(now))
        with self._db.write() as connection:
            if job_id is not None:
                job = self._jobs.get_within(connection, tenant_id, job_id)
                apply_overrides(job.spec, spec.overrides, "overrides.", fielded(spec.limits))
            else:
                owned_row(
                    connection,
                    workflows,
                    tenant_id,
                    str(workflow_id),
                    "workflow",
                    columns=[workflows.c.id],
                )
            check_usable(connection, tenant_id, {"overrides.pool": spec.overrides.pool})
            check_limits(connection, tenant_id, fielded(spec.limits))
            columns = {
                "job_id": job_id, "workflow_id": workflow_id,
                "spec": spec.model_dump(mode="json"), "paused": paused,
                "partition": partition_of(schedule_id), "created_by": created_by,
                **next_fire_values(schedule_id, spec, None if paused else first),
            }  # fmt: skip
            schedule = ROWS.insert(connection, tenant_id, schedule_id, name, columns, now)
            self._db.notify(connection, DUE_CHANNEL)
            return schedule

    def get(self, tenant_id: str, schedule_id: str) -> Schedule:
        with self._db.read() as connection:
            return ROWS.get(connection, tenant_id, schedule_id)

    @staticmethod
    def _get(
        connection: Connection, tenant_id: str, schedule_id: str, *, for_update: bool = False
    ) -> Schedule:
        return _schedule(ROWS.row(connection, tenant_id, schedule_id, for_update=for_update))

    def list(
        self,
        tenant_id: str,
        *,
        job_id: str | None = None,
        workflow_id: str | None = None,
        name: str | None = None,
        page: PageRequest = PageRequest(),
        created_by: str | None = None,
    ) -> Page[Schedule]:
        wanted = (
            (schedules.c.job_id, job_id),
            (schedules.c.workflow_id, workflow_id),
            (schedules.c.created_by, created_by),
        )
        where = [column == value for column, value in wanted if value is not None]
        with self._db.read() as connection:
            return ROWS.page(connection, tenant_id, page, name=name, where=where)

    def replace(
        self,
        tenant_id: str,
        schedule_id: str,
        change: Callable[[Schedule], tuple[ScheduleSpec, datetime]],
    ) -> Schedule:
        """A new spec and first fire, decided by ``change`` from the schedule as it is inside
        this transaction; nothing is caught up."""
        now = self._clock.now()
        with self._db.write() as connection:
            current = self._get(connection, tenant_id, schedule_id, for_update=True)
            spec, first = change(current)
            if current.job_id is not None:
                job = self._jobs.get_within(connection, tenant_id, current.job_id)
                apply_overrides(job.spec, spec.overrides, "overrides.", fielded(spec.limits))
            check_usable(connection, tenant_id, {"overrides.pool": spec.overrides.pool})
            check_limits(connection, tenant_id, fielded(spec.limits))
            next_values = next_fire_values(schedule_id, spec, None if current.paused else first)
            connection.execute(
                update(schedules)
                .where(schedules.c.id == schedule_id)
                .values(spec=spec.model_dump(mode="json"), updated_at=now, **next_values)
            )
            schedule_event(connection, schedule_id, now, "updated", "the schedule was changed")
            self._db.notify(connection, DUE_CHANNEL)
            return self._get(connection, tenant_id, schedule_id)

    def pause(self, tenant_id: str, schedule_id: str) -> Schedule:
        """No fires, and none caught up later."""
        return self._set_paused(tenant_id, schedule_id, None)

    def resume(
        self, tenant_id: str, schedule_id: str, first: Callable[[ScheduleSpec], datetime]
    ) -> Schedule:
        """Fires resume from ``first`` of the spec as it is inside this transaction."""
        return self._set_paused(tenant_id, schedule_id, first)

    def _set_paused(
        self,
        tenant_id: str,
        schedule_id: str,
        first: Callable[[ScheduleSpec], datetime] | None,
    ) -> Schedule:
        paused = first is None
        now = self._clock.now()
        with self._db.write() as connection:
            current = self._get(connection, tenant_id, schedule_id, for_update=True)
            nominal = None if first is None else first(current.spec)
            if current.paused != paused:
                connection.execute(
                    update(schedules)
                    .where(schedules.c.id == schedule_id)
                    .values(
                        paused=paused,
                        updated_at=now,
                        **next_fire_values(schedule_id, current.spec, nominal),
                    )
                )
                kind = "paused" if paused else "resumed"
                schedule_event(connection, schedule_id, now, kind, f"the schedule was {kind}")
                self._db.notify(connection, DUE_CHANNEL)
            return self._get(connection, tenant_id, schedule_id)

    def delete(self, tenant_id: str, schedule_id: str) -> None:
        """Remove the schedule; the runs it made stay in history."""
        with self._db.write() as connection:
            self._get(connection, tenant_id, schedule_id)
            connection.execute(
                delete(schedule_events).where(schedule_events.c.schedule_id == schedule_id)
            )
            connection.execute(delete(schedules).where(schedules.c.id == schedule_id))

    def events(
        self, tenant_id: str, schedule_id: str, limit: int = 1000
    ) -> builtins.list[ScheduleEvent]:
        with self._db.read() as connection:
            self._get(connection, tenant_id, schedule_id)
            rows = connection.execute(
                select(schedule_events)
                .where(schedule_events.c.schedule_id == schedule_id)
                .order_by(schedule_events.c.id.desc())
                .limit(limit)
            ).all()
        return [ScheduleEvent.model_validate(dict(row._mapping)) for row in reversed(rows)]

    # --- firing -------------------------------------------------------------------------

    def due(self, partition: int, now: datetime, limit: int) -> builtins.list[DueSchedule]:
        """Schedules of ``partition`` whose fire is due — cost in proportion to those, never
        to the schedules stored (index on partition, next_due_at)."""
        with self._db.read() as connection:
            rows = connection.execute(
                select(
                    schedules.c.id,
                    schedules.c.tenant_id,
                    schedules.c.job_id,
                    schedules.c.workflow_id,
                    schedules.c.spec,
                    schedules.c.next_fire_at,
                    schedules.c.updated_at,
                    schedules.c.last_fired_for,
                )
                .where(schedules.c.partition == partition, schedules.c.next_due_at <= now)
                .order_by(schedules.c.next_due_at)
                .limit(limit)
            ).all()
        return [due_schedule(row) for row in rows]

    @staticmethod
    def due_within(connection: Connection, tenant_id: str, schedule_id: str) -> DueSchedule:
        """The tenant's schedule as a firer reads it, its row held (a fire by hand)."""
        return due_schedule(ROWS.row(connection, tenant_id, schedule_id, for_update=True))

    def next_due(self, partition: int) -> datetime | None:
        with self._db.read() as connection:
            moment: datetime | None = connection.execute(
                select(func.min(schedules.c.next_due_at)).where(schedules.c.partition == partition)
            ).scalar()
        return moment

    def stop_unfireable(self, unfireable: Sequence[tuple[DueSchedule, str]]) -> None:
        """Schedules that cannot be evaluated (the error says why), like Kubernetes'
        UnparseableSchedule: the reason goes on the schedule as an error event and it fires no
        more until it is changed, so no firer spins on it."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            for due, error in unfireable:
                self._stop(work, due, error)

    @staticmethod
    def _stop(work: Work, due: DueSchedule, error: str) -> None:
        stopped = work.connection.execute(
            update(schedules)
            .where(
                schedules.c.id == due.id,
                schedules.c.next_fire_at == due.next_fire_at,
                schedules.c.updated_at == due.updated_at,
            )
            .values(next_fire_at=None, next_due_at=None, updated_at=work.now)
        ).rowcount
        if stopped:
            schedule_event(
                work.connection, due.id, work.now, "error",
                f"cannot be evaluated, so it stopped firing: {error}; change the schedule "
                "(PATCH) to fix it", scheduled_for=due.next_fire_at,
            )  # fmt: skip
