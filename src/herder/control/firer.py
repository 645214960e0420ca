"""The cron firer of one partition: fires every schedule that is due, then sleeps until the
next fire is due — to the moment, not to a coarse poll — or until a notice says a schedule
changed.

A pass reads ahead: when the next due instant is near, the schedules due then are read and
their crons compiled before it, so that at the instant only planning and writing are left
(10,000 schedules due in one minute are queued within a second). What was read ahead fires
only if it is still as read (the store's fence), and is planned at the instant it fires.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from herder.app.schedules import fire
from herder.clock import Clock
from herder.domain.cron import CronError, CronExpression, parse_timezone
from herder.domain.schedules import MISFIRE_GRACE, FirePlan, plan_fires
from herder.store.firing import DueSchedule
from herder.store.store import Store

BATCH = 1000  # schedules read per pass
RUNS_PER_TRANSACTION = 1000  # one commit for many fires; a schedule is never split
MAX_SLEEP_SECONDS = 5.0  # a ceiling, in case a notice is lost
READ_AHEAD_SECONDS = 1.0  # the schedules of the next due instant are read this long before
# as many as that: all of a burst's at its instant (10,000 due over 8 partitions is 1,250 a
# partition; reading only a pass's worth ahead left the rest to a read after the first
# transaction, which queued them a second later than the others)
READ_AHEAD_LIMIT = 10 * BATCH

log = logging.getLogger("herder.control")


@lru_cache(maxsize=4096)
def _compiled(cron: str, timezone: str) -> tuple[CronExpression, ZoneInfo]:
    return CronExpression.parse(cron, allow_seconds=True), parse_timezone(timezone)


@dataclass(frozen=True)
class _Read:
    """Schedules read for an instant: their crons compiled, or why they cannot be."""

    instant: datetime
    fireable: list[tuple[DueSchedule, CronExpression, ZoneInfo]]
    unfireable: list[tuple[DueSchedule, str]]

    @property
    def full(self) -> bool:  # as many as a pass reads: more may be due
        return len(self.fireable) + len(self.unfireable) >= BATCH


class Firer:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        partition: int,
        *,
        misfire_grace: timedelta = MISFIRE_GRACE,
    ) -> None:
        self._store = store
        self._clock = clock
        self._grace = misfire_grace
        self._ahead: _Read | None = None
        self.partition = partition
        self.name = f"firer-{partition}"

    def step(self) -> float:
        """Fire what is due; returns the seconds until the next fire is due, or until its
        schedules are to be read ahead."""
        now = self._clock.now()
        if self._ahead is not None and self._ahead.instant <= now:
            ahead, self._ahead = self._ahead, None
            self._fire(ahead, now)
        due = self._read(now)
        self._fire(due, now)
        if due.full:
            return 0.0
        upcoming = self._store.schedules.next_due(self.partition)
        if upcoming is None:
            return MAX_SLEEP_SECONDS
        if self._ahead is None and self._seconds_until(upcoming) <= READ_AHEAD_SECONDS:
            self._ahead = self._read(upcoming, READ_AHEAD_LIMIT)
        wait = self._seconds_until(upcoming)
        if self._ahead is None:  # wake first to read ahead
            wait -= READ_AHEAD_SECONDS
        return min(MAX_SLEEP_SECONDS, max(0.0, wait))

    def _seconds_until(self, moment: datetime) -> float:
        return (moment - self._clock.now()).total_seconds()

    def _read(self, instant: datetime, limit: int | None = None) -> _Read:
        read = _Read(instant, [], [])
        for schedule in self._store.schedules.due(self.partition, instant, limit or BATCH):
            try:
                expression, zone = _compiled(schedule.spec.cron, schedule.spec.timezone)
            except CronError as error:  # accepted once, refused now (say, tzdata changed)
                read.unfireable.append((schedule, str(error)))
                continue
            read.fireable.append((schedule, expression, zone))
        return read

    def _fire(self, read: _Read, now: datetime) -> None:
        schedules = self._store.schedules
        if read.unfireable:
            for schedule, error in read.unfireable:
                log.error("schedule %s cannot be fired: %s", schedule.id, error)
            schedules.stop_unfireable(read.unfireable)
        batch = [
            (schedule, plan_fires(expression, zone, schedule.spec, schedule.next_fire_at, now,
                                  self._grace))
            for schedule, expression, zone in read.fireable
        ]  # fmt: skip
        for chunk in _transactions(batch):
            fire(self._store, chunk, actor=f"scheduler:{self.name}")


def _transactions(
    batch: list[tuple[DueSchedule, FirePlan]],
) -> Iterator[list[tuple[DueSchedule, FirePlan]]]:
    """Whole schedules, about ``RUNS_PER_TRANSACTION`` runs to a transaction (a schedule
    catching up many misfires may fill one alone)."""
    chunk: list[tuple[DueSchedule, FirePlan]] = []
    runs = 0
    for schedule, plan in batch:
        if chunk and runs + len(plan.fire) > RUNS_PER_TRANSACTION:
            yield chunk
            chunk, runs = [], 0
        chunk.append((schedule, plan))
        runs += len(plan.fire)
    if chunk:
        yield chunk
