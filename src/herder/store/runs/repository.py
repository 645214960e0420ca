"""Runs as users see them: submit, read, list, cancel, re-run."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, Invalid, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import RunOverrides, apply_overrides
from herder.domain.lifecycle.cancel import Cause, cancel, rerun
from herder.domain.lifecycle.changes import DUE, WORK, Changes, Event, NewRun
from herder.domain.lifecycle.concurrency import admit
from herder.domain.models import Attempt, Page, Run, RunDetail, RunEvent
from herder.domain.schedules import ConcurrencyPolicy
from herder.domain.states import RunState
from herder.store.database import Database
from herder.store.jobs import JobRepository
from herder.store.pagination import next_cursor, page_query, page_records
from herder.store.runs.facts import active_of_schedule, active_runs
from herder.store.runs.writes import new_run_row
from herder.store.schedule_events import record_replaced
from herder.store.schema import attempts, run_events, runs, schedules
from herder.store.work import Work, unit_of_work

_RUN_COLUMNS = [
    runs.c.id,
    runs.c.job_id,
    runs.c.job_name,
    runs.c.state,
    runs.c.spec,
    runs.c.idempotency_key,
    runs.c.attempt_count,
    runs.c.cancel_requested,
    runs.c.created_at,
    runs.c.queued_at,
    runs.c.started_at,
    runs.c.finished_at,
    runs.c.exit_code,
    runs.c.reason,
    runs.c.retry_at,
    runs.c.start_deadline,
    runs.c.rerun_of,
    runs.c.preemptions,
    runs.c.waiting_reason,
]


def _run(row: Any) -> Run:
    return Run.model_validate(dict(row._mapping))


class RunRepository:
    def __init__(
        self, database: Database, clock: Clock, rng: random.Random, jobs: JobRepository
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._jobs = jobs

    def submit(
        self,
        tenant_id: str,
        job_id: str,
        overrides: RunOverrides,
        *,
        idempotency_key: str | None = None,
        actor: str = "user",
        as_schedule: str | None = None,
    ) -> tuple[Run, bool]:
        """A queued one-off run, and whether it is new. With an idempotency key the unique
        constraint (tenant, key) decides: a repeat returns the run the first call made.

        ``as_schedule`` makes it count as a run of that schedule of the job, under the
        schedule's concurrency policy: refused (409) under ``forbid`` while one of its runs
        is active, replacing the active one under ``replace``.
        """
        with unit_of_work(self._db, self._clock, self._rng) as work:
            now = work.now
            job = self._jobs.get_within(work.connection, tenant_id, job_id)
            spec = apply_overrides(job.spec, overrides)
            deadline = overrides.start_deadline_seconds
            run_id = new_id("run", epoch_ms(now))
            new = NewRun(
                id=run_id, tenant_id=tenant_id, job_id=job.id, job_name=job.name, spec=spec,
                idempotency_key=idempotency_key, schedule_id=as_schedule,
                start_deadline=None if deadline is None else now + timedelta(seconds=deadline),
                event=Event(run_id, "submitted", actor, target=RunState.QUEUED),
            )  # fmt: skip
            changes = Changes(new_runs=(new,), notices=frozenset({WORK}))
            if deadline is not None:
                changes += Changes(notices=frozenset({DUE}))
            if as_schedule is not None:
                changes += self._admit(work, tenant_id, job.id, as_schedule)
            inserted = new.id in work.apply(changes).inserted
        if inserted:
            return Run.model_validate(new_run_row(new, now) | {"spec": spec}), True
        existing = self._by_idempotency_key(tenant_id, idempotency_key)
        if existing.job_id != job_id:
            raise Conflict(
                f"Idempotency-Key {idempotency_key!r} was already used for run {existing.id} "
                f"of job {existing.job_id}; use a new key for a different job",
                field="Idempotency-Key",
            )
        return existing, False

    @staticmethod
    def _admit(work: Work, tenant_id: str, job_id: str, schedule_id: str) -> Changes:
        """The schedule's concurrency policy, for a manual run that counts as its own."""
        schedule = work.connection.execute(
            select(schedules.c.job_id, schedules.c.spec).where(
                schedules.c.tenant_id == tenant_id, schedules.c.id == schedule_id
            )
        ).first()
        if schedule is None:
            raise NotFound(f"schedule {schedule_id} not found")
        if schedule.job_id != job_id:
            raise Invalid(
                f"schedule {schedule_id} runs job {schedule.job_id}, not {job_id}",
                field="schedule_id",
            )
        policy = ConcurrencyPolicy(schedule.spec.get("concurrency_policy", "allow"))
        active = active_of_schedule(work.connection, schedule_id)
        admission = admit(schedule_id, policy, active, work.now)
        if admission.blocking is not None:
            blocking = admission.blocking.run
            raise Conflict(
                f"schedule {schedule_id} forbids concurrent runs and its run {blocking.id} "
                f"is still {blocking.state}"
            )
        record_replaced(work, schedule_id, admission.replaced)
        return admission.changes

    def rerun(self, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
        """A new run of what an ended run ran (its spec as submitted), linked to it — how a
        dead run leaves the dead-letter set."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            old = self._get(work.connection, tenant_id, run_id)
            changes = rerun(old, tenant_id, new_id("run", epoch_ms(work.now)), actor)
            work.apply(changes)
            (new,) = changes.new_runs
            return Run.model_validate(new_run_row(new, work.now) | {"spec": old.spec})

    def _by_idempotency_key(self, tenant_id: str, key: str | None) -> Run:
        with self._db.read() as connection:
            row = connection.execute(
                select(*_RUN_COLUMNS).where(
                    runs.c.tenant_id == tenant_id, runs.c.idempotency_key == key
                )
            ).first()
        if row is None:  # only possible if a concurrent insert was rolled back
            raise Conflict("the run for this Idempotency-Key is being created; retry")
        return _run(row)

    def get(self, tenant_id: str, run_id: str) -> Run:
        with self._db.read() as connection:
            return self._get(connection, tenant_id, run_id)

    @staticmethod
    def _get(connection: Connection, tenant_id: str, run_id: str) -> Run:
        row = connection.execute(
            select(*_RUN_COLUMNS).where(runs.c.tenant_id == tenant_id, runs.c.id == run_id)
        ).first()
        if row is None:
            raise NotFound(f"run {run_id} not found")
        return _run(row)

    def detail(self, tenant_id: str, run_id: str) -> RunDetail:
        with self._db.read() as connection:
            run = self._get(connection, tenant_id, run_id)
            attempt_rows = (
                connection.execute(
                    select(attempts)
                    .where(attempts.c.run_id == run_id)
                    .order_by(attempts.c.number, attempts.c.rank)
                )
                .mappings()
                .all()
            )
            event_rows = (
                connection.execute(
                    select(run_events)
                    .where(run_events.c.run_id == run_id)
                    .order_by(run_events.c.id)
                )
                .mappings()
                .all()
            )
        return RunDetail(
            **run.model_dump(),
            attempts=[Attempt.model_validate(dict(row)) for row in attempt_rows],
            events=[RunEvent.model_validate(dict(row)) for row in event_rows],
        )

    def events(self, tenant_id: str, run_id: str) -> list[RunEvent]:
        return self.detail(tenant_id, run_id).events

    def list(
        self,
        tenant_id: str,
        *,
        job_id: str | None = None,
        states: list[RunState] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Run]:
        query = select(*_RUN_COLUMNS).where(runs.c.tenant_id == tenant_id)
        if job_id is not None:
            query = query.where(runs.c.job_id == job_id)
        if states:
            query = query.where(runs.c.state.in_([str(state) for state in states]))
        if since is not None:
            query = query.where(runs.c.created_at >= since)
        if until is not None:
            query = query.where(runs.c.created_at < until)
        with self._db.read() as connection:
            rows = connection.execute(page_query(query, runs.c.id, limit, cursor)).all()
        return Page(
            items=page_records(rows[:limit], _run),
            next_cursor=next_cursor([row.id for row in rows], limit),
        )

    def cancel(self, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
        """Cancel a run. A run that is not running yet ends at once; a running one is marked
        and its workers, told through a notice, kill it."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._get(work.connection, tenant_id, run_id)
            (active,) = active_runs(work.connection, [run_id])
            work.apply(cancel(active, Cause(actor), work.now))
            return self._get(work.connection, tenant_id, run_id)
