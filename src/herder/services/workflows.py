"""Workflows (DAGs of jobs, versioned) and their runs. The store checks a DAG and moves its
runs in one unit of work; these pass each use case on, naming who cancelled, suspended or
resumed."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from herder.domain.listings import PageRequest
from herder.domain.models import Page, Principal
from herder.domain.workflows.models import Workflow, WorkflowRun, WorkflowRunDetail
from herder.domain.workflows.progress import WorkflowRunState
from herder.domain.workflows.spec import WorkflowSpec
from herder.store.store import Store


def create(store: Store, tenant_id: str, name: str, spec: WorkflowSpec) -> Workflow:
    """Version 1, once the DAG is checked whole."""
    return store.workflows.create(tenant_id, name, spec)


def list_workflows(
    store: Store,
    tenant_id: str,
    *,
    page: PageRequest,
    name: str | None,
) -> Page[Workflow]:
    return store.workflows.list(tenant_id, page=page, name=name)


def read(store: Store, tenant_id: str, workflow_id: str) -> Workflow:
    return store.workflows.get(tenant_id, workflow_id)


def replace(
    store: Store,
    tenant_id: str,
    workflow_id: str,
    name: str,
    spec: WorkflowSpec,
    *,
    if_version: Collection[int] | None,
) -> Workflow:
    """A new version (if still at one of ``if_version``, when given)."""
    return store.workflows.replace(tenant_id, workflow_id, name, spec, if_version=if_version)


def delete(store: Store, tenant_id: str, workflow_id: str) -> None:
    store.workflows.delete(tenant_id, workflow_id)


def start_run(
    store: Store,
    tenant_id: str,
    workflow_id: str,
    params: dict[str, Any],
    *,
    idempotency_key: str | None,
) -> tuple[WorkflowRun, bool]:
    """A run of the current version, and whether it is new (a repeated key: not)."""
    return store.workflow_runs.start(
        tenant_id, workflow_id, params, idempotency_key=idempotency_key
    )


def list_runs(
    store: Store,
    tenant_id: str,
    *,
    workflow_id: str | None,
    state: WorkflowRunState | None,
    page: PageRequest,
) -> Page[WorkflowRun]:
    return store.workflow_runs.list(
        tenant_id,
        workflow_id=workflow_id,
        state=state,
        page=page,
    )


def read_run(store: Store, tenant_id: str, workflow_run_id: str) -> WorkflowRunDetail:
    return store.workflow_runs.get(tenant_id, workflow_run_id)


def decide_task(
    store: Store,
    caller: Principal,
    workflow_run_id: str,
    task: str,
    *,
    approved: bool,
    comment: str | None,
) -> WorkflowRunDetail:
    """An operator's decision on a waiting approval task; the workflow run as it is after."""
    store.workflow_runs.decide(
        caller.tenant_id, workflow_run_id, task, approved=approved, actor=caller.actor,
        comment=comment,
    )  # fmt: skip
    return read_run(store, caller.tenant_id, workflow_run_id)


def cancel_run(store: Store, caller: Principal, workflow_run_id: str) -> WorkflowRun:
    return store.workflow_runs.cancel(caller.tenant_id, workflow_run_id, actor=caller.actor)


def suspend_run(store: Store, caller: Principal, workflow_run_id: str) -> WorkflowRun:
    return store.workflow_runs.suspend(caller.tenant_id, workflow_run_id, actor=caller.actor)


def resume_run(store: Store, caller: Principal, workflow_run_id: str) -> WorkflowRun:
    return store.workflow_runs.resume(caller.tenant_id, workflow_run_id, actor=caller.actor)


def repair_run(
    store: Store,
    tenant_id: str,
    workflow_run_id: str,
    *,
    token: int,
    tasks: Sequence[str] | None,
    dependents: bool,
) -> WorkflowRun:
    """Tasks of an ended run again, in place; ``token`` as last read (a second repair from
    the same reading is refused)."""
    return store.workflow_runs.repair(
        tenant_id, workflow_run_id, token=token, tasks=tasks, dependents=dependents
    )
