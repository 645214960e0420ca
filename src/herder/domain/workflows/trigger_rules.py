"""When a workflow task may start: Airflow's trigger rules, decided from the end states of
its direct upstream tasks.

This is Airflow's own table (``TriggerRuleDep._evaluate_direct_relatives``, as its
scheduler runs it, with ``flag_upstream_failed``), not its prose: first whether the task's
fate is already sealed — ``skipped`` or ``upstream_failed`` — then whether it may run;
otherwise it waits. Rules that can decide early do (``one_success`` runs at the first
success, ``all_success`` fails at the first failure), and a task is decided once: deciding
early never changes whether it runs, nor — but for one race Airflow has too — how it ends
without running. ``all_success`` is ``skipped`` at the first skip and ``upstream_failed``
at the first failure, so with both, whichever is seen first decides (both at once:
``upstream_failed``). Two places where Airflow's code is stricter than its prose, kept as
the code has them: ``all_done_min_one_success`` is skipped as soon as any upstream task
was skipped, and ``one_success`` with every upstream task skipped is skipped, not
``upstream_failed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class TriggerRule(StrEnum):
    ALL_SUCCESS = "all_success"  # the default
    ALL_FAILED = "all_failed"
    ALL_DONE = "all_done"
    ALL_DONE_MIN_ONE_SUCCESS = "all_done_min_one_success"
    ALL_SKIPPED = "all_skipped"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    ONE_DONE = "one_done"
    NONE_FAILED = "none_failed"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
    NONE_SKIPPED = "none_skipped"
    ALWAYS = "always"  # starts with the workflow run, whatever its upstream tasks do


class UpstreamEnd(StrEnum):
    """How an upstream task ended, as far as trigger rules tell ends apart."""

    SUCCESS = "success"
    FAILED = "failed"  # failed, timed out, dead, lost for good: it ran and did not succeed
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"


class Verdict(StrEnum):
    WAIT = "wait"
    RUN = "run"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"


@dataclass(frozen=True)
class Upstream:
    """How many direct upstream tasks ended which way, and how many have not ended."""

    success: int = 0
    failed: int = 0
    skipped: int = 0
    upstream_failed: int = 0
    unfinished: int = 0

    @classmethod
    def of(cls, ends: Iterable[UpstreamEnd | None]) -> Upstream:
        """From each upstream task's end (``None``: not ended yet)."""
        listed = list(ends)
        return cls(
            success=listed.count(UpstreamEnd.SUCCESS),
            failed=listed.count(UpstreamEnd.FAILED),
            skipped=listed.count(UpstreamEnd.SKIPPED),
            upstream_failed=listed.count(UpstreamEnd.UPSTREAM_FAILED),
            unfinished=listed.count(None),
        )

    @classmethod
    def counted(cls, ends: Mapping[UpstreamEnd | None, int]) -> Upstream:
        """From how many upstream task instances ended each way (``None``: not ended yet)."""
        return cls(
            success=ends.get(UpstreamEnd.SUCCESS, 0),
            failed=ends.get(UpstreamEnd.FAILED, 0),
            skipped=ends.get(UpstreamEnd.SKIPPED, 0),
            upstream_failed=ends.get(UpstreamEnd.UPSTREAM_FAILED, 0),
            unfinished=ends.get(None, 0),
        )

    @property
    def done(self) -> int:
        return self.success + self.failed + self.skipped + self.upstream_failed

    @property
    def total(self) -> int:
        return self.done + self.unfinished

    @property
    def all_done(self) -> bool:
        return self.unfinished == 0

    @property
    def failures(self) -> int:
        return self.failed + self.upstream_failed


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str  # why, in a user's words: a pending task's waiting reason, a skip's cause


def decide(rule: TriggerRule, upstream: Upstream) -> Decision:
    """What a pending task does now. A task without upstream tasks runs."""
    if rule is TriggerRule.ALWAYS or upstream.total == 0:
        return Decision(Verdict.RUN, "its trigger rule is met")
    sealed = _sealed(rule, upstream)
    if sealed is not None:
        return sealed
    if _met(rule, upstream):
        return Decision(Verdict.RUN, f"{rule} is met")
    return Decision(Verdict.WAIT, _waiting(rule, upstream))


def _sealed(rule: TriggerRule, up: Upstream) -> Decision | None:
    """Airflow's rewrite to a terminal state: the rule can no longer be met."""
    skip = Decision(Verdict.SKIPPED, f"{rule} cannot be met: {_ends(up)}")
    fail = Decision(Verdict.UPSTREAM_FAILED, f"{rule} cannot be met: {_ends(up)}")
    match rule:
        case TriggerRule.ALL_SUCCESS:
            return fail if up.failures else skip if up.skipped else None
        case TriggerRule.ALL_FAILED:
            return skip if up.success or up.skipped else None
        case TriggerRule.ONE_SUCCESS:
            if up.all_done and up.done == up.skipped:
                return skip
            return fail if up.all_done and up.success == 0 else None
        case TriggerRule.ONE_FAILED:
            return skip if up.all_done and not up.failures else None
        case TriggerRule.ONE_DONE:
            return skip if up.all_done and not (up.failed or up.success) else None
        case TriggerRule.NONE_FAILED:
            return fail if up.failures else None
        case TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS:
            return fail if up.failures else skip if up.skipped == up.total else None
        case TriggerRule.NONE_SKIPPED:
            return skip if up.skipped else None
        case TriggerRule.ALL_SKIPPED:
            return skip if up.success or up.failures else None
        case TriggerRule.ALL_DONE_MIN_ONE_SUCCESS:
            if up.skipped:
                return skip
            return fail if up.all_done and up.success == 0 else None
    return None  # ALL_DONE, ALWAYS: never sealed


def _met(rule: TriggerRule, up: Upstream) -> bool:
    match rule:
        case TriggerRule.ALL_SUCCESS:
            return up.success == up.total
        case TriggerRule.ALL_FAILED:
            return up.failures == up.total
        case TriggerRule.ALL_DONE:
            return up.all_done
        case TriggerRule.ALL_DONE_MIN_ONE_SUCCESS:
            return up.all_done and up.skipped == 0 and up.success > 0
        case TriggerRule.ALL_SKIPPED:
            return up.skipped == up.total
        case TriggerRule.ONE_SUCCESS:
            return up.success > 0
        case TriggerRule.ONE_FAILED:
            return up.failures > 0
        case TriggerRule.ONE_DONE:
            return up.success + up.failed > 0
        case TriggerRule.NONE_FAILED | TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS:
            return up.success + up.skipped == up.total
        case TriggerRule.NONE_SKIPPED:
            return up.all_done and up.skipped == 0
    return True  # ALWAYS


def _waiting(rule: TriggerRule, up: Upstream) -> str:
    return f"waiting on {up.unfinished} of {up.total} upstream task(s) ({rule})"


def _ends(up: Upstream) -> str:
    counted = [
        (up.success, "succeeded"), (up.failed, "failed"), (up.skipped, "skipped"),
        (up.upstream_failed, "upstream_failed"), (up.unfinished, "not ended"),
    ]  # fmt: skip
    return ", ".join(f"{count} {what}" for count, what in counted if count)
