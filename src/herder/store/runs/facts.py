"""Reading what lifecycle decisions need — inside the unit of work that applies them, the
runs locked first, so the facts still hold when the changes are written.

Lock order: everyone who ends attempts locks their runs first, in id order (run, then
attempts), so gang members ending together, or two batches, cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, or_, select

from herder.domain.jobs import RetryPolicy
from herder.domain.lifecycle.cancel import Cancellable
from herder.domain.lifecycle.facts import ActiveRun, AttemptFacts, RunFacts
from herder.domain.states import SLOT_HOLDING_RUN_STATES, AttemptState, RunState
from herder.store.dialect import Among
from herder.store.history.live import live_floor
from herder.store.schema import attempts, runs

_RUN_FACTS = (
    runs.c.id, runs.c.state, runs.c.attempt_count, runs.c.replicas, runs.c.preemptions,
    runs.c.cancel_requested, runs.c.suspend_requested, runs.c.suspensions, runs.c.spec,
    runs.c.workflow_run_id, runs.c.backfill_id, runs.c.started_at, runs.c.queued_at,
)  # fmt: skip
ATTEMPT_FACTS = (
    attempts.c.id, attempts.c.run_id, attempts.c.number, attempts.c.worker_id,
    attempts.c.state, attempts.c.preempt_requested_at, attempts.c.preempt_reason, attempts.c.rank,
)  # fmt: skip


def run_facts(row: Any) -> RunFacts:
    return RunFacts(
        id=row.id,
        state=RunState(row.state),
        attempt=row.attempt_count,
        replicas=row.replicas,
        preemptions=row.preemptions,
        cancel_requested=row.cancel_requested,
        suspend_requested=row.suspend_requested,
        suspensions=row.suspensions,
        retry=RetryPolicy.model_validate((row.spec or {}).get("retry", {})),
        workflow_run_id=row.workflow_run_id,
        backfill_id=row.backfill_id,
        started_at=row.started_at,
        queued_at=row.queued_at,
    )


def attempt_facts(row: Any) -> AttemptFacts:
    return AttemptFacts(
        id=row.id,
        run_id=row.run_id,
        number=row.number,
        worker_id=row.worker_id,
        state=AttemptState(row.state),
        preempt_requested=row.preempt_requested_at is not None,
        preempt_reason=row.preempt_reason,
        rank=row.rank,
    )


def lock_runs(
    connection: Connection, run_ids: Collection[str] | Select[tuple[str]]
) -> dict[str, RunFacts]:
    """Lock these runs (ids, or a query of them) in id order; their facts."""
    if not isinstance(run_ids, Select) and not run_ids:
        return {}
    wanted = run_ids if isinstance(run_ids, Select) else sorted(run_ids)
    rows = connection.execute(
        select(*_RUN_FACTS)
        .where(runs.c.id.in_(wanted))
        .order_by(runs.c.id)
        .with_for_update(key_share=True)
    ).all()
    return {row.id: run_facts(row) for row in rows}


def facts_of_attempts(
    connection: Connection, attempt_ids: Collection[str], now: datetime, *, lock: bool = True
) -> tuple[dict[str, RunFacts], dict[str, AttemptFacts]]:
    """The named attempts (in whatever state), their runs (locked), and every running
    member of those runs' attempts. An attempt of a run older than every live run is not
    looked for (it is answered as unknown): the slices before the live floor are pruned."""
    if not attempt_ids:
        return {}, {}
    live = attempts.c.run_id >= live_floor(connection, now)
    owners = select(attempts.c.run_id).where(attempts.c.id.in_(attempt_ids), live)
    found = lock_runs(connection, owners) if lock else _runs(connection, owners)
    rows = connection.execute(
        select(*ATTEMPT_FACTS).where(
            live,
            or_(
                attempts.c.id.in_(attempt_ids),
                attempts.c.run_id.in_(list(found)) & (attempts.c.state == AttemptState.RUNNING),
            ),
        )
    ).all()
    return found, {row.id: attempt_facts(row) for row in rows}


def _runs(connection: Connection, run_ids: Select[tuple[str]]) -> dict[str, RunFacts]:
    rows = connection.execute(select(*_RUN_FACTS).where(runs.c.id.in_(run_ids))).all()
    return {row.id: run_facts(row) for row in rows}


def active_runs(connection: Connection, run_ids: Collection[str]) -> list[ActiveRun]:
    """These runs (locked) with the running members of their current attempts."""
    found = lock_runs(connection, run_ids)
    members: dict[str, list[AttemptFacts]] = {run_id: [] for run_id in found}
    running = [run_id for run_id, run in found.items() if run.state is RunState.RUNNING]
    if running:
        rows = connection.execute(
            select(*ATTEMPT_FACTS).where(
                attempts.c.run_id.in_(running), attempts.c.state == AttemptState.RUNNING
            )
        ).all()
        for row in rows:
            members[row.run_id].append(attempt_facts(row))
    return [ActiveRun(found[run_id], tuple(members[run_id])) for run_id in sorted(found)]


SLOT_HOLDING_STATES = [str(state) for state in SLOT_HOLDING_RUN_STATES]


def cancellable_runs(
    connection: Connection, run_ids: Select[tuple[str]]
) -> tuple[list[Cancellable], set[str]]:
    """The runs of a set cancelled at once (a query of their ids), locked in id order, and
    the workers running any of them: only the columns the cancel reads, whatever the set."""
    rows = connection.execute(
        select(runs.c.id, runs.c.state, runs.c.attempt_count, runs.c.cancel_requested)
        .where(runs.c.id.in_(run_ids))
        .order_by(runs.c.id)
        .with_for_update(key_share=True)
    ).all()
    found = [
        Cancellable(row.id, RunState(row.state), row.attempt_count, row.cancel_requested)
        for row in rows
    ]
    running = [run.id for run in found if run.state is RunState.RUNNING]
    return found, workers_running(connection, running)


def workers_running(connection: Connection, run_ids: Collection[str]) -> set[str]:
    """The workers running an attempt of any of ``run_ids``: those a set's stop notifies."""
    if not run_ids:
        return set()
    workers = connection.execute(
        select(attempts.c.worker_id).where(
            attempts.c.run_id.in_(run_ids), attempts.c.state == AttemptState.RUNNING
        )
    ).scalars()
    return set(workers)


def active_of_schedule(connection: Connection, schedule_id: str) -> list[ActiveRun]:
    """The schedule's runs that hold its slot (locked), for its concurrency policy."""
    return active_of_schedules(connection, [schedule_id]).get(schedule_id, [])


def active_of_schedules(
    connection: Connection, schedule_ids: Collection[str]
) -> dict[str, list[ActiveRun]]:
    """Each schedule's runs that hold its slot — not ended, not suspended — (all locked at
    once, in id order), for a batch of fires under their concurrency policies; a schedule
    without any is left out."""
    if not schedule_ids:
        return {}
    rows = connection.execute(
        select(runs.c.id, runs.c.schedule_id).where(
            runs.c.schedule_id.in_(list(schedule_ids)), runs.c.state.in_(SLOT_HOLDING_STATES)
        )
    )
    owners: dict[str, str] = {run_id: schedule_id for run_id, schedule_id in rows}
    active: dict[str, list[ActiveRun]] = {}
    for run in active_runs(connection, list(owners)):
        active.setdefault(owners[run.run.id], []).append(run)
    return active


def owners_of(
    connection: Connection, run_ids: Collection[str]
) -> list[tuple[str, str | None, str | None]]:
    """Each of these runs with its workflow run and backfill (either may be None): one query
    a batch (a fan-out's cancel ends many at once)."""
    among = Among(connection.dialect.name, runs.c.id, "run_ids")
    owned = select(runs.c.id, runs.c.workflow_run_id, runs.c.backfill_id).where(among.condition)
    return [
        (run_id, workflow_run_id, backfill_id)
        for batch in among.batches(sorted(run_ids))
        for run_id, workflow_run_id, backfill_id in connection.execute(owned, batch)
    ]
