"""The fleet as operators manage it: draining a worker before maintenance, and back.

A draining worker is given nothing new (the claim and the dispatcher skip it) while what it
already runs finishes. A lost worker stays lost: it comes back by registering anew.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from herder.domain.errors import Conflict, NotFound
from herder.domain.jobs import Capacity
from herder.domain.models import Worker, WorkerState
from herder.store.database import Database
from herder.store.notifications import notify_capacity
from herder.store.schema import workers


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
    def __init__(self, database: Database) -> None:
        self._db = database

    def drain(self, worker_id: str) -> Worker:
        """alive → draining (already draining: unchanged)."""
        return self._move(worker_id, WorkerState.ALIVE, WorkerState.DRAINING)

    def undrain(self, worker_id: str) -> Worker:
        """draining → alive (already alive: unchanged); its idle claim wakes to take work."""
        return self._move(worker_id, WorkerState.DRAINING, WorkerState.ALIVE)

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
