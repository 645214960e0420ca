"""A year of ended runs made inside PostgreSQL (``INSERT … SELECT FROM generate_series``), a
slice at a time: the history the run listing and the retention pass are measured against.

Runs are spread evenly over ``WEEKS`` weekly slices ending with the last full week, across
``TENANTS`` tenants and ``JOBS`` jobs (job ``k`` belongs to tenant ``k % TENANTS``). Each has
one attempt and three events, a spec from a few realistic ones, and ids in the project's
format whose time part is the row's ``created_at``, so every row lands in its slice.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

import psycopg

from herder.clock import epoch_ms
from herder.domain.history import Slice, slices_between
from herder.domain.ids import _ALPHABET
from herder.domain.jobs import JobSpec, Resources, RetryPolicy, Runtime

WEEKS = 52
TENANTS = 100
JOBS = 10_000

# Crockford base32 of a millisecond count, ten characters: ids' time part, as ``new_id``.
BASE32_MS = (
    "CREATE FUNCTION bench_base32_ms(ms bigint) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT "
    + " || ".join(
        f"substr('{_ALPHABET}', ((ms >> {5 * place}) & 31)::int + 1, 1)"
        for place in range(9, -1, -1)
    )
    + " $$"
)
# 16 random characters: upper-case hex is a subset of Crockford's alphabet.
RANDOM_TAIL = "upper(substr(md5(random()::text), 1, 16))"

_RUNS = f"""
INSERT INTO runs (id, tenant_id, job_id, job_name, state, priority, spec, cpu_milli,
    memory_mb, gpus, attempt_count, created_at, queued_at, started_at, finished_at, exit_code)
SELECT 'run_' || bench_base32_ms(ms) || {RANDOM_TAIL},
    'ten_' || lpad((job %% {TENANTS})::text, 26, '0'), 'job_' || lpad(job::text, 26, '0'),
    'job-' || job, state, 1, bench_specs.spec, 1000, 512, 0, 1,
    made, made + interval '40 ms', made + interval '90 ms',
    made + (1 + job %% 600) * interval '1 s',
    CASE state WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 END
FROM (
    SELECT ms, to_timestamp(ms / 1000.0) AS made, job,
        CASE WHEN chance < 0.05 THEN 'failed' WHEN chance < 0.06 THEN 'cancelled'
            ELSE 'succeeded' END AS state
    FROM (
        SELECT %(start_ms)s::bigint + floor(random() * %(length_ms)s)::bigint AS ms,
            floor(random() * {JOBS})::int AS job, random() AS chance
        FROM generate_series(1, %(runs)s)
    ) drawn
) made
JOIN bench_specs ON bench_specs.variant = made.job %% %(variants)s
"""
_ATTEMPTS = """
INSERT INTO attempts (id, run_id, number, worker_id, state, cpu_milli, memory_mb, gpus,
    exit_code, started_at, finished_at, cpu_user_seconds, cpu_system_seconds, max_rss_kb,
    log_bytes, delivered_at)
SELECT 'att_' || substr(id, 5, 10) || upper(substr(md5(id), 1, 16)), id, 1,
    'wrk_' || lpad((abs(hashtext(id)) % 64)::text, 26, '0'), state, cpu_milli, memory_mb, 0,
    exit_code, started_at, finished_at, 0.8, 0.1, 48000, 2400, started_at
FROM "{partition}"
"""
_EVENTS = """
INSERT INTO run_events (run_id, at, from_state, to_state, attempt, actor, message)
SELECT id, at, from_state, to_state, attempt, actor, message FROM "{partition}",
LATERAL (VALUES
    (created_at, NULL, 'queued', NULL, 'api', 'submitted'),
    (started_at, 'queued', 'running', 1, 'dispatcher', 'placed on a worker'),
    (finished_at, 'running', state, 1, 'worker', 'ended: ' || state)
) AS events (at, from_state, to_state, attempt, actor, message)
"""


def realistic_specs() -> list[str]:
    """A few specs like a data team's jobs: shell commands with arguments, environment,
    labels, resources, retries and a timeout."""
    specs = []
    for index, (command, cpu, memory) in enumerate(
        [
            ("python -m etl.extract --source orders --date $1", 1.0, 1024),
            ("python -m etl.transform --table orders --partition $1", 2.0, 4096),
            ("psql -f load_orders.sql", 0.5, 512),
            ("./bin/report --format parquet --out s3://reports/daily/", 1.0, 2048),
            ("dbt run --select tag:hourly", 1.0, 1024),
            ("python train.py --epochs 3 --checkpoint /data/ckpt", 4.0, 16384),
            ("curl -fsS https://example.com/healthz", 0.1, 64),
            ("rsync -a /data/in/ /data/archive/", 0.5, 256),
        ]
    ):
        spec = JobSpec(
            runtime=Runtime.SHELL,
            command=command,
            args=["2026-11-24"],
            env={"STAGE": "prod", "LOG_LEVEL": "info", "TEAM": f"team-{index}"},
            labels={"team": f"team-{index}", "tier": "batch"},
            resources=Resources(cpu=cpu, memory_mb=memory),
            retry=RetryPolicy(max_attempts=3),
            timeout_seconds=3600,
        )
        specs.append(json.dumps(spec.model_dump(mode="json")))
    return specs


def history_slices(now: datetime) -> list[Slice]:
    """The ``WEEKS`` slices before the current one."""
    return slices_between(now - timedelta(weeks=WEEKS), now)[-WEEKS - 1 : -1]


def fill(url: str, total_runs: int, now: datetime) -> float:
    """Insert the runs, attempts and events; the seconds it took (with ``ANALYZE``)."""
    began = time.monotonic()
    pieces = history_slices(now)
    per_slice = total_runs // len(pieces)
    specs = realistic_specs()
    with psycopg.connect(url) as connection:
        connection.execute("SET synchronous_commit = off")
        connection.execute(BASE32_MS)
        connection.execute("CREATE TEMPORARY TABLE bench_specs (variant int, spec jsonb)")
        with connection.cursor() as cursor:
            cursor.executemany("INSERT INTO bench_specs VALUES (%s, %s)", list(enumerate(specs)))
        connection.execute(
            "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
            " SELECT 'ten_' || lpad(n::text, 26, '0'), 'bench-' || n, 1, false, '{}', now()"
            " FROM generate_series(0, %s) n",
            (TENANTS - 1,),
        )
        connection.commit()
        for number, piece in enumerate(pieces, 1):
            partition = f"runs_{piece.suffix}"
            start_ms = epoch_ms(piece.start)
            connection.execute(
                _RUNS,
                {"start_ms": start_ms, "length_ms": epoch_ms(piece.end) - start_ms,
                 "runs": per_slice, "variants": len(specs)},
            )  # fmt: skip
            connection.execute(_ATTEMPTS.format(partition=partition))
            connection.execute(_EVENTS.format(partition=partition))
            connection.commit()
            made = number * per_slice
            elapsed = time.monotonic() - began
            print(f"  slice {piece.suffix}: {made:,} runs in {elapsed:.0f} s"
                  f" ({made / elapsed:,.0f} runs/s)", flush=True)  # fmt: skip
        connection.execute("DROP FUNCTION bench_base32_ms")
        connection.commit()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ANALYZE")
    return time.monotonic() - began
