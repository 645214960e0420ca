"""``LeasedLoop`` without a database or real sleeping: a fake lease repository, and events
whose ``wait`` moves a fake monotonic clock instead of blocking. Each test runs the loop in
the test's thread until the clock passes an end time, then reads what it did."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import pytest
from prometheus_client import REGISTRY

from herder.control import leased
from herder.control.leased import ERROR_PAUSE_SECONDS, LeasedLoop
from herder.domain.errors import Unavailable
from herder.store.leases import LeaseRepository

TTL_SECONDS = 3.0  # the loop renews every TTL / 3
RENEW_EVERY = TTL_SECONDS / 3
START = 1000.0  # a monotonic clock is far from 0
MOST_WAITS = 1000  # a loop waiting more often in a test spins without time passing


class Spinning(BaseException):
    """Raised from a wait: a ``BaseException`` so the loop's error handling cannot hide it."""


@dataclass
class Timeline:
    """The loop's ``time.monotonic``; it moves only when the loop waits."""

    now: float = START
    end: float = START
    waits: list[tuple[str, float]] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now


class FakeEvent:
    """A ``threading.Event`` whose ``wait`` returns at once when set, else moves the clock
    by its timeout; the stop event also counts as set once the clock passes the end."""

    def __init__(self, timeline: Timeline, name: str) -> None:
        self._timeline = timeline
        self._name = name
        self._flag = False

    def is_set(self) -> bool:
        return self._flag or (self._name == "stop" and self._timeline.now >= self._timeline.end)

    def set(self) -> None:
        self._flag = True

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None, "the loop never waits without a timeout"
        self._timeline.waits.append((self._name, timeout))
        if len(self._timeline.waits) > MOST_WAITS:
            raise Spinning(f"the loop waited {MOST_WAITS} times by {self._timeline.now}")
        if not self._flag:
            self._timeline.now += timeout
        return self._flag


@dataclass
class FakeLeases:
    """The lease table as a test scripts it: another process may hold the lease for a while
    (``other_holds``, a window of the clock), and releasing may fail."""

    timeline: Timeline
    other_holds: tuple[float, float] = (0.0, 0.0)
    fail_release: bool = False
    fencing: int = 0
    calls: list[tuple[str, float, int | None]] = field(default_factory=list)
    graces: list[float] = field(default_factory=list)  # each acquire's free_for_seconds
    successors: list[str] = field(default_factory=list)

    def _taken(self) -> bool:
        start, end = self.other_holds
        return start <= self.timeline.now < end

    def acquire(
        self, name: str, holder: str, ttl_seconds: float, *, free_for_seconds: float = 0.0
    ) -> int | None:
        assert (name, holder) == ("loop", "me")
        self.graces.append(free_for_seconds)
        if self._taken():
            self.calls.append(("acquire", self.timeline.now, None))
            return None
        self.fencing += 1
        self.calls.append(("acquire", self.timeline.now, self.fencing))
        return self.fencing

    def renew(self, name: str, holder: str, fencing: int, ttl_seconds: float) -> bool:
        assert (name, holder, fencing, ttl_seconds) == ("loop", "me", self.fencing, TTL_SECONDS)
        self.calls.append(("renew", self.timeline.now, fencing))
        return not self._taken()

    def release(self, name: str, holder: str, fencing: int) -> None:
        self.calls.append(("release", self.timeline.now, fencing))
        if self.fail_release:
            raise Unavailable("the database is unavailable")

    def hand_over(self, name: str, holder: str, fencing: int, successor: str) -> bool:
        self.calls.append(("hand_over", self.timeline.now, fencing))
        self.successors.append(successor)
        self.other_holds = (self.timeline.now, math.inf)  # the successor takes it
        return True

    def named(self, kind: str) -> list[tuple[str, float, int | None]]:
        return [call for call in self.calls if call[0] == kind]


@dataclass
class World:
    timeline: Timeline
    leases: FakeLeases
    wake: FakeEvent
    stop: FakeEvent
    preferred: str = "me"  # the placement's preferred holder of the loop's lease
    steps: list[tuple[float, int | None]] = field(default_factory=list)  # (when, fencing)
    held_at: list[float] = field(default_factory=list)  # each time the loop took the lease

    def loop(self, step: Callable[[], float]) -> LeasedLoop:
        return LeasedLoop(
            "loop",
            cast(LeaseRepository, self.leases),
            "me",
            step,
            ttl_seconds=TTL_SECONDS,
            wake=cast(threading.Event, self.wake),
            stop=cast(threading.Event, self.stop),
            placement=self,
            on_held=lambda: self.held_at.append(self.timeline.now),
        )

    def preferred_holder(self, loop: str) -> str:
        return self.preferred

    def run(self, seconds: float, step: Callable[[LeasedLoop], float]) -> LeasedLoop:
        """Run the loop until the clock has moved ``seconds``; each step is recorded."""
        self.timeline.end = self.timeline.now + seconds

        def recorded_step() -> float:
            self.steps.append((self.timeline.now, loop.fencing))
            return step(loop)

        loop = self.loop(recorded_step)
        loop.run()
        return loop


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    timeline = Timeline()
    monkeypatch.setattr(leased, "time", timeline)  # the loop reads time.monotonic() only
    return World(
        timeline, FakeLeases(timeline), FakeEvent(timeline, "wake"), FakeEvent(timeline, "stop")
    )


def test_takes_a_free_lease_and_steps_under_its_fencing_number(world: World) -> None:
    def step(loop: LeasedLoop) -> float:
        assert REGISTRY.get_sample_value("herder_control_loop_held", {"loop": "loop"}) == 1
        return 0.2

    world.run(0.5, step)
    assert world.leases.named("acquire") == [("acquire", START, 1)]
    assert world.steps[0] == (START, 1)
    assert {fencing for _, fencing in world.steps} == {1}
    assert [seconds for name, seconds in world.timeline.waits] == pytest.approx([0.2, 0.2, 0.2])


def test_renews_every_third_of_the_ttl_and_never_sleeps_past_a_renewal(world: World) -> None:
    world.run(3.5, lambda loop: 60.0)  # a step with nothing to do for a minute
    assert [when - START for _, when, _ in world.leases.named("renew")] == [1.0, 2.0, 3.0]
    assert len(world.leases.named("acquire")) == 1
    assert {seconds for _, seconds in world.timeline.waits} == {RENEW_EVERY}
    assert len(world.steps) == 1  # a renewal is no reason to step again


def test_steps_when_the_last_step_asked_however_often_it_renews(world: World) -> None:
    world.run(5.0, lambda loop: 2.5)
    assert [when - START for when, _ in world.steps] == [0.0, 2.5]  # and 5.0 is the end
    assert [when - START for _, when, _ in world.leases.named("renew")] == [1.0, 2.0, 3.0, 4.0]
    waits = [seconds for _, seconds in world.timeline.waits]
    assert waits == pytest.approx([1.0, 1.0, 0.5, 0.5, 1.0, 1.0])  # renewals, then the step's


def test_a_lost_lease_stops_the_steps_until_the_loop_takes_it_again(world: World) -> None:
    world.leases.other_holds = (START + 2.5, START + 4.5)  # another process takes it meanwhile
    world.run(6.0, lambda loop: 0.5)
    assert [(when - START, fencing) for when, fencing in world.steps] == [
        (0.0, 1), (0.5, 1), (1.0, 1), (1.5, 1), (2.0, 1), (2.5, 1),  # renewed at 1 and 2
        # lost at 3 (renew refused); stands by, trying once per renewal period
        (5.0, 2), (5.5, 2),
    ]  # fmt: skip
    assert [(kind, when - START, fencing) for kind, when, fencing in world.leases.calls] == [
        ("acquire", 0.0, 1), ("renew", 1.0, 1), ("renew", 2.0, 1), ("renew", 3.0, 1),
        ("acquire", 4.0, None), ("acquire", 5.0, 2), ("release", 6.0, 2),
    ]  # fmt: skip
    assert world.timeline.waits[6:8] == [("stop", RENEW_EVERY)] * 2


def test_the_loop_is_told_each_time_it_takes_the_lease_not_when_it_renews(world: World) -> None:
    """The reaper judges silence only from then: it watched nothing before."""
    world.leases.other_holds = (START + 2.5, START + 4.5)
    world.run(6.0, lambda loop: 0.5)
    assert [when - START for when in world.held_at] == [0.0, 5.0]


def test_releases_the_lease_on_stop_and_survives_a_failing_release(world: World) -> None:
    loop = world.run(0.3, lambda loop: 0.1)
    assert world.leases.named("release") == [("release", world.timeline.now, 1)]
    assert loop.fencing is None

    world.leases.fail_release = True  # it will expire by itself
    loop = world.run(0.3, lambda loop: 0.1)
    assert world.leases.named("release")[-1] == ("release", world.timeline.now, 2)
    assert loop.fencing is None


def test_a_loop_that_never_held_the_lease_releases_nothing(world: World) -> None:
    world.leases.other_holds = (START, START + 60)
    world.run(2.5, lambda loop: 0.1)
    assert world.steps == []
    assert [kind for kind, _, _ in world.leases.calls] == ["acquire"] * 3
    assert world.timeline.waits == [("stop", RENEW_EVERY)] * 3


def test_a_holder_hands_the_lease_to_its_preferred_holder_after_a_pass(world: World) -> None:
    def step(loop: LeasedLoop) -> float:
        if len(world.steps) == 2:
            world.preferred = "newcomer"  # another scheduler joined and wins this loop
        return 0.25

    world.run(1.0, step)
    assert [when - START for when, _ in world.steps] == [0.0, 0.25]
    assert world.leases.named("hand_over") == [("hand_over", START + 0.25, 1)]
    assert REGISTRY.get_sample_value("herder_control_loop_held", {"loop": "loop"}) == 0
    assert world.leases.successors == ["newcomer"]
    assert world.leases.named("release") == [], "nothing left to release on stop"


def test_a_process_that_is_not_preferred_takes_a_free_lease_only_after_a_grace(
    world: World,
) -> None:
    world.preferred = "other"
    world.run(0.5, lambda loop: 0.1)  # it takes the lease (its preferred holder is gone) …
    assert world.leases.graces[0] == leased.TAKEOVER_GRACE_RENEWALS * RENEW_EVERY
    assert world.steps[0] == (START, 1)
    assert world.leases.successors == ["other"]  # … runs one pass and offers it back
    world.preferred = "me"
    world.run(0.5, lambda loop: 0.1)
    assert world.leases.graces[-1] == 0.0


@pytest.mark.parametrize(
    "error",
    [Unavailable("the database is unavailable"), RuntimeError("a bug")],
    ids=["expected error", "bug"],
)
def test_an_error_in_a_step_pauses_the_loop_and_it_goes_on(
    world: World, error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    def step(loop: LeasedLoop) -> float:
        if len(world.steps) == 1:
            raise error
        return 0.25

    world.run(ERROR_PAUSE_SECONDS + 0.5, step)
    assert world.timeline.waits[0] == ("stop", ERROR_PAUSE_SECONDS)
    assert world.steps[1] == (START + ERROR_PAUSE_SECONDS, 1), "it stepped again after"
    assert len(world.leases.named("acquire")) == 1, "an error in a step keeps the lease"
    assert str(error) in caplog.text


def test_an_outage_is_said_once_and_its_end_too(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    def step(loop: LeasedLoop) -> float:
        if len(world.steps) <= 5:
            raise Unavailable("the database is unavailable: connection refused")
        return 0.25

    with caplog.at_level(logging.WARNING, logger="herder.control"):
        world.run(6 * ERROR_PAUSE_SECONDS + 0.1, step)
    said = [record.getMessage() for record in caplog.records]
    assert said == [
        "loop: the database is unavailable: connection refused; trying again every 1.0s, "
        "quietly until it works",
        "loop: the store answers again after 5.0 s",
    ]


def test_a_notice_during_a_step_wakes_the_next_pass_at_once(world: World) -> None:
    def step(loop: LeasedLoop) -> float:
        if len(world.steps) == 2:
            world.wake.set()  # a notice arrived while the step ran
        return 0.5

    world.run(1.0, step)
    assert [when - START for when, _ in world.steps] == [0.0, 0.5, 0.5]
    assert not world.wake.is_set(), "the notice was consumed"


def test_a_notice_from_another_thread_wakes_a_long_wait() -> None:
    """Real events and clock: a step asking to sleep a minute runs again on a notice."""
    wake, stop = threading.Event(), threading.Event()
    stepped = threading.Semaphore(0)

    def step() -> float:
        stepped.release()
        return 60.0

    leases = FakeLeases(Timeline())
    loop = LeasedLoop(
        "loop", cast(LeaseRepository, leases), "me", step,
        ttl_seconds=TTL_SECONDS * 100, wake=wake, stop=stop,
    )  # fmt: skip
    thread = threading.Thread(target=loop.run)
    thread.start()
    try:
        assert stepped.acquire(timeout=5)
        wake.set()
        assert stepped.acquire(timeout=5), "the notice did not wake the loop"
    finally:
        stop.set()
        wake.set()
        thread.join(5)
    assert not thread.is_alive()
    assert [kind for kind, _, _ in leases.calls] == ["acquire", "release"]
