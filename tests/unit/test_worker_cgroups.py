"""Finding the cgroup hierarchies and the limit files, on the layouts hosts really have.

The kernel side is tested for real in tests/integration/test_limits.py on whatever this host
offers; here the other layouts are fed in as text, and cgroup v2 as a directory tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.domain.jobs import Resources
from herder.worker.attempt_cgroup import V2_JOIN_SCRIPT, AttemptCgroup, limit_settings
from herder.worker.cgroupfs import CgroupMount, cgroup_membership, cgroup_mounts
from herder.worker.cgroups import (
    CgroupEnforcer,
    CgroupsUnavailable,
    cgroup_enforcer,
    cpu_accounts,
)
from herder.worker.limits import MIB, Limits, RlimitConfinement, limits_for

HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /mnt/my\\040disk rw - ext4 /dev/sda1 rw
"""
CONTAINER_MOUNTINFO = "700 600 0:30 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n"


def test_mounts_are_read_with_their_version_and_controllers() -> None:
    mounts = cgroup_mounts(HYBRID_MOUNTINFO)
    assert [(str(mount.point), mount.version) for mount in mounts] == [
        ("/sys/fs/cgroup/cpu,cpuacct", 1),
        ("/sys/fs/cgroup/memory", 1),
        ("/sys/fs/cgroup/pids", 1),
        ("/sys/fs/cgroup/unified", 2),
    ]
    assert mounts[0].controllers == {"rw", "cpu", "cpuacct"}
    assert cgroup_mounts(CONTAINER_MOUNTINFO) == [
        CgroupMount(Path("/sys/fs/cgroup"), "/docker/abc", 2, frozenset())
    ]


def test_membership_maps_each_controller_to_its_path() -> None:
    membership = cgroup_membership(
        "12:pids:/a\n4:memory:/process_api/x\n3:cpu,cpuacct:/\n1:name=systemd:/s\n0::/u\n"
    )
    assert membership == {
        "pids": "/a",
        "memory": "/process_api/x",
        "cpu": "/",
        "cpuacct": "/",
        "name=systemd": "/s",
        "": "/u",
    }


@pytest.mark.parametrize(
    ("cpu", "cpu_files"),
    [
        (1.0, ["100000 100000"]),
        (2.5, ["250000 100000"]),
        (0.001, ["1000 100000"]),  # the kernel's floor: 1 ms a period
    ],
)
def test_v2_limit_files(tmp_path: Path, cpu: float, cpu_files: list[str]) -> None:
    directories = dict.fromkeys(["memory", "cpu", "pids"], tmp_path)
    limits = limits_for(Resources(cpu=cpu, memory_mb=300), max_processes=99)
    present = frozenset({"memory.swap.max"})  # only there with swap accounting
    settings = {path.name: value for path, value in limit_settings(2, directories, limits, present)}
    assert settings == {
        "memory.max": str(300 * MIB),
        "memory.swap.max": "0",
        "cpu.max": cpu_files[0],
        "pids.max": "99",
    }


def test_v1_limit_files_go_to_each_controllers_directory(tmp_path: Path) -> None:
    directories = {name: tmp_path / name for name in ("memory", "cpu", "pids")}
    present = frozenset({"memory.memsw.limit_in_bytes"})
    settings = limit_settings(1, directories, Limits(64 * MIB, 0.5, 10), present)
    assert [(path.parent.name, path.name, value) for path, value in settings] == [
        ("memory", "memory.limit_in_bytes", str(64 * MIB)),
        ("memory", "memory.memsw.limit_in_bytes", str(64 * MIB)),  # after: never below it
        ("cpu", "cpu.cfs_quota_us", "50000"),  # of the default period, 100 ms
        ("pids", "pids.max", "10"),
    ]


def test_a_missing_controller_is_left_out(tmp_path: Path) -> None:
    settings = limit_settings(1, {"memory": tmp_path}, Limits(MIB, 1), frozenset())
    assert [path.name for path, _ in settings] == ["memory.limit_in_bytes"]


def fake_v2_host(tmp_path: Path, controllers: str) -> Path:
    """A cgroup v2 tree as plain files, and the /proc/self files that point at it."""
    root = tmp_path / "cgroup"
    (root / "worker.slice").mkdir(parents=True)
    (root / "cgroup.controllers").write_text(controllers)
    (root / "cgroup.subtree_control").write_text("")
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "mountinfo").write_text(f"41 31 0:38 / {root} rw - cgroup2 cgroup2 rw\n")
    (proc / "cgroup").write_text("0::/worker.slice\n")
    return proc


def test_v2_attempts_get_a_cgroup_under_the_worker_parent(tmp_path: Path) -> None:
    enforcer = cgroup_enforcer("w1", fake_v2_host(tmp_path, "cpuset cpu io memory pids"), ready=0)
    assert isinstance(enforcer, CgroupEnforcer)
    assert enforcer.version == 2
    parent = tmp_path / "cgroup" / "herder-w1"
    assert enforcer.parents == dict.fromkeys(["memory", "cpu", "pids"], parent)
    assert (tmp_path / "cgroup" / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"
    confinement = enforcer.confine("att_1", Limits(8 * MIB, 0.25, 50), gid=61001)
    attempt = parent / "att_1"
    assert {path.name: path.read_text() for path in attempt.iterdir()} == {
        "memory.max": str(8 * MIB),
        "cpu.max": "25000 100000",
        "pids.max": "50",
        "cgroup.procs": "",  # opened for the child, who enters through it
    }
    assert confinement.stdin is not None
    assert confinement.wrap(["job", "--flag"]) == [
        "/bin/sh", "-c", V2_JOIN_SCRIPT, "herder-join", str(attempt), "job", "--flag",
    ]  # fmt: skip
    confinement.remove()
    assert confinement.stdin is None


@pytest.mark.parametrize(
    ("kernel", "before_switch"),
    [
        ("6.8.0-45-generic", False),
        ("5.16.0", False),
        ("5.15.0-91-generic", True),  # the check of the opener may be backported: not assumed
        ("4.18.0-553.el8_10.x86_64", True),
        ("unparsable", True),
    ],
)
def test_v2_enters_after_the_uid_switch_only_where_the_kernel_allows_it(
    tmp_path: Path, kernel: str, before_switch: bool
) -> None:
    parent = tmp_path / "herder-w1"
    parent.mkdir()
    enforcer = CgroupEnforcer(2, dict.fromkeys(["memory", "cpu", "pids"], parent), kernel)
    confinement = enforcer.confine("att_1", Limits(8 * MIB, 1), gid=61001)
    try:
        assert confinement.before_switch is before_switch
    finally:
        confinement.remove()


def test_v2_without_a_memory_controller_is_not_used(tmp_path: Path) -> None:
    with pytest.raises(CgroupsUnavailable, match="no cgroup memory controller"):
        cgroup_enforcer("w1", fake_v2_host(tmp_path, "hugetlb"))


@pytest.mark.parametrize(
    ("mounted", "expected"),
    [
        (["cpu,cpuacct", "v2"], "cpu,cpuacct/w/herder-x-cpu"),  # v1 cpuacct, with cpu
        (["cpuacct", "v2"], "cpuacct/w/herder-x-cpu"),  # or apart
        (["v2"], "v2/u/herder-x-cpu"),
        (["cpu"], None),
    ],
)
def test_isolation_none_counts_cpu_under_v1s_cpuacct_else_v2(
    tmp_path: Path, mounted: list[str], expected: str | None
) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    lines = []
    for number, name in enumerate(mounted):
        kind, options = ("cgroup2", "rw") if name == "v2" else ("cgroup", f"rw,{name}")
        (tmp_path / name / ("u" if name == "v2" else "w")).mkdir(parents=True)
        lines.append(f"{30 + number} 1 0:{number} / {tmp_path / name} rw - {kind} {kind} {options}")
    (proc / "mountinfo").write_text("\n".join(lines) + "\n")
    (proc / "cgroup").write_text("3:cpu,cpuacct:/w\n2:cpuacct:/w\n1:cpu:/w\n0::/u\n")
    if expected is None:
        with pytest.raises(CgroupsUnavailable, match="neither"):
            cpu_accounts("herder-x-cpu", proc)
    else:
        assert cpu_accounts("herder-x-cpu", proc) == tmp_path / expected
        assert (tmp_path / expected).is_dir()


def test_optional_files_are_written_where_the_host_has_them(tmp_path: Path) -> None:
    parent = tmp_path / "herder-w1"
    parent.mkdir()
    (parent / "memory.oom.group").touch()
    enforcer = CgroupEnforcer(2, dict.fromkeys(["memory", "cpu", "pids"], parent))
    confinement = enforcer.confine("att_1", Limits(8 * MIB, 1), gid=None)
    try:
        assert (parent / "att_1" / "memory.oom.group").read_text() == "1"
        assert not (parent / "att_1" / "memory.swap.max").exists()
    finally:
        confinement.remove()


def test_the_rlimit_fallback_bounds_processes_only_for_an_own_uid() -> None:
    limits = Limits(64 * MIB, 1, 30)
    shared = RlimitConfinement(limits, own_uid=False).wrap(["job"])
    own = RlimitConfinement(limits, own_uid=True).wrap(["job"])
    assert shared[1:] == [f"--data={64 * MIB}", "--", "job"]
    assert own[1:] == [f"--data={64 * MIB}", "--nproc=30", "--", "job"]


def test_the_launchers_job_enters_every_hierarchy_of_v1_and_is_born_in_v2s_cgroup(
    tmp_path: Path,
) -> None:
    v1 = {name: tmp_path / name / "herder-w1" for name in ("memory", "cpu", "pids")}
    for directory in v1.values():
        directory.mkdir(parents=True)
    cgroup = CgroupEnforcer(1, v1).confine("att_1", Limits(8 * MIB, 1), gid=7, by_launcher=True)
    try:
        assert cgroup.entrances() == [v1[name] / "att_1" / "tasks" for name in v1]
        assert cgroup.birthplace() is None  # a process enters each hierarchy by a write
        assert cgroup.stdin is None
    finally:
        cgroup.remove()
    v2 = tmp_path / "unified" / "herder-w1"
    v2.mkdir(parents=True)
    enforcer = CgroupEnforcer(2, dict.fromkeys(["memory", "cpu", "pids"], v2))
    cgroup = enforcer.confine("att_2", Limits(8 * MIB, 1), gid=7, by_launcher=True)
    try:
        assert cgroup.birthplace() == v2 / "att_2"  # clone3 takes the directory
        assert cgroup.entrances() == [v2 / "att_2" / "cgroup.procs"]  # what others enter by
        assert cgroup.stdin is None  # nothing opened to hand to the job
    finally:
        cgroup.remove()


def test_the_rlimit_fallback_tells_the_launcher_the_same_limits() -> None:
    limits = Limits(64 * MIB, 1, 30)
    assert RlimitConfinement(limits, own_uid=True).launcher_options() == [
        "--rlimit", f"data={64 * MIB}", "--rlimit", "nproc=30",
    ]  # fmt: skip


def test_an_attempts_cpu_time_is_the_cgroups_account_where_the_host_keeps_one(
    tmp_path: Path,
) -> None:
    """What budgets charge: every process's CPU time, waited for or not (docs/budgets.md)."""
    unified, cpuacct, memory = tmp_path / "v2", tmp_path / "cpuacct", tmp_path / "memory"
    for directory in (unified, cpuacct, memory):
        directory.mkdir()
    (unified / "cpu.stat").write_text("usage_usec 3500000\nuser_usec 3000000\nsystem_usec 500000\n")
    (unified / "memory.peak").write_text("1024\n")
    assert AttemptCgroup(2, {"memory": unified}).collect().cpu_seconds == (3.0, 0.5)
    # v1, cpuacct apart from cpu or with it: the exact total, split as cpuacct.stat's ticks
    (cpuacct / "cpuacct.usage").write_text("4000000000\n")
    (cpuacct / "cpuacct.stat").write_text("user 300\nsystem 100\n")
    for cpu in ({}, {"cpu": cpuacct}):
        cgroup = AttemptCgroup(1, {"memory": memory, **cpu, "cpuacct": cpuacct})
        assert cgroup.collect().cpu_seconds == (3.0, 1.0)
    (cpuacct / "cpuacct.usage").write_text("2000000\n")  # 2 ms: no tick yet
    (cpuacct / "cpuacct.stat").write_text("user 0\nsystem 0\n")
    assert AttemptCgroup(1, {"memory": memory, "cpuacct": cpuacct}).collect().cpu_seconds == (
        0.002, 0.0,
    )  # fmt: skip
    alone = AttemptCgroup(1, {"memory": memory})  # no cpuacct mounted: wait4's account
    assert alone.collect().cpu_seconds is None
