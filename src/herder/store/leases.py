"""Leases: which process runs a control loop, for how long, under which fencing number.

Time comes from the database's clock on PostgreSQL (processes on several hosts agree on it);
SQLite serves one host, whose clock it is. A lease is taken only when free or expired, and
each take increments its fencing number.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, Interval, func, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite

from herder.clock import Clock
from herder.store.database import Database
from herder.store.schema import leases
from herder.store.types import UtcDateTime


class LeaseRepository:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    def _now(self, plus_seconds: float = 0.0) -> ColumnElement[Any]:
        """The database's ``now()`` (plus an interval) on PostgreSQL; the clock on SQLite."""
        shift = timedelta(seconds=plus_seconds)
        if self._db.is_postgres:
            return func.now() + literal(shift, Interval())
        return literal(self._clock.now() + shift, UtcDateTime())

    def acquire(self, name: str, holder: str, ttl_seconds: float) -> int | None:
        """Take ``name`` if it is free or expired (or already ours); the fencing number, or
        ``None`` while another holder's lease runs."""
        now, expires = self._now(), self._now(ttl_seconds)
        dialect_insert = postgresql.insert if self._db.is_postgres else sqlite.insert
        statement = (
            dialect_insert(leases)
            .values(name=name, holder=holder, fencing=1, expires_at=expires)
            .on_conflict_do_update(
                index_elements=[leases.c.name],
                set_={
                    "holder": holder,
                    "fencing": leases.c.fencing + 1,
                    "expires_at": expires,
                },
                where=(leases.c.expires_at < now) | (leases.c.holder == holder),
            )
            .returning(leases.c.fencing)
        )
        with self._db.write() as connection:
            fencing = connection.execute(statement).scalar()
        return None if fencing is None else int(fencing)

    def renew(self, name: str, holder: str, fencing: int, ttl_seconds: float) -> bool:
        """Extend our unexpired lease; ``False`` if it lapsed or someone took it."""
        with self._db.write() as connection:
            renewed = connection.execute(
                update(leases)
                .where(
                    leases.c.name == name,
                    leases.c.holder == holder,
                    leases.c.fencing == fencing,
                    leases.c.expires_at >= self._now(),
                )
                .values(expires_at=self._now(ttl_seconds))
            ).rowcount
        return bool(renewed)

    def release(self, name: str, holder: str, fencing: int) -> None:
        """Give the lease up at once so a standby need not wait for it to expire."""
        with self._db.write() as connection:
            connection.execute(
                update(leases)
                .where(
                    leases.c.name == name,
                    leases.c.holder == holder,
                    leases.c.fencing == fencing,
                )
                .values(expires_at=self._now(-1.0))
            )

    def holder(self, name: str) -> tuple[str, int] | None:
        """Who holds ``name`` now (expired leases count as free)."""
        with self._db.read() as connection:
            row = connection.execute(
                select(leases.c.holder, leases.c.fencing).where(
                    leases.c.name == name, leases.c.expires_at >= self._now()
                )
            ).first()
        return None if row is None else (row.holder, row.fencing)
