"""Rendezvous hashing: the same answer everywhere, an even spread, and few moves."""

from __future__ import annotations

from collections import Counter

from herder.domain.rendezvous import preferred_member

LOOPS = [f"firer-{partition}" for partition in range(64)]


def test_the_answer_depends_only_on_the_set_of_members() -> None:
    members = ["host-a:1:aa", "host-b:2:bb", "host-c:3:cc"]
    for loop in LOOPS:
        assert preferred_member(loop, members) == preferred_member(loop, reversed(members))


def test_a_lone_member_runs_everything() -> None:
    assert {preferred_member(loop, ["only"]) for loop in LOOPS} == {"only"}


def test_loops_spread_roughly_evenly() -> None:
    members = [f"scheduler-{index}" for index in range(3)]
    shares = Counter(preferred_member(loop, members) for loop in LOOPS)
    assert set(shares) == set(members)
    assert all(10 <= share <= 32 for share in shares.values()), shares


def test_a_member_joining_takes_loops_only_for_itself() -> None:
    before = {loop: preferred_member(loop, ["a", "b"]) for loop in LOOPS}
    after = {loop: preferred_member(loop, ["a", "b", "c"]) for loop in LOOPS}
    moved = {loop for loop in LOOPS if before[loop] != after[loop]}
    assert moved == {loop for loop in LOOPS if after[loop] == "c"}
    assert 10 <= len(moved) <= 32


def test_a_member_leaving_gives_away_only_its_own_loops() -> None:
    before = {loop: preferred_member(loop, ["a", "b", "c"]) for loop in LOOPS}
    after = {loop: preferred_member(loop, ["a", "c"]) for loop in LOOPS}
    moved = {loop for loop in LOOPS if before[loop] != after[loop]}
    assert moved == {loop for loop in LOOPS if before[loop] == "b"}
