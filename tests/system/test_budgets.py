"""A time budget with a real worker: a job's CPU time, as the worker measured it, is
charged to its tenant, and once the budget is spent the tenant's next run waits for it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from herder.domain.budgets import Budget, Period, TenantBudgets
from herder.domain.usage import UsageGroup
from tests.system.conftest import Cluster, wait_until

pytestmark = pytest.mark.system

BURN = "python3 -c 'import time\nwhile time.process_time() < 1.0: pass'"


def test_a_jobs_measured_cpu_time_spends_its_tenants_budget(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(embedded=True)
    with cluster.client() as herder:
        job = herder.create_job("burn", {"runtime": "shell", "command": BURN})
        burnt = herder.wait(herder.start_run(job.id).id, timeout=60)
        assert burnt.state == "succeeded"
        (row,) = herder.usage(group_by=UsageGroup.JOB).rows
        assert 1.0 <= row.cpu_seconds < 5.0, row
        budget = Budget(period=Period.DAY, cpu_seconds=0.5)
        herder.set_budgets(row.tenant_id, TenantBudgets(budgets=(budget,)))
        held = herder.start_run(job.id)
        wait_until(
            lambda: "day budget is spent" in (herder.get_run(held.id).waiting_reason or ""),
            30, "the next run waits on the spent budget",
        )  # fmt: skip
        assert herder.get_run(held.id).state == "queued"
