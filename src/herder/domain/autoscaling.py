"""How many workers a pool should have, and which may go (docs/autoscaling.md).

Pure: a pool's demand now (what runs take and what queued runs need) and ahead (the forecast
of its schedules, a minute at a time) against one worker's capacity. Workers take
``lead_seconds`` to start, so the count asked for now covers the forecast's peak over the
next lead time: the workers are up when the burst is due. Shrinking waits until the demand
has stayed low for ``scale_down_after_seconds`` and removes only workers that are drained
and idle; the autoscaler drains the least busy first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from herder.domain.placement.resources import Amount, each_resource

MINUTE_SECONDS = 60
MAX_WORKERS = 10_000


class WorkerShape(BaseModel):
    """What one worker the cloud starts for the pool offers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu: Annotated[float, Field(gt=0, le=1024, allow_inf_nan=False, description="cores")]
    memory_mb: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)]
    gpus: Annotated[int, Field(ge=0, le=64)] = 0
    slots: Annotated[int, Field(ge=1, le=10_000, description="its --max-slots")] = 256

    @property
    def amount(self) -> Amount:
        return Amount(round(self.cpu * 1000), self.memory_mb, self.gpus, self.slots)


class AutoscalingSpec(BaseModel):
    """A pool's autoscaling, as a system admin sets it (docs/autoscaling.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    worker: WorkerShape
    min_workers: Annotated[int, Field(ge=0, le=MAX_WORKERS)] = 0
    max_workers: Annotated[int, Field(ge=1, le=MAX_WORKERS)] = 10
    lead_seconds: Annotated[
        float,
        Field(ge=0, le=3600, allow_inf_nan=False, description="from asking for a worker to its "
              "first claim: the forecast is looked at this far ahead"),
    ] = 120.0  # fmt: skip
    scale_down_after_seconds: Annotated[
        float,
        Field(ge=0, le=86400, allow_inf_nan=False, description="demand stays below the fleet "
              "this long before workers are drained and removed"),
    ] = 300.0  # fmt: skip

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.min_workers > self.max_workers:
            raise ValueError(
                f"min_workers ({self.min_workers}) is more than max_workers ({self.max_workers})"
            )
        return self

    def policy(self) -> ScalingPolicy:
        return ScalingPolicy(
            self.worker.amount, self.min_workers, self.max_workers, self.lead_seconds,
            self.scale_down_after_seconds,
        )  # fmt: skip


@dataclass(frozen=True)
class ScalingPolicy:
    """An operator's bounds for one pool."""

    worker: Amount  # one worker's capacity; slots: its max_slots
    min_workers: int = 0
    max_workers: int = 100
    lead_seconds: float = 120.0  # from asking for a worker to its first claim
    scale_down_after_seconds: float = 300.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_workers <= self.max_workers:
            raise ValueError(
                f"min_workers {self.min_workers} and max_workers {self.max_workers}: "
                "0 <= min <= max"
            )
        if self.worker.cpu_milli <= 0 or self.worker.memory_mb <= 0 or self.worker.slots <= 0:
            raise ValueError("a worker has some cpu, memory and at least one slot")
        if self.lead_seconds < 0 or self.scale_down_after_seconds < 0:
            raise ValueError("lead and scale-down times are not negative")


@dataclass(frozen=True)
class PoolDemand:
    """What a pool's runs take and will take, in the units of ``Amount`` (slots: runs)."""

    running: Amount  # the attempts running now
    queued: Amount  # the runs queued now (a gang counts all its members)
    forecast: Sequence[Amount] = ()  # busy by scheduled runs, minute by minute from now


@dataclass(frozen=True)
class WorkerLoad:
    """One of the pool's workers as the autoscaler sees it."""

    id: str
    running: int  # attempts on it now
    draining: bool


@dataclass(frozen=True)
class Scaling:
    """One step of the autoscaler: the count to ask the cloud for, the workers to drain
    now, and the drained idle ones the cloud may remove."""

    desired: int
    drain: tuple[str, ...] = ()
    removable: tuple[str, ...] = ()


def workers_for(need: Amount, worker: Amount) -> int:
    """The fewest workers of ``worker``'s capacity that hold ``need``, resource by resource
    (a run needing more than one worker has still counts one worker: it waits anyway)."""
    counts = [
        _ceil_ratio(need.cpu_milli, worker.cpu_milli),
        _ceil_ratio(need.memory_mb, worker.memory_mb),
        _ceil_ratio(need.slots, worker.slots),
    ]
    if need.gpus:
        counts.append(_ceil_ratio(need.gpus, worker.gpus) if worker.gpus else 0)
    return max(counts)


def desired_workers(demand: PoolDemand, policy: ScalingPolicy) -> int:
    """Enough workers for what runs and waits now plus the forecast's peak within the lead
    time (and the minute after it), within the policy's bounds."""
    need = demand.running + demand.queued + forecast_peak(demand, policy)
    return min(policy.max_workers, max(policy.min_workers, workers_for(need, policy.worker)))


def scale(
    desired: int,
    workers: Sequence[WorkerLoad],
    low_since: datetime | None,
    now: datetime,
    policy: ScalingPolicy,
) -> Scaling:
    """The step toward ``desired`` from the pool's ``workers``. Growing asks at once (the
    autoscaler takes drained workers back first). Shrinking only once demand has been below
    the fleet since ``low_since`` for the policy's time: then the least busy surplus workers
    are drained. Workers drained and running nothing may always be removed."""
    accepting = [worker for worker in workers if not worker.draining]
    removable = tuple(worker.id for worker in workers if worker.draining and worker.running == 0)
    if desired >= len(accepting):
        return Scaling(desired, (), removable)
    waited = low_since is not None and now - low_since >= timedelta(
        seconds=policy.scale_down_after_seconds
    )
    if not waited:
        return Scaling(len(accepting), (), removable)
    surplus = len(accepting) - desired
    by_load = sorted(accepting, key=lambda worker: (worker.running, worker.id))
    return Scaling(desired, tuple(worker.id for worker in by_load[:surplus]), removable)


def forecast_peak(demand: PoolDemand, policy: ScalingPolicy) -> Amount:
    """Each resource's largest forecast need within the lead time and the minute after."""
    minutes = demand.forecast[: math.ceil(policy.lead_seconds / MINUTE_SECONDS) + 1]
    if not minutes:
        return Amount()
    return each_resource(minutes, max)


def _ceil_ratio(need: int, each: int) -> int:
    return -(-need // each) if need > 0 else 0


class Demand(BaseModel):
    """An amount as the autoscaling endpoint shows it."""

    model_config = ConfigDict(frozen=True)

    cpu: float
    memory_mb: int
    gpus: int
    runs: int

    @classmethod
    def of(cls, amount: Amount) -> Demand:
        return cls(
            cpu=amount.cpu_milli / 1000, memory_mb=amount.memory_mb, gpus=amount.gpus,
            runs=amount.slots,
        )  # fmt: skip


class ScaledWorker(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    running: int = Field(description="attempts on it now")
    draining: bool


class PoolAutoscaling(BaseModel):
    """``GET /v1/pools/{pool}/autoscaling``: the count a pool should have and why."""

    model_config = ConfigDict(frozen=True)

    pool: str
    desired_workers: int = Field(
        description="enough for running + queued + the forecast's peak within the lead "
        "time, within min_workers and max_workers"
    )
    workers: list[ScaledWorker] = Field(description="its live workers now")
    running: Demand
    queued: Demand
    forecast_peak: Demand = Field(description="the largest scheduled demand within the lead")
    autoscaling: AutoscalingSpec
