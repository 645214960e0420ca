"""Applying a lifecycle decision's ``Changes`` to runs, attempts and their events (and to
the workflow runs and backfills that own runs: ``owner_writes``): a few
set-based statements whatever the size of the batch, each write guarded by the state (and
fencing number) it expects. A guard that no longer holds changes nothing, its event is not
recorded, and the caller is told which writes held.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Executable, Update, bindparam, update

from herder.domain.lifecycle.changes import AttemptEnd, Changes, Event, NewRun, RunMove
from herder.domain.queue_room import QUEUED_WAITING
from herder.domain.states import AttemptState, RunState
from herder.store.database import Database, deferred
from herder.store.dialect import (
    Among,
    insert_rows,
    insert_rows_ignoring_duplicates,
    rows_insert,
    update_each,
    updated_each,
)
from herder.store.history.live import live_floor
from herder.store.limits import record_run_keys, run_keys
from herder.store.notifications import send
from herder.store.runs.owner_writes import (
    insert_backfills,
    insert_workflow_runs,
    move_backfills,
    move_workflow_runs,
)
from herder.store.schema import attempts, run_events, runs
from herder.store.usage import charge_ended, returned_when_ended


@dataclass(frozen=True)
class Applied:
    inserted: frozenset[str]  # run ids
    ended: frozenset[str]  # attempt ids
    moved: frozenset[str]  # run ids
    workflow_runs_moved: frozenset[str] = frozenset()
    backfills_moved: frozenset[str] = frozenset()
    workflow_runs_inserted: frozenset[str] = frozenset()


def apply_changes(
    database: Database, connection: Connection, now: datetime, changes: Changes
) -> Applied:
    # What owns runs first: a workflow run's or backfill's runs reference it.
    workflow_runs_inserted = insert_workflow_runs(
        database, connection, changes.new_workflow_runs, now
    )
    insert_backfills(connection, changes.new_backfills, now)
    inserted = _insert_runs(connection, changes.new_runs, now)
    ended = _end_attempts(connection, changes.attempt_ends, now)
    moved = _move_runs(connection, changes.moves)
    _request_stops(connection, changes.cancel_requests, cancel_requested=True)
    # Only a run not being cancelled: a cancel wins (``domain.lifecycle.stops``).
    _request_stops(
        connection,
        changes.suspend_requests,
        runs.c.cancel_requested.is_(False),
        suspend_requested=True,
    )
    _hand_over_again(connection, changes.handovers_lost)
    record_events(
        connection,
        now,
        [
            *(new.event for new in changes.new_runs if new.id in inserted),
            *(move.event for move in changes.moves if move.run_id in moved),
            *changes.events,
        ],
    )
    workflow_runs_moved = move_workflow_runs(connection, changes.workflow_run_moves)
    backfills_moved = move_backfills(connection, changes.backfill_moves)
    send(database, connection, changes.notices)
    return Applied(
        frozenset(inserted),
        frozenset(ended),
        frozenset(moved),
        frozenset(workflow_runs_moved),
        frozenset(backfills_moved),
        frozenset(workflow_runs_inserted),
    )


def record_events(connection: Connection, now: datetime, events: Iterable[Event]) -> None:
    """Written with the transaction's other events in one statement at its end
    (``database.deferred``)."""
    rows = [
        {
            "run_id": event.run_id,
            "at": now,
            "from_state": event.source,
            "to_state": event.target,
            "attempt": event.attempt,
            "actor": event.actor,
            "message": event.message,
        }
        for event in events
    ]
    pending = deferred(connection, "run_events", _events_insert)
    if pending is None:
        insert_rows(connection, run_events, rows)
    else:
        pending.extend(rows)


def _events_insert(connection: Connection, rows: list[Any]) -> tuple[Executable, Any]:
    return rows_insert(connection, run_events, rows)


def new_run_row(new: NewRun, now: datetime, *, stored_spec: Any = None) -> dict[str, Any]:
    """The row of a new run: queued, held ``pending`` past its tenant's ``max_queued`` (the
    reason is why it waits), or a workflow task already ended without running.
    ``stored_spec``: its spec's value, when the caller has it (dumping a spec is a run's
    costliest field: a batch's runs share their job's, dumped once)."""
    spec = new.spec
    queued = new.state is RunState.QUEUED
    held = new.state is RunState.PENDING
    task = new.task
    return {
        "id": new.id,
        "tenant_id": new.tenant_id,
        "job_id": new.job_id,
        "job_name": new.job_name,
        "state": new.state,
        "priority": spec.priority.rank,
        "spec": spec.model_dump(mode="json") if stored_spec is None else stored_spec,
        "cpu_milli": spec.resources.cpu_milli,
        "memory_mb": spec.resources.memory_mb,
        "gpus": spec.resources.gpus,
        "artifact": spec.artifact,
        "idempotency_key": new.idempotency_key,
        "schedule_id": new.schedule_id,
        "scheduled_for": new.scheduled_for,
        "attempt_count": 0,
        "cancel_requested": False,
        "suspend_requested": False,
        "suspensions": 0,
        "created_at": now,
        "queued_at": now if queued else None,
        "started_at": None,
        "finished_at": now if new.state.is_terminal else None,
        "exit_code": None,
        "reason": None if held else new.reason,
        "retry_at": None,
        "start_deadline": new.start_deadline,
        "rerun_of": new.rerun_of,
        "replicas": spec.replicas,
        "requires": spec.placement_requires or None,
        "pool": spec.pool,
        "preemptible": spec.preemptible,
        "preemptions": 0,
        "preempted_at": None,
        "waiting_reason": QUEUED_WAITING if queued else new.reason if held else None,
        "workflow_run_id": task.workflow_run_id if task else None,
        "task_name": task.task_name if task else None,
        "map_index": task.map_index if task else None,
        "repair": task.repair if task else None,
        "map_item": task.map_item if task else None,
        "inputs": task.inputs if task else None,
        "output": None,
        "backfill_id": new.backfill_id,
        "run_at": new.run_at,
        "deadline_at": new.deadline_at,
        "deadline_missed_at": None,
        "created_by": new.creator,
    }


def _insert_runs(connection: Connection, new_runs: Sequence[NewRun], now: datetime) -> set[str]:
    """Insert each new run unless its unique key (idempotency key, schedule and nominal
    time) already has one; the ids inserted."""
    if not new_runs:
        return set()
    keys = run_keys(connection, new_runs)
    dumped: dict[int, Any] = {}  # by spec object: runs with no overrides share their job's
    for new in new_runs:
        if id(new.spec) not in dumped:
            dumped[id(new.spec)] = new.spec.model_dump(mode="json")
    rows = [
        new_run_row(new, now, stored_spec=dumped[id(new.spec)]) | {"limit_keys": keys.get(new.id)}
        for new in new_runs
    ]
    inserted = set(insert_rows_ignoring_duplicates(connection, runs, rows, runs.c.id))
    record_run_keys(connection, new_runs, keys, inserted)
    return inserted


@functools.cache
def _end_attempt(dialect: str) -> Update:
    """End one running attempt (fenced), returning what charging it needs."""
    return (
        update(attempts)
        .where(
            attempts.c.id == bindparam("e_id"),
            attempts.c.state == AttemptState.RUNNING,
            attempts.c.run_id >= bindparam("live_floor"),  # as the charge's subqueries
        )
        .values(
            state=bindparam("e_state"),
            reason=bindparam("e_reason"),
            exit_code=bindparam("e_exit_code"),
            finished_at=bindparam("e_now"),
            cpu_user_seconds=bindparam("e_cpu_user"),
            cpu_system_seconds=bindparam("e_cpu_system"),
            max_rss_kb=bindparam("e_max_rss"),
            stopped_by=bindparam("e_stopped_by"),
            checkpoint_refused=bindparam("e_checkpoint_refused"),
        )
        .returning(*returned_when_ended(dialect))
    )


def _end_attempts(connection: Connection, ends: Sequence[AttemptEnd], now: datetime) -> set[str]:
    floor = live_floor(connection, now) if ends else ""
    rows = [
        {
            "e_id": end.attempt_id, "e_state": end.state, "e_reason": end.reason,
            "e_exit_code": end.exit_code, "e_now": now, "e_cpu_user": end.cpu_user_seconds,
            "e_cpu_system": end.cpu_system_seconds, "e_max_rss": end.max_rss_kb,
            "e_stopped_by": end.stopped_by,
            "e_checkpoint_refused": end.checkpoint_refused, "live_floor": floor,
        }
        for end in ends
    ]  # fmt: skip
    ended = updated_each(connection, _end_attempt(connection.dialect.name), rows)
    charge_ended(connection, ended, now, floor)
    return {row[0] for row in ended}


def _move_runs(connection: Connection, moves: Sequence[RunMove]) -> set[str]:
    """One statement per shape of move (the columns it sets, whether fenced); many unfenced
    moves alike (a fan-out's cancel): one ``UPDATE … WHERE id IN …`` for them all."""
    shapes: dict[tuple[bool, tuple[str, ...]], list[RunMove]] = defaultdict(list)
    for move in moves:
        shapes[move.attempt is not None, tuple(sorted(move.values))].append(move)
    moved: set[str] = set()
    for (fenced, columns), shaped in shapes.items():
        group = shaped
        if not fenced:
            group, alike = _alike(shaped)
            for (source, target, values), run_ids in alike.items():
                moved.update(_move_alike(connection, source, target, dict(values), run_ids))
        rows = [
            {
                "m_id": move.run_id, "m_source": move.source, "m_target": move.target,
                **({"m_attempt": move.attempt} if fenced else {}),
                **{f"v_{column}": move.values[column] for column in columns},
            }
            for move in group
        ]  # fmt: skip
        moved.update(update_each(connection, _move_statement(fenced, columns), rows))
    return moved


_Alike = tuple[RunState, RunState, tuple[tuple[str, Any], ...]]
ALIKE_AT_LEAST = 16  # moves alike past which one statement takes them all


def _alike(moves: Sequence[RunMove]) -> tuple[list[RunMove], dict[_Alike, list[str]]]:
    """The moves alike (same states and values) in batches worth one statement; the rest."""
    by_kind: dict[_Alike, list[RunMove]] = defaultdict(list)
    rest: list[RunMove] = []
    for move in moves:
        kind = (move.source, move.target, tuple(sorted(move.values.items())))
        try:
            by_kind[kind].append(move)
        except TypeError:  # a value that cannot be compared whole (a JSON document)
            rest.append(move)
    alike = {}
    for kind, group in by_kind.items():
        if len(group) >= ALIKE_AT_LEAST:
            alike[kind] = [move.run_id for move in group]
        else:
            rest += group
    return rest, alike


def _move_alike(
    connection: Connection,
    source: RunState,
    target: RunState,
    values: dict[str, Any],
    run_ids: Sequence[str],
) -> list[str]:
    among = Among(connection.dialect.name, runs.c.id, "m_ids")
    statement = (
        update(runs)
        .where(among.condition, runs.c.state == source)
        .values(state=target, **values)
        .returning(runs.c.id)
    )
    moved: list[str] = []
    for batch in among.batches(sorted(run_ids)):
        moved += connection.execute(statement, batch).scalars()
    return moved


def _move_statement(fenced: bool, columns: tuple[str, ...]) -> Update:
    statement = update(runs).where(
        runs.c.id == bindparam("m_id"), runs.c.state == bindparam("m_source")
    )
    if fenced:
        statement = statement.where(runs.c.attempt_count == bindparam("m_attempt"))
    values: dict[str, Any] = {column: bindparam(f"v_{column}") for column in columns}
    return statement.values(state=bindparam("m_target"), **values).returning(runs.c.id)


def _hand_over_again(connection: Connection, attempt_ids: Sequence[str]) -> None:
    """Undelivered again: the worker's next claim hands these attempts over (if still
    running)."""
    if attempt_ids:
        connection.execute(
            update(attempts)
            .where(attempts.c.id.in_(attempt_ids), attempts.c.state == AttemptState.RUNNING)
            .values(delivered_at=None)
        )


def _request_stops(
    connection: Connection, run_ids: Sequence[str], *guards: ColumnElement[bool], **flag: bool
) -> None:
    """Sets ``flag`` on those of ``run_ids`` still running (and passing ``guards``): their
    workers stop the attempts."""
    if run_ids:
        connection.execute(
            update(runs)
            .where(runs.c.id.in_(run_ids), runs.c.state == RunState.RUNNING, *guards)
            .values(**flag)
        )
