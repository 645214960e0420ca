"""The run and attempt state machines (docs/design.md §3).

A run moves only along ``RUN_TRANSITIONS``; the store turns each move into one conditional
update guarded by the state it expects, so an illegal or stale move changes nothing.
"""

from __future__ import annotations

from enum import StrEnum

from herder.domain.errors import Conflict


class RunState(StrEnum):
    SCHEDULED = "scheduled"  # a delayed run: queued at its ``run_at``; holds nothing till then
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    RETRY_WAIT = "retry_wait"
    SUSPENDED = "suspended"  # held by an operator until resumed: holds no worker, quota or slot
    WAITING = "waiting"  # a workflow's wait or approval task: holds nothing until it is decided
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
    DEAD = "dead"
    EXPIRED = "expired"
    SKIPPED = "skipped"  # a workflow task its trigger rule will never run
    UPSTREAM_FAILED = "upstream_failed"  # a workflow task not run because upstream tasks failed

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_RUN_STATES

    @property
    def is_active(self) -> bool:
        return not self.is_terminal


class AttemptState(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    LOST = "lost"
    PREEMPTED = "preempted"


class StoppedBy(StrEnum):
    """How an attempt we stopped (timeout, cancel, preemption) ended: within its stop grace
    after SIGTERM, or by the SIGKILL after it. An attempt that ended by itself has none."""

    SIGTERM = "sigterm"
    SIGKILL = "sigkill"


TERMINAL_RUN_STATES = frozenset(
    {
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.TIMED_OUT,
        RunState.LOST,
        RunState.CANCELLED,
        RunState.DEAD,
        RunState.EXPIRED,
        RunState.SKIPPED,
        RunState.UPSTREAM_FAILED,
    }
)
"""Ended: no move leaves these. Every layer (CLI, dashboard, gauges, stats, workflows) takes its
state sets from here and ``domain.state_tones``, never from a list of its own."""

ACTIVE_RUN_STATES = frozenset(state for state in RunState if state not in TERMINAL_RUN_STATES)
"""Not yet ended: scheduled, held, queued, running, waiting to retry, suspended or a waiting
task; each is a ``herder_runs`` gauge."""

SLOT_HOLDING_RUN_STATES = ACTIVE_RUN_STATES - {RunState.SUSPENDED}
"""Active runs that hold their schedule's concurrency slot: a suspended run holds nothing
(``forbid`` lets a new run start beside it, ``replace`` leaves it be)."""

FAILED_RUN_STATES = frozenset(
    {RunState.FAILED, RunState.TIMED_OUT, RunState.LOST, RunState.DEAD, RunState.EXPIRED}
)
"""Ended without succeeding on its own account: not cancelled, skipped or upstream_failed (a
task that never ran is no outcome of the fleet's work)."""

LIVE_RUN_STATES = ACTIVE_RUN_STATES | {RunState.DEAD}
"""What the overview counts as it is now: the active runs and the dead-letter set."""

STARTS_AT_RUN_STATES = frozenset({RunState.SCHEDULED, RunState.QUEUED})
"""Not started yet, and its ``run_at`` says when it may: the run page shows it as "Starts at"."""

RUN_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    # its time came (``store.runs.starting``), or cancelled before it did
    RunState.SCHEDULED: frozenset({RunState.QUEUED, RunState.CANCELLED}),
    # held past its tenant's max_queued until there is room (``domain.queue_room``)
    RunState.PENDING: frozenset(
        {RunState.QUEUED, RunState.CANCELLED, RunState.EXPIRED, RunState.SUSPENDED}
    ),
    RunState.QUEUED: frozenset(
        {RunState.RUNNING, RunState.CANCELLED, RunState.EXPIRED, RunState.SUSPENDED}
    ),
    RunState.RUNNING: frozenset(
        {
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.TIMED_OUT,
            RunState.LOST,
            RunState.CANCELLED,
            RunState.RETRY_WAIT,
            RunState.DEAD,
            RunState.QUEUED,  # preempted: back to the queue without using up a retry
            RunState.SUSPENDED,  # its attempt stopped on a suspend: no retry used either
        }
    ),
    RunState.RETRY_WAIT: frozenset({RunState.QUEUED, RunState.CANCELLED, RunState.SUSPENDED}),
    # its time, its event or a person's decision came (``domain.workflows.waits``)
    RunState.WAITING: frozenset(
        {
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.TIMED_OUT,
            RunState.SKIPPED,
            RunState.CANCELLED,
        }
    ),
    # resumed (queued, or held pending when its tenant is at max_queued), or cancelled
    RunState.SUSPENDED: frozenset({RunState.QUEUED, RunState.PENDING, RunState.CANCELLED}),
    **{state: frozenset() for state in TERMINAL_RUN_STATES},
}

CANCELLABLE_RUN_STATES = frozenset(
    state for state, targets in RUN_TRANSITIONS.items() if RunState.CANCELLED in targets
)
"""The states a cancel ends at once or by killing the attempt: those with a move to cancelled."""


SUSPENDABLE_RUN_STATES = frozenset(
    state for state, targets in RUN_TRANSITIONS.items() if RunState.SUSPENDED in targets
)
"""The states a suspend holds at once or by stopping the attempt: those with a move to
suspended."""


def can_transition(source: RunState, target: RunState) -> bool:
    return target in RUN_TRANSITIONS[source]


def check_transition(source: RunState, target: RunState) -> None:
    """Raise ``Conflict`` naming both states when ``source → target`` is not a legal move."""
    if not can_transition(source, target):
        if source.is_terminal:
            raise Conflict(f"run is already {source}; a {source} run cannot become {target}")
        raise Conflict(f"a {source} run cannot become {target}")


def run_state_after_attempt(outcome: AttemptState) -> RunState:
    """The run's state once its current attempt ended with ``outcome`` (no retry policy yet)."""
    return _RUN_STATE_OF_OUTCOME[outcome]


_RUN_STATE_OF_OUTCOME: dict[AttemptState, RunState] = {
    AttemptState.SUCCEEDED: RunState.SUCCEEDED,
    AttemptState.FAILED: RunState.FAILED,
    AttemptState.TIMED_OUT: RunState.TIMED_OUT,
    AttemptState.CANCELLED: RunState.CANCELLED,
    AttemptState.LOST: RunState.LOST,
    AttemptState.PREEMPTED: RunState.QUEUED,
}
