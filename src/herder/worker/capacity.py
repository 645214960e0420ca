"""What this machine can offer: cores, memory and GPUs, detected unless declared."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from herder.domain.jobs import Capacity


def detect_cpu() -> float:
    return float(len(os.sched_getaffinity(0)))


def detect_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 1024


def detect_gpus() -> int:
    """GPUs listed by ``nvidia-smi -L``; none when the tool is absent or fails."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return 0
    try:
        listing = subprocess.run(
            [tool, "-L"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


def detect_capacity(
    cpu: float | None = None, memory_mb: int | None = None, gpus: int | None = None
) -> Capacity:
    return Capacity(
        cpu=cpu if cpu is not None else detect_cpu(),
        memory_mb=memory_mb if memory_mb is not None else detect_memory_mb(),
        gpus=gpus if gpus is not None else detect_gpus(),
    )
