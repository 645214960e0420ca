"""CPU accounting from /proc: what a process tree spent, before and after a measurement.

A tree is a process and its live descendants. ``own`` is their own user + system time;
``reaped`` is the time of children they have waited for (``cutime`` + ``cstime``), so a
process that starts and ends inside the measurement is still counted, once it is reaped.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuTimes:
    """CPU seconds of a process tree: its processes' own, and their reaped children's."""

    own: float
    reaped: float

    @property
    def total(self) -> float:
        return self.own + self.reaped

    @classmethod
    def of_tree(cls, root: int) -> CpuTimes:
        children = _children_by_parent()
        own = reaped = 0.0
        pending = [root]
        while pending:
            pid = pending.pop()
            fields = _stat(pid)
            if fields is None:  # ended since the scan
                continue
            own += (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND
            reaped += (int(fields[13]) + int(fields[14])) / TICKS_PER_SECOND
            pending.extend(children[pid])
        return cls(own, reaped)

    @classmethod
    def of_root_and_rest(cls, root: int) -> CpuTimes:
        """``own``: the root process's own CPU alone; ``reaped``: the rest of its tree (its
        live descendants' own and everything reaped) — a worker agent, and the attempts it
        started however they were started (its sandbox launcher server is a descendant)."""
        tree = cls.of_tree(root)
        fields = _stat(root)
        alone = 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND
        return cls(alone, tree.total - alone)

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(self.own - other.own, self.reaped - other.reaped)


def parent_of(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[1])


def children_of(pid: int) -> list[int]:
    return _children_by_parent()[pid]


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state is [0], ppid [1])."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (parent := parent_of(int(entry.name))) is not None:
            children[parent].append(int(entry.name))
    return children
