"""What a lifecycle decision returns: changes for the unit of work to apply in one
transaction, each write guarded by the state it expects.

The one rule of what a transition sets besides the state is here (``transition``): an end
stamps ``finished_at``, entering the queue stamps ``queued_at``, leaving it clears the
waiting reason. Workflow runs and backfills move likewise (``workflow_run_transition``,
``backfill_transition``), along their own tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from herder.domain.backfill_states import BackfillState, check_backfill_transition
from herder.domain.jobs import JobSpec
from herder.domain.states import AttemptState, RunState, StoppedBy, check_transition
from herder.domain.workflows.states import WorkflowRunState, check_workflow_run_transition


class NoticeKind(StrEnum):
    WORK = "work"  # runs were queued: the dispatcher may place them
    CANCEL = "cancel"  # the worker must stop something (cancel, preempt, a gang member)
    CAPACITY = "capacity"  # the worker freed capacity: the dispatcher may place more
    ASSIGNED = "assigned"  # attempts were placed on the worker: its claim may answer
    # the worker freed capacity and was handed what waited for it in the same transaction
    # (``app.hand_off``): its attempts ended, but there is nothing for the dispatcher to place
    HANDED = "handed"
    DUE = "due"  # something got a due time: the reaper should look again


@dataclass(frozen=True)
class Notice:
    kind: NoticeKind
    worker_id: str = ""


WORK = Notice(NoticeKind.WORK)
DUE = Notice(NoticeKind.DUE)


@dataclass(frozen=True)
class Event:
    """A line of a run's history; ``source``/``target`` set when it records a transition."""

    run_id: str
    message: str
    actor: str
    attempt: int | None = None
    source: RunState | None = None
    target: RunState | None = None


@dataclass(frozen=True)
class RunMove:
    """``source → target`` if the run is still in ``source`` (and at ``attempt``, if set)."""

    run_id: str
    source: RunState
    target: RunState
    attempt: int | None
    values: Mapping[str, Any]
    event: Event


@dataclass(frozen=True)
class WorkflowRunMove:
    """``source → target`` if the workflow run is still in ``source`` (and at repair
    ``at_repair``, if set: two repairs from one reading cannot both apply)."""

    workflow_run_id: str
    source: WorkflowRunState
    target: WorkflowRunState
    values: Mapping[str, Any]
    at_repair: int | None = None


@dataclass(frozen=True)
class BackfillMove:
    """``source → target`` if the backfill is still in ``source``; a step that stays
    ``running`` moves its cursor and counts."""

    backfill_id: str
    source: BackfillState
    target: BackfillState
    values: Mapping[str, Any]


@dataclass(frozen=True)
class AttemptEnd:
    """A running attempt ends with ``state``; guarded on it still running."""

    attempt_id: str
    state: AttemptState
    reason: str
    exit_code: int | None = None
    cpu_user_seconds: float | None = None
    cpu_system_seconds: float | None = None
    max_rss_kb: int | None = None
    stopped_by: StoppedBy | None = None
    checkpoint_refused: str | None = None


@dataclass(frozen=True)
class TaskOf:
    """Which workflow task a run is: its instance (``map_index``, -1 when not mapped) in one
    repair of one workflow run, and what its upstream tasks hand it."""

    workflow_run_id: str
    task_name: str
    repair: int
    map_index: int = -1
    map_item: Any = None
    inputs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class NewRun:
    """A run to insert, queued (or, for a workflow task decided not to run, already ended
    ``skipped`` or ``upstream_failed`` with its ``reason``). A unique key (the tenant's
    idempotency key, the schedule's nominal time, or the task instance and repair) makes a
    repeat insert nothing."""

    id: str
    tenant_id: str
    job_id: str
    job_name: str
    spec: JobSpec
    event: Event
    idempotency_key: str | None = None
    schedule_id: str | None = None
    scheduled_for: datetime | None = None
    rerun_of: str | None = None
    start_deadline: datetime | None = None
    state: RunState = RunState.QUEUED
    reason: str | None = None
    task: TaskOf | None = None
    backfill_id: str | None = None
    run_at: datetime | None = None  # queued, but not started before (a debounce's window)
    deadline_at: datetime | None = None  # finished by then (``domain.deadlines``)
    created_by: str | None = None  # who made it (``domain.actors``); None: its event's actor

    @property
    def creator(self) -> str:
        """Who made it: ``created_by``, else the actor of the event that made it."""
        return self.created_by or self.event.actor


@dataclass(frozen=True)
class NewWorkflowRun:
    """A workflow run to insert, ``running`` or ``queued`` under ``max_active_runs``. A
    unique key (the tenant's idempotency key, or the schedule's nominal time) makes a repeat
    insert nothing."""

    id: str
    tenant_id: str
    workflow_id: str
    workflow_name: str
    version: int
    state: WorkflowRunState
    params: Mapping[str, Any]
    jobs: Mapping[str, Any]  # the jobs it runs, as they were at its start
    idempotency_key: str | None = None
    schedule_id: str | None = None
    scheduled_for: datetime | None = None
    backfill_id: str | None = None
    deadline: Mapping[str, Any] | None = None  # the deadline it runs under, as JSON
    deadline_at: datetime | None = None
    created_by: str | None = None  # who started it (``domain.actors``)


@dataclass(frozen=True)
class NewBackfill:
    """A backfill of a schedule to insert, ``running`` from ``start`` to ``end``."""

    id: str
    tenant_id: str
    schedule_id: str
    start: datetime
    end: datetime
    max_active: int


@dataclass(frozen=True)
class Changes:
    new_runs: tuple[NewRun, ...] = ()
    attempt_ends: tuple[AttemptEnd, ...] = ()
    moves: tuple[RunMove, ...] = ()
    cancel_requests: tuple[str, ...] = ()  # running runs whose workers must stop them
    suspend_requests: tuple[str, ...] = ()  # running runs to stop, then hold suspended
    # running attempts whose claim's answer never reached the worker: the next claim hands
    # them over again
    handovers_lost: tuple[str, ...] = ()
    events: tuple[Event, ...] = ()
    notices: frozenset[Notice] = field(default_factory=frozenset)
    workflow_run_moves: tuple[WorkflowRunMove, ...] = ()
    backfill_moves: tuple[BackfillMove, ...] = ()
    new_workflow_runs: tuple[NewWorkflowRun, ...] = ()
    new_backfills: tuple[NewBackfill, ...] = ()

    def __add__(self, other: Changes) -> Changes:
        return Changes(
            new_runs=self.new_runs + other.new_runs,
            attempt_ends=self.attempt_ends + other.attempt_ends,
            moves=self.moves + other.moves,
            cancel_requests=self.cancel_requests + other.cancel_requests,
            suspend_requests=self.suspend_requests + other.suspend_requests,
            handovers_lost=self.handovers_lost + other.handovers_lost,
            events=self.events + other.events,
            notices=self.notices | other.notices,
            workflow_run_moves=self.workflow_run_moves + other.workflow_run_moves,
            backfill_moves=self.backfill_moves + other.backfill_moves,
            new_workflow_runs=self.new_workflow_runs + other.new_workflow_runs,
            new_backfills=self.new_backfills + other.new_backfills,
        )

    @property
    def empty(self) -> bool:
        return self == NO_CHANGES


NO_CHANGES = Changes()


def combine(parts: Iterable[Changes]) -> Changes:
    """The parts as one, in linear time (adding them one by one copies the tuples each time:
    a fan-out's thousands of cancels would take seconds)."""
    listed = list(parts)
    return Changes(
        new_runs=tuple(new for part in listed for new in part.new_runs),
        attempt_ends=tuple(end for part in listed for end in part.attempt_ends),
        moves=tuple(move for part in listed for move in part.moves),
        cancel_requests=tuple(run_id for part in listed for run_id in part.cancel_requests),
        suspend_requests=tuple(run_id for part in listed for run_id in part.suspend_requests),
        handovers_lost=tuple(a for part in listed for a in part.handovers_lost),
        events=tuple(event for part in listed for event in part.events),
        notices=frozenset(notice for part in listed for notice in part.notices),
        workflow_run_moves=tuple(m for part in listed for m in part.workflow_run_moves),
        backfill_moves=tuple(move for part in listed for move in part.backfill_moves),
        new_workflow_runs=tuple(new for part in listed for new in part.new_workflow_runs),
        new_backfills=tuple(new for part in listed for new in part.new_backfills),
    )


def notices(kind: NoticeKind, worker_ids: Iterable[str]) -> frozenset[Notice]:
    return frozenset(Notice(kind, worker_id) for worker_id in worker_ids)


def transition(
    run_id: str,
    source: RunState,
    target: RunState,
    now: datetime,
    *,
    actor: str,
    message: str,
    attempt: int | None = None,
    **values: Any,
) -> RunMove:
    """A legal move (``Conflict`` otherwise) with what it sets besides the state."""
    check_transition(source, target)
    if target.is_terminal:
        values.setdefault("finished_at", now)
    if target is RunState.QUEUED:
        values.setdefault("queued_at", now)
    if source is RunState.QUEUED:  # a waiting reason is about waiting in the queue
        values.setdefault("waiting_reason", None)
    event = Event(run_id, message, actor, attempt, source, target)
    return RunMove(run_id, source, target, attempt, values, event)


def workflow_run_transition(
    workflow_run_id: str,
    source: WorkflowRunState,
    target: WorkflowRunState,
    now: datetime,
    *,
    at_repair: int | None = None,
    **values: Any,
) -> WorkflowRunMove:
    """A legal move (``Conflict`` otherwise) with what it sets besides the state: an end
    stamps ``finished_at``; a start ``started_at``; a repair clears the end."""
    check_workflow_run_transition(source, target)
    if target.is_terminal:
        values.setdefault("finished_at", now)
    if source is WorkflowRunState.QUEUED and target is WorkflowRunState.RUNNING:
        values.setdefault("started_at", now)
    if source.is_terminal:
        values.setdefault("finished_at", None)
        values.setdefault("reason", None)
    return WorkflowRunMove(workflow_run_id, source, target, values, at_repair)


def backfill_transition(
    backfill_id: str, source: BackfillState, target: BackfillState, now: datetime, **values: Any
) -> BackfillMove:
    """A legal move (``Conflict`` otherwise); an end stamps ``finished_at``."""
    check_backfill_transition(source, target)
    if target.is_terminal:
        values.setdefault("finished_at", now)
    return BackfillMove(backfill_id, source, target, values)
