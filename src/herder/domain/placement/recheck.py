"""What applying a plan checks again, under its locks, beside each worker's room: the
tenant's in-use quotas and the run's limit keys, as the store measured them once it held
the tenant's row and the limits' rows.

A plan was made from one dispatcher's view, which may miss what another placer (a second
dispatcher of another partition, or a report placing a successor) committed since: two
views that each see room can together over-fill a quota or a key. So the store measures
each again, locked, and takes a placement only while every one of them still has room; the
rest stay queued for the next pass, which sees why. Pure: the store hands in what it read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from herder.domain.placement.limits import LimitKey, LimitsInPass
from herder.domain.placement.reasons import over_quota
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import KeyStarts, LimitView
from herder.domain.tenants import TenantQuotas


def binds_in_use(quotas: TenantQuotas) -> bool:
    """Whether any of the tenant's quotas bounds what it has in use (only then is its use
    measured at apply)."""
    bounds = (quotas.max_cpu, quotas.max_memory_mb, quotas.max_gpus)
    return any(bound is not None for bound in bounds)


@dataclass(frozen=True, slots=True)
class _Keys:
    limit_keys: tuple[LimitKey, ...]


@dataclass
class Rooms:
    """The tenants' and keys' room as measured under the apply's locks, taken from as
    placements are kept."""

    quotas: Mapping[str, TenantQuotas] = field(default_factory=dict)  # locked tenants
    used: dict[str, Amount] = field(default_factory=dict)  # bound tenants' use, measured
    limits: LimitsInPass | None = None  # the named keys' running runs and starts, measured

    @classmethod
    def measured(
        cls,
        quotas: Mapping[str, TenantQuotas],
        used: Mapping[str, Amount],
        limits: Mapping[str, LimitView],
        running: Mapping[LimitKey, int],
        starts: Mapping[LimitKey, KeyStarts],
        now: datetime,
    ) -> Rooms:
        keys = LimitsInPass(limits, now, starts=dict(starts)) if limits else None
        if keys is not None:
            keys.running.update(running)
        return cls(quotas, dict(used), keys)

    def take(self, tenant_id: str, need: Amount, limit_keys: Sequence[LimitKey]) -> bool:
        """Count a placement of ``need`` in all (every member) against its tenant's quotas
        and its keys, if each has room; else count nothing and say so."""
        quotas = self.quotas.get(tenant_id)
        bound = quotas is not None and binds_in_use(quotas)
        if quotas is not None and bound:
            used = self.used.get(tenant_id, Amount())
            if over_quota(quotas, used, need) is not None:
                return False
        keyed = _Keys(tuple(limit_keys))
        if self.limits is not None and keyed.limit_keys:
            if self.limits.holding(keyed) is not None:
                return False
            self.limits.take(keyed)
        if bound:
            self.used[tenant_id] = self.used.get(tenant_id, Amount()) + need
        return True
