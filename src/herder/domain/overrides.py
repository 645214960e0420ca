"""What a run may change about its job: a one-off run's overrides (parameters, args, env,
retry, pool, class, start time) and a schedule's or workflow task's standing ones, and the
spec a run executes once they are applied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Self

from pydantic import AfterValidator, AwareDatetime, Field, JsonValue, model_validator

from herder.domain.errors import FieldError, Invalid
from herder.domain.jobs import Args, Env, JobSpec, Priority, RetryPolicy, _Strict
from herder.domain.labels import check_pool_reference
from herder.domain.limits import LimitReference, fielded, rendered_references
from herder.domain.parameters import resolve
from herder.domain.variables import changes_startup

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
