"""Runs as users see them: read and listed (submitted by ``app.submit``; cancelled,
suspended, resumed, re-prioritised and re-run by ``app.runs``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from herder.clock import Clock
from herder.domain.errors import Conflict, NotFound
from herder.domain.listings import RunQuery
from herder.domain.models import Attempt, Page, Run, RunDetail, RunEvent
from herder.store.actors import with_actor_names
from herder.store.checkpoints import kept_checkpoints
from herder.store.cold.listing import RunWindow, cold_detail, merged_page
from herder.store.cold.tier import ColdTier
from herder.store.database import Database
from herder.store.history.listing import newest_made_by, newest_runs
from herder.store.history.retention import visible_runs_floor
from herder.store.owned import owned_row
from herder.store.pagination import next_cursor, page_from, page_records
from herder.store.runs.submissions import (
    BEING_CREATED,
)
from herder.store.schema import attempts, run_events, runs

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
    runs.c.created_by,
]


def _run(row: Any) -> Run:
    return Run.model_validate(dict(row._mapping))


def read_run(connection: Connection, tenant_id: str, run_id: str, now: datetime) -> Run:
    """The tenant's run as users see it (404 past its retention)."""
    floor = visible_runs_floor(connection, tenant_id, now)
    row = owned_row(
        connection, runs, tenant_id, run_id, "run", columns=_RUN_COLUMNS,
        where=[runs.c.id >= floor],
    )  # fmt: skip
    return _run(row)


class RunRepository:
    def __init__(self, database: Database, clock: Clock, cold: ColdTier | None = None) -> None:
        self._db = database
        self._clock = clock
        self._cold = cold  # old windows of the listing read it (PostgreSQL)

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
        return read_run(connection, tenant_id, run_id, self._clock.now())

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
        since = query.since
        cold = self._cold is not None and since is not None and since < self._cold.hot_since(now)
        creator = query.created_by
        if creator is not None and (cold or query.job_id or query.schedule_id):
            # narrowed by an index already (or read from the cold tier): filtered as it reads
            statement = statement.where(runs.c.created_by == creator)
            creator = None
        with self._db.read() as connection:
            floor = visible_runs_floor(connection, tenant_id, now)
            if creator is not None:
                rows, read_on = newest_made_by(connection, statement, creator, floor, now, page)
                return Page(
                    items=page_records(rows[: page.limit], _run),
                    next_cursor=read_on or next_cursor([row.id for row in rows], page.limit),
                )
            rows = newest_runs(connection, statement, floor, now, page)
        if self._cold is not None and since is not None and cold:
            # a window reaching before the hot window reads the cold tier too (slower)
            window = RunWindow(tenant_id, floor, since, query)
            return merged_page(self._cold, window, page_records(rows, _run), now)
        return page_from(rows, _run, page.limit)
