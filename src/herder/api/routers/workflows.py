"""/v1/workflows and /v1/workflow-runs: DAGs of jobs, their runs, cancel, suspend, resume
and repair; a workflow's YAML checked as it is written, saving nothing, and a workflow read
back as YAML (the dashboard's editor).

A workflow's ``ETag`` is its version in quotes; a PUT with ``If-Match`` replaces it only if
it is still at that version (else 412). A workflow run pins the version it started with.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response, status
from pydantic import BaseModel, ConfigDict, Field

from herder.api.auth import Caller, Operator, StoreDep, Writer
from herder.api.creators import CreatedBy
from herder.api.etags import tagged, versions
from herder.api.openapi import ETAG_HEADER, problems
from herder.api.queries import Paging
from herder.api.ratelimit import Submitter
from herder.api.schemas import RepairRequest, WorkflowCreate, WorkflowRunCreate
from herder.app import workflow_drafts, workflows
from herder.app.actors import page_with_creator_names, with_creator_name
from herder.definitions.workflow_text import WorkflowCheck, as_yaml
from herder.domain.models import Page
from herder.domain.workflows.models import Workflow, WorkflowRun, WorkflowRunDetail
from herder.domain.workflows.progress import WorkflowRunState

router = APIRouter(tags=["workflows"])

IF_MATCH = (
    'the ETag of the workflow as last read, e.g. "3": replace it only if it is still that version'
)


@router.post(
    "/v1/workflows",
    status_code=status.HTTP_201_CREATED,
    responses={201: ETAG_HEADER, **problems(409)},
)
def create_workflow(
    body: WorkflowCreate, caller: Writer, store: StoreDep, response: Response
) -> Workflow:
    """Check the DAG whole (an order of its tasks exists; every job it names exists) and
    store it as version 1."""
    workflow = store.workflows.create(
        caller.tenant_id, body.name, body.spec(), created_by=caller.actor
    )
    response.headers["Location"] = f"/v1/workflows/{workflow.id}"
    return tagged(with_creator_name(store, caller.tenant_id, workflow), response)


class WorkflowText(BaseModel):
    model_config = ConfigDict(extra="forbid")

    yaml: str = Field(description="one workflow as YAML: name, tasks, params, …")
    workflow_id: str | None = Field(
        default=None, max_length=64, description="the workflow being edited: its name is its own"
    )


class WorkflowSource(BaseModel):
    id: str
    name: str
    version: int
    yaml: str = Field(description="the workflow as YAML, as `herder export` writes it")


@router.post("/v1/workflows/check", responses=problems(413))
def check_workflow(body: WorkflowText, caller: Writer, store: StoreDep) -> WorkflowCheck:
    """Check a workflow's YAML as creating it would (the DAG whole; every job, pool and limit
    it names exists; its name is free) and save nothing: each problem at its line, the graph
    of what parsed, and when valid the body ``POST /v1/workflows`` takes. At most 256 KiB
    (413)."""
    return workflow_drafts.check_draft(store, caller.tenant_id, body.yaml, body.workflow_id)


@router.get("/v1/workflows")
def list_workflows(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    name: str | None = None,
    created_by: CreatedBy = None,
) -> Page[Workflow]:
    found = store.workflows.list(caller.tenant_id, page=page, name=name, created_by=created_by)
    return page_with_creator_names(store, caller.tenant_id, found)


@router.get("/v1/workflows/{workflow_id}", responses={200: ETAG_HEADER})
def get_workflow(workflow_id: str, caller: Caller, store: StoreDep, response: Response) -> Workflow:
    workflow = store.workflows.get(caller.tenant_id, workflow_id)
    return tagged(with_creator_name(store, caller.tenant_id, workflow), response)


@router.get("/v1/workflows/{workflow_id}/source", responses={200: ETAG_HEADER})
def get_workflow_source(
    workflow_id: str, caller: Caller, store: StoreDep, response: Response
) -> WorkflowSource:
    """The workflow's current version as YAML (for the dashboard's editor), its ETag the
    workflow's."""
    workflow = tagged(store.workflows.get(caller.tenant_id, workflow_id), response)
    return WorkflowSource(
        id=workflow.id, name=workflow.name, version=workflow.version, yaml=as_yaml(workflow)
    )


@router.put("/v1/workflows/{workflow_id}", responses={200: ETAG_HEADER, **problems(409, 412)})
def replace_workflow(
    workflow_id: str,
    body: WorkflowCreate,
    caller: Writer,
    store: StoreDep,
    response: Response,
    if_match: Annotated[str | None, Header(max_length=1024, description=IF_MATCH)] = None,
) -> Workflow:
    """A new version; runs already started keep the version they pinned."""
    workflow = store.workflows.replace(
        caller.tenant_id,
        workflow_id,
        body.name,
        body.spec(),
        if_version=versions(if_match),
    )
    return tagged(with_creator_name(store, caller.tenant_id, workflow), response)


@router.delete(
    "/v1/workflows/{workflow_id}", status_code=status.HTTP_204_NO_CONTENT, responses=problems(409)
)
def delete_workflow(workflow_id: str, caller: Writer, store: StoreDep) -> Response:
    store.workflows.delete(caller.tenant_id, workflow_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/v1/workflows/{workflow_id}/runs",
    status_code=status.HTTP_201_CREATED,
    responses=problems(409, 429),
)
def start_workflow_run(
    workflow_id: str,
    caller: Submitter,
    store: StoreDep,
    response: Response,
    body: WorkflowRunCreate | None = None,
    idempotency_key: Annotated[
        str | None, Header(max_length=255, description="the same key returns the same run")
    ] = None,
) -> WorkflowRun:
    """Start a run of the workflow's current version: its first tasks are queued at once.
    Under ``max_active_runs`` it queues (``concurrency: queue``) or is refused (``forbid``)."""
    params = (body or WorkflowRunCreate()).params
    run, created = workflows.start(
        store, caller.tenant_id, workflow_id, params, idempotency_key=idempotency_key,
        actor=caller.actor,
    )  # fmt: skip
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/workflow-runs/{run.id}"
    return run


@router.get("/v1/workflow-runs")
def list_workflow_runs(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    created_by: CreatedBy,
    workflow_id: str | None = None,
    state: WorkflowRunState | None = None,
) -> Page[WorkflowRun]:
    found = store.workflow_runs.list(
        caller.tenant_id,
        workflow_id=workflow_id,
        state=state,
        created_by=created_by,
        page=page,
    )
    return page_with_creator_names(store, caller.tenant_id, found)


@router.get("/v1/workflow-runs/{workflow_run_id}")
def get_workflow_run(workflow_run_id: str, caller: Caller, store: StoreDep) -> WorkflowRunDetail:
    """The run with every task instance: its run, or, pending, why it waits."""
    found = store.workflow_runs.get(caller.tenant_id, workflow_run_id)
    return with_creator_name(store, caller.tenant_id, found)


@router.post("/v1/workflow-runs/{workflow_run_id}/cancel", responses=problems(409))
def cancel_workflow_run(workflow_run_id: str, caller: Operator, store: StoreDep) -> WorkflowRun:
    """Pending and queued tasks are cancelled at once; running ones are stopped by their
    workers, and the run ends ``cancelled`` when the last has ended."""
    return workflows.cancel(store, caller.tenant_id, workflow_run_id, actor=caller.actor)


@router.post("/v1/workflow-runs/{workflow_run_id}/suspend", responses=problems(409))
def suspend_workflow_run(workflow_run_id: str, caller: Operator, store: StoreDep) -> WorkflowRun:
    """Its active task runs are suspended — running ones stopped by their workers like a
    preemption, with the job's grace to save a checkpoint — and no task starts until it is
    resumed; it keeps its ``max_active_runs`` slot. A suspended run is answered as it is; a
    queued, cancelling or ended one is a 409."""
    return workflows.suspend(store, caller.tenant_id, workflow_run_id, actor=caller.actor)


@router.post("/v1/workflow-runs/{workflow_run_id}/resume", responses=problems(409))
def resume_workflow_run(workflow_run_id: str, caller: Operator, store: StoreDep) -> WorkflowRun:
    """Its suspended task runs are queued again and every task that became ready while it
    was suspended starts. A run that is not suspended is a 409."""
    return workflows.resume(store, caller.tenant_id, workflow_run_id, actor=caller.actor)


@router.post("/v1/workflow-runs/{workflow_run_id}/repair", responses=problems(409, 429))
def repair_workflow_run(
    workflow_run_id: str, body: RepairRequest, caller: Submitter, store: StoreDep
) -> WorkflowRun:
    """Run tasks of an ended run again, in place (history kept). ``repair`` is the run's
    latest-repair token as last read: a second repair from the same reading is a 409. One
    submission, as starting a workflow run is, counted against the tenant's rate (429)."""
    return workflows.repair_run(
        store, caller.tenant_id, workflow_run_id, token=body.repair, tasks=body.tasks,
        dependents=body.dependents,
    )  # fmt: skip
