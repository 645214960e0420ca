"""The client's budget and usage calls (mixed into ``HerderClient``)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from herder.client.schedules import drop_none
from herder.domain.budgets import Period, TenantBudgets
from herder.domain.usage import UsageGroup, UsageReport


class UsageCalls:
    _request: Callable[..., httpx.Response]  # HerderClient's: one call, errors mapped

    def set_budgets(self, tenant_id: str, budgets: TenantBudgets) -> TenantBudgets:
        body = budgets.model_dump(mode="json", exclude_none=True)
        response = self._request("PUT", f"/v1/tenants/{tenant_id}/budgets", json=body)
        return TenantBudgets.model_validate(response.json())

    def get_budgets(self, tenant_id: str) -> TenantBudgets:
        response = self._request("GET", f"/v1/tenants/{tenant_id}/budgets")
        return TenantBudgets.model_validate(response.json())

    def usage(
        self,
        period: Period = Period.DAY,
        group_by: UsageGroup = UsageGroup.TENANT,
        tenant_id: str | None = None,
    ) -> UsageReport:
        params = drop_none({"period": period, "group_by": group_by, "tenant_id": tenant_id})
        return UsageReport.model_validate(self._request("GET", "/v1/usage", params=params).json())
