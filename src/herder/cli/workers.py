"""``herder worker``: run a worker agent (``--server URL``), or manage the fleet: list the
workers, drain one for maintenance and take it back, forget a lost one (system admins)."""

from __future__ import annotations

import asyncio
import faulthandler
import ipaddress
import logging
import os
import signal
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from herder.cli.answers import act_on
from herder.cli.common import LOG_FORMAT, JsonFlag, app, client, fail, out, pairs, print_json, when
from herder.cli.ids import WORKER, QuietFlag, id_table, quiet_ids
from herder.cli.tones import state_style
from herder.cli.views import Field, Listing
from herder.client import HerderClient
from herder.credentials import home_directory
from herder.domain.jobs import MAX_STOP_GRACE_SECONDS
from herder.domain.models import Worker
from herder.domain.pools import POOL_LABEL, check_pool_name
from herder.worker.cgroup_pool import READY_CGROUPS
from herder.worker.isolation import Isolation

if TYPE_CHECKING:
    from herder.worker.agent import Agent
    from herder.worker.registry_auth import RegistryCredentials

worker_app = typer.Typer(invoke_without_command=True)
app.add_typer(worker_app, name="worker")


@worker_app.callback()
def worker(
    context: typer.Context,
    server_url: Annotated[
        str | None, typer.Option("--server", help="API URL, e.g. http://host:8080")
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            help="file holding the worker token (mode 0600 or 0400, yours); "
            "else HERDER_WORKER_TOKEN. Never on the command line: jobs could read it there"
        ),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option(
            envvar="HERDER_CA_FILE",
            help="an https --server's certificate authority, when not the system's (PEM)",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="default: the host name")] = None,
    cpu: Annotated[float | None, typer.Option(help="cores to offer (default: all)")] = None,
    memory_mb: Annotated[int | None, typer.Option(help="memory to offer (default: all)")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs to offer (default: detected)")] = None,
    label: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable")] = [],  # noqa: B006
    pool: Annotated[
        str | None,
        typer.Option(help="join this resource pool: registers with the label pool=NAME"),
    ] = None,
    max_slots: Annotated[int, typer.Option(help="most attempts at once")] = 256,
    home: Annotated[Path | None, typer.Option(help="cache and workspaces")] = None,
    run_uid_base: Annotated[
        int, typer.Option(help="when root: attempts run as uids from here up")
    ] = 61000,
    python: Annotated[str | None, typer.Option(help="interpreter for python jobs")] = None,
    max_stop_grace: Annotated[
        float,
        typer.Option(
            min=0,
            max=MAX_STOP_GRACE_SECONDS,
            help="the longest stop grace (seconds between SIGTERM and SIGKILL) an attempt gets "
            "here: a job's stop_grace_seconds above it is cut to it",
        ),
    ] = MAX_STOP_GRACE_SECONDS,
    address: Annotated[
        str | None,
        typer.Option(help="where gang peers reach it (default: its address towards the server)"),
    ] = None,
    isolation: Annotated[
        Isolation,
        typer.Option(
            help="sandbox (needs root), or none: jobs run as the worker's user (trusted fleets)"
        ),
    ] = Isolation.SANDBOX,
    ready_cgroups: Annotated[
        int,
        typer.Option(
            min=0,
            help="in the sandbox: attempts' cgroups a thread keeps made ahead (0: each is "
            "made as its attempt starts)",
        ),
    ] = READY_CGROUPS,
    expose: Annotated[
        list[str], typer.Option(help="a host directory jobs may read, e.g. /opt; repeatable")
    ] = [],  # noqa: B006
    block: Annotated[
        list[str],
        typer.Option(help="an address or network network-on jobs may not reach; repeatable"),
    ] = [],  # noqa: B006
    allow_cidr: Annotated[
        list[str],
        typer.Option(
            help="a private or special-purpose IPv4 network network-on jobs may reach (by "
            "default none: 10/8, 172.16/12, 192.168/16, 100.64/10 and the like are denied); "
            "repeatable; --block still wins",
            metavar="CIDR",
        ),
    ] = [],  # noqa: B006
    drain_seconds: Annotated[
        float,
        typer.Option(
            min=0,
            envvar="HERDER_WORKER_DRAIN_SECONDS",
            help="at SIGTERM or Ctrl-C it takes nothing new and gives what runs this long to "
            "end by itself; then, or at a second signal, what is left is stopped (SIGTERM, its "
            "stop grace, SIGKILL) and its runs go back to the queue, no try used",
        ),
    ] = 0.0,
    stream: Annotated[
        bool,
        typer.Option(
            envvar="HERDER_WORKER_STREAM",
            help="take work on one stream (a WebSocket) on which the server pushes it as it is "
            "placed and reports go back; --no-stream: long-poll claims and a request a report, "
            "as the release before (a proxy that passes no WebSocket does so by itself)",
        ),
    ] = True,
    shutdown_reason: Annotated[
        str | None,
        typer.Option(
            hidden=True,
            help="herder up's own worker: attempts still running when it stops end cancelled "
            "with this reason (else preempted: their runs are queued again)",
        ),
    ] = None,
) -> None:
    """Run a worker agent that takes attempts from a Herder server (herder worker --server
    URL), or manage the fleet: herder worker list, drain ID, undrain ID, forget ID."""
    if context.invoked_subcommand is not None:
        return
    if server_url is None:
        raise fail(
            "--server is needed to run a worker agent (or: herder worker list|drain|undrain|forget)"
        )
    from herder.telemetry import tracing
    from herder.tls import TlsError
    from herder.worker.agent import Agent, WorkerConfig
    from herder.worker.capacity import detect_capacity
    from herder.worker.images import image_cache_bytes
    from herder.worker.uids import default_python

    token = _worker_token(token_file)
    try:
        cache_bytes = image_cache_bytes(os.environ)
    except ValueError as error:
        raise fail(str(error)) from error
    credentials = _registry_credentials()
    name = name or socket.gethostname()
    # Its lines name it: several workers' logs on one host (or one collector) tell apart.
    role = f"worker {name}".replace("%", "%%")
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT.format(role=role))
    logging.getLogger("httpx").setLevel(logging.WARNING)
    tracing.configure("worker")  # its attempts' spans, when OTEL_EXPORTER_OTLP_* says where
    config = WorkerConfig(
        server_url=server_url,
        token=token,
        name=name,
        capacity=detect_capacity(cpu, memory_mb, gpus),
        home=(home or home_directory() / "worker").absolute(),
        python=python or default_python(),
        max_slots=max_slots,
        labels=_labels(label, pool),
        run_uid_base=run_uid_base,
        max_stop_grace_seconds=max_stop_grace,
        address=address or "",
        isolation=isolation,
        ready_cgroups=ready_cgroups,
        expose=tuple(expose),
        block=_networks(block, "--block"),
        allow_cidr=_networks(allow_cidr, "--allow-cidr", ipv4_only=True),
        shutdown_reason=shutdown_reason,
        drain_seconds=drain_seconds,
        image_cache_bytes=cache_bytes,
        image_credentials=credentials,
        ca_file=ca_file.absolute() if ca_file else None,
        stream=stream,
    )
    try:
        agent = Agent(config)
    except TlsError as error:
        raise fail(str(error)) from None
    try:
        _run_agent(agent)
    finally:
        tracing.shutdown()  # what it recorded is sent before it ends


def _labels(given: list[str], pool: str | None) -> dict[str, str]:
    """The ``--label`` pairs, and ``pool=NAME`` for ``--pool NAME``."""
    labels = pairs(given, "label")
    if pool is None:
        return labels
    try:
        check_pool_name(pool)
    except ValueError as error:
        raise fail(f"--pool {pool!r}: {error}") from error
    if labels.get(POOL_LABEL, pool) != pool:
        raise fail(f"--pool {pool} and --label {POOL_LABEL}={labels[POOL_LABEL]}: choose one")
    return {**labels, POOL_LABEL: pool}


def _networks(values: list[str], option: str, *, ipv4_only: bool = False) -> tuple[str, ...]:
    """The option's values, each an address or network (CIDR), or a clear refusal."""
    for value in values:
        try:
            network = ipaddress.ip_network(value, strict=False)
        except ValueError as error:
            raise fail(f"{option} {value!r} is not an address or network: {error}") from error
        if ipv4_only and network.version != 4:
            raise fail(f"{option} {value!r}: jobs have IPv4 only, so it would open nothing")
    return tuple(values)


def _run_agent(agent: Agent) -> None:
    """Until SIGTERM or SIGINT; a side task that dies ends it with one clear message. For a
    worker that seems stuck, SIGUSR1 writes every thread's stack to stderr (from C: it works
    even while the event loop is blocked) and SIGUSR2 logs every asyncio task's."""
    from herder.worker.watch import SideTaskDied, log_task_stacks

    faulthandler.register(signal.SIGUSR1, file=2, all_threads=True)  # the process's stderr

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:  # the first drains, a second stops what runs at once
            if stop.is_set():
                agent.hurry()
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal)
        loop.add_signal_handler(signal.SIGUSR2, log_task_stacks)
        await agent.run(stop)

    try:
        asyncio.run(main())
    except SideTaskDied as error:
        raise fail(f"the worker stopped: {error}") from error


def _worker_token(token_file: Path | None) -> str:
    """The fleet's worker token, from a private file or HERDER_WORKER_TOKEN; never argv, which
    every process on the host (jobs included) can read in /proc/PID/cmdline."""
    if token_file is None:
        token = os.environ.get("HERDER_WORKER_TOKEN", "").strip()
        if not token:
            raise fail("a worker token is needed: HERDER_WORKER_TOKEN or --token-file PATH")
        return token
    try:
        return read_private_token(token_file)
    except (OSError, ValueError) as error:
        raise fail(f"cannot use {token_file} as the worker token file: {error}") from error


def _registry_credentials() -> dict[str, RegistryCredentials]:
    """How image jobs' registries are signed in to: the private file
    HERDER_IMAGE_REGISTRY_CREDENTIALS_FILE names (docs/runtimes.md), checked as the token file
    is; none without it."""
    from herder.worker.registry_auth import CREDENTIALS_VARIABLE, parse_credentials

    given = os.environ.get(CREDENTIALS_VARIABLE)
    if not given:
        return {}
    try:
        return parse_credentials(read_private_token(Path(given)))
    except (OSError, ValueError) as error:
        raise fail(f"cannot use {given} as {CREDENTIALS_VARIABLE}: {error}") from error


def read_private_token(path: Path) -> str:
    """The token in ``path``, which must be a regular file (not a symlink) owned by this user
    and readable or writable by nobody else (0600 or 0400)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("not a regular file")
        if status.st_uid != os.geteuid():
            raise ValueError(f"owned by uid {status.st_uid}, not by this user ({os.geteuid()})")
        if status.st_mode & 0o077:
            raise ValueError(
                f"mode {stat.S_IMODE(status.st_mode):04o} lets others read or change it; "
                "chmod 600 it"
            )
        token = file.read(4096).decode().strip()
    if not token:
        raise ValueError("it is empty")
    return token


def _worker_table(workers: list[Worker]) -> Listing:
    """Workers; at 80 columns the heartbeat, the slots and the capacity give way, in that
    order, and the labels are cut."""
    table, shown = id_table(
        (worker.id for worker in workers), "NAME", "STATE", Field("CPU", drop=3),
        Field("MEMORY", drop=4), Field("GPUS", drop=5), Field("SLOTS", drop=2),
        Field("LABELS", free=True), Field("HEARTBEAT", drop=1),
    )  # fmt: skip
    for worker in workers:
        capacity = worker.capacity
        labels = ", ".join(f"{key}={value}" for key, value in sorted(worker.labels.items()))
        style = state_style(worker.state)
        table.add_row(
            shown[worker.id], worker.name, f"[{style}]{worker.state}[/]", f"{capacity.cpu:g}",
            f"{capacity.memory_mb} MB", str(capacity.gpus), str(worker.max_slots),
            labels or "-", when(worker.last_heartbeat_at),
        )  # fmt: skip
    return table


@worker_app.command("list")
def workers_list(as_json: JsonFlag = False, quiet: QuietFlag = False) -> None:
    """Every registered worker with its state, capacity and labels."""
    with client() as herder:
        workers = herder.list_workers()
    if as_json:
        print_json(list(workers))
    elif quiet:
        quiet_ids(worker.id for worker in workers)
    else:
        out.print(_worker_table(workers))


@worker_app.command("drain")
def workers_drain(worker_id: str, as_json: JsonFlag = False) -> None:
    """Place nothing new on a worker; what it runs finishes."""
    _administer(worker_id, HerderClient.drain_worker, "is {state}: it takes no new work", as_json)


@worker_app.command("undrain")
def workers_undrain(worker_id: str, as_json: JsonFlag = False) -> None:
    """Give a draining worker new work again."""
    _administer(worker_id, HerderClient.undrain_worker, "is {state}: it takes new work", as_json)


@worker_app.command("forget")
def workers_forget(worker_id: str, as_json: JsonFlag = False) -> None:
    """Stop listing a lost worker (lost ones go by themselves after
    HERDER_LOST_WORKER_RETENTION_HOURS); its runs still name it."""
    _administer(worker_id, HerderClient.forget_worker, "was {state}: it is forgotten", as_json)


def _administer(
    worker_id: str, call: Callable[[HerderClient, str], Worker], what: str, as_json: bool
) -> None:
    """Make an administration call on the worker, and say what became of it."""

    def said(worker: Worker) -> str:
        return f"worker {worker.id} ({worker.name}) " + what.format(state=worker.state)

    act_on(WORKER, worker_id, call, said, as_json=as_json)
