"""The worker protocol's side of the store: register, heartbeat, claim, drain; the workers
of a token and name read and forgotten (``app.retirement``).

The dispatcher decides what runs where (store/placement.py); a claim hands the worker the
attempts placed on it that it has not been given yet, and marks them delivered.
"""

from __future__ import annotations

import logging
import random
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, func, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.actors import worker_actor
from herder.domain.errors import Gone, NotFound
from herder.domain.ids import new_id
from herder.domain.jobs import Capacity
from herder.domain.lifecycle.changes import Event
from herder.domain.lifecycle.reap import never_delivered
from herder.domain.lifecycle.stops import (
    StoppableAttempt,
    stop_orders,
)
from herder.domain.models import Assignment, Worker, WorkerState, WorkerUse
from herder.domain.states import AttemptState
from herder.protocol import Directives, HeldAttempt
from herder.store.access import hash_secret
from herder.store.checkpoints import refs_for_claim
from herder.store.database import Database
from herder.store.fleet import worker_record
from herder.store.handover import deliverable, gang_peers, take_undelivered
from herder.store.history.live import live_floor
from herder.store.notifications import notify_capacity
from herder.store.runs.facts import ATTEMPT_FACTS, attempt_facts
from herder.store.runs.writes import record_events
from herder.store.schema import attempts, runs, workers
from herder.store.secrets import SecretRepository
from herder.store.work import Work, unit_of_work
from herder.telemetry import metrics, traces, tracing

log = logging.getLogger("herder.store")
SECRET_PREFIX = "wks_"  # a registered worker's secret; 32 random bytes follow


class WorkerRepository:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        rng: random.Random,
        secret_store: SecretRepository,
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self._secrets = secret_store

    def register(
        self,
        token_id: str,
        *,
        name: str,
        capacity: Capacity,
        max_slots: int,
        labels: dict[str, str],
        version: str,
        address: str = "",
    ) -> tuple[Worker, str]:
        """A new worker and its secret (the only copy; the store keeps its hash), which every
        later call for this worker must present."""
        now = self._clock.now()
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        worker = Worker(
            id=new_id("wrk", epoch_ms(now)),
            name=name,
            state=WorkerState.ALIVE,
            capacity=capacity,
            max_slots=max_slots,
            labels=labels,
            version=version,
            registered_at=now,
            last_heartbeat_at=now,
            address=address,
        )
        with self._db.write() as connection:
            connection.execute(
                insert(workers).values(
                    # its fields are its columns, but its capacity (three) and what it runs
                    **worker.model_dump(exclude={"capacity", "in_use"}),
                    token_id=token_id,
                    secret_hash=hash_secret(secret),
                    cpu_milli=capacity.cpu_milli,
                    memory_mb=capacity.memory_mb,
                    gpus=capacity.gpus,
                )
            )
            notify_capacity(self._db, connection, worker.id)  # the dispatcher may place here
        return worker, secret

    def drain_named(self, token_id: str, name: str) -> int:
        """The alive workers of this token and name take nothing new (``draining``) as they
        are about to stop; how many runs those of them not lost are running, which their stop
        will end."""
        with self._db.write() as connection:
            named = (workers.c.token_id == token_id, workers.c.name == name)
            connection.execute(
                update(workers)
                .where(*named, workers.c.state == WorkerState.ALIVE)
                .values(state=WorkerState.DRAINING)
            )
            return int(
                connection.execute(
                    select(func.count(attempts.c.run_id.distinct()))
                    .join(workers, workers.c.id == attempts.c.worker_id)
                    .where(
                        *named,
                        workers.c.state != WorkerState.LOST,
                        attempts.c.state == AttemptState.RUNNING,
                        attempts.c.run_id >= live_floor(connection, self._clock.now()),
                    )
                ).scalar_one()
            )

    def fleet(self) -> list[Worker]:
        """Every worker, with what its running attempts hold (one grouped read of the
        running attempts, which the hot path keeps few)."""
        with self._db.read() as connection:
            rows = connection.execute(select(workers).order_by(workers.c.id)).all()
            held = connection.execute(
                select(
                    attempts.c.worker_id,
                    func.count(),
                    func.coalesce(func.sum(attempts.c.cpu_milli), 0),
                    func.coalesce(func.sum(attempts.c.memory_mb), 0),
                    func.coalesce(func.sum(attempts.c.gpus), 0),
                )
                .where(
                    attempts.c.state == AttemptState.RUNNING,
                    attempts.c.run_id >= live_floor(connection, self._clock.now()),
                )
                .group_by(attempts.c.worker_id)
            ).all()
        use = {
            worker_id: WorkerUse(slots=slots, cpu=cpu / 1000, memory_mb=memory, gpus=gpus)
            for worker_id, slots, cpu, memory, gpus in held
        }
        idle = WorkerUse(slots=0, cpu=0, memory_mb=0, gpus=0)
        return [
            worker_record(row).model_copy(update={"in_use": use.get(row.id, idle)}) for row in rows
        ]

    def heartbeat(
        self,
        worker_id: str,
        running: Sequence[HeldAttempt],
        *,
        unreported_grace_seconds: float,
        finished: Sequence[HeldAttempt] = (),
    ) -> Directives:
        """The worker is alive; answers what to stop. A worker already declared lost is
        told so (``Gone``): its attempts were given to others.

        An attempt the worker lists neither as running nor as ``finished`` (ended, its report
        not yet delivered: say the server was down when it ended) although a claim handed it
        over more than ``unreported_grace_seconds`` ago never reached it (the claim's answer
        was lost, say when the server died mid-claim): its next claim hands it over again.
        """
        reported = {(item.attempt_id, item.attempt) for item in [*running, *finished]}
        with unit_of_work(self._db, self._clock, self._rng) as work:
            alive = work.connection.execute(
                update(workers)
                .where(workers.c.id == worker_id, workers.c.state != WorkerState.LOST)
                .values(last_heartbeat_at=work.now)
            ).rowcount
            if not alive:
                raise _gone(worker_id)
            handed_over_before = work.now - timedelta(seconds=unreported_grace_seconds)
            given = work.connection.execute(
                select(*ATTEMPT_FACTS).where(
                    attempts.c.worker_id == worker_id,
                    attempts.c.state == AttemptState.RUNNING,
                    attempts.c.delivered_at < handed_over_before,
                    attempts.c.run_id >= live_floor(work.connection, work.now),
                )
            ).all()
            unheard = [attempt_facts(row) for row in given if (row.id, row.number) not in reported]
            work.apply(never_delivered(unheard))
            directives = _directives(work.connection, worker_id, running, work.now)
            stale = [item for item in running if item.attempt_id in directives.drop]
            if stale:
                _record_stale(work, worker_id, stale)
        metrics.zombie_reports(len(stale))
        return directives

    def directives(self, worker_id: str, running: Sequence[HeldAttempt]) -> Directives:
        """Which of its attempts the worker must stop (see ``stops.stop_orders``)."""
        with self._db.read() as connection:
            return _directives(connection, worker_id, running, self._clock.now())

    def hand_over(self, work: Work, worker_id: str, max_runs: int) -> list[Assignment]:
        """Up to ``max_runs`` of the attempts the dispatcher placed on this worker and not yet
        handed over, now handed over, in the caller's unit of work (``app.claims``): a stored
        run that cannot be handed over fails alone, and the caller follows up its end. A
        draining worker still gets what was placed before."""
        placed = take_undelivered(work, worker_id, max_runs)
        if placed.state is None:
            raise NotFound(f"worker {worker_id} is not registered")
        if placed.state == WorkerState.LOST:
            raise _gone(worker_id)
        given = deliverable(work, worker_id, placed.rows, self._secrets)
        if not given:
            return []
        gangs = [item.row for item in given if item.row.replicas > 1]
        peers = gang_peers(work.connection, gangs)
        # never on a first attempt: the one-off path reads nothing more
        restored = refs_for_claim(
            work.connection, [item.row.run_id for item in given if item.row.number > 1]
        )
        work.after_commit.append(
            lambda: metrics.attempts_delivered(work.now, (item.row.placed_at for item in given))
        )
        assignments = [
            Assignment(
                attempt_id=row.id,
                attempt=row.number,
                run_id=row.run_id,
                tenant_id=row.tenant_id,
                idempotency_key=row.idempotency_key,
                spec=spec,
                gpu_indices=row.gpu_indices or [],
                rank=row.rank,
                world_size=row.replicas,
                peers=peers.get((row.run_id, row.number), []),
                task=task,
                secret_env=secret_env,
                checkpoint=restored.get(row.run_id),
            )
            for row, spec, task, secret_env in given
        ]
        if tracing.enabled():
            handed = list(zip(assignments, (item.row.placed_at for item in given), strict=True))
            work.after_commit.append(
                lambda: traces.attempts_handed_over(work.now, worker_id, handed)
            )
        return assignments


def named_workers(connection: Connection, token_id: str, name: str) -> list[str]:
    """The workers registered under this token and name (``herder up``'s local worker, one
    a start), lost or not."""
    return list(
        connection.execute(
            select(workers.c.id).where(workers.c.token_id == token_id, workers.c.name == name)
        ).scalars()
    )


def forget_workers(connection: Connection, worker_ids: Sequence[str]) -> None:
    """Delete these workers' rows (their attempts keep their ids)."""
    connection.execute(delete(workers).where(workers.c.id.in_(worker_ids)))


def _directives(
    connection: Connection, worker_id: str, running: Sequence[HeldAttempt], now: datetime
) -> Directives:
    """Cancelled ones (stop and report them), preempted ones (stop and report them
    preempted), and ones that are no longer its current attempts (kill, report nothing)."""
    floor = live_floor(connection, now)
    current = connection.execute(
        select(
            attempts.c.id, attempts.c.number, attempts.c.preempt_requested_at,
            runs.c.cancel_requested, runs.c.suspend_requested,
        )
        .join(runs, runs.c.id == attempts.c.run_id)
        .where(attempts.c.worker_id == worker_id, attempts.c.state == AttemptState.RUNNING,
               attempts.c.run_id >= floor, runs.c.id >= floor)
    ).all()  # fmt: skip
    orders = stop_orders(
        [
            StoppableAttempt(row.id, row.number, row.cancel_requested,
                             row.preempt_requested_at is not None, row.suspend_requested)
            for row in current
        ],
        [(item.attempt_id, item.attempt) for item in running],
    )  # fmt: skip
    return Directives(cancel=orders.cancel, drop=orders.drop, preempt=orders.preempt)


def _record_stale(work: Work, worker_id: str, stale: Sequence[HeldAttempt]) -> None:
    """A heartbeat naming attempts that are no longer current: say so in their runs."""
    numbers = {item.attempt_id: item.attempt for item in stale}
    rows = work.connection.execute(
        select(attempts.c.id, attempts.c.run_id, attempts.c.state).where(
            attempts.c.id.in_(list(numbers)), attempts.c.worker_id == worker_id
        )
    ).all()
    record_events(
        work.connection,
        work.now,
        [
            Event(
                row.run_id,
                f"refused a heartbeat for attempt {numbers[row.id]}, which is {row.state}: "
                "the worker was told to kill it",
                worker_actor(worker_id),
                attempt=numbers[row.id],
            )
            for row in rows
        ],
    )


def _gone(worker_id: str) -> Gone:
    return Gone(
        f"worker {worker_id} was declared lost and its attempts given to others; "
        "kill what it runs and register again"
    )
