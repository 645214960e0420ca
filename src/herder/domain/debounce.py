"""Debounce (docs/flow-control.md): a limit that debounces collapses its key's submissions
within the window into one run. The first submission makes the run, ``scheduled`` to start
when the window after it closes; each later one before the start pushes the start to the
window after itself, but never past ``max_wait_seconds`` after the first, and answers with
that same run — whose values are the first submission's or the last's, as the limit keeps.
A burst of edits thus makes one rebuild, after the burst (or, with a maximum wait, at
least that often however long the burst)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import NewRun
from herder.domain.limits import Debounce, DebounceKeep
from herder.domain.states import RunState

DebounceKey = tuple[str, str, str]  # limit id, key, job id


def starts_at(debounce: Debounce, first_at: datetime, now: datetime) -> datetime:
    """When the key's run starts after a submission at ``now``, the first made at
    ``first_at``."""
    start = now + timedelta(seconds=debounce.window_seconds)
    if debounce.max_wait_seconds is not None:
        start = min(start, first_at + timedelta(seconds=debounce.max_wait_seconds))
    return max(start, now)


@dataclass(frozen=True)
class Waiting:
    """A key's run waiting out its window, made by the key's first submission."""

    run_id: str
    first_at: datetime  # when it was made


@dataclass(frozen=True)
class Debounced:
    """What a debounce makes of a batch of submissions: the runs to insert (the first of a
    key's, its start set), and for each submission that joined a waiting run, that run."""

    new_runs: tuple[NewRun, ...]
    joined: dict[str, str]  # submission's run id → the run that stands for it
    # the waiting runs already stored that submissions joined: their new start, and their
    # new spec where the limit keeps the last submission's values
    moved: dict[str, tuple[datetime, JobSpec | None]]


def debounce(
    new_runs: Sequence[NewRun],
    windows: Mapping[str, tuple[DebounceKey, Debounce]],
    waiting: Mapping[DebounceKey, Waiting],
    now: datetime,
) -> Debounced:
    """The submissions in order; ``windows`` (by run id) the debounced limit and key each
    counts against, ``waiting`` the runs of such keys already waiting. A key is one job's:
    two jobs sharing a debounced limit and key are not folded into one run."""
    made: dict[DebounceKey, int] = {}  # key → index in ``kept`` of the run it made
    kept: list[NewRun] = []
    joined: dict[str, str] = {}
    moved: dict[str, tuple[datetime, JobSpec | None]] = {}
    for new in new_runs:
        if new.id not in windows or new.state is not RunState.QUEUED:  # a delayed one stays
            kept.append(new)
            continue
        key, window = windows[new.id]
        spec = new.spec if window.keep is DebounceKeep.LAST else None
        if key in made:
            first = kept[made[key]]
            start = starts_at(window, now, now)  # made by this batch, at ``now`` too
            kept[made[key]] = replace(first, run_at=start, spec=spec or first.spec)
            joined[new.id] = first.id
        elif key in waiting:
            stored = waiting[key]
            start = starts_at(window, stored.first_at, now)
            earlier_spec = moved.get(stored.run_id, (start, None))[1]
            moved[stored.run_id] = (start, spec or earlier_spec)
            joined[new.id] = stored.run_id
        else:
            made[key] = len(kept)
            kept.append(replace(new, run_at=starts_at(window, now, now)))
    return Debounced(tuple(kept), joined, moved)
