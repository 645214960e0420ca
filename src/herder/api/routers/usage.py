"""/v1/usage and /v1/tenants/{id}/budgets: time budgets, set by the system tenant's admins,
and what tenants used against them (docs/budgets.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from herder.api.auth import Caller, StoreDep, SystemAdmin
from herder.api.openapi import problems
from herder.app import usage
from herder.domain.budgets import Period, TenantBudgets
from herder.domain.usage import UsageGroup, UsageReport

router = APIRouter(tags=["budgets"])


@router.put("/v1/tenants/{tenant_id}/budgets")
def set_budgets(
    tenant_id: str, body: TenantBudgets, _admin: SystemAdmin, store: StoreDep
) -> TenantBudgets:
    """Replace the tenant's budgets and the time zone their periods begin in. They hold runs
    from the dispatcher's next pass; usage charged before counts (it is kept per day)."""
    return store.usage.set_budgets(tenant_id, body)


@router.get("/v1/tenants/{tenant_id}/budgets")
def get_budgets(tenant_id: str, caller: Caller, store: StoreDep) -> TenantBudgets:
    return usage.read_budgets(store, caller, tenant_id)


@router.get("/v1/usage", responses=problems(404))
def get_usage(
    caller: Caller,
    store: StoreDep,
    period: Annotated[Period, Query(description="the current day, week or month")] = Period.DAY,
    group_by: UsageGroup = UsageGroup.TENANT,
    tenant_id: Annotated[
        str | None, Query(max_length=40, description="one tenant (system admins)")
    ] = None,
) -> UsageReport:
    """CPU-seconds and GPU-seconds used in the current period (in each tenant's time zone),
    by tenant, pool or job, and each budget against it. A tenant sees its own."""
    return usage.read_usage(store, caller, period, group_by, tenant_id)
