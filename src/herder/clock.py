"""Time as a port: loops and the store hold a ``Clock`` so tests can move time by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
