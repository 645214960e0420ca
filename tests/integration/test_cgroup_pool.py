"""Cgroups made ahead, on this host's real hierarchies (v1: one directory in each): each
attempt gets one of its own, used once, removed after, and nothing is left when the worker
stops. The limits themselves are held with the pool in tests/integration/test_limits.py."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.worker.cgroupfs import member_pids
from herder.worker.cgroups import CgroupEnforcer
from herder.worker.limits import MIB, Limits
from herder.worker.sandbox import limit_enforcer
from tests.cgroups import caught_up, children, gone_soon

LIMITS = Limits(64 * MIB, 0.5, 50)


@pytest.fixture
def enforcer() -> Iterator[CgroupEnforcer]:
    chosen = limit_enforcer(f"test-pool-{os.getpid()}", ready=2)
    if not isinstance(chosen, CgroupEnforcer):
        chosen.close()
        pytest.skip(f"no cgroups here: {chosen.description}")
    yield chosen
    chosen.close()
    assert not any(parent.exists() for parent in chosen.parents.values())


def parents(enforcer: CgroupEnforcer) -> list[Path]:
    return list(dict.fromkeys(enforcer.parents.values()))


def test_each_attempt_gets_a_cgroup_made_ahead_used_once_and_removed_after(
    enforcer: CgroupEnforcer,
) -> None:
    used: list[Path] = []

    def refilled() -> bool:
        ready = [name for parent in parents(enforcer) for name in children(parent)]
        return len(ready) == 2 * len(parents(enforcer)) and not set(ready) & {d.name for d in used}

    for number in range(5):
        assert caught_up(refilled)  # else the attempt would make its own: a burst's way
        confinement = enforcer.confine(f"att_{number}", LIMITS, gid=None, by_launcher=True)
        directories = [entrance.parent for entrance in confinement.entrances()]
        assert confinement.collect().left_running == 0
        assert confinement.try_remove()  # handed to the pool's thread: nothing waits here
        used += directories
    assert len(set(used)) == len(used)
    assert all(directory.name.startswith("ready-") for directory in used)
    assert gone_soon(used)


def test_what_is_left_inside_a_used_cgroup_is_killed_and_the_cgroup_removed(
    enforcer: CgroupEnforcer,
) -> None:
    confinement = enforcer.confine("att_left", LIMITS, gid=None, by_launcher=True)
    straggler = subprocess.Popen(["sleep", "30"])
    try:
        for entrance in confinement.entrances():
            entrance.write_text(str(straggler.pid))
        directories = [entrance.parent for entrance in confinement.entrances()]
        assert member_pids(directories[0]) == [straggler.pid]
        assert confinement.try_remove()
        assert straggler.wait(timeout=5) == -9
        assert gone_soon(directories)
    finally:
        straggler.kill()
        straggler.wait()


def test_the_limits_are_written_into_the_cgroup_made_ahead(enforcer: CgroupEnforcer) -> None:
    confinement = enforcer.confine("att_limits", LIMITS, gid=None, by_launcher=True)
    try:
        memory = next(
            entrance.parent
            for entrance in confinement.entrances()
            if entrance.parent.parent == enforcer.parents["memory"]
        )
        if enforcer.version == 1:
            assert (memory / "memory.limit_in_bytes").read_text() == f"{64 * MIB}\n"
        else:
            assert (memory / "memory.max").read_text() == f"{64 * MIB}\n"
    finally:
        confinement.try_remove()
