"""A shape's candidates within a pass: the best fit among the first workers (in fleet order)
that fit now, kept up to date as workers fill up or are held for another run."""

from __future__ import annotations

import pytest

from herder.domain.placement import candidates as candidates_module
from herder.domain.placement.candidates import Candidates
from herder.domain.placement.fleet import Fleet, WorkerRoom
from herder.domain.placement.snapshot import Snapshot
from tests.unit.placement_snapshots import NOW, need, worker

ONE = need(cpu=1)


def rooms(*cpus: float) -> list[WorkerRoom]:
    views = tuple(worker(f"w{index}", cpu=cpu) for index, cpu in enumerate(cpus))
    return Fleet(Snapshot(now=NOW, queued=(), workers=views)).workers


@pytest.fixture(autouse=True)
def _two_scored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidates_module, "SCORED_WORKERS", 2)


def test_the_tightest_of_the_first_that_fit_wins() -> None:
    w0, w1, w2 = rooms(4, 2, 1)  # w2 is the tightest, but only two are scored
    assert Candidates([w0, w1, w2], ONE).best("run") is w1


def test_a_worker_filling_up_is_ranked_again_and_leaves_when_full() -> None:
    w0, w1, w2 = rooms(4, 2, 1)
    shape = Candidates([w0, w1, w2], ONE)
    assert shape.best("run") is w1
    w0.take(need(cpu=2.5))
    assert shape.best("run") is w0  # ranked again: now the tighter of the two
    w0.take(ONE)
    assert shape.best("run") is w2  # w0 is full: the next that fits takes its place
    w2.take(ONE)
    assert shape.best("run") is w1
    w1.take(ONE)
    w1.take(ONE)
    assert shape.best("run") is None


def test_a_worker_held_for_another_run_is_passed_over() -> None:
    w0, w1, w2 = rooms(4, 2, 1)
    shape = Candidates([w0, w1, w2], ONE)
    shape.best("run")
    w1.reserve("starving")
    assert shape.best("run") is w2
    assert shape.fitting("run", 3) == [w0, w2]
    assert shape.fitting("run", 1) == [w0]
