"""The reaper: moves on whatever has become due — lost workers, attempts past their deadline,
retries whose back-off is over, runs not started by their start deadline — and sleeps until
the next such moment (or a notice that something new got a due time)."""

from __future__ import annotations

from herder.clock import Clock
from herder.store.reaper import BATCH
from herder.store.store import Store

MAX_SLEEP_SECONDS = 5.0  # a ceiling, for what no notice announces (a worker falling silent)
MIN_SLEEP_SECONDS = 0.01


class Reaper:
    name = "reaper"

    def __init__(self, store: Store, clock: Clock, *, heartbeat_timeout_seconds: float) -> None:
        self._store = store
        self._clock = clock
        self._heartbeat_timeout = heartbeat_timeout_seconds
        self._watching_since = clock.now()

    def step(self) -> float:
        """One pass; returns the seconds until the next pass is needed."""
        reaper = self._store.reaper
        reaper.mark_lost_workers(self._heartbeat_timeout, self._watching_since)
        moved = [
            reaper.time_out_attempts(),
            reaper.requeue_due_retries(),
            reaper.expire_unstarted(),
        ]
        if max(moved) >= BATCH:
            return 0.0  # more is waiting
        due = reaper.next_due(self._heartbeat_timeout)
        if due is None:
            return MAX_SLEEP_SECONDS
        wait = (due - self._clock.now()).total_seconds()
        return min(MAX_SLEEP_SECONDS, max(MIN_SLEEP_SECONDS, wait))
