"""Cron math: the syntax, Vixie's day rule, month ends and leap days, and DST as cronie does it."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herder.domain.cron import (
    CronError,
    CronExpression,
    fires_between,
    next_fire,
    parse_timezone,
    preview,
)

MINUTE = timedelta(minutes=1)


def at(text: str) -> datetime:
    """An instant written as ISO 8601 with its offset, e.g. ``2026-03-08T03:00-04:00``."""
    return datetime.fromisoformat(text)


def fires(text: str, zone: str, after: str, count: int) -> list[datetime]:
    return preview(CronExpression.parse(text), parse_timezone(zone), at(after), count)


# --- syntax -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "attribute", "values"),
    [
        ("* 0 1 1 0", "minutes", tuple(range(60))),
        ("*/15 0 1 1 0", "minutes", (0, 15, 30, 45)),
        ("7 0 1 1 0", "minutes", (7,)),
        ("10-14 0 1 1 0", "minutes", (10, 11, 12, 13, 14)),
        ("10-30/10 0 1 1 0", "minutes", (10, 20, 30)),
        ("50/5 0 1 1 0", "minutes", (50, 55)),  # a/n: from a to the maximum
        ("1,5-7,*/20 0 1 1 0", "minutes", (0, 1, 5, 6, 7, 20, 40)),
        ("0 */6 1 1 0", "hours", (0, 6, 12, 18)),
        ("0 0 */10 1 0", "days_of_month", (1, 11, 21, 31)),
        ("0 0 1 JAN-MAR 0", "months", (1, 2, 3)),
        ("0 0 1 jan,Jun,DEC 0", "months", (1, 6, 12)),
        ("0 0 1 FEB/4 0", "months", (2, 6, 10)),
        ("0 0 1 1 MON-FRI", "days_of_week", (1, 2, 3, 4, 5)),
        ("0 0 1 1 sun,Sat", "days_of_week", (0, 6)),
        ("0 0 1 1 7", "days_of_week", (0,)),  # 7 is Sunday too
        ("0 0 1 1 0,7", "days_of_week", (0,)),
        ("0 0 1 1 5-7", "days_of_week", (0, 5, 6)),
        ("0 0 1 1 1/2", "days_of_week", (0, 1, 3, 5)),  # 1,3,5,7
        ("0 0 1 1 *", "days_of_week", tuple(range(7))),
    ],
)
def test_each_field_form_parses_to_its_values(
    text: str, attribute: str, values: tuple[int, ...]
) -> None:
    assert getattr(CronExpression.parse(text), attribute) == values


@pytest.mark.parametrize(
    ("macro", "expansion"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_macros_are_their_expansion(macro: str, expansion: str) -> None:
    parsed = CronExpression.parse(macro, allow_seconds=True)
    assert parsed.text == macro
    assert dataclasses.replace(parsed, text=expansion) == CronExpression.parse(expansion)


def test_a_seconds_field_is_accepted_only_when_allowed() -> None:
    expression = CronExpression.parse("*/20 * * * * *", allow_seconds=True)
    moments = preview(expression, ZoneInfo("UTC"), at("2026-01-01T00:00:05Z"), 4)
    assert moments == [at(f"2026-01-01T00:{m}Z") for m in ("00:20", "00:40", "01:00", "01:20")]
    assert CronExpression.parse("0 * * * *").seconds == (0,)
    with pytest.raises(CronError) as raised:
        CronExpression.parse("*/20 * * * * *")
    assert raised.value.field == "expression"


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("", "expression", "expected 5 fields"),
        ("* * * *", "expression", "got 4"),
        ("* * * * * *", "expression", "got 6"),
        ("* * * * * * *", "expression", "got 7"),
        ("@reboot", "expression", "unknown macro '@reboot'"),
        ("@daily 5", "expression", "unknown macro"),
        ("60 * * * *", "minute", "60 is out of range 0-59"),
        ("* 24 * * *", "hour", "24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month", "0 is out of range 1-31"),
        ("* * 32 * *", "day-of-month", "32 is out of range 1-31"),
        ("* * * 13 *", "month", "13 is out of range 1-12"),
        ("* * * 0 *", "month", "0 is out of range 1-12"),
        ("* * * * 8", "day-of-week", "8 is out of range 0-7"),
        ("*/0 * * * *", "minute", "step 0"),
        ("1-10/0 * * * *", "minute", "step 0"),
        ("5-1 * * * *", "minute", "range 5-1 is reversed"),
        ("* * * * SAT-SUN", "day-of-week", "reversed"),
        ("1,,2 * * * *", "minute", "empty"),
        ("1, * * * *", "minute", "empty"),
        ("* * * JANUARY *", "month", "'JANUARY' is not a number or a name"),
        ("* * * MON *", "month", "'MON' is not"),
        ("* * * * JAN", "day-of-week", "'JAN' is not"),
        ("a * * * *", "minute", "'a' is not a number"),
        ("-1 * * * *", "minute", "is not a number"),
        ("1-2-3 * * * *", "minute", "is not a number"),
        ("*/5/2 * * * *", "minute", "step"),
        ("1/ * * * *", "minute", "step"),
        ("*/x * * * *", "minute", "step"),
        ("*-5 * * * *", "minute", "is not a number"),
        ("? * * * *", "minute", "is not a number"),
        ("L * * * *", "minute", "is not a number"),
        ("\u0663 * * * *", "minute", "is not a number"),  # an Arabic-Indic digit
        pytest.param("9" * 5000 + " * * * *", "minute", "out of range", id="a-huge-number"),
        pytest.param("*/" + "9" * 5000 + " * * * *", "minute", "too large", id="a-huge-step"),
    ],
)
def test_invalid_expressions_name_the_field(text: str, field: str, message: str) -> None:
    with pytest.raises(CronError) as raised:
        CronExpression.parse(text)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")
    assert message in str(raised.value)


def test_a_cron_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(CronError("hour", "24 is out of range 0-23")))
    assert (error.field, str(error)) == ("hour", "hour: 24 is out of range 0-23")


def test_an_out_of_range_second_names_the_second_field() -> None:
    with pytest.raises(CronError, match=r"^second: 60 is out of range 0-59$") as raised:
        CronExpression.parse("60 * * * * *", allow_seconds=True)
    assert raised.value.field == "second"


@pytest.mark.parametrize(
    ("text", "fixed_time"),
    [
        ("30 2 * * *", True),
        ("0,30 1-3 * * *", True),
        ("@daily", True),
        ("30 * * * *", False),
        ("*/15 * * * *", False),
        ("0 */2 * * *", False),
        ("*/15 2 * * *", False),  # cronie: a '*' minute makes a job follow real time too
        ("@hourly", False),
    ],
)
def test_which_schedules_follow_the_wall_clock(text: str, fixed_time: bool) -> None:
    assert CronExpression.parse(text).fixed_time is fixed_time


@pytest.mark.parametrize(
    ("text", "fixed_time"), [("0 30 2 * * *", True), ("*/10 30 2 * * *", False)]
)
def test_a_seconds_wildcard_follows_real_time(text: str, fixed_time: bool) -> None:
    assert CronExpression.parse(text, allow_seconds=True).fixed_time is fixed_time


@pytest.mark.parametrize(
    ("local", "matches"),
    [
        (datetime(2026, 7, 6, 9, 0), True),  # a Monday
        (datetime(2026, 7, 10, 9, 0), True),  # a Friday
        (datetime(2026, 7, 5, 9, 0), False),  # a Sunday
        (datetime(2026, 7, 6, 9, 1), False),
        (datetime(2026, 7, 6, 9, 0, 30), False),  # five fields fire at second 0
    ],
)
def test_matches_local_checks_every_field(local: datetime, matches: bool) -> None:
    assert CronExpression.parse("0 9 * * MON-FRI").matches_local(local) is matches


def test_matches_local_refuses_an_aware_time() -> None:
    with pytest.raises(ValueError, match="naive"):
        CronExpression.parse("* * * * *").matches_local(at("2026-07-06T09:00Z"))


# --- time zones ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["UTC", "Europe/London", "Australia/Lord_Howe", "Etc/GMT+5"])
def test_iana_zones_are_accepted(name: str) -> None:
    assert parse_timezone(name).key == name


@pytest.mark.parametrize(
    "name",
    ["Mars/Olympus_Mons", "", "America", "europe/london", "../etc/passwd", "/etc/localtime",
     "localtime", "right/UTC", "UTC+2"],
)  # fmt: skip
def test_unknown_zones_are_a_timezone_error(name: str) -> None:
    with pytest.raises(CronError, match=r"^timezone: unknown time zone") as raised:
        parse_timezone(name)
    assert raised.value.field == "timezone"


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire(CronExpression.parse("* * * * *"), ZoneInfo("UTC"), datetime(2026, 1, 1))


# --- days: Vixie's rule, month ends, leap days, the horizon ------------------------------


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("0 0 1,15 * 1", ["07-01", "07-06", "07-13", "07-15", "07-20", "07-27", "08-01"]),
        ("0 0 1-7 * MON", ["07-01", "07-02", "07-03", "07-04", "07-05", "07-06", "07-07"]),
        ("0 0 */2 * 1", ["07-13", "07-27", "08-03", "08-17", "08-31", "09-07", "09-21"]),
        ("0 0 */1 * MON", ["07-06", "07-13", "07-20", "07-27", "08-03", "08-10", "08-17"]),
        ("0 0 1,15 * *", ["07-01", "07-15", "08-01", "08-15", "09-01", "09-15", "10-01"]),
        ("0 0 1,15 * */1", ["07-01", "07-15", "08-01", "08-15", "09-01", "09-15", "10-01"]),
        ("0 0 * * 1", ["07-06", "07-13", "07-20", "07-27", "08-03", "08-10", "08-17"]),
        ("0 0 31 * *", ["07-31", "08-31", "10-31", "12-31", "01-31", "03-31", "05-31"]),
    ],
)
def test_day_of_month_and_day_of_week_follow_vixie(text: str, days: list[str]) -> None:
    # July 2026 starts on a Wednesday; both fields restricted: either matches, else both must.
    moments = fires(text, "UTC", "2026-06-30T12:00Z", 7)
    assert [moment.strftime("%m-%d") for moment in moments] == days


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        ("2027-03-01T00:00Z", ["2028-02-29T00:00Z", "2032-02-29T00:00Z", "2036-02-29T00:00Z"]),
        ("2028-02-28T23:59Z", ["2028-02-29T00:00Z", "2032-02-29T00:00Z", "2036-02-29T00:00Z"]),
        ("2096-03-01T00:00Z", ["2104-02-29T00:00Z", "2108-02-29T00:00Z", "2112-02-29T00:00Z"]),
    ],
)
def test_leap_day_schedules_wait_for_the_next_leap_year(after: str, expected: list[str]) -> None:
    assert fires("0 0 29 2 *", "UTC", after, 3) == [at(moment) for moment in expected]


def test_a_yearly_schedule_previews_five_years_in_its_zone() -> None:
    expected = [at(f"{year}-01-01T00:00+01:00") for year in range(2027, 2032)]
    assert fires("@yearly", "Europe/Paris", "2026-01-01T00:00+01:00", 5) == expected
    assert fires("@yearly", "UTC", "2026-01-01T00:00Z", 5) == [
        at(f"{year}-01-01T00:00Z") for year in range(2027, 2032)
    ]


@pytest.mark.parametrize("text", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 APR *"])
def test_an_expression_that_never_fires_has_no_next_fire(text: str) -> None:
    expression, zone = CronExpression.parse(text), ZoneInfo("UTC")
    start, end = at("2026-01-01T00:00Z"), at("2036-01-01T00:00Z")
    assert next_fire(expression, zone, start) is None
    assert preview(expression, zone, start, 3) == []
    assert fires_between(expression, zone, start, end, 5) == []


def test_day_of_week_restriction_on_a_leap_day_can_outlast_the_horizon() -> None:
    # Feb 29 falling on a Sunday: 2032, then 2060 -- past the eight-year horizon.
    expression, zone = CronExpression.parse("0 0 29 2 */7"), ZoneInfo("UTC")
    assert next_fire(expression, zone, at("2026-01-01T00:00Z")) == at("2032-02-29T00:00Z")
    assert next_fire(expression, zone, at("2033-01-01T00:00Z")) is None


# --- fires: strictly after, windows, UTC out -------------------------------------------------


def test_next_fire_is_strictly_after_and_in_utc() -> None:
    expression, zone = CronExpression.parse("0 * * * *"), ZoneInfo("Asia/Kolkata")
    moment = next_fire(expression, zone, at("2026-05-01T10:30+05:30"))
    assert moment == at("2026-05-01T11:00+05:30")
    assert moment is not None
    assert moment.tzinfo is UTC
    assert next_fire(expression, zone, moment) == at("2026-05-01T12:00+05:30")
    assert next_fire(expression, zone, moment - timedelta(microseconds=1)) == moment


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(10, ["11:00", "12:00", "13:00"]), (2, ["11:00", "12:00"]), (0, [])],
)
def test_fires_between_is_open_at_the_start_closed_at_the_end(
    limit: int, expected: list[str]
) -> None:
    moments = fires_between(
        CronExpression.parse("@hourly"),
        ZoneInfo("UTC"),
        at("2026-05-01T10:00Z"),
        at("2026-05-01T13:00Z"),
        limit,
    )
    assert moments == [at(f"2026-05-01T{time}Z") for time in expected]


# --- daylight saving time -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "text", "after", "expected"),
    [
        # New York springs forward 2026-03-08 02:00 -> 03:00.
        ("America/New_York", "30 2 * * *", "2026-03-07T12:00-05:00",
         ["2026-03-08T03:00-04:00", "2026-03-09T02:30-04:00"]),
        ("America/New_York", "0,30 2 * * *", "2026-03-07T12:00-05:00",
         ["2026-03-08T03:00-04:00", "2026-03-09T02:00-04:00"]),  # two skipped times, one fire
        ("America/New_York", "30 * * * *", "2026-03-08T00:45-05:00",
         ["2026-03-08T01:30-05:00", "2026-03-08T03:30-04:00"]),
        ("America/New_York", "*/30 2 * * *", "2026-03-07T12:00-05:00",
         ["2026-03-09T02:00-04:00", "2026-03-09T02:30-04:00"]),  # real time: none that day
        # New York falls back 2026-11-01 02:00 -> 01:00.
        ("America/New_York", "30 1 * * *", "2026-10-31T12:00-04:00",
         ["2026-11-01T01:30-04:00", "2026-11-02T01:30-05:00"]),
        ("America/New_York", "30 * * * *", "2026-11-01T00:45-04:00",
         ["2026-11-01T01:30-04:00", "2026-11-01T01:30-05:00", "2026-11-01T02:30-05:00"]),
        ("America/New_York", "*/15 * * * *", "2026-11-01T01:40-04:00",
         ["2026-11-01T01:45-04:00", "2026-11-01T01:00-05:00", "2026-11-01T01:15-05:00"]),
        ("America/New_York", "*/30 1 * * *", "2026-10-31T12:00-04:00",
         ["2026-11-01T01:00-04:00", "2026-11-01T01:30-04:00", "2026-11-01T01:00-05:00",
          "2026-11-01T01:30-05:00", "2026-11-02T01:00-05:00"]),
        # London springs forward 2026-03-29 01:00 -> 02:00 and falls back 2026-10-25 02:00 -> 01:00.
        ("Europe/London", "30 1 * * *", "2026-03-28T12:00Z",
         ["2026-03-29T02:00+01:00", "2026-03-30T01:30+01:00"]),
        ("Europe/London", "30 * * * *", "2026-03-29T00:00Z",
         ["2026-03-29T00:30+00:00", "2026-03-29T02:30+01:00"]),
        ("Europe/London", "30 1 * * *", "2026-10-24T12:00+01:00",
         ["2026-10-25T01:30+01:00", "2026-10-26T01:30+00:00"]),
        ("Europe/London", "30 * * * *", "2026-10-25T01:00+01:00",
         ["2026-10-25T01:30+01:00", "2026-10-25T01:30+00:00", "2026-10-25T02:30+00:00"]),
        # Lord Howe moves by 30 minutes: back 2026-04-05 02:00 -> 01:30,
        # forward 2026-10-04 02:00 -> 02:30.
        ("Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00+11:00",
         ["2026-04-05T01:45+11:00", "2026-04-06T01:45+10:30"]),
        ("Australia/Lord_Howe", "45 * * * *", "2026-04-05T01:00+11:00",
         ["2026-04-05T01:45+11:00", "2026-04-05T01:45+10:30", "2026-04-05T02:45+10:30"]),
        ("Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00+10:30",
         ["2026-10-04T02:30+11:00", "2026-10-05T02:15+11:00"]),
        ("Australia/Lord_Howe", "15 * * * *", "2026-10-04T01:00+10:30",
         ["2026-10-04T01:15+10:30", "2026-10-04T03:15+11:00"]),
        # Santiago springs forward at midnight: 2026-09-06 00:00 -> 01:00.
        ("America/Santiago", "@daily", "2026-09-05T12:00-04:00",
         ["2026-09-06T01:00-03:00", "2026-09-07T00:00-03:00"]),
    ],
)  # fmt: skip
def test_daylight_saving_follows_cronie(
    zone: str, text: str, after: str, expected: list[str]
) -> None:
    assert fires(text, zone, after, len(expected)) == [at(moment) for moment in expected]


# --- properties -----------------------------------------------------------------------------

TRANSITIONS = {  # each zone's 2026 clock changes, in UTC
    "America/New_York": ["2026-03-08T07:00Z", "2026-11-01T06:00Z"],
    "Europe/London": ["2026-03-29T01:00Z", "2026-10-25T01:00Z"],
    "Australia/Lord_Howe": ["2026-04-04T15:00Z", "2026-10-03T15:30Z"],
    "America/Santiago": ["2026-04-05T03:00Z", "2026-09-06T04:00Z"],  # at local midnight
    "UTC": ["2026-02-28T12:00Z"],
}


def field_texts(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        st.integers(1, high).map(lambda step: f"*/{step}"),
        value.map(str),
        st.tuples(value, value).map(lambda pair: f"{min(pair)}-{max(pair)}"),
        st.tuples(value, value, st.integers(1, 4)).map(
            lambda t: f"{min(t[:2])}-{max(t[:2])}/{t[2]}"
        ),
        st.tuples(value, st.integers(1, 9)).map(lambda pair: f"{pair[0]}/{pair[1]}"),
        st.lists(value, min_size=1, max_size=4).map(lambda values: ",".join(map(str, values))),
    )


# Mostly every day, and hours around the changes, so that fires land in the gaps and overlaps.
NEAR_CHANGES = ["0", "1", "2", "23", "1-2", "0-3", "1,23", "1/2"]  # hours the clocks change in
expressions = st.builds(
    lambda *fields: CronExpression.parse(" ".join(fields)),
    st.one_of(st.sampled_from(["0", "15", "30", "45", "0,30", "10-50/20"]), field_texts(0, 59)),
    st.one_of(st.sampled_from(NEAR_CHANGES), field_texts(0, 23)),
    st.one_of(st.just("*"), st.just("*"), field_texts(1, 31)),
    st.sampled_from(["*", "*", "3-11", "*/2", "JAN-JUN"]),
    st.one_of(st.just("*"), st.just("*"), field_texts(0, 7)),
)
zones_and_moments = st.builds(
    lambda case, minutes, seconds: (
        ZoneInfo(case[0]),
        at(case[1]) + timedelta(minutes=minutes, seconds=seconds),
    ),
    st.sampled_from([(zone, when) for zone, changes in TRANSITIONS.items() for when in changes]),
    st.integers(-20 * 60, 60),  # the day-long walk below mostly crosses the change
    st.sampled_from([0, 0, 30]),
)


def offset(moment: datetime) -> timedelta:
    value = moment.utcoffset()
    assert value is not None
    return value


def slow_fires(
    expression: CronExpression, zone: ZoneInfo, after: datetime, until: datetime
) -> list[datetime]:
    """The promise spelled out the slow way: walk real time a minute at a time."""
    found: list[datetime] = []
    moment = after.replace(second=0, microsecond=0) + MINUTE
    while moment <= until:
        wall = moment.astimezone(zone)
        local = wall.replace(tzinfo=None, fold=0)
        previous = (moment - MINUTE).astimezone(zone)
        if expression.matches_local(local):
            first_occurrence = local.replace(tzinfo=zone).astimezone(UTC) == moment
            if first_occurrence or not expression.fixed_time:
                found.append(moment)
        elif expression.fixed_time and offset(wall) > offset(previous):  # a gap just ended
            skipped = previous.replace(tzinfo=None, fold=0) + MINUTE
            while skipped < local and not expression.matches_local(skipped):
                skipped += MINUTE
            if skipped < local:
                found.append(moment)
        moment += MINUTE
    return found


@settings(max_examples=200, deadline=None)
@given(expressions, zones_and_moments)
def test_fires_agree_with_a_minute_by_minute_walk(
    expression: CronExpression, zone_and_moment: tuple[ZoneInfo, datetime]
) -> None:
    zone, after = zone_and_moment
    until = after + timedelta(days=1)
    expected = slow_fires(expression, zone, after, until)
    assert fires_between(expression, zone, after, until, 24 * 60) == expected


@settings(max_examples=150, deadline=None)
@given(expressions, zones_and_moments)
def test_previewed_fires_increase_and_match_in_local_time(
    expression: CronExpression, zone_and_moment: tuple[ZoneInfo, datetime]
) -> None:
    zone, after = zone_and_moment
    moments = preview(expression, zone, after, 20)
    assert all(earlier < later for earlier, later in zip([after, *moments], moments, strict=False))
    for moment in moments:
        assert moment.tzinfo is UTC
        wall = moment.astimezone(zone)
        if not expression.matches_local(wall.replace(tzinfo=None)):
            # only a wall-clock schedule's fire skipped by a spring-forward gap lands elsewhere
            assert expression.fixed_time
            assert offset(wall) > offset((moment - timedelta(seconds=1)).astimezone(zone))
