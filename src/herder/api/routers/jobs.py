"""/v1/jobs: job definitions, and one-off runs of them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response, status

from herder.api.auth import Caller, StoreDep, Writer
from herder.api.errors import client_input
from herder.api.openapi import patch_body, problems
from herder.api.ratelimit import Submitter
from herder.api.schemas import JobCreate, RunCreate
from herder.domain.errors import Invalid
from herder.domain.jobs import JobSpec, check_job_name
from herder.domain.models import Job, Page, Run

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _labels(label: list[str]) -> dict[str, str]:
    pairs = {}
    for item in label:
        key, sep, value = item.partition("=")
        if not sep:
            raise Invalid(f"label filter {item!r} must look like key=value", field="label")
        pairs[key] = value
    return pairs


@router.post("", status_code=status.HTTP_201_CREATED, responses=problems(409))
def create_job(body: JobCreate, caller: Writer, store: StoreDep) -> Job:
    return store.jobs.create(caller.tenant_id, body.name, body.spec())


@router.get("")
def list_jobs(
    caller: Caller,
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
    name: str | None = None,
    label: Annotated[list[str], Query(description="key=value; repeat to AND")] = [],  # noqa: B006
) -> Page[Job]:
    return store.jobs.list(
        caller.tenant_id, limit=limit, cursor=cursor, name=name, labels=_labels(label)
    )


@router.get("/{job_id}")
def get_job(job_id: str, caller: Caller, store: StoreDep) -> Job:
    return store.jobs.get(caller.tenant_id, job_id)


@router.patch("/{job_id}", responses=problems(409), openapi_extra=patch_body(JobCreate))
def update_job(
    job_id: str,
    caller: Writer,
    store: StoreDep,
    changes: Annotated[dict[str, Any], Body(examples=[{"timeout_seconds": 600}])],
) -> Job:
    """Change some fields; the rest keep their values. Runs already submitted are unchanged."""
    unknown = set(changes) - set(JobCreate.model_fields)
    if unknown:
        raise Invalid(f"unknown field(s): {', '.join(sorted(unknown))}", field=min(unknown))
    name = None
    if "name" in changes:
        name = changes.pop("name")
        if not isinstance(name, str):
            raise Invalid("name must be a string (it cannot be cleared)", field="name")
        try:
            check_job_name(name)
        except ValueError as error:
            raise Invalid(str(error), field="name") from error
    spec = None
    if changes:
        current = store.jobs.get(caller.tenant_id, job_id).spec.model_dump(mode="json")
        spec = client_input(JobSpec, {**current, **changes})
    return store.jobs.update(caller.tenant_id, job_id, name=name, spec=spec)


@router.delete("/{job_id}", status_code=status.HTTP_204_NO_CONTENT, responses=problems(409))
def delete_job(job_id: str, caller: Writer, store: StoreDep) -> Response:
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
    ``submit_rate_per_second`` quota allows."""
    body = body or RunCreate()
    run, created = store.runs.submit(
        caller.tenant_id,
        job_id,
        body.overrides(),
        idempotency_key=idempotency_key,
        actor=f"user:{caller.key_id}",
        as_schedule=body.schedule_id,
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["Location"] = f"/v1/runs/{run.id}"
    return run
