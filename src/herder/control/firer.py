"""The cron firer of one partition: fires every schedule that is due, then sleeps until the
next fire is due — to the moment, not to a coarse poll — or until a notice says a schedule
changed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from herder.clock import Clock
from herder.domain.cron import CronError, CronExpression, parse_timezone
from herder.domain.schedules import MISFIRE_GRACE, FirePlan, plan_fires
from herder.store.firing import DueSchedule
from herder.store.store import Store

BATCH = 1000  # schedules read per pass
RUNS_PER_TRANSACTION = 1000  # one commit for many fires; a schedule is never split
MAX_SLEEP_SECONDS = 5.0  # a ceiling, in case a notice is lost

log = logging.getLogger("herder.control")


@lru_cache(maxsize=4096)
def _compiled(cron: str, timezone: str) -> tuple[CronExpression, ZoneInfo]:
    return CronExpression.parse(cron, allow_seconds=True), parse_timezone(timezone)


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
        self.partition = partition
        self.name = f"firer-{partition}"

    def step(self) -> float:
        """Fire what is due; returns the seconds until the next fire is due."""
        schedules = self._store.schedules
        now = self._clock.now()
        due = schedules.due(self.partition, now, BATCH)
        batch: list[tuple[DueSchedule, FirePlan]] = []
        unfireable: list[tuple[DueSchedule, str]] = []
        for schedule in due:
            try:
                expression, zone = _compiled(schedule.spec.cron, schedule.spec.timezone)
            except CronError as error:  # accepted once, refused now (say, tzdata changed)
                log.error("schedule %s cannot be fired: %s", schedule.id, error)
                unfireable.append((schedule, str(error)))
                continue
            plan = plan_fires(
                expression, zone, schedule.spec, schedule.next_fire_at, now, self._grace
            )
            batch.append((schedule, plan))
        if unfireable:
            schedules.stop_unfireable(unfireable)
        for chunk in _transactions(batch):
            schedules.fire(chunk, actor=f"scheduler:{self.name}")
        if len(due) >= BATCH:
            return 0.0
        upcoming = schedules.next_due(self.partition)
        if upcoming is None:
            return MAX_SLEEP_SECONDS
        wait = (upcoming - self._clock.now()).total_seconds()
        return min(MAX_SLEEP_SECONDS, max(0.0, wait))


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
