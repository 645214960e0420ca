"""The submission rate's leasing arithmetic: processes lease tokens from one shared bucket
(here a model of the store's statement) and spend them locally; time given by hand."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herder.domain.errors import RateLimited
from herder.domain.submit_rate import ROUNDING, Allowance, BucketShape, LeaseAsk, bucket_shape
from herder.domain.tenants import TenantQuotas

START = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("quotas", "shape"),
    [
        (TenantQuotas(), None),
        (TenantQuotas(submit_burst=10), None),  # a burst without a rate limits nothing
        (TenantQuotas(submit_rate_per_second=50), BucketShape(50.0, 50.0)),  # one second's
        (TenantQuotas(submit_rate_per_second=0.2), BucketShape(0.2, 1.0)),  # at least one
        (TenantQuotas(submit_rate_per_second=5, submit_burst=20), BucketShape(5.0, 20.0)),
        # numbers past what the arithmetic holds are kept to it
        (TenantQuotas(submit_rate_per_second=1e308), BucketShape(1e9, 1e9)),
        (TenantQuotas(submit_rate_per_second=1e-300), BucketShape(1e-9, 1.0)),
        (TenantQuotas(submit_rate_per_second=1, submit_burst=10**400), BucketShape(1, 1e15)),
    ],
)
def test_bucket_shape(quotas: TenantQuotas, shape: BucketShape | None) -> None:
    assert bucket_shape(quotas) == shape


@pytest.mark.parametrize(
    ("rate", "capacity", "lease_size"),
    [
        (1000, 1000, 100),  # a tenth of a second of rate
        (1000, 50, 5),  # but no more than a tenth of the burst
        (25, 25, 2),  # whole tokens
        (2, 3, 1),  # at least one
        (0.1, 1, 1),
    ],
)
def test_a_lease_is_a_tenth_of_a_second_of_rate(
    rate: float, capacity: float, lease_size: float
) -> None:
    assert BucketShape(rate, capacity).lease_size == lease_size


@dataclass
class SharedBucket:
    """What ``store/submit_buckets`` does in one statement, in Python."""

    shape: BucketShape
    tokens: float
    refilled_at: datetime

    def lease(self, ask: LeaseAsk, now: datetime) -> tuple[float, float]:
        elapsed = max(0.0, (now - self.refilled_at).total_seconds())
        refilled = min(self.shape.capacity, self.tokens + elapsed * self.shape.rate)
        granted = min(refilled, ask.want) if refilled >= ask.need - ROUNDING else 0.0
        self.tokens, self.refilled_at = max(0.0, refilled - granted), max(self.refilled_at, now)
        return granted, self.tokens


def submit(allowance: Allowance, bucket: SharedBucket, now: datetime, count: int = 1) -> float:
    """The limiter's steps: 0.0 when admitted, else the seconds to wait."""
    if allowance.spend(count):
        return 0.0
    if wait := allowance.wait(count, now):
        return wait
    ask = allowance.reserve(count)
    return allowance.settle(ask, *bucket.lease(ask, now), now)


def test_a_process_leases_a_tenth_of_a_second_and_spends_it_locally() -> None:
    shape = BucketShape(rate=100, capacity=100)
    bucket = SharedBucket(shape, tokens=100, refilled_at=START)
    allowance = Allowance(shape)
    assert submit(allowance, bucket, START) == 0.0
    assert (allowance.held, bucket.tokens) == (9, 90)  # one lease of 10, one spent
    for _ in range(9):
        assert submit(allowance, bucket, START) == 0.0
    assert (allowance.held, bucket.tokens) == (0, 90)  # no lease for those


def test_a_refusal_says_when_the_shared_bucket_will_have_enough() -> None:
    shape = BucketShape(rate=2, capacity=3)
    bucket = SharedBucket(shape, tokens=0.5, refilled_at=START)
    allowance = Allowance(shape)
    assert submit(allowance, bucket, START, count=3) == pytest.approx(1.25)
    assert allowance.held == 0  # nothing leased, nothing lost
    assert bucket.tokens == 0.5


def test_once_refused_a_process_refuses_on_its_own_until_the_tokens_can_be_there() -> None:
    shape = BucketShape(rate=1, capacity=1)
    bucket = SharedBucket(shape, tokens=0, refilled_at=START)
    allowance = Allowance(shape)
    assert submit(allowance, bucket, START) == pytest.approx(1.0)
    bucket.tokens = -100.0  # the store is not asked again: this would show if it were
    assert allowance.wait(1, START + timedelta(seconds=0.75)) == pytest.approx(0.25)
    assert allowance.wait(1, START + timedelta(seconds=1)) == 0.0  # may be there: ask


def test_a_batch_spends_what_the_process_holds_and_leases_the_rest() -> None:
    shape = BucketShape(rate=100, capacity=100)
    bucket = SharedBucket(shape, tokens=100, refilled_at=START)
    allowance = Allowance(shape, held=4)
    assert submit(allowance, bucket, START, count=30) == 0.0
    assert (allowance.held, bucket.tokens) == (0, 74)


def test_new_quotas_keep_at_most_a_lease_and_forget_the_shared_level() -> None:
    allowance = Allowance(BucketShape(1000, 1000), held=80, seen_tokens=0, seen_at=START)
    reshaped = allowance.reshaped(BucketShape(10, 10))
    assert (reshaped.held, reshaped.seen_tokens) == (1, None)
    assert allowance.reshaped(BucketShape(1000, 1000)) is allowance


def test_a_failed_lease_keeps_the_tokens_set_aside() -> None:
    allowance = Allowance(BucketShape(100, 100), held=3)
    ask = allowance.reserve(5)
    assert allowance.held == 0
    allowance.give_back(ask)
    assert allowance.held == 3


def test_retry_after_is_whole_seconds_at_least_one() -> None:
    assert RateLimited("x", retry_after_seconds=0.001, rate=1, burst=1).retry_after_header == 1
    assert RateLimited("x", retry_after_seconds=2.5, rate=1, burst=1).retry_after_header == 3


@given(
    rate=st.floats(min_value=0.5, max_value=1000),
    burst=st.integers(min_value=1, max_value=200),
    processes=st.integers(min_value=1, max_value=5),
    steps=st.lists(
        st.tuples(st.integers(0, 4), st.integers(1, 20), st.floats(0, 0.5)),
        min_size=1,
        max_size=200,
    ),
)
def test_processes_sharing_a_bucket_admit_at_most_its_burst_its_rate_and_a_lease_each(
    rate: float, burst: int, processes: int, steps: list[tuple[int, int, float]]
) -> None:
    """In any window: the burst, the rate over the window, and what the processes held
    (leased before it, spent in it) — less than a lease each."""
    shape = BucketShape(rate, float(burst))
    bucket = SharedBucket(shape, tokens=shape.capacity, refilled_at=START)
    allowances = [Allowance(shape) for _ in range(processes)]
    now, admitted = START, 0
    history = [(now, admitted)]
    for process, asked, gap in steps:
        now += timedelta(seconds=gap)
        count = min(asked, burst)
        if submit(allowances[process % processes], bucket, now, count) == 0.0:
            admitted += count
        assert all(allowance.held < shape.lease_size for allowance in allowances)
        history.append((now, admitted))
    for since, admitted_before in history:
        window = (now - since).total_seconds()
        bound = burst + rate * window + processes * shape.lease_size
        assert admitted - admitted_before <= bound + 1e-6


@given(
    rate=st.floats(min_value=0.5, max_value=1000),
    burst=st.integers(min_value=1, max_value=200),
    gaps=st.lists(st.floats(0, 0.5), min_size=1, max_size=200),
)
def test_one_process_alone_is_as_exact_as_a_bucket_of_its_own(
    rate: float, burst: int, gaps: list[float]
) -> None:
    shape = BucketShape(rate, float(burst))
    bucket = SharedBucket(shape, tokens=shape.capacity, refilled_at=START)
    allowance = Allowance(shape)
    now, admitted = START, 0
    for gap in gaps:
        now += timedelta(seconds=gap)
        admitted += submit(allowance, bucket, now) == 0.0
    assert admitted <= burst + rate * (now - START).total_seconds() + 1e-6
