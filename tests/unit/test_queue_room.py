"""A tenant's room under ``max_queued``: the runs that workflows, backfills and schedules make
take it like any queued run; past it they are held with the reason, and queued oldest first
as room frees."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import WORK, Event, NewRun
from herder.domain.queue_room import UNLIMITED, QueueRoom, hold, release
from herder.domain.states import RunState

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = JobSpec.model_validate({"runtime": "shell", "command": "true"})


def new_run(run_id: str, state: RunState = RunState.QUEUED) -> NewRun:
    event = Event(run_id, "task each of workflow run wfrun_1: all_success met", "w", target=state)
    return NewRun(run_id, "ten_1", "job_1", "work", SPEC, event, state=state)


@pytest.mark.parametrize(
    ("room", "items", "taken"),
    [
        (UNLIMITED, 5, 5),
        (QueueRoom(10, 0), 5, 5),
        (QueueRoom(10, 7), 5, 3),
        (QueueRoom(10, 10), 5, 0),
        (QueueRoom(10, 12), 5, 0),  # over it already (a direct submission, a lowered bound)
        (QueueRoom(10, 0, busy=True), 5, 0),  # another transaction is taking the room
    ],
)
def test_the_room_takes_what_max_queued_leaves(room: QueueRoom, items: int, taken: int) -> None:
    took, past = room.split(list(range(items)))
    assert (took, past) == (list(range(taken)), list(range(taken, items)))


def test_new_runs_past_the_room_are_held_saying_why() -> None:
    runs = [new_run(f"run_{n}") for n in range(4)] + [new_run("run_s", RunState.SKIPPED)]
    made, left = hold(runs, QueueRoom(3, 1))
    assert [new.state for new in made] == [
        RunState.QUEUED, RunState.QUEUED, RunState.PENDING, RunState.PENDING, RunState.SKIPPED,
    ]  # fmt: skip
    held = made[2]
    assert held.reason == "tenant at its max_queued 3: 3 queued"
    assert held.event.target is RunState.PENDING
    assert held.event.message.endswith("; held: tenant at its max_queued 3: 3 queued")
    assert left == QueueRoom(3, 3)


def test_without_a_bound_nothing_is_held() -> None:
    runs = [new_run(f"run_{n}") for n in range(3)]
    made, left = hold(runs, UNLIMITED)
    assert made == runs
    assert left.free is None


def test_held_runs_are_queued_oldest_first_as_the_room_takes() -> None:
    changes = release(["run_1", "run_2", "run_3"], QueueRoom(5, 3), NOW, actor="max_queued")
    assert [(m.run_id, m.source, m.target) for m in changes.moves] == [
        ("run_1", RunState.PENDING, RunState.QUEUED),
        ("run_2", RunState.PENDING, RunState.QUEUED),
    ]
    assert changes.moves[0].values["queued_at"] == NOW
    assert changes.moves[0].values["waiting_reason"] == "not looked at by the dispatcher yet"
    assert WORK in changes.notices
    assert release(["run_1"], QueueRoom(5, 5), NOW, actor="max_queued").empty
