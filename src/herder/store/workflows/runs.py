"""Workflow runs as users see them: start one (with parameters, under an idempotency key and
the workflow's ``max_active_runs``), read it with every task's state and reason, list, cancel,
suspend, resume and repair in place."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from herder.clock import Clock
from herder.domain.errors import Conflict, NotFound
from herder.domain.lifecycle.cancel import Cause
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.states import RunState
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.models import TaskRun, WorkflowRun, WorkflowRunDetail
from herder.domain.workflows.progress import WorkflowRunState, advance
from herder.domain.workflows.repair import RepairFacts, RepairRequest, repair
from herder.domain.workflows.spec import TaskKind
from herder.domain.workflows.waits import approval_message
from herder.domain.workflows.walk import board_of, current_runs, tallied_board
from herder.store.database import Database
from herder.store.follow_ups import follow_up
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.schema import runs, workflow_runs
from herder.store.work import unit_of_work
from herder.store.workflows.definitions import dag_of, spec_of
from herder.store.workflows.progress import advance_run, lock, tallies_of
from herder.store.workflows.starts import cancel_in, start_in, workflow_row
from herder.store.workflows.suspension import resume_in, suspend_in
from herder.store.workflows.waits import FORGOTTEN_PER_PASS, decide, forget_ended

_TASK_RUN_COLUMNS = (
    runs.c.id, runs.c.task_name, runs.c.map_index, runs.c.repair, runs.c.state, runs.c.reason,
    runs.c.attempt_count, runs.c.started_at, runs.c.finished_at, runs.c.waiting_reason,
    runs.c.output,
)  # fmt: skip


def _workflow_run(row: Any) -> WorkflowRun:
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
    def __init__(self, database: Database, clock: Clock, rng: random.Random) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng

    def start(
        self,
        tenant_id: str,
        workflow_id: str,
        params: dict[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> tuple[WorkflowRun, bool]:
        """A new run of the workflow's current version, and whether it is new: a repeated
        idempotency key answers with the run it made."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            if idempotency_key is not None:
                self._lock_workflow(work.connection, tenant_id, workflow_id)
                existing = self._by_key(work.connection, tenant_id, idempotency_key)
                if existing is not None:
                    return _same_workflow(existing, workflow_id, idempotency_key), False
            run_id = start_in(work, tenant_id, workflow_id, params, idempotency_key=idempotency_key)
            if run_id is None:  # the same key, committed meanwhile
                raise Conflict(f"a run for Idempotency-Key {idempotency_key!r} was just made")
            follow_up(work)
            return self._read(work.connection, tenant_id, run_id), True

    def get(self, tenant_id: str, workflow_run_id: str) -> WorkflowRunDetail:
        with self._db.read() as connection:
            run = self._read(connection, tenant_id, workflow_run_id)
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
        page: PageRequest = PageRequest(),
    ) -> Page[WorkflowRun]:
        query = select(workflow_runs).where(workflow_runs.c.tenant_id == tenant_id)
        if workflow_id is not None:
            query = query.where(workflow_runs.c.workflow_id == workflow_id)
        if state is not None:
            query = query.where(workflow_runs.c.state == state)
        with self._db.read() as connection:
            listed = page_of(connection, query, workflow_runs.c.id, _workflow_run, page)
            return listed.model_copy(update={"items": _with_approvals(connection, listed.items)})

    def decide(
        self,
        tenant_id: str,
        workflow_run_id: str,
        task: str,
        *,
        approved: bool,
        actor: str,
        comment: str | None,
    ) -> str:
        """Approve or reject a waiting approval task (``store.workflows.waits.decide``); its
        run's id. The workflow run moves on in the same transaction."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            return decide(
                work, tenant_id, workflow_run_id, task, approved=approved, actor=actor,
                comment=comment,
            )  # fmt: skip

    def forget_ended_waits(self) -> bool:
        """Maintenance: drop a batch of ended event waits; whether more may be left."""
        with self._db.write() as connection:
            return forget_ended(connection) == FORGOTTEN_PER_PASS

    def cancel(self, tenant_id: str, workflow_run_id: str, *, actor: str = "user") -> WorkflowRun:
        """Queued and pending tasks are cancelled at once, running ones stopped by their
        workers; the run ends ``cancelled`` when the last of them has ended."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            run = self._read(work.connection, tenant_id, workflow_run_id)
            if run.state.is_terminal:
                raise Conflict(
                    f"workflow run {workflow_run_id} is already {run.state}; only active runs "
                    "can be cancelled"
                )
            cancel_in(work, workflow_run_id, Cause(actor))
            follow_up(work)  # what the applies touched, before it is read back
            return self._read(work.connection, tenant_id, workflow_run_id)

    def suspend(self, tenant_id: str, workflow_run_id: str, *, actor: str) -> WorkflowRun:
        """Its active task runs are suspended (running ones stopped by their workers, with
        grace) and it starts no task until resumed; a suspended one is answered as it is."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._read(work.connection, tenant_id, workflow_run_id)
            suspend_in(work, workflow_run_id, actor)
            follow_up(work)  # what the applies touched, before it is read back
            return self._read(work.connection, tenant_id, workflow_run_id)

    def resume(self, tenant_id: str, workflow_run_id: str, *, actor: str) -> WorkflowRun:
        """Its suspended task runs are queued again and every task that became ready while
        it was suspended starts."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._read(work.connection, tenant_id, workflow_run_id)
            resume_in(work, workflow_run_id, actor)
            follow_up(work)  # what the applies touched, before it is read back
            return self._read(work.connection, tenant_id, workflow_run_id)

    def repair(
        self,
        tenant_id: str,
        workflow_run_id: str,
        *,
        token: int,
        tasks: Sequence[str] | None = None,
        dependents: bool = False,
    ) -> WorkflowRun:
        """Run tasks of an ended run again, in place: by default every task that did not
        succeed or skip; with ``dependents``, everything downstream of them too. ``token``
        is the run's ``repair`` as last read: two repairs from one reading cannot both
        apply (409). Earlier runs of the repaired tasks stay in history."""
        with unit_of_work(self._db, self._clock, self._rng) as work:
            self._read(work.connection, tenant_id, workflow_run_id)
            row = lock(work.connection, workflow_run_id)
            found = tallies_of(work.connection, workflow_run_id)
            facts = RepairFacts(
                workflow_run_id,
                WorkflowRunState(row.state),
                row.repair,
                spec_of(work.connection, row.workflow_id, row.version),
                tallied_board(current_runs(found, row.repair, row.repaired_tasks or ())),
            )
            work.apply(repair(facts, RepairRequest(token, tasks, dependents), work.now))
            advance_run(work, workflow_run_id)
            follow_up(work)  # what the applies touched, before it is read back
            return self._read(work.connection, tenant_id, workflow_run_id)

    @staticmethod
    def _read(connection: Connection, tenant_id: str, workflow_run_id: str) -> WorkflowRun:
        row = owned_row(connection, workflow_runs, tenant_id, workflow_run_id, "workflow run")
        return _with_approvals(connection, [_workflow_run(row)])[0]

    @staticmethod
    def _lock_workflow(connection: Connection, tenant_id: str, workflow_id: str) -> None:
        """Hold the workflow: two starts under one new key wait for each other."""
        if workflow_row(connection, tenant_id, workflow_id) is None:
            raise NotFound(f"workflow {workflow_id} not found")

    @staticmethod
    def _by_key(connection: Connection, tenant_id: str, key: str) -> Any:
        return connection.execute(
            select(workflow_runs).where(
                workflow_runs.c.tenant_id == tenant_id, workflow_runs.c.idempotency_key == key
            )
        ).first()


def _same_workflow(existing: Any, workflow_id: str, key: str) -> WorkflowRun:
    if existing.workflow_id != workflow_id:
        raise Conflict(
            f"Idempotency-Key {key!r} was used for workflow run {existing.id} of workflow "
            f"{existing.workflow_id}",
            field="Idempotency-Key",
        )
    return _workflow_run(existing)


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
