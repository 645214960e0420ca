"""Scenario: what an attempt's sandbox costs per run, beside a bare spawn and ``unshare`` alone.

Each variant starts ``true`` one at a time, and is charged the CPU of everything it started
(user + system, from the children's rusage), the CPU of this process on its behalf (the
worker's side: the disk, the cgroups, starting and reaping), and the wall time until it was
reaped. ``an attempt`` is the worker's own code (``executor.execute``): the launcher's server
starts it in the attempt's namespaces, file system, uid, seccomp filter and cgroups, on a disk
of its own of 64 MiB; disks and cgroups are made and removed per run, as for an attempt. The
attempts are the server's children: what they cost is read from its accounting.
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from herder.worker.disk import MIB, close_disk, open_disk
from herder.worker.executor import StopRequest, execute
from herder.worker.launch_server import LaunchServer
from herder.worker.launcher import sandbox_launcher
from herder.worker.limits import Enforcer, Limits
from herder.worker.process import LaunchPlan
from herder.worker.sandbox import (
    SANDBOX_WORKSPACE,
    SYSTEM_DIRECTORIES,
    Sandbox,
    limit_enforcer,
    skeleton_options,
    system_view,
)
from herder.worker.statedir import secure_directory

UID = 64999  # outside the default worker ranges
ENV = {"PATH": "/usr/bin:/bin"}


@dataclass(frozen=True)
class Cost:
    variant: str
    runs: int
    started_cpu_ms: float  # per run: everything the spawn started, user + system
    worker_cpu_ms: float  # per run: this process, on the worker's side of the attempt
    wall_ms: float  # per run: spawn to reaped

    @property
    def cpu_ms(self) -> float:
        return self.started_cpu_ms + self.worker_cpu_ms

    @property
    def rate(self) -> float:
        return 1000 / self.wall_ms


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _server_cpu(server: LaunchServer | None) -> float:
    """The launcher server's CPU, its own and its reaped children's (the attempts)."""
    if server is None or server.pid is None:
        return 0.0
    fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(field) for field in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _measure(
    variant: str,
    runs: int,
    one: Callable[[int], Awaitable[None]],
    server: LaunchServer | None = None,
) -> Cost:
    """``one(i)`` runs the i-th ``true`` to its end; ``server`` starts them."""

    async def all_runs() -> None:
        for index in range(runs):
            await one(index)

    with asyncio.Runner() as runner:
        runner.run(one(-1))  # warm: nothing of a first time counts
        started = _cpu(resource.RUSAGE_CHILDREN) + _server_cpu(server)
        own = _cpu(resource.RUSAGE_SELF)
        began = time.perf_counter()
        runner.run(all_runs())
        wall = time.perf_counter() - began
    started = _cpu(resource.RUSAGE_CHILDREN) + _server_cpu(server) - started
    own = _cpu(resource.RUSAGE_SELF) - own
    return Cost(variant, runs, started / runs * 1000, own / runs * 1000, wall / runs * 1000)


def _spawning(command: list[str]) -> Callable[[int], Awaitable[None]]:
    async def one(_: int) -> None:
        subprocess.run(command, env=ENV, check=True, stdin=subprocess.DEVNULL)

    return one


def _attempts(
    launcher: LaunchServer, enforcer: Enforcer | None
) -> Callable[[int], Awaitable[None]]:
    async def one(index: int) -> None:
        disk = open_disk(64 * MIB, UID)
        try:
            sandbox = Sandbox(launcher, UID, disk)
            plan = LaunchPlan(
                ["true"], ENV, SANDBOX_WORKSPACE, 60, limits=Limits(256 * MIB, 1),
                sandbox=sandbox, name=f"bench-{index}",
            )  # fmt: skip
            outcome = await execute(plan, lambda _stream, _data: None, StopRequest(), enforcer)
        finally:
            close_disk(disk)
        if outcome.exit_code != 0:
            raise RuntimeError(f"the sandboxed true failed: {outcome.reason}")

    return one


def measure(work: Path, runs: int = 300) -> list[Cost]:
    if os.geteuid() != 0:
        raise SystemExit("the sandbox scenario needs root, as a sandboxing worker does")
    costs = [_measure("bare `/bin/true`", runs, _spawning(["/bin/true"]))]
    unshare = shutil.which("unshare")
    if unshare:
        namespaces = ["--net", "--ipc", "--uts", "--pid", "--mount", "--fork"]
        command = [unshare, *namespaces, "true"]
        costs.append(_measure("`unshare` alone", runs, _spawning(command)))
    state = secure_directory(work / "sandbox")
    skeleton = skeleton_options(
        secure_directory(state / "root", 0o755), system_view(SYSTEM_DIRECTORIES)
    )
    binary = sandbox_launcher(secure_directory(state / "bin", 0o755))
    server = LaunchServer.sandboxing(binary, skeleton)
    enforcer = limit_enforcer(f"bench-{os.getpid()}")
    try:
        for variant, limits in (("an attempt without cgroups", None), ("an attempt", enforcer)):
            attempts = _attempts(server, limits)
            costs.append(_measure(variant, runs, attempts, server))
    finally:
        enforcer.close()
        server.close()
    return costs


def section(costs: list[Cost], machine: str, when: str) -> list[str]:
    lines = [
        f"\n### Sandbox cost per run, {when} UTC\n",
        f"Machine: {machine}. `python -m bench.run --scenario sandbox`: `true` started and "
        "reaped one at a time; CPU is everything the spawn started (user + system) and the "
        "worker's own side of it (the disk, the cgroups, starting and reaping).\n",
        "| variant | runs | CPU per run | started processes | worker's side | wall per run "
        "| runs/s (one at a time) |",
        "|---|---|---|---|---|---|---|",
    ]
    for cost in costs:
        lines.append(
            f"| {cost.variant} | {cost.runs} | **{cost.cpu_ms:.2f} ms** "
            f"| {cost.started_cpu_ms:.2f} ms | {cost.worker_cpu_ms:.2f} ms "
            f"| {cost.wall_ms:.2f} ms | {cost.rate:.0f} |"
        )
    return lines
