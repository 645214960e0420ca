"""How an attempt the worker stopped is told: which signal ended it, in its reason and in
``stopped_by``, as a table of (why, escalated, grace) to what the user reads."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from herder.domain.states import AttemptState, StoppedBy
from herder.worker.limits import Verdict
from herder.worker.outcome import ResourceUsage, Stopped, outcome_of
from herder.worker.process import LaunchPlan

USAGE = ResourceUsage(0.0, 0.0, 0, 1.0)
KILLED = signal.SIGKILL  # a wait status: killed by this signal
TERMINATED = signal.SIGTERM
SAVED_AND_EXITED = 0  # a wait status: exit 0


def plan(grace: float) -> LaunchPlan:
    return LaunchPlan(["true"], {}, Path("/w"), 60, stop_grace_seconds=grace)


@pytest.mark.parametrize(
    ("stop", "status", "grace", "stopped_by", "reason"),
    [
        (Stopped(AttemptState.CANCELLED, "cancelled", False), TERMINATED, 30, StoppedBy.SIGTERM,
         "cancelled (SIGTERM)"),
        (Stopped(AttemptState.PREEMPTED, "preempted", False), SAVED_AND_EXITED, 30,
         StoppedBy.SIGTERM, "preempted (SIGTERM)"),
        (Stopped(AttemptState.TIMED_OUT, "timed out after 5s", True), KILLED, 2.5,
         StoppedBy.SIGKILL, "timed out after 5s (SIGTERM, then SIGKILL after 2.5s grace)"),
        (Stopped(AttemptState.CANCELLED, "cancelled", True), KILLED, 0, StoppedBy.SIGKILL,
         "cancelled (SIGKILL, no stop grace)"),
    ],
)  # fmt: skip
def test_a_stopped_attempt_says_which_signal_ended_it(
    stop: Stopped, status: int, grace: float, stopped_by: StoppedBy, reason: str
) -> None:
    outcome = outcome_of(stop, status, USAGE, plan(grace), Verdict())
    assert (outcome.state, outcome.stopped_by, outcome.reason) == (stop.state, stopped_by, reason)


@pytest.mark.parametrize("status", [SAVED_AND_EXITED, 1 << 8, KILLED])
def test_an_attempt_that_ended_by_itself_was_stopped_by_nothing(status: int) -> None:
    assert outcome_of(None, status, USAGE, plan(30), Verdict()).stopped_by is None
