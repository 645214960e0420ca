"""What the dispatcher reads for a pass: the fleet with what each worker runs, the tenants,
and the head of the queue — every tenant's first runs by class and age, so one tenant's
backlog never pushes the others out of sight.

The fleet is the big part (a full fleet runs thousands of attempts) and changes a few
workers at a time, so a dispatcher may hand back the workers it read before and name the
ones that changed since: only those are read again. The statements are built once, their
limits bound as parameters.
"""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from sqlalchemy import Connection, Select, Text, and_, bindparam, cast, func, or_, select, true

from herder.domain.lifecycle.stops import can_be_victim
from herder.domain.models import WorkerState
from herder.domain.placement.partitions import Held, Partition
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import (
    QueuedRun,
    RunningAttempt,
    Snapshot,
    TenantView,
    WorkerView,
)
from herder.domain.pools import PoolSelectors
from herder.domain.states import AttemptState, RunState
from herder.store.dialect import Among
from herder.store.history.live import live_floor
from herder.store.limit_use import limit_keys_of
from herder.store.runs.settings import Settings, read_pools, read_settings
from herder.store.schema import attempts, limits, runs, tenants, workers
from herder.store.usage import read_use_of

QUEUE_WINDOW = 20_000  # queued runs one pass looks at, in priority-then-age order
TENANT_QUEUE_WINDOW = 2_000  # of them at most this many per tenant: a backlog cannot hide others
KEY_QUEUE_WINDOW = 500  # and per set of limit keys: one key's backlog cannot hide other keys
QUICK_WINDOW_BASE = 64  # a quick snapshot reads this many queued runs plus a few per free slot
WHOLE = Partition()  # placement not partitioned: every pool, the shared fleet


def read_snapshot(
    connection: Connection,
    now: datetime,
    window: int = QUEUE_WINDOW,
    per_tenant: int = TENANT_QUEUE_WINDOW,
    *,
    quick: bool = False,
    fleet: Sequence[WorkerView] | None = None,
    changed: Collection[str] = (),
    by_key: bool | None = None,
    partition: Partition = WHOLE,
    settings: Callable[[Connection], Settings] = read_settings,
) -> Snapshot:
    """The fleet, the tenants and the head of the queue. A ``quick`` snapshot reads only as
    much of the queue as the fleet's free slots could take (a few times over), which is what
    a pass right after a submit or a completion needs. Given ``fleet`` (the workers of an
    earlier snapshot), only the ``changed`` workers are read again. ``by_key``: whether to
    window the queue by limit keys too (None: when any limit exists). ``partition``: only its
    pools' workers and queued runs (``domain.placement.partitions``). ``settings``: how the
    tenants, pools and budgets are read once the queue has been (a dispatcher's are kept
    while unchanged: ``settings.KeptSettings``); the budgeted tenants' use comes with them."""
    workers_now = read_fleet(connection, fleet, changed, now)
    held: Held | None = None
    pools_read = None if partition.whole else read_pools(connection)
    if pools_read is not None:  # every worker is seen (its runs count against quotas and
        pools, selectors = pools_read  # keys), but only the partition's are placed onto
        held = partition.held(pools)
        workers_now = in_pools(workers_now, selectors)
    if quick:
        free = _free_slots(w for w in workers_now if held is None or held.holds(w.pool))
        window = min(window, QUICK_WINDOW_BASE + 4 * free)
        per_tenant = min(per_tenant, QUICK_WINDOW_BASE + 2 * free)
    floor = live_floor(connection, now)
    within = {} if held is None else _held_bounds(held)
    bounds = {"window": window, "per_tenant": per_tenant, "live_floor": floor, **within}
    by_key = any_limit(connection) if by_key is None else by_key
    window_read = _queue_window(by_key=by_key, partitioned=held is not None)
    queue = list(connection.execute(window_read, bounds).all())
    # and the longest-waiting, whatever their class, so aging never stalls — unless the
    # window already holds the whole queue
    if quick and not _whole_queue(queue, window, per_tenant):
        seen = {row.id for row in queue}
        bounds = {"count": QUICK_WINDOW_BASE, "live_floor": floor, **within}
        oldest = connection.execute(_oldest_queued(partitioned=held is not None), bounds).all()
        queue += [row for row in oldest if row.id not in seen]
    read = settings(connection)  # after the queue: see ``settings``
    budgets = read_use_of(connection, now, read.budgets, None)
    if not queue:  # nothing to place or to preempt for: the fleet as it is (pools included)
        return Snapshot(
            now=now, queued=(), workers=workers_now, tenants={}, pools={}, partition=held,
            budgets=budgets,
        )  # fmt: skip
    pools, selectors = pools_read or (read.pools, read.selectors)
    return Snapshot(
        now=now,
        queued=tuple(queued_run(row, read.tenants) for row in queue),
        workers=in_pools(workers_now, selectors),
        tenants=read.tenants,
        pools=pools,
        partition=held,
        budgets=budgets,
    )


def in_pools(fleet: Sequence[WorkerView], selectors: PoolSelectors) -> tuple[WorkerView, ...]:
    """The workers, each knowing its pool by the selectors read now (a kept view whose
    pool changed is replaced; the others are kept as they are)."""
    placed = []
    for worker in fleet:
        pool = selectors.pool_of(worker.labels) if selectors else None
        placed.append(worker if worker.pool == pool else replace(worker, pool=pool))
    return tuple(placed)


def read_fleet(
    connection: Connection,
    known: Sequence[WorkerView] | None,
    changed: Collection[str],
    now: datetime,
) -> tuple[WorkerView, ...]:
    """Every worker not lost, with what it runs, in id order: all read afresh, or the
    ``known`` ones with only the ``changed`` ones read again (gone if lost)."""
    floor = live_floor(connection, now)
    if known is None:
        return _read_workers(connection, None, floor)
    if not changed:
        return tuple(known)
    fresh = {worker.id: worker for worker in _read_workers(connection, sorted(changed), floor)}
    kept = [fresh.pop(w.id, w) for w in known if w.id not in changed or w.id in fresh]
    if not fresh:
        return tuple(kept)
    return tuple(sorted([*kept, *fresh.values()], key=lambda worker: worker.id))


def _read_workers(
    connection: Connection, worker_ids: Sequence[str] | None, floor: str
) -> tuple[WorkerView, ...]:
    rows: list[Any] = []
    running: list[Any] = []
    if worker_ids is None:
        rows = list(connection.execute(_WORKERS).all())
        running = list(connection.execute(RUNNING, {"live_floor": floor}).all())
    else:
        named = _named_workers(connection.dialect.name)
        for params in named.workers_among.batches(worker_ids):
            rows += connection.execute(named.workers, params).all()
        for params in named.running_among.batches(worker_ids, live_floor=floor):
            running += connection.execute(named.running, params).all()
    by_worker: dict[str, list[RunningAttempt]] = defaultdict(list)
    for row in running:
        by_worker[row.worker_id].append(running_attempt(row))
    rows.sort(key=lambda row: row.id)
    return tuple(worker_view(row, by_worker.get(row.id, ())) for row in rows)


def _whole_queue(window_rows: Sequence[Any], window: int, per_tenant: int) -> bool:
    """Whether the queue window came back short of both its limits: then it is the queue."""
    by_tenant = Counter(row.tenant_id for row in window_rows)
    return len(window_rows) < window and all(n < per_tenant for n in by_tenant.values())


def _free_slots(fleet: Iterable[WorkerView]) -> int:
    return sum(
        max(0, worker.capacity.slots - len(worker.running))
        for worker in fleet
        if not worker.draining
    )


WORKER_COLUMNS = (
    workers.c.id, workers.c.cpu_milli, workers.c.memory_mb, workers.c.gpus, workers.c.max_slots,
    workers.c.labels, workers.c.address, workers.c.state,
)  # fmt: skip
_WORKERS = select(*WORKER_COLUMNS).where(workers.c.state != WorkerState.LOST)

RUNNING = (  # every running attempt, with what placement needs of its run
    select(
        attempts.c.worker_id, attempts.c.id, attempts.c.run_id, attempts.c.cpu_milli,
        attempts.c.memory_mb, attempts.c.gpus, attempts.c.started_at, attempts.c.gpu_indices,
        attempts.c.preempt_requested_at, runs.c.tenant_id, runs.c.priority,
        runs.c.preemptible, runs.c.preempted_at, runs.c.cancel_requested,
        runs.c.suspend_requested, attempts.c.borrowed,
        cast(runs.c.limit_keys, Text).label("limit_keys"),
    )
    .join(runs, runs.c.id == attempts.c.run_id)
    .where(
        attempts.c.state == AttemptState.RUNNING,
        attempts.c.run_id >= bindparam("live_floor"),
        runs.c.id >= bindparam("live_floor"),
    )
)  # fmt: skip


@dataclass(frozen=True)
class _NamedWorkers:
    """The two fleet statements for a list of workers, built once per dialect."""

    workers_among: Among
    workers: Select[Any]
    running_among: Among
    running: Select[Any]


@functools.cache
def _named_workers(dialect: str) -> _NamedWorkers:
    workers_among = Among(dialect, workers.c.id, "worker_ids")
    running_among = Among(dialect, attempts.c.worker_id, "worker_ids")
    return _NamedWorkers(
        workers_among,
        _WORKERS.where(workers_among.condition),
        running_among,
        RUNNING.where(running_among.condition),
    )


QUEUED_COLUMNS = (
    runs.c.id, runs.c.tenant_id, runs.c.priority, runs.c.queued_at, runs.c.cpu_milli,
    runs.c.memory_mb, runs.c.gpus, runs.c.replicas,
    cast(runs.c.requires, Text).label("requires"),  # as text: a few shapes, parsed once each
    runs.c.preempted_at, runs.c.pool, runs.c.preemptible,
    cast(runs.c.limit_keys, Text).label("limit_keys"), runs.c.run_at,
)  # fmt: skip


def _queued_runs(*columns: Any, partitioned: bool) -> Select[Any]:
    """The queued runs (with ``columns``); ``partitioned``: only those of the pools a
    partition holds, by their pool resolved as placement resolves it (their own, else their
    tenant's default), given as the parameters ``_held_bounds`` makes."""
    queued = select(*columns).where(
        runs.c.state == RunState.QUEUED, runs.c.id >= bindparam("live_floor")
    )
    if not partitioned:
        return queued
    pool = func.coalesce(runs.c.pool, tenants.c.default_pool)
    elsewhere = or_(pool.is_(None), pool.not_in(bindparam("known_pools", expanding=True)))
    return queued.outerjoin(tenants, tenants.c.id == runs.c.tenant_id).where(
        or_(
            pool.in_(bindparam("held_pools", expanding=True)),
            and_(bindparam("holds_shared") == true(), elsewhere),
        )
    )


def _held_bounds(held: Held) -> dict[str, Any]:
    return {
        "held_pools": sorted(held.pools),
        "holds_shared": held.shared,
        "known_pools": sorted(held.known),
    }


@functools.cache
def _oldest_queued(*, partitioned: bool) -> Select[Any]:
    return (
        _queued_runs(*QUEUED_COLUMNS, partitioned=partitioned)
        .order_by(runs.c.queued_at)
        .limit(bindparam("count"))
    )


@functools.cache
def _queue_window(*, by_key: bool, partitioned: bool = False) -> Select[Any]:
    """The first ``per_tenant`` queued runs of each tenant (by class, then age), at most
    ``window`` in all, so one tenant's backlog never pushes the others out of sight; ``by_key``
    (when any limit exists), of the runs sharing limit keys the first ``KEY_QUEUE_WINDOW``
    only, so neither does one key's backlog (its runs past that could not start this pass
    anyway)."""
    if not by_key:
        queued = _queued_runs(*QUEUED_COLUMNS, partitioned=partitioned).subquery()
        return _tenant_window(queued, [queued.c[column.name] for column in QUEUED_COLUMNS])
    keys = cast(runs.c.limit_keys, Text)
    keyed = _queued_runs(
        *QUEUED_COLUMNS,
        func.row_number()
        .over(partition_by=keys, order_by=(runs.c.priority.desc(), runs.c.queued_at))
        .label("key_position"),
        partitioned=partitioned,
    ).subquery()
    below = or_(
        keyed.c.key_position <= KEY_QUEUE_WINDOW,
        keyed.c.limit_keys.is_(None),
        keyed.c.limit_keys.in_(["null", "[]"]),
    )
    return _tenant_window(keyed, [keyed.c[column.name] for column in QUEUED_COLUMNS], below)


def _tenant_window(queued: Any, columns: list[Any], *where: Any) -> Select[Any]:
    ranked = (
        select(
            *columns,
            func.row_number()
            .over(
                partition_by=queued.c.tenant_id,
                order_by=(queued.c.priority.desc(), queued.c.queued_at),
            )
            .label("position"),
        )
        .where(*where)
        .subquery()
    )
    return (
        select(*(ranked.c[column.name] for column in QUEUED_COLUMNS))
        .where(ranked.c.position <= bindparam("per_tenant"))
        .order_by(ranked.c.priority.desc(), ranked.c.queued_at)
        .limit(bindparam("window"))
    )


_ANY_LIMIT = select(limits.c.id).limit(1)


def any_limit(connection: Connection) -> bool:
    return connection.execute(_ANY_LIMIT).first() is not None


def running_attempt(row: Any) -> RunningAttempt:
    (
        _worker_id, attempt_id, run_id, cpu_milli, memory_mb, gpus, started_at, gpu_indices,
        preempt_requested_at, tenant_id, priority, preemptible, preempted_at, cancel_requested,
        suspend_requested, borrowed, limit_keys,
    ) = row  # fmt: skip
    return RunningAttempt(
        attempt_id, run_id, tenant_id, priority, Amount(cpu_milli, memory_mb, gpus, 1),
        started_at, tuple(gpu_indices or ()),
        can_be_victim(preemptible, cancel_requested, suspend_requested),
        preempting=preempt_requested_at is not None, last_preempted_at=preempted_at,
        borrowed=bool(borrowed), limit_keys=limit_keys_of(limit_keys),
    )  # fmt: skip


def queued_run(row: Any, tenant_views: Mapping[str, TenantView]) -> QueuedRun:
    """A queued run; its pool its own, else its tenant's default one."""
    (
        run_id, tenant_id, priority, queued_at, cpu_milli, memory_mb, gpus, replicas, requires,
        preempted_at, pool, preemptible, limit_keys, run_at,
    ) = row  # fmt: skip
    need = Amount(cpu_milli, memory_mb, gpus, 1)
    if pool is None and tenant_id in tenant_views:
        pool = tenant_views[tenant_id].default_pool
    return QueuedRun(
        run_id, tenant_id, priority, queued_at, need, replicas, _labels(requires), preempted_at,
        pool, bool(preemptible), limit_keys_of(limit_keys), run_at,
    )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _labels(text: str | None) -> Mapping[str, str]:
    """A run's required labels from their JSON; shared by the runs asking the same (read
    only, as a snapshot is)."""
    return MappingProxyType(json.loads(text) or {}) if text else MappingProxyType({})


def worker_view(row: Any, running: Sequence[RunningAttempt]) -> WorkerView:
    worker_id, cpu_milli, memory_mb, gpus, max_slots, labels, address, state = row
    return WorkerView(
        id=worker_id,
        capacity=Amount(cpu_milli, memory_mb, gpus, max_slots),
        labels=labels or {},
        running=tuple(running),
        address=address,
        draining=state == WorkerState.DRAINING,
    )
