"""Workflow tasks that wait (``domain.workflows.waits``): their event waits recorded where an
event finds them, woken at their time by the starter, ended by an event or by a person's
approval — each in the unit of work that decides it, which moves the workflow run on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, select

from herder.domain.errors import Conflict, Invalid, NotFound
from herder.domain.event_evaluation import MAX_WAITS_PER_EVENT, Waiting
from herder.domain.lifecycle.changes import Changes, NewRun
from herder.domain.states import RunState
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.waits import arrived, decided, event_output, on_time
from herder.store.dialect import insert_rows
from herder.store.history.live import live_floor
from herder.store.owned import owned_row
from herder.store.schema import run_waits, runs, workflow_runs
from herder.store.unit import Work
from herder.store.workflows.definitions import dag_of

WOKEN_PER_PASS = 500  # waiting runs one starter pass decides
FORGOTTEN_PER_PASS = 5_000  # ended event waits one maintenance pass drops


def record_event_waits(work: Work, dag: Dag, new_runs: Sequence[NewRun], inserted: Any) -> None:
    """The event waits among the runs just inserted, where events of their name find them."""
    rows = []
    for new in new_runs:
        if new.task is None or new.state is not RunState.WAITING or new.id not in inserted:
            continue
        wait = dag.tasks[new.task.task_name].wait
        if wait is not None and wait.event is not None:
            rows.append({"run_id": new.id, "tenant_id": new.tenant_id,
                         "event_name": wait.event.name, "filter": wait.event.filter})  # fmt: skip
    insert_rows(work.connection, run_waits, rows)


def wake_due(work: Work) -> int:
    """End the waiting runs whose time has come (a timed wait's end, a timeout); how many."""
    connection = work.connection
    due = connection.execute(
        select(runs.c.id, runs.c.task_name, workflow_runs.c.workflow_id, workflow_runs.c.version)
        .join(workflow_runs, workflow_runs.c.id == runs.c.workflow_run_id)
        .where(
            runs.c.state == RunState.WAITING,
            runs.c.run_at <= work.now,
            runs.c.id >= live_floor(connection, work.now),
        )
        .order_by(runs.c.run_at)
        .limit(WOKEN_PER_PASS)
    ).all()
    moves = []
    for run in due:
        waiting = dag_of(connection, run.workflow_id, run.version).tasks[run.task_name].waiting
        if waiting is not None:
            moves.append(on_time(run.id, waiting, work.now))
    work.apply(Changes(moves=tuple(moves)))
    return len(due)


def waiting_for(connection: Connection, tenant_id: str, name: str) -> list[Waiting]:
    """The tenant's event waits on events of ``name``, oldest first: at most the
    ``MAX_WAITS_PER_EVENT`` one event looks at."""
    rows = connection.execute(  # most events have no wait: one probe of the index
        select(run_waits.c.run_id, run_waits.c.filter)
        .where(run_waits.c.tenant_id == tenant_id, run_waits.c.event_name == name)
        .order_by(run_waits.c.run_id)
        .limit(MAX_WAITS_PER_EVENT)
    )
    return [Waiting(row.run_id, row.filter) for row in rows]


def resume_waiting(
    work: Work, event_id: str, name: str, payload: Any, awaited: Sequence[str]
) -> list[str]:
    """End the waits the event satisfies (``awaited``, decided before this unit of work)
    that still wait; the runs it ended."""
    if not awaited:
        return []
    connection = work.connection
    matched = list(
        connection.execute(
            select(runs.c.id).where(runs.c.id.in_(awaited), runs.c.state == RunState.WAITING)
        ).scalars()
    )
    output = event_output(event_id, name, payload)
    moves = tuple(arrived(run_id, output, work.now) for run_id in matched)
    moved = work.apply(Changes(moves=moves)).moved
    connection.execute(delete(run_waits).where(run_waits.c.run_id.in_(matched)))
    return sorted(run_id for run_id in matched if run_id in moved)


def decide(
    work: Work,
    tenant_id: str,
    workflow_run_id: str,
    task_name: str,
    *,
    approved: bool,
    actor: str,
    comment: str | None,
) -> str:
    """Approve or reject the waiting approval task of the workflow run; its run's id.
    ``NotFound`` for another tenant's run or no such task, ``Invalid`` for a task that is
    not an approval, ``Conflict`` for one not waiting (decided, timed out, not reached)."""
    row = owned_row(
        work.connection, workflow_runs, tenant_id, workflow_run_id, "workflow run",
        columns=[workflow_runs.c.workflow_id, workflow_runs.c.version, workflow_runs.c.repair],
    )  # fmt: skip
    task = dag_of(work.connection, row.workflow_id, row.version).tasks.get(task_name)
    if task is None:
        raise NotFound(f"workflow run {workflow_run_id} has no task {task_name[:128]}")
    if task.approval is None:
        raise Invalid(f"task {task_name} is not an approval", field="task")
    run = _current_run(work.connection, workflow_run_id, task_name)
    if run is None or run.state != RunState.WAITING:
        now = "not reached yet" if run is None else str(run.state)
        raise Conflict(f"task {task_name} is {now}, not waiting for a decision")
    move = decided(run.id, approved=approved, actor=actor, comment=comment, now=work.now)
    if run.id not in work.apply(Changes(moves=(move,))).moved:
        raise Conflict(f"task {task_name} was decided meanwhile")
    return str(run.id)


def _current_run(connection: Connection, workflow_run_id: str, task_name: str) -> Any:
    """The task's run of the latest repair that ran it."""
    return connection.execute(
        select(runs.c.id, runs.c.state)
        .where(runs.c.workflow_run_id == workflow_run_id, runs.c.task_name == task_name)
        .order_by(runs.c.repair.desc())
        .limit(1)
    ).first()


def forget_ended(connection: Connection) -> int:
    """Drop event waits whose run ended otherwise (a timeout, a cancel); how many."""
    ended = (
        select(run_waits.c.run_id)
        .join(runs, runs.c.id == run_waits.c.run_id, isouter=True)
        .where((runs.c.state.is_(None)) | (runs.c.state != RunState.WAITING))
        .limit(FORGOTTEN_PER_PASS)
    )
    return int(connection.execute(delete(run_waits).where(run_waits.c.run_id.in_(ended))).rowcount)
