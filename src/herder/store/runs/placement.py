"""The dispatcher's side of the store: read a placement snapshot, apply a plan atomically.

Applying locks the workers it places on (``FOR UPDATE`` on PostgreSQL, in id order so two
dispatchers cannot deadlock; SQLite's write lock serialises everything) and recomputes what
they run from the attempts table, so a placement that no longer fits — another dispatcher
got there first — is skipped: a worker's free capacity never goes negative.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, bindparam, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.ids import new_id
from herder.domain.lifecycle.changes import Event, NoticeKind, notices
from herder.domain.models import WorkerState
from herder.domain.placement.policy import Placement, Plan, Preemption
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import Snapshot, WorkerView
from herder.domain.states import AttemptState, RunState, check_transition
from herder.store.database import Database
from herder.store.dialect import among, insert_many, set_each, update_each
from herder.store.notifications import WORKER_CHANNEL, send
from herder.store.runs.snapshot import QUEUE_WINDOW, TENANT_QUEUE_WINDOW, read_snapshot
from herder.store.runs.writes import record_events
from herder.store.schema import attempts, runs, workers

ATTEMPT_DEADLINE_MARGIN_SECONDS = 30  # past its timeout, the worker's own kill, and reporting


@dataclass(frozen=True)
class Applied:
    placed: list[Placement]
    skipped: list[str]  # run ids whose placement no longer fit or that were no longer queued
    preempted: list[Preemption]


class PlacementRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def snapshot(
        self,
        window: int = QUEUE_WINDOW,
        per_tenant: int = TENANT_QUEUE_WINDOW,
        *,
        quick: bool = False,
        fleet: Sequence[WorkerView] | None = None,
        changed: Collection[str] = (),
    ) -> Snapshot:
        """The fleet, the tenants and the head of the queue; given an earlier snapshot's
        ``fleet``, only the ``changed`` workers are read again (``snapshot.read_snapshot``)."""
        with self._db.read() as connection:
            return read_snapshot(
                connection, self._clock.now(), window, per_tenant,
                quick=quick, fleet=fleet, changed=changed,
            )  # fmt: skip

    def on_worker_notice(self, heard: Callable[[str], None]) -> None:
        """Call ``heard(worker_id)`` for each notice about a worker this process hears —
        capacity freed, a cancel or preemption, work assigned — after its commit, for as
        long as the store lives."""

        def hear(channel: str, payload: str) -> None:
            if channel == WORKER_CHANNEL:
                heard(payload.partition(":")[2])

        self._db.subscribe(hear)

    def apply(self, plan: Plan, reasons: Mapping[str, str] | None = None) -> Applied:
        """Place and preempt what still fits, and store the waiting reasons that changed
        (only for runs still queued), in one transaction of a few statements."""
        now = self._clock.now()
        touched = sorted(
            {member.worker_id for placement in plan.placements for member in placement.members}
        )
        with self._db.write() as connection:
            room = _lock_and_measure(connection, touched)
            queued = _queued_runs(connection, [p.run_id for p in plan.placements])
            fitting = [
                placement
                for placement in plan.placements
                if placement.run_id in queued
                and _take_all(room, placement, queued[placement.run_id].need)
            ]
            numbers = _start_runs(connection, [p.run_id for p in fitting], now)
            placed = [placement for placement in fitting if placement.run_id in numbers]
            _record_starts(connection, placed, numbers, now)
            _insert_attempts(connection, placed, queued, numbers, now)
            preempted = _request_preemptions(connection, plan.preemptions, now)
            _record_reasons(connection, reasons)
            send(
                self._db,
                connection,
                notices(NoticeKind.CANCEL, {p.worker_id for p in preempted})
                | notices(NoticeKind.ASSIGNED, {m.worker_id for p in placed for m in p.members}),
            )
        placed_ids = {placement.run_id for placement in placed}
        skipped = [p.run_id for p in plan.placements if p.run_id not in placed_ids]
        return Applied(placed, skipped, preempted)


def _record_reasons(connection: Connection, reasons: Mapping[str, str] | None) -> None:
    still_queued = update(runs).where(runs.c.state == RunState.QUEUED)
    set_each(connection, still_queued, runs.c.id, runs.c.waiting_reason, reasons or {})


@dataclass
class _Room:
    """A worker's free capacity inside the apply transaction."""

    free: Amount
    free_gpus: set[int]

    def copy(self) -> _Room:
        return _Room(self.free, set(self.free_gpus))

    def take(self, need: Amount, gpu_indices: Iterable[int]) -> bool:
        indices = set(gpu_indices)
        if not need.fits_in(self.free) or not indices <= self.free_gpus:
            return False
        self.free -= need
        self.free_gpus -= indices
        return True


@dataclass(frozen=True)
class _QueuedRun:
    need: Amount  # per member
    timeout_seconds: int


def _queued_runs(connection: Connection, run_ids: list[str]) -> dict[str, _QueuedRun]:
    found: dict[str, _QueuedRun] = {}
    timeout = runs.c.spec["timeout_seconds"].as_integer().label("timeout_seconds")
    for among_ids in among(connection, runs.c.id, run_ids):
        rows = connection.execute(
            select(runs.c.id, runs.c.cpu_milli, runs.c.memory_mb, runs.c.gpus, timeout)
            .where(among_ids, runs.c.state == RunState.QUEUED)
        ).all()  # fmt: skip
        for row in rows:
            need = Amount(row.cpu_milli, row.memory_mb, row.gpus, 1)
            found[row.id] = _QueuedRun(need, row.timeout_seconds)
    return found


def _take_all(room: dict[str, _Room], placement: Placement, need: Amount) -> bool:
    """Hold room for every member, or for none."""
    if any(member.worker_id not in room for member in placement.members):
        return False  # no longer alive
    trial = {member.worker_id: room[member.worker_id].copy() for member in placement.members}
    for member in placement.members:
        if not trial[member.worker_id].take(need, member.gpu_indices):
            return False
    room.update(trial)
    return True


def _start_runs(connection: Connection, run_ids: list[str], now: datetime) -> dict[str, int]:
    """``queued → running`` for those still queued; their new attempt numbers."""
    check_transition(RunState.QUEUED, RunState.RUNNING)
    numbers: dict[str, int] = {}
    for among_ids in among(connection, runs.c.id, run_ids):
        rows = connection.execute(
            update(runs)
            .where(among_ids, runs.c.state == RunState.QUEUED)
            .values(
                state=RunState.RUNNING,
                attempt_count=runs.c.attempt_count + 1,
                started_at=now,
                waiting_reason=None,
            )
            .returning(runs.c.id, runs.c.attempt_count)
        ).all()
        numbers.update({row.id: row.attempt_count for row in rows})
    return numbers


def _record_starts(
    connection: Connection, placed: list[Placement], numbers: dict[str, int], now: datetime
) -> None:
    if not placed:
        return
    record_events(
        connection,
        now,
        [
            Event(
                placement.run_id,
                f"attempt {numbers[placement.run_id]} placed on "
                + ", ".join(sorted({member.worker_id for member in placement.members})),
                "dispatcher",
                attempt=numbers[placement.run_id],
                source=RunState.QUEUED,
                target=RunState.RUNNING,
            )
            for placement in placed
        ],
    )


def _insert_attempts(
    connection: Connection,
    placed: list[Placement],
    queued: dict[str, _QueuedRun],
    numbers: dict[str, int],
    now: datetime,
) -> None:
    rows = []
    for placement in placed:
        run = queued[placement.run_id]
        deadline = now + timedelta(seconds=run.timeout_seconds + ATTEMPT_DEADLINE_MARGIN_SECONDS)
        for member in placement.members:
            rows.append(
                {
                    "id": new_id("att", epoch_ms(now)),
                    "run_id": placement.run_id,
                    "number": numbers[placement.run_id],
                    "rank": member.rank,
                    "worker_id": member.worker_id,
                    "state": AttemptState.RUNNING,
                    "started_at": now,
                    "deadline_at": deadline,
                    "cpu_milli": run.need.cpu_milli,
                    "memory_mb": run.need.memory_mb,
                    "gpus": run.need.gpus,
                    "gpu_indices": list(member.gpu_indices) or None,
                }
            )
    insert_many(connection, attempts, rows)


def _lock_and_measure(connection: Connection, worker_ids: list[str]) -> dict[str, _Room]:
    """Lock the alive ones among ``worker_ids`` (sorted, so lockers never deadlock) and
    work out what each has free from the attempts it runs."""
    room: dict[str, _Room] = {}
    for among_ids in among(connection, workers.c.id, worker_ids):
        rows = connection.execute(
            select(workers.c.id, workers.c.cpu_milli, workers.c.memory_mb, workers.c.gpus,
                   workers.c.max_slots)
            .where(among_ids, workers.c.state == WorkerState.ALIVE)
            .order_by(workers.c.id)
            .with_for_update()
        ).all()  # fmt: skip
        for row in rows:
            capacity = Amount(row.cpu_milli, row.memory_mb, row.gpus, row.max_slots)
            room[row.id] = _Room(capacity, set(range(row.gpus)))
    for among_ids in among(connection, attempts.c.worker_id, worker_ids):
        used = connection.execute(
            select(
                attempts.c.worker_id, attempts.c.cpu_milli, attempts.c.memory_mb,
                attempts.c.gpus, attempts.c.gpu_indices,
            ).where(among_ids, attempts.c.state == AttemptState.RUNNING)
        ).all()  # fmt: skip
        for attempt in used:
            held = room.get(attempt.worker_id)
            if held is not None:
                held.free -= Amount(attempt.cpu_milli, attempt.memory_mb, attempt.gpus, 1)
                held.free_gpus -= set(attempt.gpu_indices or [])
    return room


_PREEMPT = (
    update(attempts)
    .where(
        attempts.c.id == bindparam("p_id"),
        attempts.c.state == AttemptState.RUNNING,
        attempts.c.preempt_requested_at.is_(None),
    )
    .values(preempt_requested_at=bindparam("p_now"))
    .returning(attempts.c.id)
)


def _request_preemptions(
    connection: Connection, preemptions: Sequence[Preemption], now: datetime
) -> list[Preemption]:
    """Mark each victim unless it is no longer running or already being preempted; the
    preemptions that held, each recorded in its run's events."""
    rows = [{"p_id": p.attempt_id, "p_now": now} for p in preemptions]
    chosen = set(update_each(connection, _PREEMPT, rows))
    held = [p for p in preemptions if p.attempt_id in chosen]
    record_events(
        connection,
        now,
        [
            Event(
                p.run_id,
                f"preempted on {p.worker_id} to make room for the higher-priority run "
                f"{p.for_run_id}; it will be queued again without using up a retry",
                "dispatcher",
            )
            for p in held
        ],
    )
    return held
