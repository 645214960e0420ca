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
them against the next attempt's limit and peak.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import select
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
EMPTY_POLL_SECONDS = 0.005  # when the kernel has yet to see the last one leave
READ_BYTES = 64 * 1024  # enough for any file read here (cgroup.procs of one attempt)
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
    """Creates one cgroup per attempt under the worker's parent(s).

    What this host's files offer is looked at once, here, not for every attempt.
    """

    def __init__(self, version: int, parents: dict[str, Path], kernel: str | None = None) -> None:
        """``kernel``: the release (``uname -r``) to go by, when not this host's."""
        self.version = version
        self.parents = parents  # controller -> the worker's parent cgroup for it
        self.description = f"cgroup v{version} ({', '.join(parents)}) under " + ", ".join(
            str(parent) for parent in dict.fromkeys(parents.values())
        )
        self._optional = frozenset(
            file for file in OPTIONAL_FILES if (parents["memory"] / file).exists()
        )
        # v2 checks a move against the opener of cgroup.procs since 5.16; before, only root
        # may write the descriptor, so the child enters before it drops root.
        self._v2_enters_as_root = version == 2 and not _opener_credentials_checked(
            kernel if kernel is not None else os.uname().release
        )

    def confine(
        self, name: str, limits: Limits, *, gid: int | None, by_launcher: bool = False
    ) -> Confinement:
        directories = {controller: parent / name for controller, parent in self.parents.items()}
        cgroup = AttemptCgroup(self.version, directories)
        try:
            for directory in cgroup.unique_directories:
                _make(directory)
            for path, value in limit_settings(self.version, directories, limits, self._optional):
                _write(path, value)
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
        for parent in dict.fromkeys(self.parents.values()):
            _remove(parent)


class AttemptCgroup:
    """One attempt's cgroup (one directory per hierarchy on v1).

    The child enters it itself, as the last step before the job (``wrap``): on v1 by writing
    0 to each ``tasks`` file, which the attempt's group may write (``admit_group``); on v2
    through ``cgroup.procs`` opened here and handed to the child as its stdin
    (``open_entrance``), which needs no permission on the files (the kernel checks whoever
    opened it). The uid switch and namespaces are set up before that, outside, so the
    attempt's CPU quota is not spent on them.
    """

    def __init__(self, version: int, directories: dict[str, Path]) -> None:
        self._version = version
        self._directories = directories
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

    def launcher_options(self) -> list[str]:
        entrance = "cgroup.procs" if self._version == 2 else "tasks"
        options: list[str] = []
        for directory in self.unique_directories:
            options += ["--cgroup", str(directory / entrance)]
        return options

    def collect(self) -> Verdict:
        memory = self._directories["memory"]
        if self._version == 2:
            events, peak = memory / "memory.events", memory / "memory.peak"
        else:
            events, peak = memory / "memory.oom_control", memory / "memory.max_usage_in_bytes"
        verdict = Verdict(_read_key(events, "oom_kill"), _read_number(peak))
        for directory in self.unique_directories:
            _close_all(_kill_members(directory))
        return verdict

    def remove(self) -> None:
        if self.stdin is not None:
            os.close(self.stdin)
            self.stdin = None
        for directory in self.unique_directories:
            _remove(directory)


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
        else [
            ("cpu.cfs_period_us", str(CPU_PERIOD_MICROSECONDS)),
            ("cpu.cfs_quota_us", str(quota)),
        ],
        "pids": [("pids.max", str(limits.max_processes))],
    }
    return [
        (directories[controller] / file, value)
        for controller, files in wanted.items()
        if controller in directories
        for file, value in files
        if file not in OPTIONAL_FILES or file in optional
    ]


def _opener_credentials_checked(release: str) -> bool:
    """Whether this kernel (``uname -r``) checks a write to ``cgroup.procs`` against the
    credentials of whoever opened the file: mainline since 5.16. Older kernels with the fix
    backported are taken to lack it, which is slower, never wrong."""
    numbers = re.match(r"(\d+)\.(\d+)", release)
    return numbers is not None and (int(numbers[1]), int(numbers[2])) >= (5, 16)


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


def _make(cgroup: Path) -> None:
    try:
        cgroup.mkdir()
    except FileExistsError:  # left by a worker that crashed: never reuse it
        _remove(cgroup)
        cgroup.mkdir()


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, READ_BYTES).decode()
    finally:
        os.close(fd)


def _read_words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _read_number(path: Path) -> int | None:
    try:
        return int(_read(path).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_key(path: Path, key: str) -> int | None:
    """The value of ``key`` in a flat-keyed file such as memory.events."""
    try:
        lines = _read(path).splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


def _members(cgroup: Path) -> list[int]:
    try:
        return [int(pid) for pid in _read(cgroup / "cgroup.procs").split()]
    except FileNotFoundError:
        return []


def _kill_members(cgroup: Path) -> list[int]:
    """SIGKILL every process in ``cgroup``; return pidfds of those it was sent to, to wait on.

    Each pid is pinned by a pidfd, then checked to be a member still: a pid in the cgroup
    after that is a process of the attempt (only they are born there), never a reused one.
    v2's ``cgroup.kill`` also takes what they fork meanwhile.
    """
    pinned = {}
    for pid in _members(cgroup):
        with contextlib.suppress(ProcessLookupError):
            pinned[pid] = os.pidfd_open(pid)
    if not pinned:
        return []
    members = set(_members(cgroup))
    try:
        if (cgroup / "cgroup.kill").exists():
            _write(cgroup / "cgroup.kill", "1")
        else:
            for pid in members & set(pinned):
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pinned[pid], signal.SIGKILL)
    except BaseException:
        _close_all(list(pinned.values()))
        raise
    _close_all([pidfd for pid, pidfd in pinned.items() if pid not in members])
    return [pidfd for pid, pidfd in pinned.items() if pid in members]


def _wait_for_exits(pidfds: list[int], deadline: float) -> None:
    """Until each process has exited (its pidfd turns readable: it has left its cgroups), or
    ``deadline``; closes the pidfds."""
    waiting = select.poll()
    for pidfd in pidfds:
        waiting.register(pidfd, select.POLLIN)
    left = set(pidfds)
    try:
        while left and (seconds := deadline - time.monotonic()) > 0:
            for pidfd, _ in waiting.poll(seconds * 1000):
                waiting.unregister(pidfd)
                left.discard(pidfd)
    finally:
        _close_all(pidfds)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _remove(cgroup: Path) -> None:
    """Remove ``cgroup``: at once when it is empty, as it almost always is (the attempt's
    processes were killed at its end); else kill what is inside, child cgroups first, and wait
    for it to leave."""
    deadline = time.monotonic() + EMPTY_WAIT_SECONDS
    while True:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() >= deadline:
                log.warning("cannot remove cgroup %s yet: %s", cgroup, error.strerror)
                return
        _clear(cgroup)
        pidfds = _kill_members(cgroup)
        if pidfds:
            _wait_for_exits(pidfds, deadline)
        else:  # nothing to wait on: the kernel has yet to see the last one leave
            time.sleep(EMPTY_POLL_SECONDS)


def _clear(parent: Path) -> None:
    """Remove every child cgroup of ``parent`` (the parent stays)."""
    try:
        with os.scandir(parent) as entries:
            children = [Path(entry) for entry in entries if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return
    for child in children:
        _remove(child)
