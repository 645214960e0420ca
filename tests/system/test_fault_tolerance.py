"""At-least-once, at most one current attempt, nothing acknowledged lost — proven by killing
and freezing real processes. Heartbeats every 0.5 s, lost after 3 s, leases of 2 s."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

from herder.client import HerderClient
from herder.domain.models import RunDetail
from herder.store.database import Database
from herder.store.schema import attempts
from herder.store.store import Store
from tests.system.conftest import (
    Cluster,
    alive,
    kill_matching,
    processes_matching,
    unique_sleep,
    wait_until,
)
from tests.system.outside import OUTSIDE, serving

pytestmark = pytest.mark.system

HEARTBEAT_TIMEOUT = 3.0
WORKER_LEASE = 2.5  # the timeout less one heartbeat interval
RETRIES = {"max_attempts": 3, "initial_delay_seconds": 0}
RUNS = 200  # at the server's kill: a tenth ended, up to 80 running, over 100 queued


EFFECTS_PORT = 7778
EFFECTS_SETTLE_SECONDS = 10.0  # the collector's threads write the lines after the jobs end
COLLECTOR = """
import socketserver, sys
class Effect(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline()
        with open(sys.argv[2], "ab") as effects:
            effects.write(line)
socketserver.ThreadingTCPServer.allow_reuse_address = True
# 80 jobs may connect at once: past the default backlog of 5 the kernel drops a handshake's
# last ACK and the line arrives only at a later SYN-ACK retry, seconds on
socketserver.ThreadingTCPServer.request_queue_size = 256
server = socketserver.ThreadingTCPServer(("0.0.0.0", int(sys.argv[1])), Effect)
print("ready", flush=True)
server.serve_forever()
"""


def effect(line: str) -> str:
    """A job's side effect: a line sent to a service outside, as a real job would call one."""
    return f"bash -c 'echo \"{line}\" > /dev/tcp/{OUTSIDE}/{EFFECTS_PORT}'"


@pytest.fixture
def effects(outside: Path, tmp_path: Path) -> Iterator[Path]:
    """The lines the jobs' side effects delivered to a service on a host outside."""
    path = tmp_path / "effects"
    path.touch()
    with serving(outside, COLLECTOR, str(EFFECTS_PORT), str(path)):
        yield path


def delivered(effects: Path, expected: int) -> list[str]:
    """The effects' lines, once the collector has written ``expected`` of them (or a few
    seconds on): a job's ``echo`` ends when its line is sent, not when it is written down."""
    deadline = time.monotonic() + EFFECTS_SETTLE_SECONDS
    while len(lines := effects.read_text().splitlines()) < expected:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return lines


def worker_id_named(herder: HerderClient, name: str) -> str:
    return next(worker.id for worker in herder.list_workers() if worker.name == name)


def running_on(herder: HerderClient, run_id: str, attempt: int) -> bool:
    run = herder.get_run(run_id)
    return run.state == "running" and run.attempt_count == attempt


def test_a_killed_workers_run_finishes_on_another_worker(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster(fast=True)
    # The first attempt outlasts the test, however long worker two takes to start on a busy
    # box; the second takes five seconds.
    first, second = unique_sleep(120), unique_sleep(5)
    command = f'if [ "$HERDER_ATTEMPT" = 1 ]; then {first}; else {second}; fi'
    one = cluster.start_worker("one")
    with cluster.client() as herder:
        job = herder.create_job("five", {"runtime": "shell", "command": command, "retry": RETRIES})
        run = herder.start_run(job.id)
        wait_until(lambda: running_on(herder, run.id, 1), 20, "attempt 1 running")
        cluster.start_worker("two")
        wait_until(lambda: len(herder.list_workers()) == 2, 20, "worker two registered")
        assert running_on(herder, run.id, 1)
        killed_at = datetime.now(UTC)
        one.kill()
        finished = herder.wait(run.id, timeout=HEARTBEAT_TIMEOUT + 5 + 10)
    kill_matching(first)  # the orphan of the killed worker (no worker is left to end it)
    assert finished.finished_at is not None
    took = (finished.finished_at - killed_at).total_seconds()
    redispatch = (finished.attempts[1].started_at - killed_at).total_seconds()
    print(f"re-dispatched {redispatch:.2f}s after the kill; finished {took:.2f}s after it")
    assert finished.state == "succeeded"
    assert [attempt.state for attempt in finished.attempts] == ["lost", "succeeded"]
    assert took < HEARTBEAT_TIMEOUT + 5 + 2


def test_a_frozen_workers_late_report_is_refused_and_its_job_killed(
    start_cluster: Callable[..., Cluster], effects: Path
) -> None:
    cluster = start_cluster(fast=True)
    sleep = unique_sleep(8)
    command = f"{sleep}; {effect('$HERDER_RUN_ID,$HERDER_ATTEMPT')}"
    one = cluster.start_worker("one")
    with cluster.client() as herder:
        job = herder.create_job(
            "effect", {"runtime": "shell", "command": command, "retry": RETRIES, "network": True}
        )
        run = herder.start_run(job.id)
        wait_until(lambda: running_on(herder, run.id, 1), 20, "attempt 1 running")
        one_id = worker_id_named(herder, "one")
        one.send_signal(signal.SIGSTOP)
        try:
            cluster.start_worker("two")
            wait_until(lambda: running_on(herder, run.id, 2), 20, "attempt 2 running elsewhere")
        finally:
            one.send_signal(signal.SIGCONT)
        continued = time.monotonic()
        wait_until(lambda: len(_processes(sleep)) == 1, WORKER_LEASE + 2, "frozen job killed")
        print(f"the stale attempt was killed {time.monotonic() - continued:.2f}s after SIGCONT")
        finished = herder.wait(run.id, timeout=30)
    assert finished.state == "succeeded"
    states = [(attempt.state, attempt.worker_id, attempt.reason) for attempt in finished.attempts]
    assert [state for state, _, _ in states] == ["lost", "succeeded"], states
    refusals = [event for event in finished.events if event.message.startswith("refused")]
    assert refusals, finished.events
    assert all(one_id in event.message for event in refusals)
    assert delivered(effects, 1) == [f"{run.id},2"]


def _processes(sleep: str) -> list[int]:
    """Living ``sleep`` processes of this command (not the shells that started them)."""
    found = []
    for pid in processes_matching(sleep):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if command.startswith(sleep) and alive(pid):
                found.append(pid)
    return found


@pytest.mark.timeout(300)  # its own waits add up past the suite's 120 s: 20 + 60 + 180
def test_killing_the_server_loses_nothing_and_runs_nothing_twice(
    database_url: str, start_cluster: Callable[..., Cluster], effects: Path
) -> None:
    cluster = start_cluster(database_url)
    for name in ("one", "two"):
        cluster.start_worker(name, "--max-slots", "40")
    command = f"sleep 0.2; {effect('$HERDER_RUN_ID')}"
    with cluster.client() as herder:
        wait_until(lambda: len(herder.list_workers()) == 2, 20, "workers registered")
        spec = {"runtime": "shell", "command": command, "retry": RETRIES, "network": True,
                "resources": {"cpu": 0.01, "memory_mb": 32}}  # fmt: skip
        job = herder.create_job("many", spec)
        with ThreadPoolExecutor(4) as pool:
            run_ids = list(pool.map(lambda _: herder.start_run(job.id).id, range(RUNS)))
        wait_until(lambda: _ended(herder, job.id) >= RUNS // 10, 60, "some runs ended")
    cluster.kill_server()  # with most of them still queued or running
    cluster.start_server()
    with cluster.client() as herder:
        wait_until(lambda: _ended(herder, job.id) == RUNS, 180, "every run ended")
        runs = herder.list_runs(job_id=job.id, limit=1000).items
    failed = [(run.state, run.reason) for run in runs if run.state != "succeeded"]
    assert not failed, failed[:5]
    database = Database(database_url)
    with database.read() as connection:
        succeeded = connection.execute(
            select(attempts.c.run_id, func.count())
            .where(attempts.c.state == "succeeded")
            .group_by(attempts.c.run_id)
        ).all()
    database.dispose()
    assert len(succeeded) == RUNS
    assert {count for _, count in succeeded} == {1}
    effect_lines = delivered(effects, RUNS)
    assert sorted(effect_lines) == sorted(run_ids), "a job ran to completion twice or never"


def _ended(herder: HerderClient, job_id: str) -> int:
    runs = herder.list_runs(job_id=job_id, limit=1000).items
    return sum(run.state.is_terminal for run in runs)


@pytest.mark.postgres
def test_a_standby_scheduler_takes_over_the_loops(
    system_postgres_url: str, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(system_postgres_url, scheduler=False, fast=True)
    schedulers = [cluster.spawn("scheduler") for _ in range(2)]
    store = Store(system_postgres_url)
    try:
        wait_until(lambda: store.leases.holder("reaper") is not None, 20, "a scheduler holds it")
        holder = store.leases.holder("reaper")
        assert holder is not None
        pid = int(holder[0].split(":")[1])
        (holding,) = [process for process in schedulers if process.pid == pid]
        holding.kill()
        killed = time.monotonic()

        def taken_over() -> bool:
            now = store.leases.holder("reaper")
            return now is not None and now[0] != holder[0]

        wait_until(taken_over, 10, "the standby took the lease")
        took = time.monotonic() - killed
    finally:
        store.close()
    print(f"the standby took over {took:.2f}s after the holder was killed")
    assert took < 2.0 + 2.0 / 3 + 1.0  # the lease, one standby retry, slack


def test_a_run_that_always_fails_is_dead_after_four_attempts_with_growing_delays(
    start_cluster: Callable[..., Cluster],
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w")
    retry = {"max_attempts": 4, "initial_delay_seconds": 0.3, "factor": 2}
    with cluster.client() as herder:
        job = herder.create_job("doomed", {"runtime": "shell", "command": "exit 3", "retry": retry})
        run: RunDetail = herder.wait(herder.start_run(job.id).id, timeout=60)
        dead = herder.list_runs(states=["dead"]).items
    assert run.state == "dead"
    assert [run.id] == [item.id for item in dead]
    assert [attempt.number for attempt in run.attempts] == [1, 2, 3, 4]
    assert {attempt.exit_code for attempt in run.attempts} == {3}
    caps = [0.3, 0.6, 1.2]
    for cap, before, after in zip(caps, run.attempts, run.attempts[1:], strict=False):
        assert after.started_at is not None
        assert before.finished_at is not None
        gap = (after.started_at - before.finished_at).total_seconds()
        assert 0 <= gap <= cap + 1.0, (cap, gap)
    messages = [event.message for event in run.events if "back-off cap" in event.message]
    assert [f"cap {cap:.2f}s" in message for cap, message in zip(caps, messages, strict=True)]
    assert "all 4 attempts used" in (run.events[-1].message)
