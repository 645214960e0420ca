"""The placement policy on hand-made snapshots: order, fair share, quotas, fit, preemption,
gangs and the reasons runs wait."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from herder.domain.placement.policy import Plan, plan
from herder.domain.placement.snapshot import QueuedRun, Snapshot, TenantView, WorkerView
from herder.domain.tenants import TenantQuotas
from tests.unit.placement_snapshots import NOW, queued, running, worker

HIGH, MEDIUM, LOW = 2, 1, 0


def decide(
    queue: list[QueuedRun], workers: list[WorkerView], tenants: Sequence[TenantView] = ()
) -> Plan:
    snapshot = Snapshot(
        now=NOW,
        queued=tuple(queue),
        workers=tuple(workers),
        tenants={tenant.id: tenant for tenant in tenants},
    )
    return plan(snapshot)


def placed(result: Plan) -> list[str]:
    return [placement.run_id for placement in result.placements]


def where(result: Plan) -> dict[str, list[str]]:
    return {p.run_id: [member.worker_id for member in p.members] for p in result.placements}


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        ([queued("low", priority=LOW), queued("high", priority=HIGH)], ["high"]),
        ([queued("med", priority=MEDIUM), queued("low", priority=LOW)], ["med"]),
        ([queued("new", waited=1), queued("old", waited=5)], ["old"]),
        # age raises the class: a low run that waited 20 minutes counts as high
        ([queued("high", priority=HIGH), queued("aged", priority=LOW, waited=1200)], ["aged"]),
        # ten minutes lift a low run only to medium: high still goes first
        ([queued("aged", priority=LOW, waited=650), queued("high", priority=HIGH)], ["high"]),
    ],
)
def test_one_slot_goes_to_the_run_first_in_order(
    queue: list[QueuedRun], expected: list[str]
) -> None:
    assert placed(decide(queue, [worker("w", slots=1)])) == expected


def test_a_starving_run_goes_before_fair_share() -> None:
    queue = [queued("b-new", tenant="b", waited=1), queued("a-old", tenant="a", waited=400)]
    busy = worker("w", slots=2, running=(running("b-running", tenant="a", preemptible=False),))
    assert placed(decide(queue, [busy])) == ["a-old"]


def test_fair_share_follows_weights() -> None:
    queue = [queued(f"a{i}", tenant="a", waited=10 - i / 10) for i in range(8)]
    queue += [queued(f"b{i}", tenant="b", waited=10 - i / 10) for i in range(8)]
    result = decide(queue, [worker("w", cpu=8)], [TenantView("a", 1), TenantView("b", 3)])
    tenants = [run_id[0] for run_id in placed(result)]
    assert Counter(tenants) == {"a": 2, "b": 6}


def test_fair_share_compares_dominant_resources() -> None:
    # a's dominant resource is cpu (a quarter a run), b's is memory (an eighth a run): equal
    # dominant shares give b two runs for each of a's
    queue = [queued(f"a{i}", tenant="a", cpu=2, memory_mb=512, waited=10) for i in range(8)]
    queue += [queued(f"b{i}", tenant="b", cpu=0.25, memory_mb=2048, waited=10) for i in range(8)]
    result = decide(queue, [worker("w", cpu=8, memory_mb=16384)])
    tenants = "".join(run_id[0] for run_id in placed(result))
    assert tenants[:9] == "abbabbabb"


def test_a_tenant_already_using_the_fleet_waits_behind_one_that_is_not() -> None:
    busy = worker(
        "w", cpu=8, slots=6, running=tuple(running(f"r{i}", tenant="a") for i in range(4))
    )
    queue = [queued("a-next", tenant="a", waited=60), queued("b-next", tenant="b", waited=1)]
    assert placed(decide(queue, [busy])) == ["b-next", "a-next"]


def test_quotas_hold_runs_back_and_say_so() -> None:
    gpu_box = worker(
        "w", gpus=8, running=tuple(running(f"r{i}", gpus=1, gpu_indices=(i,)) for i in range(4))
    )
    quotas = TenantQuotas(max_gpus=4)
    queue = [queued("held", gpus=1), queued("other", tenant="t2", gpus=1)]
    result = decide(queue, [gpu_box], [TenantView("t1", quotas=quotas)])
    assert placed(result) == ["other"]
    assert result.waiting["held"] == "needs cpu 1, 256 MB, 1 GPU; tenant quota gpus 4/4 in use"


def test_cpu_and_memory_quotas_count_what_is_placed_in_the_same_pass() -> None:
    quotas = TenantQuotas(max_cpu=2, max_memory_mb=100000)
    queue = [queued(f"r{i}", waited=5 - i) for i in range(3)]
    result = decide(queue, [worker("w")], [TenantView("t1", quotas=quotas)])
    assert placed(result) == ["r0", "r1"]
    assert result.waiting["r2"].endswith("tenant quota cpu 2/2 in use")


def test_the_queued_quota_considers_only_the_oldest_runs() -> None:
    queue = [queued(f"r{i}", waited=10 - i) for i in range(3)]
    result = decide(queue, [worker("w")], [TenantView("t1", quotas=TenantQuotas(max_queued=2))])
    assert placed(result) == ["r0", "r1"]
    assert "only the tenant's first 2 queued runs" in result.waiting["r2"]


def test_best_fit_keeps_the_large_hole_for_the_large_run() -> None:
    workers = [
        worker("big", cpu=8),
        worker("snug", cpu=8, running=(running("x", cpu=7, preemptible=False),)),
    ]
    result = decide([queued("small", cpu=1, waited=2), queued("large", cpu=8, waited=1)], workers)
    assert where(result) == {"small": ["snug"], "large": ["big"]}


def test_runs_without_gpus_stay_off_gpu_workers_while_others_have_room() -> None:
    result = decide([queued("plain")], [worker("gpu", gpus=4), worker("cpu")])
    assert where(result) == {"plain": ["cpu"]}


@pytest.mark.parametrize(
    ("requires", "expected"),
    [({"zone": "eu-1"}, ["eu"]), ({"zone": "eu-1", "gpu_model": "h100"}, ["eu-h100"])],
)
def test_label_constraints_choose_the_workers(
    requires: dict[str, str], expected: list[str]
) -> None:
    workers = [
        worker("us", labels={"zone": "us-1"}),
        worker("eu", labels={"zone": "eu-1"}),
        worker("eu-h100", gpus=2, labels={"zone": "eu-1", "gpu_model": "h100"}),
    ]
    assert where(decide([queued("r", requires=requires)], workers))["r"] == expected


def test_gpu_indices_are_the_free_ones() -> None:
    box = worker("w", gpus=4, running=(running("x", gpus=1, gpu_indices=(0,), preemptible=False),))
    result = decide([queued("a", gpus=2, waited=2), queued("b", gpus=1, waited=1)], [box])
    indices = {p.run_id: p.members[0].gpu_indices for p in result.placements}
    assert indices == {"a": (1, 2), "b": (3,)}


def test_waiting_reasons_name_the_need_the_matching_workers_and_what_they_lack() -> None:
    h100 = {"gpu_model": "h100"}
    workers = [
        worker(
            f"h{i}",
            gpus=2,
            labels=h100,
            running=(running(f"x{i}", gpus=1, gpu_indices=(0,), preemptible=False),),
        )
        for i in range(3)
    ] + [worker("a0"), worker("a1")]
    result = decide([queued("r", gpus=2, requires=h100)], workers)
    assert result.waiting["r"] == (
        "needs cpu 1, 256 MB, 2 GPUs; 3 of 5 workers have gpu_model=h100 but none has room "
        "for it now (short of GPUs on 3)"
    )


@pytest.mark.parametrize(
    ("run", "workers", "reason"),
    [
        (queued("r", requires={"zone": "mars"}), [worker("w")], "none of 1 workers has zone=mars"),
        (queued("r", cpu=64), [worker("w", cpu=8)], "no worker that could take it is big enough"),
        (queued("r"), [worker("w", draining=True)], "no worker is available (1 draining)"),
        (queued("r"), [], "no worker is available"),
    ],
)
def test_waiting_reasons_say_when_waiting_alone_will_not_help(
    run: QueuedRun, workers: list[WorkerView], reason: str
) -> None:
    assert reason in decide([run], workers).waiting["r"]


def test_a_draining_worker_gets_nothing_new() -> None:
    result = decide([queued("r")], [worker("old", draining=True), worker("new")])
    assert where(result) == {"r": ["new"]}


def test_preemption_takes_the_fewest_victims() -> None:
    two_small = worker(
        "two",
        gpus=2,
        running=(running("s1", gpus=1, gpu_indices=(0,)), running("s2", gpus=1, gpu_indices=(1,))),
    )
    one_large = worker("one", gpus=2, running=(running("l1", gpus=2, gpu_indices=(0, 1)),))
    result = decide([queued("urgent", priority=HIGH, gpus=2)], [two_small, one_large])
    assert [(p.run_id, p.worker_id) for p in result.preemptions] == [("l1", "one")]
    assert "preempting 1 lower-priority run on one (l1)" in result.waiting["urgent"]


@pytest.mark.parametrize(
    ("victims", "chosen"),
    [
        ([dict(name="med", priority=MEDIUM), dict(name="low", priority=LOW)], "low"),
        ([dict(name="old", started_ago=3600), dict(name="young", started_ago=60)], "young"),
        ([dict(name="pinned", preemptible=False), dict(name="free")], "free"),
        (
            [dict(name="cooling", preempted_ago=10), dict(name="cooled", preempted_ago=900)],
            "cooled",
        ),
    ],
)
def test_preemption_takes_the_cheapest_victim(victims: list[dict[str, Any]], chosen: str) -> None:
    box = worker("w", cpu=2, running=tuple(running(**victim) for victim in victims))
    result = decide([queued("urgent", priority=HIGH)], [box])
    assert [p.run_id for p in result.preemptions] == [chosen]


def test_only_high_runs_preempt_and_only_lower_classes() -> None:
    box = worker("w", cpu=1, running=(running("low", priority=LOW),))
    assert decide([queued("medium", priority=MEDIUM)], [box]).preemptions == []
    peer = worker("w", cpu=1, running=(running("high", priority=HIGH),))
    assert decide([queued("urgent", priority=HIGH)], [peer]).preemptions == []


def test_runs_in_their_cool_down_are_not_preempted_again() -> None:
    box = worker("w", cpu=1, running=(running("victim", preempted_ago=30),))
    result = decide([queued("urgent", priority=HIGH)], [box])
    assert result.preemptions == []
    assert "preempted recently (cool-down)" in result.waiting["urgent"]


def test_no_new_victims_while_earlier_ones_are_still_stopping() -> None:
    box = worker(
        "w", cpu=1.5, running=(running("stopping", preempting=True), running("next", cpu=0.5))
    )
    result = decide([queued("urgent", priority=HIGH)], [box])
    assert result.preemptions == []
    assert "waiting for preempted runs to stop on w" in result.waiting["urgent"]


def test_the_worker_being_freed_takes_no_other_work_meanwhile() -> None:
    box = worker("w", cpu=2, running=(running("victim", cpu=2),))
    spare = worker("spare", cpu=0.5)
    result = decide(
        [queued("urgent", priority=HIGH, cpu=2), queued("small", cpu=0.25)], [box, spare]
    )
    assert where(result) == {"small": ["spare"]}


@pytest.mark.parametrize(("replicas", "placed_runs"), [(3, ["gang"]), (5, [])])
def test_a_gang_is_placed_whole_or_not_at_all(replicas: int, placed_runs: list[str]) -> None:
    workers = [worker("w1", slots=2), worker("w2", slots=2)]
    result = decide([queued("gang", replicas=replicas)], workers)
    assert placed(result) == placed_runs
    if placed_runs:
        (placement,) = result.placements
        assert [member.rank for member in placement.members] == [0, 1, 2]
        assert {member.worker_id for member in placement.members} == {"w1", "w2"}
    else:
        assert "only 4 of 5 members fit" in result.waiting["gang"]


def test_two_competing_gangs_never_end_half_placed() -> None:
    workers = [worker("w1", slots=2), worker("w2", slots=2)]
    result = decide([queued("a", replicas=3, waited=2), queued("b", replicas=3, waited=1)], workers)
    assert placed(result) == ["a"]
    assert len(result.placements[0].members) == 3
    assert "gang starts whole or not at all" in result.waiting["b"]


def test_a_starving_large_run_gets_a_worker_reserved_against_newer_small_runs() -> None:
    half_full = worker("w", cpu=4, running=(running("x", cpu=2, preemptible=False),))
    queue = [queued("large", cpu=4, waited=400), queued("small", cpu=1, waited=1)]
    result = decide(queue, [half_full])
    assert placed(result) == []
    assert "takes no other work until it fits" in result.waiting["large"]
    assert "some are held for runs that have waited longer" in result.waiting["small"]
