"""Request and response bodies that are not domain records."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
)

from herder.domain.history import MAX_RETENTION_DAYS, MIN_RETENTION_DAYS
from herder.domain.jobs import JobSpec, Priority, check_job_name
from herder.domain.labels import check_pool_reference
from herder.domain.limits import LimitSpec, check_limit_name
from herder.domain.models import ApiKey, LogChunk, Role
from herder.domain.overrides import RunOverrides, RunRequest
from herder.domain.pools import PoolSpec, check_pool_name
from herder.domain.tenants import DefaultPoolChange, TenantQuotas
from herder.domain.workflows.spec import WorkflowSpec

_ISO_8601 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]")


def _iso_text(value: object) -> object:
    if isinstance(value, datetime) or (isinstance(value, str) and _ISO_8601.match(value)):
        return value
    raise ValueError("give a time as ISO 8601 text with an offset, e.g. 2026-12-01T00:00:00Z")


# A time as the OpenAPI document says (``date-time`` text): pydantic alone would also take
# a number (or numeric text) as seconds since 1970.
IsoTime = Annotated[AwareDatetime, BeforeValidator(_iso_text)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobCreate(JobSpec):
    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_job_name(name)

    def spec(self) -> JobSpec:
        return JobSpec.model_validate(self.model_dump(exclude={"name"}))


class RunCreate(RunOverrides):
    schedule_id: str | None = Field(
        default=None,
        description="count this run as one of that schedule (of this job), under its "
        "concurrency policy: 409 under forbid while one of its runs is active; under "
        "replace the active run is cancelled",
    )

    def overrides(self) -> RunOverrides:
        return RunOverrides.model_validate(self.model_dump(exclude={"schedule_id"}))


MAX_BATCH_RUNS = 1000


class RunSubmission(RunOverrides):
    """One run of a batch: a job and, like ``POST /v1/jobs/{id}/runs``, its overrides and
    an idempotency key."""

    job_id: Annotated[str, Field(min_length=1, max_length=64)]
    idempotency_key: Annotated[
        str | None, Field(min_length=1, max_length=255, description="the same key, the same run")
    ] = None

    def request(self) -> RunRequest:
        overrides = RunOverrides.model_validate(
            self.model_dump(exclude={"job_id", "idempotency_key"})
        )
        return RunRequest(self.job_id, overrides, self.idempotency_key)


class PriorityChange(_Body):
    priority: Priority


class RunBatch(_Body):
    runs: Annotated[list[RunSubmission], Field(min_length=1, max_length=MAX_BATCH_RUNS)]


class Submission(BaseModel):
    """One run's answer, in the order asked: ``status`` 201 made it, 200 found the run its
    idempotency key made before; otherwise a problem of this run alone (404 its job is
    unknown, 409 its key was used for another job) with ``title``, ``detail`` and ``field``
    (``runs.i.…``, as request validation names fields)."""

    status: int
    run_id: str | None = None
    title: str | None = None
    detail: str | None = None
    field: str | None = None


class RunBatchResult(BaseModel):
    created: int
    items: list[Submission]


class TenantCreate(_Body):
    name: Annotated[str, Field(min_length=1, max_length=128)]
    weight: Annotated[int, Field(ge=1, le=1000)] = 1
    quotas: TenantQuotas = TenantQuotas()  # none: unlimited


class PoolCreate(PoolSpec):
    name: str = Field(description="how jobs, runs and `herder worker --pool` name it")

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_pool_name(name)

    def spec(self) -> PoolSpec:
        return PoolSpec.model_validate(self.model_dump(exclude={"name"}))


class LimitCreate(LimitSpec):
    name: str = Field(description="how jobs, workflow tasks and schedules name it")

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_limit_name(name)

    def spec(self) -> LimitSpec:
        return LimitSpec.model_validate(self.model_dump(exclude={"name"}))


class KeyCreate(_Body):
    role: Role = Role.DEVELOPER
    name: Annotated[str, Field(min_length=1, max_length=128)] = "api key"
    expires_at: Annotated[
        IsoTime | None, Field(description="when the key stops working (default: never)")
    ] = None


class CreatedSecret(BaseModel):
    id: str
    token: str  # shown once


class CreatedKey(CreatedSecret):
    name: str
    role: Role
    expires_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey, token: str) -> CreatedKey:
        return cls(id=key.id, token=token, name=key.name, role=key.role, expires_at=key.expires_at)


class LogsResponse(BaseModel):
    attempt: int | None
    chunks: list[LogChunk]
    next_after: int
    complete: bool  # no more output will come for this attempt


class TenantUpdate(_Body):
    """PATCH semantics: an absent field keeps its value. Inside ``quotas`` each given field
    replaces the stored one and an explicit null clears it (unlimited); ``"quotas": null``
    clears them all; ``"default_pool": null`` sends its runs back to the shared fleet."""

    weight: Annotated[int, Field(ge=1, le=1000, description="fair-share weight")] | None = None
    quotas: TenantQuotas | None = None
    retention_days: (
        Annotated[
            int,
            Field(
                ge=MIN_RETENTION_DAYS,
                le=MAX_RETENTION_DAYS,
                description="days its runs, logs and events are kept (default 1825)",
            ),
        ]
        | None
    ) = None

    default_pool: Annotated[str | None, AfterValidator(check_pool_reference)] = Field(
        default=None,
        description="the pool its runs that name none go to: one it has a share in; "
        "null: the shared fleet (docs/pools.md)",
    )

    @field_validator("weight")
    @classmethod
    def _weight_stays(cls, weight: int | None) -> int | None:
        if weight is None:
            raise ValueError("weight cannot be cleared; give a number from 1 to 1000")
        return weight

    @field_validator("retention_days")
    @classmethod
    def _retention_stays(cls, days: int | None) -> int | None:
        if days is None:
            raise ValueError("retention_days cannot be cleared; give a number from 1 to 1825")
        return days

    def default_pool_change(self) -> DefaultPoolChange | None:
        if "default_pool" not in self.model_fields_set:
            return None
        return DefaultPoolChange(self.default_pool)

    def quota_changes(self) -> dict[str, object] | None:
        if "quotas" not in self.model_fields_set:
            return None
        if self.quotas is None:
            return dict.fromkeys(TenantQuotas.model_fields)
        return {name: getattr(self.quotas, name) for name in self.quotas.model_fields_set}


class WorkflowCreate(WorkflowSpec):
    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_job_name(name)

    def spec(self) -> WorkflowSpec:
        return WorkflowSpec.model_validate(self.model_dump(exclude={"name"}))


class WorkflowRunCreate(_Body):
    params: dict[str, JsonValue] = Field(
        default={}, description="values for the workflow's parameters (the rest keep defaults)"
    )


class RepairRequest(_Body):
    repair: int = Field(ge=0, description="the workflow run's repair number as last read")
    tasks: Annotated[list[str], Field(max_length=1000)] | None = Field(
        default=None,
        description="the tasks to run again (default: every task that did not succeed or skip)",
    )
    dependents: bool = Field(default=False, description="run everything downstream again too")
