"""Spawn limits on this machine: the floor any runner is measured against.

``/bin/true`` started from Python as fast as it goes from 2 threads (one per core here), bare
and inside fresh namespaces (``unshare``, as a sandbox needs at least): a runner that starts
every job in its own process cannot beat these rates.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass

PLAIN = ("/bin/true",)
UNSHARE = ("unshare", "--net", "--pid", "--fork", "--mount-proc", "--ipc", "--uts", "/bin/true")
THREADS = 2
SECONDS = 2.5  # per command


@dataclass(frozen=True)
class SpawnLimits:
    plain: float  # spawns/s
    unshare: float | None  # spawns/s; None where namespaces cannot be made (not root)


def spawn_rate(command: tuple[str, ...], threads: int = THREADS, seconds: float = SECONDS) -> float:
    """Spawns/s of ``command`` waited for one at a time by each of ``threads`` threads."""
    counts = [0] * threads
    deadline = time.perf_counter() + seconds

    def spawn(index: int) -> None:
        while time.perf_counter() < deadline:
            subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
            counts[index] += 1

    started = time.perf_counter()
    workers = [threading.Thread(target=spawn, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.perf_counter() - started)


def spawn_limits() -> SpawnLimits:
    return SpawnLimits(
        plain=spawn_rate(PLAIN), unshare=spawn_rate(UNSHARE) if _runs(UNSHARE) else None
    )


def _runs(command: tuple[str, ...]) -> bool:
    try:
        subprocess.run(command, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True
