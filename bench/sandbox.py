"""Scenario: what an attempt's sandbox costs per run, beside a bare spawn and ``unshare`` alone.

Each variant starts ``true`` one at a time from Python, as the worker does, and is charged
the CPU of everything it started (user + system, from the children's rusage) and the wall time
until it was reaped. ``full sandbox`` is the worker's own command line: the launcher with the
attempt's namespaces, file system, uid, seccomp filter and cgroups (created and removed per
run, as for an attempt), on an attempt disk of 64 MiB.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from herder.worker.disk import MIB, mount_disk, unmount_disk
from herder.worker.launcher import sandbox_launcher
from herder.worker.limits import Limits
from herder.worker.sandbox import SYSTEM_DIRECTORIES, Sandbox, limit_enforcer, system_view
from herder.worker.statedir import secure_directory

UID = 64999  # outside the default worker ranges
ENV = {"PATH": "/usr/bin:/bin"}


@dataclass(frozen=True)
class Cost:
    variant: str
    runs: int
    cpu_ms: float  # per run: everything the spawn started, user + system
    wall_ms: float  # per run: spawn to reaped

    @property
    def rate(self) -> float:
        return 1000 / self.wall_ms


def _measure(variant: str, runs: int, start: Callable[[int], list[str]],
             around: Callable[[int], Callable[[], None]] | None = None) -> Cost:  # fmt: skip
    """``start(i)``: the command line of run i; ``around(i)``: set-up before it, returning
    the clean-up after it (cgroups, as the worker makes per attempt), counted in wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    for index in range(runs):
        clean = around(index) if around is not None else None
        subprocess.run(start(index), env=ENV, check=True, stdin=subprocess.DEVNULL)
        if clean is not None:
            clean()
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Cost(variant, runs, cpu / runs * 1000, wall / runs * 1000)


def measure(work: Path, runs: int = 300) -> list[Cost]:
    if os.geteuid() != 0:
        raise SystemExit("the sandbox scenario needs root, as a sandboxing worker does")
    costs = [_measure("bare `/bin/true`", runs, lambda _: ["/bin/true"])]
    unshare = shutil.which("unshare")
    if unshare:
        namespaces = ["--net", "--ipc", "--uts", "--pid", "--mount", "--fork"]
        costs.append(_measure("`unshare` alone", runs, lambda _: [unshare, *namespaces, "true"]))
    state = secure_directory(work / "sandbox")
    launcher = sandbox_launcher(secure_directory(state / "bin", 0o755))
    disk = mount_disk(state / "disk", 64 * MIB, UID)
    enforcer = limit_enforcer(f"bench-{os.getpid()}")
    try:
        sandbox = Sandbox(
            launcher, UID, secure_directory(state / "root", 0o755), disk,
            system_view(SYSTEM_DIRECTORIES),
        )  # fmt: skip
        costs.append(_measure("launcher, no cgroups", runs, lambda _: sandbox.command_line(
            ["true"], []
        )))  # fmt: skip
        confinements = {}

        def confine(index: int) -> Callable[[], None]:
            confinements[index] = enforcer.confine(
                f"bench-{index}", Limits(256 * MIB, 1), gid=UID, by_launcher=True
            )
            return lambda: confinements.pop(index).remove()

        costs.append(_measure("full sandbox (launcher, cgroups)", runs, lambda index: (
            sandbox.command_line(["true"], confinements[index].launcher_options())
        ), confine))  # fmt: skip
    finally:
        enforcer.close()
        unmount_disk(disk)
    return costs


def section(costs: list[Cost], machine: str, when: str) -> list[str]:
    lines = [
        f"\n### Sandbox cost per run, {when} UTC\n",
        f"Machine: {machine}. `python -m bench.run --scenario sandbox`: `true` started and "
        "reaped one at a time; CPU is everything the spawn started (user + system).\n",
        "| variant | runs | CPU per run | wall per run | runs/s (one at a time) |",
        "|---|---|---|---|---|",
    ]
    for cost in costs:
        lines.append(
            f"| {cost.variant} | {cost.runs} | **{cost.cpu_ms:.2f} ms** | {cost.wall_ms:.2f} ms "
            f"| {cost.rate:.0f} |"
        )
    return lines
