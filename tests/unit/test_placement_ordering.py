"""Placement's ordering stage alone: the class a run counts as after waiting, when it starves,
and the order runs are considered in (class, then the starving oldest first, then fair share
between tenants)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest

from herder.domain.placement.ordering import (
    Aging,
    dispatch_order,
    effective_class,
    is_starving,
    waited,
)
from herder.domain.placement.snapshot import QueuedRun
from tests.unit.placement_snapshots import NOW, queued

HIGH, MEDIUM, LOW = 2, 1, 0
AGING = Aging()  # a class per 600 s of waiting; starving after 300 s
_MINUTE = timedelta(minutes=1)


def no_shares(tenant: str) -> float:
    return 0.0


def order(
    runs: list[QueuedRun], share: Callable[[str], float] = no_shares, aging: Aging = AGING
) -> list[str]:
    return [run.id for run in dispatch_order(runs, NOW, aging, share)]


@pytest.mark.parametrize(
    ("priority", "seconds", "expected"),
    [
        (LOW, 0, LOW),
        (LOW, 599, LOW),
        (LOW, 600, MEDIUM),  # each 600 s waited counts one class more
        (LOW, 1199, MEDIUM),
        (LOW, 1200, HIGH),
        (LOW, 100_000, HIGH),  # never past high
        (MEDIUM, 600, HIGH),
        (HIGH, 0, HIGH),
        (LOW, -60, LOW),  # queued "in the future" (a clock step) waited nothing
    ],
)
def test_waiting_raises_a_run_s_class_up_to_high(
    priority: int, seconds: float, expected: int
) -> None:
    assert effective_class(queued("r", priority=priority, waited=seconds), NOW, AGING) == expected


@pytest.mark.parametrize(
    ("seconds", "aging", "starving"),
    [
        (0, AGING, False),
        (299.9, AGING, False),
        (300, AGING, True),
        (5000, AGING, True),
        (30, Aging(starvation_seconds=30), True),
        (-60, AGING, False),
    ],
)
def test_a_run_starves_once_it_has_waited_the_starvation_time(
    seconds: float, aging: Aging, starving: bool
) -> None:
    assert is_starving(queued("r", waited=seconds), NOW, aging) is starving


@pytest.mark.parametrize(("seconds", "expected"), [(0, 0.0), (90.5, 90.5), (-60, 0.0)])
def test_waited_is_never_negative(seconds: float, expected: float) -> None:
    assert waited(queued("r", waited=seconds), NOW) == expected


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        pytest.param([], [], id="nothing queued"),
        pytest.param(
            [queued("low", priority=LOW), queued("high", priority=HIGH), queued("med")],
            ["high", "med", "low"],
            id="classes high first",
        ),
        pytest.param(
            [queued("high", priority=HIGH), queued("aged", priority=LOW, waited=1200)],
            ["aged", "high"],
            id="an aged run joins the class above, as the older",
        ),
        pytest.param(
            [
                queued("new", waited=100),
                queued("starving", waited=400),
                queued("older", waited=200),
            ],
            ["starving", "older", "new"],
            id="one tenant: oldest first",
        ),
        pytest.param(
            [queued("b", tenant="t2", waited=350), queued("a", tenant="t1", waited=400)],
            ["a", "b"],
            id="the starving oldest first, whatever the tenant",
        ),
        pytest.param(
            [queued("y", waited=5), queued("x", waited=5)],
            ["x", "y"],
            id="same age: by id",
        ),
        pytest.param(
            [
                queued("t1-old", tenant="t1", waited=200),
                queued("t1-new", tenant="t1", waited=100),
                queued("t2-mid", tenant="t2", waited=150),
            ],
            ["t1-old", "t2-mid", "t1-new"],
            id="equal shares: the tenant whose head is oldest, each time",
        ),
        pytest.param(
            [
                queued("fair", tenant="t1", waited=100),
                queued("starving", tenant="t2", priority=LOW, waited=400),
            ],
            ["fair", "starving"],
            id="starving counts within its class only",
        ),
    ],
)
def test_runs_are_considered_by_class_then_starvation_then_age(
    runs: list[QueuedRun], expected: list[str]
) -> None:
    assert order(runs) == expected


def test_the_tenant_with_the_lowest_share_goes_first() -> None:
    runs = [queued("heavy", tenant="t1", waited=200), queued("light", tenant="t2", waited=100)]
    shares = {"t1": 0.5, "t2": 0.1}
    assert order(runs, shares.__getitem__) == ["light", "heavy"]


def test_shares_are_asked_again_after_each_run_so_placements_count() -> None:
    """A tenant's share grows as its runs are placed; the other tenant comes up once it is
    the lower."""
    runs = [queued(f"t1-{i}", tenant="t1", waited=100 - i) for i in range(3)]
    runs += [queued(f"t2-{i}", tenant="t2", waited=50 - i) for i in range(2)]
    shares = {"t1": 0.0, "t2": 0.15}
    considered = []
    for run in dispatch_order(runs, NOW, AGING, shares.__getitem__):
        considered.append(run.id)
        shares[run.tenant_id] += 0.1  # placed: the tenant now uses more
    assert considered == ["t1-0", "t1-1", "t2-0", "t1-2", "t2-1"]


def test_starving_runs_go_before_fair_share_in_their_class() -> None:
    runs = [queued("favoured", tenant="t2", waited=10), queued("starving", tenant="t1", waited=301)]
    shares = {"t1": 0.9, "t2": 0.0}
    assert order(runs, shares.__getitem__) == ["starving", "favoured"]


def test_a_preempted_run_keeps_its_place_but_not_its_age() -> None:
    """Preempted a minute ago, after an hour in line and at work: still ahead of a run of its
    class that queued after it, yet not aged past the high run it made room for."""
    victim = replace(queued("victim", priority=LOW, waited=3600), preempted_at=NOW - _MINUTE)
    later = queued("later", priority=LOW, waited=120)
    urgent = queued("urgent", priority=HIGH, waited=60)
    assert effective_class(victim, NOW, AGING) == LOW
    assert not is_starving(victim, NOW, AGING)
    assert order([later, victim, urgent]) == ["urgent", "victim", "later"]
