"""A report's hand-off, the store's side (``app.hand_off``): the worker that reported, held
under its lock with what it runs, and the runs its report queued that it may take; then those
the policy placed there started, in the report's own transaction.

Each fact is read once. First the head of the queue: at most one run more than the report
queued, with their tenants and budgets — a run there that the report did not queue means
others wait, and the dispatcher decides then, in queue order. Then the worker's row, locked
without waiting (``FOR UPDATE SKIP LOCKED`` on PostgreSQL: a worker another placer holds is
left to it, as the report holds its runs' rows and that placer may wait on them; SQLite's one
writer holds everything), and the attempts it runs in a statement of its own, begun once the
lock is held (``placing._lock_and_measure`` says why not one join); the pools' selectors come
with the worker's row. The one-worker snapshot and the room placing takes from are both made
of that read. A run of a pool, with a limit key
or of a tenant with an in-use quota is the dispatcher's: nothing of those is measured here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, Text, bindparam, cast, func, select

from herder.domain.models import WorkerState
from herder.domain.placement.policy import Placement
from herder.domain.placement.recheck import binds_in_use
from herder.domain.placement.snapshot import QueuedRun, Snapshot, TenantView
from herder.domain.pools import PoolSelectors
from herder.domain.states import RunState
from herder.store.database import Database
from herder.store.history.live import live_floor
from herder.store.notifications import handed_off
from herder.store.runs.placing import (
    STOP_GRACE_SECONDS,
    TIMEOUT_SECONDS,
    Room,
    RunToPlace,
    start_fitting,
)
from herder.store.runs.settings import quotas_of, selectors_of
from herder.store.runs.snapshot import (
    QUEUED_COLUMNS,
    RUNNING,
    WORKER_COLUMNS,
    queued_run,
    running_attempt,
    worker_view,
)
from herder.store.schema import attempts, pools, runs, tenant_budgets, tenants, workers
from herder.store.unit import Work
from herder.store.usage import budgets_of, read_use_of
from herder.telemetry import metrics, traces, tracing

HAND_OFF = "hand-off"  # who placed a run, in its events


@dataclass(frozen=True)
class HeldWorker:
    """The worker a hand-off places on, locked, and what placing there needs."""

    snapshot: Snapshot  # that worker alone, and the runs a hand-off may place there
    room: Room  # its free capacity: its own less what its attempts hold
    runs: Mapping[str, RunToPlace]  # the snapshot's runs, as starting them needs


class HandOffRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def hold(self, work: Work, worker_id: str, run_ids: Sequence[str]) -> HeldWorker | None:
        """The worker that reported, locked when no other placer holds it, alive and in the
        shared fleet, with those of ``run_ids`` (queued by ``work``) it may take: none while
        any other run is queued or the worker cannot be held (None)."""
        return _hold(work.connection, work.now, worker_id, set(run_ids))

    def place(
        self, work: Work, held: HeldWorker, placements: Sequence[Placement]
    ) -> list[Placement]:
        """Start what fits in the held worker's room, in ``work``'s transaction."""
        (worker,) = held.snapshot.workers
        room = {worker.id: held.room}
        placed = start_fitting(
            work.connection, placements, room, held.runs, work.now, actor=HAND_OFF
        )
        work.after_commit.append(lambda: metrics.runs_placed(work.now, placed.waits))
        if tracing.enabled():
            traced = placed.traced(work.now, HAND_OFF)
            work.after_commit.append(lambda: traces.runs_placed(traced, {}))
        return placed.placements

    def nothing_left_to_place(self, work: Work, worker_id: str) -> None:
        """What ``work`` queued was all placed on the worker, and nothing else waits: the
        dispatcher need not wake for it (``notifications.handed_off``)."""
        handed_off(self._db, work.connection, worker_id)


def _hold(
    connection: Connection, now: datetime, worker_id: str, run_ids: set[str]
) -> HeldWorker | None:
    floor = live_floor(connection, now)
    head = connection.execute(_QUEUE_HEAD, {"live_floor": floor, "count": len(run_ids) + 1})
    rows = head.all()
    if any(row.id not in run_ids for row in rows):
        return None  # others wait
    locked = connection.execute(_lock(connection.dialect.name), {"worker_id": worker_id}).first()
    if locked is None:
        return None  # held by another placer, draining, lost or gone
    running = connection.execute(_RUNNING_THERE, {"worker_id": worker_id, "live_floor": floor})
    worker = worker_view(locked[:-1], [running_attempt(row) for row in running.all()])
    selectors = PoolSelectors(selectors_of(json.loads(locked[-1] or "[]")))
    if selectors and selectors.pool_of(worker.labels) is not None:
        return None  # a pool's worker: the placer of its pool decides
    tenant_views = {
        row.tenant_id: TenantView(
            row.tenant_id, row.weight, quotas_of(row.quotas), row.default_pool
        )
        for row in rows
        if row.tenant_known is not None
    }
    handed = {
        run.id: run
        for run in (queued_run(row[: len(QUEUED_COLUMNS)], tenant_views) for row in rows)
        if _may_hand_off(run, tenant_views)
    }
    if not handed:
        return None
    budgeted = {
        row.tenant_id: budgets_of(row.time_zone, row.budgets)
        for row in rows
        if row.id in handed and row.time_zone is not None
    }
    room = Room.whole(worker.capacity)
    for attempt in worker.running:
        room.hold(attempt.need, attempt.gpu_indices)
    snapshot = Snapshot(
        now=now,
        queued=tuple(handed.values()),
        workers=(worker,),
        tenants=tenant_views,
        budgets=read_use_of(connection, now, budgeted, None),
    )
    to_place = {row.id: RunToPlace.of(row) for row in rows if row.id in handed}
    return HeldWorker(snapshot, room, to_place)


def _may_hand_off(run: QueuedRun, tenant_views: Mapping[str, TenantView]) -> bool:
    """What one worker's view can judge: a run of the shared fleet, with no limit key and no
    debounce, of a known tenant without in-use quotas."""
    tenant = tenant_views.get(run.tenant_id)
    return (
        run.pool is None
        and not run.limit_keys
        and run.not_before is None
        and tenant is not None
        and not binds_in_use(tenant.quotas)
    )


# The queue's head, in no order: at most ``count`` queued runs, each with what placing it
# needs, its tenant (``tenant_known`` None: none such) and its tenant's budgets, if any.
_QUEUE_HEAD = (
    select(
        *QUEUED_COLUMNS, TIMEOUT_SECONDS, STOP_GRACE_SECONDS,
        tenants.c.id.label("tenant_known"), tenants.c.weight,
        cast(tenants.c.quotas, Text).label("quotas"), tenants.c.default_pool,
        tenant_budgets.c.time_zone, tenant_budgets.c.budgets,
    )
    .select_from(
        runs.outerjoin(tenants, tenants.c.id == runs.c.tenant_id).outerjoin(
            tenant_budgets, tenant_budgets.c.tenant_id == runs.c.tenant_id
        )
    )
    .where(runs.c.state == RunState.QUEUED, runs.c.id >= bindparam("live_floor"))
    .limit(bindparam("count"))
)  # fmt: skip


@functools.cache
def _lock(dialect: str) -> Select[Any]:
    """The worker's row locked without waiting, if it is alive, with every pool's (name,
    selector) as JSON text (which pool it is in: the pools read with it, not on their own)."""
    if dialect == "postgresql":
        pairs = func.jsonb_agg(func.jsonb_build_array(pools.c.name, pools.c.selector))
    else:
        pairs = func.json_group_array(func.json_array(pools.c.name, func.json(pools.c.selector)))
    return (
        select(*WORKER_COLUMNS, select(cast(pairs, Text)).scalar_subquery())
        .where(workers.c.id == bindparam("worker_id"), workers.c.state == WorkerState.ALIVE)
        .with_for_update(of=workers, skip_locked=True)
    )


_RUNNING_THERE = RUNNING.where(attempts.c.worker_id == bindparam("worker_id"))
