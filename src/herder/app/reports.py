"""A worker's report of its attempts — their output and how each ended — as one use case
in one unit of work: output first, then endings, so an attempt's last words land before it
ends. Each item is fenced by its attempt number (``lifecycle.settle``): a report from an
attempt that is no longer current (a zombie) changes nothing and is recorded.

Read → decide → apply → follow up → record, top to bottom: the walk from a task's end to
its successor's start is this function and the worklist it drains (``app.follow_ups``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence

from herder.app.follow_ups import follow_up
from herder.app.hand_off import hand_off
from herder.app.work import unit_of_work
from herder.domain.actors import worker_actor
from herder.domain.lifecycle.changes import combine
from herder.domain.lifecycle.facts import AttemptFacts, RunFacts
from herder.domain.lifecycle.settle import Receipt, Settled, is_current, refusal, settle
from herder.domain.models import Assignment
from herder.protocol import Completion, OutputChunk, ReportResult
from herder.store.runs.facts import facts_of_attempts
from herder.store.store import Store
from herder.telemetry import metrics, traces, tracing
from herder.telemetry.traces import ReportedAttempt


def report(
    store: Store, worker_id: str, output: Sequence[OutputChunk], completions: Sequence[Completion]
) -> list[ReportResult]:
    """A result per completion and per refused attempt's output."""
    results, _ = report_and_hand_off(store, worker_id, output, completions, room=0)
    return results


def report_and_hand_off(
    store: Store,
    worker_id: str,
    output: Sequence[OutputChunk],
    completions: Sequence[Completion],
    room: int,
) -> tuple[list[ReportResult], list[Assignment]]:
    """``report``'s results; and, when the worker has ``room``, the runs the report queued
    placed on it and handed over (``app.hand_off``), in the report's own transaction."""
    by_attempt: dict[tuple[str, int], list[OutputChunk]] = defaultdict(list)
    for chunk in output:
        by_attempt[chunk.attempt_id, chunk.attempt].append(chunk)
    named = {c.attempt_id for c in completions} | {key[0] for key in by_attempt}
    with unit_of_work(store) as work:
        # Read: the attempts named and their runs (with their owners), locked when any ends.
        runs, attempts = facts_of_attempts(work.connection, named, work.now, lock=bool(completions))
        # Output of the current attempts lands first; a stale attempt's is refused.
        refused = []
        for (attempt_id, number), chunks in by_attempt.items():
            if is_current(attempts.get(attempt_id), worker_id, number):
                store.attempts.append_output(work, attempt_id, chunks)
            else:
                refused.append(
                    refusal(attempts.get(attempt_id), worker_id, attempt_id, number, "output")
                )
        # Decide: how each attempt ended, and what its run does next (retry, end, …).
        changes, settled = settle(
            runs, attempts, [completion.ending(worker_id) for completion in completions],
            actor=worker_actor(worker_id), now=work.now, rng=work.rng,
        )  # fmt: skip
        if tracing.enabled():  # recorded first once committed: before the ends it made
            reported = list(_reported(worker_id, completions, settled, runs, attempts))
            work.after_commit.append(
                lambda: traces.attempts_reported(work.now, worker_id, reported)
            )
        # Apply: one applier, set-based; it notes the owners of the runs it ended.
        work.apply(combine([changes, *(part for part, _ in refused)]), facts=runs)
        # Follow up: each workflow run moves on (its successors start), each backfill steps,
        # until nothing is pending.
        follow_up(work)
        # Hand off: its successors placed on this worker, when it has room for them.
        given = hand_off(store, work, worker_id, room)
        follow_up(work)  # a run that could not be handed over ended: its owner moves on
    # Record.
    metrics.zombie_reports(
        sum(1 for _, item in refused if item.receipt is Receipt.STALE)
        + sum(1 for item in settled if item.receipt is Receipt.STALE)
    )
    results = [ReportResult.of(item) for _, item in refused]
    return results + [ReportResult.of(item) for item in settled], given


def _reported(
    worker_id: str,
    completions: Sequence[Completion],
    settled: Sequence[Settled],
    runs: Mapping[str, RunFacts],
    attempts: Mapping[str, AttemptFacts],
) -> Iterator[ReportedAttempt]:
    """Each completion of an attempt the server knows, with what it made of it."""
    receipts = {item.attempt_id: item.receipt for item in settled}
    for completion in completions:
        attempt = attempts.get(completion.attempt_id)
        if attempt is None or attempt.worker_id != worker_id:
            continue  # no span in a trace for a report about another worker's attempt
        if (run := runs.get(attempt.run_id)) is None:
            continue
        yield ReportedAttempt(
            completion.attempt_id, completion.attempt, run.id, run.workflow_run_id,
            str(completion.outcome), str(receipts.get(completion.attempt_id, "")),
        )  # fmt: skip
