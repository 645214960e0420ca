"""Placement with real workers of different labels and sizes: label requirements, a gang
across two workers, and a high-priority run preempting a low one."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from herder.client import HerderClient
from tests.system.conftest import Cluster, processes_matching, unique_sleep, wait_until

pytestmark = pytest.mark.system


def workers_by_name(herder: HerderClient, count: int) -> dict[str, str]:
    wait_until(lambda: len(herder.list_workers()) == count, 20, f"{count} workers registered")
    return {worker.name: worker.id for worker in herder.list_workers()}


def test_labels_sizes_and_a_gang_across_two_workers(
    database_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(database_url)
    for name, number, cpu in (("eu", 1, "2"), ("us", 2, "3")):  # a gang member on each
        cluster.start_worker(
            name, "--cpu", cpu, "--max-slots", "4", "--label", f"zone={name}-1",
            "--address", f"10.1.0.{number}",
        )  # fmt: skip
    with cluster.client() as herder:
        ids = workers_by_name(herder, 2)
        pinned = herder.create_job(
            "in-eu",
            {"runtime": "shell", "command": "echo hello", "requires": {"zone": "eu-1"},
             "resources": {"cpu": 0.1, "memory_mb": 64}},
        )  # fmt: skip
        gang = herder.create_job(
            "gang",
            {"runtime": "shell", "replicas": 2, "resources": {"cpu": 2, "memory_mb": 64},
             "command": 'echo "rank=$HERDER_RANK of $HERDER_WORLD_SIZE peers=$HERDER_PEERS '
                        'gpus=[$CUDA_VISIBLE_DEVICES]"'},
        )  # fmt: skip
        large = herder.create_job(
            "large",
            {"runtime": "shell", "command": "echo large", "resources": {"cpu": 3, "memory_mb": 64}},
        )
        runs = [herder.start_run(pinned.id) for _ in range(4)]
        big = herder.start_run(large.id)
        together = herder.start_run(gang.id)
        for run in [*runs, big, together]:
            assert herder.wait(run.id, timeout=60).state == "succeeded"
        placed_on = {herder.get_run(run.id).attempts[0].worker_id for run in runs}
        assert placed_on == {ids["eu"]}
        assert herder.get_run(big.id).attempts[0].worker_id == ids["us"]
        members = herder.get_run(together.id).attempts
        assert {member.worker_id for member in members} == {ids["eu"], ids["us"]}
        peers = ",".join(
            f"10.1.0.{1 if member.worker_id == ids['eu'] else 2}"
            for member in sorted(members, key=lambda member: member.rank)
        )
        for rank in (0, 1):
            text = "".join(chunk.text for chunk in herder.logs(together.id, rank=rank).chunks)
            assert text == f"rank={rank} of 2 peers={peers} gpus=[]\n"


def test_a_high_priority_run_preempts_a_low_one_which_runs_again_later(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster()
    cluster.start_worker("only", "--cpu", "1", "--max-slots", "1")
    marker = unique_sleep(60)
    with cluster.client() as herder:
        workers_by_name(herder, 1)
        low = herder.create_job(
            "batch",
            {"runtime": "shell", "priority": "low", "preemptible": True,
             "retry": {"max_attempts": 1},
             "command": f'if [ "$HERDER_ATTEMPT" = 1 ]; then exec {marker}; fi; echo again'},
        )  # fmt: skip
        urgent = herder.create_job(
            "urgent", {"runtime": "shell", "priority": "high", "command": "echo urgent"}
        )
        victim = herder.start_run(low.id)
        wait_until(lambda: bool(processes_matching(marker)), 20, "the low run is running")
        first = herder.start_run(urgent.id)
        assert herder.wait(first.id, timeout=30).state == "succeeded"
        detail = herder.wait(victim.id, timeout=30)
    assert detail.state == "succeeded"  # max_attempts 1: the preemption was not a try
    assert [attempt.state for attempt in detail.attempts] == ["preempted", "succeeded"]
    assert detail.preemptions == 1
    why = f"stopped for the higher-priority run {first.id} (high over low)"
    assert detail.attempts[0].reason == why  # the server's word, not the worker's guess
    assert not processes_matching(marker)
