"""Scenario: a cell's loss under load, and a tenant moved between cells (issue 45 §2,
docs/cells.md). Two cells, each a ``herder server --with-scheduler`` and a worker
(isolation ``none``) on a PostgreSQL server of its own (``bench/own_postgres.py``), behind
one ``herder edge`` whose directory is on SQLite. Tenants in both cells submit one-off runs
through the edge at a steady rate, each keyed; cell A's also have a schedule firing every
second, and one more tenant of cell A (the mover, its client retrying a 503) has one too.

1. Baseline: cell B's tenants' submissions, with A healthy.
2. Outage: A's PostgreSQL crashed (``pg_ctl -m immediate``, a kill -9 of the postmaster),
   then started again. B's tenants never retry: each of their errors counts. A's tenants
   count the 503s naming cell a.
3. Once A accepts again, the mover goes to cell B (the edge's move, with both cells' system
   admins' keys) under the same load.
4. The load stopped, the fires caught up, the schedules paused and every run ended, each
   tenant's runs are listed through the edge (a moved tenant's earlier runs are read there by
   id: its source cell answers its listing 503), and counted.

Measured: B's errors in the outage and its submissions' p50 then minus the baseline's;
acknowledged runs not found (lost); keys that made two runs, runs that succeeded twice and
instants of a schedule that fired twice (doubled); the mover's instants between its first
and last fire across both cells with no run, or more than one. Env knobs for a longer run:
``BENCH_CELLS_TENANTS`` (tenants a cell, 3), ``BENCH_CELLS_RATE`` (submissions a second, a
tenant, 2), ``BENCH_CELLS_BASELINE_SECONDS`` (20), ``BENCH_CELLS_OUTAGE_SECONDS`` (20) and
``BENCH_CELLS_AFTER_MOVE_SECONDS`` (10).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.cells_load import Answer, Phase, Submitter, never_retried, retried
from bench.cells_tally import PATIENCE, CellDatabase, Tally, Tenant, fired, tally, until
from bench.oneoff import Herder
from bench.own_postgres import OwnPostgres, own_postgres
from herder.client import HerderClient
from herder.credentials import ClientCredentials
from herder.worker.isolation import Isolation

KNOBS = {
    "BENCH_CELLS_TENANTS": "3",
    "BENCH_CELLS_RATE": "2",
    "BENCH_CELLS_BASELINE_SECONDS": "20",
    "BENCH_CELLS_OUTAGE_SECONDS": "20",
    "BENCH_CELLS_AFTER_MOVE_SECONDS": "10",
}
EVERY_SECOND = "* * * * * *"
SPEC = {"runtime": "shell", "command": "echo ran", "resources": {"cpu": 0.01, "memory_mb": 16}}


def knob(name: str) -> float:
    return float(os.environ.get(name, KNOBS[name]))


def knobs_set() -> str:
    """The knobs this run was given, to write before its command."""
    return " ".join(f"{name}={os.environ[name]}" for name in KNOBS if name in os.environ)


@dataclass(frozen=True)
class CellsResult:
    a_answers: list[Answer]  # cell A's tenants' submissions (the mover's not among them)
    b_answers: list[Answer]  # cell B's tenants'
    mover_answers: list[Answer]
    tally: Tally
    move_seconds: float
    seconds: float = 0.0  # the whole scenario, set-up included

    @property
    def baseline(self) -> list[Answer]:
        """Cell B's tenants' submissions with A healthy."""
        return [answer for answer in self.b_answers if answer.phase == "baseline"]

    @property
    def outage(self) -> list[Answer]:
        """Theirs while A's database was down."""
        return [answer for answer in self.b_answers if answer.phase == "outage"]

    @property
    def other_errors(self) -> int:
        return sum(1 for answer in self.outage if not answer.accepted)

    @property
    def p50_added_ms(self) -> float:
        return (_p50(self.outage) - _p50(self.baseline)) * 1000

    def line(self) -> str:
        """The figures, as issue 45 asks for them."""
        return (
            f"cells: other cell errors {self.other_errors}, other cell p50 added "
            f"{self.p50_added_ms:.1f} ms, lost {self.tally.lost}, doubled {self.tally.doubled}; "
            f"move: fires missed {self.tally.move_fires_missed}, fires doubled "
            f"{self.tally.move_fires_doubled}"
        )


def _p50(answers: list[Answer]) -> float:
    return statistics.median(answer.seconds for answer in answers) if answers else float("nan")


def _p99(answers: list[Answer]) -> float:
    ordered = sorted(answer.seconds for answer in answers)
    return ordered[int(0.99 * (len(ordered) - 1))] if ordered else float("nan")


def measure(work: Path) -> CellsResult:
    """The scenario, its homes and directory in ``work`` (removed by the caller)."""
    began = time.monotonic()
    with (
        own_postgres() as postgres_a,
        own_postgres() as postgres_b,
        _cell(work / "a", postgres_a) as cell_a,
        _cell(work / "b", postgres_b) as cell_b,
        _edge(work, cell_a) as edge,
        CellDatabase(postgres_a.url) as database_a,
        CellDatabase(postgres_b.url) as database_b,
    ):
        keys = [_admin_key(cell) for cell in (cell_a, cell_b)]
        _place_cells(edge, cell_a, cell_b, *keys)
        result = _under_load(edge, postgres_a, keys, (database_a, database_b))
    return dataclasses.replace(result, seconds=time.monotonic() - began)


@contextlib.contextmanager
def _cell(home: Path, postgres: OwnPostgres) -> Iterator[Herder]:
    cell = Herder(home, postgres.url, Isolation.NONE)
    cell.environment["HERDER_CRON_SECONDS"] = "1"
    with cell:
        yield cell


@contextlib.contextmanager
def _edge(work: Path, default: Herder) -> Iterator[str]:
    """``herder edge`` on a SQLite directory, cell A the default cell; stopped on exit."""
    url = f"http://127.0.0.1:{_free_port()}"
    process = subprocess.Popen(
        [sys.executable, "-m", "herder.cli", "edge",
         "--directory-url", f"sqlite:///{work / 'directory.db'}", "--port", url.rsplit(":", 1)[1],
         "--default-cell-url", default.url, "--default-cell", "a", "--region", "eu"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with httpx.Client(timeout=1) as http:
            until(lambda: _ready(http, url), "the edge ready")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ready(http: httpx.Client, url: str) -> bool:
    try:
        return http.get(f"{url}/readyz").status_code == 200
    except httpx.TransportError:
        return False


def _admin_key(cell: Herder) -> str:
    """The cell's system admin's key, once its server has saved it."""
    until(lambda: ClientCredentials.load(cell.home) is not None, "a cell's admin key")
    credentials = ClientCredentials.load(cell.home)
    assert credentials is not None
    return credentials.api_key


def _place_cells(edge: str, cell_a: Herder, cell_b: Herder, key_a: str, key_b: str) -> None:
    """Cell b registered and each cell's own tenants placed, as an operator would with
    ``herder cell``; each cell's worker up."""
    with (
        HerderClient(edge, key_a, retries=PATIENCE) as admin_a,
        HerderClient(edge, key_b, retries=PATIENCE) as admin_b,
    ):
        admin_a.adopt_tenants("a")
        admin_a.create_cell("b", region="eu", api_url=cell_b.url)
        admin_b.adopt_tenants("b")
    for cell, key in ((cell_a, key_a), (cell_b, key_b)):
        with HerderClient(cell.url, key, retries=PATIENCE) as direct:
            until(lambda: len(direct.list_workers()) == 1, "a cell's worker")


def _tenant(edge: str, admin: HerderClient, cell: str, name: str, *, schedule: bool) -> Tenant:
    made = admin.create_tenant(name) if cell == "a" else admin.create_tenant_in(cell, name)
    key = admin.create_api_key(made.id, role="admin")
    with HerderClient(edge, key, retries=PATIENCE) as client:
        job_id = client.create_job("steady", SPEC).id
        schedule_id = (
            client.create_schedule(job_id, {"cron": EVERY_SECOND}).id if schedule else None
        )
    return Tenant(cell, made.id, key, job_id, schedule_id)


def _under_load(
    edge: str,
    postgres_a: OwnPostgres,
    keys: list[str],
    databases: tuple[CellDatabase, CellDatabase],
) -> CellsResult:
    key_a, key_b = keys
    count, rate = int(knob("BENCH_CELLS_TENANTS")), knob("BENCH_CELLS_RATE")
    with contextlib.ExitStack() as clients:
        admin_a = clients.enter_context(HerderClient(edge, key_a, retries=PATIENCE))
        admin_b = clients.enter_context(HerderClient(edge, key_b, retries=PATIENCE))
        in_a = [_tenant(edge, admin_a, "a", f"alpha-{n}", schedule=True) for n in range(count)]
        in_b = [_tenant(edge, admin_b, "b", f"beta-{n}", schedule=False) for n in range(count)]
        mover = _tenant(edge, admin_a, "a", "mover", schedule=True)
        phase, stop = Phase(), threading.Event()

        def never_retrying(tenant: Tenant) -> Submitter:
            http = clients.enter_context(httpx.Client(base_url=edge, timeout=90))
            send = never_retried(http, tenant.key, tenant.job_id)
            return Submitter(tenant.cell, send, rate, phase, stop)

        mover_client = clients.enter_context(HerderClient(edge, mover.key, retries=PATIENCE))
        of_a, of_b = [never_retrying(t) for t in in_a], [never_retrying(t) for t in in_b]
        of_mover = Submitter("a", retried(mover_client, mover.job_id), rate, phase, stop)
        submitters = [*of_a, *of_b, of_mover]
        for submitter in submitters:
            submitter.thread.start()
        try:
            move_seconds = _phases(
                phase, postgres_a, submitters, admin_a, mover.tenant_id, key_b, databases,
                [t.schedule_id for t in [*in_a, mover] if t.schedule_id],
            )  # fmt: skip
        finally:
            stop.set()
            for submitter in submitters:
                submitter.thread.join(120)
        for tenant, submitter in zip([*in_a, *in_b, mover], submitters, strict=True):
            tenant.acknowledged = submitter.acknowledged()
    return CellsResult(
        a_answers=[answer for submitter in of_a for answer in submitter.answers],
        b_answers=[answer for submitter in of_b for answer in submitter.answers],
        mover_answers=of_mover.answers,
        tally=tally(edge, [*in_a, *in_b], mover, databases),
        move_seconds=move_seconds,
    )


def _phases(
    phase: Phase,
    postgres_a: OwnPostgres,
    submitters: list[Submitter],
    admin_a: HerderClient,
    mover_id: str,
    key_b: str,
    databases: tuple[CellDatabase, CellDatabase],
    schedule_ids: list[str],
) -> float:
    """Warm-up, baseline, outage, recovery, move and after it, under the submitters' load;
    returns the move's seconds."""
    until(lambda: fired(databases, schedule_ids, 2), "every schedule firing")
    phase.name = "baseline"
    time.sleep(knob("BENCH_CELLS_BASELINE_SECONDS"))
    phase.name = "outage"
    postgres_a.crash()
    time.sleep(knob("BENCH_CELLS_OUTAGE_SECONDS"))
    postgres_a.resume()
    phase.name, resumed = "recovery", time.monotonic()
    until(
        lambda: all(s.accepted_since(resumed) for s in submitters if s.cell == "a"),
        "cell a's tenants accepted again",
    )
    phase.name, moving = "move", time.monotonic()
    admin_a.move_tenant(mover_id, "b", target_key=key_b)
    move_seconds = time.monotonic() - moving
    phase.name = "after the move"
    time.sleep(knob("BENCH_CELLS_AFTER_MOVE_SECONDS"))
    return move_seconds


def section(result: CellsResult, machine: str, when: datetime.datetime, command: str) -> list[str]:
    knobs = {name: os.environ.get(name, default) for name, default in KNOBS.items()}
    counted = result.tally
    a_unavailable = sum(1 for answer in result.a_answers if answer.unavailable("a"))
    a_other = sum(
        1 for answer in result.a_answers if not answer.accepted and not answer.unavailable("a")
    )
    b_errors = sum(1 for answer in result.b_answers if not answer.accepted)
    ms = 1000
    return [
        f"\n### Two cells, one lost under load, a tenant moved, {when:%Y-%m-%d %H:%M} UTC\n",
        f"Machine: {machine}. `{command}` (bench/cells.py), {result.seconds:.0f} s in all.\n",
        f"**{result.line()}**\n",
        "| | |",
        "|---|---|",
        f"| cell B's submissions, baseline / outage | {len(result.baseline)} / "
        f"{len(result.outage)} |",
        f"| their latency p50, baseline / outage | {_p50(result.baseline) * ms:.1f} / "
        f"{_p50(result.outage) * ms:.1f} ms |",
        f"| their latency p99, baseline / outage | {_p99(result.baseline) * ms:.1f} / "
        f"{_p99(result.outage) * ms:.1f} ms |",
        f"| cell B's errors, any phase | {b_errors} of {len(result.b_answers)} |",
        f"| cell A's answers: 503 naming cell a / other errors / accepted | {a_unavailable} / "
        f"{a_other} / {len(result.a_answers) - a_unavailable - a_other} |",
        f"| acknowledged runs, both cells / lost | {counted.acknowledged} / {counted.lost} |",
        f"| doubled: keys that made two runs / runs that succeeded twice / instants fired "
        f"twice | {counted.keys_doubled} / {counted.succeeded_twice} / "
        f"{counted.fires_doubled} |",
        f"| cell A's schedules: instants fired / missed | {counted.fires} / "
        f"{counted.fires_missed} |",
        f"| the move: seconds / the mover's fires in a, in b / missed / doubled | "
        f"{result.move_seconds:.1f} s / {counted.move_fires_in[0]}, {counted.move_fires_in[1]}"
        f" / {counted.move_fires_missed} / {counted.move_fires_doubled} |",
        f"| the mover's submissions (retried): acknowledged / given up | "
        f"{sum(1 for a in result.mover_answers if a.accepted)} / "
        f"{sum(1 for a in result.mover_answers if not a.accepted)} |",
        "",
        f"{knobs['BENCH_CELLS_TENANTS']} tenants a cell, each submitting "
        f"{knobs['BENCH_CELLS_RATE']} keyed one-off runs a second through the edge, one after "
        "the other, never retried (cell A's also a schedule firing every second), and a mover "
        "in cell A (its schedule every second, its submissions retried). Baseline "
        f"{knobs['BENCH_CELLS_BASELINE_SECONDS']} s; then cell A's PostgreSQL crashed "
        f"(`pg_ctl -m immediate`) for {knobs['BENCH_CELLS_OUTAGE_SECONDS']} s; once A accepts "
        "again the mover moved to cell B (the edge's `POST /v1/cells/b/tenants/{id}/move`), "
        f"and {knobs['BENCH_CELLS_AFTER_MOVE_SECONDS']} s more. Other cell p50 added: cell "
        "B's submissions' p50 during the outage minus the baseline's; other cell errors: "
        "theirs during the outage. Counted from the cells' answers through the edge (each "
        "tenant's runs listed; the mover's runs left in cell A read there by id, their ids "
        "from its database, as the source answers a moved tenant's listing 503).",
    ]
