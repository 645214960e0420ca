"""Time budgets: periods in a tenant's time zone, what attempts are charged, when a budget
is spent and why a run waits on it, and what a hostile budget is refused for."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from herder.domain.alerts.decisions import budget as budget_signals
from herder.domain.alerts.rules import RuleParams
from herder.domain.budgets import (
    Budget,
    Charged,
    Period,
    Running,
    TenantBudgets,
    TenantUse,
    Usage,
    ended_use,
    window,
)
from herder.domain.placement.policy import plan
from herder.domain.placement.snapshot import Snapshot
from herder.domain.placement.timeline import HardBudget
from tests.unit.placement_snapshots import NOW, queued, running, worker

PARIS = TenantBudgets(time_zone="Europe/Paris").zone
SATURDAY_LATE = datetime(2026, 11, 28, 23, 30, tzinfo=UTC)  # Sunday 00:30 in Paris
SUNDAY_MIDNIGHT = datetime(2026, 11, 29, 23, tzinfo=UTC)  # Monday 00:00 in Paris


@pytest.mark.parametrize(
    ("period", "first", "after", "resets_at"),
    [
        (Period.DAY, date(2026, 11, 29), date(2026, 11, 30), SUNDAY_MIDNIGHT),
        (Period.WEEK, date(2026, 11, 23), date(2026, 11, 30), SUNDAY_MIDNIGHT),
        (Period.MONTH, date(2026, 11, 1), date(2026, 12, 1), SUNDAY_MIDNIGHT + timedelta(days=1)),
    ],
)  # fmt: skip
def test_a_period_is_whole_days_of_the_tenants_time_zone(
    period: Period, first: date, after: date, resets_at: datetime
) -> None:
    span = window(period, SATURDAY_LATE, PARIS)
    assert (span.first, span.after, span.ends_at) == (first, after, resets_at)


def test_a_month_ends_at_the_next_month_across_a_year_and_a_daylight_saving_change() -> None:
    december = window(Period.MONTH, datetime(2026, 12, 31, 12, tzinfo=UTC), PARIS)
    assert (december.first, december.after) == (date(2026, 12, 1), date(2027, 1, 1))
    october = window(Period.MONTH, datetime(2026, 10, 15, tzinfo=UTC), PARIS)
    assert october.starts_at == datetime(2026, 9, 30, 22, tzinfo=UTC)  # CEST
    assert october.ends_at == datetime(2026, 10, 31, 23, tzinfo=UTC)  # CET


def test_an_ended_attempt_is_charged_its_measured_cpu_and_gpus_times_wall_time() -> None:
    started = NOW - timedelta(minutes=10)
    assert ended_use(42.5, 4, 2, started, NOW) == Usage(42.5, 1200)
    assert ended_use(None, 1.5, 0, started, NOW) == Usage(900, 0)  # lost: its request
    assert ended_use(None, 1, 1, None, NOW) == Usage(0, 0)  # never started


def use(
    *budgets: Budget, charged: tuple[Charged, ...] = (), running: tuple[Running, ...] = ()
) -> TenantUse:
    return TenantUse(TenantBudgets(budgets=budgets), charged, running)


def test_charges_of_the_period_and_running_attempts_since_it_began_count() -> None:
    today, yesterday = NOW.date(), NOW.date() - timedelta(days=1)
    budget = Budget(period=Period.DAY, cpu_seconds=1000, gpu_seconds=600)
    standing = use(
        budget,
        charged=(
            Charged(None, "job_a", today, Usage(300, 100)),
            Charged(None, "job_a", yesterday, Usage(5000, 5000)),  # another period
            Charged("a100", "job_b", today, Usage(100, 200)),
        ),
        # began yesterday: only the 12 hours since midnight count, 2 cores and 1 GPU
        running=(Running(None, "job_c", 2, 1, NOW - timedelta(days=1)),),
    ).standings(NOW)[0]
    assert standing.used == Usage(400 + 2 * 43200, 300 + 43200)
    assert standing.spent


def test_a_pool_budget_counts_and_holds_only_its_pools_runs() -> None:
    budget = Budget(period=Period.WEEK, gpu_seconds=3600, pool="a100")
    charged = (Charged("a100", "j", NOW.date(), Usage(0, 3600)),)
    snapshot = Snapshot(
        now=NOW,
        queued=(replace(queued("in-pool", gpus=1), pool="a100"), queued("elsewhere")),
        workers=(worker("w", gpus=2),),
        budgets={"t1": use(budget, charged=charged)},
    )
    decided = plan(snapshot)
    assert [placement.run_id for placement in decided.placements] == ["elsewhere"]
    assert decided.waiting["in-pool"] == (
        "tenant week budget (pool a100) is spent (gpu 3600 of 3600 s); it resets at "
        "2026-11-23 00:00 UTC"
    )


def test_a_zero_budget_holds_every_run_from_the_start() -> None:
    nothing = Budget(period=Period.MONTH, gpu_seconds=0)
    snapshot = Snapshot(
        now=NOW, queued=(queued("run"),), workers=(worker("w"),), budgets={"t1": use(nothing)}
    )
    assert plan(snapshot).waiting["run"].startswith("tenant month budget is spent (gpu 0 of 0 s)")


def test_a_budget_with_room_left_holds_nothing() -> None:
    budget = Budget(period=Period.DAY, cpu_seconds=3600)
    charged = (Charged(None, "j", NOW.date(), Usage(3599, 0)),)
    snapshot = Snapshot(
        now=NOW, queued=(queued("run"),), workers=(worker("w"),),
        budgets={"t1": use(budget, charged=charged)},
    )  # fmt: skip
    assert [placement.run_id for placement in plan(snapshot).placements] == ["run"]


def test_a_spent_hard_budget_stops_the_tenants_running_attempts_in_its_pool() -> None:
    hard = Budget(period=Period.DAY, cpu_seconds=60, hard=True, pool="a100")
    in_pool = replace(
        worker("gpu-box", running=(running("mine", started_ago=120), running("stopping",
                                   started_ago=120, preempting=True), running("theirs", "t2"))),
        pool="a100",
    )  # fmt: skip
    elsewhere = worker("shared", running=(running("mine-elsewhere"),))
    snapshot = Snapshot(
        now=NOW,
        queued=(),
        workers=(in_pool, elsewhere),
        budgets={"t1": use(hard, charged=(Charged("a100", "j", NOW.date(), Usage(240, 0)),))},
    )
    (stop,) = plan(snapshot).preemptions
    assert (stop.run_id, stop.worker_id) == ("mine", "gpu-box")
    assert isinstance(stop.cause, HardBudget)
    assert stop.cause.budget == "hard day budget (pool a100)"
    assert stop.cause.spent.startswith("cpu 240 of 60 s used; it resets at ")


def test_a_spent_soft_budget_lets_running_attempts_finish() -> None:
    soft = Budget(period=Period.DAY, cpu_seconds=1)
    busy = worker("w", running=(running("mine", started_ago=120),))
    spent = use(soft, running=(Running(None, "j", 1, 0, NOW - timedelta(seconds=120)),))
    snapshot = Snapshot(now=NOW, queued=(), workers=(busy,), budgets={"t1": spent})
    assert spent.standings(NOW)[0].spent
    assert plan(snapshot).preemptions == []


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({"period": "day", "cpu_seconds": -1}, "cpu_seconds"),
        ({"period": "day", "gpu_seconds": 1e13}, "gpu_seconds"),
        ({"period": "day", "cpu_seconds": "lots"}, "cpu_seconds"),
        ({"period": "day", "cpu_seconds": float("nan")}, "cpu_seconds"),
        ({"period": "year", "cpu_seconds": 1}, "period"),
        ({"period": "day"}, "budgets"),
        ({"period": "day", "cpu_seconds": 1, "pool": "Not A Pool"}, "pool"),
    ],
)
def test_a_hostile_budget_is_refused_naming_its_field(budget: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        TenantBudgets.model_validate({"budgets": [budget]})
    assert field in str(refused.value)


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(ValidationError, match="time_zone"):
        TenantBudgets(time_zone="Mars/Olympus")


@pytest.mark.parametrize(
    ("used", "firing"),
    [(700, {"day:*:0.8": False, "day:*:spent": False}),
     (800, {"day:*:0.8": True, "day:*:spent": False}),
     (1000, {"day:*:0.8": True, "day:*:spent": True})],
)  # fmt: skip
def test_a_budget_alert_warns_at_80_percent_and_again_when_spent(
    used: float, firing: dict[str, bool]
) -> None:
    budget = Budget(period=Period.DAY, cpu_seconds=1000)
    standings = use(budget, charged=(Charged(None, "j", NOW.date(), Usage(used, 0)),)).standings(
        NOW
    )
    signals = budget_signals(standings, RuleParams())
    assert {signal.key: signal.firing for signal in signals} == firing
    assert signals[0].details["resets_at"] == "2026-11-22T00:00:00+00:00"
