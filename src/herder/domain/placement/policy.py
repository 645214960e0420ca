"""The dispatcher's decision for one pass: which queued runs go where, whom to preempt, and
why every other run waits. Pure: a snapshot and ``now`` in, a plan out.

The pipeline, per run in dispatch order (ordering.py):

0. debounce    — a run waiting out its limit's debounce window is held until it closes;
   budgets     — a spent time budget of the tenant holds the run back (budgets.py);
   pools       — a run goes only to its pool's workers (none: the shared fleet), if its
                 tenant may use the pool; runs within their tenant's nominal share are
                 considered before those that would borrow past it (pools.py);
1. quotas      — the tenant's queued-run window and in-use quotas hold the run back;
   limits      — a run whose key of a limit has its ``max_running`` running or its rate
                 spent waits; keys take turns in the order (limits.py);
2. feasibility — accepting workers with the run's labels and room for it now
                 (feasibility.py). Capacity only shrinks within a pass, so each shape (need
                 and labels) keeps its candidate workers for the pass (candidates.py), and a
                 shape that found no room is not tried again;
3. ranking     — best fit among them (ranking.py, kept up to date per shape by
                 candidates.py); a gang places every member or none;
4. preemption  — a run within its pool share with no room reclaims it from other tenants'
                 borrowed runs; a high-priority run with no room may stop lower-class
                 preemptible runs, in a pool never another tenant's within its share
                 (preemption.py);
5. reservation — a starving run with no room holds its best worker for the rest of the pass,
                 so small newer runs cannot keep taking the space it needs;
6. reasons     — every run left waiting gets a sentence saying why (reasons.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from herder.domain.placement import budgets, pools, preemption, reasons
from herder.domain.placement.candidates import Candidates
from herder.domain.placement.feasibility import could_ever_fit, eligible, fits_now
from herder.domain.placement.fleet import Fleet, WorkerRoom
from herder.domain.placement.limits import LimitKey, LimitsInPass, turns
from herder.domain.placement.ordering import Aging, dispatch_order, is_starving
from herder.domain.placement.ranking import SCORED_WORKERS, best
from herder.domain.placement.resources import Amount, dominant_share, total
from herder.domain.placement.snapshot import QueuedRun, RunningAttempt, Snapshot, TenantView
from herder.domain.placement.timeline import ForPriority, Reclaim, StopCause


@dataclass(frozen=True)
class PlacementSettings:
    aging: Aging = field(default_factory=Aging)
    preemption: preemption.Rules = field(default_factory=preemption.Rules)


@dataclass(frozen=True)
class Member:
    worker_id: str
    rank: int
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True)
class Placement:
    run_id: str
    members: tuple[Member, ...]
    borrowed: bool = False  # past its tenant's nominal share of the pool: reclaimable
    rate_keys: tuple[LimitKey, ...] = ()  # its keys of rate-limited limits: a start each


@dataclass(frozen=True)
class Preemption:
    attempt_id: str
    run_id: str  # the victim
    worker_id: str
    cause: StopCause  # a higher class, a reclaimed pool share or a spent hard budget


@dataclass
class Plan:
    placements: list[Placement] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # run id → reason


def plan(snapshot: Snapshot, settings: PlacementSettings = PlacementSettings()) -> Plan:
    return _Pass(snapshot, settings).run()


class _Pass:
    def __init__(self, snapshot: Snapshot, settings: PlacementSettings) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.settings = settings
        self.fleet = Fleet(snapshot)
        self.plan = Plan()
        self.no_room: dict[tuple[object, ...], str] = {}  # shape → reason, this pass
        self.candidates: dict[tuple[object, ...], Candidates] = {}  # by shape
        self.matching: dict[tuple[object, ...], list[WorkerRoom]] = {}  # by pool and labels
        self.spent = budgets.spent_budgets(snapshot)
        # what a run within its pool share could reclaim: each pool's tenants with borrowed
        # work, and the needs a tenant found nothing to reclaim for this pass (nothing frees
        # up within a pass, so no larger need will find anything either)
        self.lenders = pools.borrowers(snapshot)
        self.unreclaimable: dict[tuple[str, str], list[Amount]] = {}
        self.borrowing: dict[str, tuple[Amount, bool]] = {}  # run id → (use seen, answer)
        self.limits = LimitsInPass.of(
            snapshot.limits, snapshot.workers, snapshot.limit_starts, snapshot.now
        )
        self.turns = (
            turns(snapshot.queued, snapshot.limits, self.limits.running, snapshot.limit_last_starts)
            if snapshot.limits
            else {}
        )

    def tenant(self, tenant_id: str) -> TenantView:
        return self.snapshot.tenants.get(tenant_id) or TenantView(tenant_id)

    def in_pool(self, run: QueuedRun) -> list[WorkerRoom]:
        """The workers of the run's pool (the shared fleet's when it names none)."""
        key = ("pool", run.pool)
        found = self.matching.get(key)
        if found is None:
            found = self.matching[key] = [w for w in self.fleet.workers if w.view.pool == run.pool]
        return found

    def eligible(self, run: QueuedRun) -> list[WorkerRoom]:
        """The accepting workers of the run's pool with its labels, found once per pass for
        each pool and set of labels: neither changes within a pass, nor does draining."""
        key = (run.pool, tuple(sorted(run.requires.items())))
        found = self.matching.get(key)
        if found is None:
            found = self.matching[key] = eligible(self.in_pool(run), run.requires)
        return found

    def borrows(self, run: QueuedRun) -> bool:
        """Whether placing it now would take its tenant past its share of its pool (asked
        twice a pass: the answer is kept while the tenant's use of the pool is unchanged)."""
        nominal = pools.share(run, self.snapshot)
        if nominal is None or run.pool is None:
            return False
        used = self.fleet.used_in(run.tenant_id, run.pool)
        known = self.borrowing.get(run.id)
        if known is not None and known[0] is used:
            return known[1]
        answer = pools.borrows(used, run.total_need, nominal)
        self.borrowing[run.id] = (used, answer)
        return answer

    def share(self, tenant_id: str) -> float:
        used = self.fleet.used_by(tenant_id)
        return dominant_share(used, self.fleet.total) / self.tenant(tenant_id).weight

    def run(self) -> Plan:
        considered = self._within_queue_quotas(list(self.snapshot.queued))
        owned: list[QueuedRun] = []  # within their shares: considered first
        borrowing: list[QueuedRun] = []
        for run in considered:
            (borrowing if self.borrows(run) else owned).append(run)
        for runs in (owned, borrowing):
            for run in dispatch_order(runs, self.now, self.settings.aging, self.share, self.turns):
                reason = self._consider(run)
                if reason is not None:
                    self.plan.waiting[run.id] = reason
        placed_on = [w for w in self.snapshot.workers if self.snapshot.places_on(w)]
        for worker, attempt, budget in self.spent.stopping(placed_on):
            self.plan.preemptions.append(
                Preemption(attempt.attempt_id, attempt.run_id, worker.id, budget)
            )
        return self.plan

    def _within_queue_quotas(self, queued: list[QueuedRun]) -> list[QueuedRun]:
        """Each tenant's first ``max_queued`` runs (by class, then age); the rest wait. A run
        a full key holds back, or a debounce's window, takes no place there: it must not keep
        other runs out."""
        by_tenant: dict[str, list[QueuedRun]] = defaultdict(list)
        for run in queued:
            if run.not_before is not None and run.not_before > self.now:
                self.plan.waiting[run.id] = reasons.debounced(run.not_before)
                continue
            held = self.limits.holding(run) if run.limit_keys else None
            if held is not None:
                self.plan.waiting[run.id] = f"{reasons.needs(run)}; {held}"
                continue
            by_tenant[run.tenant_id].append(run)
        considered = []
        for tenant_id, runs in by_tenant.items():
            limit = self.tenant(tenant_id).quotas.max_queued
            runs.sort(key=lambda run: (-run.priority, run.queued_at, run.id))
            if limit is None:
                considered += runs
                continue
            considered += runs[:limit]
            for run in runs[limit:]:
                self.plan.waiting[run.id] = reasons.queue_quota(limit)
        return considered

    def _consider(self, run: QueuedRun) -> str | None:
        """Place the run, or say why it waits."""
        held = self.spent.holding(run)
        if held is not None:
            return held
        refused = pools.refusal(run, self.snapshot)
        if refused is not None:
            return f"{reasons.needs(run)}; {refused}"
        quotas = self.tenant(run.tenant_id).quotas
        over = reasons.over_quota(quotas, self.fleet.used_by(run.tenant_id), run.total_need)
        if over is not None:
            return f"{reasons.needs(run)}; {over}"
        held = self.limits.holding(run) if run.limit_keys else None
        if held is not None:
            return f"{reasons.needs(run)}; {held}"
        borrowing = self.borrows(run)
        if borrowing and not pools.may_borrow(run):
            return f"{reasons.needs(run)}; {self._at_share(run)}"
        shape = (run.need, run.replicas, run.pool, tuple(sorted(run.requires.items())))
        known = self.no_room.get(shape)
        if known is not None and not is_starving(run, self.now, self.settings.aging):
            return f"{known}; {self._at_share(run)}" if borrowing else known
        members = self._fit(run)
        if members is not None:
            self._take(run, members, borrowing)
            return None
        reason = self._no_room_reason(run)
        self.no_room.setdefault(shape, reason)
        if borrowing:
            return f"{reason}; {self._at_share(run)}"
        taken_back = self._reclaim(run)
        if taken_back is not None:
            reason = taken_back
        elif preemption.may_preempt(run):
            reason = self._preempt(run) or reason
        if is_starving(run, self.now, self.settings.aging):
            reason = self._reserve(run) or reason
        return reason

    def _reclaim(self, run: QueuedRun) -> str | None:
        """Take the run's pool share back from other tenants' borrowed work, unless there is
        none in the pool or a need no larger found none this pass."""
        if run.pool is None:
            return None
        if not self.lenders.get(run.pool, set()) - {run.tenant_id}:
            return None
        if run.replicas > 1:
            return self._reclaim_for_gang(run)
        failed = self.unreclaimable.setdefault((run.pool, run.tenant_id), [])
        if any(need.fits_in(run.need) for need in failed):
            return None
        reason = self._preempt(run, reclaim=True)
        if reason is None:
            failed.append(run.need)
        return reason

    def _reclaim_for_gang(self, run: QueuedRun) -> str | None:
        """Room for every member of a gang, each found as for a single run with the room the
        members before it take counted, and the victims stopped only if all are found."""
        rules, now = self.settings.preemption, self.now
        found: list[tuple[WorkerRoom, Amount, tuple[RunningAttempt, ...], str | None]] = []
        for _ in range(run.replicas):
            choice, _ = preemption.choose(run, self.eligible(run), now, rules, reclaim=True)
            if choice is None:
                for room, free, chosen, reserved in reversed(found):  # as it was
                    room.free, room.reserved_for = free, reserved
                    room.releasing -= total([victim.need for victim in chosen])
                    del room.victims[len(room.victims) - len(chosen) :]
                return None
            room = choice.worker
            found.append((room, room.free, choice.victims, room.reserved_for))
            room.victims.extend(choice.victims)
            room.releasing += total([victim.need for victim in choice.victims])
            room.free -= run.need  # this member's, while the next one looks
            room.reserve(run.id)
        for room, free, _, _ in reversed(found):  # not placed yet: only held for the gang
            room.free = free
        victims = [(room, victim) for room, _, chosen, _ in found for victim in chosen]
        cause = _reclaiming(run)
        self.plan.preemptions += [
            Preemption(victim.attempt_id, victim.run_id, room.id, cause) for room, victim in victims
        ]
        if not victims:
            return f"{reasons.needs(run)}; waiting for preempted runs to stop"
        names = ", ".join(victim.run_id for _, victim in victims)
        on = ", ".join(sorted({room.id for room, _ in victims}))
        count = f"{len(victims)} borrowed run{'s' if len(victims) != 1 else ''}"
        return (
            f"{reasons.needs(run)}; reclaiming its share in pool {run.pool}: preempting {count} "
            f"on {on} ({names}); its gang starts when they stop"
        )

    def _at_share(self, run: QueuedRun) -> str:
        """Why a run past its share waits (only a pooled run has one)."""
        nominal = pools.share(run, self.snapshot) or Amount()
        used = self.fleet.used_in(run.tenant_id, run.pool) if run.pool else Amount()
        return pools.at_share(run, used, nominal)

    def _fit(self, run: QueuedRun) -> list[tuple[WorkerRoom, Amount]] | None:
        """A worker per member, best fit each, trying the whole gang before taking any."""
        candidates = self._candidates(run)
        if run.replicas == 1:
            chosen = candidates.best(run.id)
            return None if chosen is None else [(chosen, run.need)]
        # member k ranks the first SCORED_WORKERS that fit with room left by the k - 1
        # before it, which at most k - 1 workers lack
        fitting = candidates.fitting(run.id, SCORED_WORKERS + run.replicas - 1)
        trial = {worker.id: worker.free for worker in fitting}
        members: list[tuple[WorkerRoom, Amount]] = []
        for _ in range(run.replicas):
            room = (w for w in fitting if run.need.fits_in(trial[w.id]))
            chosen = best(room, run.need, trial)
            if chosen is None:
                return None
            trial[chosen.id] -= run.need
            members.append((chosen, run.need))
        return members

    def _candidates(self, run: QueuedRun) -> Candidates:
        """The workers big enough for one member, kept for the pass by shape."""
        shape = (run.need, run.pool, tuple(sorted(run.requires.items())))
        known = self.candidates.get(shape)
        if known is None:
            workers = [worker for worker in self.eligible(run) if could_ever_fit(worker, run.need)]
            known = self.candidates[shape] = Candidates(workers, run.need)
        return known

    def _take(
        self, run: QueuedRun, members: list[tuple[WorkerRoom, Amount]], borrowed: bool
    ) -> None:
        placed = tuple(
            Member(worker.id, rank, worker.take(need))
            for rank, (worker, need) in enumerate(members)
        )
        self.fleet.use(run.tenant_id, run.total_need, run.pool)
        rate_keys: tuple[LimitKey, ...] = ()
        if run.limit_keys:
            self.limits.take(run)
            rate_keys = tuple(self.limits.rate_limited(run))
        self.plan.placements.append(Placement(run.id, placed, borrowed, rate_keys))

    def _no_room_reason(self, run: QueuedRun) -> str:
        if run.replicas > 1:
            fitting = self._members_that_fit(run)
            if fitting:
                return (
                    f"{reasons.needs(run)}; only {fitting} of {run.replicas} members fit on "
                    "the workers now, and a gang starts whole or not at all"
                )
        return self._no_room(run)

    def _no_room(self, run: QueuedRun) -> str:
        return reasons.no_room(run, self.in_pool(run), self.eligible(run))

    def _members_that_fit(self, run: QueuedRun) -> int:
        count = 0
        for worker in self.eligible(run):
            if fits_now(worker, run.need, run.id):
                free = worker.free
                while run.need.fits_in(free) and count < run.replicas:
                    free -= run.need
                    count += 1
        return count

    def _preempt(self, run: QueuedRun, *, reclaim: bool = False) -> str | None:
        """Make room by stopping runs: lower-class ones, or (``reclaim``) other tenants'
        borrowed ones in the run's pool, for a run within its share."""
        choice, cooling = preemption.choose(
            run, self.eligible(run), self.now, self.settings.preemption, reclaim=reclaim
        )
        if choice is None:
            if cooling:
                return (
                    f"{self._no_room(run)}; {cooling} lower-priority runs that could make "
                    "room were preempted recently (cool-down)"
                )
            return None
        worker = choice.worker
        worker.reserve(run.id)
        if not choice.victims:
            return f"{reasons.needs(run)}; waiting for preempted runs to stop on {worker.id}"
        for victim in choice.victims:
            worker.victims.append(victim)
            worker.releasing += victim.need
            cause: StopCause = (
                _reclaiming(run) if reclaim else ForPriority(run.id, run.priority, victim.priority)
            )
            self.plan.preemptions.append(
                Preemption(victim.attempt_id, victim.run_id, worker.id, cause)
            )
        names = ", ".join(victim.run_id for victim in choice.victims)
        count = f"{len(choice.victims)} {'borrowed' if reclaim else 'lower-priority'} run"
        doing = f"reclaiming its share in pool {run.pool}: preempting" if reclaim else "preempting"
        return (
            f"{reasons.needs(run)}; {doing} {count}{'s' if len(choice.victims) != 1 else ''} "
            f"on {worker.id} ({names}); it starts when they stop"
        )

    def _reserve(self, run: QueuedRun) -> str | None:
        """Hold the matching worker closest to fitting the run, so it drains toward it."""
        candidates = [
            worker
            for worker in self.eligible(run)
            if could_ever_fit(worker, run.need) and worker.reserved_for is None
        ]
        if not candidates or run.replicas > 1:
            return None
        worker = min(candidates, key=lambda w: (_missing(w.free, run.need), w.id))
        worker.reserve(run.id)
        return (
            f"{self._no_room(run)}; it has waited longest, so {worker.id} takes no other "
            "work until it fits"
        )


def _reclaiming(run: QueuedRun) -> Reclaim:
    """Why a run within its share stops borrowed work (only a pooled run reclaims)."""
    assert run.pool is not None
    return Reclaim(run.id, run.tenant_id, run.pool)


def _missing(free: Amount, need: Amount) -> float:
    """How far ``free`` is from ``need``, each resource as a fraction of the need."""
    gap = need - free
    total = 0.0
    for lack, want in (
        (gap.cpu_milli, need.cpu_milli),
        (gap.memory_mb, need.memory_mb),
        (gap.gpus, need.gpus),
        (gap.slots, need.slots),
    ):
        if lack > 0 and want:
            total += lack / want
    return total
