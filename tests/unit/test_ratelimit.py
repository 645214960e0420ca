"""The submission rate limit: a token bucket per tenant, time given by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herder.api.errors import status_and_title
from herder.api.ratelimit import (
    QUOTA_TTL_SECONDS,
    RateLimited,
    SubmitLimiter,
    TokenBucket,
    bucket_shape,
)
from herder.domain.tenants import TenantQuotas


class ManualClock:
    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


@pytest.mark.parametrize(
    ("quotas", "shape"),
    [
        (TenantQuotas(), None),
        (TenantQuotas(submit_burst=10), None),  # a burst without a rate limits nothing
        (TenantQuotas(submit_rate_per_second=50), (50.0, 50.0)),  # one second's worth
        (TenantQuotas(submit_rate_per_second=0.2), (0.2, 1.0)),  # always at least one
        (TenantQuotas(submit_rate_per_second=5, submit_burst=20), (5.0, 20.0)),
    ],
)
def test_bucket_shape(quotas: TenantQuotas, shape: tuple[float, float] | None) -> None:
    assert bucket_shape(quotas) == shape


@pytest.mark.parametrize(
    ("rate", "capacity", "takes_at", "waits"),
    [
        # a full bucket admits its capacity at once, then one per 1/rate seconds
        (2.0, 3.0, [0, 0, 0, 0], [0, 0, 0, 0.5]),
        (2.0, 3.0, [0, 0, 0, 0.5, 0.5], [0, 0, 0, 0, 0.5]),
        (2.0, 3.0, [0, 0, 0, 0.25], [0, 0, 0, 0.25]),
        # idle time refills up to the capacity, never beyond
        (1.0, 2.0, [0, 0, 100, 100, 100], [0, 0, 0, 0, 1.0]),
        # slow rates wait long: Retry-After rounds this up
        (0.1, 1.0, [0, 0], [0, 10.0]),
        # a refused take takes nothing
        (1.0, 1.0, [0, 0, 0, 1], [0, 1.0, 1.0, 0]),
        # a clock reading older than the last one adds no tokens
        (1.0, 1.0, [5, 4], [0, 1.0]),
    ],
)
def test_token_bucket(
    rate: float, capacity: float, takes_at: list[float], waits: list[float]
) -> None:
    bucket = TokenBucket.full(rate, capacity, now=0.0)
    assert [bucket.take(now) for now in takes_at] == pytest.approx(waits)


def test_a_smaller_capacity_keeps_only_what_fits() -> None:
    bucket = TokenBucket.full(10.0, 10.0, now=0.0)
    bucket.reshape(1.0, 2.0, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == pytest.approx([0, 0, 1.0])


@given(
    rate=st.floats(min_value=0.01, max_value=1000),
    burst=st.integers(min_value=1, max_value=100),
    gaps=st.lists(st.floats(min_value=0, max_value=2), min_size=1, max_size=200),
)
def test_a_bucket_never_admits_more_than_its_burst_plus_its_rate(
    rate: float, burst: int, gaps: list[float]
) -> None:
    bucket = TokenBucket.full(rate, float(burst), now=0.0)
    now, admitted = 0.0, 0
    for gap in gaps:
        now += gap
        admitted += bucket.take(now) == 0.0
    assert admitted <= burst + rate * now + 1e-6


def _limiter(
    quotas: dict[str, TenantQuotas], clock: ManualClock
) -> tuple[SubmitLimiter, list[str]]:
    reads: list[str] = []

    def read(tenant_id: str) -> TenantQuotas:
        reads.append(tenant_id)
        return quotas[tenant_id]

    return SubmitLimiter(read, clock=clock), reads


def _submit(limiter: SubmitLimiter, tenant_id: str) -> None:
    if limiter.needs_quotas(tenant_id):
        limiter.refresh(tenant_id)
    limiter.take(tenant_id)


def test_the_limiter_refuses_with_the_rate_and_when_to_retry() -> None:
    clock = ManualClock()
    limiter, _ = _limiter({"ten_a": TenantQuotas(submit_rate_per_second=0.4)}, clock)
    _submit(limiter, "ten_a")
    with pytest.raises(RateLimited) as refused:
        _submit(limiter, "ten_a")
    assert status_and_title(type(refused.value))[0] == 429  # the API's map, not the error
    assert refused.value.retry_after_seconds == pytest.approx(2.5)
    assert refused.value.retry_after_header == 3  # whole seconds, rounded up
    assert "0.4 runs per second" in refused.value.detail
    clock.seconds += 2.5
    _submit(limiter, "ten_a")


def test_retry_after_is_at_least_one_second() -> None:
    clock = ManualClock()
    limiter, _ = _limiter({"ten_a": TenantQuotas(submit_rate_per_second=1000)}, clock)
    for _ in range(1000):
        _submit(limiter, "ten_a")
    with pytest.raises(RateLimited) as refused:
        _submit(limiter, "ten_a")
    assert refused.value.retry_after_seconds == pytest.approx(0.001)
    assert refused.value.retry_after_header == 1


def test_tenants_have_their_own_buckets_and_unlimited_ones_none() -> None:
    clock = ManualClock()
    limiter, _ = _limiter(
        {"ten_a": TenantQuotas(submit_rate_per_second=1), "ten_b": TenantQuotas()}, clock
    )
    _submit(limiter, "ten_a")
    for _ in range(10_000):
        _submit(limiter, "ten_b")
    with pytest.raises(RateLimited):
        _submit(limiter, "ten_a")


def test_quotas_are_read_once_per_ttl_and_changes_apply_after_it() -> None:
    clock = ManualClock()
    quotas = {"ten_a": TenantQuotas(submit_rate_per_second=1)}
    limiter, reads = _limiter(quotas, clock)
    _submit(limiter, "ten_a")
    quotas["ten_a"] = TenantQuotas(submit_rate_per_second=100)  # changed elsewhere
    clock.seconds += QUOTA_TTL_SECONDS / 2
    _submit(limiter, "ten_a")  # refilled by the old rate
    with pytest.raises(RateLimited):
        _submit(limiter, "ten_a")  # still the old rate: the quotas are cached
    assert reads == ["ten_a"]
    clock.seconds += QUOTA_TTL_SECONDS / 2
    _submit(limiter, "ten_a")  # quotas read again
    clock.seconds += 0.5
    for _ in range(50):  # half a second of the new rate
        _submit(limiter, "ten_a")
    assert reads == ["ten_a", "ten_a"]


def test_a_change_made_here_applies_on_the_next_submission_and_keeps_the_tokens() -> None:
    clock = ManualClock()
    quotas = {"ten_a": TenantQuotas(submit_rate_per_second=1, submit_burst=2)}
    limiter, reads = _limiter(quotas, clock)
    _submit(limiter, "ten_a")
    _submit(limiter, "ten_a")
    quotas["ten_a"] = TenantQuotas(submit_rate_per_second=1, submit_burst=50)
    limiter.quotas_changed("ten_a")
    with pytest.raises(RateLimited):
        _submit(limiter, "ten_a")  # a larger burst is no gift of tokens
    assert len(reads) == 2
    quotas["ten_a"] = TenantQuotas()
    limiter.quotas_changed("ten_a")
    _submit(limiter, "ten_a")  # the limit is gone
