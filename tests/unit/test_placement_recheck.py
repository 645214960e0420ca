"""What applying a plan checks again under its locks (``domain.placement.recheck``): a
tenant's in-use quotas over every member of a placement, and its keys' room; a refused
placement counts against nothing."""

from __future__ import annotations

from datetime import timedelta

from herder.domain.placement.recheck import Rooms, binds_in_use
from herder.domain.placement.resources import Amount
from herder.domain.placement.snapshot import KeyStarts, LimitView
from herder.domain.tenants import TenantQuotas
from tests.unit.placement_snapshots import NOW

CPU_2 = TenantQuotas(max_cpu=2)
KEY = ("lim_1", "acme")


def one_cpu(members: int = 1) -> Amount:
    return Amount(1000, 256, 0, 1).times(members)


def test_only_in_use_quotas_bind_at_apply() -> None:
    assert not binds_in_use(TenantQuotas(max_queued=5))
    assert binds_in_use(TenantQuotas(max_gpus=0))


def test_a_quota_takes_placements_until_the_measured_use_fills_it() -> None:
    rooms = Rooms({"t1": CPU_2}, {"t1": Amount(1000, 0, 0, 0)})
    assert rooms.take("t1", one_cpu(), ())
    assert not rooms.take("t1", one_cpu(), ())


def test_a_gang_counts_every_member_against_the_quota() -> None:
    assert not Rooms({"t1": CPU_2}).take("t1", one_cpu(members=3), ())
    assert Rooms({"t1": CPU_2}).take("t1", one_cpu(members=2), ())


def test_a_tenant_without_in_use_quotas_is_never_refused() -> None:
    rooms = Rooms({"t1": TenantQuotas()})
    assert all(rooms.take("t1", one_cpu(members=100), ()) for _ in range(10))


def test_a_full_key_refuses_and_the_refusal_takes_nothing_from_the_tenant() -> None:
    limit = LimitView("lim_1", "partner-api", max_running=1)
    rooms = Rooms.measured({"t1": CPU_2}, {}, {"lim_1": limit}, {KEY: 1}, {}, NOW)
    assert not rooms.take("t1", one_cpu(), (KEY,))
    assert rooms.take("t1", one_cpu(members=2), ())  # the whole quota is still there


def test_a_keys_rate_counts_the_starts_measured_and_those_taken() -> None:
    limit = LimitView("lim_1", "partner-api", rate_count=2, rate_period_seconds=3600)
    starts = {KEY: KeyStarts(1, NOW - timedelta(minutes=5))}
    rooms = Rooms.measured({"t1": TenantQuotas()}, {}, {"lim_1": limit}, {}, starts, NOW)
    assert rooms.take("t1", one_cpu(), (KEY,))
    assert not rooms.take("t1", one_cpu(), (KEY,))


def test_a_key_of_a_deleted_limit_binds_nothing() -> None:
    rooms = Rooms.measured({"t1": TenantQuotas()}, {}, {}, {KEY: 50}, {}, NOW)
    assert rooms.take("t1", one_cpu(), (KEY,))
