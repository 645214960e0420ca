"""Workflow runs as users see them: read with every task's state and reason, listed; what
starting one (under an idempotency key) reads. Started, cancelled, suspended, resumed,
repaired and an approval decided: ``app.workflows``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from herder.domain.errors import NotFound
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.states import RunState
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.models import TaskRun, WorkflowRun, WorkflowRunDetail
from herder.domain.workflows.progress import WorkflowRunState, advance
from herder.domain.workflows.spec import TaskKind
from herder.domain.workflows.waits import approval_message
from herder.domain.workflows.walk import board_of, current_runs
from herder.store.database import Database
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.schema import runs, workflow_runs
from herder.store.workflows.definitions import dag_of
from herder.store.workflows.starts import workflow_row
from herder.store.workflows.waits import FORGOTTEN_PER_PASS, forget_ended

_TASK_RUN_COLUMNS = (
    runs.c.id, runs.c.task_name, runs.c.map_index, runs.c.repair, runs.c.state, runs.c.reason,
    runs.c.attempt_count, runs.c.started_at, runs.c.finished_at, runs.c.waiting_reason,
    runs.c.output,
)  # fmt: skip


def workflow_run(row: Any) -> WorkflowRun:
    return WorkflowRun.model_validate(
        {field: getattr(row, field) for field in row._fields if field in WorkflowRun.model_fields}
    )


def _with_approvals(connection: Connection, items: Sequence[WorkflowRun]) -> list[WorkflowRun]:
    """Each run with its approval tasks waiting for a decision, in one query for all."""
    active = [run.id for run in items if not run.state.is_terminal]
    if not active:
        return list(items)
    waiting: dict[str, list[str]] = {}
    for workflow_run_id, task_name in connection.execute(
        select(runs.c.workflow_run_id, runs.c.task_name)
        .where(
            runs.c.workflow_run_id.in_(active),
            runs.c.state == RunState.WAITING,
            runs.c.job_name == TaskKind.APPROVAL.job_name,
        )
        .order_by(runs.c.task_name, runs.c.map_index)
    ):
        waiting.setdefault(workflow_run_id, []).append(task_name)
    return [
        run.model_copy(update={"awaiting_approval": waiting[run.id]}) if run.id in waiting else run
        for run in items
    ]


class WorkflowRunRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, tenant_id: str, workflow_run_id: str) -> WorkflowRunDetail:
        with self._db.read() as connection:
            run = read_workflow_run(connection, tenant_id, workflow_run_id)
            row = connection.execute(
                select(workflow_runs).where(workflow_runs.c.id == workflow_run_id)
            ).one()
            dag = dag_of(connection, row.workflow_id, row.version)
            return WorkflowRunDetail(**run.model_dump(), tasks=_tasks(connection, row, dag))

    def list(
        self,
        tenant_id: str,
        *,
        workflow_id: str | None = None,
        state: WorkflowRunState | None = None,
        created_by: str | None = None,
        page: PageRequest = PageRequest(),
    ) -> Page[WorkflowRun]:
        query = select(workflow_runs).where(workflow_runs.c.tenant_id == tenant_id)
        if workflow_id is not None:
            query = query.where(workflow_runs.c.workflow_id == workflow_id)
        if created_by is not None:
            query = query.where(workflow_runs.c.created_by == created_by)
        if state is not None:
            query = query.where(workflow_runs.c.state == state)
        with self._db.read() as connection:
            listed = page_of(connection, query, workflow_runs.c.id, workflow_run, page)
            return listed.model_copy(update={"items": _with_approvals(connection, listed.items)})

    def forget_ended_waits(self) -> bool:
        """Maintenance: drop a batch of ended event waits; whether more may be left."""
        with self._db.write() as connection:
            return forget_ended(connection) == FORGOTTEN_PER_PASS


def read_workflow_run(connection: Connection, tenant_id: str, workflow_run_id: str) -> WorkflowRun:
    """The tenant's workflow run as users see it, with its approval tasks waiting."""
    row = owned_row(connection, workflow_runs, tenant_id, workflow_run_id, "workflow run")
    return _with_approvals(connection, [workflow_run(row)])[0]


def lock_workflow(connection: Connection, tenant_id: str, workflow_id: str) -> None:
    """Hold the workflow: two starts under one new key wait for each other."""
    if workflow_row(connection, tenant_id, workflow_id) is None:
        raise NotFound(f"workflow {workflow_id} not found")


def by_idempotency_key(connection: Connection, tenant_id: str, key: str) -> Any:
    """The row of the tenant's workflow run started under this key (None: none)."""
    return connection.execute(
        select(workflow_runs).where(
            workflow_runs.c.tenant_id == tenant_id, workflow_runs.c.idempotency_key == key
        )
    ).first()


def _tasks(connection: Connection, row: Any, dag: Dag) -> list[TaskRun]:
    """Every task instance: its current run, or — pending — why it waits."""
    found = connection.execute(
        select(*_TASK_RUN_COLUMNS)
        .where(runs.c.workflow_run_id == row.id)
        .order_by(runs.c.map_index)
    ).all()
    current = current_runs(found, row.repair, row.repaired_tasks or ())
    state = WorkflowRunState(row.state)
    waiting = (
        advance(dag, board_of(current), row.params, {}, cancelling=row.cancel_requested).waiting
        if state is WorkflowRunState.RUNNING
        else {}
    )
    listed = []
    for task in dag.spec.tasks:
        common = {"task": task.name, "job": task.job, "depends_on": task.depends_on,
                  "trigger_rule": task.trigger_rule, "kind": task.kind,
                  "message": approval_message(task.approval, row.params)
                  if task.approval else None}  # fmt: skip
        if task.name not in current:
            not_started = _not_started(state, task.name, waiting)
            listed.append(TaskRun(**common, map_index=-1, **not_started))
        for f in current.get(task.name, []):
            listed.append(
                TaskRun(
                    **common,
                    map_index=f.map_index,
                    state=RunState(f.state),
                    reason=f.reason or f.waiting_reason,
                    run_id=f.id,
                    repair=f.repair,
                    attempt_count=f.attempt_count,
                    started_at=f.started_at,
                    finished_at=f.finished_at,
                    output=f.output,
                )
            )
    return listed


def _not_started(state: WorkflowRunState, task: str, waiting: dict[str, str]) -> dict[str, Any]:
    if state is WorkflowRunState.RUNNING:
        return {"state": RunState.PENDING, "reason": waiting.get(task, "being decided")}
    if state is WorkflowRunState.QUEUED:
        return {"state": RunState.PENDING, "reason": "the workflow run waits for a slot "
                "(max_active_runs)"}  # fmt: skip
    if state is WorkflowRunState.SUSPENDED:
        return {"state": RunState.PENDING, "reason": "the workflow run is suspended: no task "
                "starts until it is resumed"}  # fmt: skip
    return {"state": RunState.CANCELLED, "reason": f"never started: the workflow run {state}"}
