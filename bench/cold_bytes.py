"""Bytes per run of a cold day file with varied rows: ``python -m bench.cold_bytes [runs]``.

``bench.cold_tier`` exports real slices, but of runs that differ only in ids and times, which
gzip folds away (64 B a run). This builds one day's JSON Lines the way the exporter writes
them (every column of a run, its attempt and three events inside it) from varied values —
random ids, a spread of specs, times, exit codes, usage — and gzips it as the exporter does.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.history_fill import realistic_specs
from herder.domain.ids import new_id
from herder.store.schema import attempts, runs

DAY = datetime(2026, 8, 1, tzinfo=UTC)
TENANT = "ten_01JTENANT000000000000000000"


def _run(rng: random.Random, specs: list[Any], jobs: list[str], workers: list[str]) -> str:
    created = DAY + timedelta(seconds=rng.uniform(0, 86_400))
    started = created + timedelta(milliseconds=rng.uniform(5, 3_000))
    finished = started + timedelta(seconds=rng.expovariate(1 / 30))
    job = rng.randrange(len(jobs))
    failed = rng.random() < 0.05
    state, exit_code = ("failed", rng.choice([1, 2, 137])) if failed else ("succeeded", 0)
    run_id = new_id("run", int(created.timestamp() * 1000))
    times = {"started_at": started.isoformat(), "finished_at": finished.isoformat()}
    run: dict[str, Any] = dict.fromkeys(runs.c.keys())
    run.update(
        id=run_id, tenant_id=TENANT, job_id=jobs[job], job_name=f"job-{job}", state=state,
        priority=1, spec=specs[job % len(specs)], cpu_milli=1000, memory_mb=512, gpus=0,
        attempt_count=1, cancel_requested=False, created_at=created.isoformat(),
        queued_at=created.isoformat(), exit_code=exit_code, reason=f"exit {exit_code}",
        replicas=1, preemptible=False, preemptions=0, **times,
    )  # fmt: skip
    attempt: dict[str, Any] = dict.fromkeys(attempts.c.keys())
    attempt.update(
        id=new_id("att", int(started.timestamp() * 1000)), run_id=run_id, number=1,
        worker_id=rng.choice(workers), state=state, cpu_milli=1000, memory_mb=512, gpus=0,
        exit_code=exit_code, reason=run["reason"], delivered_at=started.isoformat(),
        deadline_at=(started + timedelta(hours=1)).isoformat(), rank=0, log_truncated=False,
        cpu_user_seconds=round(rng.uniform(0, 20), 3), log_bytes=rng.randrange(20_000),
        cpu_system_seconds=round(rng.uniform(0, 3), 3), max_rss_kb=rng.randrange(5_000, 500_000),
        **times,
    )  # fmt: skip
    moves = [(None, "queued", "submitted by key key_01JKEY"),
             ("queued", "running", f"placed on {attempt['worker_id']}"),
             ("running", state, run["reason"])]  # fmt: skip
    run["attempts"] = [attempt]
    run["events"] = [
        {"id": rng.randrange(10**9), "run_id": run_id, "from_state": before, "to_state": after,
         "at": (created + timedelta(seconds=step)).isoformat(), "attempt": step and 1,
         "actor": "scheduler" if step else "api", "message": message}
        for step, (before, after, message) in enumerate(moves)
    ]  # fmt: skip
    return json.dumps(run, separators=(",", ":"))


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rng = random.Random(1)
    specs = [json.loads(spec) for spec in realistic_specs()]
    jobs = [new_id("job", 1_700_000_000_000 + index) for index in range(200)]
    workers = [new_id("wrk", 1_700_000_000_000 + index) for index in range(50)]
    raw = "".join(_run(rng, specs, jobs, workers) + "\n" for _ in range(count)).encode()
    packed = gzip.compress(raw, mtime=0)
    print(f"{count} runs: JSON {len(raw) / count:.0f} B a run, gzip'd {len(packed) / count:.0f}")


if __name__ == "__main__":
    main()
