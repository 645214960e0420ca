"""Scenario 3: dispatcher decisions per second.

10,000 queued runs of 100 tenants (weights, some quotas, mixed priorities and sizes, label
requirements, a few gangs) against 500 workers of mixed sizes (some with GPUs, labels,
2 % draining). A decision is a run placed or given a waiting reason, so decisions/s is the
queued runs over the time of one pass.

1. The policy alone: ``plan()`` on a hand-built snapshot, on a fuller fleet (85-100 % in use,
   little room: most runs get a reason, preemption is tried) and an emptier one (0-10 % in
   use: most runs are placed, each searching the fleet). Median and min of several passes,
   and where one extra, instrumented pass spends its time.
2. Through the store: real ``Dispatcher.step()`` passes on a fresh database holding the same
   world with every worker idle: the first pass places most runs and writes every waiting
   reason; the second and later ones find the fleet full (steady state); the last reads the
   whole fleet again, as the dispatcher does every ``FLEET_REFRESH_SECONDS``.
3. Idle submit → start through the store (dispatch_idle.py): one run at a time to an idle
   worker, each placed by one dispatcher pass.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any

from bench.dispatch_idle import IdleResult, measure_idle
from bench.dispatch_store import StoreResult, measure_postgres, measure_sqlite
from bench.dispatch_workload import QUEUED_RUNS, WORKERS, World, make_world
from herder.domain.placement import policy
from herder.domain.placement.fleet import Fleet

SEED = 5
POLICY_PASSES = 5
FLEETS = {"fuller": (0.85, 1.0), "emptier": (0.0, 0.1)}  # fraction of each worker in use
# The policy's stages as methods of its pass (policy.py); the rest of a pass is ordering,
# quota checks and bookkeeping. A stage renamed in policy.py is left out of the split.
STAGES = {
    "_within_queue_quotas": "queue quotas",
    "_fit": "fit (feasibility, ranking)",
    "_no_room_reason": "no-room reasons",
    "_preempt": "preemption",
    "_reserve": "reservation",
}


@dataclass(frozen=True)
class PolicyResult:
    fleet: str
    running: int  # attempts already on the workers
    placed: int
    preemptions: int
    waiting: int
    median_seconds: float
    min_seconds: float
    split: dict[str, float]  # stage → seconds, from one instrumented pass

    @property
    def decisions_per_second(self) -> float:
        return QUEUED_RUNS / self.median_seconds


@dataclass(frozen=True)
class DispatchResult:
    policy: list[PolicyResult]
    stores: list[StoreResult]
    idle: list[IdleResult]


def measure(stores: list[str], home: Path) -> DispatchResult:
    results = [_measure_policy(name, make_world(SEED, load)) for name, load in FLEETS.items()]
    idle = make_world(SEED, (0.0, 0.0))
    measured = []
    for store in stores:
        if store == "postgresql":
            measured.append(measure_postgres(idle))
        else:
            measured.append(measure_sqlite(idle, home))
    return DispatchResult(results, measured, measure_idle(stores, home))


def _measure_policy(fleet: str, world: World) -> PolicyResult:
    snapshot = world.snapshot(datetime.now(UTC))
    seconds = []
    for _ in range(POLICY_PASSES):
        started = time.perf_counter()
        decided = policy.plan(snapshot)
        seconds.append(time.perf_counter() - started)
    split: dict[str, float] = {}
    with _timed_stages(split):
        started = time.perf_counter()
        policy.plan(snapshot)
        total = time.perf_counter() - started
    split["ordering, quota checks, bookkeeping"] = total - sum(split.values())
    return PolicyResult(
        fleet=fleet,
        running=world.running_attempts(),
        placed=len(decided.placements),
        preemptions=len(decided.preemptions),
        waiting=len(decided.waiting),
        median_seconds=statistics.median(seconds),
        min_seconds=min(seconds),
        split=split,
    )


def _timing(function: Callable[..., Any], stage: str, spent: dict[str, float]) -> Any:
    @wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - started

    return timed


@contextmanager
def _timed_stages(spent: dict[str, float]) -> Iterator[None]:
    """Time the policy's stages by wrapping them for one pass, then put them back."""
    pass_class = policy._Pass
    originals = {name: getattr(pass_class, name) for name in STAGES if hasattr(pass_class, name)}
    for name, original in originals.items():
        setattr(pass_class, name, _timing(original, STAGES[name], spent))
    setattr(policy, "Fleet", _timing(Fleet, "fleet set-up", spent))  # noqa: B010
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(pass_class, name, original)
        setattr(policy, "Fleet", Fleet)  # noqa: B010


def section(result: DispatchResult, machine: str, when: datetime) -> list[str]:
    """The markdown appended to RESULTS.md."""
    lines = [
        f"\n### Dispatch, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `python -m bench.run --scenario dispatch`: {QUEUED_RUNS:,} "
        f"queued runs, 100 tenants, {WORKERS} workers.\n",
        f"Policy alone (`plan()` on a hand-built snapshot, {POLICY_PASSES} passes):\n",
        "| fleet | attempts already running | placed | preemptions | waiting | pass p50 "
        "| min | decisions/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for one in result.policy:
        lines.append(
            f"| {one.fleet} | {one.running:,} | {one.placed:,} | {one.preemptions} "
            f"| {one.waiting:,} | {one.median_seconds:.2f} s | {one.min_seconds:.2f} s "
            f"| **{one.decisions_per_second:,.0f}** |"
        )
    stages = list(result.policy[0].split)
    lines += [
        "",
        "Where one instrumented pass spends its time (s):",
        "",
        "| fleet | " + " | ".join(stages) + " |",
        "|---|" + "---|" * len(stages),
    ]
    for one in result.policy:
        cells = " | ".join(f"{one.split.get(stage, 0.0):.2f}" for stage in stages)
        lines.append(f"| {one.fleet} | {cells} |")
    if result.stores:
        lines += _store_lines(result.stores)
    if result.idle:
        lines += _idle_lines(result.idle)
    return lines


def _store_lines(stores: list[StoreResult]) -> list[str]:
    lines = [
        "",
        "Through the store (`Dispatcher.step()`, every worker idle at first, a full pass every "
        "2 s; steady: median of the 3 passes after the second, the fleet kept; fleet re-read: "
        "the pass that reads the whole fleet again, every 10 s):",
        "",
        "| store | pass | queued | total | snapshot read | plan | apply and write reasons "
        "| placed | preempted | reasons written | decisions/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for store in stores:
        first, second = store.passes[0], store.passes[1]
        for label, one in (("first", first), ("second", second)):
            lines.append(
                f"| {store.store} | {label} | {one.queued:,} | {one.seconds:.2f} s "
                f"| {one.snapshot_seconds:.2f} "
                f"| {one.plan_seconds:.2f} | {one.apply_seconds:.2f} "
                f"| {one.placed:,} | {one.preempted} | {one.reasons_written:,} "
                f"| {one.queued / one.seconds:,.0f} |"
            )
        median = store.steady_median
        lines.append(
            f"| {store.store} | steady | {median('queued'):,.0f} | {median('seconds'):.2f} s "
            f"| {median('snapshot_seconds'):.2f} | {median('plan_seconds'):.2f} "
            f"| {median('apply_seconds'):.2f} "
            f"| {median('placed'):,.0f} | {median('preempted'):.0f} "
            f"| {median('reasons_written'):,.0f} "
            f"| **{median('queued') / median('seconds'):,.0f}** |"
        )
        one = store.refresh
        lines.append(
            f"| {store.store} | fleet re-read | {one.queued:,} | {one.seconds:.2f} s "
            f"| {one.snapshot_seconds:.2f} | {one.plan_seconds:.2f} | {one.apply_seconds:.2f} "
            f"| {one.placed:,} | {one.preempted} | {one.reasons_written:,} "
            f"| {one.queued / one.seconds:,.0f} |"
        )
    setup = ", ".join(f"{store.store} {store.setup_seconds:.1f} s" for store in stores)
    lines.append(f"\nSetting up (migrate, 100 tenants, 500 jobs, 500 workers, bulk runs): {setup}.")
    return lines


def _idle_lines(idle: list[IdleResult]) -> list[str]:
    lines = [
        "",
        f"Idle submit → start through the store (one run at a time to an idle worker, "
        f"{idle[0].runs} runs; in-process: no HTTP, no wake-up between threads):",
        "",
        "| store | submit → start p50 | p99 | dispatcher pass p50 | p99 |",
        "|---|---|---|---|---|",
    ]
    for one in idle:
        start, took = one.start_ms, one.pass_ms
        lines.append(
            f"| {one.store} | {statistics.median(start):.2f} ms "
            f"| {one.percentile(start, 0.99):.2f} ms | {statistics.median(took):.2f} ms "
            f"| {one.percentile(took, 0.99):.2f} ms |"
        )
    return lines
