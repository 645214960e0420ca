"""Cron expressions and their fire times in a time zone: pure math, ``after`` is a parameter.

Syntax. Five fields ``minute hour day-of-month month day-of-week``; with
``allow_seconds=True`` a six-field form with a leading ``second`` field is accepted too.
Each field is a comma list of ``*``, ``n``, ``a-b``, ``*/s``, ``a-b/s`` and ``a/s`` (a to
the field's maximum, step s). Months take JAN-DEC and days SUN-SAT, in any case; day-of-week
is 0-7 with 0 and 7 both Sunday. Macros: ``@hourly``, ``@daily`` = ``@midnight``,
``@weekly``, ``@monthly``, ``@yearly`` = ``@annually``. Anything else is a ``CronError``
naming the field.

Days follow Vixie cron exactly: when day-of-month and day-of-week are both restricted (the
field does not start with ``*``) a day matches if EITHER matches; when either starts with
``*`` (``*/2`` included) both must match. So ``0 0 1,15 * 1`` fires on the 1st, the 15th
and every Monday, and ``0 0 */2 * 1`` only on Mondays with an odd day of the month.

Daylight saving time follows cronie, which sorts jobs in two kinds. A *fixed-time* schedule
(second, minute and hour fields all pinned, e.g. ``30 2 * * *``) follows the wall clock: a
fire whose wall time is skipped when clocks spring forward happens once, at the first
instant after the gap (02:30 on the spring-forward day in New York fires at 03:00 EDT), and
a fire whose wall time happens twice when clocks fall back happens once, the first time. Any
other schedule (one of those fields starts with ``*``, e.g. ``30 * * * *``, ``*/15 * * * *``,
and, as in cronie, ``*/15 2 * * *``) follows real time: it fires in both copies of a repeated
hour and not at all inside a skipped one. Zones that shift by 30 minutes
(Australia/Lord_Howe) obey the same rules.

Time zones are the IANA names of the machine's tz database; ``localtime`` is refused, as a
schedule must not change with the host. Fires are aware UTC datetimes at whole seconds (a
five-field expression fires at second 0). ``next_fire`` looks at most
``SEARCH_HORIZON_YEARS`` ahead and returns None past it (``0 0 30 2 *`` never fires). It
jumps field by field (month, day, hour, minute, second), never minute by minute.
"""

from __future__ import annotations

import calendar
import zoneinfo
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import MAXYEAR, UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

# Long enough for the gap between two leap days across a skipped century leap year (2096 -> 2104).
SEARCH_HORIZON_YEARS = 8
# No zone sets its clock back by more than this; a fall-back this close after ``after`` can
# repeat wall times that are earlier than ``after``'s own.
_LONGEST_FALL_BACK = timedelta(days=1)
_EARLIEST = datetime(2, 1, 1, tzinfo=UTC)  # any zone's wall time stays representable
_ONE_SECOND = timedelta(seconds=1)
_MAX_DIGITS = 4  # longer numbers cannot be in range (and int() refuses thousands of digits)


class CronError(ValueError):
    """An expression or time zone we refuse; ``field`` names the part at fault."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(field, detail)  # both in args, so the error pickles
        self.field = field
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.field}: {self.detail}"


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] = field(default_factory=dict)


_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DAY_OF_MONTH = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, {name: index + 1 for index, name in enumerate(_MONTH_NAMES)})
_DAY_OF_WEEK = _Field("day-of-week", 0, 7, {name: index for index, name in enumerate(_DAY_NAMES)})
_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


@dataclass(frozen=True)
class CronExpression:
    """A parsed expression: the allowed values of each field, sorted."""

    text: str
    seconds: tuple[int, ...]  # (0,) for the five-field form
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...]
    months: tuple[int, ...]
    days_of_week: tuple[int, ...]  # 0-6, Sunday is 0
    day_of_month_restricted: bool  # the field does not start with "*"
    day_of_week_restricted: bool
    fixed_time: bool  # second, minute and hour pinned: follows the wall clock through DST

    @classmethod
    def parse(cls, text: str, *, allow_seconds: bool = False) -> CronExpression:
        """Parse ``text``, or raise ``CronError`` naming the field at fault."""
        stripped = text.strip()
        if stripped.startswith("@"):
            if stripped.lower() not in _MACROS:
                raise CronError("expression", f"unknown macro {stripped!r}")
            fields = _MACROS[stripped.lower()].split()
        else:
            fields = stripped.split()
        if len(fields) == 5:
            fields = ["0", *fields]
        elif len(fields) != 6 or not allow_seconds:
            expected = "5 or 6" if allow_seconds else "5"
            raise CronError(
                "expression",
                f"expected {expected} fields (minute hour day-of-month month day-of-week), "
                f"got {len(fields)}",
            )
        second, minute, hour, day_of_month, month, day_of_week = fields
        week = {day % 7 for day in _parse_field(day_of_week, _DAY_OF_WEEK)}  # 7 is Sunday too
        return cls(
            text=text,
            seconds=_parse_field(second, _SECOND),
            minutes=_parse_field(minute, _MINUTE),
            hours=_parse_field(hour, _HOUR),
            days_of_month=_parse_field(day_of_month, _DAY_OF_MONTH),
            months=_parse_field(month, _MONTH),
            days_of_week=tuple(sorted(week)),
            day_of_month_restricted=not day_of_month.startswith("*"),
            day_of_week_restricted=not day_of_week.startswith("*"),
            fixed_time=not any(part.startswith("*") for part in (second, minute, hour)),
        )

    def matches_local(self, local: datetime) -> bool:
        """Whether naive wall time ``local`` (to the second) is one of the expression's times."""
        if local.tzinfo is not None:
            raise ValueError("matches_local takes a naive wall time")
        return (
            local.second in self.seconds
            and local.minute in self.minutes
            and local.hour in self.hours
            and local.month in self.months
            and self._day_matches(local.day, (local.weekday() + 1) % 7)
        )

    def _day_matches(self, day_of_month: int, day_of_week: int) -> bool:
        in_month = day_of_month in self.days_of_month
        in_week = day_of_week in self.days_of_week
        if self.day_of_month_restricted and self.day_of_week_restricted:
            return in_month or in_week
        return in_month and in_week

    def _first_day(self, year: int, month: int, day: int) -> int | None:
        """The first matching day of the month from ``day`` on."""
        monday_based_first, last = calendar.monthrange(year, month)
        for candidate in range(day, last + 1):
            if self._day_matches(candidate, (monday_based_first + candidate) % 7):
                return candidate
        return None

    def _next_local(self, after: datetime, last_year: int) -> datetime | None:
        """The first matching wall time strictly after ``after``, up to ``last_year``.

        Each field that does not match moves to its next allowed value and resets the
        smaller fields, and a field that runs out carries into the larger one: a leap-day
        schedule costs a few steps per year, not a step per minute.
        """
        start = after.replace(microsecond=0) + _ONE_SECOND
        year, month, day = start.year, start.month, start.day
        hour, minute, second = start.hour, start.minute, start.second
        while year <= last_year:
            next_month = _first_at_least(self.months, month)
            if next_month is None:
                year, month, day, hour, minute, second = year + 1, 1, 1, 0, 0, 0
                continue
            if next_month != month:
                month, day, hour, minute, second = next_month, 1, 0, 0, 0
            next_day = self._first_day(year, month, day)
            if next_day is None:
                month, day, hour, minute, second = month + 1, 1, 0, 0, 0
                continue
            if next_day != day:
                day, hour, minute, second = next_day, 0, 0, 0
            next_hour = _first_at_least(self.hours, hour)
            if next_hour is None:
                day, hour, minute, second = day + 1, 0, 0, 0
                continue
            if next_hour != hour:
                hour, minute, second = next_hour, 0, 0
            next_minute = _first_at_least(self.minutes, minute)
            if next_minute is None:
                hour, minute, second = hour + 1, 0, 0
                continue
            if next_minute != minute:
                minute, second = next_minute, 0
            next_second = _first_at_least(self.seconds, second)
            if next_second is None:
                minute, second = minute + 1, 0
                continue
            return datetime(year, month, day, hour, minute, next_second)
        return None


def _parse_field(text: str, spec: _Field) -> tuple[int, ...]:
    values: set[int] = set()
    for item in text.split(","):
        values.update(_parse_item(item, spec))
    return tuple(sorted(values))


def _parse_item(item: str, spec: _Field) -> range:
    """One list item: ``*``, ``n``, ``a-b``, each with an optional ``/step``."""
    if not item:
        raise CronError(spec.name, "empty list item")
    body, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not (step_text.isascii() and step_text.isdigit()):
            raise CronError(spec.name, f"step {step_text!r} is not a number")
        if len(step_text) > _MAX_DIGITS:
            raise CronError(spec.name, f"step {step_text} is too large")
        step = int(step_text)
        if step == 0:
            raise CronError(spec.name, "step 0 never advances; use 1 or more")
    if body == "*":
        return range(spec.low, spec.high + 1, step)
    first_text, dash, last_text = body.partition("-")
    first = _parse_value(first_text, spec)
    if dash:
        last = _parse_value(last_text, spec)
    elif slash:
        last = spec.high  # "a/s" runs from a to the field's maximum
    else:
        last = first
    if first > last:
        raise CronError(spec.name, f"range {body} is reversed")
    return range(first, last + 1, step)


def _parse_value(text: str, spec: _Field) -> int:
    if text.isascii() and text.isdigit():
        value = int(text) if len(text) <= _MAX_DIGITS else spec.high + 1
    elif text.upper() in spec.names:
        value = spec.names[text.upper()]
    else:
        kind = "a number or a name" if spec.names else "a number"
        raise CronError(spec.name, f"{text!r} is not {kind}")
    if not spec.low <= value <= spec.high:
        raise CronError(spec.name, f"{text} is out of range {spec.low}-{spec.high}")
    return value


def _first_at_least(values: tuple[int, ...], start: int) -> int | None:
    index = bisect_left(values, start)
    return values[index] if index < len(values) else None


@cache
def _zone_names() -> frozenset[str]:
    # "localtime" names whatever the host is set to: a schedule must not change with the host.
    return frozenset(zoneinfo.available_timezones() - {"localtime"})


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA zone called ``name`` (e.g. ``Europe/London``), or ``CronError``."""
    if name not in _zone_names():
        raise CronError("timezone", f"unknown time zone {name!r}; use an IANA name (Europe/Paris)")
    return ZoneInfo(name)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("cron times must be timezone-aware")
    return moment.astimezone(UTC)


def _offset(moment: datetime) -> timedelta:
    offset = moment.utcoffset()
    assert offset is not None  # a ZoneInfo always knows its offset
    return offset


def _gap_end(zone: ZoneInfo, local: datetime, old: timedelta, new: timedelta) -> datetime:
    """The first real instant after the spring-forward gap that swallowed wall time ``local``."""
    low = int((local - new).replace(tzinfo=UTC).timestamp())  # still on the old offset
    high = int((local - old).replace(tzinfo=UTC).timestamp())  # already on the new one
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(datetime.fromtimestamp(middle, zone)) == old:
            low = middle
        else:
            high = middle
    return datetime.fromtimestamp(high, UTC)


def fire_wall_time(expr: CronExpression, zone: ZoneInfo, fire: datetime) -> datetime:
    """The naive wall time a fire stands for: its own local time — but a fixed-time fire the
    spring-forward gap moved to the gap's end stands for the first time in the gap the
    expression names (02:00 on the night 02:00-03:00 is skipped, though it fired at 03:00)."""
    local = fire.astimezone(zone)
    wall = local.replace(tzinfo=None)
    gap = _offset(local) - _offset((fire - timedelta(seconds=1)).astimezone(zone))
    if not expr.fixed_time or gap <= timedelta(0):
        return wall
    candidate = wall - gap
    while candidate < wall:
        if expr.matches_local(candidate):
            return candidate
        candidate += timedelta(seconds=1)
    return wall


def wall_time_instant(zone: ZoneInfo, local: datetime) -> datetime:
    """Naive wall time ``local`` in ``zone`` placed as a fixed-time fire is, in UTC: a repeated
    time's first occurrence; a time the spring-forward gap skips, the first instant after it."""
    first = _offset(local.replace(tzinfo=zone))  # fold=0: the offset before a transition
    second = _offset(local.replace(tzinfo=zone, fold=1))
    if first >= second:
        return (local - first).replace(tzinfo=UTC)
    return _gap_end(zone, local, first, second)


def _instants(
    expr: CronExpression, zone: ZoneInfo, local: datetime
) -> tuple[datetime, tuple[datetime, ...]]:
    """The fires that matching wall time ``local`` gives, and a floor: no later wall time
    maps to an instant before it (wall time and real time only disagree around DST)."""
    first = _offset(local.replace(tzinfo=zone))  # fold=0: the offset before a transition
    second = _offset(local.replace(tzinfo=zone, fold=1))
    earliest = (local - first).replace(tzinfo=UTC)
    if first == second:  # an ordinary wall time
        return earliest, (earliest,)
    if first > second:  # the clock falls back: this wall time happens twice
        if expr.fixed_time:
            return earliest, (earliest,)
        return earliest, (earliest, (local - second).replace(tzinfo=UTC))
    # the clock springs forward: this wall time never happens
    if not expr.fixed_time:
        return (local - second).replace(tzinfo=UTC), ()
    end = _gap_end(zone, local, first, second)
    return end, (end,)


def next_fire(expr: CronExpression, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The first fire strictly after ``after`` (aware), in UTC; None within the horizon."""
    after = max(_utc(after), _EARLIEST)
    if after.year >= MAXYEAR - 1:
        return None
    wall = after.astimezone(zone)
    local = wall.replace(tzinfo=None)
    # A real-time schedule also fires in the repeated copy of wall times that a coming
    # fall-back brings back, some of which are earlier than ``after``'s: start before them.
    fall_back = _offset(wall) - _offset((after + _LONGEST_FALL_BACK).astimezone(zone))
    if fall_back > timedelta(0):
        local -= fall_back
    last_year = min(local.year + SEARCH_HORIZON_YEARS, MAXYEAR - 1)
    best: datetime | None = None
    while (candidate := expr._next_local(local, last_year)) is not None:
        floor, instants = _instants(expr, zone, candidate)
        if best is not None and floor >= best:
            break
        for instant in instants:
            if instant > after and (best is None or instant < best):
                best = instant
        if best == floor:  # nothing later in wall time can come earlier
            break
        local = candidate
    return best


def fires_between(
    expr: CronExpression, zone: ZoneInfo, start: datetime, end: datetime, limit: int
) -> list[datetime]:
    """The fires in ``(start, end]``, at most ``limit`` of them, oldest first, in UTC."""
    fires: list[datetime] = []
    end = _utc(end)
    cursor = start
    while len(fires) < limit:
        moment = next_fire(expr, zone, cursor)
        if moment is None or moment > end:
            break
        fires.append(moment)
        cursor = moment
    return fires


def preview(expr: CronExpression, zone: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fires after ``after`` (fewer if the expression stops firing)."""
    fires: list[datetime] = []
    cursor = after
    while len(fires) < count:
        moment = next_fire(expr, zone, cursor)
        if moment is None:
            break
        fires.append(moment)
        cursor = moment
    return fires
