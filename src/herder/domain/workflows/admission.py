"""Admission under a workflow's ``max_active_runs``: a new run starts ``running`` while the
workflow has fewer active runs (queued, running or suspended) than that; past it, it waits
``queued``, or under ``forbid`` it is refused. When a running run ends, the oldest queued runs
start, as many as the slots it leaves. A suspended run holds its slot (``SLOT_HOLDING``): its
tasks' work is begun, and its resume must not wait behind runs admitted in its place."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from herder.domain.errors import Conflict
from herder.domain.lifecycle.changes import Changes, workflow_run_transition
from herder.domain.workflows.spec import Concurrency
from herder.domain.workflows.states import WorkflowRunState

SLOT_HOLDING = frozenset({WorkflowRunState.RUNNING, WorkflowRunState.SUSPENDED})
"""The workflow-run states that take a slot under ``max_active_runs``."""


def admission(
    max_active_runs: int | None, concurrency: Concurrency, active: int
) -> WorkflowRunState:
    """The state a new run starts in, ``active`` being the workflow's active runs
    (``Conflict`` under ``forbid`` when there is no slot)."""
    if max_active_runs is None or active < max_active_runs:
        return WorkflowRunState.RUNNING
    if concurrency is Concurrency.FORBID:
        raise Conflict(
            f"the workflow allows {max_active_runs} active run(s) and has {active}; its "
            "concurrency policy is forbid"
        )
    return WorkflowRunState.QUEUED


def admitted_at_most(max_active_runs: int | None) -> int:
    """The most queued runs one run's end can admit: so many need reading."""
    return 1 if max_active_runs is None else max_active_runs


def admit(
    max_active_runs: int | None, holding: int, queued: Sequence[str], now: datetime
) -> Changes:
    """The oldest of the ``queued`` runs (oldest first) that the slots left by the
    ``holding`` ones (``SLOT_HOLDING``) take, moved to ``running``."""
    slots = 1 if max_active_runs is None else max(max_active_runs - holding, 0)
    moves = tuple(
        workflow_run_transition(run_id, WorkflowRunState.QUEUED, WorkflowRunState.RUNNING, now)
        for run_id in queued[:slots]
    )
    return Changes(workflow_run_moves=moves)
