"""Settling an attempt's end, decided without a database: retries, gangs, stops, fencing."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from herder.domain.jobs import RetryPolicy
from herder.domain.lifecycle.changes import DUE, WORK, Changes, Notice, NoticeKind
from herder.domain.lifecycle.facts import AttemptFacts, Ending, RunFacts
from herder.domain.lifecycle.settle import Receipt, Settled, fail_unreadable, settle
from herder.domain.states import AttemptState, RunState

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RETRY_TWICE = RetryPolicy(max_attempts=3, initial_delay_seconds=10)


def run(**facts: Any) -> RunFacts:
    return RunFacts(**{"id": "run", "state": RunState.RUNNING, "attempt": 1, **facts})


def attempt(attempt_id: str = "a", **facts: Any) -> AttemptFacts:
    values = {"id": attempt_id, "run_id": "run", "number": 1, "worker_id": "w1", **facts}
    return AttemptFacts(**values)


def report(outcome: AttemptState, attempt_id: str = "a", **fields: Any) -> Ending:
    number = fields.pop("attempt", 1)
    values = {"reason": str(outcome), "worker_id": "w1", **fields}
    return Ending(attempt_id, number, outcome, **values)


def decide(
    facts: RunFacts, attempts: list[AttemptFacts], *endings: Ending
) -> tuple[Changes, list[Settled]]:
    return settle(
        {facts.id: facts}, {a.id: a for a in attempts}, list(endings),
        actor="worker:w1", now=NOW, rng=random.Random(7),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "facts", "outcome", "reason", "exit_code", "target"),
    [
        (RetryPolicy(), {}, AttemptState.SUCCEEDED, "exit 0", 0, RunState.SUCCEEDED),
        (RetryPolicy(), {}, AttemptState.FAILED, "exit 1", 1, RunState.FAILED),
        (RETRY_TWICE, {}, AttemptState.FAILED, "exit 1", 1, RunState.RETRY_WAIT),
        (RETRY_TWICE, {"attempt": 3}, AttemptState.FAILED, "exit 1", 1, RunState.DEAD),
        (RETRY_TWICE, {"attempt": 3, "preemptions": 1}, AttemptState.FAILED, "x", 1,
         RunState.RETRY_WAIT),  # a preempted attempt was not a try
        (RETRY_TWICE, {}, AttemptState.LOST, "worker gone", None, RunState.RETRY_WAIT),
        (RETRY_TWICE, {}, AttemptState.CANCELLED, "cancelled", None, RunState.CANCELLED),
        (RETRY_TWICE, {}, AttemptState.PREEMPTED, "preempted", None, RunState.QUEUED),
        (RetryPolicy(max_attempts=3, exit_codes=[75]), {}, AttemptState.FAILED, "exit 1", 1,
         RunState.FAILED),  # a permanent failure: not one of the retryable exit codes
        (RetryPolicy(max_attempts=3, retry_on=["failed"]), {}, AttemptState.TIMED_OUT, "slow",
         None, RunState.TIMED_OUT),
    ],
)  # fmt: skip
def test_the_run_follows_its_retry_policy(
    policy: RetryPolicy,
    facts: dict[str, Any],
    outcome: AttemptState,
    reason: str,
    exit_code: int | None,
    target: RunState,
) -> None:
    number = int(facts.get("attempt", 1))
    changes, (settled,) = decide(
        run(retry=policy, **facts),
        [attempt(number=number)],
        report(outcome, attempt=number, reason=reason, exit_code=exit_code),
    )
    (end,) = changes.attempt_ends
    (move,) = changes.moves
    assert (end.attempt_id, end.state, move.target) == ("a", outcome, target)
    assert (move.source, move.attempt) == (RunState.RUNNING, number)  # fenced
    assert move.values["exit_code"] == exit_code
    assert move.values["reason"] == reason
    assert settled.receipt is Receipt.APPLIED
    assert settled.detail == f"run is {target}"
    assert Notice(NoticeKind.CAPACITY, "w1") in changes.notices
    assert move.event.target is target
    assert move.event.actor == "worker:w1"


def test_a_retry_waits_a_jittered_back_off_and_wakes_the_reaper() -> None:
    changes, _ = decide(run(retry=RETRY_TWICE), [attempt()], report(AttemptState.FAILED))
    (move,) = changes.moves
    assert NOW <= move.values["retry_at"] <= NOW + timedelta(seconds=10)
    assert move.values["cancel_requested"] is False
    assert DUE in changes.notices
    assert WORK not in changes.notices


def test_a_preempted_attempt_requeues_the_run_without_using_a_retry() -> None:
    changes, _ = decide(
        run(retry=RETRY_TWICE, preemptions=2), [attempt()], report(AttemptState.PREEMPTED)
    )
    (move,) = changes.moves
    assert move.target is RunState.QUEUED
    assert move.values["preemptions"] == 3
    assert move.values["preempted_at"] == NOW
    assert WORK in changes.notices


def test_a_preempted_run_keeps_its_place_in_the_queue() -> None:
    first_queued = NOW - timedelta(hours=1)
    changes, _ = decide(run(queued_at=first_queued), [attempt()], report(AttemptState.PREEMPTED))
    (move,) = changes.moves
    assert move.target is RunState.QUEUED
    assert move.values["queued_at"] == first_queued


@pytest.mark.parametrize(
    ("cancel", "preempt", "reported", "ended"),
    [
        (False, True, AttemptState.FAILED, AttemptState.PREEMPTED),
        (False, True, AttemptState.CANCELLED, AttemptState.PREEMPTED),
        (False, True, AttemptState.SUCCEEDED, AttemptState.SUCCEEDED),
        (True, True, AttemptState.CANCELLED, AttemptState.CANCELLED),  # cancel wins
        (True, False, AttemptState.FAILED, AttemptState.FAILED),
    ],
)
def test_a_pending_stop_decides_how_the_attempt_ended(
    cancel: bool, preempt: bool, reported: AttemptState, ended: AttemptState
) -> None:
    changes, _ = decide(
        run(cancel_requested=cancel), [attempt(preempt_requested=preempt)], report(reported)
    )
    assert changes.attempt_ends[0].state is ended


@pytest.mark.parametrize(
    ("facts", "ending", "receipt", "detail"),
    [
        ({"number": 2}, {"attempt": 1}, Receipt.STALE, "attempt a is number 2, not 1"),
        ({"state": AttemptState.LOST}, {}, Receipt.STALE, "attempt 1 is already lost"),
        ({"worker_id": "w2"}, {}, Receipt.NOT_YOURS, "attempt a is not this worker's"),
        # no repeat of another worker's report, nor of an earlier attempt's
        (
            {"worker_id": "w2", "state": AttemptState.SUCCEEDED},
            {},
            Receipt.NOT_YOURS,
            "attempt a is not this worker's",
        ),
        (
            {"number": 2, "state": AttemptState.SUCCEEDED},
            {"attempt": 1},
            Receipt.STALE,
            "attempt a is number 2, not 1",
        ),
    ],
)
def test_a_zombie_report_changes_nothing_but_is_recorded(
    facts: dict[str, Any], ending: dict[str, Any], receipt: Receipt, detail: str
) -> None:
    changes, (settled,) = decide(
        run(), [attempt(**facts)], report(AttemptState.SUCCEEDED, **ending)
    )
    assert not changes.attempt_ends
    assert not changes.moves
    assert settled.receipt is receipt
    assert detail in settled.detail
    recorded = [event.message for event in changes.events]
    assert recorded == ([] if receipt is Receipt.NOT_YOURS else [settled.detail])


@pytest.mark.parametrize(
    ("ended", "reported"),
    [
        (AttemptState.SUCCEEDED, AttemptState.SUCCEEDED),
        (AttemptState.FAILED, AttemptState.FAILED),
        (AttemptState.PREEMPTED, AttemptState.FAILED),  # a preempt was pending: its tries kept
    ],
)
def test_a_report_sent_again_after_its_answer_was_lost_is_acknowledged_and_changes_nothing(
    ended: AttemptState, reported: AttemptState
) -> None:
    """The server died after committing the report and before answering: the worker sends
    it again. It is no zombie's word: no refusal is recorded, and the worker stops sending."""
    changes, (settled,) = decide(run(), [attempt(state=ended)], report(reported))
    assert changes.empty
    assert settled.receipt is Receipt.APPLIED
    assert settled.detail == f"already applied: attempt 1 ended {ended}"


@pytest.mark.parametrize(
    ("ended", "reported"),
    [
        (AttemptState.LOST, AttemptState.SUCCEEDED),  # declared lost: the report came late
        (AttemptState.LOST, AttemptState.LOST),  # a frozen worker's, thawed: it lost hold
        (AttemptState.CANCELLED, AttemptState.CANCELLED),  # a gang's member, stopped
        (AttemptState.TIMED_OUT, AttemptState.TIMED_OUT),  # past its deadline, its worker silent
        (AttemptState.FAILED, AttemptState.SUCCEEDED),
        (AttemptState.PREEMPTED, AttemptState.SUCCEEDED),
    ],
)
def test_a_report_unlike_how_the_attempt_ended_is_refused_and_recorded(
    ended: AttemptState, reported: AttemptState
) -> None:
    changes, (settled,) = decide(run(), [attempt(state=ended)], report(reported))
    assert settled.receipt is Receipt.STALE
    assert [event.message for event in changes.events] == [settled.detail]


def test_a_report_for_an_attempt_no_one_knows_is_not_yours() -> None:
    changes, (settled,) = decide(run(), [], report(AttemptState.SUCCEEDED, attempt_id="ghost"))
    assert settled.receipt is Receipt.NOT_YOURS
    assert changes.empty


def test_the_server_ending_an_attempt_that_already_ended_is_a_no_op() -> None:
    lost = Ending("a", 1, AttemptState.LOST, "worker gone")
    changes, (settled,) = decide(run(), [attempt(state=AttemptState.SUCCEEDED)], lost)
    assert changes.empty
    assert settled.receipt is Receipt.STALE


def test_a_gang_succeeds_only_when_every_member_has() -> None:
    gang = run(replicas=2)
    members = [attempt("a"), attempt("b", rank=1, worker_id="w2")]
    first, _ = decide(gang, members, report(AttemptState.SUCCEEDED))
    assert not first.moves  # b still runs
    both, results = decide(
        gang, members, report(AttemptState.SUCCEEDED),
        report(AttemptState.SUCCEEDED, attempt_id="b", worker_id="w2"),
    )  # fmt: skip
    assert [move.target for move in both.moves] == [RunState.SUCCEEDED]
    assert [item.detail for item in results] == ["run is running", "run is succeeded"]


def test_a_gang_member_failing_stops_the_others_and_their_workers_hear_it() -> None:
    gang = run(replicas=3, retry=RETRY_TWICE)
    members = [attempt("a"), attempt("b", rank=1, worker_id="w2"), attempt("c", rank=2)]
    changes, _ = decide(gang, members, report(AttemptState.FAILED, reason="exit 3"))
    ends = {end.attempt_id: (end.state, end.reason) for end in changes.attempt_ends}
    assert ends == {
        "a": (AttemptState.FAILED, "exit 3"),
        "b": (AttemptState.CANCELLED, "stopped with its gang: a member failed: exit 3"),
        "c": (AttemptState.CANCELLED, "stopped with its gang: a member failed: exit 3"),
    }
    assert {Notice(NoticeKind.CANCEL, "w1"), Notice(NoticeKind.CANCEL, "w2")} <= changes.notices
    assert [move.target for move in changes.moves] == [RunState.RETRY_WAIT]
    stopped = attempt("b", rank=1, worker_id="w2", state=AttemptState.CANCELLED)
    late_report = report(AttemptState.SUCCEEDED, attempt_id="b", worker_id="w2")
    late, (settled,) = decide(gang, [stopped], late_report)
    assert settled.receipt is Receipt.STALE
    assert not late.moves


def test_an_unreadable_run_fails_every_member_without_retry() -> None:
    members = [attempt("a"), attempt("b", rank=1, worker_id="w2")]
    changes = fail_unreadable(run(replicas=2, retry=RETRY_TWICE), members, "bad spec",
                              claimer="w1", now=NOW)  # fmt: skip
    assert {end.attempt_id for end in changes.attempt_ends} == {"a", "b"}
    assert [move.target for move in changes.moves] == [RunState.FAILED]
    assert Notice(NoticeKind.CANCEL, "w2") in changes.notices
    assert Notice(NoticeKind.CANCEL, "w1") not in changes.notices  # the claimer never got it
