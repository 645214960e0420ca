"""Job definitions, scoped by tenant: another tenant's job is simply not found.

A job carries a version, 1 when created and one more on every change. A change is read,
decided and written in one transaction (``edit``): a concurrent edit is never lost.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Connection, delete, func, insert, select

from herder.clock import Clock, epoch_ms
from herder.domain.artifacts import ARCHIVE_MEDIA_TYPES, IMAGE_ARCHIVE_MEDIA_TYPES
from herder.domain.errors import Conflict, Invalid
from herder.domain.ids import new_id
from herder.domain.images import check_image_allowed
from herder.domain.jobs import DEFAULT_MAX_CHECKPOINT_MB, JobSpec, Runtime
from herder.domain.limits import fielded
from herder.domain.listings import PageRequest
from herder.domain.models import Job, Page
from herder.domain.states import TERMINAL_RUN_STATES
from herder.store.alerts.notices import drop_job_notices
from herder.store.database import Database
from herder.store.limits import check_references as check_limits
from herder.store.named import NamedRows
from herder.store.pools import check_usable
from herder.store.schema import artifacts, job_labels, jobs, runs, schedules, workflows
from herder.store.secrets import SecretRepository
from herder.store.triggers import refuse_if_triggered


def _job(row: Any) -> Job:
    return Job(
        id=row.id,
        name=row.name,
        spec=JobSpec.model_validate(row.spec),
        created_at=row.created_at,
        updated_at=row.updated_at,
        version=row.version,
        created_by=row.created_by,
    )


def _refuse_if_used(connection: Connection, tenant_id: str, job_name: str, doing: str) -> None:
    """Workflows and triggers name jobs by name: a job one of them (a workflow's current
    version) runs keeps it."""
    rows = connection.execute(
        select(workflows.c.name, workflows.c.spec).where(workflows.c.tenant_id == tenant_id)
    )
    using = sorted(
        row.name for row in rows if any(task.get("job") == job_name for task in row.spec["tasks"])
    )
    if using:
        raise Conflict(
            f"job {job_name!r} is run by workflow(s) {', '.join(using)}; change them before {doing}"
        )
    refuse_if_triggered(connection, tenant_id, "job", job_name, doing)


class JobEdit(NamedTuple):
    """What a job becomes: decided by the caller from the job as it is now."""

    name: str
    spec: JobSpec


ROWS = NamedRows(jobs, "job", _job, found_by=("id",))


def jobs_named(connection: Connection, tenant_id: str, names: Collection[str]) -> dict[str, Job]:
    """The tenant's jobs of these names (name → job), read in one query inside a caller's
    transaction (an event's triggers name their jobs)."""
    rows = connection.execute(
        select(jobs).where(jobs.c.tenant_id == tenant_id, jobs.c.name.in_(sorted(names)))
    )
    return {row.name: _job(row) for row in rows}


class JobRepository:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        secrets: SecretRepository,
        max_checkpoint_mb: int = DEFAULT_MAX_CHECKPOINT_MB,
        image_registries: tuple[str, ...] = (),
    ) -> None:
        self._db = database
        self._clock = clock
        self._secrets = secrets
        self._max_checkpoint_mb = max_checkpoint_mb  # the operator's (HERDER_MAX_CHECKPOINT_MB)
        self._image_registries = image_registries  # the operator's (HERDER_IMAGE_REGISTRIES)

    def create(
        self, tenant_id: str, name: str, spec: JobSpec, *, created_by: str | None = None
    ) -> Job:
        now = self._clock.now()
        job_id = new_id("job", epoch_ms(now))
        self._check_checkpoint(spec)
        with self._db.write() as connection:
            self._check_artifact(connection, tenant_id, spec)
            self._secrets.check_references(connection, tenant_id, spec.secrets)
            check_usable(connection, tenant_id, {"pool": spec.pool})
            check_limits(connection, tenant_id, fielded(spec.limits))
            columns = {"spec": spec.model_dump(mode="json"), "created_by": created_by}
            job = ROWS.insert(connection, tenant_id, job_id, name, columns, now)
            self._write_labels(connection, tenant_id, job_id, spec.labels)
        return job

    def get(self, tenant_id: str, job_id: str) -> Job:
        with self._db.read() as connection:
            return self.get_within(connection, tenant_id, job_id)

    def get_within(
        self, connection: Connection, tenant_id: str, job_id: str, *, for_update: bool = False
    ) -> Job:
        """The job, read inside a caller's transaction (a submit or a fire reads what it
        runs in the same unit of work that queues it)."""
        return _job(ROWS.row(connection, tenant_id, job_id, for_update=for_update))

    def get_many_within(
        self, connection: Connection, keys: Collection[tuple[str, str]]
    ) -> dict[tuple[str, str], Job]:
        """The jobs of these (tenant, job id) pairs that exist, read in one query inside a
        caller's transaction (a batch of fires reads what it runs where it queues it)."""
        if not keys:
            return {}
        rows = connection.execute(select(jobs).where(jobs.c.id.in_({job for _, job in keys})))
        return {
            (row.tenant_id, row.id): _job(row) for row in rows if (row.tenant_id, row.id) in keys
        }

    def list(
        self,
        tenant_id: str,
        *,
        page: PageRequest = PageRequest(),
        name: str | None = None,
        labels: dict[str, str] | None = None,
        created_by: str | None = None,
    ) -> Page[Job]:
        """Newest first. A label is looked for among the tenant's own labels (its index is
        led by the tenant), so the filter costs what the tenant's jobs cost, whatever the
        cell holds."""
        labelled: list[ColumnElement[bool]] = [
            select(job_labels.c.job_id)
            .where(
                job_labels.c.tenant_id == tenant_id,
                job_labels.c.job_id == jobs.c.id,
                job_labels.c.key == key,
                job_labels.c.value == value,
            )
            .exists()
            for key, value in (labels or {}).items()
        ]
        if created_by is not None:
            labelled.append(jobs.c.created_by == created_by)
        with self._db.read() as connection:
            return ROWS.page(connection, tenant_id, page, name=name, where=labelled)

    def edit(self, tenant_id: str, job_id: str, change: Callable[[Job], JobEdit]) -> Job:
        """Read, decide and write in one transaction: ``change`` gets the job as it is, held
        against other edits until commit, and says what it becomes; the version goes up by
        one. Queued runs keep the spec they were submitted with."""

        def columns(row: Any) -> dict[str, Any]:
            current = _job(row)
            name, spec = change(current)
            if name != current.name:
                _refuse_if_used(connection, tenant_id, current.name, "renaming it")
            if spec != current.spec:
                self._check_checkpoint(spec)
                self._check_artifact(connection, tenant_id, spec)
                self._secrets.check_references(connection, tenant_id, spec.secrets)
            if spec.pool != current.spec.pool:  # a job whose pool went may change otherwise
                check_usable(connection, tenant_id, {"pool": spec.pool})
            if spec.limits != current.spec.limits:
                check_limits(connection, tenant_id, fielded(spec.limits))
            self._secrets.check_references(connection, tenant_id, spec.secrets)
            relabelled.append(spec.labels != current.spec.labels)
            return {"name": name, "spec": spec.model_dump(mode="json")}

        relabelled: list[bool] = []
        with self._db.write() as connection:
            job = ROWS.edit(connection, tenant_id, job_id, columns, self._clock.now())
            if any(relabelled):
                connection.execute(delete(job_labels).where(job_labels.c.job_id == job.id))
                self._write_labels(connection, tenant_id, job.id, job.spec.labels)
        return job

    def delete(self, tenant_id: str, job_id: str) -> None:
        """Remove the definition; its runs stay in history, its notices (``herder job
        notify``) go with it. Refused while runs are active, or schedules or workflows name
        it."""
        with self._db.write() as connection:
            job = self.get_within(connection, tenant_id, job_id)
            active = connection.execute(
                select(func.count())
                .select_from(runs)
                .where(
                    runs.c.tenant_id == tenant_id,
                    runs.c.job_id == job_id,
                    runs.c.state.not_in([str(state) for state in TERMINAL_RUN_STATES]),
                )
            ).scalar_one()
            if active:
                raise Conflict(
                    f"job {job_id} has {active} active run(s); cancel them before deleting it"
                )
            scheduled = connection.execute(
                select(func.count()).select_from(schedules).where(schedules.c.job_id == job_id)
            ).scalar_one()
            if scheduled:
                raise Conflict(
                    f"job {job_id} has {scheduled} schedule(s); delete them before deleting it"
                )
            _refuse_if_used(connection, tenant_id, job.name, "deleting it")
            drop_job_notices(connection, tenant_id, job_id, self._clock.now())
            connection.execute(delete(job_labels).where(job_labels.c.job_id == job_id))
            connection.execute(delete(jobs).where(jobs.c.id == job_id))

    @staticmethod
    def _write_labels(
        connection: Connection, tenant_id: str, job_id: str, labels: dict[str, str]
    ) -> None:
        if labels:
            connection.execute(
                insert(job_labels),
                [
                    {"tenant_id": tenant_id, "job_id": job_id, "key": key, "value": value}
                    for key, value in labels.items()
                ],
            )

    def _check_checkpoint(self, spec: JobSpec) -> None:
        if spec.checkpoint_mb > self._max_checkpoint_mb:
            raise Invalid(
                f"checkpoint_mb is {spec.checkpoint_mb}; this server keeps checkpoints of at "
                f"most {self._max_checkpoint_mb} MiB (HERDER_MAX_CHECKPOINT_MB)",
                field="checkpoint_mb",
            )

    def _check_artifact(self, connection: Connection, tenant_id: str, spec: JobSpec) -> None:
        if spec.image is not None:
            check_image_allowed(spec.image, self._image_registries)
        if spec.artifact is None:
            return
        media_type = connection.execute(
            select(artifacts.c.media_type).where(
                artifacts.c.tenant_id == tenant_id, artifacts.c.sha256 == spec.artifact
            )
        ).scalar()
        if media_type is None:
            raise Invalid(
                f"artifact {spec.artifact} not found; upload it with POST /v1/artifacts first",
                field="artifact",
            )
        if spec.runtime is Runtime.ARCHIVE and media_type not in ARCHIVE_MEDIA_TYPES:
            raise Invalid(
                f"runtime archive needs a .tar.gz, .tar or .zip artifact; "
                f"{spec.artifact} is {media_type}",
                field="artifact",
            )
        if spec.runtime is Runtime.IMAGE and media_type not in IMAGE_ARCHIVE_MEDIA_TYPES:
            raise Invalid(
                "runtime image needs an image archive (docker save, or skopeo copy … "
                f"oci-archive:), a .tar or .tar.gz; {spec.artifact} is {media_type}",
                field="artifact",
            )
