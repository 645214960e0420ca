"""What the dispatcher writes into a run's timeline, each line derived from a value, so it
says what happened: a run placed past its tenant's pool share (borrowed: it may be
reclaimed), and why a running attempt is stopped — for a higher-priority run, to reclaim
another tenant's share of a pool, or by a spent hard budget. The stop's reason is kept on
the attempt, so its end says the same whatever its worker saw."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import assert_never

from herder.domain.jobs import Priority


@dataclass(frozen=True, slots=True)
class ForPriority:
    """A run of a higher class needs the room."""

    run_id: str  # the run it makes room for
    priority: int  # that run's class (Priority.rank)
    stopped_priority: int  # the stopped run's class


@dataclass(frozen=True, slots=True)
class Reclaim:
    """A tenant below its nominal share of a pool takes it back from borrowed work."""

    run_id: str  # the run it makes room for
    tenant_id: str  # whose share
    pool: str


@dataclass(frozen=True, slots=True)
class HardBudget:
    """A spent hard budget of the run's tenant stops what runs under it."""

    budget: str  # Budget.name: "hard month budget (pool a100)"
    spent: str  # what it used of what it allows, and when it resets


StopCause = ForPriority | Reclaim | HardBudget


def stop_reason(cause: StopCause) -> str:
    """The stopped attempt's reason: why it ended, as its end event and its row say."""
    match cause:
        case ForPriority(run_id, priority, stopped_priority):
            return (
                f"stopped for the higher-priority run {run_id} ({_class_name(priority)} over "
                f"{_class_name(stopped_priority)})"
            )
        case Reclaim(run_id, tenant_id, pool):
            return f"reclaimed for tenant {tenant_id}'s share in pool {pool} (run {run_id})"
        case HardBudget(budget, spent):
            return f"stopped by the tenant's {budget}: {spent}"
        case _:
            assert_never(cause)


def cause_kind(cause: StopCause) -> str:
    """The cause in one word, as metrics count stops: ``priority``, ``reclaim``, ``budget``."""
    match cause:
        case ForPriority():
            return "priority"
        case Reclaim():
            return "reclaim"
        case HardBudget():
            return "budget"
        case _:
            assert_never(cause)


def stopping(cause: StopCause, number: int, worker_id: str) -> str:
    """The event written when the dispatcher asks attempt ``number`` to stop."""
    return (
        f"stopping attempt {number} on {worker_id}: {stop_reason(cause)}; it will be queued "
        "again without using up a retry"
    )


def placed(number: int, worker_ids: Iterable[str], borrowed_in: str | None) -> str:
    """The event written when attempt ``number`` is placed; ``borrowed_in``: the pool whose
    share it borrows past."""
    where = f"attempt {number} placed on {', '.join(sorted(set(worker_ids)))}"
    if borrowed_in is None:
        return where
    return (
        f"{where}, borrowed past its tenant's share in pool {borrowed_in}: it may be "
        "reclaimed for another tenant's share"
    )


def _class_name(rank: int) -> str:
    return next((str(priority) for priority in Priority if priority.rank == rank), str(rank))
