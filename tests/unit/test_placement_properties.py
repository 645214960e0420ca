"""Invariants of the placement policy over generated fleets and queues."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from herder.domain.placement.feasibility import has_labels
from herder.domain.placement.fleet import WorkerRoom
from herder.domain.placement.policy import plan
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import (
    QueuedRun,
    RunningAttempt,
    Snapshot,
    TenantView,
    WorkerView,
)
from herder.domain.tenants import TenantQuotas
from tests.unit.placement_snapshots import NOW

ZONES = ["eu", "us"]
TENANTS = ["t1", "t2", "t3"]

needs = st.builds(
    Amount,
    cpu_milli=st.sampled_from([100, 250, 500, 1000, 2000, 4000]),
    memory_mb=st.sampled_from([64, 256, 1024, 4096]),
    gpus=st.sampled_from([0, 0, 0, 1, 2]),
    slots=st.just(1),
)


@st.composite
def workers(draw: st.DrawFn, index: int) -> WorkerView:
    capacity = Amount(
        draw(st.sampled_from([1000, 2000, 4000, 8000])),
        draw(st.sampled_from([1024, 4096, 16384])),
        draw(st.sampled_from([0, 0, 2, 4])),
        draw(st.integers(1, 6)),
    )
    running: list[RunningAttempt] = []
    used, gpu = Amount(), 0
    for number, need in enumerate(draw(st.lists(needs, max_size=4))):
        if not need.fits_in(capacity - used):
            continue
        used += need
        running.append(
            RunningAttempt(
                attempt_id=f"att-{index}-{number}",
                run_id=f"running-{index}-{number}",
                tenant_id=draw(st.sampled_from(TENANTS)),
                priority=draw(st.integers(0, 2)),
                need=need,
                started_at=NOW - timedelta(seconds=draw(st.integers(1, 3600))),
                gpu_indices=tuple(range(gpu, gpu + need.gpus)),
                preemptible=draw(st.booleans()),
            )
        )
        gpu += need.gpus
    return WorkerView(
        id=f"w{index}",
        capacity=capacity,
        labels={"zone": draw(st.sampled_from(ZONES))},
        running=tuple(running),
        draining=draw(st.integers(0, 9)) == 0,
    )


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    fleet = [draw(workers(index)) for index in range(draw(st.integers(0, 6)))]
    queue = [
        QueuedRun(
            id=f"run-{number}",
            tenant_id=draw(st.sampled_from(TENANTS)),
            priority=draw(st.integers(0, 2)),
            queued_at=NOW - timedelta(seconds=draw(st.integers(0, 2000))),
            need=draw(needs),
            replicas=draw(st.sampled_from([1, 1, 1, 2, 3])),
            requires=draw(st.sampled_from([{}, {}, {"zone": "eu"}, {"zone": "mars"}])),
        )
        for number in range(draw(st.integers(0, 25)))
    ]
    quotas = st.builds(
        TenantQuotas,
        max_cpu=st.sampled_from([None, 2.0, 8.0]),
        max_gpus=st.sampled_from([None, 0, 2]),
        max_queued=st.sampled_from([None, 3]),
    )
    tenants = {name: TenantView(name, draw(st.integers(1, 3)), draw(quotas)) for name in TENANTS}
    return Snapshot(now=NOW, queued=tuple(queue), workers=tuple(fleet), tenants=tenants)


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_placement_never_over_commits_a_worker(snapshot: Snapshot) -> None:
    result = plan(snapshot)
    by_id = {worker.id: worker for worker in snapshot.workers}
    runs = {run.id: run for run in snapshot.queued}
    added: dict[str, Amount] = {}
    gpus: dict[str, list[int]] = {
        worker.id: [i for a in worker.running for i in a.gpu_indices] for worker in snapshot.workers
    }
    for placement in result.placements:
        run = runs[placement.run_id]
        assert [member.rank for member in placement.members] == list(range(run.replicas))
        for member in placement.members:
            worker = by_id[member.worker_id]
            assert not worker.draining
            assert has_labels(WorkerRoom(worker, Amount(), []), run.requires)
            assert len(member.gpu_indices) == run.need.gpus
            added[worker.id] = added.get(worker.id, Amount()) + run.need
            gpus[worker.id] += member.gpu_indices
    for worker_id, extra in added.items():
        worker = by_id[worker_id]
        assert (worker.used + extra).fits_in(worker.capacity)
        indices = gpus[worker_id]
        assert len(indices) == len(set(indices))
        assert all(0 <= index < worker.capacity.gpus for index in indices)


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_every_queued_run_is_placed_or_told_why_not(snapshot: Snapshot) -> None:
    result = plan(snapshot)
    placed = [placement.run_id for placement in result.placements]
    assert len(placed) == len(set(placed))
    assert not set(placed) & set(result.waiting)
    assert set(placed) | set(result.waiting) == {run.id for run in snapshot.queued}
    assert all(reason for reason in result.waiting.values())


@settings(max_examples=200, deadline=None)
@given(snapshots())
def test_quotas_are_never_passed_by_what_the_pass_places(snapshot: Snapshot) -> None:
    result = plan(snapshot)
    runs = {run.id: run for run in snapshot.queued}
    used: dict[str, Amount] = {}
    for worker in snapshot.workers:
        for attempt in worker.running:
            used[attempt.tenant_id] = used.get(attempt.tenant_id, Amount()) + attempt.need
    before = dict(used)
    for placement in result.placements:
        run = runs[placement.run_id]
        used[run.tenant_id] = used.get(run.tenant_id, Amount()) + run.total_need
    for tenant_id, amount in used.items():
        if amount == before.get(tenant_id):
            continue
        quotas = snapshot.tenants[tenant_id].quotas
        if quotas.max_cpu is not None:
            assert amount.cpu_milli <= quotas.max_cpu * 1000
        if quotas.max_gpus is not None:
            assert amount.gpus <= quotas.max_gpus


@st.composite
def streams(draw: st.DrawFn) -> list[list[QueuedRun]]:
    """An adversary's submissions, step by step, for a bounded number of steps."""
    steps = []
    for step in range(draw(st.integers(1, 30))):
        batch = [
            QueuedRun(
                id=f"s{step}-{number}",
                tenant_id=draw(st.sampled_from(TENANTS)),
                priority=draw(st.integers(0, 2)),
                queued_at=NOW + timedelta(seconds=60 * step),
                need=draw(needs),
                replicas=draw(st.sampled_from([1, 1, 2])),
            )
            for number in range(draw(st.integers(0, 6)))
        ]
        steps.append(batch)
    return steps


@settings(max_examples=40, deadline=None)
@given(streams(), st.integers(1, 5))
def test_every_feasible_run_is_eventually_placed(
    stream: list[list[QueuedRun]], duration_steps: int
) -> None:
    """A minute per step; each placed run holds its slots for ``duration_steps`` steps. Once the
    adversary stops, every run that fits some worker starts within a bounded time."""
    fleet = [
        WorkerView("small", Amount(2000, 4096, 0, 2)),
        WorkerView("large", Amount(8000, 16384, 2, 4)),
    ]

    def feasible(run: QueuedRun) -> bool:
        """Its members fit the empty fleet."""
        room = 0
        for worker in fleet:
            free = worker.capacity
            while run.need.fits_in(free):
                free -= run.need
                room += 1
        return room >= run.replicas

    queue: dict[str, QueuedRun] = {}
    running: dict[str, tuple[str, RunningAttempt, int]] = {}  # attempt → worker, attempt, end
    started: set[str] = set()
    horizon = len(stream) + 200
    for step in range(horizon):
        now = NOW + timedelta(seconds=60 * step)
        for key, (_, _, end) in list(running.items()):
            if end <= step:
                del running[key]
        if step < len(stream):
            queue.update({run.id: replace(run, queued_at=now) for run in stream[step]})
        views = tuple(
            replace(w, running=tuple(a for (wid, a, _) in running.values() if wid == w.id))
            for w in fleet
        )
        result = plan(Snapshot(now=now, queued=tuple(queue.values()), workers=views))
        for placement in result.placements:
            run = queue.pop(placement.run_id)
            started.add(run.id)
            for member in placement.members:
                attempt = RunningAttempt(
                    f"{run.id}-{member.rank}", run.id, run.tenant_id, run.priority, run.need,
                    now, member.gpu_indices,
                )  # fmt: skip
                running[attempt.attempt_id] = (member.worker_id, attempt, step + duration_steps)
        if not queue or not any(feasible(run) for run in queue.values()):
            break
    stuck = Counter(run.id for run in queue.values() if feasible(run))
    assert not stuck, f"feasible runs never placed: {sorted(stuck)}"
