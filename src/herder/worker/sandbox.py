"""Where attempts run and what they see: the workspace root and the clean environment."""

from __future__ import annotations

import hashlib
import stat
import tempfile
from pathlib import Path

from herder.domain.jobs import Runtime
from herder.domain.models import Assignment

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
    }
