"""A run's priority class chosen by whoever starts or re-prioritises it (docs/flow-control.md
#priority): never above its tenant's ``max_priority``; a run not started yet may change
class, keeping its place in time (its ``queued_at``), so aging goes on counting."""

from __future__ import annotations

from herder.domain.errors import Conflict, Invalid
from herder.domain.jobs import Priority
from herder.domain.lifecycle.changes import Event
from herder.domain.states import RunState

REPRIORITISABLE = frozenset(
    {
        RunState.SCHEDULED, RunState.QUEUED, RunState.PENDING, RunState.RETRY_WAIT,
        RunState.SUSPENDED,
    }
)  # fmt: skip
"""Not started (or between attempts): a change of class changes what goes first."""


def check_allowed(wanted: Priority, allowed: Priority | None, field: str = "priority") -> None:
    """``Invalid`` naming ``field`` when ``wanted`` is above the tenant's ``allowed``."""
    if allowed is not None and wanted.rank > allowed.rank:
        raise Invalid(
            f"priority {wanted.value} is above what this tenant's runs may ask for "
            f"(max_priority {allowed.value})",
            field=field,
        )


def rerun_priority(
    ran_at: Priority, allowed: Priority | None, job_class: Priority | None
) -> Priority:
    """The class a re-run asks for: the one its run ran at, within today's bound (the
    tenant's ``max_priority`` may have been lowered since). The job's own class is its
    developers' choice and not capped, so the bound is never below it; ``job_class`` None:
    the job is gone."""
    if allowed is None or ran_at.rank <= allowed.rank:
        return ran_at
    bound = allowed if job_class is None or job_class.rank < allowed.rank else job_class
    return bound if bound.rank < ran_at.rank else ran_at


def reprioritised(
    run_id: str,
    state: RunState,
    current: Priority,
    wanted: Priority,
    allowed: Priority | None,
    actor: str,
) -> Event | None:
    """The event of moving a run to ``wanted`` (None: it is there already); ``Conflict``
    naming the state for a run already started or ended, ``Invalid`` above ``allowed``."""
    if state not in REPRIORITISABLE:
        raise Conflict(
            f"run {run_id} is {state.value}: only a run not started yet (scheduled, queued, "
            "pending, waiting to retry or suspended) changes priority",
            field="priority",
        )
    check_allowed(wanted, allowed)
    if wanted is current:
        return None
    return Event(run_id, f"priority {current.value} → {wanted.value}", actor)
