"""Time budgets as a tenant's own admins read them (the system tenant's admins set them), and
usage (a tenant's own; the system tenant's admins see every tenant's)."""

from __future__ import annotations

from herder.app.access import check_tenant_admin, is_system_admin
from herder.domain.budgets import Period, TenantBudgets
from herder.domain.errors import NotFound
from herder.domain.models import Principal
from herder.domain.usage import UsageGroup, UsageReport, usage_report
from herder.store.store import Store


def read_budgets(store: Store, caller: Principal, tenant_id: str) -> TenantBudgets:
    check_tenant_admin(caller, tenant_id, "read its budgets")
    store.access.get_tenant(tenant_id)  # 404 for no such tenant
    return store.usage.budgets(tenant_id)


def read_usage(
    store: Store, caller: Principal, period: Period, group_by: UsageGroup, tenant_id: str | None
) -> UsageReport:
    """The caller's tenant's usage; the system tenant's admins see every tenant's, or the
    ``tenant_id``'s; another tenant is not found for anyone else."""
    if is_system_admin(caller):
        tenant_ids = None if tenant_id is None else [tenant_id]
    elif tenant_id in (None, caller.tenant_id):
        tenant_ids = [caller.tenant_id]
    else:
        raise NotFound(f"tenant {tenant_id} not found")
    now, uses = store.usage.uses(tenant_ids, period)
    if tenant_id is not None and not uses:
        raise NotFound(f"tenant {tenant_id} not found")
    return usage_report(uses, period, group_by, now)
