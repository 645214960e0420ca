"""Checkpoints end to end: how long a suspend takes to free the worker and a resume to start
the job again, with a checkpoint of 10 MiB and of 256 MiB, beside the same with nothing saved.

One server and one worker (``bench.oneoff.Herder``). The job writes S MiB from /dev/urandom
(incompressible: the worst case) into ``$HERDER_CHECKPOINT_DIR`` and sleeps; the bench
suspends it and times the call until ``GET /v1/workers`` shows the worker's room free (SIGTERM,
the job's exit, the save: pack, compress, upload, store, then the report), resumes it and
times the call until the next attempt's first line (claim, download, unpack, start). Less the
same with S = 0 (nothing saved or restored), that is the checkpoint's cost; S over it is the
throughput.

    .venv/bin/python -m bench.run --scenario checkpoints [--store …] [--isolation …]
    .venv/bin/python -m bench.checkpoints [--isolation none|sandbox]   (SQLite, printed only)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.oneoff import Herder
from herder.client import HerderClient
from herder.client.errors import ApiError
from herder.settings import sqlite_url
from herder.worker.isolation import Isolation

SIZES_MIB = (0, 10, 256)
POLL_SECONDS = 0.01
COMMAND = """if [ -f "$HERDER_CHECKPOINT_DIR/state" ]; then
  echo "restored $(stat -c %s "$HERDER_CHECKPOINT_DIR/state")"
else
  [ {size} -gt 0 ] && head -c {size}M /dev/urandom > "$HERDER_CHECKPOINT_DIR/state"
  echo written
fi
exec sleep 600"""


@dataclass(frozen=True)
class Timing:
    size_mib: int
    suspend_to_free: float  # seconds
    resume_to_start: float
    stored_bytes: int


def _until(condition: object, timeout: float = 300) -> float:
    """Seconds until ``condition()`` holds."""
    assert callable(condition)
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError("the condition did not hold in time")
        time.sleep(POLL_SECONDS)
    return time.monotonic() - started


def _first_line(client: HerderClient, run_id: str, attempt: int) -> bool:
    try:
        return bool(client.logs(run_id, attempt=attempt).chunks)
    except ApiError:  # no such attempt yet
        return False


def _room_free(client: HerderClient) -> bool:
    (worker,) = client.list_workers()
    return worker.in_use is None or worker.in_use.slots == 0


def one(client: HerderClient, size_mib: int) -> Timing:
    spec = {
        "runtime": "shell",
        "command": COMMAND.format(size=size_mib),
        "stop_grace_seconds": 5,
        "checkpoint_mb": size_mib + 1,
        "resources": {"cpu": 0.5, "memory_mb": 2048},
    }
    job = client.create_job(f"checkpoint-{size_mib}-{time.monotonic_ns()}", spec)
    run = client.start_run(job.id)
    _until(lambda: _first_line(client, run.id, 1))
    started = time.monotonic()
    client.suspend_run(run.id)
    freed = started + _until(lambda: _room_free(client))
    suspended = client.get_run(run.id)
    assert suspended.state == "suspended", suspended.state
    stored = client.get_checkpoint(run.id).stored_bytes if size_mib else 0
    resumed_at = time.monotonic()
    client.resume_run(run.id)
    restarted = resumed_at + _until(lambda: _first_line(client, run.id, 2))
    client.cancel_run(run.id)
    client.wait(run.id, timeout=60)
    return Timing(size_mib, freed - started, restarted - resumed_at, stored)


def measure(
    database_url: str, home: Path, isolation: Isolation, repeats: int
) -> list[tuple[int, float, float, int]]:
    """The median timings of ``repeats`` rounds per size: (S, suspend → free, resume →
    first line, stored bytes)."""
    with Herder(home, database_url, isolation) as herder, herder.client() as client:
        warm = client.create_job("warm", {"runtime": "shell", "command": "true"})
        client.wait(client.start_run(warm.id).id, timeout=60)  # the worker is up
        rounds = [[one(client, size) for size in SIZES_MIB] for _ in range(repeats)]
    medians = []
    for index, size in enumerate(SIZES_MIB):
        timings = [round_[index] for round_ in rounds]
        medians.append((
            size,
            statistics.median(t.suspend_to_free for t in timings),
            statistics.median(t.resume_to_start for t in timings),
            timings[-1].stored_bytes,
        ))  # fmt: skip
    return medians


def report(store: str, isolation: str, medians: list[tuple[int, float, float, int]]) -> list[str]:
    (_, base_free, base_start, _), *sized = medians
    lines = [f"checkpoints, {store}, isolation {isolation} (medians; S = 0 is the baseline):",
             f"  S = 0: suspend → room free {base_free * 1000:.0f} ms; "
             f"resume → first line {base_start * 1000:.0f} ms"]  # fmt: skip
    for size, free, start, stored in sized:
        save, restore = free - base_free, start - base_start
        lines.append(
            f"  S = {size} MiB (stored {stored / 2**20:.1f} MiB): suspend → room free "
            f"{free * 1000:.0f} ms (save {size / save:.0f} MiB/s); resume → first line "
            f"{start * 1000:.0f} ms (restore {size / restore:.0f} MiB/s)"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--isolation", choices=["none", "sandbox"], default="sandbox")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="herder-checkpoints-"))
    try:
        medians = measure(
            sqlite_url(home / "herder.db"), home, Isolation(options.isolation), options.repeats
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print("\n".join(report("sqlite", options.isolation, medians)))


if __name__ == "__main__":
    main()
