"""The dispatcher's working copy of the fleet during one pass: what is free where, what each
tenant uses. Placing a run here updates it so later decisions in the pass see it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from herder.domain.placement.resources import Amount, total
from herder.domain.placement.snapshot import RunningAttempt, Snapshot, WorkerView

NOTHING = Amount()  # the use of a tenant with none (one object: ``is`` tells it unchanged)


@dataclass(slots=True)
class WorkerRoom:
    """One worker during a pass: its view and what is still free on it."""

    view: WorkerView
    free: Amount
    free_gpus: list[int]  # indices not given to any attempt, ascending
    releasing: Amount = field(default_factory=Amount)  # held by victims that are being stopped
    reserved_for: str | None = None  # a starving run's; nothing else goes here this pass
    victims: list[RunningAttempt] = field(default_factory=list)  # chosen in this pass
    version: int = 0  # counts the changes to what it has free and to whom it is held

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def accepts_work(self) -> bool:
        return not self.view.draining

    def take(self, need: Amount) -> tuple[int, ...]:
        """Hold ``need`` here; returns the GPU indices it gets."""
        self.free -= need
        self.version += 1
        given, self.free_gpus = self.free_gpus[: need.gpus], self.free_gpus[need.gpus :]
        return tuple(given)

    def reserve(self, run_id: str) -> None:
        """Hold it for ``run_id`` for the rest of the pass."""
        self.reserved_for = run_id
        self.version += 1


class Fleet:
    def __init__(self, snapshot: Snapshot) -> None:
        self.workers = [
            WorkerRoom(view, view.free, list(view.free_gpus), view.releasing)
            for view in snapshot.workers
        ]
        self.total = total([view.capacity for view in snapshot.workers if not view.draining])
        # added up as plain numbers, attempt by attempt: thousands of them every pass
        usage: dict[str, list[int]] = defaultdict(_nothing)
        in_pools: dict[tuple[str, str], list[int]] = defaultdict(_nothing)
        for view in snapshot.workers:
            for attempt in view.running:
                _add(usage[attempt.tenant_id], attempt.need)
                if view.pool is not None:
                    _add(in_pools[(attempt.tenant_id, view.pool)], attempt.need)
        self.usage = {tenant_id: Amount(*added) for tenant_id, added in usage.items()}
        self.pool_usage = {key: Amount(*added) for key, added in in_pools.items()}

    def use(self, tenant_id: str, amount: Amount, pool: str | None = None) -> None:
        self.usage[tenant_id] = self.used_by(tenant_id) + amount
        if pool is not None:
            self.pool_usage[(tenant_id, pool)] = self.used_in(tenant_id, pool) + amount

    def used_by(self, tenant_id: str) -> Amount:
        return self.usage.get(tenant_id, NOTHING)

    def used_in(self, tenant_id: str, pool: str) -> Amount:
        """What the tenant's attempts take on the pool's workers."""
        return self.pool_usage.get((tenant_id, pool), NOTHING)


def _nothing() -> list[int]:
    return [0, 0, 0, 0]


def _add(added: list[int], need: Amount) -> None:
    added[0] += need.cpu_milli
    added[1] += need.memory_mb
    added[2] += need.gpus
    added[3] += need.slots
