"""A limit's keys take turns by the starts they had: with room for one run at a time they
alternate (acme, globex, acme, globex, then acme's rest), the key served longest ago first;
with room for many, by their runs running and ahead; only within a priority class."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herder.domain.placement.limits import NEVER, LimitKey, Turn, turns
from herder.domain.placement.policy import plan
from herder.domain.placement.snapshot import LimitView, QueuedRun, Snapshot
from tests.unit.placement_snapshots import NOW, queued, running, worker

ROOMY = LimitView("lim_partner", "partner-api", max_running=100)  # binds nothing here


def keyed(name: str, waited: float, priority: int = 1) -> QueuedRun:
    """A run of key ``name``'s prefix (``acme-2`` is acme's)."""
    key = name.partition("-")[0]
    run = queued(name, waited=waited, priority=priority)
    return replace(run, limit_keys=(("lim_partner", key),))


def one_at_a_time(
    queue: list[QueuedRun], last_starts: dict[LimitKey, datetime] | None = None
) -> list[str]:
    """The runs in the order one slot starts them, each ending before the next pass; each
    start recorded as its key's last, as the store does."""
    queue, last = list(queue), dict(last_starts or {})
    started: list[str] = []
    for step in range(len(queue)):
        now = NOW + timedelta(seconds=step)
        snapshot = Snapshot(
            now, tuple(queue), (worker("w1", slots=1),), limits={ROOMY.id: ROOMY},
            limit_last_starts=last,
        )  # fmt: skip
        [placement] = plan(snapshot).placements
        run = next(run for run in queue if run.id == placement.run_id)
        queue.remove(run)
        last.update(dict.fromkeys(run.limit_keys, now))
        started.append(run.id)
    return started


def in_order(*names: str) -> list[QueuedRun]:
    """Runs queued a second apart, the first named the oldest."""
    return [keyed(name, waited=len(names) - index) for index, name in enumerate(names)]


@pytest.mark.parametrize(
    ("queue", "last_starts", "expected"),
    [
        pytest.param(
            in_order("acme-1", "acme-2", "acme-3", "acme-4", "globex-1", "globex-2"),
            {},
            ["acme-1", "globex-1", "acme-2", "globex-2", "acme-3", "acme-4"],
            id="acme's older backlog alternates with globex",
        ),
        pytest.param(
            in_order("acme-1", "acme-2", "globex-1", "globex-2"),
            {("lim_partner", "acme"): NOW - timedelta(seconds=10)},
            ["globex-1", "acme-1", "globex-2", "acme-2"],
            id="the key served longest ago (never) goes first, however old the other's runs",
        ),
        pytest.param(
            in_order("acme-1", "acme-2", "acme-3", "beta-1", "gamma-1", "gamma-2"),
            {},
            ["acme-1", "beta-1", "gamma-1", "acme-2", "gamma-2", "acme-3"],
            id="three keys go round",
        ),
        pytest.param(
            [keyed("acme-1", 3, priority=2), keyed("acme-2", 2, priority=2), keyed("globex-1", 9)],
            {},
            ["acme-1", "acme-2", "globex-1"],
            id="turns are taken within a priority class",
        ),
    ],
)
def test_with_one_slot_keys_alternate_by_the_starts_they_had(
    queue: list[QueuedRun], last_starts: dict[LimitKey, datetime], expected: list[str]
) -> None:
    assert one_at_a_time(queue, last_starts) == expected


def test_with_room_for_many_a_key_with_runs_running_waits_for_the_others() -> None:
    busy = replace(running("acme-0"), limit_keys=(("lim_partner", "acme"),))
    two_slots = worker("w1", slots=2, running=(busy,))  # one free
    snapshot = Snapshot(
        NOW, (keyed("acme-1", 30), keyed("beta-1", 10)), (two_slots,), limits={ROOMY.id: ROOMY},
        limit_last_starts={("lim_partner", "acme"): NOW - timedelta(hours=1)},
    )  # fmt: skip
    assert [placement.run_id for placement in plan(snapshot).placements] == ["beta-1"]


EARLIER = NOW - timedelta(seconds=5)
A, B = ("lim_partner", "a"), ("lim_partner", "b")


@pytest.mark.parametrize(
    ("running_now", "last_starts", "expected"),
    [
        ({}, {}, {"a-1": Turn(0), "b-1": Turn(0), "a-2": Turn(1), "ab-1": Turn(2)}),
        (
            {B: 3},
            {A: EARLIER, B: NOW},
            {"a-1": Turn(0, EARLIER), "b-1": Turn(3, NOW), "a-2": Turn(1, EARLIER),
             "ab-1": Turn(4, NOW)},
        ),
    ],
)  # fmt: skip
def test_a_runs_turn_is_its_busiest_keys_then_its_keys_latest_start(
    running_now: dict[LimitKey, int],
    last_starts: dict[LimitKey, datetime],
    expected: dict[str, Turn],
) -> None:
    both = replace(queued("ab-1", waited=1), limit_keys=(A, B))  # a's third, b's second
    gone = replace(queued("x-1", waited=1), limit_keys=(("lim_deleted", "a"),))
    runs = [keyed("a-1", 4), keyed("b-1", 3), keyed("a-2", 2), both, gone]
    assert turns(runs, {ROOMY.id: ROOMY}, running_now, last_starts) == expected
    assert Turn(0) == Turn(0, NEVER) < Turn(0, EARLIER) < Turn(1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=4), st.randoms(use_true_random=False))
def test_with_one_slot_no_key_starts_twice_while_another_waits_for_its_turn(
    sizes: list[int], shuffler: random.Random
) -> None:
    """Keys that still have queued runs have had starts within one of each other's."""
    names = [f"k{key}-{index}" for key, size in enumerate(sizes) for index in range(size)]
    shuffler.shuffle(names)
    started = one_at_a_time(in_order(*names))
    assert sorted(started) == sorted(names)
    left = Counter(name.partition("-")[0] for name in names)
    had: Counter[str] = Counter()
    for name in started:
        key = name.partition("-")[0]
        had[key] += 1
        left[key] -= 1
        waiting = [had[other] for other in left if left[other] > 0]
        assert not waiting or max(waiting) - min(waiting) <= 1, started
