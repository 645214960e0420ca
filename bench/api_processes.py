"""Scenario: how submissions through the API grow from one API process to three.

``herder server --processes N`` (no control loops, no worker: only the API) on PostgreSQL;
client processes, each with a few threads on keep-alive connections, send one-run submissions
(``POST /v1/jobs/{id}/runs``) as fast as they are answered for a fixed time after a warm-up.
Submissions/s are the answered ones over that time; the API's CPU per submission is its
process tree's, from /proc. On a 2-core machine the clients and PostgreSQL share the cores
with the API processes: the ratio says how far the API, not the box, was the limit.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.oneoff import _free_port
from bench.proc import CpuTimes
from herder.client import HerderClient
from herder.credentials import ClientCredentials

PROCESS_COUNTS = (1, 3)
CLIENT_PROCESSES = 4
THREADS_PER_CLIENT = 4
WARM_UP_SECONDS = 2.0
MEASURE_SECONDS = 10.0
JOB = {"runtime": "shell", "command": "true", "resources": {"cpu": 0.01, "memory_mb": 8}}


@dataclass(frozen=True)
class ApiProcessesResult:
    processes: int
    submissions: int
    seconds: float
    api_cpu_seconds: float
    refused: int  # answered with anything but 201, or not at all
    machine_busy: float  # the share of all cores busy meanwhile (everything on the box)

    @property
    def per_second(self) -> float:
        return self.submissions / self.seconds

    @property
    def api_cpu_ms(self) -> float:
        return self.api_cpu_seconds * 1000 / max(1, self.submissions)


def _cpu_ticks() -> tuple[int, int]:
    """All cores' (busy, total) ticks since boot, from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def _client(url: str, api_key: str, job_id: str, start: float, end: float) -> tuple[int, int]:
    """One client process: its threads' (answered, refused) between ``start`` and ``end``."""
    counts = [[0, 0] for _ in range(THREADS_PER_CLIENT)]

    def send(count: list[int]) -> None:
        headers = {"Authorization": f"Bearer {api_key}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
            while (now := time.time()) < end:
                try:
                    answered = http.post(f"/v1/jobs/{job_id}/runs", json={}).status_code == 201
                except httpx.TransportError:
                    answered = False
                if now >= start:
                    count[0 if answered else 1] += 1

    threads = [threading.Thread(target=send, args=(count,)) for count in counts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(count[0] for count in counts), sum(count[1] for count in counts)


def _serve(home: Path, database_url: str, processes: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    environment = {**os.environ, "HERDER_HOME": str(home), "HERDER_DATABASE_URL": database_url}
    server = subprocess.Popen(
        [sys.executable, "-m", "herder.cli", "server", "--port", str(port),
         "--processes", str(processes)],
        env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                time.sleep(1.0)  # every process up, not only the first to answer
                return server, url
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise
        time.sleep(0.1)


def measure_one(home: Path, database_url: str, processes: int) -> ApiProcessesResult:
    server, url = _serve(home, database_url, processes)
    try:
        credentials = ClientCredentials.load(home)
        assert credentials is not None
        with HerderClient(url, credentials.api_key) as herder:
            job_id = herder.create_job(f"submitted-{processes}", JOB).id
        start = time.time() + WARM_UP_SECONDS
        end = start + MEASURE_SECONDS
        with ProcessPoolExecutor(CLIENT_PROCESSES) as pool:
            futures = [
                pool.submit(_client, url, credentials.api_key, job_id, start, end)
                for _ in range(CLIENT_PROCESSES)
            ]
            time.sleep(max(0.0, start - time.time()))
            before, busy_before = CpuTimes.of_tree(server.pid), _cpu_ticks()
            time.sleep(max(0.0, end - time.time()))
            after, busy_after = CpuTimes.of_tree(server.pid), _cpu_ticks()
            answered, refused = (
                sum(column) for column in zip(*(f.result() for f in futures), strict=True)
            )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
    return ApiProcessesResult(
        processes, answered, MEASURE_SECONDS, (after - before).total, refused, busy
    )


def measure(home: Path, fresh_database: Callable[[], str]) -> list[ApiProcessesResult]:
    """Each count of processes on a fresh database and home."""
    return [
        measure_one(home / f"processes-{processes}", fresh_database(), processes)
        for processes in PROCESS_COUNTS
    ]


def section(
    results: list[ApiProcessesResult], machine: str, when: datetime.datetime, command: str
) -> list[str]:
    one = results[0].per_second
    lines = [
        f"\n### Submissions through 1 and 3 API processes, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}`.\n",
        "| `herder server --processes` | submissions | seconds | submissions/s "
        "| ratio to one process | API CPU per submission | machine busy | refused |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {result.processes} | {result.submissions:,} | {result.seconds:.0f} "
        f"| {result.per_second:.0f} | {result.per_second / one:.2f} "
        f"| {result.api_cpu_ms:.2f} ms | {result.machine_busy:.0%} | {result.refused} |"
        for result in results
    ]
    lines += [
        "",
        f"PostgreSQL, a fresh database each; only the API (no control loops, no worker). "
        f"{CLIENT_PROCESSES} client processes of {THREADS_PER_CLIENT} threads on keep-alive "
        f"connections send `POST /v1/jobs/{{id}}/runs` (one run each) for {MEASURE_SECONDS:.0f} s "
        f"after {WARM_UP_SECONDS:.0f} s of warm-up. The clients and PostgreSQL share the "
        "machine's cores with the API processes.",
    ]
    return lines
