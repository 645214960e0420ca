"""Two cells behind an edge (issue 45, docs/cells.md): each cell a ``herder server
--with-scheduler`` on a PostgreSQL server of its own (``scripts/test-postgres.sh``) with a
worker; one ``herder edge`` in front, its directory on SQLite. A tenant in each cell runs
one-off runs, a schedule firing every second and a workflow, all through the edge. Cell A's
database is crashed: B's tenant, asking through the edge with no retry, sees no error, and
A's gets 503s naming cell a; A's database back, then A's server killed and started again,
then deployed (stopped as a release stops it and started again) while both tenants ask on:
B never sees an error, A sees nothing but 503s naming cell a, and nothing of A's is lost or
doubled (every acknowledged run there once, no run succeeded twice, each fire's instant once
and none missing)."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from herder.client import HerderClient
from herder.client.retries import Retries
from herder.domain.models import Run
from herder.domain.states import RunState
from herder.domain.workflows.states import WorkflowRunState
from tests.system.conftest import (
    START_SECONDS,
    Cluster,
    free_port,
    wait_healthy,
    wait_until,
)
from tests.system.own_postgres import OwnPostgres, own_postgres_server

pytestmark = [pytest.mark.system, pytest.mark.postgres]

EVERY_SECOND = "* * * * * *"
OUTAGE_ANSWERS = 5  # 503s from cell a seen before its database comes back
CHAIN = [
    {"name": "first", "job": "step"},
    {"name": "second", "job": "step", "depends_on": ["first"]},
]
SPEC = {"runtime": "shell", "command": "echo ran", "resources": {"cpu": 0.01, "memory_mb": 16}}


@pytest.fixture
def two_postgres() -> Iterator[tuple[OwnPostgres, OwnPostgres]]:
    with own_postgres_server() as first, own_postgres_server() as second:
        yield first, second


@dataclass
class Tenant:
    """A tenant's work through the edge: what it was told was made."""

    cell: str
    key: str
    client: HerderClient  # never retries: an error is seen
    patient: HerderClient  # tries again for 60 s
    job_id: str = ""
    schedule_id: str = ""
    workflow_runs: list[str] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)

    def set_up(self) -> None:
        self.job_id = self.client.create_job("steady", SPEC).id
        self.client.create_job("step", SPEC)
        workflow = self.client.create_workflow({"name": "chain", "tasks": CHAIN})
        self.schedule_id = self.client.create_schedule(self.job_id, {"cron": EVERY_SECOND}).id
        started = self.client.start_workflow(workflow.id, idempotency_key=uuid.uuid4().hex)
        self.workflow_runs.append(started.id)

    def submit(self, client: HerderClient | None = None) -> None:
        run = (client or self.client).start_run(self.job_id, idempotency_key=uuid.uuid4().hex)
        self.acknowledged.append(run.id)

    def fires(self) -> list[Run]:
        return _all_runs(self.patient, schedule_id=self.schedule_id)

    def fired_until(self, moment: datetime) -> bool:
        return any(run.scheduled_for and run.scheduled_for >= moment for run in self.fires())

    def close(self) -> None:
        self.client.close()
        self.patient.close()


def _all_runs(client: HerderClient, schedule_id: str | None = None) -> list[Run]:
    found: list[Run] = []
    cursor = None
    while True:
        page = client.list_runs(limit=1000, cursor=cursor, schedule_id=schedule_id)
        found += page.items
        cursor = page.next_cursor
        if cursor is None:
            return found


def _cell(name: str, postgres: OwnPostgres, start: Callable[..., Cluster]) -> Cluster:
    """A cell's server drains for a second when stopped, as one behind a balancer would."""
    environment = {"HERDER_CRON_SECONDS": "1", "HERDER_DRAIN_SECONDS": "1"}
    cluster = start(postgres.url, environment=environment)
    cluster.start_worker(name, "--isolation", "none")
    return cluster


def _edge(cluster: Cluster, directory: Path) -> str:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = cluster.spawn(
        "edge", "--directory-url", f"sqlite:///{directory / 'directory.db'}",
        "--port", str(port), "--default-cell-url", cluster.url, "--default-cell", "a",
        "--region", "eu",
    )  # fmt: skip
    wait_healthy(url, process)
    return url


@contextmanager
def cell_admins(
    edge: str, cell_a: Cluster, cell_b: Cluster
) -> Iterator[tuple[HerderClient, HerderClient]]:
    """Each cell's system admin through the edge, once cell b is registered, each cell's
    own tenants placed and each cell's worker up."""
    with (
        HerderClient(edge, cell_a.credentials["api_key"]) as admin_a,
        HerderClient(edge, cell_b.credentials["api_key"]) as admin_b,
    ):
        admin_a.adopt_tenants("a")
        admin_a.create_cell("b", region="eu", api_url=cell_b.url)
        admin_b.adopt_tenants("b")
        for cell in (cell_a, cell_b):
            with cell.client() as direct:
                wait_until(lambda: len(direct.list_workers()) == 1, START_SECONDS, "a worker")
        yield admin_a, admin_b


def _tenant(edge: str, admin: HerderClient, cell: str, name: str) -> Tenant:
    made = admin.create_tenant(name) if cell == "a" else admin.create_tenant_in(cell, name)
    key = admin.create_api_key(made.id, role="admin")
    never, patient = Retries(0), Retries(60)
    return Tenant(
        cell, key, HerderClient(edge, key, retries=never), HerderClient(edge, key, retries=patient)
    )


def _asks(tenant: Tenant, http: httpx.Client) -> list[httpx.Response]:
    """A submission and two reads, as a user would, through the edge, never retried."""
    headers = {"Authorization": f"Bearer {tenant.key}"}
    return [
        http.post(
            f"/v1/jobs/{tenant.job_id}/runs",
            headers={**headers, "Idempotency-Key": uuid.uuid4().hex},
            json={},
        ),
        http.get("/v1/runs", headers=headers),
        http.get(f"/v1/workflow-runs/{tenant.workflow_runs[0]}", headers=headers),
    ]


def _asked_by_both(http: httpx.Client, tenant_a: Tenant, tenant_b: Tenant) -> None:
    """Each tenant's asks, once: B's all answered, A's answered or refused by the edge as
    cell a's (503 naming it); what either was told was made, kept."""
    for answer in _asks(tenant_b, http):
        assert answer.status_code < 400, answer.text
        if answer.request.method == "POST":
            tenant_b.acknowledged.append(answer.json()["id"])
    for answer in _asks(tenant_a, http):
        if answer.status_code >= 400:
            assert answer.status_code == 503, answer.text
            assert answer.json()["cell"] == "a", answer.text
        elif answer.request.method == "POST":
            tenant_a.acknowledged.append(answer.json()["id"])


def _deploy(cell: Cluster, while_deploying: Callable[[], None]) -> None:
    """The cell's server stopped as a release stops it (SIGTERM: it drains, its scheduler
    hands its leases on, it ends) and the next started (the same binaries stand in for the
    new version), ``while_deploying`` called on and on until the new one is ready."""
    old = cell.server
    assert old is not None
    old.send_signal(signal.SIGTERM)
    new: subprocess.Popen[bytes] | None = None
    deadline = time.monotonic() + 2 * START_SECONDS
    with httpx.Client(timeout=1) as probe:
        while new is None or not _ready(probe, cell.url):
            assert time.monotonic() < deadline, "the deployment did not end"
            if new is None and old.poll() is not None:
                new = cell.spawn(*cell.server_args)
            assert new is None or new.poll() is None, "the new server exited"
            while_deploying()
    cell.server = new


def _ready(http: httpx.Client, url: str) -> bool:
    try:
        return http.get(f"{url}/readyz").status_code == 200
    except httpx.TransportError:
        return False


def _check_nothing_lost_or_doubled(tenant: Tenant) -> None:
    # the instants missed while the cell was down are fired once it is back: all of them
    # before the schedule is paused
    now = datetime.now(UTC)
    wait_until(lambda: tenant.fired_until(now), 90, f"cell {tenant.cell}'s fires caught up")
    tenant.patient.pause_schedule(tenant.schedule_id)
    wait_until(
        lambda: all(run.state.is_terminal for run in _all_runs(tenant.patient)),
        120,
        "every run ended",
    )
    runs = _all_runs(tenant.patient)
    ids = [run.id for run in runs]
    assert len(ids) == len(set(ids))
    assert set(tenant.acknowledged) <= set(ids), "an acknowledged run is missing"
    for run in runs:
        detail = tenant.patient.get_run(run.id)
        succeeded = [one for one in detail.attempts if one.state.value == "succeeded"]
        assert len(succeeded) <= 1, f"{run.id} succeeded twice"
        assert detail.state is RunState.SUCCEEDED, (run.id, detail.state, detail.reason)
    instants = sorted(run.scheduled_for for run in tenant.fires() if run.scheduled_for)
    assert len(instants) == len(set(instants)), "a fire's instant made two runs"
    assert len(instants) >= 3
    expected = [instants[0] + timedelta(seconds=n) for n in range(len(instants))]
    assert instants == expected, "a fire's instant was missed"
    for workflow_run in tenant.workflow_runs:
        ended = tenant.patient.get_workflow_run(workflow_run)
        assert ended.state is WorkflowRunState.SUCCEEDED


@dataclass(frozen=True)
class BehindAnEdge:
    """Two cells, each a server with its scheduler and a worker on a PostgreSQL server of
    its own, and one edge in front (the default cell: a)."""

    postgres: tuple[OwnPostgres, OwnPostgres]
    cells: tuple[Cluster, Cluster]
    edge: str


@pytest.fixture
def behind_an_edge(
    two_postgres: tuple[OwnPostgres, OwnPostgres],
    start_cluster: Callable[..., Cluster],
    tmp_path: Path,
) -> BehindAnEdge:
    postgres_a, postgres_b = two_postgres
    cell_a, cell_b = _cell("a", postgres_a, start_cluster), _cell("b", postgres_b, start_cluster)
    return BehindAnEdge(two_postgres, (cell_a, cell_b), _edge(cell_a, tmp_path))


@pytest.mark.timeout(400)
def test_a_cells_loss_or_deployment_is_its_tenants_alone_and_loses_or_doubles_nothing(
    behind_an_edge: BehindAnEdge,
) -> None:
    postgres_a, _ = behind_an_edge.postgres
    cell_a, cell_b = behind_an_edge.cells
    edge = behind_an_edge.edge
    with (
        cell_admins(edge, cell_a, cell_b) as (admin_a, admin_b),
        httpx.Client(base_url=edge, timeout=30) as http,
    ):
        tenant_a = _tenant(edge, admin_a, "a", "alpha")
        tenant_b = _tenant(edge, admin_b, "b", "beta")
        try:
            _through_the_losses(cell_a, postgres_a, http, tenant_a, tenant_b)
        finally:
            tenant_a.close()
            tenant_b.close()


def _through_the_losses(
    cell_a: Cluster, postgres_a: OwnPostgres, http: httpx.Client, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    for tenant in (tenant_a, tenant_b):
        tenant.set_up()
        for _ in range(3):
            tenant.submit()
    wait_until(lambda: len(tenant_a.fires()) >= 2 and len(tenant_b.fires()) >= 2, 60, "fires")

    postgres_a.crash()
    outage: list[httpx.Response] = []
    fired = len(tenant_b.fires())  # B's schedule goes on firing while A is down
    while len(outage) < OUTAGE_ANSWERS * 3 or len(tenant_b.fires()) < fired + 2:
        for answer in _asks(tenant_b, http):
            assert answer.status_code < 400, answer.text  # B sees no error
            if answer.request.method == "POST":
                tenant_b.acknowledged.append(answer.json()["id"])
        for answer in _asks(tenant_a, http):
            assert answer.status_code == 503 or answer.status_code < 400, answer.text
            outage += [answer] if answer.status_code == 503 else []
    for answer in outage:
        assert answer.json()["cell"] == "a"
        assert "cell a is unavailable" in answer.json()["detail"]
        assert answer.headers["Retry-After"]
    postgres_a.resume()
    tenant_a.submit(tenant_a.patient)  # rides out what is left of the outage
    for _ in range(3):
        tenant_a.submit()
        tenant_b.submit()

    cell_a.kill_server()
    for _ in range(3):
        for answer in _asks(tenant_b, http):
            assert answer.status_code < 400, answer.text
        refused = _asks(tenant_a, http)
        assert [answer.status_code for answer in refused] == [503, 503, 503]
        assert all(answer.json()["cell"] == "a" for answer in refused)
    cell_a.start_server()
    tenant_a.submit(tenant_a.patient)

    _deploy(cell_a, lambda: _asked_by_both(http, tenant_a, tenant_b))
    tenant_a.submit(tenant_a.patient)  # to the new server
    for tenant in (tenant_a, tenant_b):
        _check_nothing_lost_or_doubled(tenant)
