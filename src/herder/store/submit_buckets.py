"""The tenants' shared submission buckets: one statement leases tokens from one.

The lease is a single upsert: it creates a tenant's bucket full on first use, or refills the
stored one by the time elapsed (in SQL, from the row as it is when the statement reaches it)
and takes the tokens — all of ``need`` up to ``want``, or none. On PostgreSQL the row lock
orders concurrent leases from every process and host; on SQLite the single writer does.

Time is the leasing process's clock, so tests can move it by hand. Hosts whose clocks
disagree by d seconds admit at most d * rate more in all: the stored time only moves forward,
and a process behind it refills nothing until its clock passes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Float, case, func, literal
from sqlalchemy.dialects import postgresql, sqlite

from herder.domain.submit_rate import ROUNDING, BucketShape, LeaseAsk
from herder.store.database import Database
from herder.store.schema import submit_buckets

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A lease need not wait for its WAL to reach the disk (most of its cost): a crash of the
# server loses at most the last fraction of a second of leases, admitting that much again.
_NO_FLUSH_WAIT = "SET LOCAL synchronous_commit = off"
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class Lease:
    granted: float  # tokens taken for the caller: 0.0 when the bucket lacked ``need``
    left: float  # tokens left in the shared bucket after it


class SubmitBucketRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def lease(self, tenant_id: str, shape: BucketShape, ask: LeaseAsk, now: datetime) -> Lease:
        now_us = (now - _EPOCH) // _MICROSECOND
        bucket = submit_buckets.c
        greatest, least = (
            (func.greatest, func.least) if self._db.is_postgres else (func.max, func.min)
        )
        rate = literal(shape.rate, Float)
        capacity = literal(shape.capacity, Float)
        elapsed_us = greatest(
            literal(0, BigInteger), literal(now_us, BigInteger) - bucket.refilled_at_us
        )
        refilled: ColumnElement[Any] = least(capacity, bucket.tokens + elapsed_us * rate / 1e6)
        granted = case(
            (
                refilled >= literal(ask.need - ROUNDING, Float),
                least(refilled, literal(ask.want, Float)),
            ),
            else_=literal(0.0, Float),
        )
        first_grant = min(shape.capacity, ask.want)
        dialect_insert = postgresql.insert if self._db.is_postgres else sqlite.insert
        statement = (
            dialect_insert(submit_buckets)
            .values(
                tenant_id=tenant_id,
                tokens=shape.capacity - first_grant,
                granted=first_grant,
                refilled_at_us=now_us,
            )
            .on_conflict_do_update(
                index_elements=[bucket.tenant_id],
                set_={
                    "tokens": greatest(literal(0.0, Float), refilled - granted),
                    "granted": granted,
                    "refilled_at_us": greatest(bucket.refilled_at_us, literal(now_us, BigInteger)),
                },
            )
            .returning(bucket.granted, bucket.tokens)
        )
        with self._db.write() as connection:
            if self._db.is_postgres:
                connection.exec_driver_sql(_NO_FLUSH_WAIT)
            row = connection.execute(statement).one()
        return Lease(granted=float(row.granted), left=float(row.tokens))
