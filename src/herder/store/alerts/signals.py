"""What one evaluation of an alert rule reads (``app/alerts.py`` decides and applies): the
rule itself, held, and the facts of its kind — the ends of jobs and workflows, the misses of
schedules, queue waits, runs waiting for room, budgets, the loops' leases, and the names
that incidents show.

Event-driven kinds read what ended since the rule's last evaluation (``evaluated_at``, less
an overlap for transactions that commit late); reading a thing twice decides the same, so
the overlap is harmless. (``late_runs`` and ``approvals`` read for their own kinds.)
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import ValidationError
from sqlalchemy import ColumnElement, Table, func, or_, select

from herder.domain.alerts.decisions import Ended, ScheduleMisses
from herder.domain.alerts.rules import IncidentState, RuleKind, RuleParams
from herder.domain.budgets import Standing
from herder.domain.placement.ordering import wait_began
from herder.domain.states import RunState
from herder.domain.workflows.states import WorkflowRunState
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
_WORKFLOW_ENDS = (WorkflowRunState.FAILED, WorkflowRunState.SUCCEEDED)  # a failure and a success

Named = Literal["job", "workflow", "schedule"]
_NAMED: dict[Named, Table] = {"job": jobs, "workflow": workflows, "schedule": schedules}


@dataclass(frozen=True)
class StoredRule:
    """A rule as its evaluation reads it."""

    id: str
    tenant_id: str
    name: str
    kind: RuleKind
    params: RuleParams
    channel_ids: list[str]
    notify_recovery: bool
    evaluated_at: datetime | None
    created_at: datetime


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


def names(work: Work, kind: Named, tenant_id: str, ids: Iterable[str]) -> dict[str, str]:
    """The names of the tenant's jobs, workflows or schedules of ``ids``, in one query, so
    that an incident names what failed as people know it (a schedule may have none)."""
    table = _NAMED[kind]
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = work.connection.execute(
        select(table.c.id, table.c.name).where(
            table.c.tenant_id == tenant_id, table.c.id.in_(wanted), table.c.name.is_not(None)
        )
    )
    return {row.id: row.name for row in rows}


def overlapping(rule: StoredRule, since: datetime) -> datetime:
    """``since`` less the overlap, but never before the rule was made: it looks forward."""
    return max(since - OVERLAP, rule.created_at)


def ended_runs(
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


def ended_workflow_runs(
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
                   table.c.finished_at >= overlapping(rule, since),
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


def schedule_misses(
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
               schedule_events.c.at >= overlapping(rule, since))
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


def queue_waits(work: Work, rule: StoredRule) -> list[float]:
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


def waiting_for_room(work: Work, rule: StoredRule) -> list[str]:
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


def budget_standings(work: Work, tenant_id: str) -> list[Standing]:
    """The tenant's budgets, each as it stands now (none: no budget set)."""
    uses = read_uses(work.connection, work.now, [tenant_id])
    return uses[tenant_id].standings(work.now) if tenant_id in uses else []


def lease_expiries(work: Work) -> dict[str, datetime]:
    """When each loop's lease expires, by its name."""
    return {
        row.name: row.expires_at
        for row in work.connection.execute(select(leases.c.name, leases.c.expires_at))
    }
