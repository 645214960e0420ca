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
    # from 12:01 the last minute's still runs (11:59's is no forecast's: it runs or never will)
    assert [minute.busy.slots for minute in minutes] == [1, 2, 2]
    assert [minute.runs_starting for minute in minutes] == [1, 1, 1]


def test_a_run_ending_as_the_next_starts_is_not_counted_twice() -> None:
    minutes = forecast([group("* * * * *", seconds=60)], NOON, 2)
    assert [minute.busy.slots for minute in minutes] == [1, 1]


def at(clock: str) -> datetime:
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return NOON.replace(hour=hours, minute=minutes, second=seconds)


@pytest.mark.parametrize(
    ("cron", "count", "seconds", "now", "starting", "busy"),
    [
        # made at 04:07:01: the first fire is 04:08, none at 04:07 nor carried into 04:08
        ("* * * * *", 30, 60.0, "04:07:01", [0, 30, 30], [0, 30, 30]),
        # due this very instant (not fired yet): it counts
        ("* * * * *", 30, 60.0, "04:08:00", [30, 30, 30], [30, 30, 30]),
        # busy over [03:36, 03:37): not at 03:37; a second longer, it is
        ("36 3 * * *", 1, 60.0, "03:35:30", [0, 1, 0], [0, 1, 0]),
        ("36 3 * * *", 1, 61.0, "03:35:30", [0, 1, 0], [0, 1, 1]),
        # a seconds field: 12:00:30 is ahead of 12:00:15, 12:00:00 behind it
        ("0,30 * * * * *", 1, 1.0, "12:00:15", [1, 2, 2], [1, 1, 1]),
        # fired before now and still running: a run the autoscaler counts, not a forecast
        ("55 11 * * *", 3, 600.0, "12:00:00", [0, 0, 0], [0, 0, 0]),
    ],
)
def test_only_fires_from_now_on_are_foretold_each_busy_until_its_duration_ends(
    cron: str, count: int, seconds: float, now: str, starting: list[int], busy: list[int]
) -> None:
    minutes = forecast([group(cron, count=count, seconds=seconds)], at(now), 3)
    assert [minute.runs_starting for minute in minutes] == starting
    assert [minute.busy.slots for minute in minutes] == busy
    assert minutes[0].at == at(now).replace(second=0)


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
