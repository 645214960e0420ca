"""A deadline's instant: elapsed time from a submission; local wall-clock time from a
schedule's fire, so that "02:00 + 5 h" is 07:00 in the schedule's zone on any night."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from herder.domain.deadlines import Deadline, Measured, deadline_at

PARIS = ZoneInfo("Europe/Paris")


@pytest.mark.parametrize(
    ("since", "zone", "within", "expected"),
    [
        # from a submission: plain elapsed time, whatever the clocks do
        ("2026-01-01T00:00Z", None, 3600, "2026-01-01T01:00Z"),
        ("2026-03-29T00:00Z", None, 5 * 3600, "2026-03-29T05:00Z"),
        # from a fire in UTC
        ("2026-06-10T02:00Z", "UTC", 5 * 3600, "2026-06-10T07:00Z"),
        # an ordinary night in Paris: 02:00 + 5 h = 07:00 local
        ("2026-06-10T02:00+02:00", "Europe/Paris", 5 * 3600, "2026-06-10T07:00+02:00"),
        # spring forward (29 March): 01:00 + 5 h is 06:00 local, 4 real hours later
        ("2026-03-29T01:00+01:00", "Europe/Paris", 5 * 3600, "2026-03-29T06:00+02:00"),
        # ... and a result in the gap (02:30 never happens) is the first instant after it
        ("2026-03-29T00:30+01:00", "Europe/Paris", 2 * 3600, "2026-03-29T03:00+02:00"),
        # fall back (25 October): 01:00 + 5 h is 06:00 local, 6 real hours later
        ("2026-10-25T01:00+02:00", "Europe/Paris", 5 * 3600, "2026-10-25T06:00+01:00"),
        # ... and a result in the repeated hour is its first occurrence
        ("2026-10-25T00:30+02:00", "Europe/Paris", 2 * 3600, "2026-10-25T02:30+02:00"),
        # across days: 23:00 + 8 h is 07:00 the next morning
        ("2026-10-24T23:00+02:00", "Europe/Paris", 8 * 3600, "2026-10-25T07:00+01:00"),
    ],
)
def test_the_deadline_instant(since: str, zone: str | None, within: int, expected: str) -> None:
    measured = Measured(datetime.fromisoformat(since), None if zone is None else ZoneInfo(zone))
    found = deadline_at(Deadline(within_seconds=within), measured)
    assert found == datetime.fromisoformat(expected)
    assert found is not None
    assert found.utcoffset() == timedelta(0)  # an instant in UTC, as the store keeps it


def test_no_deadline_no_instant() -> None:
    assert deadline_at(None, Measured(datetime.fromisoformat("2026-01-01T00:00Z"), PARIS)) is None


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"within_seconds": 0}, "within_seconds"),
        ({"within_seconds": 7 * 86400 + 1}, "within_seconds"),
        ({"within_seconds": 60, "cancel": "maybe"}, "cancel"),
        ({"within_seconds": 60, "by": "07:00"}, "by"),
        ({}, "within_seconds"),
    ],
)
def test_a_deadline_out_of_bounds_is_refused_naming_its_field(
    given: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        Deadline.model_validate(given)
    assert refused.value.errors()[0]["loc"] == (field,)
