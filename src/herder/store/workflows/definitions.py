"""Workflow definitions, scoped by tenant, and every version each one had.

A definition is checked whole before it is stored (an order of its tasks exists; every job
it names exists), and every change adds a version: a workflow run pins the version it
started with, read back through ``spec_of`` (versions never change, so they are cached).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, delete, exc, func, insert, select, update

from herder.clock import Clock, epoch_ms
from herder.domain.errors import Conflict, Invalid, StaleVersion
from herder.domain.ids import new_id
from herder.domain.limits import fielded
from herder.domain.listings import PageRequest
from herder.domain.models import Page
from herder.domain.workflows.dag import Dag
from herder.domain.workflows.models import Workflow
from herder.domain.workflows.run_bound import check_run_bound
from herder.domain.workflows.spec import WorkflowSpec, check_messages, task_order
from herder.domain.workflows.states import ACTIVE_WORKFLOW_RUN_STATES
from herder.store.database import Database
from herder.store.limits import check_references as check_limits
from herder.store.owned import owned_row
from herder.store.pagination import page_of
from herder.store.pools import check_usable
from herder.store.schema import jobs, schedules, workflow_runs, workflow_versions, workflows
from herder.store.triggers import refuse_if_triggered

_CACHED_VERSIONS = 256
_versions: dict[tuple[str, int], Dag] = {}


def _workflow(row: Any) -> Workflow:
    spec = WorkflowSpec.model_validate(row.spec)
    return Workflow(
        id=row.id, name=row.name, version=row.version, tasks=spec.tasks, params=spec.params,
        max_active_runs=spec.max_active_runs, concurrency=spec.concurrency, deadline=spec.deadline,
        created_at=row.created_at, updated_at=row.updated_at, created_by=row.created_by,
    )  # fmt: skip


def _duplicate_name(name: str) -> Conflict:
    return Conflict(f"a workflow named {name!r} already exists", field="name")


def spec_of(connection: Connection, workflow_id: str, version: int) -> WorkflowSpec:
    """A version of a workflow, as a run pinned it."""
    return dag_of(connection, workflow_id, version).spec


def dag_of(connection: Connection, workflow_id: str, version: int) -> Dag:
    """A version of a workflow, ready for deciding its runs."""
    key = (workflow_id, version)
    dag = _versions.get(key)
    if dag is None:
        stored = connection.execute(
            select(workflow_versions.c.spec).where(
                workflow_versions.c.workflow_id == workflow_id,
                workflow_versions.c.version == version,
            )
        ).scalar_one()
        dag = Dag.of(WorkflowSpec.model_validate(stored))
        if len(_versions) >= _CACHED_VERSIONS:
            _versions.pop(next(iter(_versions)))
        _versions[key] = dag
    return dag


def check_jobs(connection: Connection, tenant_id: str, spec: WorkflowSpec) -> dict[str, Any]:
    """The jobs the tasks name (name → row), or ``Invalid`` naming the first task whose job
    does not exist or whose overrides name a pool the tenant may not use."""
    names = {task.job for task in spec.tasks if task.job is not None}
    found = {
        row.name: row
        for row in connection.execute(
            select(jobs.c.id, jobs.c.name, jobs.c.spec).where(
                jobs.c.tenant_id == tenant_id, jobs.c.name.in_(names)
            )
        )
    }
    for position, task in enumerate(spec.tasks):
        if task.job is not None and task.job not in found:
            raise Invalid(
                f"task {task.name!r} runs job {task.job!r}, and there is no job of that name",
                field=f"tasks.{position}.job",
            )
    pools = {
        f"tasks.{position}.overrides.pool": task.overrides.pool
        for position, task in enumerate(spec.tasks)
    }
    check_usable(connection, tenant_id, pools)
    check_limits(
        connection,
        tenant_id,
        [
            named
            for position, task in enumerate(spec.tasks)
            for named in fielded(task.limits, f"tasks.{position}.")
        ],
    )
    return found


class WorkflowRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def create(
        self, tenant_id: str, name: str, spec: WorkflowSpec, *, created_by: str | None = None
    ) -> Workflow:
        task_order(spec)
        check_messages(spec)
        check_run_bound(spec, spec.params)
        now = self._clock.now()
        workflow_id = new_id("wf", epoch_ms(now))
        with self._db.write() as connection:
            check_jobs(connection, tenant_id, spec)
            stored = spec.model_dump(mode="json")
            try:
                connection.execute(
                    insert(workflows).values(
                        id=workflow_id,
                        tenant_id=tenant_id,
                        name=name,
                        version=1,
                        spec=stored,
                        created_at=now,
                        updated_at=now,
                        created_by=created_by,
                    )
                )
            except exc.IntegrityError as error:
                raise _duplicate_name(name) from error
            self._add_version(connection, workflow_id, 1, stored, now)
            return self._get(connection, tenant_id, workflow_id)

    def replace(
        self,
        tenant_id: str,
        workflow_id: str,
        name: str,
        spec: WorkflowSpec,
        *,
        if_version: Collection[int] | None = None,
    ) -> Workflow:
        """The workflow becomes ``spec`` as a new version (if still at one of ``if_version``,
        when given). Runs already started keep the version they pinned."""
        task_order(spec)
        check_messages(spec)
        check_run_bound(spec, spec.params)
        now = self._clock.now()
        with self._db.write() as connection:
            current = self._get(connection, tenant_id, workflow_id, for_update=True)
            if if_version is not None and current.version not in if_version:
                raise StaleVersion(
                    f"workflow {workflow_id} is at version {current.version}; read it again",
                    current_version=current.version,
                )
            check_jobs(connection, tenant_id, spec)
            stored = spec.model_dump(mode="json")
            version = current.version + 1
            try:
                connection.execute(
                    update(workflows)
                    .where(workflows.c.id == workflow_id)
                    .values(name=name, version=version, spec=stored, updated_at=now)
                )
            except exc.IntegrityError as error:
                raise _duplicate_name(name) from error
            self._add_version(connection, workflow_id, version, stored, now)
            return self._get(connection, tenant_id, workflow_id)

    def get(self, tenant_id: str, workflow_id: str) -> Workflow:
        with self._db.read() as connection:
            return self._get(connection, tenant_id, workflow_id)

    def list(
        self,
        tenant_id: str,
        *,
        page: PageRequest = PageRequest(),
        name: str | None = None,
        created_by: str | None = None,
    ) -> Page[Workflow]:
        query = select(workflows).where(workflows.c.tenant_id == tenant_id)
        if name is not None:
            query = query.where(workflows.c.name == name)
        if created_by is not None:
            query = query.where(workflows.c.created_by == created_by)
        with self._db.read() as connection:
            return page_of(connection, query, workflows.c.id, _workflow, page)

    def delete(self, tenant_id: str, workflow_id: str) -> None:
        """Remove the definition; its runs and versions stay in history. Refused while it
        has active runs or schedules."""
        with self._db.write() as connection:
            current = self._get(connection, tenant_id, workflow_id, for_update=True)
            active = connection.execute(
                select(func.count())
                .select_from(workflow_runs)
                .where(
                    workflow_runs.c.workflow_id == workflow_id,
                    workflow_runs.c.state.in_(sorted(ACTIVE_WORKFLOW_RUN_STATES)),
                )
            ).scalar_one()
            if active:
                raise Conflict(
                    f"workflow {workflow_id} has {active} active run(s); cancel them before "
                    "deleting it"
                )
            scheduled = connection.execute(
                select(func.count())
                .select_from(schedules)
                .where(schedules.c.workflow_id == workflow_id)
            ).scalar_one()
            if scheduled:
                raise Conflict(
                    f"workflow {workflow_id} has {scheduled} schedule(s); delete them first"
                )
            refuse_if_triggered(connection, tenant_id, "workflow", current.name, "deleting it")
            connection.execute(delete(workflows).where(workflows.c.id == workflow_id))

    def _get(
        self, connection: Connection, tenant_id: str, workflow_id: str, *, for_update: bool = False
    ) -> Workflow:
        row = owned_row(
            connection, workflows, tenant_id, workflow_id, "workflow", for_update=for_update
        )
        return _workflow(row)

    @staticmethod
    def _add_version(
        connection: Connection, workflow_id: str, version: int, spec: Any, now: Any
    ) -> None:
        connection.execute(
            insert(workflow_versions).values(
                workflow_id=workflow_id, version=version, spec=spec, created_at=now
            )
        )
