"""An attempt's resource requests turned into limits, and the setrlimit fallback.

A worker enforces limits one way for its whole life, chosen once at start
(``sandbox.limit_enforcer``): per-attempt cgroups when the host lets it create them
(``cgroups.py``), otherwise resource limits set in the child by ``prlimit`` before it runs
the job. The executor only sees the ``Enforcer`` and ``Confinement`` protocols below.

The fallback is weaker, and says so in ``description``: RLIMIT_DATA bounds each process's
heap and private memory on its own (not the attempt's total), an allocation past it fails
instead of being killed, and there is no rlimit for a rate of CPU use. RLIMIT_AS is not used:
runtimes that reserve large address ranges up front (JVM, Go, CUDA) fail under it at once.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from herder.domain.jobs import Resources

MAX_PROCESSES_PER_ATTEMPT = 4096  # processes and threads: stops a fork bomb, not a thread pool
MIB = 1024 * 1024

PRLIMIT = shutil.which("prlimit")


@dataclass(frozen=True)
class Limits:
    """What one attempt may use: its resource request, enforced."""

    memory_bytes: int
    cpu_cores: float
    max_processes: int = MAX_PROCESSES_PER_ATTEMPT

    @property
    def memory_text(self) -> str:
        return f"{self.memory_bytes // MIB} MiB"


def limits_for(resources: Resources, max_processes: int = MAX_PROCESSES_PER_ATTEMPT) -> Limits:
    return Limits(resources.memory_mb * MIB, resources.cpu, max_processes)


@dataclass(frozen=True)
class Verdict:
    """What the kernel saw of an attempt; ``None`` where this host's enforcement cannot tell."""

    oom_kills: int | None = None  # processes the kernel killed at the memory limit
    peak_memory_bytes: int | None = None
    # user and system CPU time of every process the attempt ran, waited for or not
    cpu_seconds: tuple[float, float] | None = None
    # processes still in its cgroup when its main process had ended (killed then): where none
    # was, nothing it ran is left anywhere, as each was born there and none could leave
    left_running: int | None = None


class Confinement(Protocol):
    """The limits around one attempt's processes, from before the job's first instruction."""

    before_switch: bool  # ``wrap`` needs the worker's privileges: it goes before the uid switch
    stdin: int | None  # the first process's stdin, when ``wrap`` needs one (else /dev/null)

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that enters the limits, then execs ``argv``. It runs right before
        the job, after the switch to the attempt's uid, unless ``before_switch``."""
        ...

    def entrances(self) -> list[Path]:
        """The files the sandbox launcher's job writes itself into as its last privileged
        step (a cgroup's ``cgroup.procs`` or ``tasks``), opened by the worker."""
        ...

    def birthplace(self) -> Path | None:
        """The cgroup v2 directory the sandbox launcher's job is born in, in place of
        ``entrances`` (nothing to move in); None where it writes itself in."""
        ...

    def launcher_options(self) -> list[str]:
        """The sandbox launcher's options that set the limits, as its last privileged step
        (``--rlimit NAME=VALUE``)."""
        ...

    def collect(self) -> Verdict:
        """Once the main process is reaped: kill whatever is left inside, say what happened."""
        ...

    def try_remove(self) -> bool:
        """Release the limits if that needs no waiting (nothing left inside): whether done."""
        ...

    def remove(self) -> None:
        """Kill anything left and release the limits; may block briefly; idempotent."""
        ...


class Enforcer(Protocol):
    """How this worker enforces limits; ``description`` says which, for the start-up log."""

    description: str

    def confine(
        self, name: str, limits: Limits, *, gid: int | None, by_launcher: bool = False
    ) -> Confinement:
        """Limits for one attempt, ready before it starts; ``gid``: the attempt's own group
        when it runs under a uid and gid no other process uses, ``None`` when it runs as the
        worker's user; ``by_launcher``: the sandbox launcher enters them as root
        (``launcher_options``), so nothing is opened or handed to the job for ``wrap``."""
        ...

    def close(self) -> None:
        """Remove what the worker made for its attempts (they have all ended)."""
        ...


class RlimitEnforcer:
    """Per-process rlimits, set by ``prlimit`` in the child before the job runs."""

    def __init__(self, why_not_cgroups: str) -> None:
        if PRLIMIT is None:
            self.description = f"none: {why_not_cgroups}, and prlimit is not installed"
        else:
            self.description = (
                f"rlimits only ({why_not_cgroups}): memory per process (RLIMIT_DATA), "
                "process count when attempts have their own uid (RLIMIT_NPROC), no CPU limit"
            )

    def confine(
        self, name: str, limits: Limits, *, gid: int | None, by_launcher: bool = False
    ) -> Confinement:
        return RlimitConfinement(limits, own_uid=gid is not None)

    def close(self) -> None:
        """Nothing to remove: rlimits end with the processes."""


class RlimitConfinement:
    before_switch: bool = True  # as root, prlimit may also raise a hard limit that is too low
    stdin: int | None = None

    def __init__(self, limits: Limits, *, own_uid: bool) -> None:
        self._limits = limits
        self._own_uid = own_uid

    def wrap(self, argv: list[str]) -> list[str]:
        if PRLIMIT is None:
            return argv
        # RLIMIT_NPROC counts every process of the real uid: only a limit per attempt when
        # the attempt is alone under its uid (else it would count the worker's user's too).
        processes = [f"--nproc={self._limits.max_processes}"] if self._own_uid else []
        return [PRLIMIT, f"--data={self._limits.memory_bytes}", *processes, "--", *argv]

    def entrances(self) -> list[Path]:
        return []

    def birthplace(self) -> Path | None:
        return None

    def launcher_options(self) -> list[str]:
        processes = ["--rlimit", f"nproc={self._limits.max_processes}"] if self._own_uid else []
        return ["--rlimit", f"data={self._limits.memory_bytes}", *processes]

    def collect(self) -> Verdict:
        return Verdict()

    def try_remove(self) -> bool:
        return True

    def remove(self) -> None:
        """Nothing to remove: rlimits end with the processes."""
