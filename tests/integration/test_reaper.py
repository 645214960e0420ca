"""The reaper on a store whose clock the test moves: lost workers, deadlines, retries,
start deadlines, dead letters, re-runs — and leases."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from herder.app import reports
from herder.app.claims import claim
from herder.app.runs import rerun_run, resume_run, suspend_run
from herder.app.submit import submit
from herder.control import reaper as reaper_module
from herder.control.reaper import MAX_SLEEP_SECONDS, Reaper
from herder.domain.errors import TemporarilyUnavailable
from herder.domain.jobs import JobSpec, Resources, RetryPolicy
from herder.domain.listings import RunQuery
from herder.domain.models import Assignment
from herder.domain.overrides import RunOverrides
from herder.domain.states import AttemptState, RunState
from herder.protocol import Completion, HeldAttempt, ReportResult
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.dispatching import dispatch

TIMEOUT = 10.0  # heartbeat timeout


@dataclass
class World:
    store: Store
    clock: ManualClock
    tenant_id: str
    token_id: str
    reaper: Reaper

    def job(self, **spec: object) -> str:
        full = {"runtime": "shell", "command": "true", **spec}
        return self.store.jobs.create(
            self.tenant_id, f"j{random.random()}", JobSpec.model_validate(full)
        ).id

    def submit(self, job_id: str, **overrides: object) -> str:
        run, _ = submit(self.store, self.tenant_id, job_id, RunOverrides.model_validate(overrides))
        return run.id

    def worker(self) -> str:
        return self.store.workers.register(
            self.token_id, name="w", capacity=Resources(cpu=8, memory_mb=8192),
            max_slots=8, labels={}, version="t",
        )[0].id  # fmt: skip

    def claim(self, worker_id: str) -> list[Assignment]:
        dispatch(self.store)
        return claim(self.store, worker_id, 8)

    def state(self, run_id: str) -> RunState:
        return self.store.runs.get(self.tenant_id, run_id).state

    def reap(self) -> float:
        return self.reaper.step()

    def report(
        self, worker_id: str, assignment: Assignment, outcome: AttemptState, exit_code: int
    ) -> ReportResult:
        completion = Completion(
            attempt_id=assignment.attempt_id, attempt=assignment.attempt, outcome=outcome,
            exit_code=exit_code, reason=f"exit {exit_code}",
        )  # fmt: skip
        (result,) = reports.report(self.store, worker_id, [], [completion])
        return result

    def fail(self, worker_id: str, assignment: Assignment) -> None:
        assert self.report(worker_id, assignment, AttemptState.FAILED, 1).status == 200


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    clock = ManualClock()
    store = Store(database_url, clock=clock, rng=random.Random(5))
    tenant = store.access.create_tenant("t")
    token_id = store.access.authenticate_worker_token(store.access.create_worker_token("w"))
    reaper = Reaper(store, clock, heartbeat_timeout_seconds=TIMEOUT)
    clock.advance(TIMEOUT)  # the reaper has watched a whole timeout before the test starts
    yield World(store, clock, tenant.id, token_id, reaper)
    store.close()


def test_a_silent_worker_is_lost_and_its_runs_retry_at_once(world: World) -> None:
    run_id = world.submit(world.job(retry={"max_attempts": 3, "initial_delay_seconds": 0}))
    silent = world.worker()
    world.claim(silent)
    world.clock.advance(TIMEOUT - 1)
    world.reap()
    assert world.state(run_id) is RunState.RUNNING
    world.clock.advance(2)
    world.reap()  # lost, and with no back-off queued again in the same pass
    assert world.state(run_id) is RunState.QUEUED
    (again,) = world.claim(world.worker())
    assert again.attempt == 2
    detail = world.store.runs.detail(world.tenant_id, run_id)
    assert detail.attempts[0].state is AttemptState.LOST
    assert "stopped heartbeating" in (detail.attempts[0].reason or "")
    with pytest.raises(Exception, match="declared lost"):
        world.store.workers.heartbeat(silent, [], unreported_grace_seconds=2)


def test_an_attempt_past_its_deadline_times_out_even_if_its_worker_lives(world: World) -> None:
    run_id = world.submit(world.job(timeout_seconds=60, stop_grace_seconds=0))
    worker = world.worker()
    (assignment,) = world.claim(worker)
    running = [HeldAttempt(attempt_id=assignment.attempt_id, attempt=assignment.attempt)]
    for _ in range(11):  # the worker keeps heartbeating, but never ends the attempt
        world.clock.advance(9)
        world.store.workers.heartbeat(worker, running, unreported_grace_seconds=2)
        world.reap()
    assert world.state(run_id) is RunState.TIMED_OUT
    assert "deadline" in (world.store.runs.get(world.tenant_id, run_id).reason or "")


def test_an_attempts_deadline_leaves_its_worker_the_jobs_stop_grace(world: World) -> None:
    run_id = world.submit(world.job(timeout_seconds=60, stop_grace_seconds=600))
    worker = world.worker()
    (assignment,) = world.claim(worker)
    running = [HeldAttempt(attempt_id=assignment.attempt_id, attempt=assignment.attempt)]
    for _ in range(76):  # 684 s: past the timeout and its grace, within the margin after
        world.clock.advance(9)
        world.store.workers.heartbeat(worker, running, unreported_grace_seconds=2)
        world.reap()
    assert world.state(run_id) is RunState.RUNNING
    for _ in range(2):
        world.clock.advance(9)
        world.store.workers.heartbeat(worker, running, unreported_grace_seconds=2)
        world.reap()
    assert world.state(run_id) is RunState.TIMED_OUT


def test_an_attempt_whose_claim_answer_was_lost_is_handed_over_again(world: World) -> None:
    """The server died mid-claim: the attempt was handed over, its answer never arrived. The
    job never started, so it is no try, even for a run allowed one attempt: the worker's next
    claim gets the same attempt, and the run succeeds with it."""
    run_id = world.submit(world.job())  # one attempt allowed
    worker = world.worker()
    (lost,) = world.claim(worker)  # the answer "never arrives": the worker says it runs nothing
    world.store.workers.heartbeat(worker, [], unreported_grace_seconds=2)
    assert claim(world.store, worker, 8) == []  # within the grace it may be coming
    world.clock.advance(3)
    world.store.workers.heartbeat(worker, [], unreported_grace_seconds=2)
    world.reap()
    (again,) = claim(world.store, worker, 8)
    assert (again.attempt_id, again.attempt) == (lost.attempt_id, 1)
    assert world.report(worker, again, AttemptState.SUCCEEDED, 0).status == 200
    detail = world.store.runs.detail(world.tenant_id, run_id)
    assert (detail.state, [a.state for a in detail.attempts]) == (
        RunState.SUCCEEDED,
        [AttemptState.SUCCEEDED],
    )
    events = [event.message for event in world.store.runs.events(world.tenant_id, run_id)]
    assert any("handed over again" in message for message in events)


def test_a_run_that_always_fails_ends_dead_after_its_attempts(world: World) -> None:
    policy = {"max_attempts": 4, "initial_delay_seconds": 1, "factor": 2, "max_delay_seconds": 60}
    run_id = world.submit(world.job(retry=policy))
    worker = world.worker()
    caps = [1, 2, 4]
    for attempt in range(1, 5):
        (assignment,) = world.claim(worker)
        assert assignment.attempt == attempt
        world.fail(worker, assignment)
        if attempt == 4:
            break
        run = world.store.runs.get(world.tenant_id, run_id)
        assert run.state is RunState.RETRY_WAIT
        assert run.retry_at is not None
        wait = (run.retry_at - world.clock.now()).total_seconds()
        assert 0 <= wait <= caps[attempt - 1]
        assert world.reap() <= caps[attempt - 1] + 0.001  # it sleeps until the retry is due
        world.clock.advance(wait + 0.001)
        world.reap()
    dead = world.store.runs.list(world.tenant_id, RunQuery(states=[RunState.DEAD])).items
    assert [run.id for run in dead] == [run_id]
    assert "all 4 attempts used" in world.store.runs.events(world.tenant_id, run_id)[-1].message


def test_silence_is_judged_only_over_time_the_reaper_watched(world: World) -> None:
    run_id = world.submit(world.job())
    world.claim(world.worker())
    world.clock.advance(TIMEOUT + 1)
    restarted = Reaper(world.store, world.clock, heartbeat_timeout_seconds=TIMEOUT)
    restarted.step()
    assert world.state(run_id) is RunState.RUNNING  # the worker gets a timeout to return
    world.clock.advance(TIMEOUT + 1)
    restarted.step()
    assert world.state(run_id) is RunState.LOST


def test_workers_get_a_full_timeout_once_the_store_answers_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database outage longer than the timeout: nobody could heartbeat meanwhile, so the
    reaper that could not read the store does not declare every worker lost when it can."""
    run_id = world.submit(world.job())
    world.claim(world.worker())
    world.reap()  # watching: the worker heartbeated just now

    def lost_database(_work: object) -> None:
        raise TemporarilyUnavailable("the database is unavailable: connection refused")

    with monkeypatch.context() as outage:
        outage.setattr(reaper_module, "read_due_ends", lost_database)
        world.clock.advance(TIMEOUT + 1)
        with pytest.raises(TemporarilyUnavailable):
            world.reap()
    back = world.reap()  # it sleeps towards the grace's end, not spinning on the old heartbeat
    assert back == pytest.approx(min(TIMEOUT, MAX_SLEEP_SECONDS))
    assert world.state(run_id) is RunState.RUNNING
    world.clock.advance(TIMEOUT + 1)
    world.reap()
    assert world.state(run_id) is RunState.LOST  # still silent a timeout later: lost


def test_a_reaper_that_takes_its_lease_judges_silence_only_from_then(world: World) -> None:
    """Another process held the lease, or nobody did (every scheduler could not renew it)."""
    run_id = world.submit(world.job())
    world.claim(world.worker())
    world.clock.advance(TIMEOUT + 1)
    world.reaper.held()
    world.reap()
    assert world.state(run_id) is RunState.RUNNING
    world.clock.advance(TIMEOUT + 1)
    world.reap()
    assert world.state(run_id) is RunState.LOST


def test_a_dead_run_is_rerun_as_a_new_linked_run(world: World) -> None:
    run_id = world.submit(world.job(retry={"max_attempts": 2, "initial_delay_seconds": 0}))
    worker = world.worker()
    for _ in range(2):
        (assignment,) = world.claim(worker)
        world.fail(worker, assignment)
        world.reap()
    assert world.state(run_id) is RunState.DEAD
    rerun = rerun_run(world.store, world.tenant_id, run_id)
    assert rerun.rerun_of == run_id
    assert rerun.state is RunState.QUEUED
    assert world.claim(worker)[0].run_id == rerun.id


def test_a_run_not_started_by_its_deadline_expires(world: World) -> None:
    run_id = world.submit(world.job(), start_deadline_seconds=30)
    assert world.reap() <= 30
    world.clock.advance(31)
    world.reap()
    assert world.state(run_id) is RunState.EXPIRED


def test_a_suspended_run_neither_expires_nor_retries_until_resumed(world: World) -> None:
    retrying = world.submit(world.job(retry={"max_attempts": 2, "initial_delay_seconds": 1}))
    worker = world.worker()
    (first,) = world.claim(worker)
    world.fail(worker, first)
    assert world.state(retrying) is RunState.RETRY_WAIT
    running = world.submit(world.job(), start_deadline_seconds=30)
    world.claim(worker)  # placed: the worker then goes silent
    waiting = world.submit(world.job(), start_deadline_seconds=30)
    held = (retrying, running, waiting)
    for run_id in held:
        suspend_run(world.store, world.tenant_id, run_id, actor="user:key")
    world.clock.advance(3600)
    world.reap()  # the silent worker is lost: its suspending run is held all the same
    assert [world.state(run_id) for run_id in held] == [RunState.SUSPENDED] * 3
    for run_id in held:
        resume_run(world.store, world.tenant_id, run_id, actor="user:key")
    world.clock.advance(3600)
    world.reap()
    assert [world.state(run_id) for run_id in held] == [RunState.QUEUED] * 3


def test_a_per_run_retry_policy_overrides_the_jobs(world: World) -> None:
    run_id = world.submit(world.job(), retry=RetryPolicy(max_attempts=2).model_dump())
    worker = world.worker()
    (assignment,) = world.claim(worker)
    world.fail(worker, assignment)
    assert world.state(run_id) is RunState.RETRY_WAIT


def test_a_lease_is_held_until_it_expires_then_taken_over(world: World) -> None:
    """PostgreSQL leases run on the database's clock, SQLite's on the store's: move both."""

    def wait(seconds: float) -> None:
        time.sleep(seconds)
        world.clock.advance(seconds)

    leases = world.store.leases
    first = leases.acquire("reaper", "a", 0.6)
    assert first is not None
    assert leases.acquire("reaper", "b", 0.6) is None
    wait(0.3)
    assert leases.renew("reaper", "a", first, 0.6)
    wait(0.8)  # a died: no renewal
    taken = leases.acquire("reaper", "b", 0.6)
    assert taken == first + 1  # a new fencing number
    assert not leases.renew("reaper", "a", first, 0.6)
    assert leases.holder("reaper") == ("b", taken)


def test_an_attempt_that_ended_while_the_server_was_down_is_not_lost(world: World) -> None:
    """The sequence of a server restart: the attempt ends while the server is down, the
    worker's first heartbeat after the restart comes before its (backed-off) report, naming
    the attempt as finished; the report then counts, and the job does not run again."""
    run_id = world.submit(world.job(retry={"max_attempts": 3, "initial_delay_seconds": 0}))
    worker = world.worker()
    (assignment,) = world.claim(worker)
    world.clock.advance(8)  # the server is down; the attempt ends meanwhile
    Reaper(world.store, world.clock, heartbeat_timeout_seconds=TIMEOUT).step()  # restarted
    finished = [HeldAttempt(attempt_id=assignment.attempt_id, attempt=assignment.attempt)]
    world.store.workers.heartbeat(worker, [], unreported_grace_seconds=2, finished=finished)
    world.reap()
    assert world.state(run_id) is RunState.RUNNING
    world.clock.advance(5)  # the report's back-off
    result = world.report(worker, assignment, AttemptState.SUCCEEDED, 0)
    assert result.status == 200
    run = world.store.runs.get(world.tenant_id, run_id)
    assert (run.state, run.attempt_count) == (RunState.SUCCEEDED, 1)


def test_a_run_retried_after_its_worker_was_lost_keeps_its_place_in_the_queue(
    world: World,
) -> None:
    first = world.submit(world.job(retry={"max_attempts": 2, "initial_delay_seconds": 0}))
    queued_at = world.store.runs.get(world.tenant_id, first).queued_at
    world.claim(world.worker())  # then the worker dies
    later = []
    for _ in range(3):  # queued behind it meanwhile
        world.clock.advance(1)
        later.append(world.submit(world.job()))
    world.clock.advance(TIMEOUT)
    world.reap()
    assert world.state(first) is RunState.QUEUED
    assert world.store.runs.get(world.tenant_id, first).queued_at == queued_at
    order = [entry.run_id for entry in world.store.queue.list(world.tenant_id).items]
    assert order == [first, *later]
    events = world.store.runs.detail(world.tenant_id, first).events
    assert "in its place" in events[-1].message


def test_a_run_retried_after_it_failed_queues_behind_what_came_meanwhile(world: World) -> None:
    first = world.submit(world.job(retry={"max_attempts": 2, "initial_delay_seconds": 0}))
    worker = world.worker()
    (assignment,) = world.claim(worker)
    world.clock.advance(1)
    later = world.submit(world.job())
    world.clock.advance(1)
    world.fail(worker, assignment)
    world.reap()
    order = [entry.run_id for entry in world.store.queue.list(world.tenant_id).items]
    assert order == [later, first]
