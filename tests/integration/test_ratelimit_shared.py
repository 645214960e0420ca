"""Two API processes on one database (two apps, each with its own store connections and
limiter, one clock moved by hand) admit a tenant's rate between them, not twice it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.api.ratelimit import QUOTA_TTL_SECONDS
from herder.domain.errors import Unavailable
from herder.domain.submit_rate import BucketShape, LeaseAsk
from herder.settings import Settings
from herder.store.store import Store
from herder.store.submit_buckets import Lease
from tests.clocks import ManualClock
from tests.integration.conftest import Api


@dataclass
class Replica:
    http: TestClient
    store: Store


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def replicas(api: Api, clock: ManualClock, tmp_path: Path) -> Iterator[tuple[Replica, Replica]]:
    """Two API processes on the test's database, sharing nothing but it."""
    settings = Settings(home=tmp_path, database_url=api.store.database.url)
    stores = [Store(api.store.database.url, clock=clock) for _ in range(2)]
    clients = [TestClient(create_app(store, settings)) for store in stores]
    with clients[0] as first, clients[1] as second:
        yield Replica(first, stores[0]), Replica(second, stores[1])
    for store in stores:
        store.close()


def limit(api: Api, replica: Replica, tenant_id: str, **quotas: float | None) -> None:
    response = replica.http.patch(
        f"/v1/tenants/{tenant_id}", headers=api.admin, json={"quotas": quotas}
    )
    assert response.status_code == 200, response.text


def submit(replica: Replica, job_id: object, headers: dict[str, str]) -> int:
    status: int = replica.http.post(f"/v1/jobs/{job_id}/runs", headers=headers).status_code
    return status


def submit_alternately(
    replicas: tuple[Replica, Replica], job_id: object, headers: dict[str, str], times: int
) -> int:
    """How many of ``times`` submissions, sent to each replica in turn, were admitted."""
    statuses = [submit(replicas[turn % 2], job_id, headers) for turn in range(times)]
    assert set(statuses) <= {201, 429}
    return statuses.count(201)


def test_two_replicas_admit_the_tenants_rate_between_them(
    api: Api, replicas: tuple[Replica, Replica], clock: ManualClock
) -> None:
    job = api.create_job()
    limit(api, replicas[0], api.tenant_id, submit_rate_per_second=100, submit_burst=100)
    assert submit_alternately(replicas, job["id"], api.admin, 300) == 100  # not 200
    clock.advance(0.5)  # 50 more; each replica may still hold part of a lease (10)
    assert 50 <= submit_alternately(replicas, job["id"], api.admin, 200) <= 50 + 2 * 10
    clock.advance(1.0)  # a full bucket again, whatever each holds
    assert 100 <= submit_alternately(replicas, job["id"], api.admin, 300) <= 100 + 2 * 10


def test_retry_after_comes_from_the_shared_bucket(
    api: Api, replicas: tuple[Replica, Replica], clock: ManualClock
) -> None:
    first, second = replicas
    job = api.create_job()
    limit(api, first, api.tenant_id, submit_rate_per_second=2, submit_burst=3)
    assert [submit(first, job["id"], api.admin) for _ in range(3)] == [201] * 3
    refused = second.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin)
    assert refused.status_code == 429  # the other replica had not submitted anything
    assert refused.headers["Retry-After"] == "1"
    assert "retry in 0.50 s" in refused.json()["detail"]
    clock.advance(0.5)
    assert submit(second, job["id"], api.admin) == 201
    assert submit(first, job["id"], api.admin) == 429


def test_a_batch_takes_its_runs_from_the_shared_bucket_all_or_none(
    api: Api, replicas: tuple[Replica, Replica], clock: ManualClock
) -> None:
    first, second = replicas
    job = api.create_job()
    limit(api, first, api.tenant_id, submit_rate_per_second=10, submit_burst=5)
    runs = {"runs": [{"job_id": job["id"]}] * 3}
    assert first.http.post("/v1/runs/batch", headers=api.admin, json=runs).status_code == 200
    refused = second.http.post("/v1/runs/batch", headers=api.admin, json=runs)
    assert refused.status_code == 429  # two left of five
    assert refused.json()["retry_after_seconds"] == 1  # 0.1 s, rounded up
    assert "retry in 0.10 s" in refused.json()["detail"]
    clock.advance(0.1)
    assert second.http.post("/v1/runs/batch", headers=api.admin, json=runs).status_code == 200
    listed = api.http.get("/v1/runs", headers=api.admin, params={"job_id": job["id"]})
    assert len(listed.json()["items"]) == 6


def test_each_tenant_has_its_own_shared_bucket(
    api: Api, replicas: tuple[Replica, Replica], clock: ManualClock
) -> None:
    first, second = replicas
    other = api.as_key(api.other_tenant_key())
    other_tenant = first.http.get("/v1/tenants", headers=api.admin).json()["items"]
    other_id = next(tenant["id"] for tenant in other_tenant if tenant["name"] == "other")
    body = {"name": "x", "runtime": "shell", "command": "true"}
    other_job = first.http.post("/v1/jobs", headers=other, json=body).json()
    job = api.create_job()
    limit(api, first, api.tenant_id, submit_rate_per_second=1, submit_burst=5)
    limit(api, first, other_id, submit_rate_per_second=1, submit_burst=5)
    assert submit_alternately(replicas, job["id"], api.admin, 10) == 5
    assert submit_alternately(replicas, other_job["id"], other, 10) == 5  # untouched by it
    clock.advance(2)
    assert submit_alternately(replicas, job["id"], api.admin, 10) == 2
    assert submit(second, other_job["id"], other) == 201


def test_a_quota_change_applies_at_once_where_made_and_within_the_ttl_elsewhere(
    api: Api, replicas: tuple[Replica, Replica], clock: ManualClock
) -> None:
    first, second = replicas
    job = api.create_job()
    limit(api, first, api.tenant_id, submit_rate_per_second=1)
    assert submit_alternately(replicas, job["id"], api.admin, 4) == 1
    limit(api, first, api.tenant_id, submit_rate_per_second=None)
    assert [submit(first, job["id"], api.admin) for _ in range(5)] == [201] * 5
    assert submit(second, job["id"], api.admin) == 429  # its cached quotas, for now
    clock.advance(QUOTA_TTL_SECONDS)
    assert [submit(second, job["id"], api.admin) for _ in range(5)] == [201] * 5


def test_without_the_store_a_submission_that_needs_a_lease_answers_503(
    api: Api, replicas: tuple[Replica, Replica], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: nothing is admitted on tokens nobody leased."""
    first, _ = replicas
    job = api.create_job()
    limit(api, first, api.tenant_id, submit_rate_per_second=1)

    def unreachable(_tenant: str, _shape: BucketShape, _ask: LeaseAsk, _now: object) -> Lease:
        raise Unavailable("the database is unavailable: connection refused")

    monkeypatch.setattr(first.store.submit_buckets, "lease", unreachable)
    refused = first.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin)
    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/problem+json"
    monkeypatch.undo()
    assert submit(first, job["id"], api.admin) == 201  # the bucket was untouched
    assert submit(first, job["id"], api.admin) == 429
