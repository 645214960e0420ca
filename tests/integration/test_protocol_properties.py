"""A Hypothesis state machine over the real store (SQLite): submit, claim, heartbeat, move
the clock, lose workers, report late, cancel, complete — in any order. Whatever happens:
at most one current attempt per run, attempt numbers only grow, terminal states are final."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from sqlalchemy import select

from herder.app import reports
from herder.app.claims import claim
from herder.app.runs import cancel_run
from herder.app.submit import submit
from herder.control.reaper import Reaper
from herder.domain.errors import Conflict, Gone
from herder.domain.jobs import JobSpec, Resources
from herder.domain.models import WorkerState
from herder.domain.overrides import RunOverrides
from herder.domain.states import AttemptState, RunState
from herder.protocol import Completion, HeldAttempt
from herder.store.schema import attempts, runs, workers
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.conftest import fresh_sqlite_url
from tests.integration.dispatching import dispatch

TIMEOUT = 10.0
OUTCOMES = [AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.CANCELLED]


class ClaimProtocol(RuleBasedStateMachine):
    template: Path  # the session's migrated SQLite file: each example starts from a copy

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.clock = ManualClock()
        self.store = Store(
            fresh_sqlite_url(self.template, Path(self.directory.name)),
            clock=self.clock,
            rng=random.Random(0),
        )
        self.tenant = self.store.access.create_tenant("t").id
        self.token = self.store.access.authenticate_worker_token(
            self.store.access.create_worker_token("w")
        )
        spec = JobSpec(runtime="shell", command="true", retry={"max_attempts": 3,
                       "initial_delay_seconds": 0, "retry_on": ["failed", "lost"]})  # fmt: skip
        self.job = self.store.jobs.create(self.tenant, "j", spec).id
        self.reaper = Reaper(self.store, self.clock, heartbeat_timeout_seconds=TIMEOUT)
        self.clock.advance(TIMEOUT)
        self.workers: list[str] = []
        self.given: dict[str, list[HeldAttempt]] = {}  # what each worker was handed
        self.terminal: dict[str, RunState] = {}
        self.ended: dict[tuple[str, int], str] = {}  # attempt → how it ended

    def teardown(self) -> None:
        self.store.close()
        self.directory.cleanup()

    @initialize()
    def two_workers(self) -> None:
        for _ in range(2):
            self.register()

    def register(self) -> None:
        worker = self.store.workers.register(
            self.token, name="w", capacity=Resources(cpu=4, memory_mb=4096), max_slots=4,
            labels={}, version="t",
        )[0].id  # fmt: skip
        self.workers.append(worker)
        self.given[worker] = []

    @rule()
    def submit(self) -> None:
        submit(self.store, self.tenant, self.job, RunOverrides())

    def lost(self, worker: str) -> bool:
        with self.store.database.read() as connection:
            state = connection.execute(
                select(workers.c.state).where(workers.c.id == worker)
            ).scalar_one()
        return bool(state == WorkerState.LOST)

    @rule(index=st.integers(0, 9))
    def claim(self, index: int) -> None:
        worker = self.workers[index % len(self.workers)]
        dispatch(self.store)
        try:
            assignments = claim(self.store, worker, 2)
        except Gone:  # a lost worker is told so; that is the protocol
            assert self.lost(worker), "a live worker was told it is gone"
            return
        self.given[worker] += [
            HeldAttempt(attempt_id=a.attempt_id, attempt=a.attempt) for a in assignments
        ]

    @rule(index=st.integers(0, 9), pick=st.integers(0, 9), outcome=st.sampled_from(OUTCOMES))
    def report(self, index: int, pick: int, outcome: AttemptState) -> None:
        """A completion — current or long stale — for something this worker was handed."""
        worker = self.workers[index % len(self.workers)]
        if not self.given[worker]:
            return
        attempt = self.given[worker][pick % len(self.given[worker])]
        (result,) = reports.report(
            self.store,
            worker,
            [],
            [
                Completion(
                    attempt_id=attempt.attempt_id,
                    attempt=attempt.attempt,
                    outcome=outcome,
                    exit_code=0,
                    reason="r",
                )
            ],
        )
        assert result.status in (200, 409)

    @rule(index=st.integers(0, 9))
    def heartbeat(self, index: int) -> None:
        worker = self.workers[index % len(self.workers)]
        try:
            self.store.workers.heartbeat(worker, self.given[worker], unreported_grace_seconds=2)
        except Gone:
            assert self.lost(worker), "a live worker was told it is gone"
            self.register()  # lost: it registers again, as a new worker

    @rule(seconds=st.floats(0.1, 15))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.reaper.step()

    @rule(pick=st.integers(0, 50))
    def cancel(self, pick: int) -> None:
        with self.store.database.read() as connection:
            ids = connection.execute(select(runs.c.id).order_by(runs.c.id)).scalars().all()
        if ids:
            run_id = ids[pick % len(ids)]
            try:
                cancel_run(self.store, self.tenant, run_id)
            except Conflict:  # already ended: a conflict, as designed
                assert run_id in self.terminal, "an active run refused a cancel"

    @invariant()
    def at_most_one_current_attempt_and_numbers_only_grow(self) -> None:
        with self.store.database.read() as connection:
            run_rows = connection.execute(
                select(runs.c.id, runs.c.state, runs.c.attempt_count)
            ).all()
            attempt_rows = connection.execute(
                select(attempts.c.run_id, attempts.c.number, attempts.c.state)
            ).all()
        for run_id, number, state in attempt_rows:
            key = (run_id, number)
            if key in self.ended:
                assert state == self.ended[key], "an ended attempt changed"
            elif state != AttemptState.RUNNING:
                self.ended[key] = state
        for run_id, state, count in run_rows:
            mine = sorted((n, s) for r, n, s in attempt_rows if r == run_id)
            assert [n for n, _ in mine] == list(range(1, count + 1))
            running = [n for n, s in mine if s == AttemptState.RUNNING]
            assert len(running) <= 1
            if state == RunState.RUNNING:
                assert running == [count]
            if run_id in self.terminal:
                assert state == self.terminal[run_id], "a terminal state changed"
            elif RunState(state).is_terminal:
                self.terminal[run_id] = RunState(state)


@pytest.fixture(autouse=True)
def _migrated_template(sqlite_template: Path) -> None:
    ClaimProtocol.template = sqlite_template


ClaimProtocol.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_claim_protocol_keeps_its_promises = ClaimProtocol.TestCase
