"""How long history is kept and how it is cut into time slices (docs/design.md §2 History).

Runs, attempts, run events and log chunks are cut into week-long slices by the time part of
a sortable id (a run's id for runs and attempts, so a run's attempts share its slice; an
attempt's id for log chunks, made at or after its run). A slice is kept while any tenant's
retention still reaches it; a tenant with a shorter retention sees only what is inside its
own. Pure: ``now`` is always a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from herder.domain.ids import id_bound

DEFAULT_RETENTION_DAYS = 1825  # five years
MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 1825
DEFAULT_HOT_DAYS = 90  # PostgreSQL keeps this many days in its tables, the rest in the cold tier
SLICE_LENGTH = timedelta(days=7)
SLICES_AHEAD = 2  # made this many slices before the clock reaches them
_FIRST_MONDAY = datetime(1970, 1, 5, tzinfo=UTC)  # slices start on Mondays, 00:00 UTC


@dataclass(frozen=True, order=True)
class Slice:
    start: datetime

    @property
    def end(self) -> datetime:
        return self.start + SLICE_LENGTH

    @property
    def suffix(self) -> str:
        """The partition's name after the table's, as pg_partman spells a daily one."""
        return self.start.strftime("p%Y%m%d")

    def bounds(self, prefix: str) -> tuple[str, str]:
        """The ids (with ``prefix``) made inside the slice: from the first, up to the second."""
        return id_bound(prefix, _ms(self.start)), id_bound(prefix, _ms(self.end))


def slice_of(moment: datetime) -> Slice:
    weeks = (moment - _FIRST_MONDAY) // SLICE_LENGTH
    return Slice(_FIRST_MONDAY + weeks * SLICE_LENGTH)


def slice_named(suffix: str) -> Slice:
    return Slice(datetime.strptime(suffix, "p%Y%m%d").replace(tzinfo=UTC))


def slices_between(first: datetime, last: datetime) -> list[Slice]:
    """Every slice from the one holding ``first`` to the one holding ``last``."""
    found, current = [], slice_of(first)
    while current.start <= last:
        found.append(current)
        current = Slice(current.end)
    return found


def slices_wanted(now: datetime) -> list[Slice]:
    """The current slice and the ones ahead that must exist before their time comes."""
    return slices_between(now, now + SLICES_AHEAD * SLICE_LENGTH)


def expired_slices(
    existing: Iterable[Slice], now: datetime, longest_retention_days: int
) -> list[Slice]:
    """The slices whose newest row is older than every tenant's retention."""
    cutoff = now - timedelta(days=longest_retention_days)
    return sorted(piece for piece in existing if piece.end <= cutoff)


def visible_since(now: datetime, retention_days: int) -> datetime:
    """A tenant sees the runs made since this moment; older ones are past its retention."""
    return now - timedelta(days=retention_days)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
