"""Why a running attempt must stop before it ends by itself — and the one rule between the
two reasons: **a cancel wins over a preemption** (a run being cancelled is never queued
again). Its worker hears the stop, the outcome it reports is read through it, an attempt not
yet delivered ends here, and the dispatcher never picks it as a victim."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from herder.domain.states import AttemptState


class Stop(StrEnum):
    CANCEL = "cancel"
    PREEMPT = "preempt"


def pending_stop(cancel_requested: bool, preempt_requested: bool) -> Stop | None:
    if cancel_requested:
        return Stop.CANCEL
    if preempt_requested:
        return Stop.PREEMPT
    return None


def outcome_of(reported: AttemptState, stop: Stop | None) -> AttemptState:
    """A preempted attempt that did not succeed ends ``preempted``, however its worker saw
    the stop (killed, failed on the signal)."""
    if stop is Stop.PREEMPT and reported is not AttemptState.SUCCEEDED:
        return AttemptState.PREEMPTED
    return reported


def before_delivery(stop: Stop) -> tuple[AttemptState, str]:
    """An attempt stopped before its worker was handed it ends at once: the worker would
    otherwise start it before hearing the stop."""
    if stop is Stop.CANCEL:
        return AttemptState.CANCELLED, "cancelled before it reached its worker"
    return AttemptState.PREEMPTED, "preempted before it reached its worker"


def can_be_victim(preemptible: bool, cancel_requested: bool) -> bool:
    """A run already being cancelled is stopping anyway: preempting it frees nothing more."""
    return preemptible and pending_stop(cancel_requested, False) is None


@dataclass(frozen=True)
class StoppableAttempt:
    """One of a worker's running attempts as the store has it."""

    attempt_id: str
    number: int
    cancel_requested: bool
    preempt_requested: bool


@dataclass(frozen=True)
class StopOrders:
    cancel: list[str]  # stop now and report (cancelled)
    drop: list[str]  # no longer this worker's: kill, report nothing
    preempt: list[str]  # stop for a higher-priority run and report (preempted)


def stop_orders(
    current: Sequence[StoppableAttempt], held: Collection[tuple[str, int]]
) -> StopOrders:
    """What a worker holding ``held`` (attempt id, number) must stop, given its ``current``
    attempts in the store."""
    stops = {item.attempt_id: pending_stop(item.cancel_requested, item.preempt_requested)
             for item in current}  # fmt: skip
    mine = {(item.attempt_id, item.number) for item in current}
    return StopOrders(
        cancel=[attempt_id for attempt_id, stop in stops.items() if stop is Stop.CANCEL],
        drop=[attempt_id for attempt_id, number in held if (attempt_id, number) not in mine],
        preempt=[attempt_id for attempt_id, stop in stops.items() if stop is Stop.PREEMPT],
    )
