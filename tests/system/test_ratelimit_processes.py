"""``herder server --processes 2``: both API processes lease from one bucket per tenant, so
together they admit the tenant's rate, not twice it."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from tests.system.conftest import Cluster

pytestmark = [pytest.mark.system, pytest.mark.postgres]

BURST = 20
RATE = 1.0  # per second: a lease is one token
SUBMISSIONS = 60


def test_two_api_processes_admit_one_rate_between_them(
    start_cluster: Callable[..., Cluster], system_postgres_url: str
) -> None:
    cluster = start_cluster(system_postgres_url, processes=2, scheduler=False)
    headers = {"Authorization": f"Bearer {cluster.credentials['api_key']}"}
    (tenant,) = httpx.get(f"{cluster.url}/v1/tenants", headers=headers).json()["items"]
    quotas = {"submit_rate_per_second": RATE, "submit_burst": BURST}
    patched = httpx.patch(
        f"{cluster.url}/v1/tenants/{tenant['id']}", headers=headers, json={"quotas": quotas}
    )
    assert patched.status_code == 200, patched.text
    body = {"name": "limited", "runtime": "shell", "command": "true"}
    job = httpx.post(f"{cluster.url}/v1/jobs", headers=headers, json=body).json()
    started = time.monotonic()
    statuses = [  # a connection each: the processes share them out
        httpx.post(f"{cluster.url}/v1/jobs/{job['id']}/runs", headers=headers).status_code
        for _ in range(SUBMISSIONS)
    ]
    elapsed = time.monotonic() - started
    assert set(statuses) <= {201, 429}
    admitted = statuses.count(201)
    # Per-process buckets would admit a burst each (40 and more).
    assert BURST <= admitted <= BURST + RATE * elapsed + 2, (admitted, elapsed)
