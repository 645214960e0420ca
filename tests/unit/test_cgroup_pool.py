"""The pool of cgroups made ahead, on plain directories standing in for a cgroup v2 parent (the
real hierarchies: tests/integration/test_cgroup_pool.py).

A plain directory is removed like an empty cgroup, and one holding a file stands for a cgroup
not empty yet.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from herder.worker import cgroup_pool
from herder.worker.cgroup_pool import CgroupPool
from herder.worker.cgroups import CgroupEnforcer
from herder.worker.limits import MIB, Limits
from tests.cgroups import caught_up, children

CONTROLLERS = ("memory", "cpu", "pids")


def settled(parent: Path, names: list[str]) -> bool:
    """Whether the parent comes to hold just ``names``, as the thread catches up."""
    return caught_up(lambda: children(parent) == names)


def take(pool: CgroupPool) -> dict[str, Path]:
    """A ready cgroup, once the thread has counted it ready (it makes the directories first,
    so one on disk may not be takeable yet)."""
    taken: list[dict[str, Path]] = []

    def took() -> bool:
        cgroup = pool.take()
        if cgroup is not None:
            taken.append(cgroup)
        return cgroup is not None

    assert caught_up(took)
    return taken[0]


@pytest.fixture
def parent(tmp_path: Path) -> Path:
    directory = tmp_path / "herder-w1"
    directory.mkdir()
    return directory


def test_cgroups_are_made_ahead_up_to_the_pool_size(parent: Path) -> None:
    pool = CgroupPool(dict.fromkeys(CONTROLLERS, parent), 3)
    try:
        assert settled(parent, ["ready-1", "ready-2", "ready-3"])
    finally:
        pool.close()


def test_each_is_handed_out_once_and_removed_after(parent: Path) -> None:
    pool = CgroupPool(dict.fromkeys(CONTROLLERS, parent), 2)
    try:
        assert settled(parent, ["ready-1", "ready-2"])
        taken = [take(pool) for _ in range(2)]
        assert [cgroup["memory"].name for cgroup in taken] == ["ready-1", "ready-2"]
        for cgroup in taken:
            assert pool.retire(list(dict.fromkeys(cgroup.values())))
        assert settled(parent, ["ready-3", "ready-4"])  # never one of those again
    finally:
        pool.close()


def test_one_not_empty_yet_is_removed_once_it_is(parent: Path) -> None:
    pool = CgroupPool(dict.fromkeys(CONTROLLERS, parent), 1)
    try:
        assert settled(parent, ["ready-1"])
        cgroup = take(pool)
        straggler = cgroup["memory"] / "straggler"
        straggler.write_text("")
        pool.retire([cgroup["memory"]])
        assert settled(parent, ["ready-1", "ready-2"])  # tried, and kept for later
        straggler.unlink()
        assert settled(parent, ["ready-2"])
    finally:
        pool.close()


def test_closing_removes_every_cgroup_it_made_or_was_handed(parent: Path) -> None:
    pool = CgroupPool(dict.fromkeys(CONTROLLERS, parent), 2)
    assert settled(parent, ["ready-1", "ready-2"])
    cgroup = take(pool)
    pool.retire([cgroup["memory"]])
    pool.close()
    assert children(parent) == []
    assert pool.take() is None
    assert not pool.retire([parent / "ready-9"])  # the caller removes its own now


def test_an_attempt_makes_its_own_while_none_can_be_made_ahead(
    parent: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refused(directory: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cgroup_pool, "make", refused)
    caplog.set_level(logging.WARNING, "herder.worker")
    enforcer = CgroupEnforcer(2, dict.fromkeys(CONTROLLERS, parent), ready=2)
    try:
        assert caught_up(lambda: "cannot make cgroups ahead" in caplog.text)
        confinement = enforcer.confine("att_1", Limits(8 * MIB, 1), gid=None, by_launcher=True)
        assert (parent / "att_1" / "memory.max").read_text() == str(8 * MIB)
        assert confinement.entrances() == [parent / "att_1" / "cgroup.procs"]
        assert caplog.text.count("cannot make cgroups ahead") == 1  # said once, not per try
    finally:
        enforcer.close()
