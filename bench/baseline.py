"""How fast plain Python spawns ``/bin/true`` here: the floor any runner is measured against."""

from __future__ import annotations

import subprocess
import time

SPAWNS = 1000


def spawn_rate(spawns: int = SPAWNS) -> float:
    started = time.perf_counter()
    for _ in range(spawns):
        subprocess.Popen(["/bin/true"]).wait()
    return spawns / (time.perf_counter() - started)
