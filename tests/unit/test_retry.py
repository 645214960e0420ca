"""The retry decision after an attempt: back-off caps, jitter bounds, dead letters."""

from __future__ import annotations

import random

import pytest

from herder.domain.jobs import RetryOutcome, RetryPolicy
from herder.domain.retry import backoff_cap, decide
from herder.domain.states import AttemptState, RunState

POLICY = RetryPolicy(
    max_attempts=4, initial_delay_seconds=1, factor=2, max_delay_seconds=3, retry_on=["failed"]
)


@pytest.mark.parametrize(("retry", "cap"), [(1, 1.0), (2, 2.0), (3, 3.0), (4, 3.0)])
def test_back_off_caps_grow_by_the_factor_up_to_the_maximum(retry: int, cap: float) -> None:
    assert backoff_cap(POLICY, retry) == cap


def test_full_jitter_stays_within_the_cap() -> None:
    rng = random.Random(7)
    for attempt in (1, 2, 3):
        for _ in range(200):
            decision = decide(AttemptState.FAILED, "exit 1", attempt, POLICY, rng, tries=attempt)
            assert decision.state is RunState.RETRY_WAIT
            assert decision.retry_in_seconds is not None
            assert 0 <= decision.retry_in_seconds <= backoff_cap(POLICY, attempt)


@pytest.mark.parametrize(
    ("outcome", "reason", "attempt", "policy", "state"),
    [
        (AttemptState.FAILED, "exit 1", 4, POLICY, RunState.DEAD),
        (AttemptState.TIMED_OUT, "timed out", 1, POLICY, RunState.TIMED_OUT),  # not retried
        (AttemptState.SUCCEEDED, "exit 0", 1, POLICY, RunState.SUCCEEDED),
        (AttemptState.CANCELLED, "cancelled", 1, POLICY, RunState.CANCELLED),
        (AttemptState.PREEMPTED, "preempted", 4, POLICY, RunState.QUEUED),  # uses no retry
        (AttemptState.FAILED, "exit 1", 1, RetryPolicy(), RunState.FAILED),  # no retries set
        (AttemptState.LOST, "worker gone", 1, RetryPolicy(max_attempts=2), RunState.RETRY_WAIT),
        (AttemptState.LOST, "worker gone", 2, RetryPolicy(max_attempts=2), RunState.DEAD),
    ],
)
def test_what_follows_an_attempt(
    outcome: AttemptState, reason: str, attempt: int, policy: RetryPolicy, state: RunState
) -> None:
    assert decide(outcome, reason, attempt, policy, random.Random(1), tries=attempt).state is state


def test_out_of_memory_retries_only_when_asked() -> None:
    oom = "out of memory (killed by SIGKILL)"
    plain = RetryPolicy(max_attempts=3, retry_on=[RetryOutcome.FAILED])
    only_oom = RetryPolicy(max_attempts=3, retry_on=[RetryOutcome.OOM])
    rng = random.Random()
    assert decide(AttemptState.FAILED, oom, 1, plain, rng, tries=1).state is RunState.FAILED
    assert decide(AttemptState.FAILED, oom, 1, only_oom, rng, tries=1).state is RunState.RETRY_WAIT


def test_the_message_says_when_and_why() -> None:
    decision = decide(AttemptState.FAILED, "exit 3", 2, POLICY, random.Random(3), tries=2)
    assert "attempt 2 failed: exit 3" in decision.message
    assert "retry 2 of 3" in decision.message
    assert "cap 2.00s" in decision.message


def test_only_the_listed_exit_codes_retry_when_a_list_is_given() -> None:
    policy = RetryPolicy(max_attempts=3, exit_codes=[75])  # EX_TEMPFAIL
    rng = random.Random()
    retried = decide(AttemptState.FAILED, "exit 75", 1, policy, rng, 75, tries=1)
    assert retried.state is RunState.RETRY_WAIT
    refused = decide(AttemptState.FAILED, "exit 2", 1, policy, rng, 2, tries=1)
    assert refused.state is RunState.FAILED
