"""Runs as users see them: submit, read, list, cancel, suspend, resume, re-run."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, Invalid, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import Priority
from herder.domain.lifecycle.cancel import Cause, cancel, rerun
from herder.domain.lifecycle.changes import Changes, NewRun
from herder.domain.lifecycle.concurrency import admit, forbidden
from herder.domain.lifecycle.priority import check_allowed, rerun_priority
from herder.domain.lifecycle.suspend import resume, suspend
from herder.domain.listings import RunQuery
from herder.domain.models import Attempt, Job, Page, Run, RunDetail, RunEvent
from herder.domain.overrides import RunOverrides, RunRequest
from herder.domain.queue_room import RELEASER, UNLIMITED
from herder.domain.schedules import ConcurrencyPolicy
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
from herder.store.pools import check_usable, usable_pools
from herder.store.queue_room import queue_room, release_held
from herder.store.runs.debouncing import debounced
from herder.store.runs.facts import active_of_schedule, active_runs
from herder.store.runs.limit_rooms import by_limits
from herder.store.runs.priority import max_priority, set_priority
from herder.store.runs.submissions import (
    BEING_CREATED,
    Submitted,
    key_reused,
    new_or_refused,
    new_run,
    queue,
    runs_by_key,
    submitted,
)
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
            job = self._jobs.get_within(work.connection, tenant_id, job_id)
            check_usable(work.connection, tenant_id, {"pool": overrides.pool})
            if overrides.priority is not None:
                check_allowed(overrides.priority, max_priority(work.connection, tenant_id))
            request = RunRequest(job_id, overrides, idempotency_key)
            new = new_run(work.now, tenant_id, job, request, actor, as_schedule)
            folded = debounced(work.connection, [new], work.now, actor)
            joined = folded.joined.get(new.id)
            if joined is None:
                new, changes = _under_limits(work, folded.new_runs[0])
                if as_schedule is not None:
                    changes += self._admit(work, tenant_id, job.id, as_schedule)
                inserted = new.id in work.apply(changes).inserted
        if joined is not None:  # a debounce's waiting run stands for it
            return self.get(tenant_id, joined), False
        if inserted:
            return Run.model_validate(new_run_row(new, work.now) | {"spec": new.spec}), True
        existing = self._by_idempotency_key(tenant_id, idempotency_key)
        if existing.job_id != job_id:
            raise key_reused(idempotency_key, existing.id, existing.job_id)
        return existing, False

    def submit_many(
        self, tenant_id: str, requests: Sequence[RunRequest], *, actor: str = "user"
    ) -> list[Submitted]:
        """Many one-off runs in one unit of work: one read of their jobs, one insert, one
        notice. Each request stands alone — an unknown job or a reused key is its own
        answer and never holds back the others — and keys repeat as in ``submit``, within
        the batch too (the second of two equal keys answers with the first's run)."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            return self.submit_within(work, tenant_id, requests, actor=actor)

    def submit_within(
        self,
        work: Work,
        tenant_id: str,
        requests: Sequence[RunRequest],
        *,
        actor: str,
        jobs: Mapping[tuple[str, str], Job] | None = None,
    ) -> list[Submitted]:
        """``submit_many`` inside a caller's unit of work (an event's triggers start their
        runs in the transaction that records the event); ``jobs``: the requests' jobs by
        (tenant, id), when the caller read them already."""
        found = jobs or self._jobs.get_many_within(
            work.connection, {(tenant_id, request.job_id) for request in requests}
        )
        named = {one.overrides.pool for one in requests if one.overrides.pool is not None}
        usable = usable_pools(work.connection, tenant_id, named)
        allowed = max_priority(work.connection, tenant_id)
        new_runs = [
            new_or_refused(work.now, tenant_id, found.get((tenant_id, request.job_id)),
                           request, actor, usable, allowed)
            for request in requests
        ]  # fmt: skip
        folded = debounced(
            work.connection, [new for new in new_runs if isinstance(new, NewRun)], work.now,
            actor,
        )  # fmt: skip
        limited = by_limits(work.connection, folded.new_runs, work.now)
        admitted = {new.id: new for new in limited.new_runs}
        new_runs = [
            new
            if not isinstance(new, NewRun) or new.id in folded.joined
            else limited.refusal(new.id) or admitted[new.id]
            for new in new_runs
        ]
        queued = [
            new for new in new_runs if isinstance(new, NewRun) and new.id not in folded.joined
        ]
        inserted = work.apply(queue(queued) + limited.changes).inserted
        repeated = runs_by_key(
            work.connection,
            tenant_id,
            {new.idempotency_key for new in queued if new.id not in inserted},
        )
        return [
            Submitted(folded.joined[new.id], False)  # a debounce's waiting run stands for it
            if isinstance(new, NewRun) and new.id in folded.joined
            else submitted(request, new, inserted, repeated)
            for request, new in zip(requests, new_runs, strict=True)
        ]

    @staticmethod
    def _admit(work: Work, tenant_id: str, job_id: str, schedule_id: str) -> Changes:
        """The schedule's concurrency policy, for a manual run that counts as its own."""
        schedule = owned_row(
            work.connection,
            schedules,
            tenant_id,
            schedule_id,
            "schedule",
            columns=[schedules.c.job_id, schedules.c.spec],
        )
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
            raise forbidden(schedule_id, blocking.id, blocking.state)
        record_replaced(work, schedule_id, admission.replaced)
        return admission.changes

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

    def _by_idempotency_key(self, tenant_id: str, key: str | None) -> Run:
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


def _under_limits(work: Work, new: NewRun) -> tuple[NewRun, Changes]:
    """A one-off run under its limits' strategies (``runs.limit_rooms``): the run to insert
    (cancelled by ``cancel_newest``) and what it changes; 409 where ``drop`` makes none."""
    limited = by_limits(work.connection, [new], work.now)
    refusal = limited.refusal(new.id)
    if refusal is not None:
        raise refusal
    return limited.new_runs[0], queue(limited.new_runs) + limited.changes
