"""A pool's desired worker count: enough for what runs and waits now and for the forecast's
peak within a worker's start-up time; shrinking late, and only by drained idle workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.autoscaling import (
    PoolDemand,
    ScalingPolicy,
    WorkerLoad,
    desired_workers,
    scale,
    workers_for,
)
from herder.domain.placement.resources import Amount

WORKER = Amount(cpu_milli=4000, memory_mb=8192, gpus=0, slots=8)
POLICY = ScalingPolicy(worker=WORKER, min_workers=1, max_workers=20, lead_seconds=120)
NOW = datetime(2027, 3, 8, 12, 0, tzinfo=UTC)


def runs(count: int, cpu_milli: int = 500, memory_mb: int = 256) -> Amount:
    return Amount(cpu_milli * count, memory_mb * count, 0, count)


def test_each_resource_asks_for_its_own_count_and_the_largest_wins() -> None:
    assert workers_for(Amount(), WORKER) == 0
    assert workers_for(runs(8), WORKER) == 1  # 4 cores, 8 slots: exactly one
    assert workers_for(runs(9), WORKER) == 2  # a ninth slot
    assert workers_for(Amount(4001, 1, 0, 1), WORKER) == 2  # a millicore past one worker
    assert workers_for(Amount(1, 8193, 0, 1), WORKER) == 2  # memory
    assert workers_for(Amount(1, 1, 3, 1), Amount(1000, 1024, 2, 4)) == 2  # GPUs


def test_a_quiet_pool_keeps_its_minimum_and_a_busy_one_its_maximum() -> None:
    assert desired_workers(PoolDemand(Amount(), Amount()), POLICY) == 1
    assert desired_workers(PoolDemand(runs(1000), Amount()), POLICY) == 20


def test_queued_and_running_work_both_count() -> None:
    demand = PoolDemand(running=runs(8), queued=runs(16))
    assert desired_workers(demand, POLICY) == 3


def test_a_burst_within_the_lead_time_is_asked_for_now_and_one_later_is_not_yet() -> None:
    quiet = [Amount()] * 10
    burst_in_two_minutes = [*quiet[:2], runs(40), *quiet[3:]]
    burst_in_five_minutes = [*quiet[:5], runs(40), *quiet[6:]]
    assert desired_workers(PoolDemand(Amount(), Amount(), burst_in_two_minutes), POLICY) == 5
    assert desired_workers(PoolDemand(Amount(), Amount(), burst_in_five_minutes), POLICY) == 1


def test_growing_is_asked_for_at_once() -> None:
    workers = [WorkerLoad("wrk_a", 8, False)]
    assert scale(4, workers, None, NOW, POLICY).desired == 4


def test_shrinking_waits_for_demand_to_stay_low() -> None:
    workers = [WorkerLoad(f"wrk_{n}", 0, False) for n in "abc"]
    step = scale(1, workers, NOW - timedelta(seconds=60), NOW, POLICY)
    assert (step.desired, step.drain, step.removable) == (3, (), ())
    drained = [*workers, WorkerLoad("wrk_d", 0, True)]
    assert scale(1, drained, None, NOW, POLICY).removable == ("wrk_d",)  # gone anyway


def test_shrinking_drains_the_least_busy_and_removes_only_drained_idle_workers() -> None:
    workers = [
        WorkerLoad("wrk_busy", 6, False),
        WorkerLoad("wrk_light", 1, False),
        WorkerLoad("wrk_idle", 0, False),
        WorkerLoad("wrk_drained_busy", 2, True),
        WorkerLoad("wrk_drained_idle", 0, True),
    ]
    step = scale(1, workers, NOW - timedelta(minutes=10), NOW, POLICY)
    assert step.desired == 1
    assert step.drain == ("wrk_idle", "wrk_light")
    assert step.removable == ("wrk_drained_idle",)  # never one still running work


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"min_workers": 5, "max_workers": 2}, "min"),
        ({"min_workers": -1}, "min"),
        ({"worker": Amount(0, 1024, 0, 1)}, "cpu"),
        ({"lead_seconds": -1}, "not negative"),
    ],
)
def test_a_policy_that_cannot_hold_is_refused(changes: dict[str, object], message: str) -> None:
    given: dict[str, object] = {"worker": WORKER, **changes}
    with pytest.raises(ValueError, match=message):
        ScalingPolicy(**given)  # type: ignore[arg-type]
