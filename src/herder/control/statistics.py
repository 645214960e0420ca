"""The statistics loop (PostgreSQL): fast-growing tables analysed between autovacuum's looks
(``store/statistics.py``). A lock waited out is a warning of the leased loop: next pass."""

from __future__ import annotations

from herder.store.statistics import TableStatistics

PASS_INTERVAL_SECONDS = 1.0  # a slice filling at 1,000 runs/s passes the floor in a second


class StatisticsKeeper:
    name = "statistics"

    def __init__(self, statistics: TableStatistics) -> None:
        self._statistics = statistics

    def step(self) -> float:
        self._statistics.refresh_stale()
        return PASS_INTERVAL_SECONDS
