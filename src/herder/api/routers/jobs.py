"""/v1/jobs: job definitions, and one-off runs of them.

A job's ``ETag`` is its version in quotes (``"3"``), sent with every job a GET, POST or PATCH
answers. A PATCH with ``If-Match`` applies only if the job is still at that version, else 412.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response, status

from herder.api.auth import Caller, StoreDep, Writer, check_overrides
from herder.api.creators import CreatedBy
from herder.api.etags import tagged, versions
from herder.api.openapi import ETAG_HEADER, patch_body, problems
from herder.api.queries import Paging
from herder.api.ratelimit import Submitter
from herder.api.schemas import JobCreate, RunCreate
from herder.app import jobs
from herder.app.actors import page_with_creator_names, with_creator_name
from herder.app.submit import submit
from herder.domain.errors import Invalid
from herder.domain.models import Job, Page, Run

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

IF_MATCH = (
    'the ETag of the job as last read, e.g. "3": change it only if it is still that version '
    "(else 412); several, comma-separated, or * for any"
)


def _labels(label: list[str]) -> dict[str, str]:
    pairs = {}
    for item in label:
        key, sep, value = item.partition("=")
        if not sep:
            raise Invalid(f"label filter {item!r} must look like key=value", field="label")
        pairs[key] = value
    return pairs


@router.post("", status_code=status.HTTP_201_CREATED, responses={201: ETAG_HEADER, **problems(409)})
def create_job(body: JobCreate, caller: Writer, store: StoreDep, response: Response) -> Job:
    job = store.jobs.create(caller.tenant_id, body.name, body.spec(), created_by=caller.actor)
    return tagged(with_creator_name(store, caller.tenant_id, job), response)


@router.get("")
def list_jobs(
    caller: Caller,
    store: StoreDep,
    page: Paging,
    name: str | None = None,
    label: Annotated[list[str], Query(description="key=value; repeat to AND")] = [],  # noqa: B006
    created_by: CreatedBy = None,
) -> Page[Job]:
    found = store.jobs.list(
        caller.tenant_id, page=page, name=name, labels=_labels(label), created_by=created_by
    )
    return page_with_creator_names(store, caller.tenant_id, found)


@router.get("/{job_id}", responses={200: ETAG_HEADER})
def get_job(job_id: str, caller: Caller, store: StoreDep, response: Response) -> Job:
    job = store.jobs.get(caller.tenant_id, job_id)
    return tagged(with_creator_name(store, caller.tenant_id, job), response)


@router.patch(
    "/{job_id}",
    responses={200: ETAG_HEADER, **problems(409, 412)},
    openapi_extra=patch_body(JobCreate),
)
def update_job(
    job_id: str,
    caller: Writer,
    store: StoreDep,
    response: Response,
    changes: Annotated[dict[str, Any], Body(examples=[{"timeout_seconds": 600}])],
    if_match: Annotated[str | None, Header(max_length=1024, description=IF_MATCH)] = None,
) -> Job:
    """Change some fields; the rest keep their values. Runs already submitted are unchanged.
    Without ``If-Match`` the change applies to the job as it is when it is written."""
    job = jobs.update(store, caller.tenant_id, job_id, changes, if_version=versions(if_match))
    return tagged(with_creator_name(store, caller.tenant_id, job), response)


@router.delete("/{job_id}", status_code=status.HTTP_204_NO_CONTENT, responses=problems(409))
def delete_job(job_id: str, caller: Writer, store: StoreDep) -> Response:
    # the definition goes, its runs stay; refused while runs are active or others name it
    store.jobs.delete(caller.tenant_id, job_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{job_id}/runs", status_code=status.HTTP_201_CREATED, responses=problems(409))
def start_run(
    job_id: str,
    caller: Submitter,
    store: StoreDep,
    response: Response,
    body: RunCreate | None = None,
    idempotency_key: Annotated[
        str | None, Header(max_length=255, description="the same key returns the same run")
    ] = None,
) -> Run:
    """Queue a one-off run; 429 with Retry-After when the tenant submits faster than its
    ``submit_rate_per_second`` quota allows. An operator sets only the job's declared
    parameters (``params``); ``args`` and ``env`` need a developer (403)."""
    body = body or RunCreate()
    overrides = body.overrides()
    check_overrides(caller, overrides)
    run, created = submit(
        store,
        caller.tenant_id,
        job_id,
        overrides,
        idempotency_key=idempotency_key,
        actor=caller.actor,
        as_schedule=body.schedule_id,
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/runs/{run.id}"
    return run
