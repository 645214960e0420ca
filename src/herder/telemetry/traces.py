"""A run's life as one trace (docs/traces.md): one function per kind of fact, called once
per batch after the transaction that made it committed (a rolled-back batch records
nothing), with what the batch had in hand — as ``metrics`` counts them. No query is ever
made for a span. Each returns at once while tracing is off.

    workflow run          (root of its tasks' trace; recorded when the workflow run ends)
    └─ run                (a one-off run's root; recorded when the run ends)
       ├─ submit          inserted: who asked, the job, the state it began in
       ├─ placement       queued → placed on workers, with the reason it waited
       ├─ hand-over       placed → handed to its worker (a claim, a stream, a report's reply)
       └─ attempt         on the worker: the program started → ended (one per try)
          └─ report       the worker's report of it, settled by the server

Ids come from ``trace_ids``: every process hangs its spans on the same run and attempt
spans without asking another.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from datetime import UTC, datetime

from herder.domain.ids import id_time_ms
from herder.domain.lifecycle.changes import NewRun
from herder.domain.models import Assignment
from herder.domain.states import RunState
from herder.domain.workflows.states import WorkflowRunState
from herder.telemetry import tracing
from herder.telemetry.trace_ids import ATTEMPT, RUN, WORKFLOW_RUN, run_parent, trace_root
from herder.telemetry.tracing import Hung

REASON_CHARS = 256  # a reason as an attribute: enough to read, never a log's worth


@dataclass(frozen=True)
class PlacedRun:
    """A run just placed: its attempt started on ``workers``."""

    run_id: str
    workflow_run_id: str | None
    attempt: int
    queued_at: datetime | None  # when its current wait began (a preemption restarts it)
    placed_at: datetime
    workers: tuple[str, ...]
    placer: str  # the dispatcher, or a report's hand-off


@dataclass(frozen=True)
class ReportedAttempt:
    """An attempt's end as its worker reported it, and what the server made of it."""

    attempt_id: str
    attempt: int
    run_id: str
    workflow_run_id: str | None
    outcome: str
    receipt: str  # applied, stale (a zombie's), not_yours


def _in_run(run_id: str, workflow_run_id: str | None) -> Hung:
    return Hung(trace_root(run_id, workflow_run_id), (RUN, run_id))


def _made_at(object_id: str) -> datetime:
    """When an object was made: its id starts with it (``domain.ids``)."""
    return datetime.fromtimestamp(id_time_ms(object_id) / 1000, UTC)


def _now() -> datetime:
    return datetime.now(UTC)


def runs_submitted(begun: datetime, new_runs: Iterable[NewRun], inserted: Set[str]) -> None:
    """Runs inserted by a unit of work that began at ``begun``; linked both ways to the
    request that made them, if any. A task's run decided not to run (skipped) has ended."""
    if not tracing.enabled():
        return
    committed = _now()
    for new in new_runs:
        if new.id not in inserted:
            continue
        workflow_run_id = new.task.workflow_run_id if new.task is not None else None
        tracing.record(
            "submit", _in_run(new.id, workflow_run_id), begun, committed,
            {
                "herder.run.id": new.id,
                "herder.tenant.id": new.tenant_id,
                "herder.job.id": new.job_id,
                "herder.job.name": new.job_name,
                "herder.actor": new.event.actor,
                "herder.run.state": str(new.state),
                "herder.schedule.id": new.schedule_id,
                "herder.workflow_run.id": workflow_run_id,
                "herder.task.name": new.task.task_name if new.task is not None else None,
            },
            link_current=True,
        )  # fmt: skip
        if new.state.is_terminal:
            runs_ended([(new.id, workflow_run_id, new.state)])


def runs_ended(ended: Iterable[tuple[str, str | None, RunState]]) -> None:
    """Runs that ended: (id, workflow run, end state). The run's span, from its making to
    its end committed (so the report that ended it lies within it)."""
    if not tracing.enabled():
        return
    now = _now()
    for run_id, workflow_run_id, state in ended:
        tracing.record(
            "run", Hung(trace_root(run_id, workflow_run_id), run_parent(workflow_run_id)),
            _made_at(run_id), now,
            {
                "herder.run.id": run_id,
                "herder.run.state": str(state),
                "herder.workflow_run.id": workflow_run_id,
            },
            span=(RUN, run_id),
        )  # fmt: skip


def workflow_runs_ended(ended: Iterable[tuple[str, WorkflowRunState]]) -> None:
    """Workflow runs that ended: the root span of their tasks' trace, to its end committed."""
    if not tracing.enabled():
        return
    now = _now()
    for workflow_run_id, state in ended:
        tracing.record(
            "workflow run", Hung(workflow_run_id, None), _made_at(workflow_run_id), now,
            {"herder.workflow_run.id": workflow_run_id, "herder.workflow_run.state": str(state)},
            span=(WORKFLOW_RUN, workflow_run_id),
        )  # fmt: skip


def runs_placed(placed: Iterable[PlacedRun], reasons: Mapping[str, str]) -> None:
    """Runs placed, each from when it was queued; ``reasons``: why each waited, as the
    placer last wrote it (none for a run placed at its first look)."""
    if not tracing.enabled():
        return
    for run in placed:
        reason = reasons.get(run.run_id)
        tracing.record(
            "placement", _in_run(run.run_id, run.workflow_run_id),
            run.queued_at or run.placed_at, run.placed_at,
            {
                "herder.run.id": run.run_id,
                "herder.attempt.number": run.attempt,
                "herder.worker.id": ",".join(run.workers),
                "herder.placer": run.placer,
                "herder.waiting_reason": None if reason is None else reason[:REASON_CHARS],
            },
        )  # fmt: skip


def attempts_handed_over(
    now: datetime, worker_id: str, handed: Iterable[tuple[Assignment, datetime]]
) -> None:
    """Attempts handed to their worker: each from when it was placed (``datetime``)."""
    if not tracing.enabled():
        return
    for assignment, placed_at in handed:
        tracing.record(
            "hand-over", _in_run(assignment.run_id, _workflow_run_of(assignment)),
            placed_at, now,
            {
                "herder.run.id": assignment.run_id,
                "herder.attempt.id": assignment.attempt_id,
                "herder.attempt.number": assignment.attempt,
                "herder.worker.id": worker_id,
            },
        )  # fmt: skip


def attempt_ran(
    assignment: Assignment,
    worker_id: str,
    started: datetime,
    ended: datetime,
    outcome: str,
    exit_code: int | None,
    reason: str,
) -> None:
    """An attempt this worker ran: from taking it to knowing how it ended."""
    if not tracing.enabled():
        return
    tracing.record(
        "attempt", _in_run(assignment.run_id, _workflow_run_of(assignment)), started, ended,
        {
            "herder.run.id": assignment.run_id,
            "herder.attempt.id": assignment.attempt_id,
            "herder.attempt.number": assignment.attempt,
            "herder.attempt.rank": assignment.rank,
            "herder.worker.id": worker_id,
            "herder.attempt.outcome": outcome,
            "herder.attempt.exit_code": exit_code,
            "herder.attempt.reason": reason[:REASON_CHARS] or None,
        },
        span=(ATTEMPT, assignment.attempt_id),
    )  # fmt: skip


def attempts_reported(begun: datetime, worker_id: str, reported: Iterable[ReportedAttempt]) -> None:
    """A worker's report of its attempts' ends, settled in a unit of work begun at ``begun``:
    a span under each attempt's."""
    if not tracing.enabled():
        return
    committed = _now()
    for item in reported:
        tracing.record(
            "report",
            Hung(trace_root(item.run_id, item.workflow_run_id), (ATTEMPT, item.attempt_id)),
            begun, committed,
            {
                "herder.run.id": item.run_id,
                "herder.attempt.id": item.attempt_id,
                "herder.attempt.number": item.attempt,
                "herder.attempt.outcome": item.outcome,
                "herder.report.receipt": item.receipt,
                "herder.worker.id": worker_id,
            },
        )  # fmt: skip


def within_attempt(assignment: Assignment) -> Hung:
    """Where an attempt's own span hangs: what the worker makes current while it runs."""
    return _in_run(assignment.run_id, _workflow_run_of(assignment))


def _workflow_run_of(assignment: Assignment) -> str | None:
    return assignment.task.workflow_run_id if assignment.task is not None else None
