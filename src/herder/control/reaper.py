"""The reaper: moves on whatever has become due — lost workers, attempts past their deadline,
retries whose back-off is over, runs not started by their start deadline, runs held past
their tenant's ``max_queued`` that now have room, runs and workflow runs unfinished past
their deadline — in one unit of work per pass, and sleeps until the next such moment (or a
notice that something new got a due time)."""

from __future__ import annotations

from datetime import datetime

from herder.app.follow_ups import follow_up
from herder.app.work import unit_of_work
from herder.clock import Clock
from herder.domain.errors import Unavailable
from herder.domain.lifecycle.reap import (
    REAPER,
    expire,
    lost_with_worker,
    overdue,
    requeue_due,
    silent_workers,
)
from herder.domain.queue_room import RELEASER
from herder.store.deadlines import cancel_missed, judge_deadlines, next_deadline
from herder.store.queue_room import release_all_held
from herder.store.runs.due import mark_lost, more_waiting, next_due, read_due_ends, read_due_runs
from herder.store.store import Store

MAX_SLEEP_SECONDS = 5.0  # a ceiling, for what no notice announces (a worker falling silent)
MIN_SLEEP_SECONDS = 0.01


class Reaper:
    name = "reaper"

    def __init__(self, store: Store, clock: Clock, *, heartbeat_timeout_seconds: float) -> None:
        self._store = store
        self._clock = clock
        self._heartbeat_timeout = heartbeat_timeout_seconds
        # Silence is judged only over time this reaper watched: from its start, from when it
        # took its lease, from when the store answered again after a pass it failed. Workers
        # could not heartbeat while nobody could read or write the store (a database
        # restarting or failing over), so each gets a full timeout once it is back.
        self._watching_since: datetime | None = clock.now()

    def held(self) -> None:
        """This process took the reaper's lease: it watched nothing before."""
        self._watching_since = None

    def step(self) -> float:
        """One pass: read what is due, decide, write once; the seconds until the next."""
        try:
            return self._pass()
        except Unavailable:  # the store could not serve it (the loop logs it, tries again)
            self._watching_since = None
            raise

    def _pass(self) -> float:
        timeout = self._heartbeat_timeout
        with unit_of_work(self._store) as work:
            if self._watching_since is None:
                self._watching_since = work.now
            watching_since = self._watching_since
            ends = read_due_ends(work)
            silent = silent_workers(ends.silent, work.now, timeout, watching_since)
            orphans = mark_lost(work, silent, timeout)
            work.settle(lost_with_worker(orphans, timeout) + overdue(ends.overdue), REAPER)
            due = read_due_runs(work)
            work.apply(requeue_due(due.retries, work.now) + expire(due.expiring, work.now))
            follow_up(work)  # the workflow runs and backfills of the runs that ended move on
            more_held = release_all_held(work, actor=RELEASER)
            missed = judge_deadlines(work)
            follow_up(work)  # and those of the runs past their deadline, before any
            cancel_missed(work, missed)  # workflow run past its own is cancelled
            follow_up(work)
            busy = more_waiting(ends, due) or more_held or missed.more
            upcoming = (
                None
                if busy
                else _earliest(next_due(work, timeout, watching_since), next_deadline(work))
            )
            now = work.now
        if busy:
            return 0.0
        if upcoming is None:
            return MAX_SLEEP_SECONDS
        wait = (upcoming - now).total_seconds()
        return min(MAX_SLEEP_SECONDS, max(MIN_SLEEP_SECONDS, wait))


def _earliest(*moments: datetime | None) -> datetime | None:
    return min((moment for moment in moments if moment is not None), default=None)
