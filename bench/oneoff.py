"""Scenario 1: one-off runs of ``true`` through the API to one local worker.

Throughput: N runs submitted in batches (``POST /v1/runs/batch``) as fast as the API takes
them; runs/s from the first submit to the last completion (server timestamps). Latency: on an
idle system, one run at a time, submit → start (the run's ``started_at``, when a worker took
it, minus its ``created_at``), and submit → end. The worker runs as root, with the default
sandbox or with ``--isolation none``. CPU over the throughput part, from /proc: the server
(API and scheduler loops), the worker agent and the jobs it reaped, and the whole PostgreSQL
cluster.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection

from bench.proc import CpuTimes, parent_of
from herder.client import HerderClient
from herder.credentials import ClientCredentials
from herder.domain.states import TERMINAL_RUN_STATES
from herder.store.database import Database
from herder.store.schema import runs
from herder.worker.isolation import Isolation

JOB = {
    "runtime": "shell",
    "command": "true",
    "resources": {"cpu": 0.01, "memory_mb": 8},
}
POLL_SECONDS = 0.2  # the bench's own count of ended runs: rare, as PostgreSQL's CPU is measured


@dataclass(frozen=True)
class OneOffResult:
    store: str
    isolation: Isolation
    runs: int
    seconds: float
    submit_seconds: float
    start_p50_ms: float
    start_p99_ms: float
    end_p50_ms: float
    server_cpu: CpuTimes  # the API and the scheduler loops (``--with-scheduler``)
    worker_cpu: CpuTimes  # own: the agent; reaped: the jobs (sandbox launcher, set-up, program)
    database_cpu_seconds: float | None  # the PostgreSQL cluster; None on SQLite
    client_cpu_seconds: float
    # what the server process sent the database over the throughput part, by kind
    # (herder_database_statements_total: statements, commits, rollbacks), and a run alone
    statements: dict[str, float]
    idle_statements_per_run: float

    def per_run_ms(self, seconds: float) -> float:
        return seconds * 1000 / self.runs

    @property
    def statements_per_run(self) -> float:
        """Round trips to the database a run cost: statements and commits."""
        return sum(self.statements.values()) / self.runs

    @property
    def control_plane_seconds(self) -> float:
        return self.server_cpu.total + self.worker_cpu.own + (self.database_cpu_seconds or 0.0)

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds


# A ceiling on the server's start: alone it takes 2 s, but the failover test runs this beside
# the whole suite, where a start on PostgreSQL once took past 30 s.
START_SECONDS = 90.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Herder:
    """A server and one worker as real processes, stopped on exit."""

    def __init__(self, home: Path, database_url: str, isolation: Isolation) -> None:
        self.home = home
        self.isolation = isolation
        self.database_url = database_url
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.environment = {
            **os.environ,
            "HERDER_HOME": str(home),
            "HERDER_DATABASE_URL": database_url,
        }
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Herder:
        port = self.url.rsplit(":", 1)[1]
        self._spawn("server", "--with-scheduler", "--port", port)  # the dispatcher, too
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)
        self._spawn(
            "worker",
            "--server",
            self.url,
            "--token-file",  # never the token itself on the command line
            str(self.home / "worker-token"),
            "--name",
            "bench",
            "--home",
            str(self.home / "worker"),
            "--isolation",
            self.isolation.value,
        )
        return self

    def _spawn(self, *args: str) -> None:
        self.processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "herder.cli", *args],
                env=self.environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    def __exit__(self, *_: object) -> None:
        for process in reversed(self.processes):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()

    def statements(self) -> dict[str, float]:
        """What the server process has sent the database so far, by kind."""
        credentials = ClientCredentials.load(self.home)
        assert credentials is not None
        response = httpx.get(
            f"{self.url}/metrics",
            headers={"Authorization": f"Bearer {credentials.api_key}"},
            timeout=30,
        )
        response.raise_for_status()
        return {
            sample.labels["kind"]: sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples
            if sample.name == "herder_database_statements_total"
        }

    def client(self) -> HerderClient:
        credentials = ClientCredentials.load(self.home)
        assert credentials is not None
        return HerderClient(self.url, credentials.api_key)


def _wait_all_ended(connection: Connection, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    ended = sorted(TERMINAL_RUN_STATES)
    while time.monotonic() < deadline:
        done = connection.execute(
            select(func.count()).select_from(runs).where(runs.c.state.in_(ended))
        ).scalar_one()
        connection.rollback()  # a fresh snapshot for the next count
        if done >= count:
            return
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"only {done} of {count} runs ended within {timeout}s")


def _own_backend(connection: Connection) -> int | None:
    """The PostgreSQL backend serving ``connection``: its CPU is the bench's, not Herder's."""
    if connection.dialect.name != "postgresql":
        return None
    backend: int = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
    connection.rollback()
    return backend


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(
    store_name: str,
    database_url: str,
    home: Path,
    isolation: Isolation,
    runs_count: int,
    idle_runs: int,
) -> OneOffResult:
    database = Database(database_url)
    postmaster = postmaster_of(database) if database_url.startswith("postgresql") else None
    with Herder(home, database_url, isolation) as herder, herder.client() as client:
        job = client.create_job("bench", JOB)
        client.wait(client.start_run(job.id).id, timeout=30)  # warm: worker registered
        # Latency on an idle system: one run at a time.
        idle_before = sum(herder.statements().values())
        starts, ends = [], []
        for _ in range(idle_runs):
            run = client.wait(client.start_run(job.id).id, timeout=30, poll=0.005)
            assert run.started_at is not None
            assert run.finished_at is not None
            starts.append((run.started_at - run.created_at).total_seconds() * 1000)
            ends.append((run.finished_at - run.created_at).total_seconds() * 1000)
        idle_statements = sum(herder.statements().values()) - idle_before
        # Throughput: everything at once.
        with database.read() as connection:
            before = connection.execute(select(func.count()).select_from(runs)).scalar_one()
        server_pid, worker_pid = (process.pid for process in herder.processes)
        server_before, worker_before = (
            CpuTimes.of_tree(server_pid),
            CpuTimes.of_root_and_rest(worker_pid),
        )
        # the bench's own counts of ended runs go through one connection whose backend's
        # CPU is taken out of PostgreSQL's: a count of a growing table is not Herder's work
        with database.engine.connect() as poll:
            poller = _own_backend(poll)
            poller_before = CpuTimes.of_tree(poller) if poller else None
            database_before = CpuTimes.of_tree(postmaster) if postmaster else None
            statements_before = herder.statements()
            client_before = time.process_time()
            submit_started = time.monotonic()
            _submit_all(herder, job.id, runs_count)
            submit_seconds = time.monotonic() - submit_started
            _wait_all_ended(poll, before + runs_count, timeout=600)
            server_cpu = CpuTimes.of_tree(server_pid) - server_before
            worker_cpu = CpuTimes.of_root_and_rest(worker_pid) - worker_before
            database_cpu = (
                (CpuTimes.of_tree(postmaster) - database_before).total
                - (CpuTimes.of_tree(poller) - poller_before).total
                if postmaster and database_before and poller and poller_before
                else None
            )
        client_cpu = time.process_time() - client_before
        statements_after = herder.statements()
        with database.read() as connection:
            first, last = connection.execute(
                select(func.min(runs.c.created_at), func.max(runs.c.finished_at)).where(
                    runs.c.id.in_(select(runs.c.id).order_by(runs.c.id.desc()).limit(runs_count))
                )
            ).one()
    database.dispose()
    return OneOffResult(
        store=store_name,
        isolation=isolation,
        runs=runs_count,
        seconds=(last - first).total_seconds(),
        submit_seconds=submit_seconds,
        start_p50_ms=statistics.median(starts),
        start_p99_ms=_percentile(starts, 0.99),
        end_p50_ms=statistics.median(ends),
        server_cpu=server_cpu,
        worker_cpu=worker_cpu,
        database_cpu_seconds=database_cpu,
        client_cpu_seconds=client_cpu,
        statements={
            kind: count - statements_before.get(kind, 0.0)
            for kind, count in statements_after.items()
        },
        idle_statements_per_run=idle_statements / max(idle_runs, 1),
    )


def _submit_all(herder: Herder, job_id: str, count: int) -> None:
    """Every run of the throughput part, as a user submits many: ``POST /v1/runs/batch``,
    1,000 runs a request."""
    with herder.client() as client:
        client.start_runs(job_id, count)


def postmaster_of(database: Database) -> int | None:
    """The PostgreSQL server's main process, when it runs on this machine: its CPU, with its
    reaped children's, is that of every backend that ended; the live ones are its children."""
    with database.read() as connection:
        backend = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
    return parent_of(int(backend))
