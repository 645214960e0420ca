"""A backfill's step over plain facts: how many runs it starts, what it counts, when it
finishes or is cancelled, and the runs it makes (low priority, keyed by nominal time)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.backfill_states import (
    BACKFILL_TRANSITIONS,
    BackfillState,
    check_backfill_transition,
)
from herder.domain.backfills import (
    BackfillFacts,
    Tally,
    backfill_job_runs,
    first_tally,
    refused_at,
    step,
    still_to_start,
    tallied,
)
from herder.domain.errors import Conflict
from herder.domain.jobs import JobSpec, Priority
from herder.domain.states import RunState

START = datetime(2026, 11, 1, tzinfo=UTC)
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def backfill(*, active: int = 0, max_active: int = 2, cursor: datetime | None = None
             ) -> BackfillFacts:  # fmt: skip
    return BackfillFacts("bkf_1", START, START + 10 * HOUR, cursor, 3, 1, max_active, active)


@pytest.mark.parametrize(
    ("active", "max_active", "tally", "wanted"),
    [
        (0, 2, Tally(START), 2),
        (1, 2, Tally(START), 1),
        (3, 2, Tally(START), 0),  # max_active lowered below what runs
        (0, 2, Tally(START, started=1), 1),
        (0, 2, Tally(START, exhausted=True), 0),
        (0, 2, Tally(START, refused=True), 0),
    ],
)
def test_still_to_start(active: int, max_active: int, tally: Tally, wanted: int) -> None:
    assert still_to_start(backfill(active=active, max_active=max_active), tally) == wanted


def test_a_tally_counts_the_times_tried_and_moves_its_cursor() -> None:
    tally = tallied(first_tally(backfill()), [START + HOUR, START + 2 * HOUR], made=1)
    assert tally == Tally(START + 2 * HOUR, started=1, already=1)
    assert tallied(tally, [], 0).exhausted


@pytest.mark.parametrize(
    ("tally", "active_after", "state"),
    [
        (Tally(START + HOUR, started=1), 1, BackfillState.RUNNING),
        (Tally(START + HOUR, exhausted=True), 1, BackfillState.RUNNING),
        (Tally(START + HOUR, exhausted=True), 0, BackfillState.FINISHED),
        (Tally(START + HOUR, refused=True), 1, BackfillState.CANCELLED),
    ],
)
def test_a_step_ends_in(tally: Tally, active_after: int, state: BackfillState) -> None:
    (move,) = step(backfill(), tally, active_after, NOW).backfill_moves
    assert (move.source, move.target) == (BackfillState.RUNNING, state)
    assert move.values["cursor"] == START + HOUR
    assert (move.values["started"], move.values["already_run"]) == (3 + tally.started, 1)
    assert move.values.get("finished_at") == (None if state is BackfillState.RUNNING else NOW)


def test_a_step_that_tried_nothing_keeps_no_cursor() -> None:
    (move,) = step(backfill(), first_tally(backfill()), 1, NOW).backfill_moves
    assert move.values["cursor"] is None


def test_a_refusal_moves_the_cursor_to_the_time_it_could_not_start() -> None:
    assert refused_at(Tally(START), START + HOUR) == Tally(START + HOUR, refused=True)


def test_a_backfills_job_runs_are_low_priority_and_keyed_by_nominal_time() -> None:
    counter = itertools.count(1)
    spec = JobSpec(runtime="shell", command="true", priority=Priority.HIGH)
    nominals = [START + HOUR, START + 2 * HOUR]
    new_runs = backfill_job_runs("bkf_1", "tenant", "sch_1", ("job_1", "nightly", spec),
                                 nominals, lambda: f"run_{next(counter)}")  # fmt: skip
    assert [new.scheduled_for for new in new_runs] == nominals
    assert {new.spec.priority for new in new_runs} == {Priority.LOW}
    assert {(new.schedule_id, new.backfill_id, new.state) for new in new_runs} == {
        ("sch_1", "bkf_1", RunState.QUEUED)
    }


@pytest.mark.parametrize(
    ("source", "target", "legal"),
    [
        (BackfillState.RUNNING, BackfillState.RUNNING, True),
        (BackfillState.RUNNING, BackfillState.FINISHED, True),
        (BackfillState.RUNNING, BackfillState.CANCELLED, True),
        (BackfillState.FINISHED, BackfillState.CANCELLED, False),
        (BackfillState.CANCELLED, BackfillState.RUNNING, False),
    ],
)
def test_backfill_transitions(source: BackfillState, target: BackfillState, legal: bool) -> None:
    assert (target in BACKFILL_TRANSITIONS[source]) is legal
    if not legal:
        with pytest.raises(Conflict):
            check_backfill_transition(source, target)


def test_every_backfill_state_has_its_transitions() -> None:
    assert set(BACKFILL_TRANSITIONS) == set(BackfillState)
