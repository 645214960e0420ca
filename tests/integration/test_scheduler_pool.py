"""Several schedulers on one database: the loops spread over them by rendezvous hashing, move
when one joins, dies or leaves, and no fire is lost or made twice meanwhile."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from herder.control.scheduler import Scheduler
from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.jobs import JobSpec
from herder.domain.rendezvous import preferred_member
from herder.domain.schedules import ScheduleSpec, first_fire
from herder.store.schema import runs
from herder.store.store import Store

# renewed every 0.8 s, slack for a loaded CI box (1.5 s lapsed there once the starter loop
# came); a free lease waits two renewals for its preferred holder
LEASE_SECONDS = 2.4
EVERY_SECOND = "* * * * * *"
SCHEDULES = 24
SETTLE_SECONDS = 3 * LEASE_SECONDS  # a death: the lease runs out, then the grace, then a try


def test_a_lease_handed_over_is_taken_only_by_its_successor(store: Store) -> None:
    leases = store.leases
    leases.join("b", 30)
    first = leases.acquire("firer-0", "a", 30)
    assert first is not None
    assert leases.hand_over("firer-0", "a", first, "b")
    assert leases.acquire("firer-0", "c", 30) is None, "a third process slipped in"
    assert not leases.renew("firer-0", "a", first, 30), "the old holder still holds it"
    assert leases.acquire("firer-0", "b", 30, free_for_seconds=10) == first + 1
    assert leases.holder("firer-0") == ("b", first + 1)


def test_a_lease_is_handed_only_to_a_live_member(store: Store) -> None:
    leases = store.leases
    leases.join("b", 30)
    leases.leave("b")
    first = leases.acquire("firer-2", "a", 30)
    assert first is not None
    assert not leases.hand_over("firer-2", "a", first, "b"), "handed to one that left"
    assert not leases.hand_over("firer-2", "a", first, "c"), "handed to one never seen"
    assert leases.holder("firer-2") == ("a", first)


def test_a_stopping_holder_gives_up_the_leases_handed_to_it_too(store: Store) -> None:
    leases = store.leases
    leases.join("b", 30)
    held = leases.acquire("firer-3", "b", 30)
    handed = leases.acquire("firer-4", "a", 30)
    assert held is not None
    assert handed is not None
    assert leases.hand_over("firer-4", "a", handed, "b")
    leases.release_all("b")
    assert leases.holder("firer-3") is None
    assert leases.holder("firer-4") is None, "the lease handed to it waits out its expiry"


def test_a_free_lease_waits_out_the_grace_for_anyone_else(store: Store) -> None:
    leases = store.leases
    first = leases.acquire("firer-1", "a", 30)
    assert first is not None
    leases.release("firer-1", "a", first)  # a second ago
    assert leases.acquire("firer-1", "b", 30, free_for_seconds=60) is None
    assert leases.acquire("firer-1", "b", 30) == first + 1


def test_members_are_those_whose_heartbeat_runs(store: Store) -> None:
    leases = store.leases
    leases.join("a", 30)
    leases.join("b", 30)
    leases.join("a", 30)  # a heartbeat
    assert leases.members() == ["a", "b"]
    leases.leave("b")
    assert leases.members() == ["a"]
    assert leases.holder("firer-0") is None, "members hold no loop"


class Pool:
    """Schedulers on one database, each with its own store (as in its own process)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.running: dict[str, tuple[Scheduler, Store]] = {}
        self.observer = Store(url)
        self.dispatch_partitions = 1

    def start(self) -> Scheduler:
        store = Store(self.url)
        scheduler = Scheduler(
            store, heartbeat_timeout_seconds=60, lease_seconds=LEASE_SECONDS, listen=False,
            dispatch_partitions=self.dispatch_partitions,
        )  # fmt: skip
        scheduler.start()
        self.running[scheduler.holder] = (scheduler, store)
        return scheduler

    def stop(self, scheduler: Scheduler, *, die: bool = False) -> None:
        """Stop it; ``die``: as ``kill -9`` would, its leases left to run out."""
        _, store = self.running.pop(scheduler.holder)
        if die:
            store.leases.release = lambda *_: None  # type: ignore[method-assign]
            store.leases.leave = lambda *_: None  # type: ignore[method-assign]
            store.leases.release_all = lambda *_: None  # type: ignore[method-assign]
        scheduler.stop()
        store.close()

    def spread_loops(self) -> list[str]:
        (any_scheduler, _) = next(iter(self.running.values()))
        return [loop.name for loop in any_scheduler.loops if loop.name != "dispatcher"]

    def holders(self) -> dict[str, str | None]:
        whole = ["dispatcher"] if self.dispatch_partitions == 1 else []  # it stays put
        names = [*self.spread_loops(), *whole]
        held = {name: self.observer.leases.holder(name) for name in names}
        return {name: None if lease is None else lease[0] for name, lease in held.items()}

    def balanced(self) -> bool:
        """Every loop held, each spread one by its preferred live scheduler."""
        holders = self.holders()
        members = list(self.running)
        return holders.get("dispatcher", members[0]) in members and all(
            holders[name] == preferred_member(name, members) for name in self.spread_loops()
        )

    def close(self) -> None:
        for scheduler, store in list(self.running.values()):
            scheduler.stop()
            store.close()
        self.observer.close()


@pytest.fixture
def pool(database_url: str) -> Iterator[Pool]:
    pool = Pool(database_url)
    yield pool
    pool.close()


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> float:
    """How long it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > seconds:
            raise AssertionError(f"not within {seconds}s: {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def every_second_schedules(store: Store, count: int) -> list[str]:
    tenant = store.access.create_tenant("t").id
    job = store.jobs.create(tenant, "tick", JobSpec(runtime="shell", command="true")).id
    spec = ScheduleSpec(cron=EVERY_SECOND)
    expression = CronExpression.parse(EVERY_SECOND, allow_seconds=True)
    first = first_fire(expression, parse_timezone(spec.timezone), spec, datetime.now(UTC))
    return [store.schedules.create(tenant, job, spec, first).id for _ in range(count)]


def fires(store: Store) -> list[tuple[str, datetime]]:
    with store.database.read() as connection:
        rows = connection.execute(select(runs.c.schedule_id, runs.c.scheduled_for)).all()
    return [(schedule_id, moment) for schedule_id, moment in rows]


def test_loops_spread_when_schedulers_join_and_move_to_the_survivors(pool: Pool) -> None:
    schedule_ids = every_second_schedules(pool.observer, SCHEDULES)
    started = datetime.now(UTC)
    first = pool.start()
    wait_until(pool.balanced, SETTLE_SECONDS, "the first scheduler holds every loop")
    assert set(pool.holders().values()) == {first.holder}

    second = pool.start()
    joined = wait_until(pool.balanced, SETTLE_SECONDS, "the loops spread over two")
    third = pool.start()
    wait_until(pool.balanced, SETTLE_SECONDS, "the loops spread over three")
    shares = Counter(pool.holders().values())
    print(f"spread over two in {joined:.2f}s; over three: {sorted(shares.values())} loops")

    pool.stop(third, die=True)
    died = wait_until(pool.balanced, SETTLE_SECONDS, "the dead one's loops moved")
    pool.stop(second)
    left = wait_until(pool.balanced, SETTLE_SECONDS, "the leaver's loops moved")
    assert set(pool.holders().values()) == {first.holder}
    print(f"moved {died:.2f}s after a death, {left:.2f}s after a leave")

    ended = datetime.now(UTC)
    window = [
        started.replace(microsecond=0) + timedelta(seconds=offset)
        for offset in range(2, int((ended - started).total_seconds()))
    ]
    if window:  # until the last second's fires are made
        wait_until(
            lambda: (
                {owner for owner, moment in fires(pool.observer) if moment == window[-1]}
                >= set(schedule_ids)
            ),
            SETTLE_SECONDS,
            "the window's last fires are made",
        )
    made = fires(pool.observer)
    assert len(made) == len(set(made)), "a fire was made twice"
    for schedule_id in schedule_ids:
        fired = {moment for owner, moment in made if owner == schedule_id}
        assert fired >= set(window), f"{schedule_id} missed {sorted(set(window) - fired)[:3]}"


def test_the_dispatchers_of_a_partitioned_placement_spread_and_move_like_the_others(
    pool: Pool,
) -> None:
    pool.dispatch_partitions = 4
    first = pool.start()
    second = pool.start()
    # balanced: each dispatcher held by its preferred scheduler of the two, as every loop is
    wait_until(pool.balanced, SETTLE_SECONDS, "the loops spread over two")
    dispatchers = {f"dispatcher-{number}" for number in range(4)}
    assert dispatchers <= set(pool.spread_loops())
    pool.stop(second)
    wait_until(pool.balanced, SETTLE_SECONDS, "the leaver's dispatchers moved")
    assert {pool.holders()[name] for name in dispatchers} == {first.holder}


def test_a_scheduler_that_left_is_handed_none_of_its_loops_back(pool: Pool) -> None:
    """The survivors' views of the pool lag a heartbeat behind a leave; the loops they take
    from the leaver must stay with them, not go back to it to wait out a lease."""
    pool.start()
    leaver = pool.start()
    wait_until(pool.balanced, SETTLE_SECONDS, "the loops spread over two")
    pool.stop(leaver)
    named: set[str | None] = set()

    def settled() -> bool:
        named.update(pool.holders().values())
        return pool.balanced()

    wait_until(settled, SETTLE_SECONDS, "the leaver's loops moved")
    watched_until = time.monotonic() + 2 * LEASE_SECONDS  # past any lease handed back
    while time.monotonic() < watched_until:
        named.update(pool.holders().values())
        time.sleep(0.05)
    assert leaver.holder not in named, "a loop went back to the scheduler that left"
