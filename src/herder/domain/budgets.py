"""Time budgets: how many CPU-seconds and GPU-seconds a tenant's runs may use per day, week
or month (in the tenant's time zone), and, from what they used, which budgets are spent.

Usage is charged per local day (``Usage`` by tenant, pool, job and day, in the store's
``usage_charges``): an attempt's real use when it ends, and, while it runs, what it asked for
times the time it has run in the period (placement's snapshot and ``/v1/usage`` add that at
read time). A period is whole local days, so a week or month is a range of days.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from enum import StrEnum
from typing import Annotated, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from herder.domain.labels import check_pool_reference

MAX_BUDGET_SECONDS = 1e12  # ~31,700 years of one core: past it a budget is a mistake
MAX_BUDGETS = 32  # per tenant
ALERT_FRACTION = 0.8  # of a budget used: the warning's threshold
DEFAULT_TIME_ZONE = "UTC"


class Period(StrEnum):
    DAY = "day"
    WEEK = "week"  # Monday to Sunday
    MONTH = "month"


Seconds = Annotated[float | None, Field(ge=0, le=MAX_BUDGET_SECONDS, allow_inf_nan=False)]


class Budget(BaseModel):
    """CPU-seconds and/or GPU-seconds a tenant's runs (or those of one pool) may use per
    period. A spent budget holds new runs back; a ``hard`` one also stops running ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    period: Period
    cpu_seconds: Seconds = None
    gpu_seconds: Seconds = None
    pool: Annotated[str | None, AfterValidator(check_pool_reference)] = Field(
        default=None, description="charge and hold only runs in this pool (null: every run)"
    )
    hard: bool = False

    @model_validator(mode="after")
    def _limits_something(self) -> Self:
        if self.cpu_seconds is None and self.gpu_seconds is None:
            raise ValueError("a budget limits cpu_seconds, gpu_seconds or both")
        return self

    @property
    def name(self) -> str:
        """How a waiting reason or an alert names it: ``day budget (pool a100)``."""
        where = f" (pool {self.pool})" if self.pool else ""
        return f"{'hard ' if self.hard else ''}{self.period} budget{where}"

    def covers(self, pool: str | None) -> bool:
        return self.pool is None or self.pool == pool


class TenantBudgets(BaseModel):
    """A tenant's budgets and the time zone its periods begin in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_zone: Annotated[str, Field(max_length=64, description="IANA name, e.g. Europe/Paris")] = (
        DEFAULT_TIME_ZONE
    )
    budgets: Annotated[tuple[Budget, ...], Field(max_length=MAX_BUDGETS)] = ()

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise ValueError(f"unknown time zone {name!r}") from error
        return name

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)


@dataclass(frozen=True, slots=True)
class Usage:
    cpu_seconds: float = 0.0
    gpu_seconds: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_seconds + other.cpu_seconds, self.gpu_seconds + other.gpu_seconds)


def total(usages: Iterable[Usage]) -> Usage:
    return sum(usages, Usage())


@dataclass(frozen=True, slots=True)
class Window:
    """One period: its local days ``[first, after)`` and when it begins and ends."""

    first: date
    after: date
    starts_at: datetime
    ends_at: datetime  # when the budget resets


def local_day(at: datetime, zone: ZoneInfo) -> date:
    return at.astimezone(zone).date()


def window(period: Period, now: datetime, zone: ZoneInfo) -> Window:
    """The period ``now`` falls in, in ``zone``."""
    today = local_day(now, zone)
    match period:
        case Period.DAY:
            first, after = today, today + timedelta(days=1)
        case Period.WEEK:
            first = today - timedelta(days=today.weekday())
            after = first + timedelta(days=7)
        case Period.MONTH:
            first = today.replace(day=1)
            after = (first + timedelta(days=32)).replace(day=1)
    return Window(first, after, _midnight(first, zone, now), _midnight(after, zone, now))


def _midnight(day: date, zone: ZoneInfo, now: datetime) -> datetime:
    return datetime.combine(day, time(), zone).astimezone(now.tzinfo)


def running_use(
    cpu_cores: float, gpus: int, started_at: datetime, now: datetime, since: datetime
) -> Usage:
    """What a running attempt is charged within a period that began at ``since``: what it
    asked for, for as long as it has run in it (its real CPU time is known at its end)."""
    seconds = max(0.0, (now - max(started_at, since)).total_seconds())
    return Usage(cpu_cores * seconds, gpus * seconds)


def ended_use(
    cpu_seconds: float | None, cpu_cores: float, gpus: int, started_at: datetime | None,
    finished_at: datetime,
) -> Usage:  # fmt: skip
    """What an ended attempt is charged: its measured CPU time (its request times its wall
    time when the worker could not say, as for a lost attempt) and its GPUs times wall time."""
    wall = (finished_at - started_at).total_seconds() if started_at else 0.0
    wall = max(0.0, wall)
    cpu = cpu_seconds if cpu_seconds is not None else cpu_cores * wall
    return Usage(cpu, gpus * wall)


@dataclass(frozen=True, slots=True)
class Standing:
    """A budget against what its period has used so far."""

    budget: Budget
    window: Window
    used: Usage

    @property
    def fraction(self) -> float:
        """The largest share of a limit used (1.0 or more: spent)."""
        shares = [
            used / limit if limit else 1.0  # a zero budget allows nothing
            for used, limit in (
                (self.used.cpu_seconds, self.budget.cpu_seconds),
                (self.used.gpu_seconds, self.budget.gpu_seconds),
            )
            if limit is not None
        ]
        return max(shares)

    @property
    def spent(self) -> bool:
        return self.fraction >= 1.0

    def reason(self, zone: ZoneInfo) -> str:
        """Why a run waits on it: which budget, how much is used, when it resets."""
        return (
            f"tenant {self.budget.name} is spent ({self.use()}); it resets at {self.resets(zone)}"
        )

    def use(self) -> str:
        """What its period used of each limit: ``cpu 41 of 40 s``."""
        return ", ".join(
            f"{kind} {used:.0f} of {limit:.0f} s"
            for kind, used, limit in (
                ("cpu", self.used.cpu_seconds, self.budget.cpu_seconds),
                ("gpu", self.used.gpu_seconds, self.budget.gpu_seconds),
            )
            if limit is not None
        )

    def resets(self, zone: ZoneInfo) -> str:
        return self.window.ends_at.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


@dataclass(frozen=True, slots=True)
class Charged:
    """What ended attempts of one job (and pool) were charged on one local day."""

    pool: str | None
    job_id: str
    day: date
    usage: Usage


@dataclass(frozen=True, slots=True)
class Running:
    """An attempt running now, charged what it asked for while it runs."""

    pool: str | None
    job_id: str
    cpu_cores: float
    gpus: int
    started_at: datetime


@dataclass(frozen=True, slots=True)
class TenantUse:
    """A tenant's budgets and what it used: charges since the earliest of their periods
    began, and its running attempts."""

    budgets: TenantBudgets
    charged: tuple[Charged, ...] = ()
    running: tuple[Running, ...] = ()

    def used(
        self, span: Window, now: datetime, covers: Callable[[str | None], bool]
    ) -> dict[tuple[str | None, str], Usage]:
        """Use within ``span`` by (pool, job), of the pools ``covers`` says."""
        by_key: dict[tuple[str | None, str], Usage] = {}
        for charge in self.charged:
            if span.first <= charge.day < span.after and covers(charge.pool):
                key = (charge.pool, charge.job_id)
                by_key[key] = by_key.get(key, Usage()) + charge.usage
        for attempt in self.running:
            if covers(attempt.pool):
                key = (attempt.pool, attempt.job_id)
                use = running_use(
                    attempt.cpu_cores, attempt.gpus, attempt.started_at, now, span.starts_at
                )
                by_key[key] = by_key.get(key, Usage()) + use
        return by_key

    def standings(self, now: datetime) -> list[Standing]:
        """Each budget against its period's use so far."""
        zone = self.budgets.zone
        found = []
        for budget in self.budgets.budgets:
            span = window(budget.period, now, zone)
            used = total(self.used(span, now, budget.covers).values())
            found.append(Standing(budget, span, used))
        return found


def earliest_day(budgets: TenantBudgets, now: datetime, period: Period | None = None) -> date:
    """The first local day that any of the tenant's budget periods, or ``period``, covers."""
    zone = budgets.zone
    periods = [budget.period for budget in budgets.budgets]
    if period is not None:
        periods.append(period)
    return min((window(each, now, zone).first for each in periods), default=local_day(now, zone))
