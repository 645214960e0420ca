"""Why a queued run is still waiting, in words a person can act on.

Each explanation names the run's need and the first thing in the way: the tenant's quota,
missing labels, no worker big enough, or no worker with that much free right now (saying how
many workers match and what they are short of).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from herder.domain.placement.feasibility import could_ever_fit
from herder.domain.placement.fleet import WorkerRoom
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import QueuedRun
from herder.domain.tenants import TenantQuotas


def needs(run: QueuedRun) -> str:
    if run.replicas > 1:
        return f"needs {run.replicas} members of {run.need.describe()} at once"
    return f"needs {run.need.describe()}"


def over_quota(quotas: TenantQuotas, used: Amount, need: Amount) -> str | None:
    """``tenant quota gpus 4/4 in use`` for each quota the run would pass; None if none."""
    parts = []
    if quotas.max_cpu is not None and used.cpu_milli + need.cpu_milli > quotas.max_cpu * 1000:
        parts.append(f"cpu {used.cpu_milli / 1000:g}/{quotas.max_cpu:g}")
    if quotas.max_memory_mb is not None and used.memory_mb + need.memory_mb > quotas.max_memory_mb:
        parts.append(f"memory {used.memory_mb}/{quotas.max_memory_mb} MB")
    if quotas.max_gpus is not None and used.gpus + need.gpus > quotas.max_gpus:
        parts.append(f"gpus {used.gpus}/{quotas.max_gpus}")
    if not parts:
        return None
    return "tenant quota " + ", ".join(parts) + " in use"


def queue_quota(limit: int) -> str:
    return f"tenant quota: only the tenant's first {limit} queued runs are considered at once"


def _labels(requires: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(requires.items()))


def no_room(run: QueuedRun, workers: list[WorkerRoom], matching: list[WorkerRoom]) -> str:
    """Nothing fits now: say whether waiting can help, and what the ``matching`` workers
    (the accepting ones with the run's labels) lack."""
    draining = sum(1 for worker in workers if not worker.accepts_work)
    accepting = len(workers) - draining
    if not accepting:
        more = f" ({draining} draining)" if draining else ""
        return f"{needs(run)}; no worker is available{more}"
    having = f"have {_labels(run.requires)}" if run.requires else "are available"
    if not matching:
        return f"{needs(run)}; none of {accepting} workers has {_labels(run.requires)}"
    big_enough = [worker for worker in matching if could_ever_fit(worker, run.need)]
    if not big_enough:
        largest = max(matching, key=lambda worker: worker.view.capacity.cpu_milli)
        return (
            f"{needs(run)}; no worker that could take it is big enough (the largest of "
            f"{len(matching)} has {largest.view.capacity.describe()}, "
            f"{largest.view.capacity.slots} slots)"
        )
    short: Counter[str] = Counter()
    reserved = 0
    for worker in big_enough:
        if worker.reserved_for not in (None, run.id):
            reserved += 1
        for name in run.need.short_of(worker.free):
            short[name] += 1
    lacking = ", ".join(f"{name} on {count}" for name, count in short.most_common())
    detail = f" (short of {lacking})" if lacking else ""
    if reserved:  # not how many: that count would change every reason with each reservation
        detail += "; some are held for runs that have waited longer"
    members = "all its members" if run.replicas > 1 else "it"
    return (
        f"{needs(run)}; {len(matching)} of {accepting} workers {having} but none has "
        f"room for {members} now{detail}"
    )


def debounced(until: datetime) -> str:
    return f"debounced: submissions with its key join it until {until:%H:%M:%S} UTC, when it starts"
