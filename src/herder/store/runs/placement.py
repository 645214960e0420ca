"""The dispatcher's side of the store: read a placement snapshot, apply a plan atomically
(the placing itself, under the workers' locks and with quotas and keys measured again, is
``runs.placing``). Its statements take any number of runs or workers as one parameter."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, select, update

from herder.clock import Clock
from herder.domain.lifecycle.changes import Event, NoticeKind, notices
from herder.domain.placement import timeline
from herder.domain.placement.partitions import Partition
from herder.domain.placement.policy import Placement, Plan, Preemption
from herder.domain.placement.snapshot import RunningAttempt, Snapshot, WorkerView
from herder.domain.states import AttemptState, RunState
from herder.store.database import Database
from herder.store.dialect import set_each, update_each
from herder.store.limit_use import with_limits
from herder.store.notifications import CANCEL, CAPACITY, HANDED, WORKER_CHANNEL, send
from herder.store.runs.placing import place
from herder.store.runs.settings import KeptSettings
from herder.store.runs.snapshot import (
    QUEUE_WINDOW,
    TENANT_QUEUE_WINDOW,
    WHOLE,
    any_limit,
    read_snapshot,
)
from herder.store.runs.writes import record_events
from herder.store.schema import attempts, runs
from herder.telemetry import metrics, tracing
from herder.telemetry.traces import PlacedRun

DISPATCHER = "dispatcher"  # who placed a run, in its events


@dataclass(frozen=True)
class Applied:
    placed: list[Placement]
    skipped: list[str]  # run ids whose placement no longer fit or that were no longer queued
    preempted: list[Preemption]
    started: dict[str, list[RunningAttempt]]  # by worker id: the attempts placed, as read back
    traced: list[PlacedRun]  # tracing on: the runs placed, for their placement spans


class PlacementRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock
        self._any_limit: bool | None = None  # whether any limit exists, as last read
        self._settings = KeptSettings()  # tenants, pools, budgets: read again when changed

    def snapshot(
        self,
        window: int = QUEUE_WINDOW,
        per_tenant: int = TENANT_QUEUE_WINDOW,
        *,
        quick: bool = False,
        fleet: Sequence[WorkerView] | None = None,
        changed: Collection[str] = (),
        partition: Partition = WHOLE,
    ) -> Snapshot:
        """The fleet, the tenants and the head of the queue (of ``partition``'s pools);
        given an earlier snapshot's ``fleet``, only the ``changed`` workers are read again
        (``snapshot.read_snapshot``)."""
        with self._db.read() as connection:
            if not quick or self._any_limit is None:  # a quick pass goes by the last full one
                self._any_limit = any_limit(connection)
            snapshot = read_snapshot(
                connection, self._clock.now(), window, per_tenant,
                quick=quick, fleet=fleet, changed=changed, by_key=self._any_limit,
                partition=partition, settings=self._settings.read,
            )  # fmt: skip
            return with_limits(connection, snapshot)

    def on_worker_notice(self, heard: Callable[[str], None]) -> None:
        """Call ``heard(worker_id)`` for each notice this process hears, after its commit,
        that something on a worker stopped or is stopping: capacity freed (or freed and
        handed off), a cancel or a preemption. (Work assigned is the dispatcher's own doing:
        it holds the lease.) For as long as the store lives."""

        def hear(channel: str, payload: str) -> None:
            kind, _, worker_id = payload.partition(":")
            if channel == WORKER_CHANNEL and kind in (CAPACITY, CANCEL, HANDED):
                heard(worker_id)

        self._db.subscribe(hear)

    def apply(self, plan: Plan, reasons: Mapping[str, str] | None = None) -> Applied:
        """Place and preempt what still fits, and store the waiting reasons that changed
        (only for runs still queued), in one transaction of a few statements."""
        now = self._clock.now()
        with self._db.write() as connection:
            placed = place(connection, plan.placements, now, actor=DISPATCHER)
            preempted = _request_preemptions(connection, plan.preemptions, now)
            _record_reasons(connection, reasons)
            send(
                self._db,
                connection,
                notices(NoticeKind.CANCEL, {p.worker_id for p in preempted})
                | notices(NoticeKind.ASSIGNED, placed.workers),
            )
        metrics.runs_placed(now, placed.waits)
        metrics.preemptions(timeline.cause_kind(p.cause) for p in preempted)
        placed_ids = {placement.run_id for placement in placed.placements}
        skipped = [p.run_id for p in plan.placements if p.run_id not in placed_ids]
        traced = placed.traced(now, DISPATCHER) if tracing.enabled() else []
        return Applied(placed.placements, skipped, preempted, placed.attempts, traced)


def _record_reasons(connection: Connection, reasons: Mapping[str, str] | None) -> None:
    still_queued = update(runs).where(runs.c.state == RunState.QUEUED)
    set_each(connection, still_queued, runs.c.id, runs.c.waiting_reason, reasons or {})


_PREEMPT = (
    update(attempts)
    .where(
        attempts.c.id == bindparam("p_id"),
        attempts.c.state == AttemptState.RUNNING,
        attempts.c.preempt_requested_at.is_(None),
    )
    .values(preempt_requested_at=bindparam("p_now"), preempt_reason=bindparam("p_reason"))
    .returning(attempts.c.id)
)


def _request_preemptions(
    connection: Connection, preemptions: Sequence[Preemption], now: datetime
) -> list[Preemption]:
    """Mark each victim, with why, unless it is no longer running or already being
    preempted; the preemptions that held, each recorded in its run's events."""
    rows = [
        {"p_id": p.attempt_id, "p_now": now, "p_reason": timeline.stop_reason(p.cause)}
        for p in preemptions
    ]
    chosen = set(update_each(connection, _PREEMPT, rows))
    held = [p for p in preemptions if p.attempt_id in chosen]
    numbers: dict[str, int] = {}
    if chosen:  # rare: a few a pass at most
        found = select(attempts.c.id, attempts.c.number).where(attempts.c.id.in_(sorted(chosen)))
        numbers = {row.id: row.number for row in connection.execute(found)}
    record_events(
        connection,
        now,
        [
            Event(
                p.run_id,
                timeline.stopping(p.cause, numbers[p.attempt_id], p.worker_id),
                DISPATCHER,
                attempt=numbers[p.attempt_id],
            )
            for p in held
        ],
    )
    return held
