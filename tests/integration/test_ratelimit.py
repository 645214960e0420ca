"""Submissions over a tenant's rate answer 429 with Retry-After; the clock is moved by hand.
Every API process leases from one bucket per tenant in the store: see
``test_ratelimit_shared.py`` for several processes."""

from __future__ import annotations

import pytest

from herder.api.ratelimit import QUOTA_TTL_SECONDS, SubmitLimiter
from herder.domain.tenants import TenantQuotas
from tests.clocks import ManualClock
from tests.integration.conftest import Api


@pytest.fixture
def clock(api: Api) -> ManualClock:
    """The app's limiter, reading this clock instead of the system's."""
    manual = ManualClock()
    api.http.app.state.submit_limiter = SubmitLimiter(  # type: ignore[attr-defined]
        api.store.submit_buckets, api.store.access.tenant_quotas, clock=manual
    )
    return manual


def limit(api: Api, **quotas: float) -> None:
    response = api.http.patch(
        f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas}
    )
    assert response.status_code == 200, response.text


def submit(api: Api, job_id: object, **headers: str) -> int:
    response = api.http.post(f"/v1/jobs/{job_id}/runs", headers={**api.admin, **headers})
    status: int = response.status_code
    return status


def test_over_the_rate_a_submission_gets_429_with_retry_after(api: Api, clock: ManualClock) -> None:
    job = api.create_job()
    limit(api, submit_rate_per_second=2, submit_burst=3)
    assert [submit(api, job["id"]) for _ in range(3)] == [201, 201, 201]
    refused = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"  # 0.5 s, rounded up to whole seconds
    assert refused.headers["content-type"] == "application/problem+json"
    problem = refused.json()
    assert problem["status"] == 429
    assert "2 runs per second" in problem["detail"]
    assert "retry in 0.50 s" in problem["detail"]
    assert problem["retry_after_seconds"] == 1
    assert problem["rate_per_second"] == 2
    assert problem["burst"] == 3
    # The refused submission made no run.
    runs = api.http.get("/v1/runs", headers=api.admin, params={"job_id": job["id"]}).json()
    assert len(runs["items"]) == 3
    clock.advance(0.5)
    assert submit(api, job["id"]) == 201
    assert submit(api, job["id"]) == 429


def test_a_slow_rate_says_to_wait_longer(api: Api, clock: ManualClock) -> None:
    job = api.create_job()
    limit(api, submit_rate_per_second=0.1)
    assert submit(api, job["id"]) == 201
    refused = api.http.post(f"/v1/jobs/{job['id']}/runs", headers=api.admin)
    assert refused.headers["Retry-After"] == "10"
    clock.advance(9.9)
    assert submit(api, job["id"]) == 429
    clock.advance(0.1)
    assert submit(api, job["id"]) == 201


def test_only_the_limited_tenant_is_slowed(api: Api, clock: ManualClock) -> None:
    other_key = api.as_key(api.other_tenant_key())
    other_job = api.http.post(
        "/v1/jobs", headers=other_key, json={"name": "x", "runtime": "shell", "command": "true"}
    ).json()
    job = api.create_job()
    limit(api, submit_rate_per_second=1)
    assert submit(api, job["id"]) == 201
    assert submit(api, job["id"]) == 429
    for _ in range(5):
        response = api.http.post(f"/v1/jobs/{other_job['id']}/runs", headers=other_key)
        assert response.status_code == 201


def test_a_quota_change_through_the_api_applies_at_once(api: Api, clock: ManualClock) -> None:
    job = api.create_job()
    limit(api, submit_rate_per_second=1)
    assert submit(api, job["id"]) == 201
    assert submit(api, job["id"]) == 429
    response = api.http.patch(
        f"/v1/tenants/{api.tenant_id}",
        headers=api.admin,
        json={"quotas": {"submit_rate_per_second": None}},
    )
    assert response.status_code == 200
    assert [submit(api, job["id"]) for _ in range(5)] == [201] * 5


def test_a_change_made_by_another_replica_applies_within_seconds(
    api: Api, clock: ManualClock
) -> None:
    job = api.create_job()
    limit(api, submit_rate_per_second=1)
    assert submit(api, job["id"]) == 201
    # Another API process changes the quota: this one does not hear of it.
    api.store.access.update_tenant(
        api.tenant_id, quota_changes={"submit_rate_per_second": 1000, "submit_burst": 1000}
    )
    clock.advance(1)
    assert submit(api, job["id"]) == 201
    assert submit(api, job["id"]) == 429  # the old rate, from its cache
    clock.advance(QUOTA_TTL_SECONDS)
    assert submit(api, job["id"]) == 201  # the quotas are read again
    clock.advance(0.02)  # 20 ms of the new rate
    assert [submit(api, job["id"]) for _ in range(20)] == [201] * 20


def test_a_larger_burst_is_no_gift_of_tokens(api: Api, clock: ManualClock) -> None:
    job = api.create_job()
    limit(api, submit_rate_per_second=1, submit_burst=2)
    assert [submit(api, job["id"]) for _ in range(3)] == [201, 201, 429]
    limit(api, submit_rate_per_second=1, submit_burst=50)
    assert submit(api, job["id"]) == 429
    clock.advance(3)  # the bucket fills up to the new burst at the rate
    assert [submit(api, job["id"]) for _ in range(4)] == [201, 201, 201, 429]


def test_without_a_rate_quota_nothing_is_refused(api: Api, clock: ManualClock) -> None:
    job = api.create_job()
    limit(api, max_gpus=1)
    assert api.store.access.tenant_quotas(api.tenant_id) == TenantQuotas(max_gpus=1)
    assert {submit(api, job["id"]) for _ in range(30)} == {201}


def test_a_repeat_with_the_same_idempotency_key_counts_too(api: Api, clock: ManualClock) -> None:
    """The limit is on requests: a retrying client that repeats too fast is slowed down."""
    job = api.create_job()
    limit(api, submit_rate_per_second=1)
    assert submit(api, job["id"], **{"Idempotency-Key": "k"}) == 201
    assert submit(api, job["id"], **{"Idempotency-Key": "k"}) == 429
    clock.advance(1)
    assert submit(api, job["id"], **{"Idempotency-Key": "k"}) == 200


@pytest.mark.parametrize(
    "quotas",
    [
        {"submit_rate_per_second": 1e308},
        {"submit_rate_per_second": 1e308, "submit_burst": 2**62},
        {"submit_rate_per_second": 1e-300},
        {"submit_rate_per_second": 1, "submit_burst": 10**400},
    ],
)
def test_extreme_quotas_never_break_a_submission(
    api: Api, clock: ManualClock, quotas: dict[str, float]
) -> None:
    job = api.create_job()
    limit(api, **quotas)
    statuses = []
    for seconds in (0, 0, 0.001, 3600, 10**9):  # long idle times refill the most
        clock.advance(seconds)
        statuses.append(submit(api, job["id"]))
    assert set(statuses) <= {201, 429}
    refused = api.http.post(
        "/v1/runs/batch", headers=api.admin, json={"runs": [{"job_id": job["id"]}] * 1000}
    )
    assert refused.status_code in (200, 422, 429)
