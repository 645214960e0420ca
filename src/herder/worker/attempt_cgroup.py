"""One attempt's cgroup (one directory per hierarchy on v1): the limits written to its files,
the way its child enters it, and what it says when the attempt has ended.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from herder.worker.cgroupfs import (
    close_all,
    kill_members,
    read_key,
    read_number,
    remove,
    try_remove,
)
from herder.worker.limits import Limits, Verdict

CPU_PERIOD_MICROSECONDS = 100_000  # the kernel's default CFS period, every new cgroup's
MIN_CPU_QUOTA_MICROSECONDS = 1_000  # the kernel refuses less
TASKS_FILE_MODE = 0o664  # v1: the attempt's group may write its own cgroups' tasks
OPTIONAL_FILES = {  # memory files only some hosts have: swap accounting, v2's oom.group
    "memory.swap.max",
    "memory.oom.group",
    "memory.memsw.limit_in_bytes",
}
SHELL = "/bin/sh"
# The last step before the job, after the uid switch: enter, then become the job. On v1,
# writing 0 to ``tasks`` moves just this (single-threaded) shell, which lets the kernel skip
# the global lock that moving a whole process takes, and the RCU grace period it can wait for
# (~10 ms on an idle host, every fork on the host held up meanwhile).
V1_JOIN_SCRIPT = (
    'for tasks; do shift; [ "$tasks" = -- ] && break; '
    'echo 0 > "$tasks" || { echo "herder: cannot enter the cgroup of $tasks" >&2; exit 125; }; '
    'done; exec "$@"'
)
# On v2, stdin is the attempt's cgroup.procs, opened by the worker; the job gets /dev/null.
V2_JOIN_SCRIPT = (
    'echo 0 >&0 || { echo "herder: cannot enter the cgroup $1" >&2; exit 125; }; '
    'shift; exec "$@" < /dev/null'
)


class AttemptCgroup:
    """One attempt's cgroup (one directory per hierarchy on v1).

    The child enters it itself, as the last step before the job (``wrap``): on v1 by writing
    0 to each ``tasks`` file, which the attempt's group may write (``admit_group``); on v2
    through ``cgroup.procs`` opened here and handed to the child as its stdin
    (``open_entrance``), which needs no permission on the files (the kernel checks whoever
    opened it). The uid switch and namespaces are set up before that, outside, so the
    attempt's CPU quota is not spent on them.
    """

    def __init__(
        self,
        version: int,
        directories: dict[str, Path],
        retire: Callable[[list[Path]], bool] | None = None,
    ) -> None:
        """``retire``: who removes it once used, off the caller's path (``CgroupPool``): False
        when it cannot, and it is removed here."""
        self._version = version
        self._directories = directories
        self._retire = retire
        self.unique_directories = list(dict.fromkeys(directories.values()))
        self.stdin: int | None = None
        self.before_switch = False

    def admit_group(self, gid: int) -> None:
        """v1: let processes of ``gid`` (the attempt's alone) move themselves in, not out:
        the kernel lets a process move only itself, or its own uid's, and only into a cgroup
        whose ``tasks`` file it may write; every other cgroup's stays root's."""
        for directory in self.unique_directories:
            tasks = directory / "tasks"
            os.chown(tasks, -1, gid)
            os.chmod(tasks, TASKS_FILE_MODE)

    def open_entrance(self, *, before_switch: bool) -> None:
        """v2: open ``cgroup.procs`` for the child, who enters by writing to it."""
        procs = self.unique_directories[0] / "cgroup.procs"
        self.stdin = os.open(procs, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC)
        self.before_switch = before_switch

    def wrap(self, argv: list[str]) -> list[str]:
        if self._version == 2:
            where = str(self.unique_directories[0])
            return [SHELL, "-c", V2_JOIN_SCRIPT, "herder-join", where, *argv]
        tasks = [str(directory / "tasks") for directory in self.unique_directories]
        return [SHELL, "-c", V1_JOIN_SCRIPT, "herder-join", *tasks, "--", *argv]

    def entrances(self) -> list[Path]:
        entrance = "cgroup.procs" if self._version == 2 else "tasks"
        return [directory / entrance for directory in self.unique_directories]

    def birthplace(self) -> Path | None:
        """v2 only: its one directory, a descriptor of which ``clone3`` takes (v1 has no such
        way in: a process enters each hierarchy by a write)."""
        return self.unique_directories[0] if self._version == 2 else None

    def launcher_options(self) -> list[str]:
        return []

    def collect(self) -> Verdict:
        memory = self._directories["memory"]
        if self._version == 2:
            events, peak = memory / "memory.events", memory / "memory.peak"
        else:
            events, peak = memory / "memory.oom_control", memory / "memory.max_usage_in_bytes"
        verdict = Verdict(read_key(events, "oom_kill"), read_number(peak), self._cpu_seconds())
        # v1: a process enters each of the attempt's hierarchies before it forks and cannot
        # leave them, so the memory one holds them all (removing each kills what is left)
        killed = kill_members(memory)
        close_all(killed)
        return replace(verdict, left_running=len(killed))

    def _cpu_seconds(self) -> tuple[float, float] | None:
        """User and system CPU time of every process that ran inside, waited for or not:
        v2's cpu.stat (always there), v1's cpuacct (with cpu or apart); ``None`` where this
        host does not say."""
        if self._version == 2:
            stat = self._directories["memory"] / "cpu.stat"
            user, system = read_key(stat, "user_usec"), read_key(stat, "system_usec")
            if user is None or system is None:
                return None
            return user * 1e-6, system * 1e-6
        cpuacct = self._directories.get("cpuacct")
        return v1_cpu_seconds(cpuacct) if cpuacct is not None else None

    def try_remove(self) -> bool:
        self._close_entrance()
        if self._retire is not None and self._retire(self.unique_directories):
            self.unique_directories = []
            return True
        self.unique_directories = [
            directory for directory in self.unique_directories if not try_remove(directory)
        ]
        return not self.unique_directories

    def remove(self) -> None:
        self._close_entrance()
        for directory in self.unique_directories:
            remove(directory)

    def _close_entrance(self) -> None:
        if self.stdin is not None:
            os.close(self.stdin)
            self.stdin = None


def v1_cpu_seconds(cpuacct: Path) -> tuple[float, float] | None:
    """A v1 cpuacct cgroup's user and system CPU time: ``cpuacct.usage`` is exact (ns),
    ``cpuacct.stat`` splits it (in ticks of 10 ms: an attempt shorter than a tick is all
    user time)."""
    total = read_number(cpuacct / "cpuacct.usage")
    stat = cpuacct / "cpuacct.stat"
    user, system = read_key(stat, "user"), read_key(stat, "system")
    if total is None or user is None or system is None:
        return None
    seconds = total * 1e-9
    user_share = user / (user + system) if user + system else 1.0
    return seconds * user_share, seconds * (1 - user_share)


def limit_settings(
    version: int, directories: dict[str, Path], limits: Limits, optional: frozenset[str]
) -> list[tuple[Path, str]]:
    """The files to write, in order (v1 refuses a memory+swap limit below the memory limit);
    of the ``OPTIONAL_FILES``, only those in ``optional`` (the ones this host has)."""
    memory = str(limits.memory_bytes)
    quota = max(MIN_CPU_QUOTA_MICROSECONDS, round(limits.cpu_cores * CPU_PERIOD_MICROSECONDS))
    wanted: dict[str, list[tuple[str, str]]] = {
        "memory": [
            ("memory.max", memory),
            ("memory.swap.max", "0"),
            ("memory.oom.group", "1"),  # an OOM kill takes the whole attempt, not a piece
        ]
        if version == 2
        else [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)],
        "cpu": [("cpu.max", f"{quota} {CPU_PERIOD_MICROSECONDS}")]
        if version == 2
        else [("cpu.cfs_quota_us", str(quota))],  # a new cgroup's period is the default one
        "pids": [("pids.max", str(limits.max_processes))],
    }
    return [
        (directories[controller] / file, value)
        for controller, files in wanted.items()
        if controller in directories
        for file, value in files
        if file not in OPTIONAL_FILES or file in optional
    ]
