"""What the store keeps of workers' reports about their attempts: their output, each
attempt's log capped at ``max_log_bytes``. Deciding how an attempt ended, and what follows,
is the report's use case (``herder.app.reports``)."""

from __future__ import annotations

from collections.abc import Sequence

from herder.protocol import OutputChunk
from herder.store.logs import MAX_LOG_BYTES_PER_ATTEMPT, append_output
from herder.store.unit import Work


class AttemptRepository:
    def __init__(self, *, max_log_bytes: int = MAX_LOG_BYTES_PER_ATTEMPT) -> None:
        self.max_log_bytes = max_log_bytes

    def append_output(self, work: Work, attempt_id: str, chunks: Sequence[OutputChunk]) -> None:
        """Store the chunks of the attempt's output that fit under its cap (the caller has
        checked the attempt is the worker's current one)."""
        append_output(work.connection, attempt_id, chunks, work.now, self.max_log_bytes)
