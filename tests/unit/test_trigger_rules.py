"""Airflow's trigger rules, as a table: (rule, upstream ends) → what the task does now.

Upstream ends are written S (success), F (failed), K (skipped), U (upstream_failed) and
. (not ended yet).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from herder.domain.workflows.trigger_rules import (
    TriggerRule,
    Upstream,
    UpstreamEnd,
    Verdict,
    decide,
)

R = TriggerRule
WAIT, RUN, SKIP, UPF = Verdict.WAIT, Verdict.RUN, Verdict.SKIPPED, Verdict.UPSTREAM_FAILED
CODES = {
    "S": UpstreamEnd.SUCCESS,
    "F": UpstreamEnd.FAILED,
    "K": UpstreamEnd.SKIPPED,
    "U": UpstreamEnd.UPSTREAM_FAILED,
    ".": None,
}

TABLE = [
    # all_success: every upstream succeeded; a failure fails it early, a skip skips it
    (R.ALL_SUCCESS, "SS", RUN), (R.ALL_SUCCESS, "S.", WAIT), (R.ALL_SUCCESS, "F.", UPF),
    (R.ALL_SUCCESS, "U.", UPF), (R.ALL_SUCCESS, "K.", SKIP), (R.ALL_SUCCESS, "KF", UPF),
    # all_failed: every upstream failed (or upstream_failed)
    (R.ALL_FAILED, "FU", RUN), (R.ALL_FAILED, "F.", WAIT), (R.ALL_FAILED, "S.", SKIP),
    (R.ALL_FAILED, "K.", SKIP),
    # all_done: every upstream ended, however
    (R.ALL_DONE, "SFKU", RUN), (R.ALL_DONE, "SF.", WAIT),
    # all_done_min_one_success: all ended, one succeeded; any skip skips it (Airflow's code)
    (R.ALL_DONE_MIN_ONE_SUCCESS, "SF", RUN), (R.ALL_DONE_MIN_ONE_SUCCESS, "S.", WAIT),
    (R.ALL_DONE_MIN_ONE_SUCCESS, "FU", UPF), (R.ALL_DONE_MIN_ONE_SUCCESS, "SK", SKIP),
    (R.ALL_DONE_MIN_ONE_SUCCESS, "K.", SKIP),
    # all_skipped
    (R.ALL_SKIPPED, "KK", RUN), (R.ALL_SKIPPED, "K.", WAIT), (R.ALL_SKIPPED, "S.", SKIP),
    (R.ALL_SKIPPED, "U.", SKIP),
    # one_success: at the first success, without waiting for the rest
    (R.ONE_SUCCESS, "S..", RUN), (R.ONE_SUCCESS, "F..", WAIT), (R.ONE_SUCCESS, "FK", UPF),
    (R.ONE_SUCCESS, "KK", SKIP), (R.ONE_SUCCESS, "FF", UPF),
    # one_failed: at the first failure; skipped when all ended without one
    (R.ONE_FAILED, "F..", RUN), (R.ONE_FAILED, "U.", RUN), (R.ONE_FAILED, "S.", WAIT),
    (R.ONE_FAILED, "SK", SKIP),
    # one_done: at the first success or failure (not a skip, not upstream_failed)
    (R.ONE_DONE, "S.", RUN), (R.ONE_DONE, "F.", RUN), (R.ONE_DONE, "K.", WAIT),
    (R.ONE_DONE, "U.", WAIT), (R.ONE_DONE, "KU", SKIP),
    # none_failed: all succeeded or skipped; a failure fails it early
    (R.NONE_FAILED, "SK", RUN), (R.NONE_FAILED, "KK", RUN), (R.NONE_FAILED, "S.", WAIT),
    (R.NONE_FAILED, "F.", UPF), (R.NONE_FAILED, "U.", UPF),
    # none_failed_min_one_success: as none_failed, and skipped when all were skipped
    (R.NONE_FAILED_MIN_ONE_SUCCESS, "SK", RUN), (R.NONE_FAILED_MIN_ONE_SUCCESS, "KK", SKIP),
    (R.NONE_FAILED_MIN_ONE_SUCCESS, "K.", WAIT), (R.NONE_FAILED_MIN_ONE_SUCCESS, "F.", UPF),
    # none_skipped: all ended, none skipped; a skip skips it early
    (R.NONE_SKIPPED, "SF", RUN), (R.NONE_SKIPPED, "SU", RUN), (R.NONE_SKIPPED, "S.", WAIT),
    (R.NONE_SKIPPED, "K.", SKIP),
    # always: with the workflow run, not after its upstream tasks
    (R.ALWAYS, "..", RUN), (R.ALWAYS, "FK", RUN),
]  # fmt: skip


def upstream(ends: str) -> Upstream:
    return Upstream.of(CODES[code] for code in ends)


@pytest.mark.parametrize(("rule", "ends", "verdict"), TABLE)
def test_the_trigger_rule_table(rule: TriggerRule, ends: str, verdict: Verdict) -> None:
    assert decide(rule, upstream(ends)).verdict is verdict


def test_every_rule_is_in_the_table() -> None:
    assert {rule for rule, _, _ in TABLE} == set(TriggerRule)


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_a_task_without_upstream_tasks_runs(rule: TriggerRule) -> None:
    assert decide(rule, Upstream()).verdict is RUN


def test_a_decision_says_why_in_a_users_words() -> None:
    waiting = decide(R.ALL_SUCCESS, upstream("S.."))
    assert waiting.reason == "waiting on 2 of 3 upstream task(s) (all_success)"
    failed = decide(R.ALL_SUCCESS, upstream("SF."))
    assert failed.reason == "all_success cannot be met: 1 succeeded, 1 failed, 1 not ended"


ENDS = st.lists(st.sampled_from([*UpstreamEnd, None]), min_size=1, max_size=6)
RULES = st.sampled_from(list(TriggerRule))


@given(RULES, ENDS)
def test_once_every_upstream_task_has_ended_nothing_waits(
    rule: TriggerRule, ends: list[UpstreamEnd | None]
) -> None:
    finished = [end or UpstreamEnd.SUCCESS for end in ends]
    assert decide(rule, Upstream.of(finished)).verdict is not WAIT


FINAL_ENDS = st.lists(st.sampled_from(list(UpstreamEnd)), min_size=6, max_size=6)
# all_success is skipped at the first skip and upstream_failed at the first failure
# (Airflow's code), so with both, whichever is seen first decides: the one early decision
# that a later view of the same ends contradicts, and only in how the task does not run.
FIRST_SKIP_THEN_FAILURE = (R.ALL_SUCCESS, SKIP, UPF)


@given(RULES, ENDS, FINAL_ENDS)
@example(R.ALL_SUCCESS, [UpstreamEnd.SKIPPED, None], [UpstreamEnd.FAILED] * 6)
@example(R.ALL_SUCCESS, [UpstreamEnd.FAILED, None], [UpstreamEnd.SKIPPED] * 6)
@example(R.NONE_SKIPPED, [UpstreamEnd.SKIPPED, None], [UpstreamEnd.FAILED] * 6)
def test_a_decision_made_early_stands_however_the_rest_end(
    rule: TriggerRule, ends: list[UpstreamEnd | None], final_ends: list[UpstreamEnd]
) -> None:
    """What makes deciding early safe: a task never runs and is then found skipped, or is
    skipped and then found runnable; and, but for all_success's race, the way it did not
    run stands too. ``final_ends[i]``: how upstream task i ends if it had not yet."""
    early = decide(rule, Upstream.of(ends)).verdict
    rest = [end or final for end, final in zip(ends, final_ends, strict=False)]
    later = decide(rule, Upstream.of(rest)).verdict
    assert early is WAIT or (later is RUN) is (early is RUN)
    assert early is WAIT or later is early or (rule, early, later) == FIRST_SKIP_THEN_FAILURE
