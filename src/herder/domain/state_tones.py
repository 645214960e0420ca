"""How each state reads to a person at a glance — its tone — for every kind of state shown:
one table per enum, from which the dashboard's colours (``api/dashboard/state_module.py``) and
the CLI's (``cli/tones.py``) come. A state missing here fails ``tests/unit/test_state_tones.py``.

A state's name has one tone whichever kind it belongs to (``failed`` is bad for a run, an
attempt, a workflow run and a webhook delivery alike), so the page can colour a name alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from herder.domain.alerts.rules import DeliveryState, IncidentState
from herder.domain.backfills import BackfillState
from herder.domain.models import WorkerState
from herder.domain.states import AttemptState, RunState
from herder.domain.workflows.states import WorkflowRunState

State = TypeVar("State", bound=StrEnum)


class Tone(StrEnum):
    OK = "ok"  # ended well, or healthy
    BAD = "bad"  # ended badly, or needs a look
    ACTIVE = "active"  # doing its work now
    WAITING = "waiting"  # waiting its turn: queued, retrying, draining
    NEUTRAL = "neutral"  # neither: not started yet, cancelled, skipped, done


RUN_TONES: dict[RunState, Tone] = {
    RunState.FAILED: Tone.BAD,
    RunState.TIMED_OUT: Tone.BAD,
    RunState.LOST: Tone.BAD,
    RunState.DEAD: Tone.BAD,
    RunState.EXPIRED: Tone.BAD,
    RunState.UPSTREAM_FAILED: Tone.BAD,
    RunState.CANCELLED: Tone.NEUTRAL,
    RunState.RUNNING: Tone.ACTIVE,
    RunState.RETRY_WAIT: Tone.WAITING,
    RunState.QUEUED: Tone.WAITING,
    RunState.SUSPENDED: Tone.NEUTRAL,
    RunState.PENDING: Tone.NEUTRAL,
    RunState.SCHEDULED: Tone.NEUTRAL,
    RunState.WAITING: Tone.NEUTRAL,
    RunState.SKIPPED: Tone.NEUTRAL,
    RunState.SUCCEEDED: Tone.OK,
}
"""Each run state's tone, worst first: a task with several instances shows the first of their
states in this order (the dashboard's graph), and the CLI lists their counts by it."""

RUN_STATES_WORST_FIRST = tuple(RUN_TONES)
"""Every run state, worst first (``RUN_TONES``'s order)."""

ATTEMPT_TONES: dict[AttemptState, Tone] = {
    AttemptState.RUNNING: Tone.ACTIVE,
    AttemptState.SUCCEEDED: Tone.OK,
    AttemptState.FAILED: Tone.BAD,
    AttemptState.TIMED_OUT: Tone.BAD,
    AttemptState.CANCELLED: Tone.NEUTRAL,
    AttemptState.LOST: Tone.BAD,
    AttemptState.PREEMPTED: Tone.NEUTRAL,
}

WORKFLOW_RUN_TONES: dict[WorkflowRunState, Tone] = {
    WorkflowRunState.QUEUED: Tone.WAITING,
    WorkflowRunState.RUNNING: Tone.ACTIVE,
    WorkflowRunState.SUSPENDED: Tone.NEUTRAL,
    WorkflowRunState.SUCCEEDED: Tone.OK,
    WorkflowRunState.FAILED: Tone.BAD,
    WorkflowRunState.CANCELLED: Tone.NEUTRAL,
}

BACKFILL_TONES: dict[BackfillState, Tone] = {
    BackfillState.RUNNING: Tone.ACTIVE,
    BackfillState.FINISHED: Tone.NEUTRAL,
    BackfillState.CANCELLED: Tone.NEUTRAL,
}

WORKER_TONES: dict[WorkerState, Tone] = {
    WorkerState.ALIVE: Tone.OK,
    WorkerState.DRAINING: Tone.WAITING,
    WorkerState.LOST: Tone.BAD,
}

INCIDENT_TONES: dict[IncidentState, Tone] = {
    IncidentState.OPEN: Tone.BAD,
    IncidentState.RESOLVED: Tone.OK,
}

DELIVERY_TONES: dict[DeliveryState, Tone] = {
    DeliveryState.PENDING: Tone.NEUTRAL,
    DeliveryState.DELIVERED: Tone.OK,
    DeliveryState.FAILED: Tone.BAD,
}


def _by_name(table: Mapping[State, Tone]) -> dict[str, Tone]:
    return {str(state): tone for state, tone in table.items()}


TONES_BY_KIND: dict[str, dict[str, Tone]] = {
    "run": _by_name(RUN_TONES),
    "attempt": _by_name(ATTEMPT_TONES),
    "workflow_run": _by_name(WORKFLOW_RUN_TONES),
    "backfill": _by_name(BACKFILL_TONES),
    "worker": _by_name(WORKER_TONES),
    "incident": _by_name(INCIDENT_TONES),
    "delivery": _by_name(DELIVERY_TONES),
}
"""Every kind of state the dashboard and the CLI show, each state by its name."""

TONE_OF_NAME: dict[str, Tone] = {
    name: tone for table in TONES_BY_KIND.values() for name, tone in table.items()
}
"""A state's tone by its name alone, for a page or a table that shows names of any kind."""


def tone_of(state: str) -> Tone:
    """A state's tone by its name; a name no kind has (a newer server's) reads neutral."""
    return TONE_OF_NAME.get(state, Tone.NEUTRAL)
