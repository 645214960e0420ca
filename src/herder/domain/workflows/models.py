"""Workflows, their runs and their tasks as the API shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import JsonValue, computed_field

from herder.domain.deadlines import Deadline
from herder.domain.models import _Record
from herder.domain.states import RunState
from herder.domain.workflows.outcome import outcome
from herder.domain.workflows.progress import WorkflowRunState, failed_tasks
from herder.domain.workflows.spec import Concurrency, TaskKind, TaskSpec
from herder.domain.workflows.trigger_rules import TriggerRule


class Workflow(_Record):
    id: str
    name: str
    version: int  # 1 when created, one more on every change (the API's ETag)
    tasks: list[TaskSpec]
    params: dict[str, JsonValue]
    max_active_runs: int | None
    concurrency: Concurrency
    deadline: Deadline | None = None
    created_at: datetime
    updated_at: datetime
    # who made it (``domain.actors``: ``user:key_…``, ``schedule:sch_…``), None when made
    # before it was recorded; and a person's name for it, added as it is read
    created_by: str | None = None
    created_by_name: str | None = None


class WorkflowRun(_Record):
    id: str
    workflow_id: str
    workflow_name: str
    version: int  # of the workflow, pinned when the run was created
    state: WorkflowRunState
    params: dict[str, Any]
    idempotency_key: str | None
    schedule_id: str | None
    scheduled_for: datetime | None
    repair: int  # the latest-repair token: a repair names it, and adds one
    cancel_requested: bool
    reason: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    deadline: Deadline | None = None  # its schedule's, else its workflow's
    deadline_at: datetime | None = None  # finished by then
    deadline_missed_at: datetime | None = None  # when it was found unfinished past it
    awaiting_approval: list[str] = []  # its approval tasks waiting for a decision
    # who made it (``domain.actors``: ``user:key_…``, ``schedule:sch_…``), None when made
    # before it was recorded; and a person's name for it, added as it is read
    created_by: str | None = None
    created_by_name: str | None = None


class TaskRun(_Record):
    """A task instance: its current run, or (``run_id`` None) why it has none yet."""

    task: str
    map_index: int  # -1: the task is not mapped
    job: str | None  # None: a wait or an approval (``kind``)
    kind: TaskKind = TaskKind.JOB
    message: str | None = None  # an approval's, filled with the run's parameters
    depends_on: list[str]
    trigger_rule: TriggerRule
    state: RunState  # pending until its trigger rule decides
    reason: str | None
    run_id: str | None = None
    repair: int | None = None
    attempt_count: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    output: Any = None


class WorkflowRunDetail(WorkflowRun):
    tasks: list[TaskRun]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed_tasks(self) -> list[str]:
        """The tasks that failed or were ``upstream_failed``: a run that succeeded had each
        handled downstream (Airflow's leaf rule)."""
        return list(failed_tasks(self._instances()))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> str:
        """How it ended, in words: "succeeded, 2 tasks failed and were handled"."""
        return outcome(self.state, self._instances())

    def _instances(self) -> list[tuple[str, RunState]]:
        return [(task.task, task.state) for task in self.tasks]
