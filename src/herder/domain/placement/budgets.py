"""Stage 0 of placement: a tenant whose time budget is spent places nothing new covered by
it (its runs in the budget's pool, or all its runs); they wait with a reason naming the budget
and when it resets. A ``hard`` spent budget also stops what runs under it (preemption: each
attempt gets its stop grace, and its run queues again, to wait like the others)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from herder.domain.budgets import Standing, TenantUse
from herder.domain.placement.snapshot import QueuedRun, RunningAttempt, Snapshot, WorkerView
from herder.domain.placement.timeline import HardBudget


@dataclass(frozen=True)
class SpentBudget:
    standing: Standing
    reason: str  # why a run waits on it
    stop: HardBudget  # why it stops a running attempt (a hard one only does)


@dataclass(frozen=True)
class Spent:
    """The spent budgets of one pass, by tenant."""

    by_tenant: Mapping[str, tuple[SpentBudget, ...]]

    def holding(self, run: QueuedRun) -> str | None:
        """Why ``run`` waits on a budget, if one holds it."""
        for spent in self.by_tenant.get(run.tenant_id, ()):
            if spent.standing.budget.covers(run.pool):
                return spent.reason
        return None

    def stopping(
        self, workers: Iterable[WorkerView]
    ) -> Iterator[tuple[WorkerView, RunningAttempt, HardBudget]]:
        """The running attempts a spent hard budget stops (those not already stopping), on
        their workers, with the budget. An attempt's pool is its worker's."""
        if not self.by_tenant:
            return
        for worker in workers:
            for attempt in worker.running:
                if attempt.preempting:
                    continue
                for spent in self.by_tenant.get(attempt.tenant_id, ()):
                    budget = spent.standing.budget
                    if budget.hard and budget.covers(worker.pool):
                        yield worker, attempt, spent.stop
                        break


def spent_budgets(snapshot: Snapshot) -> Spent:
    return Spent(_spent(snapshot.budgets, snapshot))


def _spent(uses: Mapping[str, TenantUse], snapshot: Snapshot) -> dict[str, tuple[SpentBudget, ...]]:
    found = {}
    for tenant_id, use in uses.items():
        zone = use.budgets.zone
        spent = tuple(
            SpentBudget(
                standing,
                standing.reason(zone),
                HardBudget(
                    standing.budget.name,
                    f"{standing.use()} used; it resets at {standing.resets(zone)}",
                ),
            )
            for standing in use.standings(snapshot.now)
            if standing.spent
        )
        if spent:
            found[tenant_id] = spent
    return found
