"""Stage 0 of placement: a tenant whose time budget is spent places nothing new covered by
it (its runs in the budget's pool, or all its runs); they wait with a reason naming the budget
and when it resets. A ``hard`` spent budget also stops what runs under it (preemption: each
attempt gets its stop grace, and its run queues again, to wait like the others)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from herder.domain.budgets import Standing, TenantUse
from herder.domain.placement.snapshot import QueuedRun, RunningAttempt, Snapshot, WorkerView


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

    def stopping(
        self, workers: Iterable[WorkerView]
    ) -> Iterator[tuple[WorkerView, RunningAttempt, str]]:
        """The running attempts a spent hard budget stops (those not already stopping), on
        their workers, with why. An attempt's pool is its worker's."""
        if not self.by_tenant:
            return
        for worker in workers:
            for attempt in worker.running:
                if attempt.preempting:
                    continue
                for standing, reason in self.by_tenant.get(attempt.tenant_id, ()):
                    if standing.budget.hard and standing.budget.covers(worker.pool):
                        yield worker, attempt, reason
                        break


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
