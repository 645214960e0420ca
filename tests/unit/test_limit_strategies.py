"""A submission to a full key under each strategy, decided without a database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.lifecycle.facts import ActiveRun, RunFacts
from herder.domain.lifecycle.limit_strategies import KeyRoom, admit, admit_all
from herder.domain.limits import LimitStrategy
from herder.domain.states import RunState

NOW = datetime(2026, 11, 28, 9, tzinfo=UTC)
SPEC = JobSpec(runtime="shell", command="true")


def new(run_id: str) -> NewRun:
    return NewRun(run_id, "ten_1", "job_1", "sync", SPEC, Event(run_id, "submitted", "user"))


def active(run_id: str, state: RunState = RunState.QUEUED) -> ActiveRun:
    return ActiveRun(RunFacts(run_id, state, 1 if state is RunState.RUNNING else 0))


def room(strategy: LimitStrategy, *runs: ActiveRun, max_running: int = 1) -> KeyRoom:
    return KeyRoom("partner", "acme", max_running, strategy, runs)


@pytest.mark.parametrize("strategy", list(LimitStrategy))
def test_a_key_with_room_admits_the_new_run_as_it_is(strategy: LimitStrategy) -> None:
    admission = admit(new("run_2"), [room(strategy, active("run_1"), max_running=2)], NOW)
    assert admission.dropped is None
    assert admission.changes.new_runs == (new("run_2"),)
    assert admission.changes.moves == ()


def test_a_full_queue_key_admits_the_run_to_wait() -> None:
    admission = admit(new("run_2"), [room(LimitStrategy.QUEUE, active("run_1"))], NOW)
    assert admission.changes.new_runs == (new("run_2"),)


def test_a_full_drop_key_makes_no_run() -> None:
    admission = admit(new("run_2"), [room(LimitStrategy.DROP, active("run_1"))], NOW)
    assert admission.dropped == "limit partner, key acme: 1 of 1 active; strategy drop"
    assert admission.changes.new_runs == ()


def test_a_full_cancel_newest_key_records_the_run_cancelled() -> None:
    admission = admit(new("run_2"), [room(LimitStrategy.CANCEL_NEWEST, active("run_1"))], NOW)
    [made] = admission.changes.new_runs
    assert made.state is RunState.CANCELLED
    assert made.reason is not None
    assert "limit partner, key acme" in made.reason
    assert made.event.target is RunState.CANCELLED


def test_a_full_cancel_in_progress_key_cancels_its_oldest_runs() -> None:
    full = room(
        LimitStrategy.CANCEL_IN_PROGRESS,
        active("run_1", RunState.RUNNING),
        active("run_2"),
        active("run_3"),
        max_running=2,
    )
    admission = admit(new("run_4"), [full], NOW)
    assert admission.cancelled == ("run_1", "run_2")
    assert admission.changes.cancel_requests == ("run_1",)  # its worker stops it
    assert [move.run_id for move in admission.changes.moves] == ["run_2"]
    assert admission.changes.new_runs == (new("run_4"),)


def test_drop_wins_over_cancel_newest_over_cancel_in_progress() -> None:
    rooms = [
        room(LimitStrategy.CANCEL_IN_PROGRESS, active("run_1")),
        room(LimitStrategy.CANCEL_NEWEST, active("run_1")),
        room(LimitStrategy.DROP, active("run_1")),
    ]
    assert admit(new("run_2"), rooms, NOW).dropped is not None
    assert admit(new("run_2"), rooms[:2], NOW).changes.new_runs[0].state is RunState.CANCELLED


def test_a_run_admitted_earlier_in_a_batch_fills_its_key_for_the_later_ones() -> None:
    empty = room(LimitStrategy.DROP)
    decided = admit_all([new("run_1"), new("run_2")], {"run_1": [empty], "run_2": [empty]}, NOW)
    assert decided["run_1"].dropped is None
    assert decided["run_2"].dropped is not None
