"""A deadline's instant: elapsed time from a submission; local wall-clock time from a
schedule's fire, so that "02:00 + 5 h" is 07:00 in the schedule's zone on any night."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError

from herder.domain.deadlines import Deadline, Fire, deadline_at, told_fire
from herder.domain.lifecycle.cancel import Cancellable
from herder.domain.lifecycle.missed import Missed, missed_message, missed_runs
from herder.domain.states import RunState


@pytest.mark.parametrize(
    ("cron", "zone", "nominal", "within", "expected"),
    [
        # from a submission (no cron): plain elapsed time, whatever the clocks do
        (None, "", "2026-01-01T00:00Z", 3600, "2026-01-01T01:00Z"),
        (None, "", "2026-03-29T00:00+01:00", 5 * 3600, "2026-03-29T06:00+02:00"),
        (None, "", "2026-10-25T00:00+02:00", 5 * 3600, "2026-10-25T04:00+01:00"),
        # from a schedule's fire: local wall-clock time
        ("0 2 * * *", "UTC", "2026-06-10T02:00Z", 5 * 3600, "2026-06-10T07:00Z"),
        # an ordinary night in Paris: 02:00 + 5 h = 07:00 local
        ("0 2 * * *", "Europe/Paris", "2026-06-10T02:00+02:00", 5 * 3600,
         "2026-06-10T07:00+02:00"),
        # spring forward (29 March, 02:00-03:00 skipped): the 02:00 fire runs at 03:00, and
        # its deadline is still 07:00 local, four real hours after 02:00 would have been
        ("0 2 * * *", "Europe/Paris", "2026-03-29T03:00+02:00", 5 * 3600,
         "2026-03-29T07:00+02:00"),
        # ... a 03:00 fire is no moved one: 08:00
        ("0 3 * * *", "Europe/Paris", "2026-03-29T03:00+02:00", 5 * 3600,
         "2026-03-29T08:00+02:00"),
        # ... 01:00 + 5 h is 06:00 local, 4 real hours later
        ("0 1 * * *", "Europe/Paris", "2026-03-29T01:00+01:00", 5 * 3600,
         "2026-03-29T06:00+02:00"),
        # ... and a result in the gap (02:30 never happens) is the first instant after it
        ("30 0 * * *", "Europe/Paris", "2026-03-29T00:30+01:00", 2 * 3600,
         "2026-03-29T03:00+02:00"),
        # fall back (25 October, 02:00-03:00 twice): 02:00 + 5 h is 07:00 local, 6 real hours
        ("0 2 * * *", "Europe/Paris", "2026-10-25T02:00+02:00", 5 * 3600,
         "2026-10-25T07:00+01:00"),
        # ... and a result in the repeated hour is its first occurrence
        ("30 0 * * *", "Europe/Paris", "2026-10-25T00:30+02:00", 2 * 3600,
         "2026-10-25T02:30+02:00"),
        # across midnight: 23:00 + 8 h is 07:00 the next morning
        ("0 23 * * *", "Europe/Paris", "2026-10-24T23:00+02:00", 8 * 3600,
         "2026-10-25T07:00+01:00"),
        # an hourly cron follows real time through the gap: its 03:00 fire is plain 03:00
        ("0 * * * *", "Europe/Paris", "2026-03-29T03:00+02:00", 3600, "2026-03-29T04:00+02:00"),
    ],
)  # fmt: skip
def test_the_deadline_instant(
    cron: str | None, zone: str, nominal: str, within: int, expected: str
) -> None:
    since = datetime.fromisoformat(nominal)
    found = deadline_at(
        Deadline(within_seconds=within), since if cron is None else Fire(since, cron, zone)
    )
    assert found == datetime.fromisoformat(expected)
    assert found is not None
    assert found.utcoffset() == timedelta(0)  # an instant in UTC, as the store keeps it


def test_no_deadline_no_instant() -> None:
    assert deadline_at(None, datetime.fromisoformat("2026-01-01T00:00Z")) is None


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


# --- the reaper's decision ----------------------------------------------------------------

SPRING = Fire(datetime.fromisoformat("2026-03-29T03:00+02:00"), "0 2 * * *", "Europe/Paris")
NOW = datetime.fromisoformat("2026-06-10T05:01Z")
FIRE = Fire(datetime.fromisoformat("2026-06-10T00:00Z"), "0 2 * * *", "Europe/Paris")


def missed(run_id: str, *, cancel: bool = False, fired: bool = False) -> Missed:
    return Missed(
        id=run_id, tenant_id="t", name="nightly-report",
        deadline_at=datetime.fromisoformat("2026-06-10T05:00Z"), within_seconds=5 * 3600,
        cancel=cancel, fire=FIRE if fired else None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("one", "expected"),
    [
        (missed("r"), "deadline missed: not finished by 2026-06-10 05:00:00 UTC "
                      "(5h after its submission)"),
        (missed("r", fired=True), "deadline missed: not finished by 2026-06-10 07:00 "
                                  "Europe/Paris (5h after its 02:00 fire)"),
        # the spring-forward night: the 02:00 fire ran at 03:00, its deadline is 07:00
        (dataclasses.replace(missed("r", fired=True), fire=SPRING,
                             deadline_at=datetime.fromisoformat("2026-03-29T05:00Z")),
         "deadline missed: not finished by 2026-03-29 07:00 Europe/Paris (5h after its 02:00 "
         "fire)"),
        # a schedule gone, or its zone unknown now: the fire is told in UTC
        (dataclasses.replace(missed("r", fired=True), fire=told_fire(FIRE.nominal, "0 2 * * *",
                                                                     "Mars/Olympus")),
         "deadline missed: not finished by 2026-06-10 05:00 UTC (5h after its 00:00 fire)"),
    ],
)  # fmt: skip
def test_the_timeline_line_names_the_deadline_as_its_owner_set_it(
    one: Missed, expected: str
) -> None:
    assert missed_message(one) == expected


@pytest.mark.parametrize(
    ("state", "cancel", "ended", "requested"),
    [
        (RunState.QUEUED, False, [], []),  # reported only
        (RunState.RUNNING, False, [], []),
        (RunState.QUEUED, True, ["r"], []),  # not running yet: ends at once
        (RunState.SUSPENDED, True, ["r"], []),  # unfinished too
        (RunState.SCHEDULED, True, ["r"], []),  # a delayed run not started yet
        (RunState.PENDING, True, ["r"], []),  # held past its tenant's max_queued
        (RunState.RETRY_WAIT, True, ["r"], []),
        (RunState.RUNNING, True, [], ["r"]),  # its worker stops it, as a user's cancel
    ],
)
def test_a_missed_deadline_is_reported_and_cancels_only_when_asked(
    state: RunState, cancel: bool, ended: list[str], requested: list[str]
) -> None:
    facts = [Cancellable("r", state, 1, cancel_requested=False)]
    changes = missed_runs([missed("r", cancel=cancel)], facts, {"w1"}, NOW)
    assert [event.message[:15] for event in changes.events][:1] == ["deadline missed"]
    assert [move.run_id for move in changes.moves] == ended
    assert all(move.target is RunState.CANCELLED for move in changes.moves)
    assert list(changes.cancel_requests) == requested
