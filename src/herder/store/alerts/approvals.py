"""What ``approval_waiting`` reads: the tenant's approval tasks waiting past the rule's
``after_seconds`` (its waiting runs, by the (tenant, state) index; with ``job_id``, of workflow
runs that run that job), and which of its open incidents' runs no longer wait."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select

from herder.domain.alerts.approvals import WaitingApproval
from herder.domain.alerts.rules import RuleParams
from herder.domain.states import RunState
from herder.domain.workflows.spec import TaskKind
from herder.store.schema import runs, workflow_runs

if TYPE_CHECKING:
    from herder.store.work import Work


def waiting_approvals(
    work: Work, tenant_id: str, params: RuleParams, open_keys: Collection[str]
) -> tuple[list[WaitingApproval], set[str]]:
    """The approvals waiting past ``after_seconds``; the open keys whose run waits no more."""
    oldest = work.now - timedelta(seconds=params.after_seconds)
    query = (
        select(
            runs.c.id,
            runs.c.task_name,
            runs.c.created_at,
            workflow_runs.c.id.label("wfrun"),
            workflow_runs.c.workflow_name,
            workflow_runs.c.jobs,
        )
        .join(workflow_runs, workflow_runs.c.id == runs.c.workflow_run_id)
        .where(
            runs.c.tenant_id == tenant_id,
            runs.c.state == RunState.WAITING,
            runs.c.job_name == TaskKind.APPROVAL.job_name,
            runs.c.created_at <= oldest,
        )
    )
    if params.workflow_id is not None:
        query = query.where(workflow_runs.c.workflow_id == params.workflow_id)
    rows = work.connection.execute(query).all()
    if params.job_id is not None:  # a workflow run's pinned jobs: {name: {"id", "spec"}}
        rows = [row for row in rows if _runs_job(row.jobs, params.job_id)]
    waiting = [
        WaitingApproval(
            row.id,
            row.task_name,
            row.wfrun,
            row.workflow_name,
            (work.now - row.created_at).total_seconds(),
        )
        for row in rows
    ]
    if not open_keys:
        return waiting, set()
    still = set(
        work.connection.execute(
            select(runs.c.id).where(
                runs.c.id.in_(sorted(open_keys)), runs.c.state == RunState.WAITING
            )
        ).scalars()
    )
    return waiting, set(open_keys) - still


def _runs_job(pinned: object, job_id: str) -> bool:
    return isinstance(pinned, dict) and any(
        isinstance(one, dict) and one.get("id") == job_id for one in pinned.values()
    )
