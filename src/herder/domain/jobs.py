"""What a job is: the validated specification of a program and how to run it."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from herder.domain.deadlines import Deadline
from herder.domain.images import NEEDS_SANDBOX, ImageProblem, ImageReference, command_words
from herder.domain.labels import check_labels, check_pool_reference
from herder.domain.limits import LimitReferences
from herder.domain.parameters import Parameter, Parameters, refuse_name
from herder.domain.secrets import secret_name_problem
from herder.domain.variables import variable_name_problem

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
