"""What the ``deadline_missed`` and ``running_long`` rules read (``domain.alerts.late_runs``
decides): runs and workflow runs the reaper marked missed since the rule's last look, those
with an incident open, and the tenant's running runs with their jobs' recent successes."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Table, select, tuple_

from herder.domain.alerts.late_runs import SAMPLES, MissedDeadline, RunningRun
from herder.domain.alerts.rules import RuleParams
from herder.domain.states import RunState
from herder.store.deadlines import fires_of, missed_of, spec_deadline
from herder.store.history.live import live_floor
from herder.store.schema import alert_incidents, runs, workflow_runs
from herder.store.work import Work

PAGE = 1000  # missed rows read at once
MAX_RUNNING = 1000  # running runs judged a pass: the longest running
_WORKFLOW_RUN_PREFIX = "wfrun_"


def missed_deadlines(
    work: Work, tenant_id: str, rule_id: str, params: RuleParams, after: datetime,
    open_keys: Collection[str],
) -> list[MissedDeadline]:  # fmt: skip
    """Rows marked missed from ``after`` on that this rule has not judged yet (no incident
    for them), within its scope, and the rows of its open incidents."""
    new: list[tuple[Any, bool]] = []
    for table, workflow in ((runs, False), (workflow_runs, True)):
        scope = _scope(table, params)
        if scope is not None:
            where = [table.c.tenant_id == tenant_id, table.c.deadline_missed_at.is_not(None),
                     table.c.deadline_missed_at >= after, *scope]  # fmt: skip
            rows = _not_judged(work, table, where, rule_id, open_keys)
            new += [(row, workflow) for row in rows]
    opened = _rows_of(work, tenant_id, open_keys)
    fires = fires_of(work.connection, [row for row, _ in [*new, *opened]])
    return [
        MissedDeadline(
            missed_of(row, row.deadline if workflow else spec_deadline(row.spec), row.name,
                      fires),
            workflow,
            None if row.finished_at is None else row.state, open=row.id in open_keys,
        )
        for row, workflow in [*new, *opened]
    ]  # fmt: skip


def _scope(table: Table, params: RuleParams) -> list[Any] | None:
    """The rule's narrowing on this table; ``None``: none of its rows are in scope (a job's
    rule reads no workflow runs, a workflow's no runs)."""
    scope = []
    if params.job_id is not None:
        if table is workflow_runs:
            return None
        scope.append(runs.c.job_id == params.job_id)
    if params.workflow_id is not None:
        if table is runs:
            return None
        scope.append(workflow_runs.c.workflow_id == params.workflow_id)
    if params.schedule_id is not None:
        scope.append(table.c.schedule_id == params.schedule_id)
    return scope


def _columns(table: Table) -> Any:
    """What a miss is told with: its deadline (a run's is in its spec), its owner's name."""
    if table is runs:
        return select(runs.c.id, runs.c.tenant_id, runs.c.deadline_at, runs.c.deadline_missed_at,
                      runs.c.schedule_id, runs.c.scheduled_for, runs.c.state, runs.c.finished_at,
                      runs.c.spec, runs.c.job_name.label("name"))  # fmt: skip
    return select(workflow_runs.c.id, workflow_runs.c.tenant_id, workflow_runs.c.deadline_at,
                  workflow_runs.c.deadline_missed_at, workflow_runs.c.schedule_id,
                  workflow_runs.c.scheduled_for, workflow_runs.c.state,
                  workflow_runs.c.finished_at, workflow_runs.c.deadline,
                  workflow_runs.c.workflow_name.label("name"))  # fmt: skip


def _not_judged(
    work: Work, table: Table, where: list[Any], rule_id: str, open_keys: Collection[str]
) -> list[Any]:
    """The rows ``where`` holds with no incident of the rule yet, a page at a time in the
    order they were marked (a reaper's batch marks hundreds at one instant): a burst larger
    than a page is judged whole, not a page of it again and again."""
    found: list[Any] = []
    after: tuple[datetime, str] | None = None
    while True:
        query = _columns(table).where(*where)
        if after is not None:
            query = query.where(tuple_(table.c.deadline_missed_at, table.c.id) > after)
        page = work.connection.execute(
            query.order_by(table.c.deadline_missed_at, table.c.id).limit(PAGE)
        ).all()
        judged = _judged(work, rule_id, [row.id for row in page]) | set(open_keys)
        found += [row for row in page if row.id not in judged]
        if len(page) < PAGE:
            return found
        after = (page[-1].deadline_missed_at, page[-1].id)


def _judged(work: Work, rule_id: str, keys: list[str]) -> set[str]:
    if not keys:
        return set()
    return set(
        work.connection.execute(
            select(alert_incidents.c.key).where(
                alert_incidents.c.rule_id == rule_id, alert_incidents.c.key.in_(keys)
            )
        ).scalars()
    )


def _rows_of(work: Work, tenant_id: str, keys: Collection[str]) -> list[tuple[Any, bool]]:
    """The rows of these ids (workflow runs by their prefix); one gone (past retention) is
    left out, and its incident with it."""
    found: list[tuple[Any, bool]] = []
    for table, workflow in ((runs, False), (workflow_runs, True)):
        wanted = [key for key in keys if key.startswith(_WORKFLOW_RUN_PREFIX) == workflow]
        if wanted:
            rows = work.connection.execute(
                _columns(table).where(table.c.tenant_id == tenant_id, table.c.id.in_(wanted))
            ).all()
            found += [(row, workflow) for row in rows]
    return found


def running_runs(
    work: Work, tenant_id: str, params: RuleParams, open_keys: Collection[str]
) -> tuple[list[RunningRun], dict[str, list[float]], set[str]]:
    """The tenant's running runs (longest running first), the durations of their jobs' last
    successes (of jobs with a run past ``min_seconds``: no other can be judged long), and the
    open keys no longer running."""
    floor = live_floor(work.connection, work.now)
    scope = [] if params.job_id is None else [runs.c.job_id == params.job_id]
    rows = work.connection.execute(
        select(runs.c.id, runs.c.job_id, runs.c.job_name, runs.c.started_at)
        .where(runs.c.tenant_id == tenant_id, runs.c.state == RunState.RUNNING,
               runs.c.id >= floor, *scope)
        .order_by(runs.c.started_at)
        .limit(MAX_RUNNING)
    ).all()  # fmt: skip
    running = [
        RunningRun(row.id, row.job_id, row.job_name, (work.now - row.started_at).total_seconds())
        for row in rows
        if row.started_at is not None
    ]
    jobs = sorted({run.job_id for run in running if run.running_seconds > params.min_seconds})
    successes = {job_id: _durations(work, tenant_id, job_id) for job_id in jobs}
    return running, successes, _gone(work, tenant_id, open_keys, floor)


def _durations(work: Work, tenant_id: str, job_id: str) -> list[float]:
    """Seconds of the last attempt of the job's last successful runs (the ``(tenant_id,
    job_id, finished_at)`` index, read backwards)."""
    rows = work.connection.execute(
        select(runs.c.started_at, runs.c.finished_at)
        .where(runs.c.tenant_id == tenant_id, runs.c.job_id == job_id,
               runs.c.finished_at.is_not(None), runs.c.state == RunState.SUCCEEDED)
        .order_by(runs.c.finished_at.desc())
        .limit(SAMPLES)
    ).all()  # fmt: skip
    return [
        (row.finished_at - row.started_at).total_seconds()
        for row in rows
        if row.started_at is not None
    ]


def _gone(work: Work, tenant_id: str, open_keys: Collection[str], floor: str) -> set[str]:
    if not open_keys:
        return set()
    still = work.connection.execute(
        select(runs.c.id).where(
            runs.c.tenant_id == tenant_id, runs.c.id.in_(sorted(open_keys)),
            runs.c.state == RunState.RUNNING, runs.c.id >= floor,
        )
    ).scalars()  # fmt: skip
    return set(open_keys) - set(still)
