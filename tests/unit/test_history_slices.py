"""Time slices of history: week-long, Monday to Monday UTC, bounded by the ids made in them,
made ahead of the clock, and expired once past every tenant's retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from herder.domain.history import (
    SLICE_LENGTH,
    Slice,
    expired_slices,
    slice_named,
    slice_of,
    slices_between,
    slices_wanted,
)
from herder.domain.ids import id_bound, id_time_ms, new_id

MONDAY = datetime(2026, 11, 23, tzinfo=UTC)


@pytest.mark.parametrize(
    ("moment", "start"),
    [
        (MONDAY, MONDAY),
        (MONDAY + timedelta(days=6, hours=23, minutes=59), MONDAY),
        (MONDAY - timedelta(microseconds=1), MONDAY - SLICE_LENGTH),
        (datetime(2027, 1, 1, tzinfo=UTC), datetime(2026, 12, 28, tzinfo=UTC)),
    ],
)
def test_a_moment_falls_in_the_week_from_its_monday(moment: datetime, start: datetime) -> None:
    assert slice_of(moment) == Slice(start)
    assert slice_named(slice_of(moment).suffix) == Slice(start)


def test_a_slice_holds_exactly_the_ids_made_inside_it() -> None:
    piece = Slice(MONDAY)
    low, high = piece.bounds("run")
    ms = int(MONDAY.timestamp() * 1000)
    assert low <= new_id("run", ms) < high
    assert new_id("run", ms - 1) < low
    assert new_id("run", int(piece.end.timestamp() * 1000)) >= high
    assert id_time_ms(new_id("run", ms)) == ms
    assert id_bound("run", ms) == low


def test_the_current_slice_and_two_ahead_are_wanted() -> None:
    now = MONDAY + timedelta(days=3)
    assert slices_wanted(now) == [Slice(MONDAY + n * SLICE_LENGTH) for n in range(3)]
    assert slices_between(MONDAY, MONDAY) == [Slice(MONDAY)]


@pytest.mark.parametrize(("days_after_end", "expired"), [(29, False), (30, True), (31, True)])
def test_a_slice_expires_when_its_newest_row_is_past_the_longest_retention(
    days_after_end: int, expired: bool
) -> None:
    piece = Slice(MONDAY)
    now = piece.end + timedelta(days=days_after_end)
    assert expired_slices([piece], now, longest_retention_days=30) == ([piece] if expired else [])
