"""Runs as users see them: submit, read, list, cancel."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, Invalid, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import JobSpec, RunOverrides, apply_overrides
from herder.domain.models import Attempt, Page, Run, RunDetail, RunEvent
from herder.domain.schedules import ConcurrencyPolicy
from herder.domain.states import AttemptState, RunState
from herder.store.concurrency import active_runs, cancel_for_replacement
from herder.store.database import Database
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.jobs import JobRepository
from herder.store.notifications import DUE_CHANNEL, notify_cancel, notify_work
from herder.store.pagination import next_cursor, page_query, page_records
from herder.store.schema import attempts, run_events, runs, schedules
from herder.store.transitions import move_run, record_event

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


def new_run_values(
    run_id: str,
    tenant_id: str,
    job_id: str,
    job_name: str,
    spec: JobSpec,
    now: datetime,
    idempotency_key: str | None,
) -> dict[str, Any]:
    """The row of a new queued run."""
    return {
        "id": run_id,
        "tenant_id": tenant_id,
        "job_id": job_id,
        "job_name": job_name,
        "state": RunState.QUEUED,
        "priority": spec.priority.rank,
        "spec": spec.model_dump(mode="json"),
        "cpu_milli": spec.resources.cpu_milli,
        "memory_mb": spec.resources.memory_mb,
        "gpus": spec.resources.gpus,
        "artifact": spec.artifact,
        "idempotency_key": idempotency_key,
        "attempt_count": 0,
        "cancel_requested": False,
        "created_at": now,
        "queued_at": now,
        "started_at": None,
        "finished_at": None,
        "exit_code": None,
        "reason": None,
        "retry_at": None,
        "start_deadline": None,
        "rerun_of": None,
        "replicas": spec.replicas,
        "requires": spec.requires or None,
        "preemptible": spec.preemptible,
        "preemptions": 0,
        "preempted_at": None,
        "waiting_reason": "not looked at by the dispatcher yet",
    }


class RunRepository:
    def __init__(self, database: Database, clock: Clock, jobs: JobRepository) -> None:
        self._db = database
        self._clock = clock
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
        now = self._clock.now()
        run_id = new_id("run", epoch_ms(now))
        with self._db.write() as connection:
            job = self._jobs._get(connection, tenant_id, job_id)
            spec = apply_overrides(job.spec, overrides)
            values = new_run_values(run_id, tenant_id, job.id, job.name, spec, now, idempotency_key)
            if as_schedule is not None:
                self._apply_concurrency(connection, tenant_id, job.id, as_schedule, now)
                values["schedule_id"] = as_schedule
            if overrides.start_deadline_seconds is not None:
                values["start_deadline"] = now + timedelta(seconds=overrides.start_deadline_seconds)
                self._db.notify(connection, DUE_CHANNEL)
            inserted = (
                connection.execute(
                    insert_ignoring_duplicates(self._db, runs, **values).returning(runs.c.id)
                ).scalar()
                is not None
            )
            if inserted:
                record_event(
                    connection,
                    run_id,
                    now,
                    actor=actor,
                    message="submitted",
                    to_state=RunState.QUEUED,
                )
                notify_work(self._db, connection)
        if inserted:
            return Run.model_validate(values | {"spec": spec}), True
        existing = self._by_idempotency_key(tenant_id, idempotency_key)
        if existing.job_id != job_id:
            raise Conflict(
                f"Idempotency-Key {idempotency_key!r} was already used for run {existing.id} "
                f"of job {existing.job_id}; use a new key for a different job",
                field="Idempotency-Key",
            )
        return existing, False

    def _apply_concurrency(
        self, connection: Connection, tenant_id: str, job_id: str, schedule_id: str, now: datetime
    ) -> None:
        schedule = connection.execute(
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
        active = active_runs(connection, schedule_id)
        if active and policy is ConcurrencyPolicy.FORBID:
            raise Conflict(
                f"schedule {schedule_id} forbids concurrent runs and its run {active[0].id} "
                f"is still {active[0].state}"
            )
        if policy is ConcurrencyPolicy.REPLACE:
            for run_id, state in active:
                cancel_for_replacement(
                    self._db, connection, schedule_id, run_id, RunState(state), now
                )

    def rerun(self, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
        """A new run of what an ended run ran (its spec as submitted), linked to it — how a
        dead run leaves the dead-letter set."""
        now = self._clock.now()
        rerun_id = new_id("run", epoch_ms(now))
        with self._db.write() as connection:
            old = self._get(connection, tenant_id, run_id)
            if old.state.is_active:
                raise Conflict(f"run {run_id} is still {old.state}; only ended runs can be re-run")
            values = new_run_values(
                rerun_id, tenant_id, old.job_id, old.job_name, old.spec, now, None
            )
            values["rerun_of"] = old.id
            connection.execute(insert(runs).values(**values))
            record_event(
                connection, rerun_id, now, actor=actor, to_state=RunState.QUEUED,
                message=f"submitted as a re-run of {old.id}",
            )  # fmt: skip
            record_event(connection, old.id, now, actor=actor, message=f"re-run as {rerun_id}")
            notify_work(self._db, connection)
        return Run.model_validate(values | {"spec": old.spec})

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
        and its worker, told through a notice, kills it."""
        now = self._clock.now()
        with self._db.write() as connection:
            run = self._get(connection, tenant_id, run_id)
            if run.state is RunState.RUNNING:
                for worker_id in self._request_cancel(connection, run, now, actor):
                    notify_cancel(self._db, connection, worker_id)
                return self._get(connection, tenant_id, run_id)
            if not run.state.is_terminal and move_run(
                connection,
                run_id,
                run.state,
                RunState.CANCELLED,
                now,
                actor=actor,
                message=f"cancelled while {run.state}",
                reason="cancelled",
            ):
                return self._get(connection, tenant_id, run_id)
        raise Conflict(f"run {run_id} is already {run.state}; only active runs can be cancelled")

    @staticmethod
    def _request_cancel(connection: Connection, run: Run, now: datetime, actor: str) -> set[str]:
        """Mark the run; returns the workers of its current attempt (each gang member's)."""
        if not run.cancel_requested:
            connection.execute(
                update(runs)
                .where(runs.c.id == run.id, runs.c.state == RunState.RUNNING)
                .values(cancel_requested=True)
            )
            record_event(
                connection,
                run.id,
                now,
                actor=actor,
                attempt=run.attempt_count,
                message="cancel requested; the worker is stopping the attempt",
            )
        return set(
            connection.execute(
                select(attempts.c.worker_id).where(
                    attempts.c.run_id == run.id,
                    attempts.c.number == run.attempt_count,
                    attempts.c.state == AttemptState.RUNNING,
                )
            ).scalars()
        )
