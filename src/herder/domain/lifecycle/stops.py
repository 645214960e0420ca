"""Why a running attempt must stop before it ends by itself — and the one order between the
reasons: **a cancel wins over a suspend, a suspend over a preemption** (a run being cancelled
is never held or queued again; one being suspended is held, not queued). Its worker hears the
stop, the outcome it reports is read through it, an attempt not yet delivered ends here, and
the dispatcher never picks it as a victim.

A suspend reaches the worker as a preemption order — SIGTERM, the job's stop grace, SIGKILL,
its checkpoint saved — so the worker need not know the difference: the server does."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from herder.domain.states import AttemptState


class Stop(StrEnum):
    CANCEL = "cancel"
    SUSPEND = "suspend"
    PREEMPT = "preempt"


SUSPENDED_REASON = "suspended"
"""An attempt stopped by a suspend ends ``preempted`` with this reason."""


def pending_stop(
    cancel_requested: bool, preempt_requested: bool, *, suspend_requested: bool
) -> Stop | None:
    if cancel_requested:
        return Stop.CANCEL
    if suspend_requested:
        return Stop.SUSPEND
    if preempt_requested:
        return Stop.PREEMPT
    return None


def outcome_of(reported: AttemptState, stop: Stop | None) -> AttemptState:
    """A preempted or suspended attempt that did not succeed ends ``preempted``, however its
    worker saw the stop (killed, failed on the signal): it used up no try."""
    if stop in (Stop.PREEMPT, Stop.SUSPEND) and reported is not AttemptState.SUCCEEDED:
        return AttemptState.PREEMPTED
    return reported


def before_delivery(stop: Stop, preempt_reason: str | None = None) -> tuple[AttemptState, str]:
    """An attempt stopped before its worker was handed it ends at once: the worker would
    otherwise start it before hearing the stop. ``preempt_reason``: why the dispatcher
    stops it."""
    match stop:
        case Stop.CANCEL:
            return AttemptState.CANCELLED, "cancelled before it reached its worker"
        case Stop.SUSPEND:
            return AttemptState.PREEMPTED, f"{SUSPENDED_REASON} before it reached its worker"
        case Stop.PREEMPT:
            why = preempt_reason or "preempted"
            return AttemptState.PREEMPTED, f"{why} before it reached its worker"


def can_be_victim(preemptible: bool, cancel_requested: bool, suspend_requested: bool) -> bool:
    """A run already being cancelled or suspended is stopping anyway: preempting it frees
    nothing more."""
    stop = pending_stop(cancel_requested, False, suspend_requested=suspend_requested)
    return preemptible and stop is None


@dataclass(frozen=True)
class StoppableAttempt:
    """One of a worker's running attempts as the store has it."""

    attempt_id: str
    number: int
    cancel_requested: bool
    preempt_requested: bool
    suspend_requested: bool = False


@dataclass(frozen=True)
class StopOrders:
    cancel: list[str]  # stop now and report (cancelled)
    drop: list[str]  # no longer this worker's: kill, report nothing
    preempt: list[str]  # stop with grace and report (preempted, or suspended: the same order)


def stop_orders(
    current: Sequence[StoppableAttempt], held: Collection[tuple[str, int]]
) -> StopOrders:
    """What a worker holding ``held`` (attempt id, number) must stop, given its ``current``
    attempts in the store."""
    stops = {item.attempt_id: pending_stop(item.cancel_requested, item.preempt_requested,
                                           suspend_requested=item.suspend_requested)
             for item in current}  # fmt: skip
    mine = {(item.attempt_id, item.number) for item in current}
    return StopOrders(
        cancel=[attempt_id for attempt_id, stop in stops.items() if stop is Stop.CANCEL],
        drop=[attempt_id for attempt_id, number in held if (attempt_id, number) not in mine],
        preempt=[
            attempt_id for attempt_id, stop in stops.items() if stop in (Stop.PREEMPT, Stop.SUSPEND)
        ],
    )
