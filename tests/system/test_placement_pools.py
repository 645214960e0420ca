"""Pools with real workers: a run naming a pool goes to the pool's workers, one naming none
to the workers in no pool."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.system.conftest import Cluster
from tests.system.test_placement import workers_by_name

pytestmark = pytest.mark.system


def test_runs_go_to_their_pools_workers(
    database_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(database_url)
    cluster.start_worker("in-a", "--cpu", "2", "--max-slots", "4", "--label", "pool=a")
    cluster.start_worker("shared", "--cpu", "2", "--max-slots", "4")
    with cluster.client() as herder:
        ids = workers_by_name(herder, 2)
        tenant_id = herder.list_tenants().items[0].id  # given 1 core of pool a
        herder.create_pool("a", {"shares": [{"tenant_id": tenant_id, "cpu": 1, "memory_mb": 1024}]})
        spec = {"runtime": "shell", "command": "echo hi", "resources": {"cpu": 0.5}}
        pooled = herder.create_job("pooled", {**spec, "pool": "a"})
        shared = herder.create_job("shared", spec)
        runs = [herder.start_run(pooled.id) for _ in range(3)]  # the third waits its turn
        anywhere = [herder.start_run(shared.id) for _ in range(3)]
        for run in [*runs, *anywhere]:
            assert herder.wait(run.id, timeout=60).state == "succeeded"
        assert {herder.get_run(run.id).attempts[0].worker_id for run in runs} == {ids["in-a"]}
        placed = {herder.get_run(run.id).attempts[0].worker_id for run in anywhere}
        assert placed == {ids["shared"]}
