"""A job's PATCH: some fields changed, the rest kept, merged inside the writing transaction."""

from __future__ import annotations

from collections.abc import Mapping

from herder.domain.errors import Invalid, StaleVersion
from herder.domain.jobs import JobSpec, check_job_name
from herder.domain.models import Job
from herder.domain.patches import check_fields, patched
from herder.store.jobs import JobEdit
from herder.store.store import Store

FIELDS = frozenset(JobSpec.model_fields) | {"name"}  # what a PATCH may change


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
    check_fields(changes, FIELDS)
    spec_changes = {field: value for field, value in changes.items() if field != "name"}
    name = _new_name(changes["name"]) if "name" in changes else None

    def change(job: Job) -> JobEdit:
        if if_version is not None and job.version not in if_version:
            raise StaleVersion(
                f"job {job_id} is at version {job.version} now, not the one this change was "
                "made against: read it again (GET) and apply the change to what it is now",
                current_version=job.version,
            )
        spec = (
            patched(JobSpec, job.spec.model_dump(mode="json"), spec_changes)
            if spec_changes
            else job.spec
        )
        return JobEdit(name or job.name, spec)

    return store.jobs.edit(tenant_id, job_id, change)


def _new_name(name: object) -> str:
    if not isinstance(name, str):
        raise Invalid("name must be a string (it cannot be cleared)", field="name")
    try:
        return check_job_name(name)
    except ValueError as error:
        raise Invalid(str(error), field="name") from error
