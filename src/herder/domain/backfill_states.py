"""The backfill state machine: a backfill moves only along ``BACKFILL_TRANSITIONS``; the
store turns each move into one update guarded by the state it expects."""

from __future__ import annotations

from enum import StrEnum

from herder.domain.errors import Conflict


class BackfillState(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"  # every nominal time in the range has been run
    CANCELLED = "cancelled"  # no more starts; runs already started go on

    @property
    def is_terminal(self) -> bool:
        return self is not BackfillState.RUNNING


BACKFILL_TRANSITIONS: dict[BackfillState, frozenset[BackfillState]] = {
    BackfillState.RUNNING: frozenset(
        {
            BackfillState.RUNNING,  # a step: its cursor and counts move on
            BackfillState.FINISHED,
            BackfillState.CANCELLED,
        }
    ),
    BackfillState.FINISHED: frozenset(),
    BackfillState.CANCELLED: frozenset(),
}


def check_backfill_transition(source: BackfillState, target: BackfillState) -> None:
    """Raise ``Conflict`` naming both states when ``source → target`` is not a legal move."""
    if target not in BACKFILL_TRANSITIONS[source]:
        raise Conflict(f"backfill is already {source}; a {source} backfill cannot become {target}")
