"""What a run's timeline says when the dispatcher places or stops it, and when an attempt
ends: the real cause (a higher class, a reclaimed pool share, a spent hard budget), whether
it runs on borrowed room, and each attempt by its own number."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from herder.domain.jobs import RetryPolicy
from herder.domain.lifecycle.facts import AttemptFacts, Ending, RunFacts
from herder.domain.lifecycle.settle import settle
from herder.domain.lifecycle.stops import Stop, before_delivery
from herder.domain.placement.timeline import (
    ForPriority,
    HardBudget,
    Reclaim,
    StopCause,
    cause_kind,
    placed,
    stop_reason,
    stopping,
)
from herder.domain.states import AttemptState, RunState

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BUDGET = HardBudget("hard month budget", "cpu 50 of 40 s used; it resets at 2026-02-01 00:00 UTC")


@pytest.mark.parametrize(
    ("cause", "reason"),
    [
        (ForPriority("run_b", 2, 1), "stopped for the higher-priority run run_b (high over "
                                     "medium)"),
        (ForPriority("run_b", 1, 0), "stopped for the higher-priority run run_b (medium over low)"),
        (Reclaim("run_b", "ml", "a100"), "reclaimed for tenant ml's share in pool a100 (run "
                                         "run_b)"),
        (BUDGET, "stopped by the tenant's hard month budget: cpu 50 of 40 s used; it resets at "
                 "2026-02-01 00:00 UTC"),
    ],
)  # fmt: skip
def test_a_stop_says_its_cause(cause: StopCause, reason: str) -> None:
    assert stop_reason(cause) == reason
    assert stopping(cause, 2, "box") == (
        f"stopping attempt 2 on box: {reason}; it will be queued again without using up a retry"
    )


@pytest.mark.parametrize(
    ("cause", "kind"),
    [(ForPriority("run_b", 2, 1), "priority"), (Reclaim("run_b", "ml", "a100"), "reclaim"),
     (BUDGET, "budget")],
)  # fmt: skip
def test_a_stop_is_counted_by_its_cause(cause: StopCause, kind: str) -> None:
    assert cause_kind(cause) == kind


@pytest.mark.parametrize(
    ("number", "workers", "pool", "message"),
    [
        (1, ["box"], None, "attempt 1 placed on box"),
        (3, ["b", "a", "b"], None, "attempt 3 placed on a, b"),
        (2, ["box"], "a100", "attempt 2 placed on box, borrowed past its tenant's share in pool "
                             "a100: it may be reclaimed for another tenant's share"),
    ],
)  # fmt: skip
def test_a_placement_says_when_it_borrows(
    number: int, workers: list[str], pool: str | None, message: str
) -> None:
    assert placed(number, workers, pool) == message


def ended(
    outcome: AttemptState,
    reason: str,
    *,
    number: int = 2,
    preemptions: int = 1,
    preempt_reason: str | None = None,
    worker_id: str | None = "w1",
) -> tuple[str, str]:
    """The end event's message and the attempt's reason when attempt ``number`` of a run
    preempted ``preemptions`` times before ends so."""
    run = RunFacts(
        "run", RunState.RUNNING, number, preemptions=preemptions,
        retry=RetryPolicy(max_attempts=3, initial_delay_seconds=10),
    )  # fmt: skip
    attempt = AttemptFacts(
        "a", "run", number, "w1",
        preempt_requested=preempt_reason is not None, preempt_reason=preempt_reason,
    )  # fmt: skip
    ending = Ending("a", number, outcome, reason, worker_id=worker_id)
    changes, _ = settle(
        {run.id: run}, {attempt.id: attempt}, [ending],
        actor="worker:w1", now=NOW, rng=random.Random(7),
    )  # fmt: skip
    (move,) = changes.moves
    (end,) = changes.attempt_ends
    return move.event.message, end.reason


RECLAIMED = stop_reason(Reclaim("run_b", "ml", "a100"))


@pytest.mark.parametrize(
    ("outcome", "reason", "facts", "message", "attempt_reason"),
    [
        (AttemptState.CANCELLED, "cancelled", {}, "attempt 2 cancelled: cancelled", "cancelled"),
        (AttemptState.SUCCEEDED, "exit 0", {"number": 3, "preemptions": 2},
         "attempt 3 succeeded: exit 0", "exit 0"),
        (AttemptState.FAILED, "exit 1", {"number": 3},
         "attempt 3 failed: exit 1; retry 2 of 2 in", "exit 1"),  # the second try, third attempt
        (AttemptState.PREEMPTED, "preempted", {"preempt_reason": RECLAIMED},
         f"attempt 2 preempted: {RECLAIMED}", RECLAIMED),  # the server's word, not the worker's
        (AttemptState.FAILED, "killed by SIGTERM", {"preempt_reason": stop_reason(BUDGET)},
         f"attempt 2 preempted: {stop_reason(BUDGET)}", stop_reason(BUDGET)),
        (AttemptState.PREEMPTED, "preempted", {}, "attempt 2 preempted: preempted", "preempted"),
        (AttemptState.LOST, "worker w1 lost", {"preempt_reason": RECLAIMED, "worker_id": None},
         "attempt 2 preempted: worker w1 lost", "worker w1 lost"),  # the server's own finding
    ],
)  # fmt: skip
def test_an_attempts_end_names_it_by_its_own_number_and_its_real_cause(
    outcome: AttemptState, reason: str, facts: dict[str, Any], message: str,
    attempt_reason: str,
) -> None:  # fmt: skip
    said, kept = ended(outcome, reason, **facts)
    assert said.startswith(message), said
    assert kept == attempt_reason


def test_a_stop_before_delivery_says_its_cause() -> None:
    assert before_delivery(Stop.PREEMPT, RECLAIMED) == (
        AttemptState.PREEMPTED,
        f"{RECLAIMED} before it reached its worker",
    )
    assert before_delivery(Stop.PREEMPT) == (
        AttemptState.PREEMPTED,
        "preempted before it reached its worker",
    )
