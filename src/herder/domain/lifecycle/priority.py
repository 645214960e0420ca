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
