"""Real processes: ``herder up``, ``herder server`` and ``herder worker``, on free ports,
stopped and reaped after every test (``start_cluster``), or after the module whose tests
share them (``start_module_cluster``: tests that neither kill nor reconfigure a cluster)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from herder.client import HerderClient
from herder.settings import sqlite_url
from herder.worker import cgroupfs
from herder.worker.agent import WorkerConfig
from herder.worker.host import UID_LOCKS
from herder.worker.statedir import secure_directory
from herder.worker.uids import reserve_uid_pool
from tests.conftest import fresh_postgres_url
from tests.system.outside import outside_host

HERDER = [sys.executable, "-m", "herder.cli"]
START_SECONDS = 60.0  # seconds; a loaded CI box once took past 30 to start one on PostgreSQL


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    """Polls ``/readyz`` with one client: ``httpx.get`` makes a client (and loads the CA
    bundle) each call, 37 ms of CPU, and ten a second took a third of a core from the server
    it waited for."""
    deadline = time.monotonic() + START_SECONDS
    with httpx.Client(timeout=1) as http:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"herder exited with {process.returncode} before it was ready")
            try:
                if http.get(f"{url}/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise TimeoutError(f"herder at {url} not ready after {START_SECONDS}s")


def stop(process: subprocess.Popen[bytes], signum: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def herder_up(home: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, HerderClient]]:
    """``herder up`` in ``home`` (its server and root worker in one process), ready once its
    worker has registered: the process, its URL and an admin's client; stopped on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {**os.environ, "HERDER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([*HERDER, "up", "--port", str(port)], env=environment)
    try:
        wait_healthy(url, process)
        key = json.loads((home / "client.json").read_text())["api_key"]
        with HerderClient(url, key) as client:
            deadline = time.monotonic() + 30
            while not client.list_workers() and time.monotonic() < deadline:
                time.sleep(0.1)
            yield process, url, client
    finally:
        stop(process)


@dataclass
class Cluster:
    """A server and its workers, all real processes."""

    home: Path
    url: str
    environment: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    server: subprocess.Popen[bytes] | None = None
    server_args: tuple[str, ...] = ()

    def start_server(self) -> subprocess.Popen[bytes]:
        self.server = self.spawn(*self.server_args)
        wait_healthy(self.url, self.server)
        return self.server

    def kill_server(self) -> None:
        """``kill -9``: no shutdown of any kind."""
        assert self.server is not None
        self.server.kill()
        self.server.wait()

    @property
    def credentials(self) -> dict[str, str]:
        saved: dict[str, str] = json.loads((self.home / "client.json").read_text())
        return saved

    def client(self) -> HerderClient:
        return HerderClient(self.url, self.credentials["api_key"])

    def new_tenant(self) -> HerderClient:
        """A client of a tenant of its own, made now (an admin of it): a clean slate on a
        cluster other tests share."""
        with self.client() as system_admin:
            tenant = system_admin.create_tenant(f"tenant-{uuid.uuid4().hex[:12]}")
            key = system_admin.create_api_key(tenant.id, role="admin")
        return HerderClient(self.url, key)

    @property
    def worker_token(self) -> str:
        return (self.home / "worker-token").read_text().strip()

    def spawn(self, *args: str, **environment: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen([*HERDER, *args], env={**self.environment, **environment})
        self.processes.append(process)
        return process

    def start_worker(self, name: str, *flags: str) -> subprocess.Popen[bytes]:
        """A worker given the token in its environment: never on its command line."""
        return self.spawn(
            "worker",
            "--server",
            self.url,
            "--name",
            name,
            "--home",
            str(self.home / f"worker-{name}"),
            "--max-stop-grace",
            "1",
            *flags,
            HERDER_WORKER_TOKEN=self.worker_token,
        )

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            stop(process)


FAST_FAILURE_DETECTION = {
    "HERDER_HEARTBEAT_INTERVAL": "0.5",
    "HERDER_HEARTBEAT_TIMEOUT": "3",
    "HERDER_LEASE_SECONDS": "2",
}


def _environment(home: Path, database_url: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        "HERDER_HOME": str(home),
        "HERDER_DATABASE_URL": database_url,
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@contextlib.contextmanager
def clusters_in(directory: Path) -> Iterator[Callable[..., Cluster]]:
    """``start_cluster`` for one scope: its clusters' homes in ``directory``, every process
    stopped and what killed workers left removed when the scope ends."""
    clusters: list[Cluster] = []

    def start(
        database_url: str | None = None,
        *,
        embedded: bool = False,
        scheduler: bool = True,
        fast: bool = False,
        environment: dict[str, str] | None = None,
        processes: int = 1,
    ) -> Cluster:
        home = directory / f"home-{len(clusters)}"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        extra = {**(FAST_FAILURE_DETECTION if fast else {}), **(environment or {})}
        full_environment = _environment(home, database_url or sqlite_url(home / "herder.db"), extra)
        arguments: tuple[str, ...] = ("up",) if embedded else ("server",)
        if scheduler and not embedded:
            arguments += ("--with-scheduler",)
        if processes > 1:
            arguments += ("--processes", str(processes))
        cluster = Cluster(
            home=home,
            url=url,
            environment=full_environment,
            server_args=(*arguments, "--port", str(port)),
        )
        clusters.append(cluster)
        cluster.start_server()
        return cluster

    try:
        yield start
    finally:
        for cluster in clusters:
            cluster.stop_all()
            remove_what_killed_workers_left(cluster.home)


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``start_cluster(database_url, embedded=False, scheduler=True, fast=False,
    processes=1)``: a running ``herder server`` (with its control loops unless
    ``scheduler=False``; ``processes`` API processes) or ``herder up``; ``fast`` shortens
    heartbeats and leases for failure tests. For a test that kills or reconfigures it."""
    with clusters_in(tmp_path) as start:
        yield start


@pytest.fixture(scope="module")
def start_module_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Cluster]]:
    """``start_cluster`` for a module's fixture: a cluster its tests share, as none of them
    kills or reconfigures it (a server start costs ~3 s of CPU, a worker's ~1 s). Each test
    keeps its clean slate by a tenant of its own (``Cluster.new_tenant``) where it needs one."""
    with clusters_in(tmp_path_factory.mktemp("clusters")) as start:
        yield start


def remove_what_killed_workers_left(home: Path) -> None:
    """A worker a test killed leaves its running attempts' disks mounted, its network filter
    installed and its cgroups (its attempts', those it made ahead); only the next worker of
    the same home and uid range would remove them (``Agent._remove_leftovers``,
    ``OutboundNetworks``, ``cgroups.cgroup_enforcer``)."""
    prefix = f"{home}/"
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith(prefix):
            subprocess.run(["umount", "--lazy", point], check=False)
    if os.geteuid() == 0:  # only a root worker has a filter and cgroups
        for state in home.glob("worker-*/worker-*"):
            _remove_filter_and_cgroups(int(state.name.removeprefix("worker-")))


def _remove_filter_and_cgroups(base: int) -> None:
    """The filter and cgroups of the worker that held the uid range from ``base``, unless a
    worker of another test holds the range now, and the table and cgroups of that name are
    its own."""
    try:
        pool, held = reserve_uid_pool(base, WorkerConfig.run_uid_count, secure_directory(UID_LOCKS))
    except RuntimeError:
        return
    try:
        if pool.base == base:
            delete = ["nft", "delete", "table", "inet", f"herder_w{base}"]
            subprocess.run(delete, capture_output=True, check=False)
            for parent in _worker_cgroups(f"herder-worker-{base}"):
                cgroupfs.remove(parent)  # and every cgroup in it
    finally:
        held.release()


def _worker_cgroups(name: str) -> set[Path]:
    """Where a worker of this process's cgroups makes its parent of that name: under its
    own cgroup of each hierarchy, or at the top of v2's (``cgroups.py``)."""
    membership = cgroupfs.cgroup_membership(Path("/proc/self/cgroup").read_text())
    found = set()
    for mount in cgroupfs.cgroup_mounts(Path("/proc/self/mountinfo").read_text()):
        for own in {
            mount.point,
            *(cgroupfs.cgroup_directory(mount, path) for path in membership.values()),
        }:
            if (own / name).is_dir():
                found.add(own / name)
    return found


ISOLATIONS = [
    pytest.param(
        "sandbox",
        marks=pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox needs a root worker"),
    ),
    "none",
]


def _isolated(isolation: str, start_cluster: Callable[..., Cluster]) -> Cluster:
    """``herder up`` (its local worker sandboxes), or a server and an isolation none worker."""
    if isolation == "sandbox":
        return start_cluster(embedded=True)
    started = start_cluster()
    started.start_worker("trusted", "--isolation", "none")
    return started


@pytest.fixture(params=ISOLATIONS)
def isolated_cluster(
    request: pytest.FixtureRequest, start_cluster: Callable[..., Cluster]
) -> Cluster:
    """``herder up`` (its local worker sandboxes), or a server and an isolation none worker."""
    return _isolated(request.param, start_cluster)


@pytest.fixture(scope="module", params=ISOLATIONS)
def module_isolated_cluster(
    request: pytest.FixtureRequest, start_module_cluster: Callable[..., Cluster]
) -> Iterator[Cluster]:
    """``isolated_cluster`` shared by a module's tests (``start_module_cluster``)."""
    started = _isolated(request.param, start_module_cluster)
    yield started
    started.stop_all()  # before the next isolation's


@pytest.fixture
def system_postgres_url(postgres_template: str) -> Iterator[str]:
    yield from fresh_postgres_url(postgres_template)


@pytest.fixture(scope="module")
def module_postgres_url(postgres_template: str) -> Iterator[str]:
    """A PostgreSQL database for a module's shared cluster."""
    yield from fresh_postgres_url(postgres_template)


@contextlib.contextmanager
def scripted_database(
    start: Sequence[str | Path], stop: Sequence[str | Path], what: str, **environment: str
) -> Iterator[str]:
    """A database a script starts and prints the URL of (``scripts/test-postgres.sh``,
    ``scripts/ha-postgres.sh``), stopped by ``stop`` afterwards however the test ends. One
    that cannot be started fails the test under CI and skips it elsewhere."""
    started = subprocess.run(
        start, capture_output=True, text=True, check=False, timeout=180,
        env={**os.environ, **environment},
    )  # fmt: skip
    try:
        if started.returncode != 0:
            message = f"no {what}: {started.stderr.strip()[-2000:]}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        yield started.stdout.strip()
    finally:
        subprocess.run(stop, check=False, timeout=60)


def processes_matching(marker: str) -> list[int]:
    """Pids whose command line contains ``marker`` (a unique string per test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in command:
                found.append(int(entry.name))
    return found


def children_of(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in children.read_text().split()] if children.exists() else []


def alive(pid: int) -> bool:
    """Running, not merely a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Asks every 20 ms at first, each pause half again as long up to a quarter second: a
    condition that holds soon is seen at once, and a long wait, most often on a loaded box,
    asks a server four times a second, not twenty (each ask costs it a request's CPU)."""
    deadline = time.monotonic() + timeout
    pause = 0.02
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.25)


def unique_sleep(seconds: int) -> str:
    """``sleep N.xxxxxx``: about N seconds, and a command line no other test shares."""
    return f"sleep {seconds}.{uuid.uuid4().int % 10**6:06d}"


def kill_matching(marker: str) -> None:
    for pid in processes_matching(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A host beyond the worker, for jobs with ``network: true`` (``outside.py``)."""
    with outside_host(tmp_path_factory.mktemp("outside")) as namespace:
        yield namespace
