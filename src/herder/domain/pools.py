"""Resource pools: named groups of workers that only the tenants given a share of them may
use, each share a nominal amount that is its tenant's first (docs/pools.md).

A worker is in the pool whose selector its labels match (the most specific selector, then
the first name); ``herder worker --pool NAME`` registers with ``pool=NAME``, every pool's
selector unless it names another. Workers in no pool form the shared fleet, where runs that
name no pool go. Within a pool a tenant's runs first use its nominal share; past it they
may **borrow** idle capacity, and borrowed work is the only work reclaimed (preempted) when a
tenant needs its share back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from herder.domain.autoscaling import AutoscalingSpec
from herder.domain.labels import check_labels, check_pool_reference
from herder.domain.placement.resources import Amount

POOL_LABEL = "pool"  # ``herder worker --pool NAME`` registers with this label
MAX_POOL_SHARES = 1000  # tenants named by one pool
MAX_SHARE_CPU = 1_000_000  # cores
MAX_SHARE_MEMORY_MB = 2**40
MAX_SHARE_GPUS = 100_000


def check_pool_name(name: str) -> str:
    checked = check_pool_reference(name)
    assert checked is not None
    return checked


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolShare(_Strict):
    """One tenant's nominal share of a pool: what it gets first, whoever else is busy. Zero
    everywhere: the tenant may use the pool, by borrowing only."""

    tenant_id: Annotated[str, Field(min_length=1, max_length=40)]
    cpu: Annotated[
        float, Field(ge=0, le=MAX_SHARE_CPU, allow_inf_nan=False, description="cores")
    ] = 0.0
    memory_mb: Annotated[int, Field(ge=0, le=MAX_SHARE_MEMORY_MB)] = 0
    gpus: Annotated[int, Field(ge=0, le=MAX_SHARE_GPUS)] = 0

    @field_validator("cpu")
    @classmethod
    def _whole_millicores(cls, cpu: float) -> float:
        return round(cpu, 3)

    @property
    def amount(self) -> Amount:
        return Amount(round(self.cpu * 1000), self.memory_mb, self.gpus)


class PoolSpec(_Strict):
    """What a system admin says of a pool: its workers (by selector) and who may use it."""

    description: Annotated[str, Field(max_length=1000)] = ""
    selector: dict[str, str] | None = Field(
        default=None,
        description="labels a worker must all have to be in the pool; default "
        "{'pool': NAME}, which `herder worker --pool NAME` registers with",
    )
    shares: list[PoolShare] = Field(
        default=[],
        max_length=MAX_POOL_SHARES,
        description="the tenants that may use the pool, each with its nominal share",
    )
    autoscaling: AutoscalingSpec | None = Field(
        default=None,
        description="how many workers it should have, for `herder autoscaler` and the "
        "herder_pool_desired_workers gauge (docs/autoscaling.md); null: a fixed fleet",
    )

    @field_validator("selector")
    @classmethod
    def _labels(cls, selector: dict[str, str] | None) -> dict[str, str] | None:
        if selector is not None and not selector:
            raise ValueError("a selector names at least one label; leave it out for the default")
        return None if selector is None else check_labels(selector)

    @field_validator("shares")
    @classmethod
    def _one_share_per_tenant(cls, shares: list[PoolShare]) -> list[PoolShare]:
        seen: set[str] = set()
        for index, share in enumerate(shares):
            if share.tenant_id in seen:
                raise ValueError(
                    f"tenant {share.tenant_id} is named again at shares.{index}; "
                    "give each tenant one share"
                )
            seen.add(share.tenant_id)
        return shares


class PoolChanges(PoolSpec):
    """A change to a pool (PATCH): each field given replaces the stored one, ``shares`` as a
    whole; ``"selector": null`` goes back to the default selector. A pool keeps its name:
    jobs and runs name it."""


class PoolUse(_Strict):
    """A tenant's attempts running on a pool's workers now, and how many of them borrow
    (placed past its nominal share: what a tenant reclaiming its share may preempt)."""

    tenant_id: str
    attempts: int
    borrowed: int = Field(description="of those attempts, the ones placed past its share")
    cpu: float  # cores
    memory_mb: int
    gpus: int


class Pool(_Strict):
    """A pool as the API shows it. A tenant sees only the pools it has a share in, and of
    their shares and use only its own; a system admin sees every pool, share and use."""

    id: str
    name: str
    description: str
    selector: dict[str, str] = Field(description="the labels that put a worker in it")
    shares: list[PoolShare]
    workers: int = Field(description="live workers in it now (alive or draining)")
    in_use: list[PoolUse] = Field(
        default=[], description="each tenant's attempts running on its workers now"
    )
    autoscaling: AutoscalingSpec | None = None
    created_at: datetime
    updated_at: datetime


def selector_of(name: str, selector: Mapping[str, str] | None) -> dict[str, str]:
    """The labels that put a worker in pool ``name``."""
    return dict(selector) if selector else {POOL_LABEL: name}


class PoolSelectors:
    """Which pool a worker with given labels is in: of the pools (name, selector) whose
    selector its labels match, the most specific, then the first by name; None: the shared
    fleet. Each selector is filed under one of its labels, so finding a worker's pool looks
    only at the selectors sharing a label with it, not at every pool (the dispatcher asks
    for each worker on every pass)."""

    def __init__(self, selectors: Iterable[tuple[str, Mapping[str, str]]]) -> None:
        self._filed: dict[tuple[str, str], list[tuple[str, Mapping[str, str]]]] = {}
        for name, selector in selectors:
            filed_under = min(selector.items())  # selector_of never gives an empty one
            self._filed.setdefault(filed_under, []).append((name, selector))

    def __bool__(self) -> bool:
        return bool(self._filed)

    def pool_of(self, labels: Mapping[str, str]) -> str | None:
        matching = [
            (-len(selector), name)
            for label in labels.items()
            for name, selector in self._filed.get(label, ())
            if all(labels.get(key) == value for key, value in selector.items())
        ]
        return min(matching)[1] if matching else None
