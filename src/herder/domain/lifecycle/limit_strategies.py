"""What a submission to a full key does, by its limit's strategy (docs/flow-control.md):
``queue`` waits (the dispatcher's business, nothing here), ``cancel_newest`` records the new
run cancelled, ``drop`` makes no run (409), ``cancel_in_progress`` cancels the key's oldest
active runs to make room. A key is full when its active runs (queued, pending, scheduled,
running) number ``max_running`` or more.

Of several full keys, ``drop`` wins over ``cancel_newest`` over ``cancel_in_progress``: the
least work done. Decided per new run, in order, a run admitted earlier in the same pass
counting as active for the later ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from herder.domain.lifecycle.cancel import Cause, cancel
from herder.domain.lifecycle.changes import Changes, NewRun, combine
from herder.domain.lifecycle.facts import ActiveRun, RunFacts
from herder.domain.limits import LimitStrategy
from herder.domain.states import RunState

LIMITS = "limits"  # the actor of what a strategy does


@dataclass(frozen=True)
class KeyRoom:
    """One key of a limit whose strategy acts at submit: its active runs, oldest first."""

    limit: str  # the limit's name
    key: str
    max_running: int
    strategy: LimitStrategy
    active: tuple[ActiveRun, ...] = ()

    @property
    def full(self) -> bool:
        return len(self.active) >= self.max_running

    def why(self) -> str:
        return (
            f"limit {self.limit}, key {self.key}: {len(self.active)} of {self.max_running} "
            f"active; strategy {self.strategy.value}"
        )


@dataclass(frozen=True)
class LimitAdmission:
    """One new run under its keys' strategies: ``changes`` insert it (perhaps cancelled) and
    cancel what it replaces; ``dropped`` says why no run is made."""

    changes: Changes = field(default_factory=Changes)
    dropped: str | None = None
    cancelled: tuple[str, ...] = ()  # the older runs it cancelled


def admit(new: NewRun, rooms: Sequence[KeyRoom], now: datetime) -> LimitAdmission:
    full = [room for room in rooms if room.full]
    for room in full:
        if room.strategy is LimitStrategy.DROP:
            return LimitAdmission(dropped=room.why())
    for room in full:
        if room.strategy is LimitStrategy.CANCEL_NEWEST:
            reason = f"cancelled at submit: {room.why()}"
            event = replace(new.event, target=RunState.CANCELLED, message=reason)
            cancelled = replace(new, state=RunState.CANCELLED, reason=reason, event=event)
            return LimitAdmission(Changes(new_runs=(cancelled,)))
    oldest: dict[str, ActiveRun] = {}
    for room in full:
        if room.strategy is LimitStrategy.CANCEL_IN_PROGRESS:
            for active in room.active[: len(room.active) - room.max_running + 1]:
                oldest.setdefault(active.run.id, active)
    cause = Cause(LIMITS, f"cancelled for a newer run {new.id} of its limit's key")
    cancels = combine(cancel(active, cause, now) for active in oldest.values())
    return LimitAdmission(cancels + Changes(new_runs=(new,)), cancelled=tuple(oldest))


def admit_all(
    new_runs: Sequence[NewRun], rooms: dict[str, list[KeyRoom]], now: datetime
) -> dict[str, LimitAdmission]:
    """Each new run (by id) under the rooms of its keys (``rooms`` by run id); a run admitted
    takes its place among its keys' active runs for the runs after it, and runs it
    cancelled leave them."""
    current: dict[tuple[str, str], KeyRoom] = {}
    decided = {}
    for new in new_runs:
        mine = [current.get((room.limit, room.key), room) for room in rooms.get(new.id, [])]
        admission = admit(new, mine, now)
        decided[new.id] = admission
        if admission.dropped is not None or not admission.changes.new_runs:
            continue
        made = admission.changes.new_runs[-1]
        for room in mine:
            kept = tuple(a for a in room.active if a.run.id not in admission.cancelled)
            if made.state is not RunState.CANCELLED:
                kept += (ActiveRun(RunFacts(made.id, made.state, 0)),)
            current[room.limit, room.key] = replace(room, active=kept)
    return decided
