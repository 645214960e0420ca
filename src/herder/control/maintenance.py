"""The maintenance loop: history's time slices made ahead of the clock, and history past
every tenant's retention removed (docs/design.md §2 History). On PostgreSQL whole slices are
detached, exported to the cold tier when they are past the hot window (and inside some
retention), then dropped; on SQLite expired runs are deleted a batch per pass, passes back to
back until none are left. Audit entries past their tenant's retention go too, on both stores,
a batch per pass, as do rate-limited keys' starts past the longest rate period, and events
and webhook deliveries past their retention, and workers lost for longer than theirs (each
an ``expiring`` pruner)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from herder.store.history.retention import DELETE_BATCH, HistoryRetention
from herder.store.limit_use import PRUNE_BATCH

PASS_INTERVAL_SECONDS = 600.0  # slices are made two weeks ahead: a late pass costs nothing
BETWEEN_BATCHES_SECONDS = 0.05  # lets other writers in between SQLite's delete batches


class Maintenance:
    name = "maintenance"

    def __init__(
        self,
        history: HistoryRetention,
        *,
        partitioned: bool,
        expiring: Sequence[Callable[[], bool]] = (),
    ) -> None:
        self._history = history
        self._partitioned = partitioned
        self._expiring = expiring  # each deletes a batch; True: more may be left

    def step(self) -> float:
        more_audit = self._history.delete_expired_audit() == DELETE_BATCH
        more_audit |= self._history.delete_old_limit_starts() == PRUNE_BATCH
        for prune in self._expiring:
            more_audit |= prune()
        if self._partitioned:
            self._history.prepare_slices()
            self._history.detach_expired()
            self._history.export_detached()
            self._history.drop_detached()
            self._history.remove_expired_cold()
            return BETWEEN_BATCHES_SECONDS if more_audit else PASS_INTERVAL_SECONDS
        if self._history.delete_expired_batch() == DELETE_BATCH or more_audit:
            return BETWEEN_BATCHES_SECONDS
        return PASS_INTERVAL_SECONDS
