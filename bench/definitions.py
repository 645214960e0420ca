"""The definitions tables at a cell's size (issue 45 §4): docs/scaling.md sizes a cell at
2,500 tenants, and its definitions then at millions of jobs and of programs' references,
never measured. On PostgreSQL, this fills 2,500 tenants with 5,000,000 jobs (each with the
spec the API stores and three labels, as users give them: team, env, service) and
5,000,000 artifact references (``artifacts`` rows of programs in the blob store), then
measures:

- the bytes a job (``jobs`` and ``job_labels``) and an artifact reference (``artifacts``)
  keep: table, TOAST and indexes (``pg_total_relation_size``), after ``VACUUM ANALYZE``;
- through a real ``herder server`` process, a tenant's job listing (the first page and one
  in the middle by cursor), a job read by id, a job created, and a listing filtered by a
  label: p50 and p99 over ``BENCH_DEFINITIONS_CALLS`` calls each, spread over tenants.

Smaller sizes come from the environment: ``BENCH_DEFINITIONS_TENANTS``,
``BENCH_DEFINITIONS_JOBS``, ``BENCH_DEFINITIONS_ARTIFACTS``, ``BENCH_DEFINITIONS_CALLS``
(jobs and artifacts are rounded down to a multiple of the tenants: each tenant gets as many).
At full size it holds about 12 GB and takes about half an hour on the 2-core box (500,000
jobs filled in 76 s, the whole run 2.5 minutes).
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import psycopg
from sqlalchemy import text

from bench.api_processes import _serve
from bench.dispatch_store import postgres_database
from herder.credentials import ClientCredentials
from herder.domain.jobs import JobSpec
from herder.domain.models import Role
from herder.store.store import Store

DATABASE = "herder_bench_definitions"
TENANTS = int(os.environ.get("BENCH_DEFINITIONS_TENANTS", "2500"))
JOBS = int(os.environ.get("BENCH_DEFINITIONS_JOBS", "5000000")) // TENANTS * TENANTS
ARTIFACTS = int(os.environ.get("BENCH_DEFINITIONS_ARTIFACTS", "5000000")) // TENANTS * TENANTS
CALLS = int(os.environ.get("BENCH_DEFINITIONS_CALLS", "300"))  # timed, for each kind of call
ROWS_A_STATEMENT = 250_000  # jobs or artifacts inserted a statement: progress, bounded WAL
KEYED_TENANTS = 20  # tenants the calls are spread over, each with a key
PAGE = 100  # the API's default page
WARM_UP_CALLS = 20
TABLES = ("jobs", "job_labels", "artifacts", "blobs")

# A job's spec as the API stores it (every default written out); its artifact and labels
# are set a row at a time.
SPEC = JobSpec.model_validate(
    {
        "runtime": "python", "artifact": "0" * 64, "args": ["--date", "{{ ds }}"],
        "env": {"LOG_LEVEL": "info"}, "resources": {"cpu": 0.5, "memory_mb": 512},
    }
).model_dump(mode="json")  # fmt: skip
# Row n's tenant, artifact and labels, in SQL over ``n`` and the tenants' array: job n uses
# artifact n, wrapped past the artifacts' count (a multiple of the tenants'), so always one
# of its own tenant's.
TENANT_OF = "(CAST(:tenants AS text[]))[1 + n % :tenant_count]"
SHA256_OF = "md5(({m})::text) || md5((-({m}))::text)"
TEAM, ENVIRONMENT = "'team-' || (n % 23)", "(ARRAY['prod', 'staging', 'dev'])[1 + n % 3]"
SERVICE = "'service-' || (n / 7 % 97)"
MEDIA_TYPES = "(ARRAY['text/x-python', 'application/gzip', 'application/octet-stream'])"


@dataclass(frozen=True)
class Latency:
    label: str
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class DefinitionsResult:
    tenants: int
    jobs: int
    artifacts: int
    fill_seconds: float
    keyed_tenants: int  # the tenants the calls were spread over
    sizes: dict[str, tuple[int, int, int]]  # table → (heap, TOAST and the rest, indexes)
    latencies: list[Latency]

    def total(self, table: str) -> int:
        return sum(self.sizes[table])

    @property
    def bytes_per_job(self) -> float:
        return (self.total("jobs") + self.total("job_labels")) / self.jobs

    @property
    def bytes_per_artifact(self) -> float:
        return self.total("artifacts") / self.artifacts

    def line(self) -> str:
        calls = ", ".join(
            f"{one.label} {one.p50_ms:.1f}/{one.p99_ms:.1f} ms" for one in self.latencies
        )
        return (
            f"definitions: {self.jobs:,} jobs and {self.artifacts:,} artifact references in "
            f"{self.tenants:,} tenants: {self.bytes_per_job:.0f} B a job (labels included), "
            f"{self.bytes_per_artifact:.0f} B an artifact reference; API p50/p99: {calls}"
        )


def section(result: DefinitionsResult, machine: str, when: datetime, command: str) -> list[str]:
    lines = [
        f"\n### The definitions tables at a cell's size, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}` (bench/definitions.py): PostgreSQL, "
        f"{result.tenants:,} tenants, {result.jobs:,} jobs ({result.jobs // result.tenants:,} "
        "a tenant, each with the spec the API stores and 3 labels) and "
        f"{result.artifacts:,} artifact references (programs in the blob store), filled in "
        f"{result.fill_seconds:.0f} s, then `VACUUM ANALYZE`. Sizes from "
        "`pg_total_relation_size`.\n",
        "| table | heap | TOAST and maps | indexes | total | per row of its kind |",
        "|---|---|---|---|---|---|",
    ]
    rows = {"jobs": result.jobs, "job_labels": result.jobs, "artifacts": result.artifacts}
    for table, (heap, toast, indexes) in result.sizes.items():
        each = f"{sum(result.sizes[table]) / rows[table]:.0f} B" if table in rows else "-"
        lines.append(
            f"| {table} | {heap / 1e6:,.1f} MB | {toast / 1e6:,.1f} MB | {indexes / 1e6:,.1f} MB "
            f"| {sum(result.sizes[table]) / 1e6:,.1f} MB | {each} |"
        )
    lines += [
        "",
        f"Through one `herder server` process (API only), {CALLS} calls of each kind after "
        f"{WARM_UP_CALLS} untimed, one at a time on a kept-alive connection, spread over "
        f"{result.keyed_tenants} tenants (a key each); a page is {PAGE} jobs:\n",
        "| call | p50 | p99 |",
        "|---|---|---|",
        *(
            f"| {one.label} | {one.p50_ms:.1f} ms | {one.p99_ms:.1f} ms |"
            for one in result.latencies
        ),
        "",
        f"**{result.line()}**",
    ]
    return lines


def measure() -> DefinitionsResult:
    with postgres_database(DATABASE) as url, tempfile.TemporaryDirectory() as home:
        store = Store(url)
        try:
            store.migrate()
            made = store.access.bootstrap()  # a cell's own system tenant, as every cell has
            assert made is not None
            # the server then finds its admin key where it saved it
            ClientCredentials(url=url, api_key=made.admin_key).save(Path(home))
            tenants = [store.access.create_tenant(f"tenant-{n:05d}").id for n in range(TENANTS)]
            started = time.monotonic()
            _fill(store, url, tenants)
            fill_seconds = time.monotonic() - started
            sizes = _sizes(url)
            keyed = random.sample(tenants, min(KEYED_TENANTS, TENANTS))
            keys = {
                tenant: store.access.create_api_key(tenant, Role.DEVELOPER, "bench")[1]
                for tenant in keyed
            }
            latencies = _calls(store, Path(home), url, keys)
        finally:
            store.close()
    return DefinitionsResult(TENANTS, JOBS, ARTIFACTS, fill_seconds, len(keys), sizes, latencies)


def _fill(store: Store, url: str, tenants: list[str]) -> None:
    """The artifacts, then the jobs and their labels, ``ROWS_A_STATEMENT`` rows a
    statement, each its own transaction; then ``VACUUM ANALYZE`` (outside one)."""
    shared = {"tenants": tenants, "tenant_count": len(tenants)}
    artifact = (
        "INSERT INTO artifacts (tenant_id, sha256, size, media_type, filename, created_at, "
        f"location) SELECT {TENANT_OF}, {SHA256_OF.format(m='n')}, 2048 + n * 7919 % 10000000, "
        f"{MEDIA_TYPES}[1 + n % 3], 'program_' || n || '.py', now(), 'blob_store' "
        "FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS n"
    )
    used = SHA256_OF.format(m=f"1 + (n - 1) % {ARTIFACTS}")
    job = (
        "INSERT INTO jobs (id, tenant_id, name, spec, created_at, updated_at, version) "
        f"SELECT 'job_' || lpad(n::text, 26, '0'), {TENANT_OF}, 'nightly-report-' || n, "
        f"CAST(:spec AS jsonb) || jsonb_build_object('artifact', {used}, 'labels', "
        f"jsonb_build_object('team', {TEAM}, 'env', {ENVIRONMENT}, 'service', {SERVICE})), "
        "now(), now(), 1 FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS n"
    )
    labels = (
        "INSERT INTO job_labels (job_id, key, value) "
        "SELECT 'job_' || lpad(n::text, 26, '0'), label.key, label.value "
        "FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) AS n, LATERAL (VALUES "
        f"('team', {TEAM}), ('env', {ENVIRONMENT}), ('service', {SERVICE})) AS label(key, value)"
    )
    for kind, count, statements in [
        ("artifacts", ARTIFACTS, [artifact]),
        ("jobs", JOBS, [job, labels]),
    ]:
        for first in range(1, count + 1, ROWS_A_STATEMENT):
            last = min(count, first + ROWS_A_STATEMENT - 1)
            with store.database.write() as connection:
                for statement in statements:
                    connection.execute(
                        text(statement),
                        {**shared, "first": first, "last": last, "spec": json.dumps(SPEC)},
                    )
            print(f"definitions: {last:,} of {count:,} {kind}", file=sys.stderr)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE jobs, job_labels, artifacts, blobs")


def _sizes(url: str) -> dict[str, tuple[int, int, int]]:
    sizes = {}
    with psycopg.connect(url) as connection:
        for table in TABLES:
            row = connection.execute(
                "SELECT pg_relation_size(%(t)s), pg_table_size(%(t)s) - pg_relation_size(%(t)s),"
                " pg_indexes_size(%(t)s)",
                {"t": table},
            ).fetchone()
            assert row is not None
            sizes[table] = (int(row[0]), int(row[1]), int(row[2]))
    return sizes


def _calls(store: Store, home: Path, url: str, keys: dict[str, str]) -> list[Latency]:
    """Each kind of call, timed, against a real server on the filled database."""
    jobs, artifact = _samples(store, list(keys))
    server, address = _serve(home, url, 1)
    try:
        with httpx.Client(base_url=address, timeout=60) as http:

            def auth(tenant: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {keys[tenant]}"}

            def listing(tenant: str, **params: str) -> httpx.Response:
                return http.get("/v1/jobs", params=params, headers=auth(tenant))

            cursors = {tenant: _middle_cursor(listing, tenant) for tenant in keys}
            made = iter(range(CALLS + WARM_UP_CALLS))

            def create(tenant: str) -> httpx.Response:
                spec = {**SPEC, "artifact": artifact[tenant], "labels": {"team": "team-1"}}
                body = {"name": f"made-{next(made)}", **spec}
                return http.post("/v1/jobs", json=body, headers=auth(tenant))

            kinds: list[tuple[str, Callable[[str], httpx.Response]]] = [
                ("first page", listing),
                ("a middle page by cursor", lambda t: listing(t, cursor=cursors[t])),
                (
                    "a job by id",
                    lambda t: http.get(f"/v1/jobs/{random.choice(jobs[t])}", headers=auth(t)),
                ),
                ("a job created", create),
                ("filtered by a label", lambda t: listing(t, label="team=team-7")),
            ]
            return [_timed(label, call, list(keys)) for label, call in kinds]
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _samples(store: Store, tenants: list[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each tenant's jobs to read by id (a hundred at random) and one of its programs."""
    jobs, artifact = {}, {}
    with store.database.read() as connection:
        for tenant in tenants:
            jobs[tenant] = list(
                connection.execute(
                    text("SELECT id FROM jobs WHERE tenant_id = :t ORDER BY random() LIMIT 100"),
                    {"t": tenant},
                ).scalars()
            )
            artifact[tenant] = connection.execute(
                text("SELECT sha256 FROM artifacts WHERE tenant_id = :t LIMIT 1"), {"t": tenant}
            ).scalar_one()
    return jobs, artifact


def _middle_cursor(listing: Callable[..., httpx.Response], tenant: str) -> str:
    """The cursor of the page in the middle of the tenant's jobs, paged to untimed."""
    cursor: str | None = None
    for _ in range(max(1, JOBS // TENANTS // PAGE // 2)):
        answer = listing(tenant, **({"cursor": cursor} if cursor else {}))
        answer.raise_for_status()
        if (following := answer.json()["next_cursor"]) is None:
            break
        cursor = str(following)
    assert cursor is not None, f"tenant {tenant} has a single page: give it more jobs"
    return cursor


def _timed(label: str, call: Callable[[str], httpx.Response], tenants: list[str]) -> Latency:
    timings = []
    for number in range(WARM_UP_CALLS + CALLS):
        tenant = tenants[number % len(tenants)]
        started = time.perf_counter()
        answer = call(tenant)
        elapsed = (time.perf_counter() - started) * 1000
        assert answer.status_code in (200, 201), (label, answer.status_code, answer.text[:300])
        if number >= WARM_UP_CALLS:
            timings.append(elapsed)
    ordered = sorted(timings)
    return Latency(label, statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))])
