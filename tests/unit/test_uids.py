"""The uid pool hands out distinct uids in turn, and refuses what it cannot do."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from pathlib import Path

import pytest

from herder.worker.uids import (
    UidPool,
    UidSweeper,
    default_python,
    kill_processes_of_uid,
    reserve_uid_pool,
    uids_of_the_host,
)

NO_ACCOUNTS: frozenset[int] = frozenset()


def test_a_released_uid_goes_to_the_back_of_the_line() -> None:
    """Tenant B's attempt must not get the uid tenant A's attempt just gave back."""
    pool = UidPool(61000, 3)
    assert [pool.acquire(), pool.acquire()] == [61000, 61001]
    pool.release(61000)
    assert pool.acquire() == 61002
    pool.release(61001)
    assert [pool.acquire(), pool.acquire()] == [61000, 61001]


def test_an_exhausted_pool_says_so() -> None:
    pool = UidPool(61000, 1)
    pool.acquire()
    with pytest.raises(RuntimeError, match="all 1 sandbox uids"):
        pool.acquire()


@pytest.mark.parametrize("uid", [60999, 61000, 61002])
def test_releasing_a_uid_not_in_use_is_a_bug(uid: int) -> None:
    pool = UidPool(61000, 2)
    pool.acquire()
    pool.release(61000)
    with pytest.raises(ValueError, match="not in use"):
        pool.release(uid)


@pytest.mark.parametrize(("base", "size"), [(0, 10), (61000, 0), (-5, 3)])
def test_a_pool_needs_a_positive_range(base: int, size: int) -> None:
    with pytest.raises(ValueError, match="base > 0 and size > 0"):
        UidPool(base, size)


@pytest.mark.parametrize("uid", [0, os.getuid()])
def test_never_kills_every_process_of_root_or_ourselves(uid: int) -> None:
    with pytest.raises(ValueError, match="refusing"):
        kill_processes_of_uid(uid)


def test_default_python_is_an_existing_interpreter() -> None:
    assert Path(default_python()).exists()


def test_a_finished_uid_returns_to_the_pool_only_after_a_sweep() -> None:
    pool = UidPool(61500, 1)
    sweeper = UidSweeper(pool)
    uid = pool.acquire()
    sweeper.finished(uid)
    with pytest.raises(RuntimeError, match="in use"):
        pool.acquire()
    asyncio.run(sweeper.sweep())
    assert pool.acquire() == uid


def test_a_contained_attempts_uid_returns_to_the_pool_at_once() -> None:
    """Nothing it ran can be left anywhere: no sweep of /proc is owed first."""
    pool = UidPool(61500, 1)
    sweeper = UidSweeper(pool)
    uid = pool.acquire()
    sweeper.finished(uid, contained=True)
    assert pool.acquire() == uid


def test_a_worker_takes_no_uid_another_worker_of_the_host_holds(tmp_path: Path) -> None:
    """Whatever base each was given: two workers sharing a uid would kill each other's
    attempts, and a range names its worker's network filter."""
    with contextlib.ExitStack() as held:
        pools = []
        for base in (61000, 61000, 62000):
            pool, lock = reserve_uid_pool(base, 4096, tmp_path, NO_ACCOUNTS)
            held.callback(lock.release)
            pools.append(pool)

        assert [pool.base for pool in pools] == [61000, 65096, 70192]
        for one, other in itertools.combinations(pools, 2):
            assert not one.all_uids() & other.all_uids()

    assert list(tmp_path.iterdir()) == []  # released: their files are gone
    again, lock = reserve_uid_pool(62000, 4096, tmp_path, NO_ACCOUNTS)
    lock.release()
    assert again.base == 62000


def test_a_range_whose_worker_died_is_free(tmp_path: Path) -> None:
    (tmp_path / "herder-uids-61000-4096.lock").touch()  # locked by nobody: its worker is gone
    pool, lock = reserve_uid_pool(61000, 4096, tmp_path, NO_ACCOUNTS)
    lock.release()
    assert pool.base == 61000


def test_a_worker_takes_no_range_holding_a_uid_of_the_host(tmp_path: Path) -> None:
    """A worker that had ``nobody`` (65534) in its range killed every process the host runs
    as ``nobody`` when it started (a CI run's probe among them) and after each attempt under
    that uid: such a range is skipped like a held one."""
    with contextlib.ExitStack() as held:
        bases = []
        for _ in range(2):
            pool, lock = reserve_uid_pool(61000, 4096, tmp_path, frozenset({65534}))
            held.callback(lock.release)
            bases.append(pool.base)

    assert bases == [61000, 69192]  # 65096-69191 holds 65534


def test_the_host_s_uids_hold_root_nobody_and_the_overflow_uid() -> None:
    assert {0, 65534, 65535} <= uids_of_the_host()


def test_a_worker_refuses_to_start_when_every_range_it_may_take_is_held(tmp_path: Path) -> None:
    _, lock = reserve_uid_pool(1000, 2000, tmp_path, NO_ACCOUNTS)
    try:
        with pytest.raises(RuntimeError, match="overlap ranges other workers"):
            reserve_uid_pool(1001, 100, tmp_path, NO_ACCOUNTS)  # 1001-2600: in the held one
    finally:
        lock.release()
