"""The fleet as operators manage it: draining a worker before maintenance, and back, and
forgetting a lost one.

A draining worker is given nothing new (the claim and the dispatcher skip it) while what it
already runs finishes. A lost worker stays lost: it comes back by registering anew, so its row
only tells that it was once there, until it is forgotten (by hand or after a retention). Its
attempts keep its id, so the runs' history still says where they ran; nothing else points at
the row.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update

from herder.clock import Clock
from herder.domain.errors import Conflict, NotFound
from herder.domain.jobs import Capacity
from herder.domain.models import Worker, WorkerState
from herder.store.database import Database
from herder.store.notifications import notify_capacity
from herder.store.schema import workers

FORGOTTEN_PER_PASS = 500  # lost workers deleted by one pass of the maintenance loop


def worker_record(row: Any) -> Worker:
    return Worker(
        id=row.id,
        name=row.name,
        state=WorkerState(row.state),
        capacity=Capacity(cpu=row.cpu_milli / 1000, memory_mb=row.memory_mb, gpus=row.gpus),
        max_slots=row.max_slots,
        labels=row.labels,
        version=row.version,
        registered_at=row.registered_at,
        address=row.address,
        last_heartbeat_at=row.last_heartbeat_at,
    )


class FleetRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def drain(self, worker_id: str) -> Worker:
        """alive → draining (already draining: unchanged)."""
        return self._move(worker_id, WorkerState.ALIVE, WorkerState.DRAINING)

    def leaving(self, worker_id: str) -> None:
        """The worker says it is stopping: alive → draining, so nothing more is placed on it
        (draining or lost already: unchanged)."""
        with self._db.write() as connection:
            connection.execute(
                update(workers)
                .where(workers.c.id == worker_id, workers.c.state == WorkerState.ALIVE)
                .values(state=WorkerState.DRAINING)
            )

    def undrain(self, worker_id: str) -> Worker:
        """draining → alive (already alive: unchanged); its idle claim wakes to take work."""
        return self._move(worker_id, WorkerState.DRAINING, WorkerState.ALIVE)

    def forget(self, worker_id: str) -> Worker:
        """A lost worker is no longer listed; returns it as it was. An alive or draining one
        is refused: its agent still calls, and, unknown, it would register anew as alive."""
        with self._db.write() as connection:
            row = connection.execute(select(workers).where(workers.c.id == worker_id)).first()
            connection.execute(
                delete(workers).where(
                    workers.c.id == worker_id, workers.c.state == WorkerState.LOST
                )
            )
        if row is None:
            raise NotFound(f"worker {worker_id} not found")
        if row.state != WorkerState.LOST:
            raise Conflict(
                f"worker {worker_id} is {row.state}: only a lost worker is forgotten; stop its "
                "agent (drain it first to let its runs finish) and it is lost once silent"
            )
        return worker_record(row)

    def forget_lost(self, retention: timedelta) -> bool:
        """Delete up to ``FORGOTTEN_PER_PASS`` workers lost and silent for longer than
        ``retention``; whether more may be left."""
        silent_since = self._clock.now() - retention
        with self._db.write() as connection:
            doomed = (
                select(workers.c.id)
                .where(
                    workers.c.state == WorkerState.LOST,
                    workers.c.last_heartbeat_at < silent_since,
                )
                .limit(FORGOTTEN_PER_PASS)
            )
            gone = connection.execute(delete(workers).where(workers.c.id.in_(doomed))).rowcount
        return bool(gone == FORGOTTEN_PER_PASS)

    def _move(self, worker_id: str, source: WorkerState, target: WorkerState) -> Worker:
        with self._db.write() as connection:
            moved = connection.execute(
                update(workers)
                .where(workers.c.id == worker_id, workers.c.state == source)
                .values(state=target)
            ).rowcount
            row = connection.execute(select(workers).where(workers.c.id == worker_id)).first()
            if moved and target is WorkerState.ALIVE:
                notify_capacity(self._db, connection, worker_id)
        if row is None:
            raise NotFound(f"worker {worker_id} not found")
        if row.state != target:
            raise Conflict(
                f"worker {worker_id} is {row.state}, so it cannot become {target}; "
                "a lost worker comes back by registering again"
            )
        return worker_record(row)
