"""One evaluation of one rule, in one transaction: read its facts and its open incidents,
decide (``domain.alerts.decisions``), then open, resolve and queue deliveries.

Opening inserts under the unique ``open_key`` (rule and key) and ignores a duplicate, and
resolving is guarded by the incident still being open, so two evaluators racing make one
incident and one notice each way. Event-driven kinds read what ended since the rule's last
evaluation (``evaluated_at``, less an overlap for transactions that commit late); reading a
thing twice decides the same, so the overlap is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import ColumnElement, Table, func, or_, select, update

from herder.clock import epoch_ms
from herder.domain.alerts import approvals, decisions, late_runs
from herder.domain.alerts.decisions import Ended, ScheduleMisses, Signal
from herder.domain.alerts.rules import IncidentState, RuleKind, RuleParams
from herder.domain.ids import new_id
from herder.domain.placement.ordering import wait_began
from herder.domain.states import RunState
from herder.domain.workflows.states import WorkflowRunState
from herder.store.alerts.approvals import waiting_approvals
from herder.store.alerts.channels import add_deliveries
from herder.store.alerts.late_runs import missed_deadlines, running_runs
from herder.store.dialect import insert_ignoring_duplicates
from herder.store.history.live import live_floor
from herder.store.schema import (
    alert_incidents,
    alert_rules,
    jobs,
    leases,
    runs,
    schedule_events,
    schedules,
    workflow_runs,
    workflows,
)
from herder.store.usage import read_uses
from herder.store.work import Work

log = logging.getLogger("herder.store")

OVERLAP = timedelta(minutes=5)
MAX_QUEUE_SAMPLES = 100_000
_QUOTA_REASON = "tenant quota%"  # waiting on the tenant's own quota is not missing capacity
_BUDGET_REASON = "tenant %budget%"  # nor is waiting on its spent time budget


@dataclass(frozen=True)
class StoredRule:
    id: str
    tenant_id: str
    name: str
    kind: RuleKind
    params: RuleParams
    channel_ids: list[str]
    notify_recovery: bool
    evaluated_at: datetime | None
    created_at: datetime


_WORKFLOW_ENDS = (WorkflowRunState.FAILED, WorkflowRunState.SUCCEEDED)  # a failure and a success


def enabled_rule_ids(work: Work) -> list[str]:
    return list(
        work.connection.execute(
            select(alert_rules.c.id)
            .where(alert_rules.c.enabled.is_(True))
            .order_by(alert_rules.c.id)
        ).scalars()
    )


def stored_rule(work: Work, rule_id: str) -> StoredRule | None:
    """The rule as it is now, locked (PostgreSQL) so that evaluations of it take turns;
    ``None`` when it was deleted or disabled meanwhile, or when its row fails its model (a
    server bug: logged, and the other rules still run)."""
    row = work.connection.execute(
        select(alert_rules)
        .where(alert_rules.c.id == rule_id, alert_rules.c.enabled.is_(True))
        .with_for_update()
    ).first()
    if row is None:
        return None
    try:
        params = RuleParams.model_validate(row.params)
        kind = RuleKind(row.kind)
    except (ValidationError, ValueError):
        log.exception("stored alert rule %s fails its model; not evaluated", row.id)
        return None
    return StoredRule(row.id, row.tenant_id, row.name, kind, params, list(row.channel_ids),
                      row.notify_recovery, row.evaluated_at, row.created_at)  # fmt: skip


def evaluate(work: Work, rule_id: str) -> decisions.Decisions | None:
    """Decide and apply one rule's incidents; what was decided (``None``: nothing to judge)."""
    rule = stored_rule(work, rule_id)
    if rule is None or not decisions.is_due(rule.kind, rule.evaluated_at, work.now):
        return None
    open_rows = work.connection.execute(
        select(alert_incidents.c.id, alert_incidents.c.key, alert_incidents.c.opened_at,
               alert_incidents.c.summary, alert_incidents.c.details)
        .where(alert_incidents.c.rule_id == rule.id,
               alert_incidents.c.state == IncidentState.OPEN)
    ).all()  # fmt: skip
    opened = {row.key: row for row in open_rows}
    since = rule.evaluated_at or rule.created_at
    signals = _signals(work, rule, since, {key: row.opened_at for key, row in opened.items()})
    decided = decisions.reconcile(signals, opened.keys())
    for signal in decided.opens:
        _open(work, rule, signal)
    for signal in decided.resolves:
        _resolve(work, rule, opened[signal.key].id, signal)
    _seen_again(work, [opened[key] for key in decided.still_firing], signals)
    work.connection.execute(
        update(alert_rules).where(alert_rules.c.id == rule.id).values(evaluated_at=work.now)
    )
    return decided


def _signals(
    work: Work, rule: StoredRule, since: datetime, open_since: dict[str, datetime]
) -> list[Signal]:
    params = rule.params
    if rule.kind is RuleKind.RUN_FAILED:
        ended = _ended_runs(work, rule, since, open_since.keys())
        return decisions.run_failed(ended, params, _names(work, jobs, rule.tenant_id, ended))
    if rule.kind is RuleKind.WORKFLOW_FAILED:
        ended = _ended_workflow_runs(work, rule, since, open_since.keys())
        return decisions.workflow_failed(ended, _names(work, workflows, rule.tenant_id, ended))
    if rule.kind is RuleKind.SCHEDULE_MISSED:
        misses = _schedule_misses(work, rule, since, open_since)
        ids = [one.schedule_id for one in misses]
        return decisions.schedule_missed(misses, _names(work, schedules, rule.tenant_id, ids))
    if rule.kind is RuleKind.QUEUE_WAIT_P99:
        return decisions.queue_wait_p99(_queue_waits(work, rule), params)
    if rule.kind is RuleKind.NO_CAPACITY:
        return decisions.no_capacity(_waiting_for_room(work, rule), params)
    if rule.kind is RuleKind.DEADLINE_MISSED:
        after = _overlapping(rule, since)
        found = missed_deadlines(work, rule.tenant_id, rule.id, params, after, open_since.keys())
        return late_runs.deadline_missed(found)
    if rule.kind is RuleKind.RUNNING_LONG:
        running, successes, gone = running_runs(work, rule.tenant_id, params, open_since.keys())
        return late_runs.running_long(running, successes, gone, params)
    if rule.kind is RuleKind.APPROVAL_WAITING:
        waiting, decided = waiting_approvals(work, rule.tenant_id, params, open_since.keys())
        return approvals.approval_waiting(waiting, decided)
    if rule.kind is RuleKind.BUDGET:
        uses = read_uses(work.connection, work.now, [rule.tenant_id])
        standings = uses[rule.tenant_id].standings(work.now) if rule.tenant_id in uses else []
        return decisions.budget(standings, params)
    expiries = {
        row.name: row.expires_at
        for row in work.connection.execute(select(leases.c.name, leases.c.expires_at))
    }
    return decisions.loop_stale(expiries, params, work.now)


def _names(work: Work, table: Table, tenant_id: str, ids: Iterable[str]) -> dict[str, str]:
    """The names of the tenant's jobs, workflows or schedules of ``ids``, in one query, so
    that an incident names what failed as people know it (a schedule may have none)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = work.connection.execute(
        select(table.c.id, table.c.name).where(
            table.c.tenant_id == tenant_id, table.c.id.in_(wanted), table.c.name.is_not(None)
        )
    )
    return {row.id: row.name for row in rows}


def _seen_again(work: Work, rows: Collection[Any], signals: Collection[Signal]) -> None:
    """Open incidents still firing: ``last_seen_at`` moves, and the summary and details
    follow what was seen (the streak's latest runs, the p99…) — written only when they
    changed, so a steady incident costs one update of all of them."""
    latest = {signal.key: signal for signal in signals}
    for row in rows:
        signal = latest[row.key]
        if (signal.summary, dict(signal.details)) != (row.summary, row.details):
            work.connection.execute(
                update(alert_incidents)
                .where(alert_incidents.c.id == row.id,
                       alert_incidents.c.state == IncidentState.OPEN)
                .values(summary=signal.summary, details=dict(signal.details))
            )  # fmt: skip
    if rows:
        work.connection.execute(
            update(alert_incidents)
            .where(alert_incidents.c.id.in_([row.id for row in rows]),
                   alert_incidents.c.state == IncidentState.OPEN)
            .values(last_seen_at=work.now)
        )  # fmt: skip


def _overlapping(rule: StoredRule, since: datetime) -> datetime:
    """``since`` less the overlap, but never before the rule was made: it looks forward."""
    return max(since - OVERLAP, rule.created_at)


def _ended_runs(
    work: Work, rule: StoredRule, since: datetime, open_keys: Collection[str]
) -> dict[str, list[Ended]]:
    """The last ``consecutive`` ends (failed in a counted way, or succeeded), newest first,
    of each job with a counted failure since ``since`` or an incident open."""
    failures = [outcome.value for outcome in rule.params.outcomes]
    scope = [] if rule.params.job_id is None else [runs.c.job_id == rule.params.job_id]
    failing = _failing_keys(work, runs, runs.c.job_id, rule, scope, failures, since)
    states = [*failures, RunState.SUCCEEDED.value]
    return {
        job_id: _last_ends(work, runs, runs.c.job_id, rule.tenant_id, job_id, states,
                           rule.params.consecutive)
        for job_id in sorted(failing | set(open_keys))
    }  # fmt: skip


def _ended_workflow_runs(
    work: Work, rule: StoredRule, since: datetime, open_keys: Collection[str]
) -> dict[str, list[Ended]]:
    """The last end (failed or succeeded) of each workflow with a failed run since
    ``since`` or an incident open."""
    key = workflow_runs.c.workflow_id
    workflow_id = rule.params.workflow_id
    scope = [] if workflow_id is None else [key == workflow_id]
    failing = _failing_keys(work, workflow_runs, key, rule, scope, [WorkflowRunState.FAILED], since)
    return {
        one: _last_ends(work, workflow_runs, key, rule.tenant_id, one, _WORKFLOW_ENDS, 1)
        for one in sorted(failing | set(open_keys))
    }


def _failing_keys(
    work: Work,
    table: Table,
    key: ColumnElement[str],
    rule: StoredRule,
    scope: list[ColumnElement[bool]],
    failures: Collection[str],
    since: datetime,
) -> set[str]:
    """The keys (jobs, workflows) with a failure that ended since ``since`` (less the
    overlap): a range of the ``(tenant_id, finished_at)`` index, however long ago the run
    was made. Every such key is read: a pass covers the ends of a few seconds and the
    overlap, and re-enabling a rule moves its watermark to then."""
    return set(
        work.connection.execute(
            select(key)
            .where(table.c.tenant_id == rule.tenant_id,
                   table.c.finished_at >= _overlapping(rule, since),
                   table.c.state.in_(failures), *scope)
            .group_by(key)
        ).scalars()
    )  # fmt: skip


def _last_ends(
    work: Work,
    table: Table,
    key: ColumnElement[str],
    tenant_id: str,
    key_id: str,
    states: Collection[str],
    count: int,
) -> list[Ended]:
    """The key's last ``count`` ends in ``states``, newest first in end order (runs: the
    ``(tenant_id, job_id, finished_at)`` index, read backwards)."""
    rows = work.connection.execute(
        select(table.c.id, table.c.state, table.c.finished_at)
        .where(table.c.tenant_id == tenant_id, key == key_id,
               table.c.finished_at.is_not(None), table.c.state.in_(states))
        .order_by(table.c.finished_at.desc(), table.c.id.desc())
        .limit(count)
    ).all()  # fmt: skip
    return [Ended(row.id, row.state, row.finished_at) for row in rows]


def _schedule_misses(
    work: Work, rule: StoredRule, since: datetime, open_since: dict[str, datetime]
) -> list[ScheduleMisses]:
    """Per schedule, the misses not yet judged — recorded after its open incident opened, or
    after its last one resolved — among those since the last evaluation (less the overlap);
    and the schedules with an incident open."""
    scope = [schedules.c.tenant_id == rule.tenant_id]
    if rule.params.schedule_id is not None:
        scope.append(schedules.c.id == rule.params.schedule_id)
    events = work.connection.execute(
        select(schedule_events.c.schedule_id, schedule_events.c.at,
               schedule_events.c.scheduled_for)
        .join(schedules, schedules.c.id == schedule_events.c.schedule_id)
        .where(*scope, schedule_events.c.kind.in_(("missed", "skipped")),
               schedule_events.c.at >= _overlapping(rule, since))
        .limit(MAX_QUEUE_SAMPLES)
    ).all()  # fmt: skip
    resolved = {
        row.key: row.resolved_at
        for row in work.connection.execute(
            select(alert_incidents.c.key,
                   func.max(alert_incidents.c.resolved_at).label("resolved_at"))
            .where(alert_incidents.c.rule_id == rule.id,
                   alert_incidents.c.state == IncidentState.RESOLVED)
            .group_by(alert_incidents.c.key)
        )
    }  # fmt: skip
    judged = {**resolved, **open_since}
    new: dict[str, list[datetime | None]] = {}
    for event in events:
        before = judged.get(event.schedule_id)
        if before is None or event.at > before:
            new.setdefault(event.schedule_id, []).append(event.scheduled_for)
    wanted = set(new) | set(open_since)
    fired = {
        row.id: row.last_fired_for
        for row in work.connection.execute(
            select(schedules.c.id, schedules.c.last_fired_for).where(
                *scope, schedules.c.id.in_(sorted(wanted))
            )
        )
    }
    return [
        ScheduleMisses(schedule_id, len(new.get(schedule_id, [])),
                       max(filter(None, new.get(schedule_id, [])), default=None),
                       fired.get(schedule_id), open_since.get(schedule_id))
        for schedule_id in sorted(wanted)
    ]  # fmt: skip


def _queue_waits(work: Work, rule: StoredRule) -> list[float]:
    """Seconds from queued (or last preempted) to started of the tenant's runs started in
    the window: those
    ended since its start (the ``(tenant_id, finished_at)`` index: a run that started in
    the window ended after it began) and those running now (``(tenant_id, state, id)``).
    At most ``MAX_QUEUE_SAMPLES`` of each: past that, the p99 is judged on a sample."""
    start = work.now - timedelta(seconds=rule.params.window_seconds)
    placed = [runs.c.tenant_id == rule.tenant_id, runs.c.started_at >= start,
              runs.c.queued_at.is_not(None)]  # fmt: skip
    ended = [runs.c.finished_at >= start]
    running = [runs.c.state.in_((RunState.RUNNING, RunState.RETRY_WAIT))]
    waits: list[float] = []
    for where in (ended, running):
        rows = work.connection.execute(
            select(runs.c.queued_at, runs.c.preempted_at, runs.c.started_at)
            .where(*placed, *where)
            .limit(MAX_QUEUE_SAMPLES)
        ).all()
        waits += [
            max(0.0, (row.started_at - wait_began(row.queued_at, row.preempted_at)).total_seconds())
            for row in rows
        ]
    return waits


def _waiting_for_room(work: Work, rule: StoredRule) -> list[str]:
    """Queued runs of the tenant, waiting ``wait_seconds`` or more for lack of room (the
    dispatcher gave a reason that is not the tenant's own quota)."""
    before = work.now - timedelta(seconds=rule.params.wait_seconds)
    return list(
        work.connection.execute(
            select(runs.c.id)
            .where(runs.c.tenant_id == rule.tenant_id, runs.c.state == RunState.QUEUED,
                   runs.c.id >= live_floor(work.connection, work.now),
                   runs.c.queued_at <= before,  # and, if it was preempted, since then
                   or_(runs.c.preempted_at.is_(None), runs.c.preempted_at <= before),
                   runs.c.waiting_reason.is_not(None),
                   runs.c.waiting_reason.not_like(_QUOTA_REASON),
                   runs.c.waiting_reason.not_like(_BUDGET_REASON))
            .order_by(runs.c.queued_at)
            .limit(20)
        ).scalars()
    )  # fmt: skip


def _payload(rule: StoredRule, event: str, incident: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": event,
        "tenant_id": rule.tenant_id,
        "rule": {"id": rule.id, "name": rule.name, "kind": rule.kind.value},
        "incident": incident,
    }


def _open(work: Work, rule: StoredRule, signal: Signal) -> None:
    incident_id = new_id("inc", epoch_ms(work.now))
    details = dict(signal.details)
    inserted = work.connection.execute(
        insert_ignoring_duplicates(
            work.database, alert_incidents, id=incident_id, tenant_id=rule.tenant_id,
            rule_id=rule.id, key=signal.key, state=IncidentState.OPEN,
            open_key=f"{rule.id} {signal.key}", summary=signal.summary, details=details,
            opened_at=work.now, last_seen_at=work.now,
        ).returning(alert_incidents.c.id)
    ).first()  # fmt: skip
    if inserted is None:  # another evaluator opened it first: its notice is the one
        return
    incident = {"id": incident_id, "key": signal.key, "state": "open",
                "summary": signal.summary, "details": details,
                "opened_at": work.now.isoformat(), "resolved_at": None}  # fmt: skip
    add_deliveries(work.database, work.connection, rule.tenant_id, rule.channel_ids,
                   incident_id, "opened", _payload(rule, "opened", incident), work.now)  # fmt: skip


def _resolve(work: Work, rule: StoredRule, incident_id: str, signal: Signal) -> None:
    resolved = work.connection.execute(
        update(alert_incidents)
        .where(alert_incidents.c.id == incident_id, alert_incidents.c.state == IncidentState.OPEN)
        .values(state=IncidentState.RESOLVED, open_key=None, resolved_at=work.now,
                last_seen_at=work.now, resolution=signal.summary)
    ).rowcount  # fmt: skip
    if not resolved or not rule.notify_recovery:
        return
    row = work.connection.execute(
        select(alert_incidents).where(alert_incidents.c.id == incident_id)
    ).one()
    incident = {
        "id": incident_id, "key": row.key, "state": "resolved", "summary": row.summary,
        "details": row.details, "recovery": signal.summary,
        "opened_at": row.opened_at.isoformat(), "resolved_at": work.now.isoformat(),
    }  # fmt: skip
    payload = _payload(rule, "resolved", incident)
    add_deliveries(work.database, work.connection, rule.tenant_id, rule.channel_ids,
                   incident_id, "resolved", payload, work.now)  # fmt: skip
