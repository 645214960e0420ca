"""Output floods: what N ``cat /dev/zero`` runs cost the worker, beside N runs that print the
same 8 MiB the worker keeps and exit, and how long a quiet run beside the floods waits.

One server and one worker (``bench.oneoff.Herder``, SQLite). Each phase starts N runs at once
(``cpu: 0.01``, a 10 s timeout): first N ``head -c 8MiB /dev/zero`` (the fixed cost: the 8 MiB
each attempt may keep, sent to the server), then N ``cat /dev/zero`` with one ``true`` run
submitted beside them. From /proc: the worker agent's own CPU seconds per phase, and the rest
of its tree (the launcher and the jobs).

    .venv/bin/python -m bench.output_flood [--runs 20] [--isolation none|sandbox]

2026-11-27 18:00-18:20 UTC, this 2-core box (shared, busy), 20 runs, root worker; worker
agent CPU seconds, "8 MiB and exit" / "cat /dev/zero", and the quiet run beside the floods:

    before (main 3edd7a6), none      4.28 / 6.11 s; quiet run 32.2 s; floods timed out (10 s)
    before, sandbox                  5.17 / 6.04 s; quiet run 22.2 s; floods timed out (10 s)
    after, none                      5.56 / 4.84 s; quiet run 0.98 s; floods failed at once
    after, sandbox                   5.56 / 5.08 s; quiet run 1.74 s; floods failed at once

Before, a flood cost the worker more the longer it ran (here 10 s of it: +0.9 to +1.8 s);
after, no more than printing 8 MiB. The fixed part is sending 8 MiB per attempt to the server.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.oneoff import Herder
from bench.proc import CpuTimes
from herder.client import HerderClient
from herder.settings import sqlite_url
from herder.worker.isolation import Isolation

LIMITS: dict[str, Any] = {"resources": {"cpu": 0.01, "memory_mb": 16}, "timeout_seconds": 10}
KEPT = {"runtime": "shell", "command": "head -c 8388608 /dev/zero", **LIMITS}
FLOOD = {"runtime": "shell", "command": "cat /dev/zero", **LIMITS}
QUIET = {"runtime": "shell", "command": "true", **LIMITS}


def phase(
    client: HerderClient, worker: int, job_id: str, runs: int, beside: str | None = None
) -> tuple[CpuTimes, float, Counter[str], float | None]:
    """The worker's CPU over ``runs`` runs of ``job_id`` at once, their wall time and how
    they ended, and how long a run of ``beside`` submitted with them took, submit to end."""
    before, started = CpuTimes.of_root_and_rest(worker), time.monotonic()
    ids = [client.start_run(job_id).id for _ in range(runs)]
    took = None
    if beside is not None:
        probe = client.wait(client.start_run(beside).id, timeout=300, poll=0.01)
        assert probe.finished_at is not None
        took = (probe.finished_at - probe.created_at).total_seconds()
    ended = [client.wait(run_id, timeout=300) for run_id in ids]
    seconds = time.monotonic() - started
    reasons = Counter(f"{run.state}: {run.reason}" for run in ended)
    return CpuTimes.of_root_and_rest(worker) - before, seconds, reasons, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--isolation", choices=["none", "sandbox"], default="none")
    options = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="herder-flood-"))
    isolation = Isolation(options.isolation)
    try:
        with (
            Herder(home, sqlite_url(home / "herder.db"), isolation) as herder,
            herder.client() as client,
        ):
            kept, flood, quiet = (client.create_job(name, spec).id for name, spec in
                                  (("kept", KEPT), ("flood", FLOOD), ("quiet", QUIET)))  # fmt: skip
            client.wait(client.start_run(quiet).id, timeout=60)  # the worker is up
            worker = herder.processes[1].pid
            results = {
                "8 MiB and exit": phase(client, worker, kept, options.runs),
                "cat /dev/zero": phase(client, worker, flood, options.runs, beside=quiet),
            }
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"{options.runs} runs at once, isolation {options.isolation}:")
    for name, (cpu, seconds, reasons, took) in results.items():
        print(f"  {name}: worker agent CPU {cpu.own:.2f}s, its launcher and jobs "
              f"{cpu.reaped:.2f}s; all ended in {seconds:.1f}s")  # fmt: skip
        if took is not None:
            print(f"    a quiet run beside them: {took:.2f}s submit to end")
        for reason, count in reasons.most_common():
            print(f"    {count} x {reason}")


if __name__ == "__main__":
    main()
