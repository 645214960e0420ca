"""Amounts of the resources placement counts: cpu (millicores), memory, GPUs and slots."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Amount:
    cpu_milli: int = 0
    memory_mb: int = 0
    gpus: int = 0
    slots: int = 0  # attempts: a worker runs at most ``max_slots`` at once

    def __add__(self, other: Amount) -> Amount:
        return Amount(
            self.cpu_milli + other.cpu_milli,
            self.memory_mb + other.memory_mb,
            self.gpus + other.gpus,
            self.slots + other.slots,
        )

    def __sub__(self, other: Amount) -> Amount:
        return Amount(
            self.cpu_milli - other.cpu_milli,
            self.memory_mb - other.memory_mb,
            self.gpus - other.gpus,
            self.slots - other.slots,
        )

    def times(self, count: int) -> Amount:
        return Amount(
            self.cpu_milli * count, self.memory_mb * count, self.gpus * count, self.slots * count
        )

    def fits_in(self, room: Amount) -> bool:
        return (
            self.cpu_milli <= room.cpu_milli
            and self.memory_mb <= room.memory_mb
            and self.gpus <= room.gpus
            and self.slots <= room.slots
        )

    def short_of(self, room: Amount) -> list[str]:
        """The names of the resources ``room`` has too little of, for waiting reasons."""
        names = []
        if self.cpu_milli > room.cpu_milli:
            names.append("cpu")
        if self.memory_mb > room.memory_mb:
            names.append("memory")
        if self.gpus > room.gpus:
            names.append("GPUs")
        if self.slots > room.slots:
            names.append("slots")
        return names

    def describe(self) -> str:
        """``cpu 0.5, 512 MB, 2 GPUs`` — what a person reads in a waiting reason."""
        parts = [f"cpu {self.cpu_milli / 1000:g}", f"{self.memory_mb} MB"]
        if self.gpus:
            parts.append(f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}")
        return ", ".join(parts)


def total(amounts: list[Amount]) -> Amount:
    """The sum of ``amounts``, added up as numbers rather than one ``Amount`` at a time."""
    return each_resource(amounts, sum)


def each_resource(amounts: Sequence[Amount], combine: Callable[[Iterable[int]], int]) -> Amount:
    """Each resource of ``amounts`` combined on its own: ``sum``, their total; ``max``, the
    peak of each, whichever amount holds it."""
    return Amount(
        combine(amount.cpu_milli for amount in amounts),
        combine(amount.memory_mb for amount in amounts),
        combine(amount.gpus for amount in amounts),
        combine(amount.slots for amount in amounts),
    )


def dominant_share(used: Amount, total: Amount) -> float:
    """The largest fraction of the fleet's cpu, memory or GPUs that ``used`` takes (DRF)."""
    shares = [
        used.cpu_milli / total.cpu_milli if total.cpu_milli else 0.0,
        used.memory_mb / total.memory_mb if total.memory_mb else 0.0,
        used.gpus / total.gpus if total.gpus else 0.0,
    ]
    return max(shares)
