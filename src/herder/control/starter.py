"""The starter: queues delayed runs when their time comes, a guarded batch at a time
(``store.runs.starting``), ends waiting workflow tasks whose time or timeout came
(``store.workflows.waits``), and sleeps until the next one's (or a notice that a sooner one
was submitted)."""

from __future__ import annotations

from datetime import datetime

from herder.app.follow_ups import follow_up
from herder.app.work import unit_of_work
from herder.domain.lifecycle.changes import WORK, Changes
from herder.store.runs.starting import BATCH, next_start, start_due
from herder.store.store import Store
from herder.store.workflows.waits import WOKEN_PER_PASS, wake_due

MAX_SLEEP_SECONDS = 5.0  # a ceiling: a notice of a sooner start may be missed
MIN_SLEEP_SECONDS = 0.005


class Starter:
    name = "starter"

    def __init__(self, store: Store) -> None:
        self._store = store

    def step(self) -> float:
        """One pass: start what is due, write once; the seconds until the next start. Nothing
        due, nothing is written: a pass on every notice must not queue for the write lock
        (SQLite's is one for all) while a burst of fires needs it."""
        with self._store.database.read() as connection:
            now = self._store.clock.now()
            upcoming = next_start(connection, now)
        if upcoming is None:
            return MAX_SLEEP_SECONDS
        if upcoming > now:
            return _until(upcoming, now)
        with unit_of_work(self._store) as work:
            started = start_due(work.connection, work.now)
            if started:
                work.apply(Changes(notices=frozenset({WORK})))
            more = started == BATCH or wake_due(work) == WOKEN_PER_PASS
            follow_up(work)  # the workflow runs of the waits that ended move on
            upcoming = None if more else next_start(work.connection, work.now)
            now = work.now
        if more:
            return 0.0
        return MAX_SLEEP_SECONDS if upcoming is None else _until(upcoming, now)


def _until(moment: datetime, now: datetime) -> float:
    return min(MAX_SLEEP_SECONDS, max(MIN_SLEEP_SECONDS, (moment - now).total_seconds()))
