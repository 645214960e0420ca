"""The demand schedules foretell, a minute at a time: runs starting, and the most busy at once
in each minute (what must be ready then), from grouped schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.forecast import (
    DEFAULT_DURATION_SECONDS,
    ScheduleGroup,
    forecast,
    median_seconds,
)
from herder.domain.placement.resources import Amount

NOON = datetime(2027, 3, 8, 12, 0, tzinfo=UTC)
ONE_RUN = Amount(cpu_milli=500, memory_mb=256, gpus=0, slots=1)


def group(cron: str, count: int = 1, seconds: float = 1.0, zone: str = "UTC") -> ScheduleGroup:
    return ScheduleGroup(cron, zone, "cpu", ONE_RUN, seconds, count)


def test_a_burst_of_short_runs_needs_all_of_them_at_once_in_its_minute() -> None:
    minutes = forecast([group("0 12 * * *", count=500)], NOON - timedelta(minutes=2), 5)
    assert [minute.runs_starting for minute in minutes] == [0, 0, 500, 0, 0]
    assert minutes[2].busy == Amount(250_000, 128_000, 0, 500)
    assert minutes[3].busy == Amount()


def test_runs_that_outlast_their_minute_overlap_the_next_ones() -> None:
    minutes = forecast([group("* * * * *", seconds=90)], NOON, 3)
    assert [minute.busy.slots for minute in minutes] == [2, 2, 2]  # the last still runs
    assert [minute.runs_starting for minute in minutes] == [1, 1, 1]


def test_a_run_ending_as_the_next_starts_is_not_counted_twice() -> None:
    minutes = forecast([group("* * * * *", seconds=60)], NOON, 2)
    assert [minute.busy.slots for minute in minutes] == [1, 1]


def test_runs_fired_before_the_window_and_still_busy_count() -> None:
    minutes = forecast([group("55 11 * * *", count=3, seconds=600)], NOON, 2)
    assert [minute.busy.slots for minute in minutes] == [3, 1 * 3]
    assert [minute.runs_starting for minute in minutes] == [0, 0]


def test_each_zone_fires_at_its_own_local_time() -> None:
    tokyo = group("0 21 * * *", zone="Asia/Tokyo", count=2)  # 21:00 JST is 12:00 UTC
    minutes = forecast([tokyo, group("0 12 * * *")], NOON, 1)
    assert minutes[0].runs_starting == 3


def test_a_schedule_that_cannot_be_read_adds_nothing() -> None:
    broken = group("61 * * * *")
    assert forecast([broken], NOON, 60)[0].runs_starting == 0


@pytest.mark.parametrize("minutes", [0, 24 * 60 + 1])
def test_the_window_is_a_minute_to_a_day(minutes: int) -> None:
    with pytest.raises(ValueError, match="1 to 1440"):
        forecast([], NOON, minutes)


def test_a_jobs_expected_run_time_is_its_recent_median() -> None:
    assert median_seconds([]) == DEFAULT_DURATION_SECONDS
    assert median_seconds([3.0, 1.0, 100.0]) == 3.0
    assert median_seconds([1.0, 3.0]) == 2.0
