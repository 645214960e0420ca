"""The agent's memory of the attempts it started: each starts once, and the memory stays bounded."""

from herder.worker.started import StartedAttempts


def test_an_attempt_starts_once() -> None:
    started = StartedAttempts()
    assert started.first_start("att_a")
    assert not started.first_start("att_a")
    assert started.first_start("att_b")


def test_the_oldest_are_forgotten_past_the_bound() -> None:
    started = StartedAttempts(remembered=2)
    for attempt_id in ("att_a", "att_b", "att_c"):
        assert started.first_start(attempt_id)
    assert not started.first_start("att_c")
    assert not started.first_start("att_b")
    assert started.first_start("att_a")  # forgotten: the memory holds the last two
