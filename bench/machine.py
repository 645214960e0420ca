"""What the numbers were measured on."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return 0.0


def _postgres_version() -> str:
    try:
        return subprocess.run(
            ["psql", "-h", "127.0.0.1", "-d", "test", "-Atc", "SHOW server_version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def describe() -> str:
    return (
        f"{_cpu_model()}, {len(os.sched_getaffinity(0))} cores, {_memory_gib():.0f} GiB; "
        f"Linux {platform.release()}; Python {platform.python_version()}; "
        f"PostgreSQL {_postgres_version()}; running as uid {os.geteuid()}"
    )
