"""Runs as users see them: read, list, cancel, suspend, resume, re-run (submitted by
``app.submit``)."""

from __future__ import annotations

import random
from typing import Any

from sqlalchemy import Connection, select

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import Priority
from herder.domain.lifecycle.cancel import Cause, cancel, rerun
from herder.domain.lifecycle.priority import rerun_priority
from herder.domain.lifecycle.suspend import resume, suspend
from herder.domain.listings import RunQuery
from herder.domain.models import Attempt, Page, Run, RunDetail, RunEvent
from herder.domain.queue_room import RELEASER, UNLIMITED
from herder.domain.states import RunState
from herder.store.actors import with_actor_names
from herder.store.checkpoints import kept_checkpoints
from herder.store.cold.listing import RunWindow, cold_detail, merged_page
from herder.store.cold.tier import ColdTier
from herder.store.database import Database
from herder.store.history.listing import newest_runs
from herder.store.history.retention import visible_runs_floor
from herder.store.jobs import JobRepository
from herder.store.owned import owned_row
from herder.store.pagination import page_from, page_records
from herder.store.queue_room import queue_room, release_held
from herder.store.runs.facts import active_runs
from herder.store.runs.priority import max_priority, set_priority
from herder.store.runs.submissions import (
    BEING_CREATED,
)
from herder.store.runs.writes import new_run_row
from herder.store.schema import attempts, run_events, runs
from herder.store.work import unit_of_work

_RUN_COLUMNS = [
    runs.c.id,
    runs.c.job_id,
    runs.c.job_name,
    runs.c.state,
    runs.c.spec,
    runs.c.idempotency_key,
    runs.c.attempt_count,
    runs.c.cancel_requested,
    runs.c.suspend_requested,
    runs.c.suspensions,
    runs.c.created_at,
    runs.c.queued_at,
    runs.c.started_at,
    runs.c.finished_at,
    runs.c.exit_code,
    runs.c.reason,
    runs.c.retry_at,
    runs.c.start_deadline,
    runs.c.run_at,
    runs.c.rerun_of,
    runs.c.preemptions,
    runs.c.waiting_reason,
    runs.c.workflow_run_id,
    runs.c.task_name,
    runs.c.map_index,
    runs.c.pool,
    runs.c.deadline_at,
    runs.c.deadline_missed_at,
    runs.c.schedule_id,
    runs.c.scheduled_for,
]


def _run(row: Any) -> Run:
    return Run.model_validate(dict(row._mapping))


class RunRepository:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        rng: random.Random,
        jobs: JobRepository,
        cold: ColdTier | None = None,
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._jobs = jobs
        self._cold = cold  # old windows of the listing read it (PostgreSQL)

    def rerun(self, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
        """A new run of what an ended run ran (its spec as submitted), linked to it — how a
        dead run leaves the dead-letter set — at its class within today's ``max_priority``."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            old = self._get(work.connection, tenant_id, run_id)
            job = self._jobs.get_many_within(work.connection, {(tenant_id, old.job_id)})
            job_class = job[tenant_id, old.job_id].spec.priority if job else None
            allowed = max_priority(work.connection, tenant_id)
            priority = rerun_priority(old.spec.priority, allowed, job_class)
            new_run_id = new_id("run", epoch_ms(work.now))
            changes = rerun(old, tenant_id, new_run_id, actor, work.now, priority=priority)
            work.apply(changes)
            (new,) = changes.new_runs
            return Run.model_validate(new_run_row(new, work.now) | {"spec": new.spec})

    def by_idempotency_key(self, tenant_id: str, key: str | None) -> Run:
        """The run made under this idempotency key (a submit's repeat answers with it)."""
        with self._db.read() as connection:
            row = connection.execute(
                select(*_RUN_COLUMNS).where(
                    runs.c.tenant_id == tenant_id, runs.c.idempotency_key == key
                )
            ).first()
        if row is None:  # only possible if a concurrent insert was rolled back
            raise Conflict(BEING_CREATED)
        return _run(row)

    def get(self, tenant_id: str, run_id: str) -> Run:
        with self._db.read() as connection:
            return self._get(connection, tenant_id, run_id)

    def _get(self, connection: Connection, tenant_id: str, run_id: str) -> Run:
        floor = visible_runs_floor(connection, tenant_id, self._clock.now())
        row = owned_row(
            connection,
            runs,
            tenant_id,
            run_id,
            "run",
            columns=_RUN_COLUMNS,
            where=[runs.c.id >= floor],
        )
        return _run(row)

    def detail(self, tenant_id: str, run_id: str) -> RunDetail:
        """The run with its attempts, history and output (which lists leave out: up to
        64 KiB a run); one past the hot window from the cold tier."""
        try:
            found = self._hot_detail(tenant_id, run_id)
        except NotFound:
            if (cold := self._cold_detail(tenant_id, run_id)) is None:
                raise
            found = cold
        with self._db.read() as connection:
            return with_actor_names(connection, tenant_id, found)

    def _cold_detail(self, tenant_id: str, run_id: str) -> RunDetail | None:
        if self._cold is None:
            return None
        now = self._clock.now()
        with self._db.read() as connection:
            floor = visible_runs_floor(connection, tenant_id, now)
        return cold_detail(self._cold, tenant_id, run_id, floor, now)

    def _hot_detail(self, tenant_id: str, run_id: str) -> RunDetail:
        with self._db.read() as connection:
            run = self._get(connection, tenant_id, run_id)
            output = connection.execute(select(runs.c.output).where(runs.c.id == run_id)).scalar()
            attempt_rows = (
                connection.execute(
                    select(attempts)
                    .where(attempts.c.run_id == run_id)
                    .order_by(attempts.c.number, attempts.c.rank)
                )
                .mappings()
                .all()
            )
            checkpoint = kept_checkpoints(connection, tenant_id, [run_id], self._clock.now())
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
            output=output,
            checkpoint=checkpoint.get(run_id),
        )

    def events(self, tenant_id: str, run_id: str) -> list[RunEvent]:
        return self.detail(tenant_id, run_id).events

    def list(self, tenant_id: str, query: RunQuery = RunQuery()) -> Page[Run]:
        page = query.page
        statement = select(*_RUN_COLUMNS).where(runs.c.tenant_id == tenant_id)
        if page.id_prefix is not None:
            # Escaped so that ``_`` (in every id) and ``%`` match only themselves.
            statement = statement.where(runs.c.id.startswith(page.id_prefix, autoescape=True))
        if query.job_id is not None:
            statement = statement.where(runs.c.job_id == query.job_id)
        if query.schedule_id is not None:
            # (schedule_id, scheduled_for) is indexed on both stores: the rows read are the
            # schedule's fires in the listing's window, one run each
            statement = statement.where(runs.c.schedule_id == query.schedule_id)
        if query.states:
            statement = statement.where(runs.c.state.in_([str(state) for state in query.states]))
        if query.since is not None:
            statement = statement.where(runs.c.created_at >= query.since)
        if query.until is not None:
            statement = statement.where(runs.c.created_at < query.until)
        now = self._clock.now()
        with self._db.read() as connection:
            floor = visible_runs_floor(connection, tenant_id, now)
            rows = newest_runs(connection, statement, floor, now, page)
        since = query.since
        if self._cold is not None and since is not None and since < self._cold.hot_since(now):
            # a window reaching before the hot window reads the cold tier too (slower)
            window = RunWindow(tenant_id, floor, since, query)
            return merged_page(self._cold, window, page_records(rows, _run), now)
        return page_from(rows, _run, page.limit)

    def cancel(self, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
        """Cancel a run. A run that is not running yet ends at once; a running one is marked
        and its workers, told through a notice, kill it."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._get(work.connection, tenant_id, run_id)
            (active,) = active_runs(work.connection, [run_id])
            work.apply(cancel(active, Cause(actor), work.now))
            return self._get(work.connection, tenant_id, run_id)

    def suspend(self, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
        """Hold a run until resumed. One not running yet is held at once, and the room it
        took under ``max_queued`` goes to a held run; a running one is marked and its
        workers, told through a notice, stop it as a preemption (``domain.lifecycle.suspend``)."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._get(work.connection, tenant_id, run_id)
            (active,) = active_runs(work.connection, [run_id])
            moved = work.apply(suspend(active, actor, work.now)).moved
            if moved and active.run.state is RunState.QUEUED:
                release_held(work, tenant_id, actor=RELEASER)
            return self._get(work.connection, tenant_id, run_id)

    def set_priority(
        self, tenant_id: str, run_id: str, priority: Priority, *, actor: str = "user"
    ) -> Run:
        """Move a run not started yet to another class, keeping its place in time."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._get(work.connection, tenant_id, run_id)
            set_priority(work.connection, tenant_id, run_id, priority, actor, work.now)
            return self._get(work.connection, tenant_id, run_id)

    def resume(self, tenant_id: str, run_id: str, *, actor: str = "user") -> Run:
        """Queue a suspended run again: held ``pending`` instead when its tenant is at
        ``max_queued``."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._get(work.connection, tenant_id, run_id)
            (active,) = active_runs(work.connection, [run_id])
            state = active.run.state
            room = queue_room(work, tenant_id) if state is RunState.SUSPENDED else UNLIMITED
            work.apply(resume(run_id, state, room, actor, work.now))
            return self._get(work.connection, tenant_id, run_id)
