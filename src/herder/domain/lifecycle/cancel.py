"""Ending a run on request — a user's cancel, a newer run of its schedule replacing it —
and re-running an ended one. One rule for both kinds of cancel: a run not running yet ends
at once; a running one is marked and every member's worker is told to stop it, and it ends
when they report (``settle``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from herder.domain.deadlines import deadline_at
from herder.domain.errors import Conflict
from herder.domain.jobs import Priority
from herder.domain.lifecycle.changes import (
    DUE,
    WORK,
    Changes,
    Event,
    NewRun,
    NoticeKind,
    RunMove,
    notices,
    transition,
)
from herder.domain.lifecycle.facts import ActiveRun
from herder.domain.models import Run
from herder.domain.states import RunState

CANCEL_REQUESTED = "cancel requested; the worker is stopping the attempt"


@dataclass(frozen=True)
class Cause:
    """Who cancels, and why when it is not the user's own cancel."""

    actor: str
    why: str | None = None


@dataclass(frozen=True)
class Cancellable:
    """A run of a set cancelled at once (a workflow run's): what its row says, no more."""

    id: str
    state: RunState
    attempt: int
    cancel_requested: bool


def cancel(active: ActiveRun, cause: Cause, now: datetime) -> Changes:
    run = active.run
    if run.state.is_terminal:
        raise Conflict(f"run {run.id} is already {run.state}; only active runs can be cancelled")
    if run.state is not RunState.RUNNING:
        return Changes(moves=(_ended(run.id, run.state, cause, now),))
    event = Event(run.id, cause.why or CANCEL_REQUESTED, cause.actor, attempt=run.attempt)
    request = Changes(cancel_requests=(run.id,), events=(event,))
    return stop_running(active, request, already_requested=run.cancel_requested)


def stop_running(active: ActiveRun, request: Changes, *, already_requested: bool) -> Changes:
    """A running run's stop (a cancel, a suspend): its members' workers told to stop them,
    again if it was already asked for (a notice is only a wake-up), and ``request``, the
    request and its event, recorded once."""
    stop = Changes(notices=notices(NoticeKind.CANCEL, {m.worker_id for m in active.members}))
    return stop if already_requested else stop + request


def cancel_all(
    runs: Sequence[Cancellable], workers: Collection[str], cause: Cause, now: datetime
) -> Changes:
    """``cancel``'s rule for every active run of a set, decided at once so that it is applied
    in a few statements (alike moves: one each); ``workers``: those running any of them."""
    active = [run for run in runs if run.state.is_active]
    requested = [r for r in active if r.state is RunState.RUNNING and not r.cancel_requested]
    return Changes(
        moves=tuple(
            _ended(run.id, run.state, cause, now)
            for run in active
            if run.state is not RunState.RUNNING
        ),
        cancel_requests=tuple(run.id for run in requested),
        events=tuple(
            Event(run.id, cause.why or CANCEL_REQUESTED, cause.actor, attempt=run.attempt)
            for run in requested
        ),
        notices=notices(NoticeKind.CANCEL, workers),
    )


def _ended(run_id: str, state: RunState, cause: Cause, now: datetime) -> RunMove:
    """A run not running yet ends at once."""
    message = cause.why or f"cancelled while {state}"
    reason = f"cancelled: {cause.why}" if cause.why else "cancelled"
    return transition(
        run_id, state, RunState.CANCELLED, now, actor=cause.actor, message=message, reason=reason
    )


def rerun(
    old: Run,
    tenant_id: str,
    new_run_id: str,
    actor: str,
    now: datetime,
    *,
    priority: Priority,
) -> Changes:
    """A new run of what an ended run ran (its spec as submitted), linked to it — how a dead
    run leaves the dead-letter set. It is a new submission: its deadline counts from now,
    and it runs at ``priority`` (``rerun_priority``: today's bound), its event saying so
    when that is lower than the old run's."""
    if old.state.is_active:
        raise Conflict(f"run {old.id} is still {old.state}; only ended runs can be re-run")
    submitted = f"submitted as a re-run of {old.id}"
    if priority is not old.spec.priority:
        submitted += (
            f", at priority {priority.value} (it ran at {old.spec.priority.value}, above "
            "what this tenant's runs may ask for now: max_priority)"
        )
    new = NewRun(
        id=new_run_id,
        tenant_id=tenant_id,
        job_id=old.job_id,
        job_name=old.job_name,
        spec=old.spec.model_copy(update={"priority": priority}),
        rerun_of=old.id,
        deadline_at=deadline_at(old.spec.deadline, now),
        event=Event(new_run_id, submitted, actor, target=RunState.QUEUED),
    )
    return Changes(
        new_runs=(new,),
        events=(Event(old.id, f"re-run as {new_run_id}", actor),),
        notices=frozenset({WORK, DUE}) if new.deadline_at else frozenset({WORK}),
    )
