"""What placement reads that changes only by hand: the tenants' weights, quotas and default
pools, the pools with their shares and selectors, and the budgets. A dispatcher keeps them
between passes (``KeptSettings``) and reads them again only when ``placement_settings``'
version moved: triggers on those tables move it in the transaction of every change
(migration 0032). A pass with nothing changed reads one number, not four tables (every
tenant among them).

The version is read after the queue, in a later statement: a change committed before the
queue was read moved it before that, so a pass that sees a run submitted just after a change
(a budget set, then a submit) sees the version moved, and reads the settings again. The
version kept is read before the settings it goes with, so it can only be older than they
are: a change between the two costs one more read, never a stale pass.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sqlalchemy import Connection, Text, cast, select

from herder.domain.budgets import TenantBudgets
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import PoolView, TenantView
from herder.domain.pools import PoolSelectors, selector_of
from herder.domain.tenants import TenantQuotas
from herder.store.schema import placement_settings, pool_shares, pools, tenants
from herder.store.usage import read_budgets


@dataclass(frozen=True)
class Settings:
    tenants: Mapping[str, TenantView]
    pools: Mapping[str, PoolView]
    selectors: PoolSelectors
    budgets: Mapping[str, TenantBudgets]  # the budgeted tenants'


def read_settings(connection: Connection) -> Settings:
    pools_now, selectors = read_pools(connection)
    return Settings(read_tenant_views(connection), pools_now, selectors, read_budgets(connection))


class KeptSettings:
    """A dispatcher's settings as last read, with the version they were read at."""

    def __init__(self) -> None:
        self._kept: tuple[int, Settings] | None = None

    def read(self, connection: Connection) -> Settings:
        """The settings now: those kept while the version has not moved, else read again."""
        version = connection.execute(_VERSION).scalar()
        kept = self._kept
        if version is not None and kept is not None and kept[0] == version:
            return kept[1]
        settings = read_settings(connection)
        self._kept = None if version is None else (version, settings)
        return settings


def read_tenant_views(connection: Connection) -> dict[str, TenantView]:
    return {
        tenant_id: TenantView(tenant_id, weight, quotas_of(quotas), default_pool)
        for tenant_id, weight, quotas, default_pool in connection.execute(_TENANTS).all()
    }


def read_pools(connection: Connection) -> tuple[Mapping[str, PoolView], PoolSelectors]:
    """The pools with their shares, and their selectors."""
    shares: dict[str, dict[str, Amount]] = defaultdict(dict)
    for name, tenant_id, cpu_milli, memory_mb, gpus in connection.execute(_SHARES):
        shares[name][tenant_id] = Amount(cpu_milli, memory_mb, gpus)
    selectors = selectors_of(connection.execute(_POOLS))
    views = {name: PoolView(name, MappingProxyType(shares[name])) for name, _ in selectors}
    return views, PoolSelectors(selectors)


def selectors_of(stored: Iterable[Sequence[Any]]) -> list[tuple[str, Mapping[str, str]]]:
    """The pools' (name, selector) as stored, each selector checked."""
    return [(name, selector_of(name, selector)) for name, selector in stored]


@functools.lru_cache(maxsize=1024)
def quotas_of(text: str) -> TenantQuotas:
    """A tenant's quotas from their JSON, parsed once per distinct value (they are frozen)."""
    return TenantQuotas.model_validate_json(text)


_VERSION = select(placement_settings.c.version).where(placement_settings.c.id == 1)
_TENANTS = select(
    tenants.c.id, tenants.c.weight, cast(tenants.c.quotas, Text), tenants.c.default_pool
)
_POOLS = select(pools.c.name, pools.c.selector).order_by(pools.c.name)
_SHARES = select(
    pools.c.name, pool_shares.c.tenant_id, pool_shares.c.cpu_milli, pool_shares.c.memory_mb,
    pool_shares.c.gpus,
).join(pool_shares, pool_shares.c.pool_id == pools.c.id)  # fmt: skip
