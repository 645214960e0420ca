"""Per-attempt cgroups: the kernel enforces an attempt's memory, CPU and process count.

    <worker's parent>/herder-<worker>/<attempt>   memory, cpu and pids limits; removed after

cgroup v2 is preferred. Hosts that still mount the controllers as cgroup v1 (a "hybrid" host,
many containers and VMs) get the same limits from the v1 files, one directory per controller,
under the worker's own cgroup so a container's limits still hold. v2 allows processes only in
leaves, so its parent goes at the top of the hierarchy when the worker may write there (a root
worker on a systemd host; in a container the top is the container's own cgroup), else under
the worker's own cgroup, once the worker has stepped aside into a leaf (``_v2_parent``).

The child enters its cgroup before it runs the job: the command line starts with a shell
that writes its own pid into ``cgroup.procs``, then execs the rest (``wrap``). Every process
it starts is born inside, so nothing is charged elsewhere and nothing escapes the final kill.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from herder.worker.limits import Confinement, Limits, Verdict

log = logging.getLogger("herder.worker")

CONTROLLERS = ("memory", "cpu", "pids")  # memory is required, the others are used if present
CPU_PERIOD_MICROSECONDS = 100_000  # the kernel's default CFS period
MIN_CPU_QUOTA_MICROSECONDS = 1_000  # the kernel refuses less
EMPTY_WAIT_SECONDS = 2.0  # how long removal waits for killed processes to leave
EMPTY_POLL_SECONDS = 0.005
SHELL = "/bin/sh"
# Runs as root in the child, before namespaces and the uid switch: enter, then become the job.
JOIN_SCRIPT = (
    'for file; do shift; [ "$file" = -- ] && break; '
    'echo $$ > "$file" || { echo "herder: cannot enter the cgroup $file" >&2; exit 125; }; '
    'done; exec "$@"'
)


class CgroupsUnavailable(Exception):
    """This worker cannot create the cgroups it needs; the message says why."""


@dataclass(frozen=True)
class CgroupMount:
    point: Path
    root: str  # the cgroup mounted at ``point`` (not "/" in some containers)
    version: int
    controllers: frozenset[str]  # v1: what this hierarchy holds; v2: empty (see the files)


def cgroup_enforcer(name: str, proc: Path = Path("/proc/self")) -> CgroupEnforcer:
    """The enforcer for this host, with the worker's parent cgroups made; ``name`` must be
    unique among the workers of this host (a crashed worker's leftovers of that name go)."""
    mounts = cgroup_mounts((proc / "mountinfo").read_text())
    membership = cgroup_membership((proc / "cgroup").read_text())
    unified = next((mount for mount in mounts if mount.version == 2), None)
    if unified is not None and "" in membership:
        own = _directory(unified, membership[""])
        if own.name.startswith("herder-") and own.name.endswith("-worker"):
            own = own.parent  # an earlier enforcer of this process stepped aside into a leaf
        if "memory" in _read_words(unified.point / "cgroup.controllers"):
            return _v2_enforcer(unified, own, name)
    legacy = {
        controller: mount
        for controller in CONTROLLERS
        for mount in mounts
        if mount.version == 1 and controller in mount.controllers and controller in membership
    }
    if "memory" not in legacy:
        raise CgroupsUnavailable("no cgroup memory controller is mounted")
    parents = {
        controller: _directory(mount, membership[controller]) / f"herder-{name}"
        for controller, mount in legacy.items()
    }
    try:
        for parent in parents.values():
            _clear(parent)
            parent.mkdir(exist_ok=True)
    except OSError as error:
        raise CgroupsUnavailable(f"cannot create cgroups: {error.strerror}") from error
    return CgroupEnforcer(1, parents)


def _v2_enforcer(mount: CgroupMount, own: Path, name: str) -> CgroupEnforcer:
    """Under the top of the hierarchy when we may (a root worker on a systemd host), else
    under the worker's own cgroup (a container, a delegated systemd unit)."""
    problems = []
    for base in dict.fromkeys([mount.point, own]):
        try:
            parent, controllers = _v2_parent(base, name, step_aside=base == own)
        except OSError as error:
            problems.append(f"{base}: {error.strerror}")
            continue
        return CgroupEnforcer(2, dict.fromkeys(controllers, parent))
    raise CgroupsUnavailable(f"cannot create cgroups ({'; '.join(problems)})")


def _v2_parent(base: Path, name: str, *, step_aside: bool) -> tuple[Path, list[str]]:
    available = _read_words(base / "cgroup.controllers")
    controllers = [controller for controller in CONTROLLERS if controller in available]
    if "memory" not in controllers:
        raise OSError(errno.ENOTSUP, "no memory controller delegated here")
    try:
        _enable(base, controllers)
    except OSError as error:
        # v2 lets only leaves hold processes: a worker alone in its cgroup moves into a leaf
        # of it, which frees the cgroup to hold the attempts' too. Others are not ours to move.
        if error.errno != errno.EBUSY or not step_aside or _members(base) != [os.getpid()]:
            raise
        leaf = base / f"herder-{name}-worker"
        leaf.mkdir(exist_ok=True)
        _write(leaf / "cgroup.procs", str(os.getpid()))
        _enable(base, controllers)
    parent = base / f"herder-{name}"
    _clear(parent)
    parent.mkdir(exist_ok=True)
    _enable(parent, controllers)
    return parent, controllers


class CgroupEnforcer:
    """Creates one cgroup per attempt under the worker's parent(s)."""

    def __init__(self, version: int, parents: dict[str, Path]) -> None:
        self.version = version
        self.parents = parents  # controller -> the worker's parent cgroup for it
        self.description = f"cgroup v{version} ({', '.join(parents)}) under " + ", ".join(
            str(parent) for parent in dict.fromkeys(parents.values())
        )

    def confine(self, name: str, limits: Limits, *, own_uid: bool) -> Confinement:
        directories = {controller: parent / name for controller, parent in self.parents.items()}
        cgroup = AttemptCgroup(self.version, directories)
        try:
            for directory in cgroup.unique_directories:
                _remove(directory)  # left by a worker that crashed: never reuse it
                directory.mkdir()
            for path, value in limit_settings(self.version, directories, limits):
                _write(path, value)
        except OSError:
            cgroup.remove()
            raise
        return cgroup

    def close(self) -> None:
        for parent in dict.fromkeys(self.parents.values()):
            _remove(parent)


class AttemptCgroup:
    def __init__(self, version: int, directories: dict[str, Path]) -> None:
        self._version = version
        self._directories = directories
        self.unique_directories = list(dict.fromkeys(directories.values()))

    def wrap(self, argv: list[str]) -> list[str]:
        procs = [str(directory / "cgroup.procs") for directory in self.unique_directories]
        return [SHELL, "-c", JOIN_SCRIPT, "herder-join", *procs, "--", *argv]

    def collect(self) -> Verdict:
        memory = self._directories["memory"]
        if self._version == 2:
            events, peak = memory / "memory.events", memory / "memory.peak"
        else:
            events, peak = memory / "memory.oom_control", memory / "memory.max_usage_in_bytes"
        verdict = Verdict(_read_key(events, "oom_kill"), _read_number(peak))
        for directory in self.unique_directories:
            _kill_members(directory)
        return verdict

    def remove(self) -> None:
        for directory in self.unique_directories:
            _remove(directory)


def limit_settings(
    version: int, directories: dict[str, Path], limits: Limits
) -> list[tuple[Path, str]]:
    """The files to write, in order (v1 refuses a memory+swap limit below the memory limit)."""
    memory = str(limits.memory_bytes)
    quota = max(MIN_CPU_QUOTA_MICROSECONDS, round(limits.cpu_cores * CPU_PERIOD_MICROSECONDS))
    wanted: dict[str, list[tuple[str, str]]] = {
        "memory": [
            ("memory.max", memory),
            ("memory.swap.max", "0"),  # optional: absent without swap accounting
            ("memory.oom.group", "1"),  # an OOM kill takes the whole attempt, not a piece
        ]
        if version == 2
        else [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)],
        "cpu": [("cpu.max", f"{quota} {CPU_PERIOD_MICROSECONDS}")]
        if version == 2
        else [
            ("cpu.cfs_period_us", str(CPU_PERIOD_MICROSECONDS)),
            ("cpu.cfs_quota_us", str(quota)),
        ],
        "pids": [("pids.max", str(limits.max_processes))],
    }
    optional = {"memory.swap.max", "memory.oom.group", "memory.memsw.limit_in_bytes"}
    return [
        (directories[controller] / file, value)
        for controller, files in wanted.items()
        if controller in directories
        for file, value in files
        if file not in optional or (directories[controller] / file).exists()
    ]


# --- the cgroup file system ---------------------------------------------------------------


def cgroup_mounts(mountinfo: str) -> list[CgroupMount]:
    """cgroup mounts from /proc/self/mountinfo: "id parent dev root point opts [tags] - type
    source super-opts", with spaces in paths written as octal escapes."""
    mounts = []
    for line in mountinfo.splitlines():
        fields, _, tail = line.partition(" - ")
        parts, tail_parts = fields.split(), tail.split()
        if len(parts) < 5 or len(tail_parts) < 3 or tail_parts[0] not in ("cgroup", "cgroup2"):
            continue
        version = 2 if tail_parts[0] == "cgroup2" else 1
        options = frozenset(tail_parts[2].split(",")) if version == 1 else frozenset()
        point = Path(_unescape(parts[4]))
        mounts.append(CgroupMount(point, _unescape(parts[3]), version, options))
    return mounts


def cgroup_membership(proc_cgroup: str) -> dict[str, str]:
    """controller -> this process's cgroup path, from /proc/self/cgroup; "" is cgroup v2."""
    membership = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            membership[controller] = path
    return membership


def _directory(mount: CgroupMount, path: str) -> Path:
    """Where ``path`` is seen under ``mount`` (whose own root may be a deeper cgroup)."""
    root = mount.root.rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return mount.point / path.lstrip("/")


def _unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda octal: chr(int(octal[1], 8)), text)


def _enable(cgroup: Path, controllers: list[str]) -> None:
    enabled = _read_words(cgroup / "cgroup.subtree_control")
    missing = [name for name in controllers if name not in enabled]
    if missing:
        _write(cgroup / "cgroup.subtree_control", " ".join(f"+{name}" for name in missing))


def _write(path: Path, value: str) -> None:
    with path.open("w") as file:
        file.write(value)


def _read_words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _read_number(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_key(path: Path, key: str) -> int | None:
    """The value of ``key`` in a flat-keyed file such as memory.events."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


def _members(cgroup: Path) -> list[int]:
    try:
        return [int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _kill_members(cgroup: Path) -> bool:
    """SIGKILL every process in ``cgroup``; say whether there were any.

    Each pid is pinned by a pidfd, then checked to be a member still: a pid in the cgroup
    after that is a process of the attempt (only they are born there), never a reused one.
    """
    if (cgroup / "cgroup.kill").exists():
        members = _members(cgroup)
        if members:
            _write(cgroup / "cgroup.kill", "1")
        return bool(members)
    pinned = {}
    for pid in _members(cgroup):
        with contextlib.suppress(ProcessLookupError):
            pinned[pid] = os.pidfd_open(pid)
    try:
        for pid in set(_members(cgroup)) & set(pinned):
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pinned[pid], signal.SIGKILL)
    finally:
        for pidfd in pinned.values():
            os.close(pidfd)
    return bool(pinned)


def _remove(cgroup: Path) -> None:
    """Kill what is inside, wait for it to leave, remove the directory (children first)."""
    if not cgroup.is_dir():
        return
    _clear(cgroup)
    deadline = time.monotonic() + EMPTY_WAIT_SECONDS
    while _kill_members(cgroup) and time.monotonic() < deadline:
        time.sleep(EMPTY_POLL_SECONDS)
    try:
        cgroup.rmdir()
    except FileNotFoundError:
        pass
    except OSError as error:
        log.warning("cannot remove cgroup %s yet: %s", cgroup, error.strerror)


def _clear(parent: Path) -> None:
    """Remove every child cgroup of ``parent`` (the parent stays)."""
    if parent.is_dir():
        for child in parent.iterdir():
            if child.is_dir():
                _remove(child)
