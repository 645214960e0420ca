"""Scale-out with real parts (issue 14): three API processes behind HAProxy, two schedulers and
four workers on one PostgreSQL, under a load of one-off runs and every-4-seconds schedules;
one API process, one scheduler and one worker are killed (``kill -9``) in the middle of it.

Nothing acknowledged is lost, no schedule fires twice for an instant nor misses one, no run
succeeds twice, the balancer keeps answering, and the firer's partitions move to the
surviving scheduler. Heartbeats every 0.5 s, lost after 3 s, leases of 2 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from herder.client import HerderClient
from herder.store.schema import runs
from herder.store.store import Store
from tests.system.balancer import balancing
from tests.system.conftest import Cluster, free_port, stop, wait_healthy, wait_until
from tests.system.load_checks import (
    EVERY_FOUR_SECONDS,
    TERMINAL,
    Probe,
    arguments_port,
    check_every_fire_once,
    check_every_run_succeeded_once,
    count_runs,
    effect_command,
    fired_until,
    firer_holders,
    wait_all_ended,
)

pytestmark = [pytest.mark.system, pytest.mark.postgres]

SCHEDULES = 100  # 25 fires a second (50 kept a loaded CI box's two cores busy for minutes)
ONE_OFF_RUNS = 300  # one at a time through the balancer, every other one with a key


@dataclass
class Submissions:
    """One-off runs sent through the balancer while processes are killed."""

    client: httpx.Client
    job_id: str
    acknowledged: dict[str, str] = field(default_factory=dict)  # run id → its key or ""
    unanswered: int = 0  # sent without a key, no answer: made or not, nobody knows

    def submit(self, index: int) -> None:
        key = f"key-{index}" if index % 2 == 0 else ""
        run_id = self.send_until_answered(key) if key else self.send(key)
        if run_id is None:
            self.unanswered += 1
        else:
            self.acknowledged[run_id] = key

    def send_until_answered(self, key: str) -> str:
        """With a key, sending again is harmless: until an answer comes."""
        for _ in range(100):
            run_id = self.send(key)
            if run_id is not None:
                return run_id
            time.sleep(0.1)
        raise AssertionError(f"{key} was never answered")

    def keyed(self) -> dict[str, str]:
        """Key → run id, of the runs acknowledged with a key."""
        return {key: run_id for run_id, key in self.acknowledged.items() if key}

    def send(self, key: str) -> str | None:
        headers = {"Idempotency-Key": key} if key else {}
        try:
            response = self.client.post(f"/v1/jobs/{self.job_id}/runs", json={}, headers=headers)
        except httpx.TransportError:
            return None
        if response.status_code not in (200, 201):
            return None
        run_id: str = response.json()["id"]
        return run_id

    def run(self, stopping: threading.Event) -> None:
        for index in range(ONE_OFF_RUNS):
            if stopping.is_set():
                return
            self.submit(index)


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


# Its own waits bound each step; this only guards against a hang. On this 2-core box the test
# takes 50 s alone and past 120 s beside the rest of the suite; its waits add up to about 520 s.
@pytest.mark.timeout(600)
def test_three_api_processes_two_schedulers_four_workers_survive_a_kill_of_each(
    system_postgres_url: str,
    start_cluster: Callable[..., Cluster],
    tmp_path: Path,
    stack: ExitStack,
) -> None:
    began = time.monotonic()
    environment = {"HERDER_CRON_SECONDS": "1"}
    cluster = start_cluster(
        system_postgres_url, scheduler=False, fast=True, environment=environment
    )
    assert cluster.server is not None
    apis = [cluster.server]
    for _ in range(2):
        port = free_port()
        apis.append(cluster.spawn("server", "--port", str(port)))
        wait_healthy(f"http://127.0.0.1:{port}", apis[-1])  # one at a time: one first start
    backends = [arguments_port(process) for process in apis]
    url = stack.enter_context(balancing(backends, tmp_path))
    schedulers = [cluster.spawn("scheduler") for _ in range(2)]
    workers = [
        cluster.spawn(
            "worker", "--server", url, "--name", f"w{index}", "--home",
            str(cluster.home / f"worker-w{index}"), "--isolation", "none", "--max-slots", "16",
            "--max-stop-grace", "1", HERDER_WORKER_TOKEN=cluster.worker_token,
        )
        for index in range(4)
    ]  # fmt: skip
    effects = tmp_path / "effects"
    effects.touch()
    store = Store(system_postgres_url)
    stack.callback(store.close)
    herder = stack.enter_context(HerderClient(url, cluster.credentials["api_key"]))
    spec = {"runtime": "shell", "command": effect_command(effects),
            "retry": {"max_attempts": 3, "initial_delay_seconds": 0},
            "resources": {"cpu": 0.01, "memory_mb": 16}}  # fmt: skip
    job = herder.create_job("effect", spec)
    wait_until(lambda: len(herder.list_workers()) == 4, 30, "four workers registered")
    schedule_ids = [
        herder.create_schedule(job.id, {"cron": EVERY_FOUR_SECONDS}).id for _ in range(SCHEDULES)
    ]
    # a pass hands a firer to its preferred holder: on a loaded box the second scheduler
    # may take a while to start and to be handed its share
    wait_until(lambda: len(firer_holders(store) - {-1}) == 2, 120, "both schedulers fire")
    firing_from = datetime.now(UTC)

    stopping = threading.Event()
    authorized = {"Authorization": f"Bearer {cluster.credentials['api_key']}"}
    http = stack.enter_context(httpx.Client(base_url=url, timeout=30, headers=authorized))
    submissions = Submissions(http, job.id)
    probe = Probe(url)
    submitting = threading.Event()  # set: no more submissions (the probe goes on)
    threads = [
        threading.Thread(target=submissions.run, args=(submitting,)),
        threading.Thread(target=probe.run, args=(stopping,)),
    ]
    for thread in threads:
        thread.start()
    stack.callback(stopping.set)
    stack.callback(submitting.set)
    time.sleep(3)
    apis[1].kill()
    time.sleep(2)
    (victim, survivor) = schedulers
    victim.kill()
    killed = time.monotonic()
    time.sleep(2)
    workers[0].kill()
    wait_until(lambda: firer_holders(store) == {survivor.pid}, 15, "the survivor fires all")
    moved = time.monotonic() - killed
    # the fires are checked over this window, the kills inside it: long enough for three
    # instants whatever the phase. The schedules pause once it is fired, while one-offs may
    # still go in: every second more of 50 fires a second (25 now) was a backlog a loaded box
    # ran for minutes (447 s in a CI run, 43 s before).
    checked = firing_from + timedelta(seconds=13)
    time.sleep(max(0.0, (checked - datetime.now(UTC)).total_seconds()))
    firing_until = datetime.now(UTC)
    wait_until(lambda: fired_until(store, schedule_ids, firing_until), 30, "fires caught up")
    for schedule_id in schedule_ids:
        herder.pause_schedule(schedule_id)
    threads[0].join(60)
    submitting.set()  # a loaded box may not have sent all 300: what it sent is counted whole
    threads[0].join(60)
    assert not threads[0].is_alive(), "a submission went unanswered for a minute"
    keyed = submissions.keyed()
    again = {key: submissions.send_until_answered(key) for key in keyed}
    assert again == keyed, "a key sent again after the kills made another run"
    assert count_runs(store, runs.c.idempotency_key.is_not(None)) == len(keyed)
    unfinished = runs.c.state.not_in(TERMINAL)
    wait_all_ended(store, unfinished)
    stopping.set()
    threads[1].join(10)

    check_every_fire_once(store, schedule_ids, firing_from, firing_until)
    check_every_run_succeeded_once(store, submissions.acknowledged, effects)
    failed = [answer for answer in probe.answers if answer != 200]
    fires = count_runs(store, runs.c.schedule_id.is_not(None))
    print(
        f"{len(submissions.acknowledged)} one-off runs acknowledged "
        f"({submissions.unanswered} unanswered), {fires} fires; the survivor held "
        f"every partition {moved:.1f}s after the other's kill; probes {len(probe.answers)}, "
        f"not 200: {failed}; took {time.monotonic() - began:.1f}s"
    )
    assert len(failed) <= 2, f"the balancer did not keep answering: {failed}"
    for process in (*workers, *schedulers, *apis):  # the workers first, so none is left calling
        stop(process)
