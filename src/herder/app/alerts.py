"""An alert rule evaluated: one rule in one unit of work (the ``alerts`` loop, every 5 s).

read      the rule, its row held (PostgreSQL) so that evaluations of it take turns; its
          open incidents; the facts its kind speaks of (``store.alerts.signals``: since
          its last evaluation, less an overlap, where the kind is event-driven)
decide    each key's signal from the facts (``domain.alerts``), then which incidents
          open, resolve or are seen again (``decisions.reconcile``)
apply     incidents opened under the unique open key, resolved only while open, so two
          evaluators racing make one incident and one notice each way; their deliveries
          queued; those seen again follow what was seen (``store.alerts.incidents``)
record    the rule's ``evaluated_at``
"""

from __future__ import annotations

from datetime import datetime
from typing import assert_never

from herder.domain.alerts import approvals, decisions, late_runs
from herder.domain.alerts.decisions import Signal
from herder.domain.alerts.rules import RuleKind
from herder.store.alerts.approvals import waiting_approvals
from herder.store.alerts.incidents import (
    mark_evaluated,
    open_incident,
    open_incidents,
    resolve_incident,
    seen_again,
)
from herder.store.alerts.late_runs import missed_deadlines, running_runs
from herder.store.alerts.signals import (
    StoredRule,
    budget_standings,
    ended_runs,
    ended_workflow_runs,
    lease_expiries,
    names,
    overlapping,
    queue_waits,
    schedule_misses,
    stored_rule,
    waiting_for_room,
)
from herder.store.store import Store
from herder.store.work import Work


def evaluate(store: Store, rule_id: str) -> decisions.Decisions | None:
    """Decide and apply one rule's incidents; what was decided (``None``: nothing to judge:
    the rule is gone, disabled, or not due yet)."""
    with store.work() as work:
        # read
        rule = stored_rule(work, rule_id)
        if rule is None or not decisions.is_due(rule.kind, rule.evaluated_at, work.now):
            return None
        opened = open_incidents(work, rule.id)
        since = rule.evaluated_at or rule.created_at
        # read the kind's facts, and decide
        signals = _signals(work, rule, since, {key: row.opened_at for key, row in opened.items()})
        decided = decisions.reconcile(signals, opened.keys())
        # apply
        for signal in decided.opens:
            open_incident(work, rule, signal)
        for signal in decided.resolves:
            resolve_incident(work, rule, opened[signal.key].id, signal)
        seen_again(work, [opened[key] for key in decided.still_firing], signals)
        # record
        mark_evaluated(work, rule.id)
        return decided


def _signals(
    work: Work, rule: StoredRule, since: datetime, open_since: dict[str, datetime]
) -> list[Signal]:
    """The kind's facts, read (the store) and judged (the domain), key by key."""
    params, tenant_id = rule.params, rule.tenant_id
    match rule.kind:
        case RuleKind.RUN_FAILED:
            ended = ended_runs(work, rule, since, open_since.keys())
            return decisions.run_failed(ended, params, names(work, "job", tenant_id, ended))
        case RuleKind.WORKFLOW_FAILED:
            ended = ended_workflow_runs(work, rule, since, open_since.keys())
            return decisions.workflow_failed(ended, names(work, "workflow", tenant_id, ended))
        case RuleKind.SCHEDULE_MISSED:
            misses = schedule_misses(work, rule, since, open_since)
            named = names(work, "schedule", tenant_id, [one.schedule_id for one in misses])
            return decisions.schedule_missed(misses, named)
        case RuleKind.QUEUE_WAIT_P99:
            return decisions.queue_wait_p99(queue_waits(work, rule), params)
        case RuleKind.NO_CAPACITY:
            return decisions.no_capacity(waiting_for_room(work, rule), params)
        case RuleKind.DEADLINE_MISSED:
            after = overlapping(rule, since)
            found = missed_deadlines(work, tenant_id, rule.id, params, after, open_since.keys())
            return late_runs.deadline_missed(found)
        case RuleKind.RUNNING_LONG:
            running, successes, gone = running_runs(work, tenant_id, params, open_since.keys())
            return late_runs.running_long(running, successes, gone, params)
        case RuleKind.APPROVAL_WAITING:
            waiting, decided = waiting_approvals(work, tenant_id, params, open_since.keys())
            return approvals.approval_waiting(waiting, decided)
        case RuleKind.BUDGET:
            return decisions.budget(budget_standings(work, tenant_id), params)
        case RuleKind.LOOP_STALE:
            return decisions.loop_stale(lease_expiries(work), params, work.now)
        case unknown:
            assert_never(unknown)
