"""The log compactor: turns ended attempts' log chunks into one compressed blob each
(``herder.store.log_compaction``), a batch per pass.

It wakes when attempts end (the capacity notices their ends send) and otherwise every
``IDLE_SECONDS``. Passes are paced: one woken sooner than ``MIN_PASS_SECONDS`` after the last
returns at once with the time left, so under a storm of ends each pass takes a bigger batch;
a full batch is followed by the next at once. An attempt whose blob cannot be read is left
with its chunks and skipped by this process from then on (it was logged), so one bad attempt
never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from herder.store.log_compaction import LogCompactionRepository

IDLE_SECONDS = 5.0  # the poll that guarantees progress when a notice is lost
MIN_PASS_SECONDS = 1.0  # between passes woken by notices


class LogCompactor:
    name = "log-compactor"

    def __init__(
        self,
        compaction: LogCompactionRepository,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._compaction = compaction
        self._monotonic = monotonic
        self._damaged: set[str] = set()
        self._next_pass = 0.0

    def step(self) -> float:
        """One batch; the seconds until the next pass (0 when more are waiting)."""
        started = self._monotonic()
        if started < self._next_pass:
            return self._next_pass - started
        result = self._compaction.compact_ended(skip=self._damaged)
        self._damaged.update(result.damaged)
        if result.more:
            return 0.0
        self._next_pass = started + MIN_PASS_SECONDS
        return IDLE_SECONDS
