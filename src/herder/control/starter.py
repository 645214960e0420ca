"""The starter: queues delayed runs when their time comes, a guarded batch at a time
(``store.runs.starting``), and sleeps until the next one's (or a notice that a sooner one was
submitted)."""

from __future__ import annotations

from herder.domain.lifecycle.changes import WORK, Changes
from herder.store.runs.starting import BATCH, next_start, start_due
from herder.store.store import Store

MAX_SLEEP_SECONDS = 5.0  # a ceiling: a notice of a sooner start may be missed
MIN_SLEEP_SECONDS = 0.005


class Starter:
    name = "starter"

    def __init__(self, store: Store) -> None:
        self._store = store

    def step(self) -> float:
        """One pass: start what is due, write once; the seconds until the next start."""
        with self._store.work() as work:
            started = start_due(work.connection, work.now)
            if started:
                work.apply(Changes(notices=frozenset({WORK})))
            upcoming = None if started == BATCH else next_start(work.connection, work.now)
            now = work.now
        if started == BATCH:
            return 0.0
        if upcoming is None:
            return MAX_SLEEP_SECONDS
        wait = (upcoming - now).total_seconds()
        return min(MAX_SLEEP_SECONDS, max(MIN_SLEEP_SECONDS, wait))
