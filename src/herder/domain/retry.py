"""What happens to a run when an attempt ends: retry after a back-off, or stop.

Back-off is exponential with full jitter (AWS architecture blog, "Exponential Backoff And
Jitter"): the n-th retry waits a uniform random time in [0, min(max, initial * factor^(n-1))],
which spreads a burst of failures instead of retrying them in lock-step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from herder.domain.jobs import RetryOutcome, RetryPolicy
from herder.domain.states import AttemptState, RunState, run_state_after_attempt

_RETRY_OUTCOME: dict[AttemptState, RetryOutcome] = {
    AttemptState.FAILED: RetryOutcome.FAILED,
    AttemptState.TIMED_OUT: RetryOutcome.TIMED_OUT,
    AttemptState.LOST: RetryOutcome.LOST,
}
OOM_REASON_PREFIX = "out of memory"
DISK_FULL_REASON_PREFIX = "disk full"


@dataclass(frozen=True)
class Decision:
    state: RunState
    retry_in_seconds: float | None = None  # set when state is RETRY_WAIT
    backoff_cap_seconds: float | None = None
    message: str = ""


def backoff_cap(policy: RetryPolicy, retry_number: int) -> float:
    """The most the ``retry_number``-th retry (1-based) may wait."""
    return float(
        min(
            policy.max_delay_seconds,
            policy.initial_delay_seconds * policy.factor ** (retry_number - 1),
        )
    )


def retry_outcome(outcome: AttemptState, reason: str) -> RetryOutcome | None:
    if outcome is AttemptState.FAILED and reason.startswith(OOM_REASON_PREFIX):
        return RetryOutcome.OOM
    return _RETRY_OUTCOME.get(outcome)


def decide(
    outcome: AttemptState,
    reason: str,
    attempt: int,
    policy: RetryPolicy,
    rng: random.Random,
    exit_code: int | None = None,
    *,
    tries: int,
) -> Decision:
    """The run's next state after attempt number ``attempt`` ended with ``outcome``, the
    ``tries``-th to count against the policy (preempted and suspended attempts do not).

    A retryable outcome with attempts left waits in ``retry_wait``; with none left the run is
    ``dead`` (the dead-letter set) when retries were configured, else it keeps the outcome's
    state. Success, cancellation and preemption are never retries. The message names the
    attempt by its own number.
    """
    plain = run_state_after_attempt(outcome)
    kind = retry_outcome(outcome, reason)
    permanent = (
        kind is RetryOutcome.FAILED
        and policy.exit_codes is not None
        and exit_code not in policy.exit_codes
    )
    if kind is None or kind not in policy.retry_on or permanent:
        return Decision(plain, message=f"attempt {attempt} {outcome}: {reason}")
    if tries < policy.max_attempts:
        cap = backoff_cap(policy, tries)
        delay = rng.uniform(0, cap)
        return Decision(
            RunState.RETRY_WAIT,
            retry_in_seconds=delay,
            backoff_cap_seconds=cap,
            message=(
                f"attempt {attempt} {outcome}: {reason}; retry {tries} of "
                f"{policy.max_attempts - 1} in {delay:.2f}s (back-off cap {cap:.2f}s)"
            ),
        )
    if policy.max_attempts > 1:
        return Decision(
            RunState.DEAD,
            message=f"attempt {attempt} {outcome}: {reason}; all {policy.max_attempts} "
            "attempts used, the run is dead",
        )
    return Decision(plain, message=f"attempt {attempt} {outcome}: {reason}")
