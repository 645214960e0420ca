"""Leases: which process runs a control loop, for how long, under which fencing number.

Time comes from the database's clock on PostgreSQL (processes on several hosts agree on it);
SQLite serves one host, whose clock it is. A lease is taken only when free or expired, and
each take increments its fencing number.

Schedulers are members of the pool through a lease each (``member:`` and the holder's name),
heartbeated like any other: the live members are those whose lease runs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, Interval, delete, exists, func, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import ReturningInsert

from herder.clock import Clock
from herder.store.database import Database
from herder.store.schema import leases
from herder.store.types import UtcDateTime

MEMBER_PREFIX = "member:"
FORGET_MEMBERS_AFTER_SECONDS = 3600.0  # a member's lease lapsed this long ago is deleted


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

    def acquire(
        self, name: str, holder: str, ttl_seconds: float, *, free_for_seconds: float = 0.0
    ) -> int | None:
        """Take ``name`` if it has been free or expired for ``free_for_seconds`` (or is ours,
        or was handed to us); the fencing number, or ``None`` while it is not to be had."""
        with self._db.write() as connection:
            fencing = connection.execute(
                self._take(name, holder, ttl_seconds, free_for_seconds)
            ).scalar()
        return None if fencing is None else int(fencing)

    def _take(
        self, name: str, holder: str, ttl_seconds: float, free_for_seconds: float
    ) -> ReturningInsert[Any]:
        free_since, expires = self._now(-free_for_seconds), self._now(ttl_seconds)
        dialect_insert = postgresql.insert if self._db.is_postgres else sqlite.insert
        return (
            dialect_insert(leases)
            .values(name=name, holder=holder, fencing=1, expires_at=expires)
            .on_conflict_do_update(
                index_elements=[leases.c.name],
                set_={
                    "holder": holder,
                    "fencing": leases.c.fencing + 1,
                    "expires_at": expires,
                },
                where=(leases.c.expires_at < free_since) | (leases.c.holder == holder),
            )
            .returning(leases.c.fencing)
        )

    def _ours(self, name: str, holder: str, fencing: int) -> tuple[ColumnElement[bool], ...]:
        """Our lease, still running."""
        return (
            leases.c.name == name,
            leases.c.holder == holder,
            leases.c.fencing == fencing,
            leases.c.expires_at >= self._now(),
        )

    def renew(self, name: str, holder: str, fencing: int, ttl_seconds: float) -> bool:
        """Extend our unexpired lease; ``False`` if it lapsed or someone took it."""
        with self._db.write() as connection:
            renewed = connection.execute(
                update(leases)
                .where(*self._ours(name, holder, fencing))
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

    def release_all(self, holder: str) -> None:
        """Give up every lease naming ``holder`` as it stops, those handed to it and not yet
        taken too, so that none waits out its expiry for a process that has gone."""
        with self._db.write() as connection:
            connection.execute(
                update(leases)
                .where(leases.c.holder == holder, leases.c.expires_at >= self._now())
                .values(expires_at=self._now(-1.0))
            )

    def hand_over(self, name: str, holder: str, fencing: int, successor: str) -> bool:
        """Name ``successor`` the holder of our unexpired lease: only it may take the lease
        before it expires (``acquire``), so no third process slips in between. Only a live
        member is named: our view of the members may be a heartbeat old, and a lease handed
        to a scheduler that has left would stay unheld until it expired."""
        member = leases.alias("member")
        successor_is_live = exists().where(
            member.c.name == MEMBER_PREFIX + successor, member.c.expires_at >= self._now()
        )
        with self._db.write() as connection:
            handed = connection.execute(
                update(leases)
                .where(*self._ours(name, holder, fencing), successor_is_live)
                .values(holder=successor)
            ).rowcount
        return bool(handed)

    def join(self, holder: str, ttl_seconds: float) -> None:
        """Be a live member for ``ttl_seconds`` more (a heartbeat); forget long-gone ones."""
        with self._db.write() as connection:
            connection.execute(
                delete(leases).where(
                    leases.c.name.startswith(MEMBER_PREFIX, autoescape=True),
                    leases.c.expires_at < self._now(-FORGET_MEMBERS_AFTER_SECONDS),
                )
            )
            connection.execute(self._take(MEMBER_PREFIX + holder, holder, ttl_seconds, 0.0))

    def members(self) -> list[str]:
        """The live members' names."""
        with self._db.read() as connection:
            rows = connection.execute(
                select(leases.c.holder).where(
                    leases.c.name.startswith(MEMBER_PREFIX, autoescape=True),
                    leases.c.expires_at >= self._now(),
                )
            ).scalars()
            return sorted(rows)

    def leave(self, holder: str) -> None:
        with self._db.write() as connection:
            connection.execute(delete(leases).where(leases.c.name == MEMBER_PREFIX + holder))

    def holder(self, name: str) -> tuple[str, int] | None:
        """Who holds ``name`` now (expired leases count as free)."""
        with self._db.read() as connection:
            row = connection.execute(
                select(leases.c.holder, leases.c.fencing).where(
                    leases.c.name == name, leases.c.expires_at >= self._now()
                )
            ).first()
        return None if row is None else (row.holder, row.fencing)
