"""Deadlines missed: what the reaper records of a run (or workflow run) found unfinished past
its deadline — a line on its timeline naming the deadline as a person set it — and the
cancel its deadline asks for, by the rule of a user's cancel (``cancel.cancel_all``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from herder.domain.deadlines import Fire, describe, duration_words, wall_time_of
from herder.domain.lifecycle.cancel import Cancellable, Cause, cancel_all
from herder.domain.lifecycle.changes import Changes, Event
from herder.domain.lifecycle.reap import REAPER

DEADLINE_MISSED = "deadline missed"  # how its timeline line begins: what a reader looks for


@dataclass(frozen=True)
class Missed:
    """A run or workflow run the reaper has just marked as past its deadline (the mark is
    guarded: each is found once), with what the message names."""

    id: str
    tenant_id: str
    name: str  # its job's or workflow's
    deadline_at: datetime
    within_seconds: int  # 0: not known (its stored deadline failed its model)
    cancel: bool
    fire: Fire | None  # the schedule's fire it counts from; None: from its submission


def missed_message(missed: Missed) -> str:
    """'deadline missed: not finished by 2026-06-10 07:00 Europe/Paris (5h after its 02:00
    fire)' — the deadline in the schedule's own time, as its owner wrote it."""
    return f"{DEADLINE_MISSED}: {not_finished_by(missed)}"


def not_finished_by(missed: Missed) -> str:
    if missed.fire is None:
        by, since = describe(missed.deadline_at, None), "its submission"
    else:
        wall, zone = wall_time_of(missed.fire)
        by, since = describe(missed.deadline_at, zone), f"its {wall:%H:%M} fire"
    if not missed.within_seconds:
        return f"not finished by {by}"
    return f"not finished by {by} ({duration_words(missed.within_seconds)} after {since})"


def missed_runs(
    missed: Sequence[Missed],
    to_cancel: Sequence[Cancellable],
    workers: Collection[str],
    now: datetime,
) -> Changes:
    """A timeline line for each run; the cancel of those whose deadline says so and that are
    still active (``to_cancel``: as the store locked them; ``workers``: running any)."""
    events = tuple(Event(one.id, missed_message(one), REAPER) for one in missed)
    cancels = {one.id for one in missed if one.cancel}
    cancellable = [run for run in to_cancel if run.id in cancels]
    if not cancellable:
        return Changes(events=events)
    cause = Cause(REAPER, "its deadline passed")
    return Changes(events=events) + cancel_all(cancellable, workers, cause, now)
