"""Preemption: a high-priority run that fits nowhere may stop lower-class preemptible runs.

On one worker, the fewest victims that make room, and of those the cheapest: lowest class
first, then the least work lost (the most recently started). A run preempted less than the
cool-down ago is not chosen again, so two runs cannot preempt each other back and forth.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime

from herder.domain.placement.feasibility import could_ever_fit
from herder.domain.placement.fleet import WorkerRoom
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import QueuedRun, RunningAttempt

EXHAUSTIVE_CANDIDATES = 10  # beyond this many candidates on a worker, choose greedily


@dataclass(frozen=True)
class Rules:
    cooldown_seconds: float = 300.0
    max_victims: int = 8


@dataclass(frozen=True)
class Choice:
    worker: WorkerRoom
    victims: tuple[RunningAttempt, ...]  # empty: enough is already being freed there


def may_preempt(run: QueuedRun) -> bool:
    return run.priority >= 2 and run.replicas == 1


def choose(
    run: QueuedRun,
    eligible: list[WorkerRoom],
    now: datetime,
    rules: Rules,
    *,
    reclaim: bool = False,
) -> tuple[Choice | None, int]:
    """The best place among the ``eligible`` workers (accepting, with the run's labels) to
    make room for ``run``, and how many candidates sat out a cool-down. ``reclaim``: the run
    takes its pool share back, from other tenants' borrowed runs only, whatever their class."""
    usable = [
        worker
        for worker in eligible
        if could_ever_fit(worker, run.need) and worker.reserved_for in (None, run.id)
    ]
    for worker in usable:  # room being freed already: no new victim needed
        if run.need.fits_in(worker.free + worker.releasing):
            return Choice(worker, ()), 0
    best: tuple[tuple[int, int, float, str], Choice] | None = None
    cooling = 0
    for worker in usable:
        room = worker.free + worker.releasing
        candidates, cooled_out = _candidates(worker, run, now, rules, reclaim)
        cooling += cooled_out
        # a worker needing more victims than the best so far cannot win: look no further
        most = rules.max_victims if best is None else min(rules.max_victims, best[0][0])
        victims = _fewest_cheapest(candidates, run.need, room, most, now)
        if victims is None:
            continue
        key = (len(victims), *_cost(victims, now), worker.id)
        if best is None or key < best[0]:
            best = key, Choice(worker, victims)
    return (best[1] if best else None), cooling


def _candidates(
    worker: WorkerRoom, run: QueuedRun, now: datetime, rules: Rules, reclaim: bool
) -> tuple[list[RunningAttempt], int]:
    candidates, cooling = [], 0
    for attempt in worker.view.running:
        if not _may_stop(attempt, run, worker, reclaim):
            continue
        if attempt in worker.victims:
            continue
        last = attempt.last_preempted_at
        if last is not None and (now - last).total_seconds() < rules.cooldown_seconds:
            cooling += 1
            continue
        candidates.append(attempt)
    return candidates, cooling


def _may_stop(attempt: RunningAttempt, run: QueuedRun, worker: WorkerRoom, reclaim: bool) -> bool:
    """Whether ``run`` may stop ``attempt``: one not stopping already and preemptible; to
    reclaim a pool share, another tenant's borrowed one; else one of a lower class and, in
    a pool, never another tenant's within its share."""
    if not attempt.preemptible or attempt.preempting:
        return False
    if reclaim:
        return attempt.borrowed and attempt.tenant_id != run.tenant_id
    if attempt.priority >= run.priority:
        return False
    return worker.view.pool is None or attempt.borrowed or attempt.tenant_id == run.tenant_id


def _cost(victims: tuple[RunningAttempt, ...], now: datetime) -> tuple[int, float]:
    """Lower is cheaper: the victims' classes, then the seconds of work they lose."""
    return (
        sum(victim.priority for victim in victims),
        sum((now - victim.started_at).total_seconds() for victim in victims),
    )


def _frees_enough(victims: tuple[RunningAttempt, ...], need: Amount, room: Amount) -> bool:
    for victim in victims:
        room += victim.need
    return need.fits_in(room)


def _fewest_cheapest(
    candidates: list[RunningAttempt], need: Amount, room: Amount, max_victims: int, now: datetime
) -> tuple[RunningAttempt, ...] | None:
    if not _frees_enough(tuple(candidates), need, room):
        return None
    if len(candidates) <= EXHAUSTIVE_CANDIDATES:
        for size in range(1, min(max_victims, len(candidates)) + 1):
            fitting = [
                combo
                for combo in itertools.combinations(candidates, size)
                if _frees_enough(combo, need, room)
            ]
            if fitting:
                return min(fitting, key=lambda combo: _cost(combo, now))
        return None
    return _greedy(candidates, need, room, max_victims)


def _greedy(
    candidates: list[RunningAttempt], need: Amount, room: Amount, max_victims: int
) -> tuple[RunningAttempt, ...] | None:
    """Biggest first until it fits, then drop any victim not needed after all."""
    ordered = sorted(
        candidates,
        key=lambda attempt: (attempt.need.gpus, attempt.need.cpu_milli, attempt.need.memory_mb),
        reverse=True,
    )
    chosen: list[RunningAttempt] = []
    for attempt in ordered:
        chosen.append(attempt)
        if _frees_enough(tuple(chosen), need, room):
            break
    for attempt in list(reversed(chosen)):
        rest = tuple(victim for victim in chosen if victim is not attempt)
        if _frees_enough(rest, need, room):
            chosen.remove(attempt)
    if len(chosen) > max_victims or not _frees_enough(tuple(chosen), need, room):
        return None
    return tuple(chosen)
