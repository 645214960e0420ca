"""Alert decisions, table-driven: consecutive failures open once, a success resolves with a
notice, evaluating again opens nothing new; misses, queue waits and stale loops."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.alerts.decisions import (
    QUEUE_KEY,
    Ended,
    ScheduleMisses,
    Signal,
    is_due,
    loop_stale,
    no_capacity,
    percentile,
    queue_wait_p99,
    reconcile,
    run_failed,
    schedule_missed,
    workflow_failed,
)
from herder.domain.alerts.rules import RuleKind, RuleParams
from herder.domain.alerts.webhooks import (
    MAX_ATTEMPTS,
    is_private_host,
    retry_at,
    signature,
)

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def ends(*states: str) -> list[Ended]:
    """Newest first."""
    return [Ended(f"run_{i}", state, NOW - timedelta(minutes=i)) for i, state in enumerate(states)]


@pytest.mark.parametrize(
    ("consecutive", "states", "expected"),
    [
        (1, ["failed"], True),
        (1, ["succeeded", "failed"], False),
        (3, ["failed", "dead"], None),  # only two ends so far
        (3, ["failed", "dead", "timed_out"], True),
        (3, ["failed", "succeeded", "failed"], None),  # the streak is broken
        (2, ["succeeded"], False),
        (1, ["cancelled"], False),  # a reader that passes other ends: not a failure
    ],
)
def test_run_failed_fires_after_n_consecutive_failures_and_clears_on_success(
    consecutive: int, states: list[str], expected: bool | None
) -> None:
    signals = run_failed({"job_a": ends(*states)}, RuleParams(consecutive=consecutive), {})
    assert [s.firing for s in signals] == ([] if expected is None else [expected])


def test_only_the_outcomes_asked_for_count_as_failures() -> None:
    params = RuleParams(outcomes=["dead"])
    assert run_failed({"job_a": ends("failed")}, params, {})[0].firing is False
    assert run_failed({"job_a": ends("dead")}, params, {})[0].firing is True


def test_reconcile_opens_once_then_only_sees_again_and_resolves_once() -> None:
    firing = Signal("job_a", True, "failed")
    first = reconcile([firing], open_keys=set())
    assert [s.key for s in first.opens] == ["job_a"]
    again = reconcile([firing], open_keys={"job_a"})
    assert again.opens == []
    assert again.still_firing == ["job_a"]
    recovered = reconcile([Signal("job_a", False, "ok")], open_keys={"job_a"})
    assert [s.key for s in recovered.resolves] == ["job_a"]
    assert recovered.opens == []
    nothing = reconcile([Signal("job_a", False, "ok")], open_keys=set())
    assert (nothing.opens, nothing.resolves) == ([], [])


def test_keys_the_facts_do_not_mention_are_left_alone() -> None:
    decided = reconcile([Signal("job_b", True, "x")], open_keys={"job_a"})
    assert [s.key for s in decided.opens] == ["job_b"]
    assert decided.resolves == []


def test_workflow_failed_follows_the_latest_end() -> None:
    assert [s.firing for s in workflow_failed({"wf_a": ends("failed", "succeeded")}, {})] == [True]
    assert [s.firing for s in workflow_failed({"wf_a": ends("succeeded", "failed")}, {})] == [False]


@pytest.mark.parametrize(
    ("new", "fired_for", "open_since", "expected"),
    [
        (2, NOW, None, True),  # the catch-up fire of the same pass does not hide the miss
        (0, NOW, NOW - timedelta(minutes=1), False),  # fired on time after it opened
        (0, NOW - timedelta(minutes=2), NOW - timedelta(minutes=1), None),  # not yet
        (0, NOW, None, None),  # nothing open, nothing new
    ],
)
def test_schedule_missed(
    new: int, fired_for: datetime, open_since: datetime | None, expected: bool | None
) -> None:
    misses = ScheduleMisses("sch_a", new, NOW - timedelta(minutes=3), fired_for, open_since)
    signals = schedule_missed([misses], {})
    assert [s.firing for s in signals] == ([] if expected is None else [expected])


def test_percentile_is_nearest_rank() -> None:
    assert percentile([5.0], 0.99) == 5.0
    assert percentile([float(i) for i in range(1, 101)], 0.99) == 99.0
    assert percentile([1.0, 100.0], 0.5) == 1.0


@pytest.mark.parametrize(
    ("waits", "firing"),
    [([], False), ([1.0] * 99 + [500.0], False), ([1.0] * 98 + [500.0] * 2, True)],
)
def test_queue_wait_p99_against_its_threshold(waits: list[float], firing: bool) -> None:
    (signal,) = queue_wait_p99(waits, RuleParams(threshold_seconds=60))
    assert (signal.key, signal.firing) == (QUEUE_KEY, firing)


def test_no_capacity_fires_while_runs_wait() -> None:
    assert no_capacity(["run_1"], RuleParams())[0].firing is True
    assert no_capacity([], RuleParams())[0].firing is False


def test_a_loop_is_stale_once_its_lease_expired_long_enough_ago() -> None:
    expiries = {"reaper": NOW - timedelta(seconds=61), "dispatcher": NOW - timedelta(seconds=5)}
    signals = loop_stale(expiries, RuleParams(stale_seconds=60), NOW)
    assert {s.key: s.firing for s in signals} == {"dispatcher": False, "reaper": True}
    only = loop_stale(expiries, RuleParams(loop="dispatcher", stale_seconds=60), NOW)
    assert [s.key for s in only] == ["dispatcher"]


def test_params_of_another_kind_are_named() -> None:
    params = RuleParams(threshold_seconds=5, consecutive=2)
    assert params.check_for(RuleKind.RUN_FAILED) == [
        ("params.threshold_seconds", "not a parameter of rule kind run_failed")
    ]
    assert RuleParams().check_for(RuleKind.QUEUE_WAIT_P99) == [
        ("params.threshold_seconds", "required by rule kind queue_wait_p99")
    ]


def test_signature_is_hmac_sha256_of_timestamp_and_body() -> None:
    import hashlib
    import hmac

    expected = hmac.new(b"key", b"1700000000.{}", hashlib.sha256).hexdigest()
    assert signature("key", 1700000000, b"{}") == f"t=1700000000,v1={expected}"


def test_retries_back_off_exponentially_with_jitter_until_attempts_run_out() -> None:
    rng = random.Random(1)
    delays = []
    for attempts in range(1, MAX_ATTEMPTS):
        moment = retry_at(attempts, NOW, rng)
        assert moment is not None
        delays.append((moment - NOW).total_seconds())
    assert 2.5 <= delays[0] <= 5.0
    assert all(0.5 * 5 * 2 ** (i) <= d <= 5 * 2**i for i, d in enumerate(delays))
    assert retry_at(MAX_ATTEMPTS, NOW, rng) is None


@pytest.mark.parametrize(
    ("host", "private"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("169.254.169.254", True),  # cloud metadata
        ("10.1.2.3", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("93.184.216.34", False),
        ("hooks.example.com", None),  # judged when resolved
    ],
)
def test_private_hosts(host: str, private: bool | None) -> None:
    assert is_private_host(host) is private


def test_queue_wait_p99_is_judged_once_a_minute_the_others_every_pass() -> None:
    just = NOW - timedelta(seconds=5)
    assert not is_due(RuleKind.QUEUE_WAIT_P99, just, NOW)
    assert is_due(RuleKind.QUEUE_WAIT_P99, NOW - timedelta(seconds=60), NOW)
    assert is_due(RuleKind.RUN_FAILED, just, NOW)


def test_an_incident_names_what_failed_as_people_know_it() -> None:
    names = {"job_a": "nightly-report"}
    three = run_failed(
        {"job_a": ends("failed", "dead", "failed")}, RuleParams(consecutive=3), names
    )
    assert three[0].summary == "job nightly-report failed 3 times in a row (last: run_0 failed)"
    (once,) = run_failed({"job_a": ends("timed_out")}, RuleParams(), names)
    assert once.summary == "job nightly-report failed (run_0 timed_out)"
    (back,) = run_failed({"job_a": ends("succeeded")}, RuleParams(), names)
    assert back.summary == "job nightly-report recovered: run_0 succeeded"
    (deleted,) = run_failed({"job_b": ends("failed")}, RuleParams(), names)
    assert deleted.summary == "job job_b failed (run_0 failed)"  # no name left: its id
    (flow,) = workflow_failed({"wf_a": ends("failed")}, {"wf_a": "etl"})
    assert flow.summary.startswith("workflow etl failed")
    misses = ScheduleMisses("sch_a", 2, NOW, NOW, None)
    (missed,) = schedule_missed([misses], {"sch_a": "nightly-etl"})
    assert missed.summary == "schedule nightly-etl missed or skipped 2 fire(s)"
