"""What workers report about their attempts — output and how each ended — applied in one
unit of work per batch: output first, then completions, so an attempt's last words land
before it ends. Each item is fenced by its attempt number (``lifecycle.settle``): a report
from an attempt that is no longer current (a zombie) changes nothing and is recorded.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from herder.clock import Clock
from herder.domain.actors import worker_actor
from herder.domain.lifecycle.changes import combine
from herder.domain.lifecycle.settle import Receipt, is_current, refusal, settle
from herder.protocol import Completion, OutputChunk, ReportResult
from herder.store.database import Database
from herder.store.logs import MAX_LOG_BYTES_PER_ATTEMPT, append_output
from herder.store.runs.facts import facts_of_attempts
from herder.store.work import unit_of_work
from herder.telemetry import metrics


class AttemptRepository:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        rng: random.Random,
        *,
        max_log_bytes: int = MAX_LOG_BYTES_PER_ATTEMPT,
    ) -> None:
        self._db = database
        self._clock = clock
        self._rng = rng
        self.max_log_bytes = max_log_bytes

    def report(
        self, worker_id: str, output: Sequence[OutputChunk], completions: Sequence[Completion]
    ) -> list[ReportResult]:
        """A result per completion and per refused attempt's output."""
        by_attempt: dict[tuple[str, int], list[OutputChunk]] = defaultdict(list)
        for chunk in output:
            by_attempt[chunk.attempt_id, chunk.attempt].append(chunk)
        named = {c.attempt_id for c in completions} | {key[0] for key in by_attempt}
        with unit_of_work(self._db, self._clock, self._rng) as work:
            runs, attempts = facts_of_attempts(
                work.connection, named, work.now, lock=bool(completions)
            )
            refused = []
            for (attempt_id, number), chunks in by_attempt.items():
                if is_current(attempts.get(attempt_id), worker_id, number):
                    append_output(
                        self._db, work.connection, attempt_id, chunks, work.now,
                        self.max_log_bytes,
                    )  # fmt: skip
                else:
                    refused.append(
                        refusal(attempts.get(attempt_id), worker_id, attempt_id, number, "output")
                    )
            changes, settled = settle(
                runs, attempts, [completion.ending(worker_id) for completion in completions],
                actor=worker_actor(worker_id), now=work.now, rng=self._rng,
            )  # fmt: skip
            work.apply(combine([changes, *(part for part, _ in refused)]), facts=runs)
        metrics.zombie_reports(
            sum(1 for _, item in refused if item.receipt is Receipt.STALE)
            + sum(1 for item in settled if item.receipt is Receipt.STALE)
        )
        return [ReportResult.of(item) for _, item in refused] + [
            ReportResult.of(item) for item in settled
        ]
