"""What an attempt sees: its environment, its file system, its limits.

A root worker starts every attempt through the sandbox launcher's server (``sandbox.c``, built
by ``launcher.py``, asked by ``launch_server.py``); this module decides what it is told: once,
what every attempt sees alike (``skeleton_options``), and for each attempt what is its own
(``Sandbox``: its uid, disk, network, GPUs, limits):

    namespaces   mount, PID, IPC, UTS, network (an empty one, or the attempt's outbound one)
    /            a read-only tmpfs holding only what is listed below
    /usr /etc …  the host's system directories, read-only, nosuid, nodev
    /workspace   the attempt's workspace: its cwd and HOME     ┐ one tmpfs of the job's
    /tmp /var/tmp /dev/shm  private                            │ disk request (disk.py)
    /checkpoint  saved for the run's next attempt              ┘ (checkpoints.py)
    /dev         null, zero, full, random, urandom, tty; GPUs only when given some
    /proc /sys   fresh: only the attempt's own processes
    /run         empty (no host sockets)
    uid          the attempt's own, no groups, no_new_privs, the seccomp filter

A worker that is not root cannot build any of that; it runs attempts as its own user, and only
when started with ``--isolation none`` (a trusted fleet's choice, never the default).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from herder.domain.images import ImageConfig, image_environment
from herder.domain.jobs import Runtime
from herder.domain.models import AssignedTask, Assignment
from herder.worker.cgroup_pool import READY_CGROUPS
from herder.worker.cgroups import CgroupsUnavailable, cgroup_enforcer
from herder.worker.disk import CHECKPOINT, SHM, TMP, VAR_TMP, WORK, AttemptDisk, detached_bind
from herder.worker.launch_server import LaunchServer, Reaped
from herder.worker.limits import Confinement, Enforcer, RlimitEnforcer
from herder.worker.task_files import INPUTS, OUTPUT

log = logging.getLogger("herder.worker")

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_WORKSPACE = Path("/workspace")
SANDBOX_CHECKPOINT = Path("/checkpoint")
SYSTEM_DIRECTORIES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_SHARED_DEVICES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
HOST_DEVICES = Path("/dev")


def system_view(paths: tuple[str, ...]) -> tuple[str, ...]:
    """Launcher options showing ``paths`` read-only as the host has them: a directory is
    bound, a symlink (``/bin -> usr/bin`` on merged-/usr hosts) recreated, a missing one left
    out. Read once at worker start."""
    options: list[str] = []
    for path in paths:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    return tuple(options)


DEVICE_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"))  # fmt: skip
# what every attempt's disk shows, and where (disk.py makes the directories)
DISK_VIEWS = (
    (WORK, str(SANDBOX_WORKSPACE)),
    (TMP, "/tmp"),
    (VAR_TMP, "/var/tmp"),
    (SHM, "/dev/shm"),
    (CHECKPOINT, str(SANDBOX_CHECKPOINT)),
)
MOUNT_POINTS = ("/proc", "/sys", "/run", "/var/run", *(target for _, target in DISK_VIEWS))
# what an image's root must hold for the launcher to mount over (images.py makes them)
IMAGE_MOUNT_POINTS = ("/proc", "/sys", "/dev", *(t for _, t in DISK_VIEWS if t != "/dev/shm"))
RESOLV_CONF = "/etc/resolv.conf"
FIRST_PASSED = 3  # the launcher's descriptor of the first one passed with a start
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def skeleton_options(root: Path, view: tuple[str, ...]) -> list[str]:
    """What every attempt sees alike, built once by the launcher on ``root`` (an empty
    root-owned directory): ``view`` (``system_view``), the devices, empty mount points."""
    options = ["--root", str(root), *view]
    for name in DEVICES:
        options += ["--device", f"/dev/{name}"]
    for link, target in DEVICE_LINKS:
        options += ["--symlink", target, f"/dev/{link}"]
    for directory in MOUNT_POINTS:
        options += ["--dir", directory]
    return options


def _gpu_options(gpu_indices: tuple[int, ...]) -> list[str]:
    """Only the GPUs it was given: the others' device files are not there."""
    if not gpu_indices:
        return []
    options: list[str] = []
    for name in [f"nvidia{index}" for index in gpu_indices] + list(GPU_SHARED_DEVICES):
        try:
            device = os.stat(HOST_DEVICES / name)
        except FileNotFoundError:
            continue
        numbers = (device.st_mode & 0o777, os.major(device.st_rdev), os.minor(device.st_rdev))
        options += ["--device", f"/dev/{name}", *map(str, numbers)]
    return options


@dataclass(frozen=True)
class Sandbox:
    """What the launcher adds for one attempt to what all attempts see alike."""

    launcher: LaunchServer
    uid: int
    disk: AttemptDisk
    hostname: str = "herder"
    net_namespace: Path | None = None  # None: no network at all (only its own loopback)
    resolv_conf: Path | None = None
    gpu_indices: tuple[int, ...] = field(default=())
    image_root: Path | None = None  # runtime image: its root, else the host's system view
    working_dir: Path = SANDBOX_WORKSPACE

    async def start(
        self,
        argv: list[str],
        confinement: Confinement | None,
        env: dict[str, str],
        stdout: int,
        stderr: int,
    ) -> tuple[int, int]:
        """Start ``argv`` in the sandbox, with ``env`` and those pipes: its pid and a pidfd.
        It is set up, enters its ``confinement`` (or, on cgroup v2, is born in it), becomes
        the attempt's uid and execs."""
        passed = [self.disk.fd]
        options = [
            "--uid", str(self.uid), "--gid", str(self.uid), "--hostname", self.hostname,
            "--seccomp", "1", "--chdir", str(self.working_dir), "--disk", str(FIRST_PASSED),
        ]  # fmt: skip
        for directory, target in DISK_VIEWS:
            options += ["--disk-bind", directory, target]

        def pass_on(fd: int, *option: str) -> None:
            options.extend([option[0], str(FIRST_PASSED + len(passed)), *option[1:]])
            passed.append(fd)

        try:
            if self.image_root is not None:
                pass_on(detached_bind(self.image_root), "--root-tree")
            if self.net_namespace is not None:
                pass_on(os.open(self.net_namespace, os.O_RDONLY | os.O_CLOEXEC), "--net-namespace")
            if self.resolv_conf is not None:
                pass_on(detached_bind(self.resolv_conf), "--mount", RESOLV_CONF)
            if confinement is not None:
                birthplace = confinement.birthplace()
                if birthplace is not None:  # v2: born in it (clone3), nothing to move in
                    pass_on(os.open(birthplace, DIRECTORY_FLAGS), "--cgroup-into")
                else:
                    for entrance in confinement.entrances():
                        pass_on(os.open(entrance, os.O_WRONLY | os.O_CLOEXEC), "--cgroup")
                options += confinement.launcher_options()
            options += _gpu_options(self.gpu_indices)
            options += ["--", *argv]
            return await self.launcher.start(options, env, stdout, stderr, tuple(passed))
        finally:
            for fd in passed[1:]:  # the launcher has its own copies; the disk is the host's
                os.close(fd)

    async def reap(self, pid: int) -> Reaped:
        return await self.launcher.reap(pid)

    def reap_later(self, pid: int) -> None:
        self.launcher.reap_later(pid)


def attempt_environment(
    assignment: Assignment,
    home: Path,
    tmp: Path,
    checkpoint: tuple[Path, Path] | None = None,
    image: ImageConfig | None = None,
) -> dict[str, str]:
    """Nothing inherited from the worker: a fixed base (under an ``image``'s Env), the
    job's env, its secrets (which a
    run's env override cannot replace), then Herder's own (``home`` is the workspace as the
    job sees it, where ``task_files``' files are; ``checkpoint`` its checkpoint directory and
    the file it creates to ask for a save, as it sees them)."""
    base = {
        "PATH": SAFE_PATH,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
    }
    if assignment.spec.runtime is Runtime.PYTHON:
        base["PYTHONUNBUFFERED"] = "1"  # output reaches the logs as it is printed
    if image is not None:
        base = image_environment(image, base)
    return {
        **base,
        **assignment.spec.env,
        **assignment.secret_env,
        "HERDER_RUN_ID": assignment.run_id,
        "HERDER_ATTEMPT": str(assignment.attempt),
        "HERDER_ATTEMPT_ID": assignment.attempt_id,
        "HERDER_IDEMPOTENCY_KEY": assignment.idempotency_key or assignment.run_id,
        # Empty when no GPU was given: CUDA then sees none, instead of every GPU of the host.
        # Indices count in nvidia-smi's order (PCI bus), which CUDA follows only when told.
        "CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in assignment.gpu_indices),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "HERDER_RANK": str(assignment.rank),
        "HERDER_WORLD_SIZE": str(assignment.world_size),
        "HERDER_PEERS": ",".join(assignment.peers),
        "HERDER_OUTPUT": str(home / OUTPUT),
        **_task_environment(assignment.task, home),
        **_checkpoint_environment(checkpoint),
    }


def _checkpoint_environment(checkpoint: tuple[Path, Path] | None) -> dict[str, str]:
    if checkpoint is None:
        return {}
    directory, request = checkpoint
    return {"HERDER_CHECKPOINT_DIR": str(directory), "HERDER_CHECKPOINT_REQUEST": str(request)}


def _task_environment(task: AssignedTask | None, home: Path) -> dict[str, str]:
    """Which workflow task it is; nothing for a run that is not one."""
    if task is None:
        return {}
    env = {
        "HERDER_WORKFLOW_RUN_ID": task.workflow_run_id,
        "HERDER_TASK": task.task_name,
        "HERDER_INPUTS": str(home / INPUTS),
    }
    if task.map_index >= 0:
        env["HERDER_MAP_INDEX"] = str(task.map_index)
        env["HERDER_MAP_ITEM"] = json.dumps(task.map_item, ensure_ascii=False)
    return env


def limit_enforcer(name: str, *, ready: int = READY_CGROUPS) -> Enforcer:
    """Per-attempt cgroups when this host lets the worker make them (``ready`` of them made
    ahead), else rlimits; chosen once, at start, and logged, so an operator knows which
    limits hold on this host."""
    enforcer: Enforcer
    try:
        enforcer = cgroup_enforcer(name, ready=ready)
    except (CgroupsUnavailable, OSError) as error:
        enforcer = RlimitEnforcer(str(error) or type(error).__name__)
    log.info("resource limits: %s", enforcer.description)
    return enforcer
