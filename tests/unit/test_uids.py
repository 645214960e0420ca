"""The uid pool hands out distinct uids in turn, and refuses what it cannot do."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from herder.worker.uids import UidPool, UidSweeper, default_python, kill_processes_of_uid


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
