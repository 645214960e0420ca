"""What an event may cost (docs/events.md#what-an-event-may-cost): filters counted in steps
against a budget, a filter whose work grows with the payload bounded when saved, waits
looked at a bounded number an event, and the sender charged for the steps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from herder.domain.event_evaluation import (
    MAX_WAITS_PER_EVENT,
    Waiting,
    charged,
    evaluate,
    submissions,
)
from herder.domain.event_filters import (
    MAX_EVENT_STEPS,
    MAX_FILTER_STEPS,
    MAX_PAYLOAD_COMPARISONS,
    Budget,
    FilterError,
    OverBudget,
    check_cost,
    matches,
    parse,
)
from herder.domain.triggers import Refused, Start, Trigger, TriggerSpec

ITEMS = 60_000
NOW = datetime(2026, 12, 6, tzinfo=UTC)
# The attack: two lists of 60,000 items compared deeply, 81 times in 2,020 characters.
ATTACK = " and ".join(["payload.a==payload.b"] * 81)
HEAVY = " and ".join(["payload.a==payload.b"] * MAX_PAYLOAD_COMPARISONS)  # as saved today


def heavy_event() -> dict[str, Any]:
    return {
        "name": "e",
        "source": "api:k",
        "payload": {"a": list(range(ITEMS)), "b": list(range(ITEMS))},
    }


def a_trigger(name: str, filter_source: str | None = None, **params: str) -> Trigger:
    return Trigger(
        id=f"trg_{name}", name=name, event="e", filter=filter_source, job="build", workflow=None,
        params=params, enabled=True, created_at=NOW, updated_at=NOW, version=1,
    )  # fmt: skip


def test_deep_equality_is_counted_a_step_per_pair_of_values_it_visits() -> None:
    budget = Budget(MAX_FILTER_STEPS)
    assert matches(
        parse("payload.a == payload.b"), {"payload": {"a": [1, [2, 3]], "b": [1, [2, 3]]}}, budget
    )
    # the filter, the comparison, the two paths; the lists, 1, the inner lists, 2, 3
    assert budget.spent == 3 + 5
    with pytest.raises(OverBudget):
        matches(parse("payload.a == payload.b"), heavy_event(), Budget(ITEMS))


@pytest.mark.parametrize(
    ("source", "payload", "at_least"),
    [
        ("'x' in payload.a", {"a": list(range(ITEMS))}, ITEMS),  # every element looked at
        ("'x' in payload.s", {"s": "y" * 64_000}, 1_000),  # a step per 64 characters read
        ("payload.s starts_with payload.s", {"s": "y" * 64_000}, 1_000),
        ("payload.s == payload.s", {"s": "y" * 64_000}, 1_000),
        ("payload.s < payload.s", {"s": "y" * 64_000}, 1_000),
    ],
)
def test_searching_and_reading_strings_are_counted_too(
    source: str, payload: Any, at_least: int
) -> None:
    budget = Budget(MAX_FILTER_STEPS)
    matches(parse(source), {"payload": payload}, budget)
    assert budget.spent >= at_least


def test_a_filter_comparing_the_payload_with_itself_too_often_is_refused_when_saved() -> None:
    assert len(ATTACK) == 2_020
    with pytest.raises(FilterError, match=f"81 comparisons .* at most {MAX_PAYLOAD_COMPARISONS}"):
        check_cost(parse(ATTACK))
    with pytest.raises(ValidationError, match="81 comparisons"):  # as a trigger is saved
        TriggerSpec(event="e", job="build", filter=ATTACK)
    check_cost(parse(HEAVY))
    check_cost(parse(" or ".join(["payload.a == 'x'", "'x' in ['a', 'b']"] * 30)))  # literals
    with pytest.raises(FilterError):
        check_cost(parse(" or ".join(["'x' in payload.a"] * (MAX_PAYLOAD_COMPARISONS + 1))))


def test_an_event_takes_at_most_its_budget_whatever_its_triggers_and_refuses_those_past_it() -> (
    None
):
    triggers = [a_trigger(f"t{n:02}", HEAVY) for n in range(20)]
    evaluated = evaluate([a_trigger("cheap", "payload.a[0] == 0"), *triggers], [], heavy_event())
    assert evaluated.steps <= MAX_EVENT_STEPS
    first, over, *rest = evaluated.decided
    assert isinstance(first, Start)
    assert isinstance(over, Refused)
    assert over.error.startswith(f"filter: takes more than {MAX_FILTER_STEPS:,} steps")
    refused = [one.error for one in rest if isinstance(one, Refused)]
    assert len(refused) == len(rest)
    assert refused[-1].startswith("not evaluated: the event's earlier triggers took its budget")
    assert evaluated.submissions == submissions(MAX_EVENT_STEPS) == 21


def test_a_cheap_event_costs_one_submission() -> None:
    evaluated = evaluate(
        [a_trigger("t", "payload.ref == 'main'", BRANCH="payload.ref")],
        [Waiting("run_1", None), Waiting("run_2", "payload.ref == 'dev'")],
        {"name": "e", "source": "api:k", "payload": {"ref": "main"}},
    )
    assert [type(one) for one in evaluated.decided] == [Start]
    assert evaluated.awaited == ["run_1"]
    assert evaluated.submissions == 1


def test_an_event_looks_at_a_bounded_number_of_waits_and_none_past_its_budget() -> None:
    many = [Waiting(f"run_{n:04}", None) for n in range(MAX_WAITS_PER_EVENT + 50)]
    assert len(evaluate([], many, heavy_event()).awaited) == MAX_WAITS_PER_EVENT
    heavy = [Waiting(f"run_{n:04}", HEAVY) for n in range(10)]
    cheap, any_event = Waiting("run_cheap", "payload.a[0] == 0"), Waiting("run_any", None)
    evaluated = evaluate([], [*heavy, cheap, any_event], heavy_event())
    # The heavy ones spent it: the cheap one waits for a later event; one with no filter
    # costs nothing to decide.
    assert evaluated.awaited == ["run_any"]
    assert evaluated.steps == MAX_EVENT_STEPS


@pytest.mark.parametrize(
    ("cost", "burst", "taken"),
    [
        (1, 20.0, 0),
        (21, 50.0, 20),
        (21, 21.0, 20),
        (21, 20.0, 19),  # never more than the burst with the first: it could never be admitted
        (21, 1.0, 0),
        (21, None, 0),  # unlimited
    ],
)
def test_the_sender_pays_the_steps_within_its_burst(
    cost: int, burst: float | None, taken: int
) -> None:
    assert charged(cost, burst) == taken


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=200),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=60,
)
SOURCES = ["payload.a == payload.b", "payload.a in payload.b", "payload.a < payload.b",
           "payload.a starts_with payload.b", "not (payload.a != payload.b)"]  # fmt: skip


@given(st.sampled_from(SOURCES), json_values, json_values, st.integers(0, 200))
def test_an_evaluation_never_takes_more_than_its_budget(
    source: str, left: Any, right: Any, steps: int
) -> None:
    budget = Budget(steps)
    try:
        matches(parse(source), {"payload": {"a": left, "b": right}}, budget)
    except OverBudget:
        assert budget.spent == steps
    assert budget.spent <= steps
