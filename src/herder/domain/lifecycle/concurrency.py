"""A schedule's concurrency policy, for its fires and for manual runs that ask for it:
``allow`` another run while one is active, ``forbid`` it, or ``replace`` the active ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from herder.domain.errors import Conflict
from herder.domain.lifecycle.cancel import Cause, cancel
from herder.domain.lifecycle.changes import WORK, Changes, NewRun, combine
from herder.domain.lifecycle.facts import ActiveRun, RunFacts
from herder.domain.schedules import ConcurrencyPolicy
from herder.domain.states import RunState

SCHEDULER = "scheduler"


@dataclass(frozen=True)
class Admission:
    """May a new run of the schedule start now? ``blocking`` names the active run that
    forbids it; ``changes`` cancel the runs it replaces."""

    blocking: ActiveRun | None
    replaced: tuple[str, ...] = ()
    changes: Changes = field(default_factory=Changes)

    @property
    def allowed(self) -> bool:
        return self.blocking is None


def admit(
    schedule_id: str, policy: ConcurrencyPolicy, active: Sequence[ActiveRun], now: datetime
) -> Admission:
    if not active or policy is ConcurrencyPolicy.ALLOW:
        return Admission(None)
    if policy is ConcurrencyPolicy.FORBID:
        return Admission(active[0])
    cause = Cause(SCHEDULER, f"replaced by a newer run of schedule {schedule_id}")
    return Admission(
        None,
        replaced=tuple(item.run.id for item in active),
        changes=combine(cancel(item, cause, now) for item in active),
    )


@dataclass(frozen=True)
class Fires:
    """A schedule's fires of one pass under its policy: the runs to insert (and the runs they
    replace), and the nominal times a still-active run forbade."""

    changes: Changes
    skipped: tuple[tuple[datetime, RunFacts], ...] = ()
    replaced: tuple[str, ...] = ()


def fire(
    schedule_id: str,
    policy: ConcurrencyPolicy,
    active: Sequence[ActiveRun],
    new_runs: Sequence[NewRun],
    now: datetime,
) -> Fires:
    """Each new run in turn, under the policy; a run fired earlier in the pass counts as
    active for the later ones."""
    changes = Changes()
    skipped: list[tuple[datetime, RunFacts]] = []
    replaced: list[str] = []
    current = list(active)
    for new in new_runs:
        admission = admit(schedule_id, policy, current, now)
        if admission.blocking is not None:
            assert new.scheduled_for is not None
            skipped.append((new.scheduled_for, admission.blocking.run))
            continue
        changes += admission.changes + Changes(new_runs=(new,), notices=frozenset({WORK}))
        replaced += admission.replaced
        current = [ActiveRun(RunFacts(new.id, RunState.QUEUED, 0))]
    return Fires(changes, tuple(skipped), tuple(replaced))


def fire_now(
    schedule_id: str,
    policy: ConcurrencyPolicy,
    active: Sequence[ActiveRun],
    new_run: NewRun,
    now: datetime,
) -> Fires:
    """A fire asked for by hand: as a due fire under the policy, but refused (409) where
    ``forbid`` would skip it — the caller is told, no skip is recorded."""
    fires = fire(schedule_id, policy, active, [new_run], now)
    for _, blocking in fires.skipped:
        raise forbidden(schedule_id, blocking.id, blocking.state)
    return fires


def forbidden(schedule_id: str, blocking_id: str, state: str = "active") -> Conflict:
    return Conflict(
        f"schedule {schedule_id} forbids concurrent runs and its run {blocking_id} is still {state}"
    )
