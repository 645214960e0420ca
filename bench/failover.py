"""Scenario: the database's primary lost under load (issue 43), on a real pg_auto_failover
formation (``scripts/ha-postgres.sh``: a monitor, a primary and its synchronous standby).

A server with its control loops and one worker run on the multi-host URL the formation
prints. Under steady load (keyed one-off runs one after the other through the client, which
rides out a 503; a schedule firing every second; a workflow of three chained tasks running)
the primary's keeper and postgres are killed with ``kill -9``, as a machine is lost. Then the
old primary is started again and rejoins as the standby, that standby is killed in turn, and
writes must go on against the primary alone (degraded, not down).

Measured: the seconds from the kill to the first acknowledged submission; HTTP answers of
5xx other than 503, and calls that gave up; acknowledged runs missing afterwards; keys that
made two runs, and runs that succeeded twice; instants of the schedule not fired, and fired
twice; attempts left running, and runs never ended. ``tests/system/test_failover.py`` runs it
and holds every count to 0; ``make bench`` prints the figures and appends them to RESULTS.md.
"""

from __future__ import annotations

import datetime
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, timedelta
from pathlib import Path

import httpx
from sqlalchemy import ColumnElement, func, select

from bench.oneoff import Herder
from herder.client import HerderClient
from herder.client.errors import ClientError
from herder.credentials import ClientCredentials
from herder.domain.states import RunState
from herder.domain.workflows.states import WorkflowRunState
from herder.store.schema import attempts, runs
from herder.store.store import Store
from herder.worker.isolation import Isolation

SCRIPT = Path(__file__).parents[1] / "scripts" / "ha-postgres.sh"
EVERY_SECOND = "* * * * * *"
LOAD_BEFORE_SECONDS = 2.0  # steady load before the kill
ACKNOWLEDGED_AFTER = 10  # submissions acknowledged after each loss before the next step
STEP_TIMEOUT_SECONDS = 120.0
TERMINAL = [state.value for state in RunState if state.is_terminal]
CHAIN = [
    {"name": "first", "job": "step"},
    {"name": "second", "job": "step", "depends_on": ["first"]},
    {"name": "third", "job": "step", "depends_on": ["second"]},
]


@dataclass(frozen=True)
class FailoverResult:
    isolation: Isolation
    unavailable_seconds: float  # from the kill to the first acknowledged submission
    non_503_errors: int  # 5xx answers but 503, and calls the client gave up on
    lost: int  # acknowledged runs missing afterwards
    doubled: int  # keys that made two runs, runs that succeeded twice
    fires_missed: int
    fires_doubled: int
    orphans: int  # attempts left running, runs never ended
    submissions: int  # acknowledged, in all
    degraded_writes: int  # acknowledged with the standby lost too
    workflow_succeeded: bool

    def line(self) -> str:
        """The figures, as issue 43 asks for them."""
        return (
            f"failover: unavailable {self.unavailable_seconds:.1f} s, non-503 errors "
            f"{self.non_503_errors}, lost {self.lost}, doubled {self.doubled}, fires missed "
            f"{self.fires_missed}, fires doubled {self.fires_doubled}, orphans {self.orphans}"
        )


class Formation:
    """The formation the script made in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.url = self.script("up")

    def script(self, *args: str) -> str:
        done = subprocess.run(
            [SCRIPT, args[0], self.directory, *args[1:]],
            capture_output=True, text=True, check=False, timeout=180,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"ha-postgres.sh {' '.join(args)}: {done.stderr.strip()[-2000:]}")
        return done.stdout.strip()

    def settled(self, standby: str) -> bool:
        """Node ``standby`` is the standby and the other node the primary, each as the
        monitor wants it. Not before: pg_auto_failover 2.0 left a primary whose standby was
        lost while it turned synchronous replication on waiting for it for good (every
        commit hung), a double fault this scenario does not stage."""
        try:
            shown = self.script("status")
        except RuntimeError:  # the monitor not answering for a moment (a loaded box): ask again
            return False
        states = {}
        for line in shown.splitlines():
            cells = [cell.strip() for cell in line.split("|")]
            if cells[0].startswith("node_"):
                states[cells[0].removeprefix("node_")] = tuple(cells[-2:])
        primary = next((node for node in states if node != standby), None)
        return states.get(standby) == ("secondary", "secondary") and states.get(primary or "") == (
            "primary",
            "primary",
        )

    def down(self) -> None:
        subprocess.run([SCRIPT, "down", self.directory], check=False, timeout=60)


@dataclass
class Load:
    """Keyed one-off runs, one after the other, through a client that rides out a 503."""

    herder: HerderClient
    job_id: str
    acknowledged: dict[str, float] = field(default_factory=dict)  # run id: when (monotonic)
    gave_up: list[str] = field(default_factory=list)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                run = self.herder.start_run(self.job_id, idempotency_key=uuid.uuid4().hex)
            except ClientError as error:
                self.gave_up.append(str(error))
                continue
            self.acknowledged[run.id] = time.monotonic()
            stop.wait(0.05)

    def since(self, moment: float) -> list[float]:
        return sorted(when for when in list(self.acknowledged.values()) if when > moment)


def _until(
    condition: Callable[[], bool],
    what: str,
    formation: Formation | None = None,
    timeout: float = STEP_TIMEOUT_SECONDS,
) -> None:
    """Wait for ``condition``; past ``timeout``, fail saying what the monitor saw."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            seen = (
                f"\n{formation.script('status')}\n{formation.script('events')}" if formation else ""
            )
            raise TimeoutError(f"failover: {what} not seen in {timeout:.0f} s{seen}")
        time.sleep(0.2)


def _count(store: Store, *where: ColumnElement[bool]) -> int:
    with store.database.read() as connection:
        counted = connection.execute(select(func.count()).select_from(runs).where(*where))
        return int(counted.scalar_one())


def _last_fire(store: Store, schedule_id: str) -> datetime.datetime:
    with store.database.read() as connection:
        last = connection.execute(
            select(func.max(runs.c.scheduled_for)).where(runs.c.schedule_id == schedule_id)
        ).scalar_one()
    return last or datetime.datetime.min.replace(tzinfo=UTC)


def measure(work: Path, isolation: Isolation) -> FailoverResult:
    """One failover, and the standby's loss after it: Herder's home in ``work`` (removed by
    the caller), the formation in a directory of its own that the postgres user can reach,
    removed here."""
    place = Path(tempfile.mkdtemp(prefix="herder-ha-"))
    place.rmdir()  # the script makes it, the postgres user's
    formation = Formation(place)
    try:
        server = Herder(work / "home", formation.url, isolation)
        server.environment["HERDER_CRON_SECONDS"] = "1"
        store = Store(formation.url)
        try:
            with server:
                return _under_load(server, formation, store, isolation)
        finally:
            store.close()
    finally:
        formation.down()


def _under_load(
    server: Herder, formation: Formation, store: Store, isolation: Isolation
) -> FailoverResult:
    statuses: list[int] = []
    hooks = {"response": [lambda response: statuses.append(response.status_code)]}
    credentials = ClientCredentials.load(server.home)
    assert credentials is not None, "the server saved no admin key"
    with httpx.Client(base_url=server.url, timeout=30, event_hooks=hooks) as http:
        herder = HerderClient(server.url, credentials.api_key, http=http)
        _until(lambda: len(herder.list_workers()) == 1, "the worker registered")
        spec = {"runtime": "shell", "command": "echo ran", "retry": {"max_attempts": 3},
                "resources": {"cpu": 0.01, "memory_mb": 16}}  # fmt: skip
        job = herder.create_job("steady", spec)
        herder.create_job("step", {**spec, "command": "sleep 2"})
        workflow = herder.create_workflow({"name": "chain", "tasks": CHAIN})
        schedule = herder.create_schedule(job.id, {"cron": EVERY_SECOND})
        firing_from = datetime.datetime.now(UTC)
        load, stop = Load(herder, job.id), threading.Event()
        submitter = threading.Thread(target=load.run, args=(stop,))
        submitter.start()
        try:
            time.sleep(LOAD_BEFORE_SECONDS)
            chain = herder.start_workflow(workflow.id, idempotency_key=uuid.uuid4().hex)
            primary = formation.script("primary")
            formation.script("crash", primary)
            killed = time.monotonic()
            _until(lambda: len(load.since(killed)) >= ACKNOWLEDGED_AFTER, "writes", formation)
            formation.script("start", primary)
            _until(lambda: formation.settled(primary), "the old primary rejoining", formation)
            formation.script("crash", primary)  # the new primary's standby lost in turn
            standby_lost = time.monotonic()
            _until(
                lambda: len(load.since(standby_lost)) >= ACKNOWLEDGED_AFTER,
                "writes alone",
                formation,
            )
        finally:
            stop.set()
            submitter.join(60)
        firing_until = datetime.datetime.now(UTC).replace(microsecond=0)
        _until(lambda: _last_fire(store, schedule.id) >= firing_until, "the fires caught up")
        herder.pause_schedule(schedule.id)
        _until(lambda: _count(store, runs.c.state.not_in(TERMINAL)) == 0, "every run ended")
        ended = herder.get_workflow_run(chain.id)
    with store.database.read() as connection:
        states = dict(connection.execute(select(runs.c.id, runs.c.state)).all())
        keys = (
            connection.execute(
                select(runs.c.idempotency_key).where(runs.c.idempotency_key.is_not(None))
            )
            .scalars()
            .all()
        )
        fires = (
            connection.execute(
                select(runs.c.scheduled_for).where(runs.c.schedule_id == schedule.id)
            )
            .scalars()
            .all()
        )
        succeeded = (
            connection.execute(select(attempts.c.run_id).where(attempts.c.state == "succeeded"))
            .scalars()
            .all()
        )
        running = connection.execute(
            select(func.count()).where(attempts.c.state == "running")
        ).scalar_one()
    first = firing_from.replace(microsecond=0) + timedelta(seconds=1)
    seconds = int((firing_until - first).total_seconds())
    instants = {first + timedelta(seconds=n) for n in range(seconds + 1)}
    return FailoverResult(
        isolation=isolation,
        unavailable_seconds=load.since(killed)[0] - killed,
        non_503_errors=sum(1 for status in statuses if status >= 500 and status != 503)
        + len(load.gave_up),
        lost=sum(1 for run_id in load.acknowledged if run_id not in states),
        doubled=(len(keys) - len(set(keys))) + (len(succeeded) - len(set(succeeded))),
        fires_missed=len(instants - set(fires)),
        fires_doubled=len(fires) - len(set(fires)),
        orphans=running + sum(1 for state in states.values() if state not in TERMINAL),
        submissions=len(load.acknowledged),
        degraded_writes=len(load.since(standby_lost)),
        workflow_succeeded=ended.state is WorkflowRunState.SUCCEEDED,
    )


def section(
    results: list[FailoverResult], machine: str, when: datetime.datetime, command: str
) -> list[str]:
    lines = [
        f"\n### The database's primary lost under load, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`.\n",
        "| worker isolation | unavailable | non-503 errors | lost | doubled | fires missed "
        "| fires doubled | orphans | submissions | writes with the standby lost too |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.isolation.value} | {r.unavailable_seconds:.1f} s | {r.non_503_errors} | {r.lost} "
        f"| {r.doubled} | {r.fires_missed} | {r.fires_doubled} | {r.orphans} "
        f"| {r.submissions} | {r.degraded_writes} |"
        for r in results
    ]
    lines += [
        "",
        "pg_auto_failover (`scripts/ha-postgres.sh`: checks each second, a node unhealthy "
        "after 2 s, an unreachable primary not waited for past 3 s), a server with its "
        "control loops and one worker on the formation's multi-host URL; keyed one-off runs "
        "one after the other, a schedule firing every second and a three-task workflow "
        "running when the primary's keeper and postgres are killed (`kill -9`). Unavailable: "
        "from the kill to the first acknowledged submission. Then the old primary rejoins as "
        "the standby and is killed in turn: writes go on against the primary alone.",
    ]
    return lines
