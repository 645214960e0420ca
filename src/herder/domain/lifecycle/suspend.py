"""Holding a run until someone resumes it (issue 24): a suspend and a resume.

One rule for a suspend, as for a cancel: a run not running yet is held at once; a running
one is marked and every member's worker told to stop it as a preemption (SIGTERM, the job's
stop grace, SIGKILL; its checkpoint saved), and it is held when they report (``settle``) —
unless it succeeded on its own first, or a cancel came, which wins (``stops``). A suspended
run holds nothing: no worker, no place in the queue or under ``max_queued``, no concurrency
slot, no start deadline, no retry due. A second suspend of a suspended or suspending run
changes nothing (it is answered as the first); a suspend of an ended run is a conflict.

A resume queues a suspended run again — held ``pending`` instead when its tenant is at
``max_queued``, as a submit would be — behind what queued meanwhile; anything else is a
conflict. A suspended run may also be cancelled (``cancel``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from herder.domain.errors import Conflict
from herder.domain.lifecycle.cancel import Cancellable, stop_running
from herder.domain.lifecycle.changes import (
    WORK,
    Changes,
    Event,
    NoticeKind,
    RunMove,
    notices,
    transition,
)
from herder.domain.lifecycle.facts import ActiveRun
from herder.domain.queue_room import QUEUED_WAITING, QueueRoom
from herder.domain.states import RunState

SUSPEND_REQUESTED = "suspend requested; the worker is stopping the attempt"
RESUMED = "resumed"


@dataclass(frozen=True)
class Suspendable(Cancellable):
    """A run of a set suspended or resumed at once (a workflow run's): what its row says,
    as for a cancel, and whether a suspend is already asked for."""

    suspend_requested: bool


def suspend(active: ActiveRun, actor: str, now: datetime) -> Changes:
    run = active.run
    if run.state.is_terminal:
        raise Conflict(f"run {run.id} is already {run.state}; only active runs can be suspended")
    if run.state is RunState.SUSPENDED:
        return Changes()
    if run.state in (RunState.SCHEDULED, RunState.WAITING):
        raise Conflict(f"run {run.id} is {run.state}, holding nothing: cancel it instead")
    if run.cancel_requested:
        raise Conflict(f"run {run.id} is being cancelled; a cancel wins over a suspend")
    if run.state is not RunState.RUNNING:
        return Changes(moves=(_held(run.id, run.state, actor, now),))
    event = Event(run.id, SUSPEND_REQUESTED, actor, attempt=run.attempt)
    request = Changes(suspend_requests=(run.id,), events=(event,))
    return stop_running(active, request, already_requested=run.suspend_requested)


def suspend_all(
    runs: Sequence[Suspendable], workers: Collection[str], actor: str, now: datetime
) -> Changes:
    """``suspend``'s rule for every run of a set that it applies to, decided at once: runs
    ended, suspended, suspending or being cancelled are left as they are; ``workers``: those
    running any of them."""
    waiting = [run for run in runs if run.state in _HELD_AT_ONCE]
    requested = [
        run
        for run in runs
        if run.state is RunState.RUNNING and not run.cancel_requested and not run.suspend_requested
    ]
    return Changes(
        moves=tuple(_held(run.id, run.state, actor, now) for run in waiting),
        suspend_requests=tuple(run.id for run in requested),
        events=tuple(
            Event(run.id, SUSPEND_REQUESTED, actor, attempt=run.attempt) for run in requested
        ),
        notices=notices(NoticeKind.CANCEL, workers) if requested else frozenset(),
    )


def resume(run_id: str, state: RunState, room: QueueRoom, actor: str, now: datetime) -> Changes:
    """A suspended run back to the queue, or held ``pending`` when ``room`` has none."""
    if state is not RunState.SUSPENDED:
        if state.is_terminal:
            raise Conflict(f"run {run_id} is already {state}; only suspended runs can be resumed")
        raise Conflict(f"run {run_id} is {state}, not suspended; only suspended runs resume")
    return resume_all([run_id], room, actor, now)


def resume_all(suspended: Sequence[str], room: QueueRoom, actor: str, now: datetime) -> Changes:
    """Suspended runs (in order) back to the queue, as many as ``room`` takes; the rest held
    ``pending`` with why, released as room frees like any held run."""
    queued, held = room.split(suspended)
    reason = room.taken(len(queued)).reason
    moves = tuple(
        transition(run_id, RunState.SUSPENDED, RunState.QUEUED, now, actor=actor,
                   message=RESUMED, waiting_reason=QUEUED_WAITING)
        for run_id in queued
    ) + tuple(
        transition(run_id, RunState.SUSPENDED, RunState.PENDING, now, actor=actor,
                   message=f"{RESUMED}; held: {reason}", waiting_reason=reason)
        for run_id in held
    )  # fmt: skip
    return Changes(moves=moves, notices=frozenset({WORK}) if queued else frozenset())


_HELD_AT_ONCE = frozenset({RunState.PENDING, RunState.QUEUED, RunState.RETRY_WAIT})


def _held(run_id: str, state: RunState, actor: str, now: datetime) -> RunMove:
    """A run not running yet is held at once: out of the queue, its retry and start
    deadline dropped (a resumed run is wanted: nothing expires it)."""
    return transition(
        run_id, state, RunState.SUSPENDED, now, actor=actor, message=f"suspended while {state}",
        retry_at=None, start_deadline=None, waiting_reason=None,
    )  # fmt: skip
