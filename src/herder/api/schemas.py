"""Request and response bodies that are not domain records."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from herder.domain.jobs import Capacity, JobSpec, RunOverrides, check_job_name
from herder.domain.models import Assignment, LogChunk, Role
from herder.domain.states import AttemptState
from herder.domain.tenants import TenantQuotas
from herder.store.workers import RunningAttempt

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


class TenantCreate(_Body):
    name: Annotated[str, Field(min_length=1, max_length=128)]
    weight: Annotated[int, Field(ge=1, le=1000)] = 1
    quotas: TenantQuotas = TenantQuotas()  # none: unlimited


class KeyCreate(_Body):
    role: Role = Role.DEVELOPER
    name: Annotated[str, Field(min_length=1, max_length=128)] = "api key"


class CreatedSecret(BaseModel):
    id: str
    token: str  # shown once


class WorkerRegister(_Body):
    name: Annotated[str, Field(min_length=1, max_length=255)]
    capacity: Capacity
    max_slots: Annotated[int, Field(ge=1, le=10000)] = 256
    labels: dict[str, str] = {}
    version: str = "unknown"
    address: Annotated[str, Field(max_length=255, description="where gang peers reach it")] = ""


class WorkerRegistered(BaseModel):
    worker_id: str
    worker_secret: str = Field(
        description="shown once: every later call for this worker sends "
        "'Authorization: Bearer <worker_secret>' (the worker token alone is refused there)"
    )
    heartbeat_interval_seconds: float
    heartbeat_timeout_seconds: float  # silent longer than this, the worker is declared lost


class RunningAttemptBody(_Body):
    attempt_id: str
    attempt: int  # the fencing token


class HeartbeatRequest(_Body):
    running: list[RunningAttemptBody] = []
    # ended, but the report saying how has not been delivered yet: not lost
    finished: list[RunningAttemptBody] = []

    def attempts(self) -> list[RunningAttempt]:
        return [RunningAttempt(item.attempt_id, item.attempt) for item in self.running]

    def finished_attempts(self) -> list[RunningAttempt]:
        return [RunningAttempt(item.attempt_id, item.attempt) for item in self.finished]


class ClaimRequest(HeartbeatRequest):
    max_runs: Annotated[int, Field(ge=0, le=1000)] = 1
    wait_seconds: Annotated[float, Field(ge=0, le=60)] = 20.0


class Directives(BaseModel):
    cancel: list[str]
    drop: list[str]
    preempt: list[str] = []  # stop (SIGTERM, grace, SIGKILL) and report them preempted


class ClaimResponse(Directives):
    assignments: list[Assignment]


class LogReport(_Body):
    attempt_id: str
    attempt: int
    seq: Annotated[int, Field(ge=0)]
    stream: Annotated[str, Field(pattern="^(stdout|stderr|system)$")]
    data_b64: str


class ResourceUsage(_Body):
    cpu_user_seconds: Annotated[float, Field(ge=0)]
    cpu_system_seconds: Annotated[float, Field(ge=0)]
    max_rss_kb: Annotated[int, Field(ge=0)]


class CompletionReport(_Body):
    attempt_id: str
    attempt: int
    outcome: AttemptState
    exit_code: int | None = None
    reason: Annotated[str, Field(max_length=4096)] = ""
    usage: ResourceUsage | None = None

    @field_validator("outcome")
    @classmethod
    def _finished(cls, outcome: AttemptState) -> AttemptState:
        if outcome is AttemptState.RUNNING:
            raise ValueError("a completion reports how the attempt ended, not 'running'")
        return outcome


class Reports(_Body):
    logs: list[LogReport] = []
    completions: list[CompletionReport] = []


class AttemptLogs(_Body):
    worker_id: str
    chunks: list[LogReport]


class AttemptCompletion(_Body):
    worker_id: str
    completion: CompletionReport


class ReportResult(BaseModel):
    attempt_id: str
    status: int  # 200 applied, 409 refused (not the current attempt), 404 not this worker's
    detail: str


class ReportResults(BaseModel):
    results: list[ReportResult]


class LogsResponse(BaseModel):
    attempt: int | None
    chunks: list[LogChunk]
    next_after: int
    complete: bool  # no more output will come for this attempt


class TenantUpdate(_Body):
    """PATCH semantics: an absent field keeps its value. Inside ``quotas`` each given field
    replaces the stored one and an explicit null clears it (unlimited); ``"quotas": null``
    clears them all."""

    weight: Annotated[int, Field(ge=1, le=1000, description="fair-share weight")] | None = None
    quotas: TenantQuotas | None = None

    @field_validator("weight")
    @classmethod
    def _weight_stays(cls, weight: int | None) -> int | None:
        if weight is None:
            raise ValueError("weight cannot be cleared; give a number from 1 to 1000")
        return weight

    def quota_changes(self) -> dict[str, object] | None:
        if "quotas" not in self.model_fields_set:
            return None
        if self.quotas is None:
            return dict.fromkeys(TenantQuotas.model_fields)
        return {name: getattr(self.quotas, name) for name in self.quotas.model_fields_set}
