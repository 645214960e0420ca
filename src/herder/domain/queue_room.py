"""How many more runs a tenant may queue: its ``max_queued`` less the runs it has queued.

The runs that workflows (task starts, fan-outs), backfills and schedules make count against it
as the tenant's own submissions do, so one request that makes thousands of runs cannot fill
the queue past the bound. A workflow's or a backfill's run past the room is held ``pending``
with the reason and queued, oldest first, when room frees (``release``); a schedule's fire past
it is skipped and recorded (``split``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from herder.domain.lifecycle.changes import WORK, Changes, NewRun, transition
from herder.domain.states import RunState

QUEUED_WAITING = "not looked at by the dispatcher yet"  # a run's waiting reason as it is queued
RELEASER = "max_queued"  # the actor of a held run's move to the queue

Item = TypeVar("Item")


@dataclass(frozen=True)
class QueueRoom:
    """The tenant's ``max_queued`` (None: unlimited) and its runs queued now. ``busy``: another
    transaction is taking room for the same tenant; this one takes none (it is held, and
    released by the next pass), so two at once can never both fill the last places."""

    max_queued: int | None
    queued: int
    busy: bool = False

    @property
    def free(self) -> int | None:
        """How many more runs may be queued now; None: any number."""
        if self.max_queued is None:
            return None
        return 0 if self.busy else max(self.max_queued - self.queued, 0)

    @property
    def reason(self) -> str:
        why = f"tenant at its max_queued {self.max_queued}: {self.queued} queued"
        return f"{why}, and another start is taking room" if self.busy else why

    def taken(self, count: int) -> QueueRoom:
        return dataclasses.replace(self, queued=self.queued + count)

    def split(self, items: Sequence[Item]) -> tuple[list[Item], list[Item]]:
        """The items the room takes (in order), and those past it."""
        free = self.free
        cut = len(items) if free is None else min(free, len(items))
        return list(items[:cut]), list(items[cut:])


UNLIMITED = QueueRoom(None, 0)


def hold(new_runs: Sequence[NewRun], room: QueueRoom) -> tuple[list[NewRun], QueueRoom]:
    """The new runs, those to be queued past the room held ``pending`` with why; the room
    left. Runs that start ended (a skipped task) take no room."""
    queued = [new for new in new_runs if new.state is RunState.QUEUED]
    _, over = room.split(queued)
    left = room.taken(len(queued) - len(over))
    if not over:
        return list(new_runs), left
    held_ids = {new.id for new in over}
    return [_held(new, left.reason) if new.id in held_ids else new for new in new_runs], left


def _held(new: NewRun, reason: str) -> NewRun:
    event = dataclasses.replace(
        new.event, message=f"{new.event.message}; held: {reason}", target=RunState.PENDING
    )
    return dataclasses.replace(new, state=RunState.PENDING, reason=reason, event=event)


def release(held: Sequence[str], room: QueueRoom, now: datetime, *, actor: str) -> Changes:
    """Held runs (oldest first) queued, as many as the room takes."""
    taken, _ = room.split(held)
    why = f"room under the tenant's max_queued {room.max_queued}: queued"
    moves = tuple(
        transition(run_id, RunState.PENDING, RunState.QUEUED, now, actor=actor, message=why,
                   waiting_reason=QUEUED_WAITING)
        for run_id in taken
    )  # fmt: skip
    return Changes(moves=moves, notices=frozenset({WORK}) if moves else frozenset())
