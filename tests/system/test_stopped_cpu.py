"""A stopped attempt's CPU, charged on real workers, sandboxed or not: a cancel or a hard
budget kills a tree of CPU burners, and what each burner says it burned is charged, so a hard
budget once spent stops the run for good instead of placing it again."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from herder.client import HerderClient
from herder.domain.budgets import Budget, Period, TenantBudgets
from herder.domain.usage import UsageGroup
from tests.system.conftest import ISOLATIONS, Cluster, wait_until

pytestmark = pytest.mark.system

# Each burner prints, as it burns, the CPU time it has used: its last line is a lower bound
# of what it burned. The job's first process dies at SIGTERM. One burner left the group
# (setsid), burns 0.8 s and waits to be killed; a supervisor that ignores SIGTERM and SIGCHLD
# (so the kernel reaps its children, and no wait4 sees them) ran two that burned 0.4 s and
# ended, and is killed.
TREE = """
import os, signal, time
def burn(seconds):
    while sum(os.times()[:2]) < seconds:
        for _ in range(100000):
            pass
        used = os.times()
        print(f"burner {os.getpid()} {used.user + used.system:.3f}", flush=True)
if os.fork() == 0:
    os.setsid()
    burn(0.8)
    while True:
        time.sleep(60)
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for _ in range(2):
        if os.fork() == 0:
            burn(0.4)
            print(f"ended {os.getpid()}", flush=True)
            os._exit(0)
    while True:
        time.sleep(60)
while True:
    time.sleep(60)
"""
BURNERS = 3


def _spec(stop_grace_seconds: int) -> dict[str, object]:
    command = f"exec python3 -c '{TREE}'"
    return {"runtime": "shell", "command": command, "stop_grace_seconds": stop_grace_seconds}


def _printed(herder: HerderClient, run_id: str, attempt: int | None = None) -> str:
    return "".join(chunk.text for chunk in herder.logs(run_id, attempt=attempt).chunks)


def _burned(printed: str) -> dict[str, float]:
    """Each burner's last word on its CPU time, by pid."""
    return {pid: float(seconds) for pid, seconds in re.findall(r"burner (\d+) ([\d.]+)", printed)}


def _wait_for_burners(herder: HerderClient, run_id: str) -> None:
    def burnt() -> bool:
        printed = _printed(herder, run_id)
        burned, ended = _burned(printed), re.findall(r"ended \d+", printed)
        return len(ended) == BURNERS - 1 and len(burned) == BURNERS and min(burned.values()) >= 0.3

    wait_until(burnt, 120, "the supervisor's burners ended, the other burned 0.3 s")


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_cancelled_attempt_is_charged_the_cpu_of_every_process_it_killed(
    start_cluster: Callable[..., Cluster], isolation: str
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w", "--isolation", isolation)
    with cluster.client() as herder:
        run = herder.start_run(herder.create_job("burn", _spec(stop_grace_seconds=1)).id)
        _wait_for_burners(herder, run.id)
        herder.cancel_run(run.id)
        finished = herder.wait(run.id, timeout=30)
        truth = sum(_burned(_printed(herder, run.id)).values())
        (attempt,) = finished.attempts
        charged = (attempt.cpu_user_seconds or 0.0) + (attempt.cpu_system_seconds or 0.0)
        assert (finished.state, attempt.state) == ("cancelled", "cancelled")
        assert charged >= 0.8 * truth, f"charged {charged:.3f} CPU-s of {truth:.3f} burned"
        (row,) = herder.usage(group_by=UsageGroup.JOB).rows
        assert row.cpu_seconds == pytest.approx(charged)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_spent_hard_budget_stops_the_run_once_and_holds_it(
    start_cluster: Callable[..., Cluster], isolation: str
) -> None:
    cluster = start_cluster()
    cluster.start_worker("w", "--isolation", isolation)
    with cluster.client() as herder:
        run = herder.start_run(herder.create_job("burn", _spec(stop_grace_seconds=1)).id)
        _wait_for_burners(herder, run.id)
        # spent by the time it runs (its 1 core's request), and by what it burned (>1.1 s)
        budget = Budget(period=Period.DAY, cpu_seconds=0.5, hard=True)
        (tenant,) = herder.list_tenants().items
        herder.set_budgets(tenant.id, TenantBudgets(budgets=(budget,)))
        wait_until(
            lambda: "day budget is spent" in (herder.get_run(run.id).waiting_reason or ""),
            60, "the run waits on the spent budget",
        )  # fmt: skip
        held = herder.get_run(run.id)
        assert held.state == "queued"
        assert len(held.attempts) == 1, "placed again on a budget that looked unspent"
        (attempt,) = held.attempts
        charged = (attempt.cpu_user_seconds or 0.0) + (attempt.cpu_system_seconds or 0.0)
        truth = sum(_burned(_printed(herder, run.id, attempt=1)).values())
        assert charged >= 0.8 * truth, f"charged {charged:.3f} CPU-s of {truth:.3f} burned"
