"""The checkpoint sweeper: a run's checkpoint goes once the run has ended — at once, or
``checkpoint_keep_days`` later (docs/checkpoints.md); content in the cold store that no
checkpoint names goes after a grace. Off the runs' hot path: ending a run writes nothing for
it; reads refuse an ended run's checkpoint even before it is swept."""

from __future__ import annotations

from herder.store.checkpoint_contents import PURGE_BATCH
from herder.store.checkpoints import SWEEP_BATCH, CheckpointRepository

PASS_INTERVAL_SECONDS = 5.0  # also woken when an attempt ends
BETWEEN_BATCHES_SECONDS = 0.05


class CheckpointSweeper:
    name = "checkpoint-sweeper"

    def __init__(self, checkpoints: CheckpointRepository) -> None:
        self._checkpoints = checkpoints

    def step(self) -> float:
        swept = self._checkpoints.sweep()
        purged = self._checkpoints.purge()
        more = swept >= SWEEP_BATCH or purged >= PURGE_BATCH
        return BETWEEN_BATCHES_SECONDS if more else PASS_INTERVAL_SECONDS
