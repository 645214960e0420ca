"""What an event decides before anything is written (docs/events.md#what-an-event-may-cost):
which of its triggers start what, which waiting tasks it ends, and what that cost.

Deciding is pure and bounded, so the store does it outside the write transaction that
records the event (on SQLite the one writer lock every tenant's writes queue on): all of
one event's filters and parameters take at most ``MAX_EVENT_STEPS`` steps
(``domain.event_filters``), each at most ``MAX_FILTER_STEPS``, and an event looks at most at
``MAX_WAITS_PER_EVENT`` waits. The sender pays for the steps in submissions:
``submissions``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from herder.domain.event_filters import MAX_EVENT_STEPS, Budget, within_share
from herder.domain.triggers import Refused, Start, Trigger, plan
from herder.domain.workflows.waits import is_awaited

MAX_WAITS_PER_EVENT = 200  # a tenant's waits on one event name one event looks at, oldest first
STEPS_PER_SUBMISSION = 10_000  # evaluation steps the sender pays one more submission for


@dataclass(frozen=True)
class Waiting:
    """A waiting task's run, filed under the event name it waits for, and its filter."""

    run_id: str
    filter: str | None


@dataclass(frozen=True)
class Evaluation:
    decided: list[Start | Refused]  # what each matching trigger does
    awaited: list[str]  # the waiting runs the event ends
    steps: int  # what deciding took

    @property
    def submissions(self) -> int:
        return submissions(self.steps)


def submissions(steps: int) -> int:
    """What an event that took ``steps`` to decide costs its sender, in submissions: one, and
    one more per ``STEPS_PER_SUBMISSION`` (at most 21, for ``MAX_EVENT_STEPS``)."""
    return 1 + steps // STEPS_PER_SUBMISSION


def charged(submissions: int, burst: float | None) -> int:
    """What an event that costs ``submissions`` takes beyond the one it was admitted with:
    the rest, but never so many that they and that one would be more than the tenant's
    whole ``burst`` (such an event could never be admitted); nothing for a tenant whose
    submissions are unlimited (``burst`` None)."""
    if burst is None:
        return 0
    return max(0, min(submissions - 1, math.floor(burst) - 1))


def evaluate(
    triggers: Sequence[Trigger], waits: Sequence[Waiting], document: dict[str, Any]
) -> Evaluation:
    """The triggers first (oldest first), then the waits (oldest first, at most
    ``MAX_WAITS_PER_EVENT``), all within one budget of ``MAX_EVENT_STEPS``: a trigger it
    cannot read is refused saying why; a wait it cannot read is not ended by this event."""
    budget = Budget(MAX_EVENT_STEPS)
    decided = plan(triggers, document, budget)
    awaited = [
        wait.run_id
        for wait in waits[:MAX_WAITS_PER_EVENT]
        if within_share(budget, partial(is_awaited, wait.filter, document)) is True
    ]
    return Evaluation(decided, awaited, budget.spent)
