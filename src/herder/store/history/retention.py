"""Keeping history as long as tenants want it, and no longer.

PostgreSQL: the history tables' slices are made ahead of time, and a slice past every
tenant's retention is detached, then dropped — whole partitions, never a bulk ``DELETE``.
A tenant with a shorter retention than the longest sees only the runs inside its own
(``visible_runs_floor``) until its slice goes.
SQLite: each tenant's runs past its retention are deleted with their attempts, events and
log chunks, a bounded batch per transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Connection, Table, delete, func, select, text

from herder.clock import Clock, epoch_ms
from herder.domain.history import (
    DEFAULT_RETENTION_DAYS,
    Slice,
    expired_slices,
    slices_wanted,
    visible_since,
)
from herder.domain.ids import id_bound
from herder.store.cold.export import COLD_LOG_TABLES, COLD_TABLES
from herder.store.cold.tier import ColdTier
from herder.store.database import Database
from herder.store.history.live import read_live_floor
from herder.store.history.partitions import (
    HISTORY_TABLES,
    SLICED_TABLES,
    attached_slices,
    create_slice,
    detach_slice,
    detached_slices,
    drop_detached_slice,
)
from herder.store.limit_use import forget_ended_keys, prune_starts
from herder.store.schema import (
    attempt_logs,
    attempts,
    audit_log,
    log_chunks,
    run_events,
    runs,
    tenants,
)

DDL_LOCK_TIMEOUT = "2s"
DELETE_BATCH = 500  # runs (with their attempts, events and log chunks) per SQLite transaction


def visible_runs_floor(connection: Connection, tenant_id: str, now: datetime) -> str:
    """The first run id inside the tenant's retention: it sees the runs at or above it."""
    days = connection.execute(
        select(tenants.c.retention_days).where(tenants.c.id == tenant_id)
    ).scalar()
    return id_bound("run", epoch_ms(visible_since(now, days or DEFAULT_RETENTION_DAYS)))


class HistoryRetention:
    def __init__(self, database: Database, clock: Clock, cold: ColdTier | None = None) -> None:
        self._db = database
        self._clock = clock
        self._cold = cold

    def prepare_slices(self) -> list[str]:
        """Make the slices the coming weeks need, in every history table (PostgreSQL)."""
        now, created = self._clock.now(), []
        for table in SLICED_TABLES:
            with self._ddl() as connection:
                missing = sorted(set(slices_wanted(now)) - attached_slices(connection, table))
                for piece in missing:
                    create_slice(connection, table, piece)
                    created.append(table.partition(piece))
        return created

    def detach_expired(self) -> list[str]:
        """Take the slices past every tenant's retention (with a cold tier: runs, attempts
        and events past the hot window) out of their tables (PostgreSQL); they stay as plain
        tables until ``drop_detached``."""
        now, detached = self._clock.now(), []
        for table in SLICED_TABLES:
            with self._ddl() as connection:
                days = longest = _longest_retention_days(connection)
                if self._cold is not None:
                    days = self._cold.keep_days(table.name, longest)
                expired = expired_slices(attached_slices(connection, table), now, days)
                if days < longest:  # going cold, not away: never a slice with a live run
                    floor = read_live_floor(connection, now)
                    expired = [piece for piece in expired if piece.bounds("run")[1] <= floor]
                for piece in expired:
                    detach_slice(connection, table, piece)
                    detached.append(table.partition(piece))
        return detached

    def export_detached(self) -> list[str]:
        """Export to the cold tier each slice whose runs, attempts and events are all
        detached and that no manifest holds yet; one slice a transaction."""
        if self._cold is None:
            return []
        exported = []
        ready, _ = self._awaiting_export()
        for piece in sorted(ready):
            with self._db.read() as connection:
                exported.append(self._cold.export(connection, piece).slice)
        return exported

    def drop_detached(self) -> list[str]:
        """Drop the detached slices, but none the cold tier still waits to export (nor the
        logs of any run it waits for)."""
        (_, awaited), dropped = self._awaiting_export(), []
        for table in SLICED_TABLES:
            with self._ddl() as connection:
                for piece in sorted(detached_slices(connection, table)):
                    if table.name in COLD_TABLES and piece in awaited:
                        continue
                    # an attempt's log is in its own week's slice, its run's at or before it
                    if table.name in COLD_LOG_TABLES and any(w <= piece for w in awaited):
                        continue
                    drop_detached_slice(connection, table, piece)
                    dropped.append(table.partition(piece))
        return dropped

    def remove_expired_cold(self) -> list[str]:
        """The cold tier's day files past their tenant's retention."""
        if self._cold is None:
            return []
        with self._db.read() as connection:
            return self._cold.remove_expired(connection, self._clock.now())

    def _awaiting_export(self) -> tuple[set[Slice], set[Slice]]:
        """Detached slices of runs, attempts or events inside some tenant's retention with
        no manifest yet (one past every retention is dropped unexported): those of all
        three, ready to export, and those of any, which must not be dropped yet."""
        if self._cold is None:
            return set(), set()
        with self._db.read() as connection:
            longest = _longest_retention_days(connection)
            detached = [
                detached_slices(connection, t) for t in HISTORY_TABLES if t.name in COLD_TABLES
            ]
        anywhere = set[Slice]().union(*detached)
        kept = anywhere - set(expired_slices(anywhere, self._clock.now(), longest))
        waiting = {piece for piece in kept if not self._cold.exported(piece)}
        return waiting.intersection(*detached), waiting

    @contextmanager
    def _ddl(self) -> Iterator[Connection]:
        """A transaction that gives up on a table's lock rather than queue the hot path
        behind it (a detach locks the table briefly); the next pass tries again."""
        with self._db.write() as connection:
            connection.execute(text(f"SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"))
            yield connection

    def delete_expired_audit(self, batch: int = DELETE_BATCH) -> int:
        """Delete up to ``batch`` audit entries past their tenant's retention (both stores:
        the audit log grows with changes, not runs, so it is not sliced); how many went."""
        with self._db.write() as connection:
            expired = _expired_ids(connection, audit_log, "aud", self._clock.now(), batch)
            if expired:
                connection.execute(delete(audit_log).where(audit_log.c.id.in_(expired)))
        return len(expired)

    def delete_old_limit_starts(self) -> int:
        """Forget a batch of rate-limited keys' starts past the longest period a rate may
        have, and of ended runs' limit keys (``limit_use``); how many went, the larger."""
        with self._db.write() as connection:
            return max(prune_starts(connection, self._clock.now()), forget_ended_keys(connection))

    def delete_expired_batch(self, batch: int = DELETE_BATCH) -> int:
        """Delete up to ``batch`` runs past their tenant's retention, with everything of
        theirs (SQLite); how many went."""
        with self._db.write() as connection:
            expired = _expired_ids(connection, runs, "run", self._clock.now(), batch)
            _delete_runs(connection, expired)
        return len(expired)


def _expired_ids(
    connection: Connection, table: Table, prefix: str, now: datetime, batch: int
) -> list[str]:
    """Up to ``batch`` ids of ``table``'s rows past their tenant's retention, oldest first, a
    tenant at a time through its ``(tenant_id, id)`` index (ids sort by the time they were
    made)."""
    expired: list[str] = []
    for tenant_id, days in connection.execute(select(tenants.c.id, tenants.c.retention_days)):
        floor = id_bound(prefix, epoch_ms(visible_since(now, days)))
        expired += connection.execute(
            select(table.c.id)
            .where(table.c.tenant_id == tenant_id, table.c.id < floor)
            .order_by(table.c.tenant_id, table.c.id)
            .limit(batch - len(expired))
        ).scalars()
        if len(expired) >= batch:
            break
    return expired


def _delete_runs(connection: Connection, run_ids: list[str]) -> None:
    their_attempts = select(attempts.c.id).where(attempts.c.run_id.in_(run_ids))
    connection.execute(delete(log_chunks).where(log_chunks.c.attempt_id.in_(their_attempts)))
    connection.execute(delete(attempt_logs).where(attempt_logs.c.attempt_id.in_(their_attempts)))
    connection.execute(delete(run_events).where(run_events.c.run_id.in_(run_ids)))
    connection.execute(delete(attempts).where(attempts.c.run_id.in_(run_ids)))
    connection.execute(delete(runs).where(runs.c.id.in_(run_ids)))


def _longest_retention_days(connection: Connection) -> int:
    longest = connection.execute(select(func.max(tenants.c.retention_days))).scalar()
    return int(longest or DEFAULT_RETENTION_DAYS)
