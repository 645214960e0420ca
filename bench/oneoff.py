"""Scenario 1: one-off runs of ``true`` through the API to one local worker.

Throughput: N runs submitted by concurrent clients as fast as the API takes them; runs/s from
the first submit to the last completion (server timestamps). Latency: on an idle system, one
run at a time, submit → start (the run's ``started_at``, when a worker took it, minus its
``created_at``), and submit → end.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import func, select

from herder.client import HerderClient
from herder.credentials import ClientCredentials
from herder.store.database import Database
from herder.store.schema import runs

JOB = {
    "runtime": "shell",
    "command": "true",
    "resources": {"cpu": 0.01, "memory_mb": 8},
}
SUBMITTERS = 8


@dataclass(frozen=True)
class CpuTimes:
    """CPU seconds of one process: its own, and its reaped children's (the jobs)."""

    own: float
    children: float

    @classmethod
    def of(cls, pid: int) -> CpuTimes:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return cls(
            own=(int(fields[11]) + int(fields[12])) / ticks,
            children=(int(fields[13]) + int(fields[14])) / ticks,
        )

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(self.own - other.own, self.children - other.children)


@dataclass(frozen=True)
class OneOffResult:
    store: str
    runs: int
    seconds: float
    submit_seconds: float
    start_p50_ms: float
    start_p99_ms: float
    end_p50_ms: float
    server_cpu: CpuTimes
    worker_cpu: CpuTimes
    client_cpu_seconds: float

    def per_run_ms(self, seconds: float) -> float:
        return seconds * 1000 / self.runs

    @property
    def runs_per_second(self) -> float:
        return self.runs / self.seconds


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Herder:
    """A server and one worker as real processes, stopped on exit."""

    def __init__(self, home: Path, database_url: str) -> None:
        self.home = home
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
        deadline = time.monotonic() + 30
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

    def client(self) -> HerderClient:
        credentials = ClientCredentials.load(self.home)
        assert credentials is not None
        return HerderClient(self.url, credentials.api_key)


def _wait_all_ended(database: Database, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    ended = ["succeeded", "failed", "timed_out", "cancelled", "lost"]
    while time.monotonic() < deadline:
        with database.read() as connection:
            done = connection.execute(
                select(func.count()).select_from(runs).where(runs.c.state.in_(ended))
            ).scalar_one()
        if done >= count:
            return
        time.sleep(0.05)
    raise TimeoutError(f"only {done} of {count} runs ended within {timeout}s")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def measure(
    store_name: str, database_url: str, home: Path, runs_count: int, idle_runs: int
) -> OneOffResult:
    database = Database(database_url)
    with Herder(home, database_url) as herder, herder.client() as client:
        job = client.create_job("bench", JOB)
        client.wait(client.start_run(job.id).id, timeout=30)  # warm: worker registered
        # Latency on an idle system: one run at a time.
        starts, ends = [], []
        for _ in range(idle_runs):
            run = client.wait(client.start_run(job.id).id, timeout=30, poll=0.005)
            assert run.started_at is not None
            assert run.finished_at is not None
            starts.append((run.started_at - run.created_at).total_seconds() * 1000)
            ends.append((run.finished_at - run.created_at).total_seconds() * 1000)
        # Throughput: everything at once from several clients.
        with database.read() as connection:
            before = connection.execute(select(func.count()).select_from(runs)).scalar_one()
        server_pid, worker_pid = (process.pid for process in herder.processes)
        server_before, worker_before = CpuTimes.of(server_pid), CpuTimes.of(worker_pid)
        client_before = time.process_time()
        submit_started = time.monotonic()
        with ThreadPoolExecutor(SUBMITTERS) as pool:
            clients = [herder.client() for _ in range(SUBMITTERS)]
            list(
                pool.map(
                    lambda index: clients[index % SUBMITTERS].start_run(job.id),
                    range(runs_count),
                )
            )
        submit_seconds = time.monotonic() - submit_started
        _wait_all_ended(database, before + runs_count, timeout=600)
        server_cpu = CpuTimes.of(server_pid) - server_before
        worker_cpu = CpuTimes.of(worker_pid) - worker_before
        client_cpu = time.process_time() - client_before
        with database.read() as connection:
            first, last = connection.execute(
                select(func.min(runs.c.created_at), func.max(runs.c.finished_at)).where(
                    runs.c.id.in_(select(runs.c.id).order_by(runs.c.id.desc()).limit(runs_count))
                )
            ).one()
    database.dispose()
    return OneOffResult(
        store=store_name,
        runs=runs_count,
        seconds=(last - first).total_seconds(),
        submit_seconds=submit_seconds,
        start_p50_ms=statistics.median(starts),
        start_p99_ms=_percentile(starts, 0.99),
        end_p50_ms=statistics.median(ends),
        server_cpu=server_cpu,
        worker_cpu=worker_cpu,
        client_cpu_seconds=client_cpu,
    )
