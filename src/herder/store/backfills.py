"""Backfills of schedules (``domain.backfills``): created, read, cancelled, and moved on —
when created, and inside the unit of work that ends one of their runs."""

from __future__ import annotations

import random
from typing import Any

from sqlalchemy import Connection, select

from herder.clock import Clock, epoch_ms
from herder.domain.backfills import Backfill, BackfillRequest, BackfillState
from herder.domain.errors import Conflict, Invalid
from herder.domain.ids import new_id
from herder.domain.lifecycle.changes import Changes, NewBackfill, backfill_transition
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.store.backfill_steps import compiled, job_run_spec, step_backfill
from herder.store.database import Database
from herder.store.follow_ups import follow_up
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.schema import backfills, schedules
from herder.store.work import unit_of_work


def _backfill(row: Any) -> Backfill:
    return Backfill.model_validate(dict(row._mapping))


class BackfillRepository:
    def __init__(self, database: Database, clock: Clock, rng: random.Random) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng

    def create(self, tenant_id: str, schedule_id: str, request: BackfillRequest) -> Backfill:
        """Start backfilling: its first runs start in this same transaction."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            schedule = _schedule(work.connection, tenant_id, schedule_id)
            if request.end > work.now:
                raise Invalid(
                    "end is in the future: the schedule itself fires from now on", field="end"
                )
            _, _, spec = compiled(schedule)
            if schedule.job_id is not None:  # its runs must be able to start: 422 if not
                job_run_spec(work.connection, schedule, spec)
            backfill_id = new_id("bkf", epoch_ms(work.now))
            new = NewBackfill(
                backfill_id, tenant_id, schedule_id, request.start, request.end,
                request.max_active,
            )  # fmt: skip
            work.apply(Changes(new_backfills=(new,)))
            step_backfill(work, backfill_id)
            follow_up(work)  # what its starts touched (a run that ended at once), before reading
            return self._get(work.connection, tenant_id, backfill_id)

    def get(self, tenant_id: str, backfill_id: str) -> Backfill:
        with self._db.read() as connection:
            return self._get(connection, tenant_id, backfill_id)

    def list(
        self, tenant_id: str, schedule_id: str, *, page: PageRequest = PageRequest()
    ) -> Page[Backfill]:
        query = select(backfills).where(
            backfills.c.tenant_id == tenant_id, backfills.c.schedule_id == schedule_id
        )
        with self._db.read() as connection:
            _schedule(connection, tenant_id, schedule_id)
            return page_of(connection, query, backfills.c.id, _backfill, page)

    def cancel(self, tenant_id: str, backfill_id: str) -> Backfill:
        """No more starts; its runs already started go on (cancel them as runs)."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            backfill = self._get(work.connection, tenant_id, backfill_id)
            if backfill.state is not BackfillState.RUNNING:
                raise Conflict(f"backfill {backfill_id} is already {backfill.state}")
            cancel = backfill_transition(
                backfill_id, BackfillState.RUNNING, BackfillState.CANCELLED, work.now
            )
            work.apply(Changes(backfill_moves=(cancel,)))
            return self._get(work.connection, tenant_id, backfill_id)

    @staticmethod
    def _get(connection: Connection, tenant_id: str, backfill_id: str) -> Backfill:
        return _backfill(owned_row(connection, backfills, tenant_id, backfill_id, "backfill"))


def _schedule(connection: Connection, tenant_id: str, schedule_id: str) -> Any:
    return owned_row(connection, schedules, tenant_id, schedule_id, "schedule")
