"""A unit of work's value: one write transaction with one ``now`` read from the injected
clock, the one applier of a decision's ``Changes``, and the worklist of what those changes
leave to follow (``FollowUps``). ``apply`` never calls anything back: it notes the workflow
runs and backfills it touched, and the use case that holds the unit of work drains the list
(``app.follow_ups.follow_up``) before it commits — Nomad's follow-up evaluations, in one
transaction; the store's unit of work refuses to commit while any is pending. A store write
that starts, resumes or cancels a workflow run notes it here too (``follow``), for the drain
to move on. This module imports none of what follows, so every store module may import it."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from herder.domain.lifecycle.changes import Changes
from herder.domain.lifecycle.facts import Ending, RunFacts
from herder.domain.lifecycle.settle import Settled, settle
from herder.domain.states import RunState
from herder.domain.workflows.states import WorkflowRunState
from herder.store.database import Database
from herder.store.runs.facts import facts_of_attempts
from herder.store.runs.writes import Applied, apply_changes
from herder.telemetry import metrics, traces, tracing


@dataclass
class FollowUps:
    """What applied changes leave to follow, in this transaction: each owner once a round."""

    workflow_runs: set[str] = field(default_factory=set)  # a task run of theirs ended
    backfills: set[str] = field(default_factory=set)  # a run of theirs ended
    ended_workflow_runs: set[str] = field(default_factory=set)  # running ones that ended
    ended_runs: set[str] = field(default_factory=set)  # ended, owners not yet read

    def __bool__(self) -> bool:
        return bool(
            self.workflow_runs or self.backfills or self.ended_workflow_runs or self.ended_runs
        )


@dataclass(frozen=True)
class Work:
    database: Database
    connection: Connection
    now: datetime
    rng: random.Random
    after_commit: list[Callable[[], None]] = field(default_factory=list)  # metrics to count
    pending: FollowUps = field(default_factory=FollowUps)
    queued: list[str] = field(default_factory=list)  # runs it inserted queued, in order
    # tracing on: ended runs whose workflow run the drain reads (``follow_ups``), by end state
    ends_to_trace: dict[str, RunState] = field(default_factory=dict)

    def apply(self, changes: Changes, *, facts: Mapping[str, RunFacts] | None = None) -> Applied:
        """Apply the changes and note what they touched on the worklist: the owners of the
        runs they ended (``facts``, the runs as the decision read them, name most owners
        without asking the database again) and the running workflow runs they ended."""
        applied = apply_changes(self.database, self.connection, self.now, changes)
        self.queued.extend(
            new.id
            for new in changes.new_runs
            if new.state is RunState.QUEUED and new.id in applied.inserted
        )
        self.after_commit.append(
            lambda: metrics.runs_moved(self.now, changes.moves, applied.moved, facts or {})
        )
        known = facts or {}
        if tracing.enabled():
            self._trace(changes, applied, known)
        for move in changes.moves:
            if not move.target.is_terminal or move.run_id not in applied.moved:
                continue
            owner = known.get(move.run_id)
            if owner is None:
                self.pending.ended_runs.add(move.run_id)
                continue
            if owner.workflow_run_id is not None:
                self.pending.workflow_runs.add(owner.workflow_run_id)
            if owner.backfill_id is not None:
                self.pending.backfills.add(owner.backfill_id)
        self.pending.ended_workflow_runs.update(
            move.workflow_run_id
            for move in changes.workflow_run_moves
            if move.target.is_terminal
            and move.source is WorkflowRunState.RUNNING
            and move.workflow_run_id in applied.workflow_runs_moved
        )
        return applied

    def _trace(self, changes: Changes, applied: Applied, known: Mapping[str, RunFacts]) -> None:
        """The spans of the runs inserted and ended, and of the workflow runs ended, once
        committed; a run ended whose workflow run the decision did not read waits for the
        drain to read it."""
        ended = []
        for move in changes.moves:
            if not move.target.is_terminal or move.run_id not in applied.moved:
                continue
            if (owner := known.get(move.run_id)) is None:
                self.ends_to_trace[move.run_id] = move.target
            else:
                ended.append((move.run_id, owner.workflow_run_id, move.target))
        workflow_runs_ended = [
            (move.workflow_run_id, move.target)
            for move in changes.workflow_run_moves
            if move.target.is_terminal and move.workflow_run_id in applied.workflow_runs_moved
        ]

        def record() -> None:
            traces.runs_submitted(self.now, changes.new_runs, applied.inserted)
            traces.runs_ended(ended)
            traces.workflow_runs_ended(workflow_runs_ended)

        self.after_commit.append(record)

    def follow(self, *, workflow_run: str | None = None, backfill: str | None = None) -> None:
        """Note an owner to move on in the drain: a workflow run started, resumed or
        repaired (its ready tasks start), a backfill created (its first runs start)."""
        if workflow_run is not None:
            self.pending.workflow_runs.add(workflow_run)
        if backfill is not None:
            self.pending.backfills.add(backfill)

    def take_pending(self) -> FollowUps:
        """The worklist as it stands, emptied: what a drain's round works through."""
        taken = FollowUps(
            set(self.pending.workflow_runs),
            set(self.pending.backfills),
            set(self.pending.ended_workflow_runs),
            set(self.pending.ended_runs),
        )
        self.pending.workflow_runs.clear()
        self.pending.backfills.clear()
        self.pending.ended_workflow_runs.clear()
        self.pending.ended_runs.clear()
        return taken

    def settle(self, endings: Sequence[Ending], actor: str) -> list[Settled]:
        """Decide and apply the ends of these attempts (see ``lifecycle.settle``)."""
        if not endings:
            return []
        runs, attempts = facts_of_attempts(
            self.connection, {e.attempt_id for e in endings}, self.now
        )
        changes, settled = settle(runs, attempts, endings, actor=actor, now=self.now, rng=self.rng)
        self.apply(changes, facts=runs)
        return settled
