"""Placement spread over several dispatchers: each holds the lease of one partition and
places the runs of its partition's pools onto its pools' workers, so no worker is placed onto
by two dispatchers and passes run side by side (docs/placement.md, "Partitions").

The pools, in name order after the shared fleet, are dealt round to the partitions; the
shared fleet's partition also takes the runs naming a pool that does not exist (they wait,
saying so). Every dispatcher reads the pools each pass, so a pool made or deleted moves the
deal at the next pass of each; for a pass two may then share a pool, which costs a skipped
placement at worst: applying re-checks workers, quotas and keys under locks (``recheck``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Partition:
    """Partition ``number`` of ``count``; one partition (the default) holds everything."""

    number: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.number < self.count:
            raise ValueError(f"partition {self.number} of {self.count} does not exist")

    @property
    def whole(self) -> bool:
        return self.count == 1

    def held(self, pools: Collection[str]) -> Held:
        """What this partition places, given the names of the pools that exist."""
        dealt = ["", *sorted(pools)]  # "": the shared fleet, first
        mine = [name for index, name in enumerate(dealt) if index % self.count == self.number]
        return Held(frozenset(name for name in mine if name), "" in mine, frozenset(pools))


def partitions(count: int) -> list[Partition]:
    """Every partition of ``count`` (``HERDER_DISPATCH_PARTITIONS``), each a dispatcher."""
    if count < 1:
        raise ValueError(f"HERDER_DISPATCH_PARTITIONS must be 1 or more, not {count}")
    return [Partition(number, count) for number in range(count)]


@dataclass(frozen=True, slots=True)
class Held:
    """The pools a partition places (``shared``: and the shared fleet, with the runs that
    name a pool that does not exist)."""

    pools: frozenset[str]
    shared: bool
    known: frozenset[str]  # every pool that exists

    def holds(self, pool: str | None) -> bool:
        """Whether a run of ``pool`` (resolved: its own, else its tenant's default; None:
        the shared fleet), or a worker in it, is this partition's."""
        if pool is None or pool not in self.known:
            return self.shared
        return pool in self.pools
