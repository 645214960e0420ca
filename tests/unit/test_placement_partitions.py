"""Placement's partitions (``domain.placement.partitions``): the shared fleet and the pools,
in name order, dealt round to the partitions; the runs naming a pool that does not exist go
with the shared fleet; one partition holds everything."""

from __future__ import annotations

import pytest

from herder.domain.placement.partitions import Partition, partitions

POOLS = ("gpu", "a100", "batch")  # dealt as "", a100, batch, gpu


def test_the_pools_are_dealt_round_after_the_shared_fleet() -> None:
    first, second = (Partition(number, 2).held(POOLS) for number in range(2))
    assert (first.shared, first.pools) == (True, frozenset({"batch"}))
    assert (second.shared, second.pools) == (False, frozenset({"a100", "gpu"}))


def test_every_pool_and_the_shared_fleet_is_held_by_exactly_one_partition() -> None:
    for count in range(1, 6):
        held = [Partition(number, count).held(POOLS) for number in range(count)]
        for pool in (None, *POOLS, "deleted"):
            assert sum(partition.holds(pool) for partition in held) == 1


def test_a_run_naming_a_pool_that_does_not_exist_goes_with_the_shared_fleet() -> None:
    first, second = (Partition(number, 2).held(POOLS) for number in range(2))
    assert first.holds("deleted")
    assert first.holds(None)
    assert not second.holds("deleted")


def test_one_partition_holds_everything() -> None:
    whole = Partition()
    assert whole.whole
    assert all(whole.held(POOLS).holds(pool) for pool in (None, *POOLS, "deleted"))


@pytest.mark.parametrize(("number", "count"), [(2, 2), (-1, 2), (0, 0)])
def test_a_partition_that_does_not_exist_is_refused(number: int, count: int) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        Partition(number, count)


def test_a_count_below_one_is_refused_naming_its_setting() -> None:
    assert partitions(2) == [Partition(0, 2), Partition(1, 2)]
    with pytest.raises(ValueError, match="HERDER_DISPATCH_PARTITIONS must be 1 or more, not 0"):
        partitions(0)
