"""Per-attempt cgroups: the kernel enforces an attempt's memory, CPU and process count.

    <worker's parent>/herder-<worker>/<attempt>   memory, cpu and pids limits; removed after

cgroup v2 is preferred. Hosts that still mount the controllers as cgroup v1 (a "hybrid" host,
many containers and VMs) get the same limits from the v1 files, one directory per controller,
under the worker's own cgroup so a container's limits still hold. v2 allows processes only in
leaves, so its parent goes at the top of the hierarchy when the worker may write there (a root
worker on a systemd host; in a container the top is the container's own cgroup), else under
the worker's own cgroup, once the worker has stepped aside into a leaf (``_v2_parent``).

The child enters its cgroup itself, as the last step before the job: the command line ends
with a shell that moves itself in, then execs the job (``AttemptCgroup.wrap``). Every process
the job starts is born inside, so nothing is charged elsewhere and nothing escapes the final
kill; what runs before (namespaces, the uid switch) is the worker's, and is not charged to the
attempt's CPU quota (at 0.01 cores, 3 ms of it would cost the job 300 ms).

A cgroup is made and removed per attempt rather than reused: a memory cgroup keeps charges
(page cache, files in /dev/shm) after its processes are gone, and a reused one would count
them against the next attempt's limit and peak. Both are done off the attempt's path where the
enforcer keeps a pool (``cgroup_pool.py``): its thread makes them ahead (named ``ready-<n>``
then, not after their attempt) and removes them after.

At isolation none nothing is limited, but a worker that may make cgroups gives each of its
keepers one, to count the CPU of all that its attempts start (``cpu_accounts``,
``plain_launcher.py``).

Here: finding the hierarchies and making the worker's parent; one attempt's cgroup (its
limit files, how its child enters, what it says at the end) is ``attempt_cgroup.py``'s, and
the file operations on cgroups ``cgroupfs.py``'s.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from herder.worker.attempt_cgroup import OPTIONAL_FILES, AttemptCgroup, limit_settings
from herder.worker.cgroup_pool import READY_CGROUPS, CgroupPool
from herder.worker.cgroupfs import (
    CgroupMount,
    cgroup_directory,
    cgroup_membership,
    cgroup_mounts,
    clear,
    enable,
    make,
    member_pids,
    read_words,
    remove,
    write,
)
from herder.worker.limits import Confinement, Limits

# memory is required, the others are used if present; cpuacct (v1 only: v2 keeps cpu.stat in
# every cgroup) is the CPU account, its own hierarchy where the host mounts it apart from cpu
CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")


class CgroupsUnavailable(Exception):
    """This worker cannot create the cgroups it needs; the message says why."""


def cgroup_enforcer(
    name: str, proc: Path = Path("/proc/self"), *, ready: int = READY_CGROUPS
) -> CgroupEnforcer:
    """The enforcer for this host, with the worker's parent cgroups made; ``name`` must be
    unique among the workers of this host (a crashed worker's leftovers of that name go, the
    cgroups its pool made ahead included); ``ready``: how many its pool keeps made ahead."""
    mounts = cgroup_mounts((proc / "mountinfo").read_text())
    membership = cgroup_membership((proc / "cgroup").read_text())
    unified = next((mount for mount in mounts if mount.version == 2), None)
    if unified is not None and "" in membership:
        own = cgroup_directory(unified, membership[""])
        if own.name.startswith("herder-") and own.name.endswith("-worker"):
            own = own.parent  # an earlier enforcer of this process stepped aside into a leaf
        if "memory" in read_words(unified.point / "cgroup.controllers"):
            return _v2_enforcer(unified, own, name, ready)
    legacy = {
        controller: mount
        for controller in CONTROLLERS
        for mount in mounts
        if mount.version == 1 and controller in mount.controllers and controller in membership
    }
    if "memory" not in legacy:
        raise CgroupsUnavailable("no cgroup memory controller is mounted")
    parents = {
        controller: cgroup_directory(mount, membership[controller]) / f"herder-{name}"
        for controller, mount in legacy.items()
    }
    try:
        for parent in parents.values():
            clear(parent)
            parent.mkdir(exist_ok=True)
    except OSError as error:
        raise CgroupsUnavailable(f"cannot create cgroups: {error.strerror}") from error
    return CgroupEnforcer(1, parents, ready=ready)


def cpu_accounts(name: str, proc: Path = Path("/proc/self")) -> Path:
    """Isolation none's parent of the keepers' CPU accounts (``plain_launcher.py``), made
    as ``name`` under the worker's own cgroup: v1's cpuacct hierarchy where mounted, else
    v2's (a crashed worker's of that name goes). Nothing is limited there, so no controller
    is enabled. Raises ``CgroupsUnavailable``."""
    mounts = cgroup_mounts((proc / "mountinfo").read_text())
    membership = cgroup_membership((proc / "cgroup").read_text())
    cpuacct = next((mount for mount in mounts if "cpuacct" in mount.controllers), None)
    unified = next((mount for mount in mounts if mount.version == 2), None)
    if cpuacct is not None and "cpuacct" in membership:
        own = cgroup_directory(cpuacct, membership["cpuacct"])
    elif unified is not None and "" in membership:
        own = cgroup_directory(unified, membership[""])
    else:
        raise CgroupsUnavailable("neither cgroup v1's cpuacct nor cgroup v2 is mounted")
    parent = own / name
    try:
        clear(parent)
        parent.mkdir(exist_ok=True)
    except OSError as error:
        raise CgroupsUnavailable(f"cannot create cgroups: {error.strerror}") from error
    return parent


def _v2_enforcer(mount: CgroupMount, own: Path, name: str, ready: int) -> CgroupEnforcer:
    """Under the top of the hierarchy when we may (a root worker on a systemd host), else
    under the worker's own cgroup (a container, a delegated systemd unit)."""
    problems = []
    for base in dict.fromkeys([mount.point, own]):
        try:
            parent, controllers = _v2_parent(base, name, step_aside=base == own)
        except OSError as error:
            problems.append(f"{base}: {error.strerror}")
            continue
        return CgroupEnforcer(2, dict.fromkeys(controllers, parent), ready=ready)
    raise CgroupsUnavailable(f"cannot create cgroups ({'; '.join(problems)})")


def _v2_parent(base: Path, name: str, *, step_aside: bool) -> tuple[Path, list[str]]:
    available = read_words(base / "cgroup.controllers")
    controllers = [controller for controller in CONTROLLERS if controller in available]
    if "memory" not in controllers:
        raise OSError(errno.ENOTSUP, "no memory controller delegated here")
    try:
        enable(base, controllers)
    except OSError as error:
        # v2 lets only leaves hold processes: a worker alone in its cgroup moves into a leaf
        # of it, which frees the cgroup to hold the attempts' too. Others are not ours to move.
        if error.errno != errno.EBUSY or not step_aside or member_pids(base) != [os.getpid()]:
            raise
        leaf = base / f"herder-{name}-worker"
        leaf.mkdir(exist_ok=True)
        write(leaf / "cgroup.procs", str(os.getpid()))
        enable(base, controllers)
    parent = base / f"herder-{name}"
    clear(parent)
    parent.mkdir(exist_ok=True)
    enable(parent, controllers)
    return parent, controllers


class CgroupEnforcer:
    """Gives each attempt a cgroup of its own under the worker's parent(s): one of its pool's,
    made ahead, else made then.

    What this host's files offer is looked at once, here, not for every attempt.
    """

    def __init__(
        self,
        version: int,
        parents: dict[str, Path],
        kernel: str | None = None,
        *,
        ready: int = 0,
    ) -> None:
        """``kernel``: the release (``uname -r``) to go by, when not this host's; ``ready``:
        how many cgroups a pool keeps made ahead (0: no pool, each made when asked)."""
        self.version = version
        self.parents = parents  # controller -> the worker's parent cgroup for it
        self.description = f"cgroup v{version} ({', '.join(parents)}) under " + ", ".join(
            str(parent) for parent in dict.fromkeys(parents.values())
        )
        if ready > 0:
            self.description += f"; {ready} made ahead"
        self._optional = frozenset(
            file for file in OPTIONAL_FILES if (parents["memory"] / file).exists()
        )
        # v2 checks a move against the opener of cgroup.procs since 5.16; before, only root
        # may write the descriptor, so the child enters before it drops root.
        self._v2_enters_as_root = version == 2 and not _opener_credentials_checked(
            kernel if kernel is not None else os.uname().release
        )
        self._pool = CgroupPool(parents, ready) if ready > 0 else None

    def confine(
        self, name: str, limits: Limits, *, gid: int | None, by_launcher: bool = False
    ) -> Confinement:
        made_ahead = self._pool.take() if self._pool is not None else None
        directories = made_ahead or {
            controller: parent / name for controller, parent in self.parents.items()
        }
        retire = self._pool.retire if self._pool is not None else None
        cgroup = AttemptCgroup(self.version, directories, retire)
        try:
            if made_ahead is None:
                for directory in cgroup.unique_directories:
                    make(directory)
            for path, value in limit_settings(self.version, directories, limits, self._optional):
                write(path, value)
            if by_launcher:
                pass  # the launcher enters as root: nothing to open or hand over
            elif self.version == 2:
                cgroup.open_entrance(before_switch=self._v2_enters_as_root)
            elif gid is not None:
                cgroup.admit_group(gid)
        except OSError:
            cgroup.remove()
            raise
        return cgroup

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        for parent in dict.fromkeys(self.parents.values()):
            remove(parent)


def _opener_credentials_checked(release: str) -> bool:
    """Whether this kernel (``uname -r``) checks a write to ``cgroup.procs`` against the
    credentials of whoever opened the file: mainline since 5.16. Older kernels with the fix
    backported are taken to lack it, which is slower, never wrong."""
    numbers = re.match(r"(\d+)\.(\d+)", release)
    return numbers is not None and (int(numbers[1]), int(numbers[2])) >= (5, 16)
