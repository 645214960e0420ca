"""What the dispatcher sees in one pass: queued runs, workers with what they run, tenants.

Plain immutable data read by the store; the policy decides on it alone, with ``now`` given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from herder.domain.budgets import TenantUse
from herder.domain.placement.partitions import Held
from herder.domain.placement.resources import Amount, total
from herder.domain.tenants import TenantQuotas


@dataclass(frozen=True, slots=True)
class QueuedRun:
    id: str
    tenant_id: str
    priority: int  # Priority.rank: 2 high, 1 medium, 0 low
    queued_at: datetime
    need: Amount  # per member, slots=1
    replicas: int = 1
    requires: Mapping[str, str] = field(default_factory=dict)
    preempted_at: datetime | None = None  # when it was last preempted: its wait restarts
    pool: str | None = None  # its own pool, else its tenant's default; None: the shared fleet
    preemptible: bool = False  # may be stopped for another run: only such a run borrows
    limit_keys: tuple[tuple[str, str], ...] = ()  # (limit id, key) it counts against
    not_before: datetime | None = None  # a debounce's window: it may not start before

    @property
    def total_need(self) -> Amount:
        return self.need if self.replicas == 1 else self.need.times(self.replicas)


@dataclass(frozen=True, slots=True)
class RunningAttempt:
    attempt_id: str
    run_id: str
    tenant_id: str
    priority: int
    need: Amount  # slots=1
    started_at: datetime
    gpu_indices: tuple[int, ...] = ()
    preemptible: bool = False
    preempting: bool = False  # already chosen as a victim; its resources are being freed
    last_preempted_at: datetime | None = None  # the run's, for the cool-down
    borrowed: bool = False  # placed past its tenant's nominal share of the worker's pool
    limit_keys: tuple[tuple[str, str], ...] = ()  # its run's (limit id, key)s


@dataclass(frozen=True, slots=True)
class WorkerView:
    id: str
    capacity: Amount  # slots = max_slots
    labels: Mapping[str, str] = field(default_factory=dict)
    running: tuple[RunningAttempt, ...] = ()
    address: str = ""
    draining: bool = False  # takes nothing new; what it runs still counts
    pool: str | None = None  # domain.pools.PoolSelectors.pool_of its labels; None: the shared fleet
    # Derived from the above once per view (a dispatcher keeps the views of unchanged
    # workers between passes, so each pass need not add up thousands of attempts again):
    used: Amount = field(init=False, repr=False, compare=False)  # by what it runs
    free: Amount = field(init=False, repr=False, compare=False)  # the capacity left
    free_gpus: tuple[int, ...] = field(init=False, repr=False, compare=False)  # ascending
    releasing: Amount = field(init=False, repr=False, compare=False)  # held by victims

    def __post_init__(self) -> None:
        taken = {index for attempt in self.running for index in attempt.gpu_indices}
        free_gpus = tuple(index for index in range(self.capacity.gpus) if index not in taken)
        victims = [attempt.need for attempt in self.running if attempt.preempting]
        used = total([attempt.need for attempt in self.running])
        object.__setattr__(self, "used", used)
        object.__setattr__(self, "free", self.capacity - used)
        object.__setattr__(self, "free_gpus", free_gpus)
        object.__setattr__(self, "releasing", total(victims) if victims else Amount())


def with_started(
    workers: Sequence[WorkerView], started: Mapping[str, Sequence[RunningAttempt]]
) -> tuple[WorkerView, ...]:
    """The workers once the attempts just ``started`` on them (by worker id) run there too."""
    return tuple(
        replace(worker, running=(*worker.running, *started[worker.id]))
        if worker.id in started
        else worker
        for worker in workers
    )


@dataclass(frozen=True, slots=True)
class TenantView:
    id: str
    weight: int = 1
    quotas: TenantQuotas = field(default_factory=TenantQuotas)
    default_pool: str | None = None  # where its runs that name no pool go


@dataclass(frozen=True, slots=True)
class PoolView:
    """A pool as placement sees it: the tenants that may use it and their nominal shares."""

    name: str
    shares: Mapping[str, Amount] = field(default_factory=dict)  # tenant id → share (slots 0)


@dataclass(frozen=True, slots=True)
class LimitView:
    """A limit as placement sees it (``domain.limits.LimitSpec``; placement.limits)."""

    id: str
    name: str
    max_running: int | None = None
    rate_count: int | None = None  # starts per ``rate_period_seconds``
    rate_period_seconds: int = 60


@dataclass(frozen=True, slots=True)
class KeyStarts:
    """A rate-limited key's starts within its limit's period, as read."""

    count: int
    oldest: datetime  # the first of them: the window frees a start when it leaves


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: datetime
    queued: tuple[QueuedRun, ...]  # in any order; the policy orders them
    workers: tuple[WorkerView, ...]  # alive and draining ones
    tenants: Mapping[str, TenantView] = field(default_factory=dict)  # missing: defaults
    pools: Mapping[str, PoolView] = field(default_factory=dict)  # by name; missing: deleted
    budgets: Mapping[str, TenantUse] = field(default_factory=dict)  # tenants with budgets
    limits: Mapping[str, LimitView] = field(default_factory=dict)  # those queued runs name
    limit_starts: Mapping[tuple[str, str], KeyStarts] = field(default_factory=dict)
    # when each key of a queued run last started one (none: not lately)
    limit_last_starts: Mapping[tuple[str, str], datetime] = field(default_factory=dict)
    # the pools this pass places (None: all): its queued runs are theirs, and its stops are
    # made on their workers only; the other workers are seen for what they run
    partition: Held | None = None

    def places_on(self, worker: WorkerView) -> bool:
        return self.partition is None or self.partition.holds(worker.pool)
