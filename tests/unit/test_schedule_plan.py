"""Firing decisions: on time, missed (per policy), ended; and stable jitter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.schedules import ScheduleSpec, first_fire, jitter_offset, plan_fires

UTC_ZONE = parse_timezone("UTC")
EVERY_MINUTE = CronExpression.parse("* * * * *")
T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def plan(now: datetime, **spec: object) -> tuple[list[datetime], int, datetime | None]:
    full = ScheduleSpec.model_validate({"cron": "* * * * *", **spec})
    result = plan_fires(EVERY_MINUTE, UTC_ZONE, full, T0, now)
    return result.fire, result.missed, result.next_nominal


def test_a_fire_on_time_fires_and_points_at_the_next() -> None:
    assert plan(at(0.5)) == ([T0], 0, at(1))


@pytest.mark.parametrize(
    ("policy", "fired", "missed"),
    [
        ("run_once", [at(10)], 10),
        ("skip", [], 11),
        ("all", [at(n) for n in range(8, 11)], 8),  # misfire_limit 3: the most recent three
    ],
)
def test_missed_fires_follow_the_policy(policy: str, fired: list[datetime], missed: int) -> None:
    fire, counted, following = plan(at(10.5), misfire_policy=policy, misfire_limit=3)
    assert (fire, counted, following) == (fired, missed, at(11))


def test_nothing_fires_past_the_end() -> None:
    fire, missed, following = plan(at(10.5), end_at=at(4))
    assert fire == [at(4)]
    assert missed == 4
    assert following is None


def test_a_long_outage_is_counted_in_full_and_the_latest_time_still_runs() -> None:
    now = T0 + timedelta(days=30, seconds=30)
    fire, missed, _ = plan(now)
    assert fire == [T0 + timedelta(days=30)]
    assert missed == 30 * 24 * 60


def test_a_schedule_starts_at_its_start_time() -> None:
    spec = ScheduleSpec(cron="0 * * * *", start_at=at(125))
    assert first_fire(CronExpression.parse("0 * * * *"), UTC_ZONE, spec, T0) == at(180)


def test_jitter_is_stable_and_bounded() -> None:
    assert jitter_offset("sch_x", 0) == timedelta(0)
    offsets = [jitter_offset("sch_x", 30) for _ in range(3)]
    assert offsets[0] == offsets[1] == offsets[2] <= timedelta(seconds=30)
