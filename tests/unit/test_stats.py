"""The overview's series: runs ended per minute by outcome, zeros where none ended."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.states import RunState
from herder.domain.stats import failure_rate, throughput, totals, window_start

NOW = datetime(2026, 11, 24, 19, 30, 42, tzinfo=UTC)
START = window_start(NOW, 5)


def test_the_window_ends_with_the_current_minute() -> None:
    assert window_start(NOW, 5) == datetime(2026, 11, 24, 19, 26, tzinfo=UTC)


def test_every_minute_has_a_bucket_and_states_fold_into_outcomes() -> None:
    minute = START + timedelta(minutes=2)
    series = throughput(
        {
            (minute, RunState.SUCCEEDED): 4,
            (minute, RunState.TIMED_OUT): 1,
            (minute, RunState.DEAD): 2,
            (START, RunState.CANCELLED): 3,
            (START, RunState.SKIPPED): 9,  # a task that never ran is no outcome
            (START - timedelta(minutes=1), RunState.FAILED): 5,  # before the window
        },
        START,
        5,
    )
    assert [m.minute for m in series] == [START + timedelta(minutes=i) for i in range(5)]
    assert (series[2].succeeded, series[2].failed) == (4, 3)
    assert series[0].cancelled == 3
    assert totals(series) == {"succeeded": 4, "failed": 3, "cancelled": 3}


@pytest.mark.parametrize(
    ("ended", "rate"),
    [
        ({"succeeded": 0, "failed": 0, "cancelled": 5}, None),
        ({"succeeded": 3, "failed": 1, "cancelled": 5}, 0.25),
        ({"succeeded": 0, "failed": 2, "cancelled": 0}, 1.0),
    ],
)
def test_the_failure_rate_leaves_out_cancelled_runs(ended: dict[str, int], rate: float) -> None:
    assert failure_rate(ended) == rate
