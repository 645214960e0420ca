"""``/v1/usage``: what tenants used in the current day, week or month (each in its own time
zone), rolled up by tenant, pool or job, and each budget against its period's use."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel

from herder.domain.budgets import Budget, Period, TenantUse, Usage, total, window


class UsageGroup(StrEnum):
    TENANT = "tenant"
    POOL = "pool"
    JOB = "job"


class UsageRow(BaseModel):
    """CPU-seconds and GPU-seconds used in one period: measured for ended attempts, asked
    for (times the time run) for running ones."""

    tenant_id: str
    pool: str | None = None  # with group_by pool or job (null: the shared fleet)
    job_id: str | None = None  # with group_by job
    period_start: datetime
    period_end: datetime
    cpu_seconds: float
    gpu_seconds: float


class BudgetStanding(BaseModel):
    tenant_id: str
    budget: Budget
    period_start: datetime
    resets_at: datetime
    cpu_seconds: float  # used in the period
    gpu_seconds: float
    fraction: float  # of the tighter limit; 1 or more: spent
    spent: bool


class UsageReport(BaseModel):
    period: Period
    group_by: UsageGroup
    rows: list[UsageRow]
    budgets: list[BudgetStanding]


def usage_report(
    uses: Mapping[str, TenantUse], period: Period, group_by: UsageGroup, now: datetime
) -> UsageReport:
    rows: list[UsageRow] = []
    standings: list[BudgetStanding] = []
    for tenant_id in sorted(uses):
        use = uses[tenant_id]
        span = window(period, now, use.budgets.zone)
        grouped: dict[tuple[str | None, str | None], list[Usage]] = {}
        for (in_pool, in_job), used in use.used(span, now, lambda _pool: True).items():
            match group_by:
                case UsageGroup.TENANT:
                    key: tuple[str | None, str | None] = (None, None)
                case UsageGroup.POOL:
                    key = (in_pool, None)
                case UsageGroup.JOB:
                    key = (in_pool, in_job)
            grouped.setdefault(key, []).append(used)
        for (pool, job_id), used_list in sorted(grouped.items(), key=lambda item: str(item[0])):
            used = total(used_list)
            rows.append(
                UsageRow(
                    tenant_id=tenant_id, pool=pool, job_id=job_id,
                    period_start=span.starts_at, period_end=span.ends_at,
                    cpu_seconds=used.cpu_seconds, gpu_seconds=used.gpu_seconds,
                )
            )  # fmt: skip
        for standing in use.standings(now):
            standings.append(
                BudgetStanding(
                    tenant_id=tenant_id, budget=standing.budget,
                    period_start=standing.window.starts_at, resets_at=standing.window.ends_at,
                    cpu_seconds=standing.used.cpu_seconds, gpu_seconds=standing.used.gpu_seconds,
                    fraction=standing.fraction, spent=standing.spent,
                )
            )  # fmt: skip
    return UsageReport(period=period, group_by=group_by, rows=rows, budgets=standings)
