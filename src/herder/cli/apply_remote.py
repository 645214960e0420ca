"""What ``herder apply`` and ``herder export`` do through the client: read the tenant's
definitions as ``Existing`` objects, check what only the server can check, and carry out a
plan's steps (hooks and triggers through ``apply_events``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from herder.cli import apply_events
from herder.cli.apply_events import EventKinds
from herder.cli.common import PAGE, every
from herder.cli.uploads import upload_progress
from herder.client import ApiError, HerderClient
from herder.definitions.documents import TARGETS
from herder.definitions.plan import Action, Existing, Step
from herder.definitions.problems import Kind, Problem, Where
from herder.domain.limits import LimitSpec
from herder.domain.schedules import ScheduleSpec

WORKFLOW_FIELDS = ("tasks", "params", "max_active_runs", "concurrency", "deadline")


def _workflows(client: HerderClient) -> Iterator[Existing]:
    for workflow in every(client.list_workflows):
        fields = _plain({key: getattr(workflow, key) for key in WORKFLOW_FIELDS})
        yield Existing(Kind.WORKFLOW, workflow.name, workflow.id, fields)


def _limits(client: HerderClient) -> Iterator[Existing]:
    for limit in every(client.list_limits):
        fields = limit.model_dump(mode="json", include=set(LimitSpec.model_fields))
        yield Existing(Kind.LIMIT, limit.name, limit.id, fields)


def _plain(value: Any) -> Any:
    """Pydantic values (a workflow's tasks) as the JSON the files compare with."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def read_existing(client: HerderClient) -> list[Existing]:
    """Every limit, job, workflow, schedule, hook and trigger of the tenant."""
    found: list[Existing] = list(_limits(client))
    names: dict[str, str] = {}  # job id → name
    cursor = None
    while True:
        jobs = client.list_jobs(limit=PAGE, cursor=cursor)
        for job in jobs.items:
            names[job.id] = job.name
            found.append(Existing(Kind.JOB, job.name, job.id, job.spec.model_dump(mode="json")))
        if jobs.next_cursor is None:
            break
        cursor = jobs.next_cursor
    workflow_names: dict[str, str] = {}
    for workflow in _workflows(client):
        workflow_names[workflow.id] = workflow.name or ""
        found.append(workflow)
    cursor = None
    while True:
        schedules = client.list_schedules(limit=PAGE, cursor=cursor)
        for schedule in schedules.items:
            workflow_id = schedule.workflow_id
            fields = {
                "job": names.get(schedule.job_id) if schedule.job_id else None,
                "workflow": workflow_names.get(workflow_id) if workflow_id else None,
                "paused": schedule.paused,
            } | schedule.spec.model_dump(mode="json")
            found.append(Existing(Kind.SCHEDULE, schedule.name, schedule.id, fields))
        if schedules.next_cursor is None:
            break
        cursor = schedules.next_cursor
    return found + list(apply_events.read_existing(client))


def server_problems(client: HerderClient, steps: list[Step]) -> list[Problem]:
    """What only the server can say, asked before anything changes: that an artifact named
    by its sha256 was uploaded, that a pool named is one the tenant may use, and that a
    schedule's expression fires (the server may refuse a seconds field)."""
    problems: list[Problem] = []
    usable: set[str] | None = None  # asked once, if anything names a pool
    for step in steps:
        definition = step.definition
        if step.action not in (Action.CREATE, Action.UPDATE) or definition is None:
            continue
        fields, where = definition.fields, definition.where
        named = step.kind is Kind.JOB and definition.artifact_file is None and fields["artifact"]
        if named and client.get_artifact(fields["artifact"]) is None:
            message = f"no artifact {fields['artifact']} on the server: upload it first"
            problems.append(Problem(message, _at(where, "artifact")))
        for field, pool in _pools_named(step.kind, fields).items():
            if usable is None:
                usable = client.usable_pools()
            if pool not in usable:
                message = f"no pool named {pool} that your tenant may use"
                problems.append(Problem(message, _at(where, field)))
        if step.kind is Kind.SCHEDULE:
            try:
                client.preview_cron(fields["cron"], fields["timezone"], count=1)
            except ApiError as error:
                problems.append(Problem(error.detail, _at(where, "cron")))
    return problems


def _pools_named(kind: Kind, fields: dict[str, Any]) -> dict[str, str]:
    """The pools a definition names, by field: a job's own, a schedule's or a workflow
    task's overrides'."""
    if kind not in (Kind.JOB, Kind.SCHEDULE, Kind.WORKFLOW):
        return {}
    if kind is Kind.JOB:
        named = {"pool": fields.get("pool")}
    elif kind is Kind.SCHEDULE:
        named = {"overrides.pool": (fields.get("overrides") or {}).get("pool")}
    else:
        named = {
            f"tasks[{index}].overrides.pool": (task.get("overrides") or {}).get("pool")
            for index, task in enumerate(fields.get("tasks") or [])
        }
    return {field: pool for field, pool in named.items() if pool}


def _at(where: Where, field: str) -> Where:
    return Where(where.file, where.line, f"{where.path}.{field}")


class Applier:
    """Carries out steps in order, keeping the ids of what it made (a schedule names the
    job or workflow it runs by id). A hook's secret is read from ``environment`` and a made
    one is said through ``say``."""

    def __init__(
        self,
        client: HerderClient,
        existing: list[Existing],
        environment: Mapping[str, str],
        say: Callable[[str], None],
    ):
        self._client = client
        self._ids = {(item.kind, item.known_as): item.id for item in existing}
        self._events = EventKinds(client, environment, say)
        self.uploaded = 0

    def upload(self, step: Step) -> None:
        """A job's local artifact, only if the server has no artifact with its content."""
        definition = step.definition
        if definition is None or definition.artifact_file is None:
            return
        sha256 = definition.fields["artifact"]
        if self._client.get_artifact(sha256) is not None:
            return
        with upload_progress(definition.artifact_file) as progress:
            artifact = self._client.upload_artifact(definition.artifact_file, progress=progress)
        if artifact.id != sha256:
            raise ApiError(409, "Changed", f"{definition.artifact_file} changed while applying")
        self.uploaded += 1

    def apply(self, step: Step) -> None:
        if step.action is Action.DELETE:
            self._delete(step.kind, self._id(step))
        elif step.action is Action.CREATE:
            self._create(step)
        elif step.action is Action.UPDATE:
            self._update(step)

    def _id(self, step: Step) -> str:
        return self._ids[(step.kind, step.name)]

    def _create(self, step: Step) -> None:
        assert step.definition is not None
        fields = step.definition.fields
        if step.kind in apply_events.KINDS:
            self._ids[(step.kind, step.name)] = self._events.create(step)
        elif step.kind is Kind.LIMIT:
            self._ids[(Kind.LIMIT, step.name)] = self._client.create_limit(step.name, fields).id
        elif step.kind is Kind.JOB:
            self._ids[(Kind.JOB, step.name)] = self._client.create_job(step.name, fields).id
        elif step.kind is Kind.WORKFLOW:
            workflow = self._client.create_workflow({"name": step.name, **fields})
            self._ids[(Kind.WORKFLOW, step.name)] = workflow.id
        else:
            spec = {"name": step.name, "paused": fields["paused"], **_schedule_spec(fields)}
            if fields["job"] is not None:
                target = {"job_id": self._ids[(Kind.JOB, fields["job"])]}
            else:
                target = {"workflow_id": self._ids[(Kind.WORKFLOW, fields["workflow"])]}
            schedule = self._client.create_schedule_of(target, spec)
            self._ids[(Kind.SCHEDULE, step.name)] = schedule.id

    def _update(self, step: Step) -> None:
        assert step.definition is not None
        fields, item_id = step.definition.fields, self._id(step)
        if step.kind in apply_events.KINDS:
            self._events.update(step, item_id)
        elif step.kind is Kind.LIMIT:
            self._client.update_limit(item_id, fields)
        elif step.kind is Kind.JOB:
            self._client.update_job(item_id, {"name": step.name, **fields})
        elif step.kind is Kind.WORKFLOW:
            self._client.update_workflow(item_id, {"name": step.name, **fields})
        elif step.replaces:
            self._delete(Kind.SCHEDULE, item_id)
            self._create(step)
        else:
            paths = {change.path.partition(".")[0].partition("[")[0] for change in step.changes}
            if paths - {"paused", *TARGETS}:
                self._client.update_schedule(item_id, _schedule_spec(fields))
            if "paused" in paths:
                self._client.pause_schedule(item_id, paused=fields["paused"])

    def _delete(self, kind: Kind, item_id: str) -> None:
        if kind in apply_events.KINDS:
            self._events.delete(kind, item_id)
        elif kind is Kind.LIMIT:
            self._client.delete_limit(item_id)
        elif kind is Kind.JOB:
            self._client.delete_job(item_id)
        elif kind is Kind.WORKFLOW:
            self._client.delete_workflow(item_id)
        else:
            self._client.delete_schedule(item_id)


def _schedule_spec(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if key in ScheduleSpec.model_fields}
