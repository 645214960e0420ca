"""The log compactor's pacing: a batch per pass, at once while batches are full, no sooner
than a second after the last otherwise; a damaged attempt is skipped from then on."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from herder.control.compactor import IDLE_SECONDS, MIN_PASS_SECONDS, LogCompactor
from herder.store.log_compaction import CompactionPass


class Compaction:
    def __init__(self, passes: list[CompactionPass]) -> None:
        self.passes = passes
        self.skipped: list[set[str]] = []

    def compact_ended(self, *, skip: Collection[str] = ()) -> CompactionPass:
        self.skipped.append(set(skip))
        return self.passes.pop(0)


def compactor(passes: list[CompactionPass], now: list[float]) -> tuple[LogCompactor, Compaction]:
    compaction = Compaction(passes)
    fake: Any = compaction
    return LogCompactor(fake, monotonic=lambda: now[0]), compaction


def test_full_batches_follow_at_once_and_then_it_rests() -> None:
    now = [100.0]
    loop, compaction = compactor(
        [CompactionPass(["a"], [], more=True), CompactionPass(["b"], [], more=False)], now
    )
    assert loop.step() == 0.0
    assert loop.step() == IDLE_SECONDS
    now[0] += 0.25  # woken by an end a quarter of a second later: waits out the pacing
    assert loop.step() == MIN_PASS_SECONDS - 0.25
    assert compaction.passes == []


def test_a_damaged_attempt_is_skipped_by_later_passes() -> None:
    now = [0.0]
    loop, compaction = compactor(
        [CompactionPass([], ["bad"], more=False), CompactionPass(["ok"], [], more=False)], now
    )
    loop.step()
    now[0] += MIN_PASS_SECONDS
    loop.step()
    assert compaction.skipped == [set(), {"bad"}]
