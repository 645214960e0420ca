"""What workers report about their attempts — output and how each ended — applied in one
unit of work per batch: output first, then completions, so an attempt's last words land
before it ends. Each item is fenced by its attempt number (``lifecycle.settle``): a report
from an attempt that is no longer current (a zombie) changes nothing and is recorded.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

from herder.clock import Clock
from herder.domain.lifecycle.changes import combine
from herder.domain.lifecycle.facts import Ending
from herder.domain.lifecycle.settle import Receipt, Settled, is_current, refusal, settle
from herder.domain.states import AttemptState
from herder.store.database import Database
from herder.store.logs import MAX_LOG_BYTES_PER_ATTEMPT, OutputChunk, append_output
from herder.store.runs.facts import facts_of_attempts
from herder.store.work import unit_of_work

__all__ = ["AttemptRepository", "Completion", "OutputChunk", "ReportResult", "Usage"]

_STATUS = {Receipt.APPLIED: 200, Receipt.STALE: 409, Receipt.NOT_YOURS: 404}


@dataclass(frozen=True)
class Usage:
    cpu_user_seconds: float
    cpu_system_seconds: float
    max_rss_kb: int


@dataclass(frozen=True)
class Completion:
    attempt_id: str
    attempt: int
    outcome: AttemptState
    exit_code: int | None
    reason: str
    usage: Usage | None

    def ending(self, worker_id: str) -> Ending:
        usage = self.usage
        return Ending(
            self.attempt_id, self.attempt, self.outcome, self.reason, self.exit_code, worker_id,
            usage.cpu_user_seconds if usage else None,
            usage.cpu_system_seconds if usage else None, usage.max_rss_kb if usage else None,
        )  # fmt: skip


@dataclass(frozen=True)
class ReportResult:
    attempt_id: str
    status: int  # 200 applied, 409 not the current attempt, 404 not this worker's
    detail: str


def _result(settled: Settled) -> ReportResult:
    return ReportResult(settled.attempt_id, _STATUS[settled.receipt], settled.detail)


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
        self, worker_id: str, output: list[OutputChunk], completions: list[Completion]
    ) -> list[ReportResult]:
        """A result per completion and per refused attempt's output."""
        by_attempt: dict[tuple[str, int], list[OutputChunk]] = defaultdict(list)
        for chunk in output:
            by_attempt[chunk.attempt_id, chunk.attempt].append(chunk)
        named = {c.attempt_id for c in completions} | {key[0] for key in by_attempt}
        with unit_of_work(self._db, self._clock, self._rng) as work:
            runs, attempts = facts_of_attempts(work.connection, named, lock=bool(completions))
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
                actor=f"worker:{worker_id}", now=work.now, rng=self._rng,
            )  # fmt: skip
            work.apply(combine([changes, *(part for part, _ in refused)]))
        return [_result(item) for _, item in refused] + [_result(item) for item in settled]
