"""Placement's waiting reasons alone: the run's need, then the first thing in its way — a
quota, no worker at all, missing labels, no worker big enough, or none with room now (how
many match and what they are short of) — in the exact words a user reads."""

from __future__ import annotations

import pytest

from herder.domain.placement.feasibility import eligible
from herder.domain.placement.reasons import needs, no_room, over_quota, queue_quota
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import QueuedRun, WorkerView
from herder.domain.tenants import TenantQuotas
from tests.unit.placement_snapshots import need, queued, rooms, running, worker

FULL = (running("busy", cpu=8, preemptible=False),)  # fills a default worker's cpu


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (queued("r"), "needs cpu 1, 256 MB"),
        (queued("r", cpu=0.5, memory_mb=512, gpus=1), "needs cpu 0.5, 512 MB, 1 GPU"),
        (queued("r", gpus=2), "needs cpu 1, 256 MB, 2 GPUs"),
        (queued("r", replicas=3), "needs 3 members of cpu 1, 256 MB at once"),
    ],
)
def test_needs_says_what_one_member_needs_and_how_many(run: QueuedRun, expected: str) -> None:
    assert needs(run) == expected


@pytest.mark.parametrize(
    ("quotas", "used", "expected"),
    [
        (TenantQuotas(), Amount(64000, 65536, 8), None),
        (TenantQuotas(max_cpu=2), Amount(cpu_milli=1000), None),  # exactly at the quota fits
        (TenantQuotas(max_cpu=2), Amount(cpu_milli=1500), "tenant quota cpu 1.5/2 in use"),
        (
            TenantQuotas(max_memory_mb=1024),
            Amount(memory_mb=900),
            "tenant quota memory 900/1024 MB in use",
        ),
        (TenantQuotas(max_gpus=4), Amount(gpus=4), "tenant quota gpus 4/4 in use"),
        (
            TenantQuotas(max_cpu=2, max_memory_mb=1024, max_gpus=4),
            Amount(2000, 1024, 4),
            "tenant quota cpu 2/2, memory 1024/1024 MB, gpus 4/4 in use",
        ),
    ],
)
def test_over_quota_names_each_quota_the_run_would_pass(
    quotas: TenantQuotas, used: Amount, expected: str | None
) -> None:
    assert over_quota(quotas, used, need(cpu=1, memory_mb=256, gpus=1)) == expected


def test_queue_quota_says_how_many_runs_are_considered() -> None:
    assert queue_quota(5) == (
        "tenant quota: only the tenant's first 5 queued runs are considered at once"
    )


@pytest.mark.parametrize(
    ("run", "workers", "expected"),
    [
        pytest.param(queued("r"), [], "needs cpu 1, 256 MB; no worker is available", id="no fleet"),
        pytest.param(
            queued("r"),
            [worker("a", draining=True), worker("b", draining=True)],
            "needs cpu 1, 256 MB; no worker is available (2 draining)",
            id="all draining",
        ),
        pytest.param(
            queued("r", requires={"zone": "mars", "arch": "arm"}),
            [worker("a"), worker("b", labels={"zone": "mars"}), worker("c", draining=True)],
            "needs cpu 1, 256 MB; none of 2 workers has arch=arm, zone=mars",
            id="no labels",
        ),
        pytest.param(
            queued("r", cpu=64),
            [worker("small", cpu=8), worker("larger", cpu=16, slots=4)],
            "needs cpu 64, 256 MB; no worker that could take it is big enough (the largest of 2 "
            "has cpu 16, 16384 MB, 4 slots)",
            id="never big enough",
        ),
        pytest.param(
            queued("r"),
            [worker("a", running=FULL), worker("b", memory_mb=300, running=FULL)],
            "needs cpu 1, 256 MB; 2 of 2 workers are available but none has room for it now "
            "(short of cpu on 2, memory on 1)",
            id="short of, most common first",
        ),
        pytest.param(
            queued("r", requires={"gpu": "yes"}, gpus=1),
            [worker("g", gpus=1, labels={"gpu": "yes"}, running=FULL), worker("plain")],
            "needs cpu 1, 256 MB, 1 GPU; 1 of 2 workers have gpu=yes but none has room for it "
            "now (short of cpu on 1)",
            id="with labels",
        ),
        pytest.param(
            queued("gang", replicas=2),
            [worker("a", running=FULL)],
            "needs 2 members of cpu 1, 256 MB at once; 1 of 1 workers are available but none "
            "has room for all its members now (short of cpu on 1)",
            id="a gang",
        ),
    ],
)
def test_no_room_says_whether_waiting_can_help(
    run: QueuedRun, workers: list[WorkerView], expected: str
) -> None:
    fleet = rooms(*workers)
    assert no_room(run, fleet, eligible(fleet, run.requires)) == expected


@pytest.mark.parametrize(
    ("held_for", "expected"),
    [
        (
            "older",
            "needs cpu 1, 256 MB; 1 of 1 workers are available but none has room for it now; "
            "some are held for runs that have waited longer",
        ),
        ("r", "needs cpu 1, 256 MB; 1 of 1 workers are available but none has room for it now"),
    ],
)
def test_no_room_says_when_workers_are_held_for_older_runs(held_for: str, expected: str) -> None:
    fleet = rooms(worker("w"))
    fleet[0].reserve(held_for)
    run = queued("r")
    assert no_room(run, fleet, eligible(fleet, run.requires)) == expected
