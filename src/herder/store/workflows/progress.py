"""The facts a workflow run's walk reads (``app.follow_ups.advance_run`` moves it on inside
the unit of work that ended one of its task runs, or started, resumed, repaired or cancelled
it): never a scan of DAGs.

Read once, decide once, apply once. The workflow run's row is locked first, so two of its
tasks ending at once decide one after the other, each seeing the other's end; then its facts
are read in one go — its version's DAG, every run it has made counted by task, repair and
state (one ``GROUP BY``: a fan-out of 1,000 is a few counts at each instance's end, not
1,000 rows), the runs whose outputs a start may pass on, the tenant's room — and
``domain.workflows.walk`` decides; the unit of work applies the runs it makes (a unique
index on task instance and repair makes a repeated start nothing) and the workflow run's
end, whose follow-up (``app.follow_ups``) frees its slot.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from herder.domain.queue_room import QueueRoom
from herder.domain.workflows.states import WorkflowRunState
from herder.domain.workflows.task_runs import PinnedRun
from herder.domain.workflows.walk import (
    RUN_STATES,
    RunTally,
    TaskRunFact,
    WalkFacts,
    current_runs,
    outputs_wanted,
    tallied_board,
)
from herder.store.schema import runs, tenants, workflow_runs
from herder.store.unit import Work
from herder.store.workflows.definitions import dag_of


def read_walk(work: Work, row: Any, room: QueueRoom) -> WalkFacts | None:
    """The walk's facts of the locked run ``row``, with its tenant's ``room``; None for a
    run that is not running."""
    state = WorkflowRunState(row.state)
    if state is not WorkflowRunState.RUNNING:
        return None
    repaired = frozenset(row.repaired_tasks or ())
    dag = dag_of(work.connection, row.workflow_id, row.version)
    tallies = tallies_of(work.connection, row.id)
    wanted = outputs_wanted(dag, tallied_board(current_runs(tallies, row.repair, repaired)))
    return WalkFacts(
        workflow_run=pinned(row),
        state=state,
        repaired_tasks=repaired,
        cancel_requested=row.cancel_requested,
        dag=dag,
        task_runs=_with_outputs(work.connection, row.id, wanted),
        room=room,
        tallies=tallies,
    )


def lock(connection: Connection, workflow_run_id: str) -> Any:
    """The workflow run's row, locked, with its tenant's quotas (``tenant_quotas``): the
    walk's room reads them next (``queue_room.ReadQuotas``)."""
    return connection.execute(
        select(workflow_runs, tenants.c.quotas.label("tenant_quotas"))
        .outerjoin(tenants, tenants.c.id == workflow_runs.c.tenant_id)
        .where(workflow_runs.c.id == workflow_run_id)
        .with_for_update(of=workflow_runs)
    ).first()


def pinned(row: Any) -> PinnedRun:
    return PinnedRun(row.id, row.tenant_id, row.params, row.jobs, row.repair, row.backfill_id,
                     row.created_by)  # fmt: skip


def tallies_of(connection: Connection, workflow_run_id: str) -> list[RunTally]:
    """Every run the workflow run has made, over every repair, counted by task, repair and
    state: a few rows however many instances its fan-outs have."""
    found = connection.execute(
        select(
            runs.c.task_name,
            func.min(runs.c.map_index),
            runs.c.repair,
            runs.c.state,
            func.count(),
        )
        .where(runs.c.workflow_run_id == workflow_run_id)
        .group_by(runs.c.task_name, runs.c.repair, runs.c.state)
    ).all()
    return [
        RunTally(task_name, first, repair, RUN_STATES[state], count)
        for task_name, first, repair, state, count in found
    ]


def _with_outputs(
    connection: Connection, workflow_run_id: str, tasks: set[str]
) -> list[TaskRunFact]:
    """The runs of these tasks, over every repair, with their outputs."""
    if not tasks:
        return []
    found = connection.execute(
        select(
            runs.c.task_name, runs.c.map_index, runs.c.repair, runs.c.state, runs.c.output
        ).where(runs.c.workflow_run_id == workflow_run_id, runs.c.task_name.in_(sorted(tasks)))
    )
    return [
        TaskRunFact(run.task_name, run.map_index, run.repair, RUN_STATES[run.state], run.output)
        for run in found
    ]
