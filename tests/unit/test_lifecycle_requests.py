"""Stops, cancels, re-runs, a schedule's concurrency and the reaper's findings, decided
without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from herder.domain.errors import Conflict
from herder.domain.jobs import JobSpec, Priority
from herder.domain.lifecycle.cancel import (
    CANCEL_REQUESTED,
    Cancellable,
    Cause,
    cancel,
    cancel_all,
    rerun,
)
from herder.domain.lifecycle.changes import WORK, Event, NewRun, Notice, NoticeKind
from herder.domain.lifecycle.concurrency import admit, fire
from herder.domain.lifecycle.facts import ActiveRun, AttemptFacts, DueRetry, RunFacts, WorkerSilence
from herder.domain.lifecycle.priority import rerun_priority
from herder.domain.lifecycle.reap import expire, requeue_due, silent_workers
from herder.domain.lifecycle.stops import (
    Stop,
    StoppableAttempt,
    before_delivery,
    can_be_victim,
    pending_stop,
    stop_orders,
)
from herder.domain.models import Run
from herder.domain.schedules import ConcurrencyPolicy
from herder.domain.states import AttemptState, RunState

NOW = datetime(2026, 1, 1, tzinfo=UTC)
USER = Cause("user:key")


def active(state: RunState, run_id: str = "run", workers: tuple[str, ...] = (),
           **facts: Any) -> ActiveRun:  # fmt: skip
    members = tuple(
        AttemptFacts(f"a{rank}", run_id, 1, worker, rank=rank)
        for rank, worker in enumerate(workers)
    )
    return ActiveRun(RunFacts(run_id, state, 1, **facts), members)


@pytest.mark.parametrize(
    ("cancel_requested", "suspend_requested", "preempt_requested", "stop"),
    [(False, False, False, None), (False, False, True, Stop.PREEMPT),
     (True, False, False, Stop.CANCEL), (True, False, True, Stop.CANCEL),
     (False, True, False, Stop.SUSPEND), (False, True, True, Stop.SUSPEND),
     (True, True, True, Stop.CANCEL)],
)  # fmt: skip
def test_a_cancel_wins_over_a_suspend_and_a_suspend_over_a_preemption(
    cancel_requested: bool, suspend_requested: bool, preempt_requested: bool, stop: Stop | None
) -> None:
    found = pending_stop(cancel_requested, preempt_requested, suspend_requested=suspend_requested)
    assert found is stop
    stopping = cancel_requested or suspend_requested
    assert can_be_victim(True, cancel_requested, suspend_requested) is not stopping


def test_an_attempt_stopped_before_delivery_ends_as_its_stop_says() -> None:
    assert before_delivery(Stop.CANCEL)[0] is AttemptState.CANCELLED
    assert before_delivery(Stop.PREEMPT)[0] is AttemptState.PREEMPTED
    assert before_delivery(Stop.SUSPEND) == (
        AttemptState.PREEMPTED,
        "suspended before it reached its worker",
    )


def test_a_worker_hears_what_to_cancel_preempt_and_drop() -> None:
    current = [
        StoppableAttempt("cancel-me", 1, cancel_requested=True, preempt_requested=True),
        StoppableAttempt("preempt-me", 2, cancel_requested=False, preempt_requested=True),
        StoppableAttempt("keep", 1, cancel_requested=False, preempt_requested=False),
        StoppableAttempt("suspend-me", 3, False, preempt_requested=False, suspend_requested=True),
    ]
    orders = stop_orders(current, [("keep", 1), ("stale", 4), ("preempt-me", 1)])
    assert orders.cancel == ["cancel-me"]
    assert orders.preempt == ["preempt-me", "suspend-me"]  # a suspend stops as a preemption
    assert orders.drop == ["stale", "preempt-me"]  # a number the store no longer has


@pytest.mark.parametrize("state", [RunState.QUEUED, RunState.RETRY_WAIT, RunState.PENDING])
def test_a_run_not_running_yet_is_cancelled_at_once(state: RunState) -> None:
    changes = cancel(active(state), USER, NOW)
    (move,) = changes.moves
    assert (move.source, move.target, move.values["reason"]) == (
        state, RunState.CANCELLED, "cancelled"
    )  # fmt: skip
    assert move.values["finished_at"] == NOW
    assert move.event.message == f"cancelled while {state}"


@pytest.mark.parametrize("cause", [USER, Cause("scheduler", "replaced by a newer run")])
def test_a_running_run_is_marked_and_every_members_worker_hears_it(cause: Cause) -> None:
    changes = cancel(active(RunState.RUNNING, workers=("w1", "w2", "w1")), cause, NOW)
    assert changes.cancel_requests == ("run",)
    assert not changes.moves
    assert changes.notices == {Notice(NoticeKind.CANCEL, "w1"), Notice(NoticeKind.CANCEL, "w2")}
    assert [event.message for event in changes.events] == [cause.why or CANCEL_REQUESTED]


def test_cancelling_twice_only_wakes_the_workers_again() -> None:
    changes = cancel(active(RunState.RUNNING, workers=("w1",), cancel_requested=True), USER, NOW)
    assert not changes.cancel_requests
    assert not changes.events
    assert changes.notices == {Notice(NoticeKind.CANCEL, "w1")}


@pytest.mark.parametrize("state", [s for s in RunState if s.is_terminal])
def test_an_ended_run_cannot_be_cancelled(state: RunState) -> None:
    with pytest.raises(Conflict, match=f"already {state}"):
        cancel(active(state), USER, NOW)


def ended_run(state: RunState) -> Run:
    return Run(
        id="old", job_id="job", job_name="j", state=state,
        spec=JobSpec(runtime="shell", command="true"), idempotency_key=None, attempt_count=3,
        cancel_requested=False, created_at=NOW, queued_at=NOW, started_at=None,
        finished_at=None, exit_code=None, reason=None,
    )  # fmt: skip


def test_a_rerun_is_a_new_queued_run_linked_both_ways() -> None:
    changes = rerun(
        ended_run(RunState.DEAD), "tenant", "new", "user:key", NOW, priority=Priority.MEDIUM
    )
    (new,) = changes.new_runs
    assert (new.id, new.rerun_of, new.job_id) == ("new", "old", "job")
    assert [(e.run_id, e.message) for e in (new.event, *changes.events)] == [
        ("new", "submitted as a re-run of old"), ("old", "re-run as new"),
    ]  # fmt: skip
    assert WORK in changes.notices
    with pytest.raises(Conflict, match="still running"):
        rerun(
            ended_run(RunState.RUNNING), "tenant", "new", "user:key", NOW, priority=Priority.MEDIUM
        )


def test_a_rerun_below_its_runs_class_says_so_in_its_event() -> None:
    changes = rerun(
        ended_run(RunState.DEAD), "tenant", "new", "user:key", NOW, priority=Priority.LOW
    )
    (new,) = changes.new_runs
    assert new.spec.priority is Priority.LOW
    assert new.event.message == (
        "submitted as a re-run of old, at priority low (it ran at medium, above what this "
        "tenant's runs may ask for now: max_priority)"
    )


H, M, L = Priority.HIGH, Priority.MEDIUM, Priority.LOW


@pytest.mark.parametrize(
    ("ran_at", "allowed", "job_class", "rerun_at"),
    [
        (H, None, M, H),  # no bound: as it ran
        (H, H, M, H),
        (M, L, M, M),  # the job's own class is not capped
        (H, L, M, M),  # capped, but never below the job's own class
        (H, L, L, L),
        (H, M, None, M),  # the job is gone: the tenant's bound
        (L, M, H, L),  # never raised
    ],
)
def test_a_rerun_takes_todays_bound_and_never_goes_below_the_jobs_own_class(
    ran_at: Priority, allowed: Priority | None, job_class: Priority | None, rerun_at: Priority
) -> None:
    assert rerun_priority(ran_at, allowed, job_class) is rerun_at


def new_run(run_id: str, minute: int) -> NewRun:
    return NewRun(
        run_id, "tenant", "job", "j", JobSpec(runtime="shell", command="true"),
        Event(run_id, "fired", "scheduler"), schedule_id="sch",
        scheduled_for=NOW + timedelta(minutes=minute),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "fired", "skipped", "replaced", "cancelled"),
    [
        (ConcurrencyPolicy.ALLOW, ["r1", "r2"], 0, (), []),
        (ConcurrencyPolicy.FORBID, [], 2, (), []),
        # the old run is cancelled, then each fire replaces the one before it
        (ConcurrencyPolicy.REPLACE, ["r1", "r2"], 0, ("old", "r1"), ["r1"]),
    ],
)
def test_fires_follow_the_concurrency_policy_while_a_run_is_active(
    policy: ConcurrencyPolicy,
    fired: list[str],
    skipped: int,
    replaced: tuple[str, ...],
    cancelled: list[str],
) -> None:
    running = active(RunState.RUNNING, "old", workers=("w1",))
    fires = fire("sch", policy, [running], [new_run("r1", 0), new_run("r2", 1)], NOW)
    assert [new.id for new in fires.changes.new_runs] == fired
    assert len(fires.skipped) == skipped
    assert fires.replaced == replaced
    assert [move.run_id for move in fires.changes.moves] == cancelled
    assert ("old" in fires.changes.cancel_requests) is (policy is ConcurrencyPolicy.REPLACE)


def test_a_fire_with_nothing_active_is_always_admitted() -> None:
    for policy in ConcurrencyPolicy:
        assert admit("sch", policy, [], NOW).allowed


def test_silence_is_judged_only_over_time_watched() -> None:
    workers = [WorkerSilence("old", NOW - timedelta(seconds=31)),
               WorkerSilence("fresh", NOW - timedelta(seconds=5))]  # fmt: skip
    assert silent_workers(workers, NOW, 30, NOW - timedelta(minutes=5)) == ["old"]
    assert silent_workers(workers, NOW, 30, NOW - timedelta(seconds=10)) == []


def test_a_due_retry_keeps_its_place_only_when_its_worker_was_lost() -> None:
    first_queued = NOW - timedelta(hours=1)
    changes = requeue_due(
        [DueRetry("lost", first_queued, True), DueRetry("failed", first_queued, False)], NOW
    )
    places = {move.run_id: move.values["queued_at"] for move in changes.moves}
    assert places == {"lost": first_queued, "failed": NOW}
    assert all(move.values["retry_at"] is None for move in changes.moves)
    assert WORK in changes.notices
    assert not requeue_due([], NOW).notices


@pytest.mark.parametrize("state", [RunState.QUEUED, RunState.PENDING])
def test_a_run_not_started_by_its_start_deadline_expires(state: RunState) -> None:
    (move,) = expire([("late", state)], NOW).moves
    assert (move.source, move.target) == (state, RunState.EXPIRED)
    assert move.values["waiting_reason"] is None  # it no longer waits


def test_a_set_of_runs_is_cancelled_by_the_one_rule_decided_at_once() -> None:
    runs = [
        Cancellable("held", RunState.PENDING, 0, False),
        Cancellable("queued", RunState.QUEUED, 0, False),
        Cancellable("waiting", RunState.RETRY_WAIT, 1, False),
        Cancellable("running", RunState.RUNNING, 2, False),
        Cancellable("stopping", RunState.RUNNING, 1, True),
        Cancellable("done", RunState.SUCCEEDED, 1, False),
    ]
    changes = cancel_all(
        runs, {"w1", "w2"}, Cause("user", "its workflow run wfrun_1 was cancelled"), NOW
    )
    assert [(m.run_id, m.source, m.target) for m in changes.moves] == [
        ("held", RunState.PENDING, RunState.CANCELLED),
        ("queued", RunState.QUEUED, RunState.CANCELLED),
        ("waiting", RunState.RETRY_WAIT, RunState.CANCELLED),
    ]
    assert {m.values["reason"] for m in changes.moves} == {
        "cancelled: its workflow run wfrun_1 was cancelled"
    }
    assert changes.cancel_requests == ("running",)  # "stopping" was asked already
    assert [(e.run_id, e.attempt) for e in changes.events] == [("running", 2)]
    assert changes.notices == {Notice(NoticeKind.CANCEL, "w1"), Notice(NoticeKind.CANCEL, "w2")}
