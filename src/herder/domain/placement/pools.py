"""Placement within resource pools (docs/pools.md): who may use a pool, whether a placement
stays within its tenant's nominal share or borrows, and why a pooled run waits.

A run goes only to workers of its pool (``QueuedRun.pool``; None: the shared fleet). Its
tenant's use of the pool up to its nominal share is its own; past it in any of cpu, memory or
GPUs, the run **borrows** idle capacity, and its attempts are marked so: borrowed work is the
only work a tenant reclaiming its share may preempt (``preemption.choose``). Only a
preemptible run borrows: what may not be stopped could not be given back.
"""

from __future__ import annotations

from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import QueuedRun, Snapshot


def refusal(run: QueuedRun, snapshot: Snapshot) -> str | None:
    """Why the run cannot be placed in its pool at all (None: it may be)."""
    if run.pool is None:
        return None
    pool = snapshot.pools.get(run.pool)
    if pool is None:
        return f"pool {run.pool} does not exist (deleted?): it waits until a pool of that name does"
    if run.tenant_id not in pool.shares:
        return f"tenant {run.tenant_id} may not use pool {run.pool} (it has no share of it)"
    return None


def borrowers(snapshot: Snapshot) -> dict[str, set[str]]:
    """Each pool's tenants with borrowed work that may be stopped (not stopping already)."""
    found: dict[str, set[str]] = {}
    for worker in snapshot.workers:
        if worker.pool is None:
            continue
        for attempt in worker.running:
            if attempt.borrowed and attempt.preemptible and not attempt.preempting:
                found.setdefault(worker.pool, set()).add(attempt.tenant_id)
    return found


def share(run: QueuedRun, snapshot: Snapshot) -> Amount | None:
    """The run's tenant's nominal share of the run's pool; None outside pools."""
    if run.pool is None or run.pool not in snapshot.pools:
        return None
    return snapshot.pools[run.pool].shares.get(run.tenant_id)


def borrows(used: Amount, need: Amount, nominal: Amount | None) -> bool:
    """Whether taking ``need`` on top of ``used`` passes the nominal share in a resource the
    share gives (cpu, memory or GPUs above zero: one left at zero is not shared out, as
    slots never are); a share of nothing at all borrows everything. Outside pools nothing
    borrows. (Asked of every pooled run at least once a pass: plain comparisons.)"""
    if nominal is None:
        return False
    if nominal.cpu_milli == nominal.memory_mb == nominal.gpus == 0:
        return True
    return (
        0 < nominal.cpu_milli < used.cpu_milli + need.cpu_milli
        or 0 < nominal.memory_mb < used.memory_mb + need.memory_mb
        or 0 < nominal.gpus < used.gpus + need.gpus
    )


def may_borrow(run: QueuedRun) -> bool:
    return run.preemptible


def at_share(run: QueuedRun, used: Amount, nominal: Amount) -> str:
    """What a borrowing run waits for: ``tenant … uses 4 of its nominal 4 GPUs in pool
    a100, and none is idle to borrow``."""
    after = used + run.total_need
    parts = []
    if 0 < nominal.gpus < after.gpus:
        parts.append(f"{used.gpus} of its nominal {nominal.gpus} GPUs")
    if 0 < nominal.cpu_milli < after.cpu_milli:
        parts.append(f"cpu {used.cpu_milli / 1000:g} of its nominal {nominal.cpu_milli / 1000:g}")
    if 0 < nominal.memory_mb < after.memory_mb:
        parts.append(f"{used.memory_mb} of its nominal {nominal.memory_mb} MB")
    if not parts:
        parts.append("nothing of its own (its share is to borrow only)")
    if not may_borrow(run):
        return (
            f"tenant {run.tenant_id} uses {', '.join(parts)} in pool {run.pool}; only a "
            "preemptible run borrows past its share"
        )
    return (
        f"tenant {run.tenant_id} uses {', '.join(parts)} in pool {run.pool}, and none is idle "
        "to borrow"
    )
