"""Job definitions: create, read, list, change some fields with the rest kept (in one
transaction), and delete."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from herder.domain.errors import Invalid, StaleVersion
from herder.domain.jobs import JobSpec, check_job_name
from herder.domain.listings import PageRequest
from herder.domain.models import Job, Page
from herder.store.jobs import JobEdit
from herder.store.store import Store

FIELDS = frozenset(JobSpec.model_fields) | {"name"}  # what a PATCH may change


def create(store: Store, tenant_id: str, name: str, spec: JobSpec) -> Job:
    return store.jobs.create(tenant_id, name, spec)


def list_jobs(
    store: Store,
    tenant_id: str,
    *,
    page: PageRequest,
    name: str | None,
    labels: dict[str, str],
) -> Page[Job]:
    """Newest first; with ``labels``, the jobs that have every one of them."""
    return store.jobs.list(tenant_id, page=page, name=name, labels=labels)


def read(store: Store, tenant_id: str, job_id: str) -> Job:
    return store.jobs.get(tenant_id, job_id)


def delete(store: Store, tenant_id: str, job_id: str) -> None:
    """The definition goes; its runs stay in history. Refused while runs are active, or
    schedules or workflows name it."""
    store.jobs.delete(tenant_id, job_id)


def update(
    store: Store,
    tenant_id: str,
    job_id: str,
    changes: Mapping[str, object],
    *,
    if_version: frozenset[int] | None = None,
) -> Job:
    """Change the given fields; the rest keep their values. With ``if_version``, only if the
    job is still at one of those versions (else ``StaleVersion``: read it again). The merge
    happens inside the writing transaction, so a concurrent change is never lost."""
    unknown = set(changes) - FIELDS
    if unknown:
        raise Invalid(f"unknown field(s): {', '.join(sorted(unknown))}", field=min(unknown))
    spec_changes = {field: value for field, value in changes.items() if field != "name"}
    name = _new_name(changes["name"]) if "name" in changes else None

    def change(job: Job) -> JobEdit:
        if if_version is not None and job.version not in if_version:
            raise StaleVersion(
                f"job {job_id} is at version {job.version} now, not the one this change was "
                "made against: read it again (GET) and apply the change to what it is now",
                current_version=job.version,
            )
        spec = _merged(job.spec, spec_changes) if spec_changes else job.spec
        return JobEdit(name or job.name, spec)

    return store.jobs.edit(tenant_id, job_id, change)


def _new_name(name: object) -> str:
    if not isinstance(name, str):
        raise Invalid("name must be a string (it cannot be cleared)", field="name")
    try:
        return check_job_name(name)
    except ValueError as error:
        raise Invalid(str(error), field="name") from error


def _merged(spec: JobSpec, changes: Mapping[str, object]) -> JobSpec:
    try:
        return JobSpec.model_validate({**spec.model_dump(mode="json"), **changes})
    except ValidationError as error:
        raise Invalid.from_validation(error) from error
