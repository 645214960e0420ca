"""Stage 0 of placement: a tenant whose time budget is spent places nothing new covered by
it (its runs in the budget's pool, or all its runs); they wait with a reason naming the budget
and when it resets. A ``hard`` spent budget also stops what runs under it (preemption: each
attempt gets its stop grace, and its run queues again, to wait like the others)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from herder.domain.budgets import Standing, TenantUse
from herder.domain.placement.snapshot import QueuedRun, Snapshot


@dataclass(frozen=True)
class Spent:
    """The spent budgets of one pass, by tenant, with their reasons."""

    by_tenant: Mapping[str, tuple[tuple[Standing, str], ...]]

    def holding(self, run: QueuedRun) -> str | None:
        """Why ``run`` waits on a budget, if one holds it."""
        for standing, reason in self.by_tenant.get(run.tenant_id, ()):
            if standing.budget.covers(run.pool):
                return reason
        return None

    def stopping(self, tenant_id: str, pool: str | None) -> str | None:
        """Why a running attempt of the tenant (in ``pool``) is stopped, if a hard budget says."""
        for standing, reason in self.by_tenant.get(tenant_id, ()):
            if standing.budget.hard and standing.budget.covers(pool):
                return reason
        return None


def spent_budgets(snapshot: Snapshot) -> Spent:
    return Spent(_spent(snapshot.budgets, snapshot))


def _spent(
    uses: Mapping[str, TenantUse], snapshot: Snapshot
) -> dict[str, tuple[tuple[Standing, str], ...]]:
    found = {}
    for tenant_id, use in uses.items():
        spent = tuple(
            (standing, standing.reason(use.budgets.zone))
            for standing in use.standings(snapshot.now)
            if standing.spent
        )
        if spent:
            found[tenant_id] = spent
    return found
