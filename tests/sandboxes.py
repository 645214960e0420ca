"""Real attempt sandboxes for tests: the launcher built once per session, a disk per attempt."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import pytest

from herder.worker.agent import WorkerConfig
from herder.worker.disk import MIB, close_disk, open_disk
from herder.worker.launch_server import LaunchServer
from herder.worker.launcher import sandbox_launcher
from herder.worker.sandbox import SYSTEM_DIRECTORIES, Sandbox, skeleton_options, system_view
from herder.worker.statedir import secure_directory
from herder.worker.uids import RANGE_TRIES, kill_processes_of_uid

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can sandbox an attempt")
# Every uid a root worker on this host may claim with the default --run-uid-base. The system
# tests run such workers beside these tests, and a worker starting kills every process of its
# range (``host._report_leftovers``): a test's fixed uid in there is killed by SIGKILL at random.
WORKER_UIDS = range(
    WorkerConfig.run_uid_base, WorkerConfig.run_uid_base + RANGE_TRIES * WorkerConfig.run_uid_count
)


@cache
def _launcher(directory: Path) -> LaunchServer:
    binary = sandbox_launcher(secure_directory(directory / "bin", 0o755))
    root = secure_directory(directory / "root", 0o755)
    return LaunchServer.sandboxing(binary, skeleton_options(root, system_view(SYSTEM_DIRECTORIES)))


def launcher(tmp_path_factory: pytest.TempPathFactory) -> LaunchServer:
    """The launcher's server, for the whole session (it ends when the session's process does)."""
    return _launcher(tmp_path_factory.getbasetemp() / "sandbox")


@contextmanager
def attempt_sandbox(
    launcher_server: LaunchServer,
    uid: int,
    *,
    disk_mb: int = 64,
    net_namespace: Path | None = None,
    gpu_indices: tuple[int, ...] = (),
) -> Iterator[Sandbox]:
    """A sandbox for one attempt; afterwards nothing of ``uid`` runs and its disk is gone."""
    assert uid not in WORKER_UIDS, f"uid {uid} is one a worker on this host may kill"
    disk = open_disk(disk_mb * MIB, uid)
    try:
        yield Sandbox(
            launcher_server,
            uid,
            disk,
            net_namespace=net_namespace,
            gpu_indices=gpu_indices,
        )
    finally:
        kill_processes_of_uid(uid)
        close_disk(disk)
