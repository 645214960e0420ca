"""What a job is: the validated specification of a program and how to run it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from herder.domain.deadlines import Deadline
from herder.domain.errors import FieldError, Invalid
from herder.domain.images import NEEDS_SANDBOX, ImageProblem, ImageReference, command_words
from herder.domain.labels import check_labels, check_pool_reference
from herder.domain.limits import LimitReference, LimitReferences, fielded, rendered_references
from herder.domain.parameters import Parameter, Parameters, refuse_name, resolve
from herder.domain.secrets import secret_name_problem
from herder.domain.variables import changes_startup, variable_name_problem

MAX_TIMEOUT_SECONDS = 24 * 60 * 60
DEFAULT_TIMEOUT_SECONDS = 60 * 60
MAX_STOP_GRACE_SECONDS = 600
DEFAULT_STOP_GRACE_SECONDS = 30
DEFAULT_CHECKPOINT_MB = 256
MAX_CHECKPOINT_MB = 65536  # the schema's bound; the operator's HERDER_MAX_CHECKPOINT_MB is lower
DEFAULT_MAX_CHECKPOINT_MB = 1024  # HERDER_MAX_CHECKPOINT_MB when unset
MIN_CHECKPOINT_INTERVAL_SECONDS = 10
MAX_CHECKPOINT_KEEP_DAYS = 3650
MAX_ARTIFACT_BYTES = 10 * 1024 * 1024
MAX_REPLICAS = 256
MAX_ARGS = 1024
MAX_STRING_CHARS = 65536  # one argument, one environment value, the command
MAX_SECRET_REFERENCES = 100
MAX_IMAGE_REFERENCE_CHARS = 1024

_JOB_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class Runtime(StrEnum):
    SHELL = "shell"  # /bin/sh -c command, args as $1…
    PYTHON = "python"  # a script artifact run by python3
    EXECUTABLE = "executable"  # a binary (or #! script) artifact run directly
    ARCHIVE = "archive"  # a .tar.gz/.zip artifact unpacked, then command
    IMAGE = "image"  # an OCI image (artifact or registry reference) as the root (images.py)


class Priority(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        """Larger goes first; stored so the claim can ``ORDER BY priority DESC``."""
        return {Priority.HIGH: 2, Priority.MEDIUM: 1, Priority.LOW: 0}[self]


class RetryOutcome(StrEnum):
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    OOM = "oom"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Capacity(_Strict):
    """Compute a worker offers and a run is placed by: what the dispatcher counts."""

    cpu: Annotated[float, Field(gt=0, le=1024, description="cores; fractions allowed")] = 1.0
    memory_mb: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 256
    gpus: Annotated[int, Field(ge=0, le=64)] = 0

    @field_validator("cpu")
    @classmethod
    def _whole_millicores(cls, cpu: float) -> float:
        if cpu < 0.001:
            raise ValueError("cpu must be at least 0.001 (one millicore)")
        return round(cpu, 3)

    @property
    def cpu_milli(self) -> int:
        return round(self.cpu * 1000)


class Resources(Capacity):
    """What a job asks for: compute, and a bound on what its attempts may write."""

    disk_mb: Annotated[
        int,
        Field(
            ge=1,
            le=1024 * 1024,
            description="what the attempt may write in all (workspace, /tmp, /var/tmp, "
            "/dev/shm); held in memory, so it also counts toward memory_mb while used",
        ),
    ] = 1024


class RetryPolicy(_Strict):
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 1
    initial_delay_seconds: Annotated[float, Field(ge=0, le=86400)] = 10.0
    factor: Annotated[float, Field(ge=1, le=10)] = 2.0
    max_delay_seconds: Annotated[float, Field(ge=0, le=7 * 86400)] = 3600.0
    retry_on: list[RetryOutcome] = Field(
        default_factory=lambda: [RetryOutcome.FAILED, RetryOutcome.TIMED_OUT, RetryOutcome.LOST]
    )
    exit_codes: list[Annotated[int, Field(ge=1, le=255)]] | None = Field(
        default=None,
        description="a failed attempt retries only with one of these exit codes (none: any)",
    )


def _check_env(env: dict[str, str]) -> dict[str, str]:
    for name in env:
        problem = variable_name_problem(name)
        if problem is not None:
            raise ValueError(problem)
    return env


def _check_secret_references(references: dict[str, str]) -> dict[str, str]:
    if len(references) > MAX_SECRET_REFERENCES:
        raise ValueError(f"a job names at most {MAX_SECRET_REFERENCES} secrets")
    _check_env(references)
    for variable, name in references.items():
        problem = secret_name_problem(name)
        if problem is not None:
            raise ValueError(f"environment variable {variable!r} names the secret {problem}")
    return references


# A run's overrides and a job's spec share these types, so an override can never hold what
# a job would refuse. Every rule is per entry: a valid spec with valid overrides applied
# (args replaced, env merged) is still valid.
Args = Annotated[
    list[Annotated[str, Field(max_length=MAX_STRING_CHARS)]], Field(max_length=MAX_ARGS)
]
Env = Annotated[
    dict[str, Annotated[str, Field(max_length=MAX_STRING_CHARS)]], AfterValidator(_check_env)
]


class JobSpec(_Strict):
    """Everything about how a job runs; a run snapshots it when it is submitted."""

    runtime: Runtime
    command: Annotated[str | None, Field(max_length=MAX_STRING_CHARS)] = None
    artifact: str | None = Field(default=None, description="sha256 of an uploaded artifact")
    image: str | None = Field(
        default=None,
        max_length=MAX_IMAGE_REFERENCE_CHARS,
        description="runtime image: an image in one of the operator's registries "
        "(HERDER_IMAGE_REGISTRIES), pinned by digest: host/repository@sha256:<64 hex>; "
        "else the artifact is an image archive (docs/runtimes.md)",
    )
    args: Args = []
    env: Env = {}
    secrets: Annotated[dict[str, str], AfterValidator(_check_secret_references)] = Field(
        default={},
        description="environment variable → the name of one of the tenant's secrets: its "
        "value, read when an attempt starts, is put in that attempt's environment only",
    )
    parameters: Parameters = Field(
        default=[],
        description="what whoever starts a run may choose, each reaching the job as an "
        "environment variable of its name (docs/api.md, 'Job parameters')",
    )
    labels: dict[str, str] = {}
    resources: Resources = Resources()
    priority: Priority = Priority.MEDIUM
    retry: RetryPolicy = RetryPolicy()
    timeout_seconds: Annotated[int, Field(ge=1, description="at most 86400 (24 h)")] = (
        DEFAULT_TIMEOUT_SECONDS
    )
    stop_grace_seconds: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_STOP_GRACE_SECONDS,
            description="when it is stopped (preemption, suspend, cancel, timeout): seconds "
            "between SIGTERM and SIGKILL, for it to save its work; 0 kills it at once; a worker's "
            "--max-stop-grace may shorten it",
        ),
    ] = DEFAULT_STOP_GRACE_SECONDS
    checkpoint_mb: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_CHECKPOINT_MB,
            description="the most its checkpoint directory ($HERDER_CHECKPOINT_DIR) may hold "
            "when it is saved (MiB; it lies on the attempt's disk, so disk_mb bounds it too); "
            "past it the save is refused and the previous checkpoint kept; at most the "
            "server's HERDER_MAX_CHECKPOINT_MB (docs/checkpoints.md)",
        ),
    ] = DEFAULT_CHECKPOINT_MB
    checkpoint_interval_seconds: Annotated[
        int | None,
        Field(
            ge=MIN_CHECKPOINT_INTERVAL_SECONDS,
            le=MAX_TIMEOUT_SECONDS,
            description="also save the checkpoint directory this often while an attempt runs "
            "(a lost worker then costs at most one interval); null: only at an attempt's end "
            "and when the job asks ($HERDER_CHECKPOINT_REQUEST)",
        ),
    ] = None
    checkpoint_keep_days: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_CHECKPOINT_KEEP_DAYS,
            description="days a run's last checkpoint is kept after the run ends (GET "
            "/v1/runs/{id}/checkpoint); 0: deleted when the run ends",
        ),
    ] = 0
    network: bool = Field(default=False, description="may the job reach the network")
    requires: dict[str, str] = Field(
        default={}, description="labels a worker must have to run it, e.g. gpu_model: h100"
    )
    pool: Annotated[str | None, AfterValidator(check_pool_reference)] = Field(
        default=None,
        description="the resource pool its runs go to (docs/pools.md), one its tenant may use; "
        "null: the tenant's default pool, else the shared fleet",
    )
    preemptible: bool = Field(
        default=False, description="may a higher-priority run stop it (it is queued again)"
    )
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = Field(
        default=1, description="a gang: this many members, placed all at once or not at all"
    )
    limits: LimitReferences = []
    deadline: Deadline | None = Field(
        default=None,
        description="finished within this long of its submission, or of its schedule's "
        "nominal fire time (docs/deadlines.md); a schedule's own deadline wins",
    )

    @field_validator("timeout_seconds")
    @classmethod
    def _at_most_a_day(cls, timeout: int) -> int:
        if timeout > MAX_TIMEOUT_SECONDS:
            raise ValueError(
                f"timeout_seconds is {timeout}; the maximum run time is 24 h "
                f"({MAX_TIMEOUT_SECONDS} seconds)"
            )
        return timeout

    @field_validator("artifact")
    @classmethod
    def _sha256(cls, artifact: str | None) -> str | None:
        if artifact is not None and not _SHA256.match(artifact):
            raise ValueError("artifact must be the sha256 id returned by POST /v1/artifacts")
        return artifact

    @field_validator("image")
    @classmethod
    def _pinned(cls, image: str | None) -> str | None:
        if image is not None:
            ImageReference.parse(image)
        return image

    @field_validator("labels", "requires")
    @classmethod
    def _label_keys(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_labels(labels)

    @field_validator("secrets")
    @classmethod
    def _one_source_per_variable(
        cls, references: dict[str, str], info: ValidationInfo
    ) -> dict[str, str]:
        both = sorted(references.keys() & info.data.get("env", {}).keys())
        if both:
            raise ValueError(f"environment variable(s) {', '.join(both)} set by env and secrets")
        return references

    @field_validator("parameters")
    @classmethod
    def _own_variables(cls, parameters: list[Parameter], info: ValidationInfo) -> list[Parameter]:
        """A parameter's variable is set by nothing else: not env, not a secret."""
        for position, parameter in enumerate(parameters):
            for source in ("env", "secrets"):
                if parameter.name in info.data.get(source, {}):
                    raise refuse_name(
                        parameters, position, f"{parameter.name} is set by {source} already"
                    )
        return parameters

    @model_validator(mode="after")
    def _runtime_needs(self) -> Self:
        if self.runtime is Runtime.IMAGE:
            return self._image_needs()
        if self.image is not None:
            raise ValueError(f"runtime {self.runtime} takes no image; use runtime image")
        needs_command = self.runtime in (Runtime.SHELL, Runtime.ARCHIVE)
        needs_artifact = self.runtime is not Runtime.SHELL
        if needs_command and not (self.command and self.command.strip()):
            raise ValueError(f"runtime {self.runtime} needs a command")
        if not needs_command and self.command is not None:
            raise ValueError(f"runtime {self.runtime} runs its artifact; leave command out")
        if needs_artifact and self.artifact is None:
            raise ValueError(f"runtime {self.runtime} needs an artifact")
        if not needs_artifact and self.artifact is not None:
            raise ValueError("runtime shell takes no artifact; use runtime archive")
        return self

    def _image_needs(self) -> Self:
        """An image archive or a reference, not both; a command, if any, that splits into
        words (it replaces the image's Cmd and runs without a shell)."""
        if (self.artifact is None) == (self.image is None):
            raise ValueError(
                "runtime image needs either an artifact (an image archive) or an image "
                "(host/repository@sha256:…), and not both"
            )
        if self.command is not None:
            try:
                command_words(self.command)
            except ImageProblem as problem:
                raise ValueError(str(problem)) from problem
        return self

    @property
    def placement_requires(self) -> dict[str, str]:
        """The labels a worker must carry to take its runs: its ``requires``, and for an
        image a sandbox (images.NEEDS_SANDBOX), which alone builds an image's root."""
        if self.runtime is Runtime.IMAGE:
            return {**self.requires, **NEEDS_SANDBOX}
        return self.requires


def check_job_name(name: str) -> str:
    if not _JOB_NAME.match(name):
        raise ValueError(
            "name must be 1-128 letters, digits, '.', '_' or '-', starting and ending with a "
            "letter or digit"
        )
    return name


MAX_DELAY_SECONDS = 366 * 86_400  # a delayed run starts within a year (a leap one too)


class RunOverrides(_Strict):
    """What a one-off run may change about its job: its declared parameters (any role that
    may start it), and raw ``args`` and ``env`` (``RAW_OVERRIDES``: a developer's)."""

    params: dict[str, JsonValue] | None = Field(
        default=None, description="values of the job's declared parameters, by name"
    )
    args: Args | None = None
    env: Env | None = None
    retry: RetryPolicy | None = None
    start_deadline_seconds: Annotated[
        float | None, Field(gt=0, le=366 * 86400, description="expire if not started by then")
    ] = None
    pool: Annotated[str | None, AfterValidator(check_pool_reference)] = Field(
        default=None, description="run in this pool rather than the job's (docs/pools.md)"
    )
    priority: Priority | None = Field(
        default=None,
        description="this run's class rather than the job's, up to its tenant's "
        "max_priority (docs/flow-control.md#priority)",
    )
    run_at: AwareDatetime | None = Field(
        default=None,
        description="start no earlier than this instant (with its offset): the run is "
        "`scheduled` until then, at most a year ahead; one past starts now",
    )
    delay_seconds: Annotated[
        int | None, Field(ge=0, le=MAX_DELAY_SECONDS, description="start this much later")
    ] = None

    @model_validator(mode="after")
    def _one_start(self) -> Self:
        if self.run_at is not None and self.delay_seconds is not None:
            raise ValueError("run_at and delay_seconds: give one of them, not both")
        return self

    def start_at(self, now: datetime) -> datetime | None:
        """When the run should start, if later than ``now``; ``Invalid`` past a year."""
        start = self.run_at
        if self.delay_seconds:
            start = now + timedelta(seconds=self.delay_seconds)
        if start is None or start <= now:
            return None
        if start > now + timedelta(seconds=MAX_DELAY_SECONDS):
            raise Invalid("run_at is more than a year ahead", field="run_at")
        return start.astimezone(UTC)  # within a year of now: never past datetime's range


ONE_OFF_FIELDS = ("priority", "run_at", "delay_seconds")  # a submission's, checked at submit


def _standing(overrides: RunOverrides) -> RunOverrides:
    """A schedule's or a workflow task's overrides: its runs start when it fires or is
    reached, at their job's class — a start time or a class chosen here would escape the
    checks a submission makes (the tenant's ``max_priority``)."""
    for name in ONE_OFF_FIELDS:
        if getattr(overrides, name) is not None:
            raise ValueError(
                f"{name} is a one-off run's: a schedule's or a task's runs start when it fires "
                "or is reached, at their job's priority"
            )
    return overrides


StandingOverrides = Annotated[RunOverrides, AfterValidator(_standing)]
"""Overrides that recur (a schedule's, a workflow task's): no one-off start time or class."""


@dataclass(frozen=True)
class RunRequest:
    """One run asked for: of which job, changed how, under which idempotency key."""

    job_id: str
    overrides: RunOverrides
    idempotency_key: str | None = None


# Overrides that choose what a run executes, rather than a value its job lets a caller
# choose: setting one needs a role that may change definitions (``api.auth.check_overrides``).
# A run has no ``command`` override at all.
RAW_OVERRIDES = ("args", "env")


def apply_overrides(
    spec: JobSpec,
    overrides: RunOverrides,
    field: str = "",
    limits: Sequence[tuple[str, LimitReference]] = (),
) -> JobSpec:
    """The spec a run executes: the job's, with its parameters resolved into env, the run's
    args replacing and env merged. ``Invalid`` (naming ``field`` + ``env.NAME``, say) for an
    env override of a secret's variable (a run may use the job's secrets, never replace
    them), of a parameter's (set it as a parameter), or of a variable that changes how a
    program starts that the job does not set itself; and for parameters that do not fit.
    The run's spec holds the values in env and no declarations: it is what runs; and its
    limits (the job's, then ``limits``: a task's or schedule's, each with its field) with
    their keys rendered (``domain.limits.rendered_references``)."""
    changes: dict[str, object] = {}
    env = dict(spec.env)
    params: dict[str, str] = {}
    if spec.parameters or overrides.params:
        params = resolve(spec.parameters, overrides.params or {}, f"{field}params")
        env |= params
        changes["parameters"] = []  # a run's spec holds their values, in env
    if overrides.env is not None:
        problems = _override_problems(spec, overrides.env, f"{field}env")
        if problems:
            raise Invalid(problems[0].message, errors=problems, field=problems[0].field)
        env |= overrides.env
    if env != spec.env:
        changes["env"] = env
    if overrides.args is not None:
        changes["args"] = overrides.args
    if overrides.retry is not None:
        changes["retry"] = overrides.retry
    if overrides.pool is not None:
        changes["pool"] = overrides.pool
    if overrides.priority is not None:
        changes["priority"] = overrides.priority
    if spec.limits or limits:
        changes["limits"] = rendered_references([*fielded(spec.limits), *limits], params, env)
    return spec.model_copy(update=changes) if changes else spec


def _override_problems(spec: JobSpec, env: dict[str, str], field: str = "env") -> list[FieldError]:
    """Why each of these env overrides may not apply to a run of ``spec``."""
    declared = {parameter.name for parameter in spec.parameters}
    problems = []
    for name in env:
        if name in spec.secrets:
            why = f"{name} holds the secret {spec.secrets[name]!r}: no run may replace it"
        elif name in declared:
            why = f"{name} is a parameter of the job: set it in params, where it is checked"
        elif changes_startup(name) and name not in spec.env:
            why = (
                f"{name} changes how a program starts (docs/isolation.md); a run may set it "
                "only where its job sets it too"
            )
        else:
            continue
        problems.append(FieldError(f"{field}.{name}", why))
    return problems
