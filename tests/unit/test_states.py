"""The run state machine, every pair of states: legal moves succeed, all others conflict."""

from __future__ import annotations

import itertools

import pytest

from herder.domain.alerts.rules import FailedOutcome
from herder.domain.errors import Conflict
from herder.domain.states import (
    ACTIVE_RUN_STATES,
    CANCELLABLE_RUN_STATES,
    FAILED_RUN_STATES,
    LIVE_RUN_STATES,
    SLOT_HOLDING_RUN_STATES,
    SUSPENDABLE_RUN_STATES,
    TERMINAL_RUN_STATES,
    AttemptState,
    RunState,
    can_transition,
    check_transition,
    run_state_after_attempt,
)

S = RunState
LEGAL = {
    (S.PENDING, S.QUEUED), (S.PENDING, S.CANCELLED), (S.PENDING, S.EXPIRED),
    (S.QUEUED, S.RUNNING), (S.QUEUED, S.CANCELLED), (S.QUEUED, S.EXPIRED),
    (S.RUNNING, S.SUCCEEDED), (S.RUNNING, S.FAILED), (S.RUNNING, S.TIMED_OUT),
    (S.RUNNING, S.LOST), (S.RUNNING, S.CANCELLED), (S.RUNNING, S.RETRY_WAIT),
    (S.RUNNING, S.DEAD), (S.RUNNING, S.QUEUED),
    (S.RETRY_WAIT, S.QUEUED), (S.RETRY_WAIT, S.CANCELLED),
    (S.PENDING, S.SUSPENDED), (S.QUEUED, S.SUSPENDED), (S.RUNNING, S.SUSPENDED),
    (S.RETRY_WAIT, S.SUSPENDED),
    (S.SUSPENDED, S.QUEUED), (S.SUSPENDED, S.PENDING), (S.SUSPENDED, S.CANCELLED),
    (S.SCHEDULED, S.QUEUED), (S.SCHEDULED, S.CANCELLED),
    (S.WAITING, S.SUCCEEDED), (S.WAITING, S.FAILED), (S.WAITING, S.TIMED_OUT),
    (S.WAITING, S.SKIPPED), (S.WAITING, S.CANCELLED),
}  # fmt: skip
ALL_PAIRS = list(itertools.product(RunState, RunState))


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL))
def test_legal_transitions_are_allowed(source: RunState, target: RunState) -> None:
    assert can_transition(source, target)
    check_transition(source, target)


@pytest.mark.parametrize(("source", "target"), [pair for pair in ALL_PAIRS if pair not in LEGAL])
def test_every_other_transition_is_a_conflict(source: RunState, target: RunState) -> None:
    assert not can_transition(source, target)
    with pytest.raises(Conflict, match=f"{source}.*{target}"):
        check_transition(source, target)


# Each state's sets, one row a state: ended (terminal, else active), failed (ended without
# succeeding on its own account), live (the overview counts it now). A new state needs its row.
SETS: dict[RunState, tuple[bool, bool, bool]] = {
    # state: (ended, failed, live)
    S.SCHEDULED: (False, False, True),
    S.PENDING: (False, False, True),
    S.QUEUED: (False, False, True),
    S.RUNNING: (False, False, True),
    S.RETRY_WAIT: (False, False, True),
    S.SUSPENDED: (False, False, True),
    S.WAITING: (False, False, True),
    S.SUCCEEDED: (True, False, False),
    S.FAILED: (True, True, False),
    S.TIMED_OUT: (True, True, False),
    S.LOST: (True, True, False),
    S.CANCELLED: (True, False, False),
    S.DEAD: (True, True, True),
    S.EXPIRED: (True, True, False),
    S.SKIPPED: (True, False, False),
    S.UPSTREAM_FAILED: (True, False, False),
}


def test_every_state_has_a_row_of_sets() -> None:
    assert set(SETS) == set(RunState)


@pytest.mark.parametrize("state", list(RunState))
def test_each_state_is_in_its_sets(state: RunState) -> None:
    ended, failed, live = SETS[state]
    assert (state in TERMINAL_RUN_STATES, state.is_terminal) == (ended, ended)
    assert (state in ACTIVE_RUN_STATES, state.is_active) == (not ended, not ended)
    assert (state in FAILED_RUN_STATES) == failed
    assert (state in LIVE_RUN_STATES) == live


def test_a_run_failed_alert_chooses_among_failed_states() -> None:
    assert {RunState(outcome) for outcome in FailedOutcome} <= FAILED_RUN_STATES


def test_terminal_states_are_final() -> None:
    for state in TERMINAL_RUN_STATES:
        assert state.is_terminal
        assert not any(can_transition(state, target) for target in RunState)


def test_only_active_states_can_be_cancelled() -> None:
    assert {
        S.SCHEDULED, S.PENDING, S.QUEUED, S.RUNNING, S.RETRY_WAIT, S.SUSPENDED, S.WAITING
    } == CANCELLABLE_RUN_STATES  # fmt: skip


def test_every_waiting_or_running_run_can_be_suspended() -> None:
    assert {S.PENDING, S.QUEUED, S.RUNNING, S.RETRY_WAIT} == SUSPENDABLE_RUN_STATES


def test_a_suspended_run_is_active_but_holds_no_slot() -> None:
    assert S.SUSPENDED.is_active
    assert S.SUSPENDED not in SLOT_HOLDING_RUN_STATES
    assert SLOT_HOLDING_RUN_STATES | {S.SUSPENDED} == ACTIVE_RUN_STATES


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        (AttemptState.SUCCEEDED, S.SUCCEEDED),
        (AttemptState.FAILED, S.FAILED),
        (AttemptState.TIMED_OUT, S.TIMED_OUT),
        (AttemptState.CANCELLED, S.CANCELLED),
        (AttemptState.LOST, S.LOST),
        (AttemptState.PREEMPTED, S.QUEUED),
    ],
)
def test_an_attempts_outcome_decides_its_runs_state(outcome: AttemptState, state: RunState) -> None:
    assert run_state_after_attempt(outcome) is state
    assert can_transition(S.RUNNING, state)


def test_a_finished_attempt_cannot_report_running() -> None:
    with pytest.raises(KeyError):
        run_state_after_attempt(AttemptState.RUNNING)
