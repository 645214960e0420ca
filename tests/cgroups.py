"""An attempt's cgroups as its job sees them, and waiting for the thread of a pool of cgroups
to catch up (it makes them ahead, and removes a used one a moment after its attempt ends)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from herder.worker.cgroups import CgroupEnforcer
from tests.waiting import eventually

CATCH_UP_SECONDS = 5.0


def attempt_cgroups(enforcer: CgroupEnforcer, proc_cgroup: str) -> dict[str, Path]:
    """controller ("" for v2) -> the directory of the attempt's cgroup, from the text of its
    /proc/<pid>/cgroup: the lines whose cgroup is a child of the enforcer's parent."""
    found = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            parent = enforcer.parents.get(controller or "memory")
            if parent is not None and PurePosixPath(path).parent.name == parent.name:
                found[controller] = parent / PurePosixPath(path).name
    return found


def caught_up(check: Callable[[], bool]) -> bool:
    """Whether ``check`` comes true once the pool's thread has had time to act."""
    return eventually(check, CATCH_UP_SECONDS)


def gone_soon(directories: list[Path]) -> bool:
    return caught_up(lambda: not any(directory.exists() for directory in directories))


def children(parent: Path) -> list[str]:
    return sorted(path.name for path in parent.iterdir() if path.is_dir())
