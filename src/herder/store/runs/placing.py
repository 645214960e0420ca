"""Starting the placements that still fit, as applying a plan does (``placement.apply``):
the workers placed on locked (``FOR UPDATE`` on PostgreSQL, in id order so two placers cannot
deadlock; SQLite's write lock serialises everything) and what they run measured from the
attempts table, so a placement that no longer fits — another placer got there first — is
skipped: a worker's free capacity never goes negative. Likewise, locked in turn, the in-use
quotas of the tenants it places for and the keys of the limits its runs count against are
measured again (``domain.placement.recheck``): placers that each see part of the fleet never
over-fill a quota or a key together. A report's hand-off holds its one worker itself, without
waiting, and starts what fits in the room it measured there (``start_fitting``,
``runs.hand_off``). Its statements are built once per dialect and take any number of runs or
workers as one parameter."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Select, Text, Update, bindparam, cast, func, select, text, update

from herder.clock import epoch_ms
from herder.domain.ids import new_id
from herder.domain.jobs import DEFAULT_STOP_GRACE_SECONDS
from herder.domain.lifecycle.changes import Event
from herder.domain.lifecycle.stops import can_be_victim
from herder.domain.models import WorkerState
from herder.domain.placement import timeline
from herder.domain.placement.limits import LimitKey
from herder.domain.placement.ordering import wait_began
from herder.domain.placement.policy import Placement
from herder.domain.placement.recheck import Rooms, binds_in_use
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import RunningAttempt
from herder.domain.states import AttemptState, RunState, check_transition
from herder.domain.tenants import TenantQuotas
from herder.store.dialect import Among, insert_rows
from herder.store.history.live import live_floor
from herder.store.limit_use import limit_keys_of, measure_keys, record_last_starts, record_starts
from herder.store.runs.settings import quotas_of
from herder.store.runs.writes import record_events
from herder.store.schema import attempts, runs, tenants, workers
from herder.telemetry.traces import PlacedRun

ATTEMPT_DEADLINE_MARGIN_SECONDS = 30  # past its timeout and stop grace: the kill, reporting
TIMEOUT_SECONDS = runs.c.spec["timeout_seconds"].as_integer().label("timeout_seconds")
STOP_GRACE_SECONDS = func.coalesce(
    runs.c.spec["stop_grace_seconds"].as_integer(),  # absent from runs made before it
    DEFAULT_STOP_GRACE_SECONDS,
).label("stop_grace_seconds")


@dataclass(frozen=True)
class Placed:
    placements: list[Placement]
    started: dict[str, _Started]
    attempts: dict[str, list[RunningAttempt]]  # by worker id: as a snapshot would read them

    @property
    def workers(self) -> set[str]:
        return {member.worker_id for p in self.placements for member in p.members}

    @property
    def waits(self) -> list[tuple[int, datetime | None]]:
        return [_waited_from(self.started[p.run_id]) for p in self.placements]

    def traced(self, now: datetime, placer: str) -> list[PlacedRun]:
        """The runs placed, as their placement spans tell them (``telemetry.traces``)."""
        return [
            PlacedRun(
                placement.run_id,
                started.workflow_run_id,
                started.number,
                _waited_from(started)[1],  # a preempted run waits again from its preemption
                now,
                tuple(member.worker_id for member in placement.members),
                placer,
            )
            for placement in self.placements
            for started in (self.started[placement.run_id],)
        ]


def place(
    connection: Connection, placements: Sequence[Placement], now: datetime, *, actor: str
) -> Placed:
    """Start the placements that still fit: their workers locked (waiting for the locks) and
    measured, their runs read again, and ``start_fitting``."""
    touched = sorted({member.worker_id for placement in placements for member in placement.members})
    sql = _statements(connection.dialect.name)
    floor = live_floor(connection, now)
    room = _lock_and_measure(connection, sql, touched, floor)
    queued = _queued_runs(connection, sql, [p.run_id for p in placements])
    return start_fitting(connection, placements, room, queued, now, actor=actor)


def start_fitting(
    connection: Connection,
    placements: Sequence[Placement],
    room: dict[str, Room],
    queued: Mapping[str, RunToPlace],
    now: datetime,
    *,
    actor: str,
) -> Placed:
    """Start those of ``placements`` whose run is among ``queued`` and that fit in ``room``
    (their workers' free capacity, measured under the workers' locks) and, measured again
    now, in their tenants' in-use quotas and their keys (nothing is read for a run with
    neither)."""
    sql = _statements(connection.dialect.name)
    rooms = _measure_rooms(connection, sql, queued, now, live_floor(connection, now))
    fitting = [
        placement
        for placement in placements
        if placement.run_id in queued
        and _take_all(room, rooms, placement, queued[placement.run_id])
    ]
    started = _start_runs(connection, sql, [p.run_id for p in fitting], now)
    placed = [placement for placement in fitting if placement.run_id in started]
    _record_starts(connection, placed, started, now, actor)
    attempts_started = _insert_attempts(connection, placed, queued, started, now)
    record_starts(connection, (key for p in placed for key in p.rate_keys), now)
    keys = (key for p in placed for key in started[p.run_id].limit_keys)
    record_last_starts(connection, keys, now)
    return Placed(placed, started, attempts_started)


@dataclass(frozen=True)
class _Statements:
    """Apply's statements for one dialect; each names its runs or workers in one parameter."""

    run_ids: Among
    # need, timeout, tenant and keys of the named runs still queued, their tenants locked
    queued: Select[Any]
    tenant_ids: Among
    tenant_use: Select[Any]  # what the named tenants' running attempts hold
    start: Update  # the named runs still queued → running, with what their attempts carry
    worker_ids: Among
    lock: Select[Any]  # the named workers still alive, locked in id order
    attempt_worker_ids: Among
    used: Select[Any]  # what runs on the named workers


@functools.cache
def _statements(dialect: str) -> _Statements:
    run_ids = Among(dialect, runs.c.id, "run_ids")
    tenant_ids = Among(dialect, runs.c.tenant_id, "tenant_ids")
    worker_ids = Among(dialect, workers.c.id, "worker_ids")
    attempt_worker_ids = Among(dialect, attempts.c.worker_id, "worker_ids")
    still_queued = (run_ids.condition, runs.c.state == RunState.QUEUED)
    return _Statements(
        run_ids=run_ids,
        queued=select(
            runs.c.id, runs.c.cpu_milli, runs.c.memory_mb, runs.c.gpus, TIMEOUT_SECONDS,
            STOP_GRACE_SECONDS, runs.c.tenant_id, cast(runs.c.limit_keys, Text).label("limit_keys"),
            cast(tenants.c.quotas, Text).label("quotas"),
        )
        .select_from(runs.join(tenants, tenants.c.id == runs.c.tenant_id))
        .where(*still_queued),
        tenant_ids=tenant_ids,
        tenant_use=select(
            runs.c.tenant_id, func.sum(attempts.c.cpu_milli), func.sum(attempts.c.memory_mb),
            func.sum(attempts.c.gpus),
        )
        .select_from(runs.join(attempts, attempts.c.run_id == runs.c.id))
        .where(
            tenant_ids.condition,
            runs.c.state == RunState.RUNNING,
            runs.c.id >= bindparam("live_floor"),
            attempts.c.run_id >= bindparam("live_floor"),
            attempts.c.state == AttemptState.RUNNING,
        )
        .group_by(runs.c.tenant_id),
        start=update(runs)
        .where(*still_queued)
        .values(
            state=RunState.RUNNING, attempt_count=runs.c.attempt_count + 1,
            started_at=bindparam("now"), waiting_reason=None,
        )
        .returning(
            runs.c.id, runs.c.attempt_count, runs.c.tenant_id, runs.c.priority,
            runs.c.preemptible, runs.c.preempted_at, runs.c.cancel_requested,
            runs.c.suspend_requested, runs.c.queued_at, runs.c.pool,
            cast(runs.c.limit_keys, Text).label("limit_keys"), runs.c.workflow_run_id,
        ),
        worker_ids=worker_ids,
        lock=select(workers.c.id, workers.c.cpu_milli, workers.c.memory_mb, workers.c.gpus,
                    workers.c.max_slots)
        .where(worker_ids.condition, workers.c.state == WorkerState.ALIVE)
        .order_by(workers.c.id)
        .with_for_update(),
        attempt_worker_ids=attempt_worker_ids,
        used=select(attempts.c.worker_id, attempts.c.cpu_milli, attempts.c.memory_mb,
                    attempts.c.gpus, attempts.c.gpu_indices)
        .where(
            attempt_worker_ids.condition,
            attempts.c.state == AttemptState.RUNNING,
            attempts.c.run_id >= bindparam("live_floor"),
        ),
    )  # fmt: skip


@dataclass
class Room:
    """A worker's free capacity inside the apply transaction."""

    free: Amount
    free_gpus: set[int]

    @classmethod
    def whole(cls, capacity: Amount) -> Room:
        """All of a worker's capacity, before what it runs is held."""
        return cls(capacity, set(range(capacity.gpus)))

    def hold(self, need: Amount, gpu_indices: Iterable[int]) -> None:
        """Count what an attempt running there holds."""
        self.free -= need
        self.free_gpus -= set(gpu_indices)

    def copy(self) -> Room:
        return Room(self.free, set(self.free_gpus))

    def take(self, need: Amount, gpu_indices: Iterable[int]) -> bool:
        indices = set(gpu_indices)
        if not need.fits_in(self.free) or not indices <= self.free_gpus:
            return False
        self.free -= need
        self.free_gpus -= indices
        return True


@dataclass(frozen=True)
class RunToPlace:
    """What starting a queued run needs of it, and what is measured again for it."""

    need: Amount  # per member
    timeout_seconds: int
    stop_grace_seconds: int
    tenant_id: str
    limit_keys: tuple[LimitKey, ...]
    quotas: TenantQuotas

    @classmethod
    def of(cls, row: Any) -> RunToPlace:
        """From a row with the run's resources, ``TIMEOUT_SECONDS``, ``STOP_GRACE_SECONDS``,
        tenant and ``limit_keys``, and its tenant's ``quotas`` (as text)."""
        return cls(
            Amount(row.cpu_milli, row.memory_mb, row.gpus, 1), row.timeout_seconds,
            row.stop_grace_seconds, row.tenant_id, limit_keys_of(row.limit_keys),
            quotas_of(row.quotas),
        )  # fmt: skip


def _queued_runs(
    connection: Connection, sql: _Statements, run_ids: list[str]
) -> dict[str, RunToPlace]:
    """The named runs still queued, their tenants locked (``_Statements.queued``)."""
    found: dict[str, RunToPlace] = {}
    for params in sql.run_ids.batches(run_ids):
        for row in connection.execute(sql.queued, params).all():
            found[row.id] = RunToPlace.of(row)
    return found


def _measure_rooms(
    connection: Connection,
    sql: _Statements,
    queued: Mapping[str, RunToPlace],
    now: datetime,
    floor: str,
) -> Rooms:
    """The tenants' and keys' room under the locks this apply holds: the use of each tenant
    with an in-use quota, and the keys of the runs to place (nothing read without either)."""
    quotas = {run.tenant_id: run.quotas for run in queued.values()}
    bound = sorted(tenant for tenant, quota in quotas.items() if binds_in_use(quota))
    if bound and connection.dialect.name == "postgresql":
        connection.execute(_LOCK_TENANTS, {"tenant_ids": bound})
    used: dict[str, Amount] = {}
    for params in sql.tenant_ids.batches(bound, live_floor=floor):
        for tenant_id, cpu, memory_mb, gpus in connection.execute(sql.tenant_use, params).all():
            used[tenant_id] = Amount(int(cpu or 0), int(memory_mb or 0), int(gpus or 0), 0)
    keys = {key for run in queued.values() for key in run.limit_keys}
    if not keys:
        return Rooms(quotas, used)
    measured = measure_keys(connection, keys, now, floor)
    return Rooms.measured(quotas, used, measured.limits, measured.running, measured.starts, now)


# Placing for a tenant, in tenant id order: a placer measures a tenant's use only once it
# holds the tenant's placement lock (held until commit), so two never over-fill its quotas.
# An advisory lock, not the tenant's row, which admissions from the queue room lock: only
# placers take it, after their workers' rows and before their limits' (SQLite: one writer).
_LOCK_TENANTS = text(
    "SELECT pg_advisory_xact_lock(hashtextextended('herder placement ' || tenant_id, 0))"
    " FROM unnest(CAST(:tenant_ids AS text[])) AS tenant_id"
)


def _take_all(room: dict[str, Room], rooms: Rooms, placement: Placement, run: RunToPlace) -> bool:
    """Hold room for every member on its worker, and in its tenant's quotas and its keys, or
    for none."""
    if any(member.worker_id not in room for member in placement.members):
        return False  # no longer alive
    trial = {member.worker_id: room[member.worker_id].copy() for member in placement.members}
    for member in placement.members:
        if not trial[member.worker_id].take(run.need, member.gpu_indices):
            return False
    if not rooms.take(run.tenant_id, run.need.times(len(placement.members)), run.limit_keys):
        return False
    room.update(trial)
    return True


@dataclass(frozen=True)
class _Started:
    """A run just moved to running: its attempt number and what its attempts carry."""

    number: int
    tenant_id: str
    priority: int
    preemptible: bool
    preempted_at: datetime | None
    queued_at: datetime | None
    pool: str | None
    limit_keys: tuple[LimitKey, ...]
    workflow_run_id: str | None  # a workflow's task: its trace is its workflow run's


def _start_runs(
    connection: Connection, sql: _Statements, run_ids: list[str], now: datetime
) -> dict[str, _Started]:
    """``queued → running`` for those still queued."""
    check_transition(RunState.QUEUED, RunState.RUNNING)
    started: dict[str, _Started] = {}
    for params in sql.run_ids.batches(run_ids, now=now):
        for row in connection.execute(sql.start, params).all():
            started[row.id] = _Started(
                row.attempt_count, row.tenant_id, row.priority,
                can_be_victim(row.preemptible, row.cancel_requested, row.suspend_requested),
                row.preempted_at,
                row.queued_at,
                row.pool,
                limit_keys_of(row.limit_keys),
                row.workflow_run_id,
            )  # fmt: skip
    return started


def _record_starts(
    connection: Connection,
    placed: list[Placement],
    started: dict[str, _Started],
    now: datetime,
    actor: str,
) -> None:
    if not placed:
        return
    record_events(
        connection,
        now,
        [
            Event(
                placement.run_id,
                timeline.placed(
                    start.number,
                    (member.worker_id for member in placement.members),
                    start.pool if placement.borrowed else None,
                ),
                actor,
                attempt=start.number,
                source=RunState.QUEUED,
                target=RunState.RUNNING,
            )
            for placement in placed
            for start in (started[placement.run_id],)
        ],
    )


def _insert_attempts(
    connection: Connection,
    placed: list[Placement],
    queued: Mapping[str, RunToPlace],
    started: dict[str, _Started],
    now: datetime,
) -> dict[str, list[RunningAttempt]]:
    """One attempt per member; the attempts by worker, as a snapshot would read them."""
    rows = []
    by_worker: dict[str, list[RunningAttempt]] = defaultdict(list)
    for placement in placed:
        run, start = queued[placement.run_id], started[placement.run_id]
        running = run.timeout_seconds + run.stop_grace_seconds + ATTEMPT_DEADLINE_MARGIN_SECONDS
        deadline = now + timedelta(seconds=running)
        for member in placement.members:
            attempt_id = new_id("att", epoch_ms(now))
            rows.append(
                {
                    "id": attempt_id,
                    "run_id": placement.run_id,
                    "number": start.number,
                    "rank": member.rank,
                    "worker_id": member.worker_id,
                    "state": AttemptState.RUNNING,
                    "started_at": now,
                    "deadline_at": deadline,
                    "cpu_milli": run.need.cpu_milli,
                    "memory_mb": run.need.memory_mb,
                    "gpus": run.need.gpus,
                    "gpu_indices": list(member.gpu_indices) or None,
                    "borrowed": placement.borrowed,
                }
            )
            by_worker[member.worker_id].append(
                RunningAttempt(
                    attempt_id, placement.run_id, start.tenant_id, start.priority, run.need,
                    now, member.gpu_indices, start.preemptible,
                    last_preempted_at=start.preempted_at, borrowed=placement.borrowed,
                    limit_keys=start.limit_keys,
                )
            )  # fmt: skip
    insert_rows(connection, attempts, rows)
    return dict(by_worker)


def _lock_and_measure(
    connection: Connection, sql: _Statements, worker_ids: list[str], floor: str
) -> dict[str, Room]:
    """Lock the alive ones among ``worker_ids`` (sorted, so lockers never deadlock) and
    work out what each has free from the attempts it runs.

    Two statements, never one join: under PostgreSQL's read committed, a statement reads
    with the snapshot it began with, and one that waited for a worker's lock would read that
    worker's attempts as they were before the holder committed — missing what another
    dispatcher just placed there. The second statement begins once the locks are held."""
    room: dict[str, Room] = {}
    for params in sql.worker_ids.batches(worker_ids):
        for worker_id, cpu, memory_mb, gpus, slots in connection.execute(sql.lock, params).all():
            room[worker_id] = Room.whole(Amount(cpu, memory_mb, gpus, slots))
    for params in sql.attempt_worker_ids.batches(worker_ids, live_floor=floor):
        for worker_id, cpu, memory_mb, gpus, indices in connection.execute(sql.used, params).all():
            held = room.get(worker_id)
            if held is not None:
                held.hold(Amount(cpu, memory_mb, gpus, 1), indices or ())
    return room


def _waited_from(start: _Started) -> tuple[int, datetime | None]:
    """A started run's priority and when its wait began, for the queue-wait histogram."""
    if start.queued_at is None:
        return start.priority, None
    return start.priority, wait_began(start.queued_at, start.preempted_at)
