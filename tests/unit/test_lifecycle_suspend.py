"""Suspending and resuming a run, decided without a database: every state and action, the
stop's order against a cancel and a preemption, and how a suspended attempt settles."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from herder.domain.errors import Conflict
from herder.domain.jobs import RetryPolicy
from herder.domain.lifecycle.cancel import Cause, cancel
from herder.domain.lifecycle.changes import WORK, Changes, Notice, NoticeKind
from herder.domain.lifecycle.facts import ActiveRun, AttemptFacts, Ending, RunFacts
from herder.domain.lifecycle.settle import settle
from herder.domain.lifecycle.suspend import (
    SUSPEND_REQUESTED,
    Suspendable,
    resume,
    resume_all,
    suspend,
    suspend_all,
)
from herder.domain.queue_room import QUEUED_WAITING, UNLIMITED, QueueRoom
from herder.domain.states import AttemptState, RunState, StoppedBy

S = RunState
NOW = datetime(2026, 1, 1, tzinfo=UTC)
ACTOR = "key:ops"
FULL = QueueRoom(max_queued=2, queued=2)


def active(state: RunState, workers: tuple[str, ...] = (), **facts: Any) -> ActiveRun:
    members = tuple(
        AttemptFacts(f"a{rank}", "run", 1, worker, rank=rank) for rank, worker in enumerate(workers)
    )
    return ActiveRun(RunFacts("run", state, 1, **facts), members)


# What a suspend does in each state: "held" (suspended at once), "requested" (its workers stop
# it first), "nothing" (already suspended), "conflict" (409), or "not yet" (409: a delayed run
# holds nothing to free; it is cancelled instead).
SUSPEND: dict[RunState, str] = {
    S.SCHEDULED: "not yet",
    S.WAITING: "not yet",  # a workflow's wait or approval task holds nothing either
    S.PENDING: "held",
    S.QUEUED: "held",
    S.RETRY_WAIT: "held",
    S.RUNNING: "requested",
    S.SUSPENDED: "nothing",
    **{state: "conflict" for state in RunState if state.is_terminal},
}


def test_every_state_has_a_suspend_row() -> None:
    assert set(SUSPEND) == set(RunState)


@pytest.mark.parametrize("state", list(RunState))
def test_a_suspend_in_each_state(state: RunState) -> None:
    expected = SUSPEND[state]
    if expected == "not yet":
        with pytest.raises(Conflict, match="cancel it instead"):
            suspend(active(state), ACTOR, NOW)
        return
    if expected == "conflict":
        with pytest.raises(Conflict, match="only active runs can be suspended"):
            suspend(active(state), ACTOR, NOW)
        return
    changes = suspend(active(state, workers=("w1",) if state is S.RUNNING else ()), ACTOR, NOW)
    if expected == "nothing":
        assert changes.empty
    elif expected == "held":
        (move,) = changes.moves
        assert (move.source, move.target) == (state, S.SUSPENDED)
        assert move.values["retry_at"] is None
        assert move.values["start_deadline"] is None  # a suspended run never expires
        assert move.values["waiting_reason"] is None
        assert move.event.actor == ACTOR
        assert not changes.suspend_requests
    else:
        assert not changes.moves
        assert changes.suspend_requests == ("run",)
        assert [event.message for event in changes.events] == [SUSPEND_REQUESTED]
        assert Notice(NoticeKind.CANCEL, "w1") in changes.notices


def test_a_second_suspend_of_a_suspending_run_only_tells_its_workers_again() -> None:
    changes = suspend(active(S.RUNNING, ("w1", "w2"), suspend_requested=True), ACTOR, NOW)
    assert not changes.suspend_requests
    assert not changes.events
    assert not changes.moves
    assert changes.notices == {Notice(NoticeKind.CANCEL, "w1"), Notice(NoticeKind.CANCEL, "w2")}


def test_a_run_being_cancelled_cannot_be_suspended() -> None:
    with pytest.raises(Conflict, match="a cancel wins over a suspend"):
        suspend(active(S.RUNNING, ("w1",), cancel_requested=True), ACTOR, NOW)


# What a resume does in each state: "queued", or "conflict".
@pytest.mark.parametrize("state", list(RunState))
def test_only_a_suspended_run_resumes(state: RunState) -> None:
    if state is not S.SUSPENDED:
        with pytest.raises(Conflict, match="only suspended runs"):
            resume("run", state, UNLIMITED, ACTOR, NOW)
        return
    changes = resume("run", state, UNLIMITED, ACTOR, NOW)
    (move,) = changes.moves
    assert (move.source, move.target) == (S.SUSPENDED, S.QUEUED)
    assert move.values["queued_at"] == NOW  # behind what queued meanwhile
    assert move.values["waiting_reason"] == QUEUED_WAITING
    assert move.event.message == "resumed"
    assert WORK in changes.notices


def test_a_resume_past_max_queued_is_held_pending_as_a_submit_would_be() -> None:
    changes = resume("run", S.SUSPENDED, FULL, ACTOR, NOW)
    (move,) = changes.moves
    assert move.target is S.PENDING
    assert move.values["waiting_reason"] == FULL.reason
    assert WORK not in changes.notices


def test_resuming_many_queues_as_many_as_the_room_takes() -> None:
    changes = resume_all(["r1", "r2", "r3"], QueueRoom(max_queued=3, queued=1), ACTOR, NOW)
    assert [(m.run_id, m.target) for m in changes.moves] == [
        ("r1", S.QUEUED), ("r2", S.QUEUED), ("r3", S.PENDING),
    ]  # fmt: skip


def test_a_suspended_run_can_be_cancelled() -> None:
    changes = cancel(active(S.SUSPENDED), Cause(ACTOR), NOW)
    (move,) = changes.moves
    assert (move.source, move.target) == (S.SUSPENDED, S.CANCELLED)


def test_suspending_a_set_leaves_alone_what_is_ended_suspending_or_being_cancelled() -> None:
    runs = [
        Suspendable("queued", S.QUEUED, 0, False, False),
        Suspendable("running", S.RUNNING, 1, False, False),
        Suspendable("suspending", S.RUNNING, 1, False, True),
        Suspendable("cancelling", S.RUNNING, 1, True, False),
        Suspendable("suspended", S.SUSPENDED, 1, False, False),
        Suspendable("done", S.SUCCEEDED, 1, False, False),
        Suspendable("waiting", S.RETRY_WAIT, 1, False, False),
    ]
    changes = suspend_all(runs, {"w1"}, ACTOR, NOW)
    assert [(m.run_id, m.target) for m in changes.moves] == [
        ("queued", S.SUSPENDED), ("waiting", S.SUSPENDED),
    ]  # fmt: skip
    assert changes.suspend_requests == ("running",)
    assert changes.notices == {Notice(NoticeKind.CANCEL, "w1")}
    assert suspend_all([runs[0]], set(), ACTOR, NOW).notices == frozenset()


# Settling the attempt a suspend stopped.
def settled(facts: RunFacts, members: list[AttemptFacts], *endings: Ending) -> Changes:
    changes, _ = settle(
        {facts.id: facts}, {a.id: a for a in members}, list(endings),
        actor="worker:w1", now=NOW, rng=random.Random(7),
    )  # fmt: skip
    return changes


def suspending(**facts: Any) -> RunFacts:
    return RunFacts(**{"id": "run", "state": S.RUNNING, "attempt": 1, "suspend_requested": True,
                       **facts})  # fmt: skip


def ending(outcome: AttemptState, attempt_id: str = "a", worker: str = "w1") -> Ending:
    return Ending(attempt_id, 1, outcome, str(outcome), worker_id=worker,
                  stopped_by=StoppedBy.SIGTERM)  # fmt: skip


@pytest.mark.parametrize(
    "reported", [AttemptState.PREEMPTED, AttemptState.FAILED, AttemptState.CANCELLED,
                 AttemptState.TIMED_OUT],
)  # fmt: skip
def test_a_suspended_attempt_holds_the_run_without_using_a_try(reported: AttemptState) -> None:
    changes = settled(
        suspending(retry=RetryPolicy(max_attempts=1), suspensions=2),
        [AttemptFacts("a", "run", 1, "w1")], ending(reported),
    )  # fmt: skip
    (end,) = changes.attempt_ends
    assert (end.state, end.reason, end.stopped_by) == (
        AttemptState.PREEMPTED, "suspended", StoppedBy.SIGTERM,
    )  # fmt: skip
    (move,) = changes.moves
    assert move.target is S.SUSPENDED
    assert move.values["suspensions"] == 3
    assert move.values["suspend_requested"] is False
    assert move.values["start_deadline"] is None  # resumed, it is wanted: nothing expires it
    assert "preemptions" not in move.values
    assert WORK not in changes.notices
    assert Notice(NoticeKind.CAPACITY, "w1") in changes.notices  # its room is freed


def test_a_suspended_attempt_is_not_a_try() -> None:
    assert RunFacts("run", S.QUEUED, attempt=3, preemptions=1, suspensions=1).tries == 1


def test_an_attempt_that_succeeded_before_the_suspend_took_stands() -> None:
    changes = settled(suspending(), [AttemptFacts("a", "run", 1, "w1")],
                      ending(AttemptState.SUCCEEDED))  # fmt: skip
    (move,) = changes.moves
    assert move.target is S.SUCCEEDED
    assert move.values["suspend_requested"] is False


def test_a_cancel_wins_over_a_suspend_when_the_attempt_ends() -> None:
    changes = settled(suspending(cancel_requested=True), [AttemptFacts("a", "run", 1, "w1")],
                      ending(AttemptState.CANCELLED))  # fmt: skip
    assert [move.target for move in changes.moves] == [S.CANCELLED]


def test_a_suspend_wins_over_a_preemption_when_the_attempt_ends() -> None:
    members = [AttemptFacts("a", "run", 1, "w1", preempt_requested=True)]
    changes = settled(suspending(), members, ending(AttemptState.PREEMPTED))
    (move,) = changes.moves
    assert move.target is S.SUSPENDED
    assert "preemptions" not in move.values


def test_a_suspended_gang_is_held_when_its_first_member_stops_and_the_others_go_too() -> None:
    members = [AttemptFacts("a", "run", 1, "w1"), AttemptFacts("b", "run", 1, "w2", rank=1)]
    changes = settled(suspending(replicas=2), members, ending(AttemptState.PREEMPTED))
    assert {end.attempt_id: end.state for end in changes.attempt_ends} == {
        "a": AttemptState.PREEMPTED, "b": AttemptState.CANCELLED,
    }  # fmt: skip
    assert [move.target for move in changes.moves] == [S.SUSPENDED]
    assert Notice(NoticeKind.CANCEL, "w2") in changes.notices
