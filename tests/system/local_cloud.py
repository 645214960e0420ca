"""A "cloud" on this machine for the autoscaling test: the scale command ``herder
autoscaler`` calls. ``python -m tests.system.local_cloud STATE_DIR SERVER_URL POOL`` reads the
decision on stdin, stops the removable workers it started, and starts ``herder worker``
processes until the pool has the count asked for, counting the ones it started that have
not registered yet. Each worker's pid is kept in STATE_DIR as ``NAME.pid``; the test stops
whatever is left there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

WORKER_FLAGS = ("--isolation", "none", "--cpu", "4", "--memory-mb", "4096", "--max-slots", "100")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def started(state: Path) -> dict[str, int]:
    """The workers this cloud started that still run: name → pid."""
    found = {}
    for pid_file in state.glob("*.pid"):
        pid = int(pid_file.read_text())
        if alive(pid):
            found[pid_file.stem] = pid
        else:
            pid_file.unlink()
    return found


def main(state: Path, server: str, pool: str) -> None:
    decision = json.load(sys.stdin)
    running = started(state)
    for worker in decision["removable"]:
        pid = running.pop(worker["name"], None)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
    draining = {worker["name"] for worker in decision["workers"] if worker["draining"]}
    accepting = [name for name in running if name not in draining]
    made = len(list(state.glob("*.log")))  # names are never used twice
    for number in range(decision["desired_workers"] - len(accepting)):
        name = f"{pool}-{made + number}"
        with (state / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "herder.cli", "worker", "--server", server, "--pool", pool,
                 "--name", name, "--home", str(state / name), *WORKER_FLAGS],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        (state / f"{name}.pid").write_text(str(process.pid))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
