"""The peer, measured in the same run: Celery 5 with Redis on the same runs of ``/bin/true``.

One Celery worker as a real process (``--pool prefork --concurrency 2``, Celery's default
prefetch), Redis at 127.0.0.1:6379 as broker and result backend in its own database (15,
flushed before and after; no other database is touched). The bench process submits every task
from one thread and waits for every result: tasks/s from the first submit to the last result
in hand. CPU from /proc: the worker (its parent and pool processes; what they reaped is the
jobs) and the whole Redis server, which other users of this machine's Redis may add to.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from celery import Task
from celery.result import ResultSet

from bench import celery_app
from bench.proc import CpuTimes, children_of, parent_of

REPOSITORY = Path(__file__).parent.parent
WARM_UP_TASKS = 20  # both pool processes started and connected before the clock starts
READY_TIMEOUT = 60.0  # seconds for the worker to take its first tasks
RESULTS_TIMEOUT = 600.0  # seconds for every result of one variant
WORKER_OPTIONS = ("--pool", "prefork", "--concurrency", "2", "--loglevel", "WARNING")
VARIANTS = {"subprocess": celery_app.run_true, "no-op": celery_app.no_op}


@dataclass(frozen=True)
class PeerResult:
    variant: str
    tasks: int
    seconds: float
    worker_cpu: CpuTimes  # own: Celery's parent and pool processes; reaped: the jobs
    redis_cpu_seconds: float
    client_cpu_seconds: float

    @property
    def tasks_per_second(self) -> float:
        return self.tasks / self.seconds

    def per_task_ms(self, seconds: float) -> float:
        return seconds * 1000 / self.tasks


def measure(tasks: int, log: Path) -> list[PeerResult]:
    """Both variants on one worker, the subprocess one first."""
    broker = redis.Redis.from_url(celery_app.REDIS_URL)
    try:
        redis_pid = int(broker.info("server")["process_id"])
    except redis.ConnectionError as error:
        raise SystemExit(
            f"Redis is not answering at {celery_app.REDIS_URL} (scripts/ensure-redis.sh): {error}"
        ) from error
    broker.flushdb()
    try:
        with CeleryWorker(log) as worker:
            _run_all(celery_app.no_op, WARM_UP_TASKS, READY_TIMEOUT)
            return [
                _measure_variant(name, task, tasks, worker.pid, redis_pid)
                for name, task in VARIANTS.items()
            ]
    finally:
        broker.flushdb()
        broker.close()


def _measure_variant(
    name: str, task: Task, tasks: int, worker_pid: int, redis_pid: int
) -> PeerResult:
    worker_before, redis_before = CpuTimes.of_tree(worker_pid), CpuTimes.of_tree(redis_pid)
    client_before = time.process_time()
    seconds = _run_all(task, tasks, RESULTS_TIMEOUT)
    return PeerResult(
        variant=name,
        tasks=tasks,
        seconds=seconds,
        worker_cpu=CpuTimes.of_tree(worker_pid) - worker_before,
        redis_cpu_seconds=(CpuTimes.of_tree(redis_pid) - redis_before).total,
        client_cpu_seconds=time.process_time() - client_before,
    )


def _run_all(task: Task, count: int, timeout: float) -> float:
    """Submit ``count`` tasks, wait for every result; seconds from first submit to last result."""
    started = time.perf_counter()
    results = ResultSet([task.delay() for _ in range(count)])
    results.get(timeout=timeout)
    return time.perf_counter() - started


class CeleryWorker:
    """``celery worker`` as a real process; on exit a warm shutdown, and no process left."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def __enter__(self) -> CeleryWorker:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "bench.celery_app",
                    "worker",
                    *WORKER_OPTIONS,
                ],
                cwd=REPOSITORY,
                env={**os.environ, "BENCH_CELERY_REDIS_URL": celery_app.REDIS_URL},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        return self

    def __exit__(self, *_: object) -> None:
        assert self.process is not None
        pool = children_of(self.process.pid)
        self.process.send_signal(signal.SIGTERM)  # warm shutdown: the pool ends with it
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pid in pool:  # a pool process that outlived its parent
            if parent_of(pid) is not None:
                os.kill(pid, signal.SIGKILL)
