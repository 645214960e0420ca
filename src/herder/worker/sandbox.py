"""Where attempts run and what they see: the workspace root, the clean environment and the
resource limits."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

from herder.domain.jobs import Runtime
from herder.domain.models import Assignment
from herder.worker.cgroups import CgroupsUnavailable, cgroup_enforcer
from herder.worker.limits import Enforcer, RlimitEnforcer

log = logging.getLogger("herder.worker")

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _traversable_by_others(path: Path) -> bool:
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in [path, *path.parents])


def attempts_root(home: Path, *, isolated_uids: bool) -> Path:
    """``home/attempts``, unless an attempt's own uid could not reach it (a 0700 parent such
    as /root); then a directory under the system temp dir, named after the home."""
    home.mkdir(parents=True, exist_ok=True)
    root = home / "attempts"
    if isolated_uids and not _traversable_by_others(home):
        digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]
        root = Path(tempfile.gettempdir()) / f"herder-attempts-{digest}"
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o711)  # others may enter their own 0700 workspace, never list the rest
    return root


def attempt_environment(assignment: Assignment, workspace: Path) -> dict[str, str]:
    """Nothing inherited from the worker: a fixed base, the job's env, then Herder's own."""
    base = {
        "PATH": SAFE_PATH,
        "HOME": str(workspace),
        "TMPDIR": str(workspace),
        "LANG": "C.UTF-8",
    }
    if assignment.spec.runtime is Runtime.PYTHON:
        base["PYTHONUNBUFFERED"] = "1"  # output reaches the logs as it is printed
    return {
        **base,
        **assignment.spec.env,
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
    }


def limit_enforcer(name: str) -> Enforcer:
    """Per-attempt cgroups when this host lets the worker make them, else rlimits; chosen
    once, at start, and logged, so an operator knows which limits hold on this host."""
    enforcer: Enforcer
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        # Popen would switch the uid itself, before anything runs in the child, and some
        # hosts' cgroups (v2 before Linux 5.16) can only be entered before that
        enforcer = RlimitEnforcer("setpriv is not installed")
    else:
        try:
            enforcer = cgroup_enforcer(name)
        except (CgroupsUnavailable, OSError) as error:
            enforcer = RlimitEnforcer(str(error) or type(error).__name__)
    log.info("resource limits: %s", enforcer.description)
    return enforcer
