"""Debounce: a key's submissions within the window fold into the run the first one made; each
pushes its start to the window after itself, never past the maximum wait after the first;
the run keeps the first's or the last's values; keys are one job's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from herder.domain.debounce import Waiting, debounce, starts_at
from herder.domain.jobs import JobSpec
from herder.domain.lifecycle.changes import Event, NewRun
from herder.domain.limits import Debounce, DebounceKeep

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
LAST = Debounce(window_seconds=60, keep=DebounceKeep.LAST, max_wait_seconds=300)
FIRST = LAST.model_copy(update={"keep": DebounceKeep.FIRST})


def submission(run_id: str, value: str, job_id: str = "job_1") -> NewRun:
    spec = JobSpec.model_validate({"runtime": "shell", "command": "true", "env": {"V": value}})
    return NewRun(run_id, "t1", job_id, "rebuild", spec, Event(run_id, "submitted", "me"))


def test_a_start_is_the_window_after_the_latest_submission_capped_by_the_maximum_wait() -> None:
    assert starts_at(LAST, NOW, NOW) == NOW + timedelta(seconds=60)
    assert starts_at(LAST, NOW - timedelta(seconds=270), NOW) == NOW + timedelta(seconds=30)
    assert starts_at(LAST, NOW - timedelta(seconds=900), NOW) == NOW  # past it: at once
    endless = LAST.model_copy(update={"max_wait_seconds": None})
    assert starts_at(endless, NOW - timedelta(days=1), NOW) == (NOW + timedelta(seconds=60))


def test_the_first_submission_makes_the_run_and_later_ones_in_a_batch_join_it() -> None:
    key = ("lim_1", "acme", "job_1")
    runs = [submission("r1", "a"), submission("r2", "b"), submission("r3", "c")]
    decided = debounce(runs, {run.id: (key, LAST) for run in runs}, {}, NOW)
    (made,) = decided.new_runs
    assert made.id == "r1"
    assert made.run_at == NOW + timedelta(seconds=60)
    assert made.spec.env == {"V": "c"}  # the last's values
    assert decided.joined == {"r2": "r1", "r3": "r1"}
    first = debounce(runs, {run.id: (key, FIRST) for run in runs}, {}, NOW)
    assert first.new_runs[0].spec.env == {"V": "a"}


def test_a_submission_joins_a_stored_waiting_run_and_moves_it_on() -> None:
    key = ("lim_1", "acme", "job_1")
    waiting = {key: Waiting("r0", NOW - timedelta(seconds=250))}
    decided = debounce([submission("r1", "z")], {"r1": (key, LAST)}, waiting, NOW)
    assert decided.new_runs == ()
    assert decided.joined == {"r1": "r0"}
    start, spec = decided.moved["r0"]
    assert start == NOW + timedelta(seconds=50)  # 300 s after the first, not 60 after this
    assert spec is not None
    assert spec.env == {"V": "z"}
    kept = debounce([submission("r1", "z")], {"r1": (key, FIRST)}, waiting, NOW)
    assert kept.moved["r0"][1] is None  # the first's values stay


def test_keys_are_one_jobs_and_runs_without_a_debounced_limit_pass_through() -> None:
    other = submission("r2", "b", job_id="job_2")
    plain = submission("r3", "c")
    windows = {"r1": (("lim_1", "acme", "job_1"), LAST), "r2": (("lim_1", "acme", "job_2"), LAST)}
    decided = debounce([submission("r1", "a"), other, plain], windows, {}, NOW)
    assert [run.id for run in decided.new_runs] == ["r1", "r2", "r3"]
    assert decided.new_runs[2].run_at is None
    assert decided.joined == {}
