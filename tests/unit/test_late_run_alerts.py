"""The deadline_missed and running_long rules' decisions: one signal per late run, keyed by
it; running_long judges nothing on fewer than five successes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from herder.domain.alerts.late_runs import (
    MissedDeadline,
    RunningRun,
    deadline_missed,
    running_long,
)
from herder.domain.alerts.rules import RuleKind, RuleParams
from herder.domain.lifecycle.missed import Missed

DEADLINE = datetime(2026, 6, 10, 5, 0, tzinfo=UTC)


def missed(*, ended: str | None, open: bool, workflow: bool = False) -> MissedDeadline:
    one = Missed(id="r1", tenant_id="t", name="etl", deadline_at=DEADLINE,
                 within_seconds=3600, cancel=False, fire=None)  # fmt: skip
    return MissedDeadline(one, workflow, ended, open)


@pytest.mark.parametrize(
    ("fact", "firing", "summary"),
    [
        (missed(ended=None, open=False), True, "run r1 of job etl missed its deadline: not "
         "finished by 2026-06-10 05:00:00 UTC (1h after its submission)"),
        # cancelled by its deadline before the rule looked: the miss is still told
        (missed(ended="cancelled", open=False), True, "run r1 of job etl missed its deadline"),
        (missed(ended=None, open=True), True, "run r1 of job etl missed"),
        (missed(ended="succeeded", open=True), False, "run r1 of job etl ended succeeded"),
        (missed(ended=None, open=False, workflow=True), True,
         "workflow run r1 of workflow etl missed its deadline"),
    ],
)  # fmt: skip
def test_deadline_missed(fact: MissedDeadline, firing: bool, summary: str) -> None:
    (signal,) = deadline_missed([fact])
    assert (signal.key, signal.firing) == ("r1", firing)
    assert signal.summary.startswith(summary)


PARAMS = RuleParams(factor=2.0, min_seconds=60)


@pytest.mark.parametrize(
    ("running_seconds", "samples", "params", "firing"),
    [
        (130.0, [60.0] * 5, PARAMS, True),  # past 2 x p95 (60 s)
        (120.0, [60.0] * 5, PARAMS, False),  # not past it
        (10_000.0, [60.0] * 4, PARAMS, False),  # four successes judge nothing
        (50.0, [10.0] * 5, PARAMS, False),  # 5 x p95, but under min_seconds
        (50.0, [10.0] * 5, RuleParams(factor=2.0, min_seconds=30), True),
        (130.0, [1.0] * 90 + [60.0] * 10, PARAMS, True),  # p95 of the samples given: 60 s
        (50.0, [0.0] * 5, RuleParams(factor=2.0, min_seconds=30), True),  # p95 0: no division
    ],
)
def test_running_long(
    running_seconds: float, samples: list[float], params: RuleParams, firing: bool
) -> None:
    run = RunningRun("r1", "j1", "etl", running_seconds)
    signals = running_long([run], {"j1": samples}, set(), params)
    assert [signal.firing for signal in signals] == ([True] if firing else [])


def test_running_long_resolves_runs_no_longer_running_and_names_the_p95() -> None:
    run = RunningRun("r1", "j1", "etl", 41 * 60)
    (gone, long_one) = running_long([run], {"j1": [13 * 60.0] * 5}, {"r0"}, RuleParams())
    assert (gone.key, gone.firing) == ("r0", False)
    assert long_one.summary == "run r1 of job etl running 41 min, 3.2x its p95 of 13 min"


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"factor": 3}, ["params.factor"]),
        ({"job_id": "job_1", "workflow_id": "wf_1", "schedule_id": "sch_1"}, []),
    ],
)
def test_deadline_missed_reads_only_its_own_params(
    params: dict[str, object], fields: list[str]
) -> None:
    found = RuleParams.model_validate(params).check_for(RuleKind.DEADLINE_MISSED)
    assert [field for field, _ in found] == fields


@pytest.mark.parametrize("factor", [1.0, 0.5, 101])
def test_a_factor_not_above_one_or_past_a_hundred_is_refused(factor: float) -> None:
    with pytest.raises(ValueError, match="factor"):
        RuleParams(factor=factor)
