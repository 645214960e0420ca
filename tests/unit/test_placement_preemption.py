"""Placement's preemption stage alone: who may preempt, which workers and victims it takes
(the fewest, then the cheapest: lowest class, then least work lost), and what it never
takes (its own class or above, the unpreemptible, those in their cool-down, those already
stopping)."""

from __future__ import annotations

import pytest

from herder.domain.placement.preemption import Choice, Rules, choose, may_preempt
from herder.domain.placement.snapshot import QueuedRun, WorkerView
from tests.unit.placement_snapshots import NOW, queued, rooms, running, worker

HIGH, MEDIUM, LOW = 2, 1, 0
RULES = Rules()  # 300 s cool-down, at most 8 victims


def urgent(cpu: float = 1, memory_mb: int = 256) -> QueuedRun:
    return queued("urgent", priority=HIGH, cpu=cpu, memory_mb=memory_mb)


def victims_of(choice: Choice | None) -> tuple[str, list[str]] | None:
    if choice is None:
        return None
    return choice.worker.id, [victim.run_id for victim in choice.victims]


@pytest.mark.parametrize(
    ("priority", "replicas", "allowed"),
    [(HIGH, 1, True), (MEDIUM, 1, False), (LOW, 1, False), (HIGH, 2, False)],
)
def test_only_a_high_single_run_may_preempt(priority: int, replicas: int, allowed: bool) -> None:
    assert may_preempt(queued("r", priority=priority, replicas=replicas)) is allowed


@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        pytest.param(
            [
                worker(
                    "w",
                    cpu=2,
                    running=(running("low", priority=LOW), running("med", priority=MEDIUM)),
                )
            ],
            ("w", ["low"]),
            id="the lowest class",
        ),
        pytest.param(
            [
                worker(
                    "w",
                    cpu=2,
                    running=(running("old", started_ago=3600), running("young", started_ago=60)),
                )
            ],
            ("w", ["young"]),
            id="the least work lost",
        ),
        pytest.param(
            [
                worker("two", cpu=2, running=(running("s1"), running("s2"))),
                worker("one", cpu=2, running=(running("big", cpu=2),)),
            ],
            ("one", ["big"]),
            id="the fewest victims, on one worker",
        ),
        pytest.param(
            [
                worker("b", cpu=1, running=(running("on-b"),)),
                worker("a", cpu=1, running=(running("on-a"),)),
            ],
            ("a", ["on-a"]),
            id="a tie: the lower worker id",
        ),
        pytest.param(
            [
                worker("a", cpu=1, running=(running("medium-on-a", priority=MEDIUM),)),
                worker("b", cpu=1, running=(running("low-on-b", priority=LOW),)),
            ],
            ("b", ["low-on-b"]),
            id="the cheaper worker before the lower id",
        ),
        pytest.param(
            [worker("w", cpu=1, running=(running("stopping", preempting=True),))],
            ("w", []),
            id="room already being freed: no new victim",
        ),
        pytest.param(
            [
                worker(
                    "w",
                    cpu=1.5,
                    running=(running("stopping", preempting=True), running("next", cpu=0.5)),
                )
            ],
            ("w", []),
            id="a victim stopping frees enough: no second one",
        ),
        pytest.param(
            [worker("w", cpu=2, running=(running("pinned", preemptible=False), running("free")))],
            ("w", ["free"]),
            id="never the unpreemptible",
        ),
        pytest.param(
            [worker("w", cpu=1, running=(running("cooled", preempted_ago=301),))],
            ("w", ["cooled"]),
            id="past its cool-down",
        ),
    ],
)
def test_the_fewest_then_cheapest_victims_are_chosen(
    workers: list[WorkerView], expected: tuple[str, list[str]]
) -> None:
    choice, _ = choose(urgent(), rooms(*workers), NOW, RULES)
    assert victims_of(choice) == expected


@pytest.mark.parametrize(
    ("workers", "cpu", "cooling"),
    [
        pytest.param(
            [worker("w", cpu=1, running=(running("peer", priority=HIGH),))], 1, 0, id="same class"
        ),
        pytest.param(
            [worker("w", cpu=1, running=(running("pinned", preemptible=False),))],
            1,
            0,
            id="unpreemptible",
        ),
        pytest.param(
            [worker("w", cpu=1, running=(running("victim", preempted_ago=30),))],
            1,
            1,
            id="cool-down",
        ),
        pytest.param(
            [
                worker("a", cpu=1, running=(running("va", preempted_ago=30),)),
                worker("b", cpu=1, running=(running("vb", preempted_ago=299),)),
            ],
            1,
            2,
            id="cool-downs counted over the workers",
        ),
        pytest.param(
            [worker("w", cpu=1, running=(running("victim"),))], 2, 0, id="never big enough"
        ),
    ],
)
def test_no_choice_where_no_victim_may_be_taken(
    workers: list[WorkerView], cpu: float, cooling: int
) -> None:
    assert choose(urgent(cpu), rooms(*workers), NOW, RULES) == (None, cooling)


def test_a_worker_held_for_another_run_is_passed_over_but_not_one_held_for_this() -> None:
    held, also = rooms(
        worker("held", cpu=1, running=(running("v1"),)),
        worker("other", cpu=1, running=(running("v2"),)),
    )
    held.reserve("someone-else")
    also.reserve("urgent")
    choice, _ = choose(urgent(), [held, also], NOW, RULES)
    assert victims_of(choice) == ("other", ["v2"])


def test_victims_chosen_earlier_in_the_pass_are_not_chosen_again() -> None:
    (room,) = rooms(worker("w", cpu=2, running=(running("first"), running("second"))))
    room.victims.append(room.view.running[0])
    choice, _ = choose(urgent(cpu=1), [room], NOW, RULES)
    assert victims_of(choice) == ("w", ["second"])


def test_no_more_victims_than_the_rules_allow() -> None:
    (room,) = rooms(worker("w", cpu=2, running=(running("a"), running("b"))))
    assert choose(urgent(cpu=2), [room], NOW, Rules(max_victims=1)) == (None, 0)
    choice, _ = choose(urgent(cpu=2), [room], NOW, Rules(max_victims=2))
    assert victims_of(choice) == ("w", ["a", "b"])


def test_many_candidates_are_chosen_greedily_and_the_unneeded_dropped() -> None:
    """Past ten candidates on a worker: biggest first until the run fits, then any victim the
    others make room without is left running."""
    fillers = tuple(running(f"f{i}", cpu=0.1, memory_mb=10) for i in range(10))
    wide = running("wide", cpu=2, memory_mb=100)  # the biggest by cpu, but short of memory
    tall = running("tall", cpu=1, memory_mb=2000)
    full = worker("w", cpu=4, memory_mb=2200, running=(wide, tall, *fillers))
    choice, _ = choose(urgent(cpu=1, memory_mb=1000), rooms(full), NOW, RULES)
    assert victims_of(choice) == ("w", ["tall"])
