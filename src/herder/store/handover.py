"""What a claim hands a worker: the attempts placed on it and not yet handed over, with
their specs, their workflow task and the secrets their spec names (opened at the handover),
and a gang's peers. One whose stored row cannot be read, or whose secret is gone, fails here
rather than failing the whole claim."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError
from sqlalchemy import (
    BindParameter,
    Connection,
    Select,
    Text,
    Update,
    and_,
    bindparam,
    cast,
    select,
    true,
    update,
)

from herder.domain.actors import worker_actor
from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.facts import Ending
from herder.domain.lifecycle.settle import fail_unreadable
from herder.domain.lifecycle.stops import before_delivery, pending_stop
from herder.domain.models import AssignedTask
from herder.domain.states import AttemptState
from herder.store.history.live import live_floor
from herder.store.runs.facts import active_runs
from herder.store.schema import attempts, runs, workers
from herder.store.secrets import SecretRepository, SecretUnavailable
from herder.store.work import Work

log = logging.getLogger("herder.store")


class Placed(NamedTuple):
    """The worker's state (None: no such worker) and its attempts to hand over."""

    state: str | None
    rows: Sequence[Any]


def take_undelivered(work: Work, worker_id: str, limit: int) -> Placed:
    """The worker's state, and its placed attempts not handed over yet, oldest first, now
    marked handed over (each only if no other claim of the worker marked it first: a retried
    one beside the first, say). One statement on PostgreSQL (the marking ``UPDATE …
    RETURNING`` joined to the worker's row and the runs); a read and a mark on SQLite.

    No ORDER BY in the read: with one, PostgreSQL walked the slice's attempts in id order
    looking for the worker's few (3,200 rows for one claim at 3,000 runs); by worker and state
    it reads only those, which the dispatcher keeps to the worker's free slots, so ``limit``
    rarely cuts. One that is stopped or fails at the handover (``deliverable``) ends in the
    same unit of work, marked or not."""
    statements = _handover_statements(work.connection.dialect.name)
    params = {
        "to_worker": worker_id, "limit": limit, "now": work.now,
        "live_floor": live_floor(work.connection, work.now),  # older slices are pruned
    }  # fmt: skip
    rows = work.connection.execute(statements.read, params).all()
    if not rows:
        return Placed(None, [])
    found = [row for row in rows if row.id is not None]
    if statements.mark is not None and found:
        marked = set(
            work.connection.execute(
                statements.mark, {"ids": [row.id for row in found], "now": work.now}
            ).scalars()
        )
        found = [row for row in found if row.id in marked]
    return Placed(rows[0].worker_state, sorted(found, key=lambda row: row.id))


class _Handover(NamedTuple):
    read: Select[Any]  # the worker's state joined to its undelivered attempts (marked: PG)
    mark: Update | None  # SQLite's second statement: mark those the read found


_ATTEMPT_COLUMNS = ("id", "number", "rank", "gpu_indices", "started_at", "run_id",
                    "preempt_requested_at", "preempt_reason")  # fmt: skip


@functools.cache
def _handover_statements(dialect: str) -> _Handover:
    floor: BindParameter[str] = bindparam("live_floor")

    def waiting(table: Any) -> Any:
        return and_(
            table.c.worker_id == bindparam("to_worker"),
            table.c.state == AttemptState.RUNNING,
            table.c.delivered_at.is_(None),
            table.c.run_id >= floor,
        )

    mark = None
    if dialect == "postgresql":  # marked as read: only what no other claim marked first
        candidate = attempts.alias("candidate")
        source: Any = (
            update(attempts)
            .where(
                attempts.c.id.in_(
                    select(candidate.c.id).where(waiting(candidate)).limit(bindparam("limit"))
                ),
                attempts.c.run_id >= floor,  # only the live slices are looked at
                attempts.c.state == AttemptState.RUNNING,
                attempts.c.delivered_at.is_(None),
            )
            .values(delivered_at=bindparam("now"))
            .returning(*(attempts.c[name] for name in _ATTEMPT_COLUMNS))
            .cte("marked")
        )
    else:
        columns = (attempts.c[name] for name in _ATTEMPT_COLUMNS)
        source = select(*columns).where(waiting(attempts)).subquery("placed")
        mark = (
            update(attempts)
            .where(
                attempts.c.id.in_(bindparam("ids", expanding=True)),
                attempts.c.delivered_at.is_(None),
            )
            .values(delivered_at=bindparam("now"))
            .returning(attempts.c.id)
        )
    placed = source.join(runs, and_(runs.c.id == source.c.run_id, runs.c.id >= floor))
    read = (
        select(
            workers.c.state.label("worker_state"),
            source.c.id, source.c.number, source.c.rank, source.c.gpu_indices,
            source.c.started_at.label("placed_at"), runs.c.id.label("run_id"), runs.c.tenant_id,
            cast(runs.c.spec, Text).label("spec"), runs.c.idempotency_key, runs.c.replicas,
            runs.c.cancel_requested,
            runs.c.suspend_requested, source.c.preempt_requested_at, source.c.preempt_reason,
            runs.c.workflow_run_id, runs.c.task_name, runs.c.map_index, runs.c.map_item,
            runs.c.inputs,
        )
        .select_from(workers.outerjoin(placed, true()))
        .where(workers.c.id == bindparam("to_worker"))
        .limit(bindparam("limit"))
    )  # fmt: skip
    return _Handover(read, mark)


class Deliverable(NamedTuple):
    row: Any
    spec: JobSpec
    task: AssignedTask | None  # for a workflow's task: which one
    secret_env: dict[str, str]  # the values of the secrets its spec names, by variable


def deliverable(
    work: Work, worker_id: str, placed: Sequence[Any], secret_store: SecretRepository
) -> list[Deliverable]:
    """The placed attempts to hand over, with their specs and the secrets they name, opened
    now, so a secret's new value reaches every attempt that starts after it was set. One
    cancelled or preempted before it was handed over ends here instead (the worker would
    start it before it heard the stop); one whose stored run cannot be read, or whose secret
    is gone or does not open, fails (one broken row must not fail the batch)."""
    stopped = []
    for row in placed:
        stop = pending_stop(
            row.cancel_requested,
            row.preempt_requested_at is not None,
            suspend_requested=row.suspend_requested,
        )
        if stop is not None:
            outcome, why = before_delivery(stop, row.preempt_reason)
            stopped.append(Ending(row.id, row.number, outcome, why))
    work.settle(stopped, worker_actor(worker_id))
    halted = {ending.attempt_id for ending in stopped}
    given = []
    failed: set[str] = set()  # runs failed here: a gang's other members went with them
    for row in placed:
        if row.id in halted or row.run_id in failed:
            continue
        try:
            spec = _spec_of(row.spec)
            task = _task_of(row)
        except ValidationError as error:
            _fail_unreadable(work, worker_id, row, error)
            failed.add(row.run_id)
            continue
        try:
            secret_env = secret_store.reveal(work.connection, row.tenant_id, spec.secrets)
        except SecretUnavailable as unavailable:
            _fail_unstartable(work, worker_id, row, unavailable.detail)
            failed.add(row.run_id)
            continue
        given.append(Deliverable(row, spec, task, secret_env))
    return given


# A spec longer than this (a tenant's long args or env) is validated each time: a tenant
# submitting many distinct large specs cannot grow the cache past 1,024 of 16 KiB (16 MiB).
CACHED_SPEC_CHARS = 16 * 1024


def _spec_of(stored: str) -> JobSpec:
    """A run's stored spec, read once a process when it is small: a job's runs share it
    (their text is alike), and a spec is frozen, so one value serves every assignment of it.
    Validating each run's was 4% of the server's CPU at throughput. What does not validate
    raises every time."""
    if len(stored) > CACHED_SPEC_CHARS:
        return JobSpec.model_validate_json(stored)
    return _cached_spec(stored)


@functools.lru_cache(maxsize=1024)
def _cached_spec(stored: str) -> JobSpec:
    return JobSpec.model_validate_json(stored)


def _task_of(row: Any) -> AssignedTask | None:
    if row.workflow_run_id is None:
        return None
    return AssignedTask(
        workflow_run_id=row.workflow_run_id,
        task_name=row.task_name,
        map_index=row.map_index,
        map_item=row.map_item,
        inputs=row.inputs or {},
    )


def _fail_unreadable(work: Work, worker_id: str, row: Any, error: ValidationError) -> None:
    """A stored run whose spec (or task) no longer validates is a server bug (it was checked
    when it was stored): logged loudly, and the run fails with a reason its owner can read."""
    log.error("server bug: run %s's stored row does not validate: %s", row.run_id, error)
    reason = f"the stored run could not be read: {_first_problem(error)}"
    _fail_unstartable(work, worker_id, row, reason)


def _fail_unstartable(work: Work, worker_id: str, row: Any, reason: str) -> None:
    """The run fails, with no retry: the same row would fail again (a secret that is gone
    must be set again, then the run rerun)."""
    (active,) = active_runs(work.connection, [row.run_id])
    work.apply(fail_unreadable(active.run, active.members, reason, claimer=worker_id, now=work.now))


def _first_problem(error: ValidationError) -> str:
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"]) or "spec"
    return f"{where}: {problem['msg']} ({error.error_count()} problem(s) in all)"


def gang_peers(connection: Connection, members: list[Any]) -> dict[tuple[str, int], list[str]]:
    """Each gang's member addresses by rank (the worker's address, or its id if it gave none)."""
    if not members:
        return {}
    rows = connection.execute(
        select(attempts.c.run_id, attempts.c.number, attempts.c.rank, workers.c.address,
               workers.c.id.label("worker_id"))
        .join(workers, workers.c.id == attempts.c.worker_id)
        .where(attempts.c.run_id.in_({member.run_id for member in members}))
        .order_by(attempts.c.rank)
    ).all()  # fmt: skip
    peers: dict[tuple[str, int], list[str]] = {}
    for row in rows:
        peers.setdefault((row.run_id, row.number), []).append(row.address or row.worker_id)
    return peers
