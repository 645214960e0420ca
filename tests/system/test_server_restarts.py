"""Server restarts under load (issue 9): attempts that finish while the server is down are
reported after it comes back, never declared lost and run again; runs keep going meanwhile.

A real ``herder server`` on PostgreSQL is killed (``kill -9``) three times, down about 4 s
each time, while a real worker runs a stream of 1 s jobs. Heartbeats every 0.5 s make the
old bug show at once: an attempt handed over more than 2 s (the grace) before the first
heartbeat after a restart, and not listed in it, was declared lost.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import select

from herder.client import HerderClient
from herder.store.database import Database
from herder.store.schema import attempts
from tests.system.conftest import Cluster, wait_until

pytestmark = [pytest.mark.system, pytest.mark.postgres]

RUNS = 100
OUTAGE_SECONDS = 2.5
RESTARTS = 3


@pytest.fixture
def effects() -> Iterator[Path]:
    """A file every sandboxed uid may append to: each job's one side effect."""
    directory = Path(tempfile.mkdtemp(prefix="herder-restarts-"))
    directory.chmod(0o777)
    path = directory / "effects"
    path.touch()
    path.chmod(0o666)
    yield path
    path.unlink(missing_ok=True)
    directory.rmdir()


def _ended(herder: HerderClient, job_id: str) -> int:
    runs = herder.list_runs(job_id=job_id, limit=1000).items
    return sum(run.state.is_terminal for run in runs)


def test_attempts_that_end_while_the_server_is_down_do_not_run_again(
    system_postgres_url: str, start_cluster: Callable[..., Cluster], effects: Path
) -> None:
    started = time.monotonic()
    cluster = start_cluster(
        system_postgres_url,
        environment={"HERDER_HEARTBEAT_INTERVAL": "0.5", "HERDER_HEARTBEAT_TIMEOUT": "10"},
    )
    cluster.start_worker("w", "--max-slots", "12")
    command = f'sleep 1; echo "$HERDER_RUN_ID,$HERDER_ATTEMPT" >> {effects}'
    with cluster.client() as herder:
        wait_until(lambda: len(herder.list_workers()) == 1, 20, "the worker registered")
        spec = {"runtime": "shell", "command": command, "retry": {"max_attempts": 3},
                "resources": {"cpu": 0.01, "memory_mb": 64}}  # fmt: skip
        job = herder.create_job("steady", spec)
        with ThreadPoolExecutor(4) as pool:
            run_ids = list(pool.map(lambda _: herder.start_run(job.id).id, range(RUNS)))
        wait_until(lambda: _ended(herder, job.id) >= 12, 30, "the first runs ended")
    outages = []
    for _ in range(RESTARTS):
        time.sleep(0.3)  # attempts are running and being handed over
        cluster.kill_server()
        killed = time.monotonic()
        time.sleep(OUTAGE_SECONDS)  # a dozen attempts end meanwhile, unreported
        cluster.start_server()
        outages.append(time.monotonic() - killed)
        time.sleep(1.5)
    with cluster.client() as herder:
        wait_until(lambda: _ended(herder, job.id) == RUNS, 60, "every run ended")
        runs = herder.list_runs(job_id=job.id, limit=1000).items
    database = Database(system_postgres_url)
    with database.read() as connection:
        lost = connection.execute(
            select(attempts.c.run_id, attempts.c.reason).where(attempts.c.state == "lost")
        ).all()
    database.dispose()
    effect_lines = effects.read_text().splitlines()
    ran = [line.split(",")[0] for line in effect_lines]
    print(
        f"{RESTARTS} outages of {', '.join(f'{o:.1f}' for o in outages)}s; "
        f"{len(lost)} attempts lost; took {time.monotonic() - started:.1f}s"
    )
    assert [(run.state, run.reason) for run in runs if run.state != "succeeded"] == []
    assert sorted(ran) == sorted(run_ids), "a finished job ran again (or one never ran)"
    finished_then_lost = [row for row in lost if row.run_id in set(ran)]
    assert [row.reason for row in finished_then_lost if "never reached" in row.reason] == []
