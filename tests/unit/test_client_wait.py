"""``HerderClient.wait``: quick to see a short run end, and gentle with a long one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from herder.client import HerderClient
from herder.client import runs as run_calls
from herder.domain.states import RunState
from tests.clocks import SleepingTime


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> SleepingTime:
    fake = SleepingTime()
    monkeypatch.setattr(run_calls, "time", fake)
    return fake


def client_seeing(states: list[RunState], monkeypatch: pytest.MonkeyPatch) -> HerderClient:
    client = HerderClient("http://127.0.0.1:9", "key")
    answers = iter(states)
    monkeypatch.setattr(client, "get_run", lambda _run_id: SimpleNamespace(state=next(answers)))
    return client


def test_a_long_run_is_asked_about_ever_less_often_up_to_once_a_second(
    clock: SleepingTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with client_seeing([RunState.RUNNING] * 40 + [RunState.SUCCEEDED], monkeypatch) as herder:
        assert herder.wait("run", timeout=3600).state is RunState.SUCCEEDED
    assert clock.pauses[0] == 0.1
    assert all(b >= a for a, b in zip(clock.pauses, clock.pauses[1:], strict=False))
    assert clock.pauses[-1] == 1.0
    assert len(clock.pauses) == 40  # 36 s of a run asked about 41 times, not 360


def test_a_short_run_is_seen_ending_within_its_first_pauses(
    clock: SleepingTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with client_seeing([RunState.QUEUED, RunState.RUNNING, RunState.SUCCEEDED], monkeypatch) as h:
        h.wait("run")
    assert clock.pauses == [0.1, pytest.approx(0.15)]


def test_a_poll_longer_than_the_ceiling_is_kept(
    clock: SleepingTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with client_seeing([RunState.RUNNING] * 3 + [RunState.FAILED], monkeypatch) as herder:
        herder.wait("run", poll=5)
    assert clock.pauses == [5, 5, 5]


def test_a_run_still_going_at_the_timeout_raises(
    clock: SleepingTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        client_seeing([RunState.RUNNING] * 100, monkeypatch) as herder,
        pytest.raises(TimeoutError, match="still running after 10"),
    ):
        herder.wait("run", timeout=10)
    assert 10 < clock.now < 12
