"""A user's moves on a backfill of a schedule (``domain.backfills``): created — its first
runs start in the same unit of work (``follow_ups.step_backfill``) — and cancelled."""

from __future__ import annotations

from herder.app.follow_ups import follow_up
from herder.app.work import unit_of_work
from herder.clock import epoch_ms
from herder.domain.backfills import Backfill, BackfillRequest, BackfillState
from herder.domain.errors import Conflict, Invalid
from herder.domain.ids import new_id
from herder.domain.lifecycle.changes import Changes, NewBackfill, backfill_transition
from herder.store.backfill_steps import compiled, job_run_spec
from herder.store.backfills import read_backfill, schedule_row
from herder.store.store import Store


def create(store: Store, tenant_id: str, schedule_id: str, request: BackfillRequest) -> Backfill:
    """Start backfilling: its first runs start in this same transaction."""
    with unit_of_work(store) as work:
        schedule = schedule_row(work.connection, tenant_id, schedule_id)
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
        work.follow(backfill=backfill_id)
        follow_up(work)  # its first runs start (and what they touch), before reading
        return read_backfill(work.connection, tenant_id, backfill_id)


def cancel(store: Store, tenant_id: str, backfill_id: str) -> Backfill:
    """No more starts; its runs already started go on (cancel them as runs)."""
    with unit_of_work(store) as work:
        backfill = read_backfill(work.connection, tenant_id, backfill_id)
        if backfill.state is not BackfillState.RUNNING:
            raise Conflict(f"backfill {backfill_id} is already {backfill.state}")
        cancel = backfill_transition(
            backfill_id, BackfillState.RUNNING, BackfillState.CANCELLED, work.now
        )
        work.apply(Changes(backfill_moves=(cancel,)))
        return read_backfill(work.connection, tenant_id, backfill_id)
